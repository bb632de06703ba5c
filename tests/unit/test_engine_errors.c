/* Error paths of the engine: every bad input is a status with a message that
 * names the culprit, and the session stays usable afterwards. */
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>

static entmtp_status custom_bad_index(void *user, const entmtp_features *f, int32_t n_trees,
                                      int32_t *out) {
    (void)user;
    (void)f;
    *out = n_trees + 3;
    return ENTMTP_OK;
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.seed = 3;
    char gguf[512], heads2[512], heads_wrong[512], heads_ok[512];
    snprintf(gguf, sizeof gguf, "%s/errors_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads2, sizeof heads2, "%s/errors_heads2.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(heads_ok, sizeof heads_ok, "%s/errors_heads5.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(heads_wrong, sizeof heads_wrong, "%s/errors_heads_wrong.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(heads2, c.hidden, c.vocab, 2, 1, 0, 5));
    CHECK_OK(emt_tiny_write_medusa_heads(heads_ok, c.hidden, c.vocab, 5, 1, 0, 5));
    CHECK_OK(emt_tiny_write_medusa_heads(heads_wrong, c.hidden + 8, c.vocab, 2, 1, 0, 5));

    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_ERR(entmtp_model_load("/nonexistent/model.gguf", &mp, &m), ENTMTP_ERR_IO, "/nonexistent/model.gguf");
    CHECK(m == NULL);
    CHECK_ERR(entmtp_model_load(NULL, &mp, &m), ENTMTP_ERR_INVALID_ARGUMENT, "path");
    entmtp_model_params bad_mp = mp;
    bad_mp.struct_size = 0;
    CHECK_ERR(entmtp_model_load(gguf, &bad_mp, &m), ENTMTP_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (!m) return emt_test_finish("test_engine_errors");

    /* heads whose hidden size differs from the model's */
    entmtp_heads *h = NULL;
    CHECK_ERR(entmtp_heads_load(m, heads_wrong, &h), ENTMTP_ERR_MISMATCH, "0.0.linear.weight");
    CHECK(h == NULL);

    /* a bank deeper than the heads */
    CHECK_OK(entmtp_heads_load(m, heads2, &h));
    entmtp_bank *bank = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, "chain_2", NULL));
    CHECK_OK(entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL));
    entmtp_session *s = NULL;
    CHECK_ERR(entmtp_session_create(m, h, bank, NULL, &s), ENTMTP_ERR_MISMATCH, "mc_sim_7b_63");
    CHECK(s == NULL);
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    h = NULL;

    CHECK_OK(entmtp_heads_load(m, heads_ok, &h));
    CHECK_OK(entmtp_bank_create(NULL, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, "chain_2", NULL));
    CHECK_OK(entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL));

    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = c.ctx + 1;
    CHECK_ERR(entmtp_session_create(m, h, bank, &sp, &s), ENTMTP_ERR_INVALID_CONFIG, "kv_capacity");
    sp = entmtp_session_default_params();
    sp.temperature = -1;
    CHECK_ERR(entmtp_session_create(m, h, bank, &sp, &s), ENTMTP_ERR_INVALID_CONFIG, "temperature");
    sp = entmtp_session_default_params();
    sp.reproducible = 2;
    CHECK_ERR(entmtp_session_create(m, h, bank, &sp, &s), ENTMTP_ERR_INVALID_CONFIG, "reproducible = 2");
    sp = entmtp_session_default_params();
    sp.kv_capacity = 24;
    sp.n_stop_tokens = 0;
    CHECK_OK(entmtp_session_create(m, h, bank, &sp, &s));
    if (!s) goto done;

    entmtp_step_result r = { sizeof r };
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_STATE, "prefill");
    const int32_t bad[] = { 1, 2, 999 };
    CHECK_ERR(entmtp_session_prefill(s, bad, 3), ENTMTP_ERR_OUT_OF_RANGE, "999");
    const int32_t neg[] = { -1 };
    CHECK_ERR(entmtp_session_prefill(s, neg, 1), ENTMTP_ERR_OUT_OF_RANGE, "-1");
    CHECK_ERR(entmtp_session_prefill(s, bad, 0), ENTMTP_ERR_INVALID_ARGUMENT, "empty");
    const int32_t *toks;
    int32_t n = -1;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, 0); /* failed prefills left nothing behind */

    /* a policy returning an index outside the bank */
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    pc.select = custom_bad_index;
    entmtp_policy *pol = NULL;
    CHECK_OK(entmtp_policy_create(&pc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    const int32_t prompt[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    CHECK_OK(entmtp_session_prefill(s, prompt, 10));
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_OUT_OF_RANGE, "outside");
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, 10);
    CHECK_OK(entmtp_policy_set(s, NULL));
    entmtp_policy_free(pol);

    /* a static policy on a tree index the bank lacks is refused at attach */
    entmtp_policy_config sc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    sc.static_tree = 7;
    CHECK_OK(entmtp_policy_create(&sc, &pol));
    CHECK(entmtp_policy_set(s, pol) != ENTMTP_OK);
    entmtp_policy_free(pol);

    /* fill the KV cache: it ends with KV_FULL, the tokens that fit are
     * kept and reported, and the session remains readable */
    int32_t total = 10, steps = 0;
    entmtp_status st = ENTMTP_OK;
    while (st == ENTMTP_OK && steps < 100) {
        r.struct_size = sizeof r;
        st = entmtp_step(s, 0, &r);
        total += r.n_tokens;
        steps++;
    }
    CHECK_EQ_INT(st, ENTMTP_ERR_KV_FULL);
    CHECK(strstr(entmtp_last_error(), "full") != NULL);
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, 24);
    CHECK_EQ_INT(total, 24);
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_KV_FULL, "full");
    CHECK_EQ_INT(r.n_tokens, 0);
    CHECK_ERR(entmtp_session_prefill(s, prompt, 1), ENTMTP_ERR_KV_FULL, "do not fit");
    /* reset makes it usable again */
    entmtp_session_reset(s);
    CHECK_OK(entmtp_session_prefill(s, prompt, 10));
    CHECK_OK(entmtp_step(s, 0, &r));
    CHECK(r.n_tokens >= 1);
    /* generate with a budget emits exactly that many tokens */
    entmtp_session_reset(s);
    CHECK_OK(entmtp_session_prefill(s, prompt, 4));
    CHECK_OK(entmtp_generate(s, 7, 0, NULL, NULL));
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, 11);
    CHECK_ERR(entmtp_generate(s, 0, 0, NULL, NULL), ENTMTP_ERR_INVALID_ARGUMENT, "max_tokens");
    CHECK_ERR(entmtp_step(NULL, 0, &r), ENTMTP_ERR_INVALID_ARGUMENT, "session");

    entmtp_session_free(s);
done:
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("test_engine_errors");
}
