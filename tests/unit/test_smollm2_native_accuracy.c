/* Accuracy of native mode (weights in their file type, integer activations)
 * on the real SmolLM2-135M-Instruct Q4_1 against the exact F32 path, with
 * 16-bit activations everywhere and with the default 8-bit prompt
 * activations (the replay below appends tokens by prefill, so the 8-bit
 * session runs every position at 8 bits):
 *  - a 256-token greedy F32 run, replayed through the native model token by
 *    token: the native argmax equals the F32 token at >= 99% of positions
 *    at 16 bits, >= 95% at 8;
 *  - perplexity of a held-out text (docs/architecture.md, text the model was
 *    not tuned on) within 1% of the F32 perplexity, both ways.
 * Prints the largest absolute logit difference seen (docs/performance.md).
 * Skipped when the model is absent. */
#define ENTMTP_EXPERIMENTAL_API /* entmtp_session_logits */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N_GEN 256
#define N_TEXT 256

static entmtp_model *load(const char *path, entmtp_compute_type compute) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    mp.compute_type = compute;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(path, &mp, &m));
    return m;
}

static entmtp_session *session(entmtp_model *m, int32_t prompt_bits) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 1024;
    sp.prompt_activation_bits = prompt_bits;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, NULL, NULL, &sp, &s));
    return s;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* log p(token) under logits x */
static double log_prob(const float *x, int32_t n, int32_t token) {
    double mx = x[argmax(x, n)], z = 0;
    for (int32_t i = 0; i < n; i++) z += exp((double)x[i] - mx);
    return (double)x[token] - mx - log(z);
}

/* Mean negative log-likelihood of text[1..n) given its prefix, one token
 * appended at a time. */
static double mean_nll(entmtp_model *m, const int32_t *text, int32_t n, int32_t prompt_bits) {
    entmtp_session *s = session(m, prompt_bits);
    double nll = 0;
    CHECK_OK(entmtp_session_prefill(s, text, 1));
    for (int32_t i = 1; i < n; i++) {
        const float *lg;
        int32_t v;
        CHECK_OK(entmtp_session_logits(s, &lg, &v));
        nll -= log_prob(lg, v, text[i]);
        CHECK_OK(entmtp_session_prefill(s, &text[i], 1));
    }
    entmtp_session_free(s);
    return nll / (n - 1);
}

int main(void) {
    char mbuf[1024], doc[1024];
    const char *path = getenv("ENTMTP_MODEL");
    if (!path || !*path) {
        snprintf(mbuf, sizeof mbuf, "%s/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf", ENTMTP_SOURCE_DIR);
        path = mbuf;
    }
    if (access(path, R_OK) != 0) TEST_SKIP("SmolLM2 model not fetched (scripts/fetch-model.sh)");
    entmtp_model *f32 = load(path, ENTMTP_COMPUTE_F32), *nat = load(path, ENTMTP_COMPUTE_NATIVE);
    if (!f32 || !nat) return emt_test_finish("test_smollm2_native_accuracy");

    /* greedy F32 run, logits before each token kept */
    const char *prompt = "<|im_start|>user\nExplain how a hash table works, with a short Python example.<|im_end|>\n<|im_start|>assistant\n";
    int32_t ptoks[128], np = 0, gen[N_GEN];
    CHECK_OK(entmtp_tokenize(f32, prompt, -1, 0, 1, ptoks, 128, &np));
    entmtp_model_info mi = { sizeof mi };
    CHECK_OK(entmtp_model_get_info(f32, &mi));
    int32_t V = mi.vocab_size;
    float *ref = malloc(sizeof(float) * (size_t)V * N_GEN);
    const int32_t bits[2] = { 16, 8 };
    entmtp_session *sf = session(f32, 16), *sn[2] = { session(nat, bits[0]), session(nat, bits[1]) };
    CHECK_OK(entmtp_session_prefill(sf, ptoks, np));
    for (int b = 0; b < 2; b++) CHECK_OK(entmtp_session_prefill(sn[b], ptoks, np));
    int32_t agree[2] = { 0, 0 };
    double worst[2] = { 0, 0 };
    for (int32_t i = 0; i < N_GEN; i++) {
        const float *lf, *ln;
        int32_t v;
        CHECK_OK(entmtp_session_logits(sf, &lf, &v));
        memcpy(ref + (size_t)i * V, lf, sizeof(float) * (size_t)V);
        entmtp_step_result r = { sizeof r };
        CHECK_OK(entmtp_step_ar(sf, &r));
        gen[i] = r.tokens[0];
        CHECK_EQ_INT(gen[i], argmax(ref + (size_t)i * V, V));
        for (int b = 0; b < 2; b++) {
            CHECK_OK(entmtp_session_logits(sn[b], &ln, &v));
            agree[b] += argmax(ln, v) == gen[i];
            if (argmax(ln, v) != gen[i]) {
                const float *l = ref + (size_t)i * V;
                printf("%d-bit, position %d: F32 token %d, native %d (F32 logit margin %.4f)\n", bits[b], i, gen[i],
                       argmax(ln, v), l[gen[i]] - l[argmax(ln, v)]);
            }
            for (int32_t k = 0; k < V; k++) worst[b] = fmax(worst[b], fabs((double)ln[k] - ref[(size_t)i * V + k]));
            CHECK_OK(entmtp_session_prefill(sn[b], &gen[i], 1)); /* native follows the F32 tokens */
        }
    }
    for (int b = 0; b < 2; b++)
        printf("%d-bit activations: top-1 agreement with F32 over %d greedy tokens: %d (%.2f%%); max |logit "
               "difference| %.4f\n",
               bits[b], N_GEN, agree[b], 100.0 * agree[b] / N_GEN, worst[b]);
    CHECK(agree[0] >= 0.99 * N_GEN);
    CHECK(agree[1] >= 0.95 * N_GEN);

    /* perplexity of held-out text */
    snprintf(doc, sizeof doc, "%s/docs/architecture.md", ENTMTP_SOURCE_DIR);
    FILE *fp = fopen(doc, "rb");
    CHECK(fp != NULL);
    char text[8192] = { 0 };
    size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    int32_t *toks = malloc(sizeof(int32_t) * 4096), nt = 0;
    CHECK(len > 0);
    CHECK_OK(entmtp_tokenize(f32, text, (int64_t)len, 0, 0, toks, 4096, &nt));
    if (nt > N_TEXT) nt = N_TEXT;
    CHECK(nt == N_TEXT);
    double pf = exp(mean_nll(f32, toks, nt, 16));
    for (int b = 0; b < 2; b++) {
        double pn = exp(mean_nll(nat, toks, nt, bits[b]));
        printf("perplexity over %d tokens of docs/architecture.md: F32 %.4f, native %d-bit %.4f (%+.3f%%)\n", nt, pf,
               bits[b], pn, 100.0 * (pn / pf - 1.0));
        CHECK(fabs(pn / pf - 1.0) < 0.01);
    }

    free(toks);
    free(ref);
    entmtp_session_free(sf);
    for (int b = 0; b < 2; b++) entmtp_session_free(sn[b]);
    entmtp_model_free(f32);
    entmtp_model_free(nat);
    return emt_test_finish("test_smollm2_native_accuracy");
}
