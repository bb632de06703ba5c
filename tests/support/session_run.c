#include "session_run.h"

#include "check.h"

int32_t emt_test_prompt_bits = 16;
int32_t emt_test_step_bits = 16;
int32_t emt_test_kv_type = ENTMTP_KV_DEFAULT;

entmtp_status emt_test_generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar,
                                const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t kv_capacity,
                                int32_t *out, int32_t *n_out, double *mean_accept) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = kv_capacity;
    sp.n_stop_tokens = 0; /* never stop early: compare full runs */
    sp.prompt_activation_bits = emt_test_prompt_bits;
    sp.step_activation_bits = emt_test_step_bits;
    sp.kv_type = emt_test_kv_type;
    entmtp_session *s = NULL;
    *n_out = 0;
    *mean_accept = 0;
    entmtp_status st = entmtp_session_create(m, h, b, &sp, &s);
    if (st) return st;
    if (pol) CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, n_prompt));
    CHECK_OK(entmtp_generate(s, n_gen, ar, NULL, NULL));
    const int32_t *toks;
    int32_t n = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, n_prompt + n_gen);
    if (n == n_prompt + n_gen) {
        memcpy(out, toks, (size_t)n * sizeof *toks);
        *n_out = n;
    }
    entmtp_session_stats stats = { sizeof stats };
    CHECK_OK(entmtp_session_get_stats(s, &stats));
    *mean_accept = stats.mean_accept_length;
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
    return ENTMTP_OK;
}

int32_t emt_test_bank_of_builtins(int32_t max_depth, entmtp_bank **bank) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = max_depth;
    *bank = NULL;
    CHECK_OK(entmtp_bank_create(&bp, bank));
    if (!*bank) return 0;
    for (int32_t i = 0; entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(*bank, entmtp_builtin_tree_name(i), NULL);
        if (st == ENTMTP_ERR_INVALID_TREE) continue; /* deeper than max_depth */
        CHECK_OK(st);
    }
    int32_t n_trees = entmtp_bank_size(*bank);
    CHECK(n_trees >= 5);
    return n_trees;
}
