/* Medusa heads that share the base lm_head take one lm_head product over all
 * heads' rows; this must give exactly the top-k ids and probabilities of the
 * per-head path (one product per head), and so the same drafts, features and
 * emitted tokens, step by step. One- and two-layer heads, odd hidden size. */
#define ENTMTP_EXPERIMENTAL_API /* entmtp_session_features, entmtp_session_logits */
#include "check.h"
#include "engine/engine.h"
#include "tiny_model.h"

#include <stdio.h>

#define N_STEPS 24

static const int32_t prompt[] = { 1, 5, 9, 3, 17, 2, 30, 11, 4 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))

static entmtp_session *open_session(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, int batch) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 200;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    if (!s) return NULL;
    emt_session_set_batch_heads(s, batch);
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    return s;
}

static void compare(const char *model_path, const char *heads_path, int32_t n_heads) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, heads_path, &h));
    if (!h) { entmtp_model_free(m); return; }
    entmtp_heads_info hi = { sizeof hi };
    CHECK_OK(entmtp_heads_get_info(h, &hi));
    CHECK_EQ_INT(hi.shares_lm_head, 1);
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_builtin(b, "medusa_vicuna_7b_stage2", NULL));
    entmtp_session *batched = open_session(m, h, b, 1), *single = open_session(m, h, b, 0);
    for (int32_t step = 0; step < N_STEPS && batched && single; step++) {
        entmtp_step_result ra = { sizeof ra }, rb = { sizeof rb };
        CHECK_OK(entmtp_step(batched, 0, &ra));
        CHECK_OK(entmtp_step(single, 0, &rb));
        const int32_t *ia, *ib;
        const float *pa, *pb;
        int32_t ka = 0, kb = 0;
        emt_session_last_head_topk(batched, &ia, &pa, &ka);
        emt_session_last_head_topk(single, &ib, &pb, &kb);
        CHECK_EQ_INT(ka, kb);
        size_t n = (size_t)n_heads * (size_t)ka;
        if (memcmp(ia, ib, n * sizeof *ia) || memcmp(pa, pb, n * sizeof *pa)) {
            fprintf(stderr, "%s: step %d: batched heads' top-k differs from per-head\n", heads_path, step);
            emt_test_failures++;
        }
        entmtp_features fa = { sizeof fa }, fb = { sizeof fb };
        CHECK_OK(entmtp_session_features(batched, &fa));
        CHECK_OK(entmtp_session_features(single, &fb));
        CHECK_EQ_INT(fa.n_heads, n_heads);
        CHECK_EQ_INT(fb.n_heads, n_heads);
        CHECK(!memcmp(fa.head_p, fb.head_p, (size_t)n_heads * sizeof *fa.head_p));
        CHECK_EQ_INT(ra.n_tokens, rb.n_tokens);
        CHECK_EQ_INT(ra.accept_length, rb.accept_length);
        CHECK(ra.n_tokens == rb.n_tokens && !memcmp(ra.tokens, rb.tokens, (size_t)ra.n_tokens * sizeof *ra.tokens));
    }
    entmtp_session_free(batched);
    entmtp_session_free(single);
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.hidden = 36; /* not a multiple of 8: the products' scalar tails run too */
    c.ffn = 52;
    c.n_heads = 6; /* head_dim 6 */
    c.n_kv_heads = 2;
    c.seed = 5;
    char model[512], one[512], two[512];
    snprintf(model, sizeof model, "%s/batched_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(one, sizeof one, "%s/batched_medusa1.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(two, sizeof two, "%s/batched_medusa2.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(model, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(one, c.hidden, c.vocab, 4, 1, 0, 21));
    CHECK_OK(emt_tiny_write_medusa_heads(two, c.hidden, c.vocab, 5, 2, 0, 22));
    compare(model, one, 4);
    compare(model, two, 5);
    return emt_test_finish("test_medusa_batched");
}
