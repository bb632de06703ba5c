/* An EAGLE-3 drafter on the CUDA backend: greedy EntMTP tokens with a few
 * trees (a chain, a wide tree, the throughput policy's switching) equal the
 * CPU backend's greedy AR tokens. The drafter runs its ops (embed, rmsnorm,
 * matmul, rope, attention, add, topk: the backend's, with CUDA twins) from
 * the host at the start of each step, and the verify pass leaves its target
 * layers on the device. Runs on a GPU or on the CPU CUDA harness; SKIPPED
 * when neither is there. */
#include "check.h"
#include "session_run.h"
#include "cuda_test.h"
#include "tiny_model.h"

#include <stdio.h>
#include <unistd.h>

#define N_GEN 20
static const int32_t prompt[] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))

static void generate(entmtp_backend backend, const char *model_path, const char *drafter, const char *tree,
                     entmtp_policy_kind policy, int ar, int32_t *out) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = 2;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *bank = NULL;
    entmtp_policy *pol = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (m && !ar) CHECK_OK(entmtp_heads_load(m, drafter, &h));
    entmtp_bank_params bp = entmtp_bank_default_params();
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, tree, NULL));
    CHECK_OK(entmtp_bank_add_builtin(bank, "chain_2", NULL));
    if (m && policy != ENTMTP_POLICY_STATIC) {
        entmtp_policy_config pc = entmtp_policy_default_config(policy);
        CHECK_OK(entmtp_policy_create(&pc, &pol));
    }
    int32_t n = 0;
    double mean_accept = 0;
    if (m) CHECK_OK(emt_test_generate(m, h, bank, pol, ar, prompt, N_PROMPT, N_GEN, 128, out, &n, &mean_accept));
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

int main(void) {
    if (!emt_cuda_test_have_device()) return 77;
    emt_test_kv_type = ENTMTP_KV_F32; /* both backends (CUDA's default is BF16): tokens equal the CPU's */
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.n_layers = 4;
    c.seed = 7;
    char gguf[512], drafter[512];
    snprintf(gguf, sizeof gguf, "%s/cuda_eagle3_%d.gguf", ENTMTP_TEST_TMP_DIR, (int)getpid());
    snprintf(drafter, sizeof drafter, "%s/cuda_eagle3_%d", ENTMTP_TEST_TMP_DIR, (int)getpid());
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    emt_tiny_eagle3 e = { .hidden = c.hidden, .ffn = 48, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8,
                          .vocab = c.vocab, .n_draft = 24, .taps = { 0, 1, 3 }, .rope_theta = 10000.0f, .seed = 22 };
    CHECK_OK(emt_tiny_write_eagle3(drafter, &e));
    int32_t ar[N_PROMPT + N_GEN], spec[N_PROMPT + N_GEN];
    generate(ENTMTP_BACKEND_CPU, gguf, NULL, "chain_3", ENTMTP_POLICY_STATIC, 1, ar);
    const struct { const char *tree; entmtp_policy_kind policy; } runs[] = {
        { "chain_3", ENTMTP_POLICY_STATIC },
        { "mc_sim_7b_63", ENTMTP_POLICY_STATIC },
        { "mc_sim_7b_63", ENTMTP_POLICY_THROUGHPUT },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        memset(spec, 0, sizeof spec);
        generate(ENTMTP_BACKEND_CUDA, gguf, drafter, runs[i].tree, runs[i].policy, 0, spec);
        int same = !memcmp(spec, ar, sizeof ar);
        if (!same) fprintf(stderr, "CUDA EAGLE-3, tree %s, policy %s: tokens differ from CPU AR\n", runs[i].tree,
                           entmtp_policy_kind_name(runs[i].policy));
        CHECK(same);
        printf("CUDA EAGLE-3 tree %-14s policy %-10s == CPU AR\n", runs[i].tree, entmtp_policy_kind_name(runs[i].policy));
    }
    remove(gguf);
    return emt_test_finish("test_cuda_eagle3");
}
