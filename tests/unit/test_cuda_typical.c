/* Temperature > 0 on the device step: sampled EntMTP (typical acceptance)
 * with the step ops (acceptance and the commit on the device) emits the
 * same tokens, seed for seed, as the same backend's host path (acceptance by
 * the host oracle emt_evaluate_posterior_nodes on downloaded logits), for
 * every built-in tree (T = 0.7 and 1.0 in turn), Medusa and Hydra, on the CUDA backend and on the CPU
 * backend (whose acceptance op is the oracle itself). Both paths see the
 * same logits (same backend, same kernels), so any difference is an
 * acceptance decision or a commit. Runs on a GPU or on the CPU CUDA
 * harness; SKIPPED when neither is there. */
#include "backend/backend.h"
#include "engine/engine.h"
#include "check.h"
#include "cuda_test.h"
#include "tiny_model.h"

#include <stdio.h>
#include <unistd.h>

#define N_GEN 16
static const int32_t prompt[] = { 2, 7, 1, 8, 2, 8 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))
#define N_TOKENS (N_PROMPT + N_GEN)

static int64_t g_steps, g_accepted;

static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, float T, uint64_t seed,
                     int device, int32_t *out) {
    memset(out, 0xff, N_TOKENS * sizeof *out);
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    sp.temperature = T;
    sp.seed = seed;
    sp.reproducible = 1; /* the tree sequence must not depend on timing */
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    if (!s) return;
    emt_session_set_device_step(s, device);
    CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    CHECK_OK(entmtp_generate(s, N_GEN, 0, NULL, NULL));
    const int32_t *toks;
    int32_t n = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, N_TOKENS);
    if (n == N_TOKENS) memcpy(out, toks, sizeof(int32_t) * N_TOKENS);
    entmtp_session_stats st = { sizeof st };
    CHECK_OK(entmtp_session_get_stats(s, &st));
    if (device) {
        g_steps += st.n_steps;
        g_accepted += st.n_generated - st.n_steps;
    }
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
}

static void check_backend(const char *gguf, const char *heads, const char *label, entmtp_backend backend) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, heads, &h));
    entmtp_heads_info hi = { sizeof hi };
    entmtp_bank *b = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    if (h && entmtp_heads_get_info(h, &hi) == ENTMTP_OK) bp.max_depth = hi.n_heads;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    for (int32_t i = 0; b && entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
    }
    int32_t n_trees = b ? entmtp_bank_size(b) : 0, runs = 0;
    const float temps[] = { 0.7f, 1.0f };
    for (int32_t t = 0; m && h && t < n_trees; t++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = t;
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        for (int k = t % 2; k < 2; k += 2) { /* the temperatures alternate over the trees */
            int32_t dev[N_TOKENS], host[N_TOKENS];
            uint64_t seed = 0x1234u + (uint64_t)(7 * t + k);
            generate(m, h, b, pol, temps[k], seed, 1, dev);
            generate(m, h, b, pol, temps[k], seed, 0, host);
            runs++;
            if (memcmp(dev, host, sizeof dev)) {
                int32_t i = 0;
                while (dev[i] == host[i]) i++;
                fprintf(stderr, "%s: tree %d, T %.1f: device step token %d is %d, host path says %d\n", label, t,
                        (double)temps[k], i, dev[i], host[i]);
                emt_test_failures++;
            }
        }
        entmtp_policy_free(pol);
    }
    printf("%s: device step == host path for %d sampled runs (%d trees, T 0.7 and 1.0 alternating)\n", label, runs, n_trees);
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

int main(void) {
    if (!emt_cuda_test_have_device()) return 77;
    emt_tiny_config c;
    emt_cuda_test_files files;
    emt_cuda_test_write_files("cuda_typical", &c, &files);
    const char *gguf = files.gguf, *medusa = files.medusa, *hydra = files.hydra;
    check_backend(gguf, medusa, "cuda, medusa", ENTMTP_BACKEND_CUDA);
    check_backend(gguf, hydra, "cuda, hydra", ENTMTP_BACKEND_CUDA);
    check_backend(gguf, medusa, "cpu, medusa", ENTMTP_BACKEND_CPU);
    check_backend(gguf, hydra, "cpu, hydra", ENTMTP_BACKEND_CPU);
    printf("sampled device steps: %lld steps, %lld draft tokens accepted (typical acceptance did accept)\n",
           (long long)g_steps, (long long)g_accepted);
    CHECK(g_accepted > g_steps / 4);
    emt_cuda_test_remove_files(&files);
    return emt_test_finish("test_cuda_typical");
}
