/* Helpers for the policy tests: features with a given path value. */
#ifndef EMT_POLICY_SUPPORT_H
#define EMT_POLICY_SUPPORT_H

#include "entmtp.h"

#include <string.h>

static inline entmtp_features feat_s(float s) {
    entmtp_features f;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.s = s;
    f.p0 = s;
    return f;
}

static inline int32_t pick(entmtp_policy *p, float s, int32_t n_trees) {
    entmtp_features f = feat_s(s);
    int32_t k = -1;
    if (entmtp_policy_select(p, &f, n_trees, &k) != ENTMTP_OK) return -100;
    return k;
}

#endif
