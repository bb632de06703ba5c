/* Policy settings as the library keeps them: the public config, whose arrays
 * (thresholds, ladder_trees) point into storage held beside it, so a policy
 * or a bank never keeps a pointer into the caller's memory. */
#ifndef EMT_POLICY_H
#define EMT_POLICY_H

#include "common/common.h"

typedef struct emt_policy_settings {
    entmtp_policy_config cfg; /* cfg.thresholds and cfg.ladder_trees point below */
    float thresholds[EMT_MAX_LADDER - 1];
    int32_t ladder_trees[EMT_MAX_LADDER];
} emt_policy_settings;

/* Defaults for `kind` (ladder: bin b -> tree b), arrays pointing into `out`. */
void emt_policy_settings_default(emt_policy_settings *out, entmtp_policy_kind kind);
/* Take a caller's config: versioned copy over the defaults of its kind, the
 * arrays copied in (n_thresholds checked against the limit), then validated
 * (ENTMTP_ERR_INVALID_CONFIG naming the field). */
entmtp_status emt_policy_settings_from(emt_policy_settings *out, const entmtp_policy_config *config);
/* Copy settings, re-pointing the arrays at `dst`'s own storage. */
void emt_policy_settings_copy(emt_policy_settings *dst, const emt_policy_settings *src);

#endif
