/* static: always the configured tree, whatever the features. */
#include "check.h"
#include "policy_support.h"

int main(void) {
    entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    c.static_tree = 2;
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(entmtp_policy_get_kind(p), ENTMTP_POLICY_STATIC);
    for (float s = 0; s <= 1.0f; s += 0.125f) CHECK_EQ_INT(pick(p, s, 3), 2);
    CHECK_OK(entmtp_policy_validate(p, 3));
    CHECK_ERR(entmtp_policy_validate(p, 2), ENTMTP_ERR_OUT_OF_RANGE, "static_tree = 2");
    entmtp_features f = feat_s(0.5f);
    int32_t k;
    CHECK_ERR(entmtp_policy_select(p, &f, 2, &k), ENTMTP_ERR_OUT_OF_RANGE, "tree 2");
    entmtp_outcome o = { sizeof o, 2, 8, 3, 2, 0.01 };
    CHECK_OK(entmtp_policy_observe(p, &o));
    entmtp_policy_reset(p);
    CHECK_EQ_INT(pick(p, 0.9f, 3), 2);
    entmtp_policy_free(p);
    c.static_tree = -1;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "static_tree = -1");
    return emt_test_finish("test_policy_static");
}
