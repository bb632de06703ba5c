#include "test_policies.h"

static entmtp_status rotate_select(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    int32_t *counter = user;
    (void)f;
    *out = (*counter)++ % n_trees;
    return ENTMTP_OK;
}

entmtp_policy_config emt_test_policy_config(int index, int32_t n_trees, int32_t *counter) {
    static const entmtp_policy_kind kinds[EMT_TEST_N_POLICIES] = { ENTMTP_POLICY_LADDER, ENTMTP_POLICY_HYSTERESIS,
                                                                   ENTMTP_POLICY_UCB, ENTMTP_POLICY_CUSTOM };
    entmtp_policy_config pc = entmtp_policy_default_config(kinds[index]);
    if (pc.kind == ENTMTP_POLICY_LADDER) {
        pc.n_thresholds = 2;
        pc.thresholds[0] = 0.05f;
        pc.thresholds[1] = 0.3f;
    } else if (pc.kind == ENTMTP_POLICY_HYSTERESIS) {
        pc.tau_on = 0.2f;
        pc.tau_off = 0.1f;
        pc.conservative_tree = 0;
        pc.aggressive_tree = n_trees - 1;
    } else if (pc.kind == ENTMTP_POLICY_CUSTOM) {
        pc.select = rotate_select;
        pc.user_data = counter;
    }
    return pc;
}
