/* CUDA backend against the CPU backend: each op on random inputs (odd sizes,
 * a long context, the largest tree), then end to end: greedy tokens of AR and
 * of EntMTP with every built-in tree equal the CPU's, logits within 1e-3.
 * Without a GPU (or without the plugin) this test is reported as SKIPPED. */
#include "backend/backend.h"
#include "check.h"
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>

static uint64_t rng = 7;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *dev_copy(emt_backend *be, const float *h, size_t n) {
    float *d = be->ops->alloc(be, n * sizeof(float));
    be->ops->upload(be, d, h, n * sizeof(float));
    return d;
}

static double max_diff(emt_backend *be, emt_exec *ex, const float *dev, const float *host, size_t n) {
    float *tmp = malloc(n * sizeof(float));
    be->ops->download(ex, tmp, dev, n * sizeof(float));
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)tmp[i] - host[i]));
    free(tmp);
    return w;
}

static void ops(emt_backend *cpu, emt_backend *gpu) {
    emt_exec *ec = cpu->ops->exec_create(cpu, 2), *eg = gpu->ops->exec_create(gpu, 0);
    /* matmul, exact and cuBLAS paths */
    const int32_t R = 64, I = 577, O = 1001;
    float *W = malloc(sizeof(float) * O * I), *x = malloc(sizeof(float) * R * I), *y = malloc(sizeof(float) * R * O);
    for (int64_t i = 0; i < (int64_t)O * I; i++) W[i] = urand() * 0.05f;
    for (int64_t i = 0; i < (int64_t)R * I; i++) x[i] = urand();
    cpu->ops->matmul(ec, W, NULL, x, R, I, O, y, 1);
    float *dW = dev_copy(gpu, W, (size_t)O * I), *dx = dev_copy(gpu, x, (size_t)R * I);
    float *dy = gpu->ops->alloc(gpu, sizeof(float) * R * O);
    for (int exact = 0; exact < 2; exact++) {
        gpu->ops->matmul(eg, dW, NULL, dx, R, I, O, dy, exact);
        CHECK(max_diff(gpu, eg, dy, y, (size_t)R * O) < 1e-3);
    }
    /* attention over a long context with the largest built-in tree's mask */
    entmtp_bank *b = NULL;
    entmtp_bank_create(NULL, &b);
    int32_t idx;
    entmtp_bank_add_builtin(b, "mc_sim_7b_63", &idx);
    entmtp_tree_buffers t = { sizeof t };
    entmtp_bank_tree_buffers(b, idx, &t);
    const int32_t H = 8, KV = 2, hd = 64, P = 5000, N = t.n_nodes;
    size_t qn = (size_t)N * H * hd, kn = (size_t)(P + N) * KV * hd;
    float *q = malloc(qn * sizeof(float)), *k = malloc(kn * sizeof(float)), *v = malloc(kn * sizeof(float)), *o = malloc(qn * sizeof(float));
    for (size_t i = 0; i < qn; i++) q[i] = urand();
    for (size_t i = 0; i < kn; i++) { k[i] = urand(); v[i] = urand(); }
    cpu->ops->attention(ec, q, k, v, P, N, t.attn_mask, H, KV, hd, o);
    float *dq = dev_copy(gpu, q, qn), *dk = dev_copy(gpu, k, kn), *dv = dev_copy(gpu, v, kn), *dout = gpu->ops->alloc(gpu, qn * sizeof(float));
    gpu->ops->attention(eg, dq, dk, dv, P, N, t.attn_mask, H, KV, hd, dout);
    CHECK(max_diff(gpu, eg, dout, o, qn) < 1e-4);
    /* top-k */
    int32_t ci[3 * 10], gi[3 * 10];
    float cp[30], gp[30], ch[3], gh[3];
    cpu->ops->topk(ec, y, 3, O, 10, ci, cp, ch);
    gpu->ops->topk(eg, dy, 3, O, 10, gi, gp, gh);
    for (int i = 0; i < 30; i++) CHECK_NEAR(gp[i], cp[i], 1e-4);
    for (int i = 0; i < 3; i++) CHECK_NEAR(gh[i], ch[i], 1e-4);
    CHECK_OK(gpu->ops->sync(eg));
    float *ptrs[] = { dW, dx, dy, dq, dk, dv, dout };
    for (int i = 0; i < 7; i++) gpu->ops->release(gpu, ptrs[i]);
    free(W); free(x); free(y); free(q); free(k); free(v); free(o);
    entmtp_bank_free(b);
    cpu->ops->exec_destroy(ec);
    gpu->ops->exec_destroy(eg);
}

static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, int32_t tree, int ar, int32_t *out) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    pc.static_tree = tree;
    entmtp_policy *p = NULL;
    entmtp_policy_create(&pc, &p);
    entmtp_policy_set(s, p);
    const int32_t prompt[] = { 3, 1, 4, 1, 5, 9, 2, 6 };
    CHECK_OK(entmtp_session_prefill(s, prompt, 8));
    CHECK_OK(entmtp_generate(s, 32, ar, NULL, NULL));
    const int32_t *toks;
    int32_t n;
    entmtp_session_tokens(s, &toks, &n);
    memcpy(out, toks, sizeof(int32_t) * 40);
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(p);
    entmtp_session_free(s);
}

int main(void) {
    emt_backend *gpu = NULL;
    if (emt_backend_cuda_create(0, &gpu) != ENTMTP_OK) {
        printf("SKIP: %s\n", entmtp_last_error());
        return 77;
    }
    emt_backend *cpu = NULL;
    emt_backend_cpu_create(&cpu);
    ops(cpu, gpu);
    cpu->ops->destroy(cpu);
    gpu->ops->destroy(gpu);

    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    char gguf[512], heads[512];
    snprintf(gguf, sizeof gguf, "%s/cuda_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads, sizeof heads, "%s/cuda_medusa.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(heads, c.hidden, c.vocab, 5, 1, 0, 3));
    entmtp_model *m[2] = { NULL, NULL };
    entmtp_heads *h[2] = { NULL, NULL };
    entmtp_bank *b = NULL;
    entmtp_bank_create(NULL, &b);
    for (int32_t i = 0; entmtp_builtin_tree_name(i); i++) entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
    for (int k = 0; k < 2; k++) {
        entmtp_model_params mp = entmtp_model_default_params();
        mp.backend = k ? ENTMTP_BACKEND_CUDA : ENTMTP_BACKEND_CPU;
        CHECK_OK(entmtp_model_load(gguf, &mp, &m[k]));
        CHECK_OK(entmtp_heads_load(m[k], heads, &h[k]));
    }
    if (m[0] && m[1] && h[0] && h[1]) {
        int32_t ref[40], got[40];
        generate(m[0], h[0], b, 0, 1, ref);
        for (int32_t tree = 0; tree < entmtp_bank_size(b); tree++)
            for (int ar = 0; ar < 2; ar++) {
                generate(m[1], h[1], b, tree, ar, got);
                if (memcmp(ref, got, sizeof ref)) {
                    fprintf(stderr, "CUDA tokens differ from CPU AR (tree %d, ar %d)\n", tree, ar);
                    emt_test_failures++;
                }
            }
    }
    for (int k = 0; k < 2; k++) { entmtp_heads_free(h[k]); entmtp_model_free(m[k]); }
    entmtp_bank_free(b);
    return emt_test_finish("test_cuda_parity");
}
