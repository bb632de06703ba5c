/* What a session reports about what speculation bought (entmtp_session_stats
 * fields appended after tokens_per_second): the warm-up steps and the warm rate, the
 * prefill rate, the speedup over AR estimated from the bank's step costs
 * (recomputed here from the bank's figures and the session's tree usage)
 * or measured with entmtp_session_measure_ar; an older caller's smaller
 * stats struct is left untouched past its size; model load time. */
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>

typedef struct fixture {
    entmtp_model *m;
    entmtp_heads *h;
} fixture;

static const int32_t prompt[5] = { 1, 2, 3, 4, 5 };

/* Steps a session to `n_tokens` with a UCB policy (so every tree is tried)
 * and checks the warm-up bookkeeping against its own count of first uses. */
static entmtp_session *run_session(fixture *fx, entmtp_bank *bank, int32_t n_tokens, double *cost_sum,
                                   const double *costs) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(fx->m, bank ? fx->h : NULL, bank, &sp, &s));
    if (!s) return NULL;
    entmtp_policy *p = NULL;
    if (bank) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
        CHECK_OK(entmtp_policy_create(&pc, &p));
        CHECK_OK(entmtp_policy_set(s, p));
    }
    CHECK_OK(entmtp_session_prefill(s, prompt, 5));
    int64_t uses[8] = { 0 }, ar_uses = 0, warmup = 0, warm_tokens = 0, generated = 0;
    double warmup_seconds = 0, decode_seconds = 0;
    *cost_sum = 0;
    while (generated < n_tokens) {
        entmtp_step_result r = { sizeof r };
        if (entmtp_step(s, n_tokens - (int32_t)generated, &r) != ENTMTP_OK) { CHECK(0); break; }
        int64_t *u = r.tree_index < 0 ? &ar_uses : &uses[r.tree_index];
        if ((*u)++ == 0) { /* CPU: a tree's first use is its warm-up */
            warmup++;
            warmup_seconds += r.seconds;
        } else {
            warm_tokens += r.n_tokens;
        }
        decode_seconds += r.seconds;
        generated += r.n_tokens;
        *cost_sum += r.tree_index < 0 ? 1.0 : costs ? costs[r.tree_index] : 0;
    }
    entmtp_session_stats st = { sizeof st };
    CHECK_OK(entmtp_session_get_stats(s, &st));
    CHECK_EQ_INT(st.n_generated, generated);
    CHECK_EQ_INT(st.n_warmup_steps, warmup);
    CHECK_EQ_INT(st.n_warm_generated, warm_tokens);
    CHECK_NEAR(st.warmup_seconds, warmup_seconds, 1e-9);
    CHECK_NEAR(st.decode_seconds, decode_seconds, 1e-9);
    if (warm_tokens > 0)
        CHECK_NEAR(st.warm_tokens_per_second, warm_tokens / (decode_seconds - warmup_seconds),
                   1e-6 * st.warm_tokens_per_second);
    CHECK_EQ_INT(st.n_prompt_tokens, 5);
    CHECK(st.prefill_seconds > 0);
    CHECK_NEAR(st.prefill_tokens_per_second, 5 / st.prefill_seconds, 1e-6 * st.prefill_tokens_per_second);
    if (p) {
        CHECK_OK(entmtp_policy_set(s, NULL));
        entmtp_policy_free(p);
    }
    return s;
}

static entmtp_bank *bank_of(const char *const *names, int n, const float *mal, const float *tps) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 3;
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    for (int i = 0; b && i < n; i++) {
        CHECK_OK(entmtp_bank_add_builtin(b, names[i], NULL));
        if (mal) CHECK_OK(entmtp_bank_set_figures(b, i, mal[i], tps[i]));
    }
    return b;
}

/* The estimate: a step with tree k costs (mal_k / tps_k) / (an AR step's
 * seconds) AR steps; speedup = tokens / the steps' summed cost. */
static void check_estimate(fixture *fx, const char *const *names, int n, const float *mal, const float *tps,
                           double ar_seconds) {
    double costs[8];
    for (int i = 0; i < n; i++) costs[i] = (double)mal[i] / tps[i] / ar_seconds;
    entmtp_bank *b = bank_of(names, n, mal, tps);
    double cost_sum = 0;
    entmtp_session *s = b ? run_session(fx, b, 48, &cost_sum, costs) : NULL;
    if (s) {
        entmtp_session_stats st = { sizeof st };
        CHECK_OK(entmtp_session_get_stats(s, &st));
        CHECK_EQ_INT(st.speedup_source, ENTMTP_SPEEDUP_ESTIMATED);
        CHECK_NEAR(st.speedup, st.n_generated / cost_sum, 1e-5 * st.speedup);
        CHECK_NEAR(st.ar_tokens_per_second, st.warm_tokens_per_second / st.speedup, 1e-6 * st.ar_tokens_per_second + 1e-12);

        /* measured: AR on the same prompt; the session itself is unchanged */
        const int32_t *toks = NULL;
        int32_t n_before = 0, n_after = 0;
        CHECK_OK(entmtp_session_tokens(s, &toks, &n_before));
        CHECK_OK(entmtp_session_measure_ar(s, 16));
        CHECK_OK(entmtp_session_tokens(s, &toks, &n_after));
        CHECK_EQ_INT(n_after, n_before);
        entmtp_session_stats mt = { sizeof mt };
        CHECK_OK(entmtp_session_get_stats(s, &mt));
        CHECK_EQ_INT(mt.speedup_source, ENTMTP_SPEEDUP_MEASURED);
        CHECK(mt.ar_tokens_per_second > 0);
        CHECK_NEAR(mt.speedup, mt.warm_tokens_per_second / mt.ar_tokens_per_second, 1e-9 * mt.speedup);
        CHECK_EQ_INT(mt.n_generated, st.n_generated);
        /* reset forgets both */
        entmtp_session_reset(s);
        CHECK_OK(entmtp_session_get_stats(s, &mt));
        CHECK_EQ_INT(mt.speedup_source, ENTMTP_SPEEDUP_NONE);
        CHECK_EQ_INT(mt.n_warmup_steps, 0);
        CHECK_ERR(entmtp_session_measure_ar(s, 0), ENTMTP_ERR_STATE, "not stepped");
    }
    entmtp_session_free(s);
    entmtp_bank_free(b);
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.seed = 21;
    char gguf[512], heads[512];
    snprintf(gguf, sizeof gguf, "%s/speedup_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads, sizeof heads, "%s/speedup_heads.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(heads, c.hidden, c.vocab, 3, 1, 0, 5));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    fixture fx = { 0 };
    CHECK_OK(entmtp_model_load(gguf, &mp, &fx.m));
    if (!fx.m) return emt_test_finish("test_session_speedup");
    CHECK_OK(entmtp_heads_load(fx.m, heads, &fx.h));
    entmtp_model_info mi = { sizeof mi };
    CHECK_OK(entmtp_model_get_info(fx.m, &mi));
    CHECK(mi.load_seconds > 0 && mi.load_seconds < 60);
    CHECK(mi.vocab_hash == 0); /* the tiny model has no tokenizer */

    /* a root-only tree is the AR step: 10 ms; chain_1 12.5 ms, chain_3 20 ms */
    const char *const with_ar[] = { "ar", "chain_1", "chain_3" };
    const float mal3[] = { 1.0f, 1.5f, 2.2f }, tps3[] = { 100.0f, 120.0f, 110.0f };
    check_estimate(&fx, with_ar, 3, mal3, tps3, 0.01);
    /* no root-only tree: the line through (2 nodes, 12.5 ms), (4 nodes, 20 ms) at one node: 8.75 ms */
    const char *const chains[] = { "chain_1", "chain_3" };
    const float mal2[] = { 1.5f, 2.2f }, tps2[] = { 120.0f, 110.0f };
    check_estimate(&fx, chains, 2, mal2, tps2, 0.00875);

    /* a bank without figures: no estimate; an AR session: none either */
    double cost_sum;
    entmtp_bank *b = bank_of(chains, 2, NULL, NULL);
    entmtp_session *s = b ? run_session(&fx, b, 24, &cost_sum, NULL) : NULL;
    entmtp_session_stats st = { sizeof st };
    if (s) {
        CHECK_OK(entmtp_session_get_stats(s, &st));
        CHECK_EQ_INT(st.speedup_source, ENTMTP_SPEEDUP_NONE);
        CHECK_NEAR(st.speedup, 0, 0);
        /* an older caller's stats (up to tokens_per_second) are written only up to its size */
        union { size_t struct_size; unsigned char bytes[sizeof(entmtp_session_stats) + 16]; } old;
        memset(&old, 0xAB, sizeof old);
        old.struct_size = offsetof(entmtp_session_stats, tokens_per_second) + sizeof(double);
        CHECK_OK(entmtp_session_get_stats(s, (entmtp_session_stats *)&old));
        CHECK_NEAR(((entmtp_session_stats *)&old)->tokens_per_second, st.tokens_per_second, 0);
        for (size_t i = old.struct_size; i < sizeof old.bytes; i++)
            if (old.bytes[i] != 0xAB) { CHECK(0); break; }
    }
    entmtp_session_free(s);
    entmtp_bank_free(b);
    s = run_session(&fx, NULL, 12, &cost_sum, NULL);
    if (s) {
        CHECK_OK(entmtp_session_get_stats(s, &st));
        CHECK_EQ_INT(st.speedup_source, ENTMTP_SPEEDUP_NONE);
        CHECK_EQ_INT(st.n_warmup_steps, 1); /* the first AR step */
    }
    entmtp_session_free(s);
    CHECK_ERR(entmtp_session_measure_ar(NULL, 0), ENTMTP_ERR_INVALID_ARGUMENT, "NULL");
    entmtp_heads_free(fx.h);
    entmtp_model_free(fx.m);
    return emt_test_finish("test_session_speedup");
}
