/* The expected-throughput policy in isolation: hand-made per-tree outlooks
 * (expected accept lengths and step times) with a known best tree, its
 * errors, its name, and its place in a bank file. */
#include "check.h"
#include "bank/tree.h"
#include "policy/policy_internal.h"
#include "policy_support.h"

#include <math.h>

static int32_t pick_outlook(entmtp_policy *p, const float *accept, const double *seconds, int32_t n) {
    entmtp_features f = feat_s(0.5f);
    emt_tree_outlook o = { accept, seconds };
    int32_t k = -1;
    if (emt_policy_select_outlook(p, &f, &o, n, &k) != ENTMTP_OK) return -100;
    return k;
}

int main(void) {
    entmtp_policy_kind kind;
    CHECK_OK(entmtp_policy_kind_from_name("throughput", &kind));
    CHECK_EQ_INT(kind, EMT_POLICY_THROUGHPUT);
    CHECK(!strcmp(entmtp_policy_kind_name(kind), "throughput"));

    entmtp_policy_config c = entmtp_policy_default_config(kind);
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(entmtp_policy_get_kind(p), EMT_POLICY_THROUGHPUT);
    CHECK(emt_policy_needs_outlook(p));
    CHECK_OK(entmtp_policy_validate(p, 3));

    /* tokens per second 1.0, 1.333, 1.0: the middle tree */
    const float acc[3] = { 1.0f, 2.0f, 3.0f };
    const double sec[3] = { 1.0, 1.5, 3.0 };
    CHECK_EQ_INT(pick_outlook(p, acc, sec, 3), 1);
    /* the big tree gets cheap (a faster device): it wins */
    const double sec_gpu[3] = { 1.0, 1.05, 1.1 };
    CHECK_EQ_INT(pick_outlook(p, acc, sec_gpu, 3), 2);
    /* the heads lose confidence: only the root is expected, the cheapest tree wins */
    const float acc_low[3] = { 1.0f, 1.02f, 1.03f };
    CHECK_EQ_INT(pick_outlook(p, acc_low, sec, 3), 0);
    /* ties go to the lower index */
    const float acc_tie[2] = { 1.0f, 2.0f };
    const double sec_tie[2] = { 1.0, 2.0 };
    CHECK_EQ_INT(pick_outlook(p, acc_tie, sec_tie, 2), 0);
    /* one tree only */
    CHECK_EQ_INT(pick_outlook(p, acc, sec, 1), 0);

    /* without an outlook (called outside a session) it cannot choose */
    entmtp_features f = feat_s(0.5f);
    int32_t k = -1;
    CHECK_ERR(entmtp_policy_select(p, &f, 3, &k), ENTMTP_ERR_STATE, "outlook");
    /* bad outlooks are errors naming the tree */
    emt_tree_outlook o = { acc, sec };
    const double sec_bad[3] = { 1.0, 0.0, 1.0 };
    o.expected_seconds = sec_bad;
    CHECK_ERR(emt_policy_select_outlook(p, &f, &o, 3, &k), ENTMTP_ERR_INVALID_ARGUMENT, "tree 1");
    const float acc_nan[3] = { 1.0f, 1.0f, NAN };
    o.expected_accept = acc_nan;
    o.expected_seconds = sec;
    CHECK_ERR(emt_policy_select_outlook(p, &f, &o, 3, &k), ENTMTP_ERR_INVALID_ARGUMENT, "tree 2");
    const float acc_low_bad[3] = { 0.5f, 1.0f, 1.0f };
    o.expected_accept = acc_low_bad;
    CHECK_ERR(emt_policy_select_outlook(p, &f, &o, 3, &k), ENTMTP_ERR_INVALID_ARGUMENT, "tree 0");
    /* observe and reset keep no state that changes the choice */
    entmtp_outcome out = { sizeof out, 2, 8, 3, 2, 0.01 };
    CHECK_OK(entmtp_policy_observe(p, &out));
    entmtp_policy_reset(p);
    CHECK_EQ_INT(pick_outlook(p, acc, sec, 3), 1);
    entmtp_policy_free(p);

    /* a bank stores it (no settings) and may name it the default */
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_tree_json(b, "a", "[[0]]", NULL));
    CHECK_OK(entmtp_bank_add_tree_json(b, "b", "[[0],[0,0]]", NULL));
    CHECK_OK(entmtp_bank_set_policy_config(b, &c));
    entmtp_policy_config back = { sizeof back };
    CHECK_OK(entmtp_bank_policy_config(b, kind, &back));
    CHECK_EQ_INT(back.kind, EMT_POLICY_THROUGHPUT);
    const char *path = ENTMTP_TEST_TMP_DIR "/throughput.bank.json";
    CHECK_OK(entmtp_bank_save(b, path));
    entmtp_bank_free(b);
    b = NULL;
    CHECK_OK(entmtp_bank_load(path, NULL, &b));
    CHECK_OK(entmtp_bank_policy_config(b, kind, &back));
    entmtp_policy_kind default_kind = ENTMTP_POLICY_STATIC;
    CHECK_OK(entmtp_bank_default_policy(b, &default_kind));
    CHECK_EQ_INT(default_kind, EMT_POLICY_THROUGHPUT);
    entmtp_bank_free(b);
    return emt_test_finish("test_policy_throughput");
}
