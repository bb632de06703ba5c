#include "test_policies.h"

#include "check.h"

static entmtp_status rotate_select(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    int32_t *counter = user;
    (void)f;
    *out = (*counter)++ % n_trees;
    return ENTMTP_OK;
}

entmtp_policy_config emt_test_policy_config(int index, int32_t n_trees, int32_t *counter) {
    static const entmtp_policy_kind kinds[] = { ENTMTP_POLICY_LADDER, ENTMTP_POLICY_HYSTERESIS, ENTMTP_POLICY_UCB,
                                                ENTMTP_POLICY_CUSTOM };
    static const char *const by_name[] = { "throughput", "dynamic" }; /* not in the public enum yet */
    entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
    if (index < 4)
        kind = kinds[index];
    else
        CHECK_OK(entmtp_policy_kind_from_name(by_name[index - 4], &kind));
    entmtp_policy_config pc = entmtp_policy_default_config(kind);
    if (kind == ENTMTP_POLICY_LADDER) {
        static const float thresholds[2] = { 0.05f, 0.3f };
        pc.n_thresholds = 2;
        pc.thresholds = thresholds;
    } else if (kind == ENTMTP_POLICY_HYSTERESIS) {
        pc.tau_on = 0.2f;
        pc.tau_off = 0.1f;
        pc.conservative_tree = 0;
        pc.aggressive_tree = n_trees - 1;
    } else if (kind == ENTMTP_POLICY_CUSTOM) {
        pc.select = rotate_select;
        pc.user_data = counter;
    }
    return pc;
}
