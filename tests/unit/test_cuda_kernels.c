/* The CUDA kernel families against their CPU twins and against themselves:
 * - products (cuda/matmul.cu) in every weight dtype the plugin takes: an
 *   output row is bit-identical whether the call has 1, 3, 13, 29, 45, 64 or 128 rows
 *   (batch invariance), within FP32 rounding of a double reference, and
 *   within the activation-quantization bound of the CPU's matmul_q;
 * - typed embedding rows: bit-identical to the CPU's;
 * - tree attention (cuda/attention.cu): each node of a 128-node tree over a
 *   3000-token context is bit-identical to the AR call that puts the same
 *   token at the same position (and over a 240-token context, the tree's
 *   shallow nodes within the first 256-key span, its deep ones past it),
 *   with and without Gemma's soft-cap, GQA, and
 *   with BF16 K/V caches (set_kv_dtype) on the tensor-core kernel and on the
 *   FP32 one (head_dim 96); round_bf16 and rope_round_kv (K roped, K and V
 *   rounded into the cache in one launch) bit-identical to the CPU's, and
 *   rope_q_round_kv (Q's RoPE in that launch) too;
 * - the residual add in the product (matmul_q_add): the bits of the
 *   product then add, on the device and on the CPU;
 * - Gemma's elementwise ops against the CPU.
 * Runs on a GPU or, in CI, on the CPU CUDA harness (docs/cuda-harness.md);
 * SKIPPED without either. */
#include "backend/backend.h"
#include "check.h"
#include "cuda_test.h"
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>

static uint64_t rng = 11;
static float urand(void) { return emt_test_urand(&rng); }
static int32_t irand(int32_t n) { return emt_test_irand(&rng, n); }

static emt_backend *cpu, *gpu;
static emt_exec *ec, *eg;

static float *host_random(size_t n, float scale) { return emt_test_host_random(&rng, n, scale); }
static void *dev_bytes(const void *h, size_t bytes) { return emt_test_device_copy(gpu, h, bytes); }

static float *download(const float *d, size_t n) {
    float *h = malloc(n * sizeof(float));
    CHECK_OK(gpu->ops->download(eg, h, d, n * sizeof(float)));
    return h;
}

/* ---------------------------------------------------------------- products */

/* Weights in dtype t: the test support's quantizers, or for Q4_K random
 * super-blocks (any bytes are a valid block; scales kept small) */
static void encode_weights(emt_dtype t, const float *w, int64_t n, uint8_t *out) {
    if (t != EMT_Q4_K) {
        emt_tiny_encode(t, w, n, out);
        return;
    }
    for (int64_t b = 0; b < n / 256; b++, out += 144) {
        uint16_t d = emt_f32_to_f16(0.0005f + 0.0005f * urand()), dmin = emt_f32_to_f16(0.0005f * urand());
        memcpy(out, &d, 2);
        memcpy(out + 2, &dmin, 2);
        for (int j = 4; j < 144; j++) out[j] = (uint8_t)irand(256);
    }
}

#define MM_ROWS 128

/* y (n_rows from x row `first`) on the device, downloaded */
static float *device_product(const emt_wmat *W, const float *dbias, const float *dx, int32_t first, int32_t n_rows,
                             int32_t I, int32_t O, float *dy) {
    emt_matmul(gpu->ops, eg, W, dbias, dx + (size_t)first * I, n_rows, I, O, dy, 1);
    CHECK_OK(gpu->ops->sync(eg));
    return download(dy, (size_t)n_rows * O);
}

/* I inputs: 1056 = 33 units of 32 (rows of odd bytes for Q8_0, Q4_0 and
 * Q4_1: the per-lane kernel; lanes 0 (and up to 7) take two units, the
 * others one); 1280 = 40 units, whole 16-byte units per row in every dtype:
 * the staged quantized kernel, with a last stage of 8 units (Q4_K: 5
 * super-blocks) */
static void check_product(emt_dtype t, int32_t I) {
    const int32_t O = 67;
    float *w = host_random((size_t)O * I, 0.05f), *bias = host_random(O, 1.0f);
    float *x = host_random((size_t)MM_ROWS * I, 1.0f);
    for (int32_t i = 0; i < I; i += 97) x[i] *= 30.0f; /* outliers: blocks with a large max|x| */
    size_t wbytes = emt_dtype_nbytes(t, (int64_t)O * I);
    uint8_t *wq = malloc(wbytes);
    encode_weights(t, w, (int64_t)O * I, wq);
    /* the weights as stored, decoded back: the product's exact operands */
    emt_tensor tensor = { "W", t, 2, { O, I }, wq, wbytes, NULL };
    float *wd = malloc(sizeof(float) * O * I);
    CHECK_OK(emt_tensor_to_f32(&tensor, 0, (int64_t)O * I, wd));

    emt_wmat Wd = { t, dev_bytes(wq, wbytes), NULL }, Wh = { t, wq, NULL };
    float *dbias = dev_bytes(bias, sizeof(float) * O), *dx = dev_bytes(x, sizeof(float) * MM_ROWS * I);
    float *dy = gpu->ops->alloc(gpu, sizeof(float) * MM_ROWS * O);
    float *all = device_product(&Wd, dbias, dx, 0, MM_ROWS, I, O, dy);

    /* batch invariance: the same rows inside calls of 1, 3, 13, 29, 45 and
     * 64 rows (BF16: every tensor-core launch shape, the 128-row call's
     * included; 45: the split form with a partial row tile), at other
     * positions of their row tiles */
    const int32_t sizes[] = { 1, 3, 13, 29, 45, 64 }, firsts[] = { 77, 5, 40, 90, 70, 61 };
    int same = 1;
    for (int k = 0; k < 6; k++) {
        float *part = device_product(&Wd, dbias, dx, firsts[k], sizes[k], I, O, dy);
        same &= !memcmp(part, all + (size_t)firsts[k] * O, sizeof(float) * sizes[k] * O);
        free(part);
    }

    /* against a double reference over the decoded weights, and the CPU twin */
    float *cpu_y = malloc(sizeof(float) * MM_ROWS * O);
    /* a dtype the CPU backend converts to F32 at load has no CPU product:
     * the double reference over the CPU's dequantization is its twin */
    int cpu_takes = t == EMT_F32 || (cpu->ops->weight_types & (1u << t));
    if (cpu_takes) emt_matmul(cpu->ops, ec, &Wh, bias, x, MM_ROWS, I, O, cpu_y, 1);
    int quantized = emt_dtype_is_quantized(t);
    double worst_ref = 0, worst_cpu = 0;
    for (int32_t r = 0; r < MM_ROWS; r++)
        for (int32_t o = 0; o < O; o++) {
            const float *wr = wd + (size_t)o * I, *xr = x + (size_t)r * I;
            double ref = bias[o], mag = fabs(bias[o]), qbound = 0;
            for (int32_t b = 0; b < I / 32; b++) {
                double amax = 0, wabs = 0;
                for (int32_t j = b * 32; j < b * 32 + 32; j++) {
                    ref += (double)wr[j] * xr[j];
                    mag += fabs((double)wr[j] * xr[j]);
                    amax = fmax(amax, fabs(xr[j]));
                    wabs += fabs(wr[j]);
                }
                qbound += amax / 65534.0 * wabs; /* the CPU's 16-bit activation rounding */
            }
            double got = all[(size_t)r * O + o], cpu_v = cpu_y[(size_t)r * O + o];
            /* FP32 accumulation: about 70 roundings deep, each <= 2^-24 of mag */
            worst_ref = fmax(worst_ref, fabs(got - ref) / (5e-6 * mag));
            if (cpu_takes) worst_cpu = fmax(worst_cpu, fabs(got - cpu_v) / ((quantized ? qbound : 0) + 1e-5 * mag));
        }
    printf("matmul %-5s %4d inputs, 1/3/13/29/45/64/128 rows %s; |cuda - double| / bound %.3f, |cuda - cpu| / bound %.3f%s\n",
           emt_dtype_name(t), I, same ? "bit-identical" : "DIFFER", worst_ref, worst_cpu,
           cpu_takes ? "" : " (no CPU product for this dtype)");
    CHECK(same);
    CHECK(worst_ref <= 1.0);
    CHECK(worst_cpu <= 1.0);

    /* typed embedding rows: the CPU's bits */
    if (t != EMT_F32) {
        int32_t tokens[5] = { 66, 0, 13, 13, 40 };
        float *out_c = malloc(sizeof(float) * 5 * I), *dout = gpu->ops->alloc(gpu, sizeof(float) * 5 * I);
        emt_embed(cpu->ops, ec, &Wh, I, tokens, 5, out_c);
        emt_embed(gpu->ops, eg, &Wd, I, tokens, 5, dout);
        float *out_g = download(dout, (size_t)5 * I);
        printf("embed  %-5s rows equal: %s\n", emt_dtype_name(t), memcmp(out_c, out_g, sizeof(float) * 5 * I) ? "no" : "yes");
        CHECK(!memcmp(out_c, out_g, sizeof(float) * 5 * I));
        gpu->ops->release(gpu, dout);
        free(out_c); free(out_g);
    }
    gpu->ops->release(gpu, (void *)Wd.data);
    gpu->ops->release(gpu, dbias); gpu->ops->release(gpu, dx); gpu->ops->release(gpu, dy);
    free(w); free(bias); free(x); free(wq); free(wd); free(all); free(cpu_y);
}

/* The fused products (matmul_q_multi: Q/K/V; matmul_q_gated: gate/up and
 * the activation) write what separate matmul_q calls (and swiglu/geglu)
 * write, bit for bit: BF16 (one tensor-core launch for every matrix) and
 * Q8_0 (one launch each), 1 and 64 rows, matrices of 67, 16 and 40 outputs
 * (partial output groups), with and without biases. */
static void check_fused(emt_dtype t) {
    const int32_t I = 1056, outs[3] = { 67, 16, 40 }, rows[2] = { 1, 64 };
    emt_wmat W[3];
    const emt_wmat *Wp[3];
    float *dbias[3];
    for (int m = 0; m < 3; m++) {
        float *w = host_random((size_t)outs[m] * I, 0.05f), *b = host_random(outs[m], 1.0f);
        size_t bytes = emt_dtype_nbytes(t, (int64_t)outs[m] * I);
        uint8_t *q = malloc(bytes);
        encode_weights(t, w, (int64_t)outs[m] * I, q);
        W[m] = (emt_wmat){ t, dev_bytes(q, bytes), NULL };
        Wp[m] = &W[m];
        dbias[m] = m == 1 ? NULL : dev_bytes(b, sizeof(float) * outs[m]);
        free(w); free(b); free(q);
    }
    float *x = host_random((size_t)64 * I, 1.0f), *dx = dev_bytes(x, sizeof(float) * 64 * I);
    int same = 1;
    int64_t fused_launches = 0;
    for (int ri = 0; ri < 2; ri++) {
        const int32_t R = rows[ri];
        float *dy[3], *dz[3];
        for (int m = 0; m < 3; m++) {
            dy[m] = gpu->ops->alloc(gpu, sizeof(float) * R * outs[m]);
            dz[m] = gpu->ops->alloc(gpu, sizeof(float) * R * outs[m]);
            gpu->ops->matmul_q(eg, Wp[m], dbias[m], dx, R, I, outs[m], dz[m]);
        }
        emt_exec_counters c0, c1;
        gpu->ops->counters(eg, &c0);
        gpu->ops->matmul_q_multi(eg, 3, Wp, (const float *const *)dbias, outs, dx, R, I, dy);
        gpu->ops->counters(eg, &c1);
        fused_launches = c1.launches - c0.launches;
        CHECK_OK(gpu->ops->sync(eg));
        for (int m = 0; m < 3; m++) {
            float *a = download(dy[m], (size_t)R * outs[m]), *b = download(dz[m], (size_t)R * outs[m]);
            same &= !memcmp(a, b, sizeof(float) * R * outs[m]);
            free(a); free(b);
        }
        /* gated: gate = act(x Wg^T + bg) * (x Wu^T + bu) against the separate ops */
        for (int gelu = 0; gelu < 2; gelu++) {
            const int32_t O = outs[0];
            float *gate = gpu->ops->alloc(gpu, sizeof(float) * R * O), *up = gpu->ops->alloc(gpu, sizeof(float) * R * O);
            float *ref = gpu->ops->alloc(gpu, sizeof(float) * R * O), *ref_up = gpu->ops->alloc(gpu, sizeof(float) * R * O);
            gpu->ops->matmul_q_gated(eg, Wp[0], dbias[0], Wp[2], NULL, dx, R, I, 40, gelu, gate, up);
            gpu->ops->matmul_q(eg, Wp[0], dbias[0], dx, R, I, 40, ref);
            gpu->ops->matmul_q(eg, Wp[2], NULL, dx, R, I, 40, ref_up);
            if (gelu) gpu->ops->geglu(eg, ref, ref_up, (int64_t)R * 40, ref);
            else gpu->ops->swiglu(eg, ref, ref_up, (int64_t)R * 40, ref);
            CHECK_OK(gpu->ops->sync(eg));
            float *a = download(gate, (size_t)R * 40), *b = download(ref, (size_t)R * 40);
            same &= !memcmp(a, b, sizeof(float) * R * 40);
            free(a); free(b);
            gpu->ops->release(gpu, gate); gpu->ops->release(gpu, up);
            gpu->ops->release(gpu, ref); gpu->ops->release(gpu, ref_up);
        }
        for (int m = 0; m < 3; m++) gpu->ops->release(gpu, dy[m]), gpu->ops->release(gpu, dz[m]);
    }
    printf("fused %-5s Q/K/V-style (67, 16, 40 outputs) and gated products, 1 and 64 rows: %s separate calls; "
           "%lld launch(es) for three matrices\n", emt_dtype_name(t), same ? "bit-identical to" : "DIFFER from",
           (long long)fused_launches);
    CHECK(same);
    CHECK(fused_launches == (t == EMT_BF16 ? 1 : 3));
    for (int m = 0; m < 3; m++) {
        gpu->ops->release(gpu, (void *)W[m].data);
        if (dbias[m]) gpu->ops->release(gpu, dbias[m]);
    }
    gpu->ops->release(gpu, dx);
    free(x);
}

/* The residual add in the product (matmul_q_add): y += x W^T (+ bias)
 * writes what matmul_q then add write, bit for bit, on the device (BF16:
 * one tensor-core launch with the add in its epilogue, every launch shape:
 * 1, 13, 29, 45 and 128 rows; Q8_0: the product and add_kernel, two
 * launches) and on the CPU (the add in the product's tasks), with and
 * without a bias, over 67 outputs (a partial output group). */
static void check_matmul_add(emt_dtype t) {
    const int32_t I = 1056, O = 67, rows[5] = { 1, 13, 29, 45, 128 };
    float *w = host_random((size_t)O * I, 0.05f), *b = host_random(O, 1.0f);
    float *x = host_random((size_t)128 * I, 1.0f), *res = host_random((size_t)128 * O, 4.0f);
    size_t bytes = emt_dtype_nbytes(t, (int64_t)O * I);
    uint8_t *q = malloc(bytes);
    encode_weights(t, w, (int64_t)O * I, q);
    emt_wmat Wd = { t, dev_bytes(q, bytes), NULL }, Wh = { t, q, NULL };
    float *db = dev_bytes(b, sizeof(float) * O), *dx = dev_bytes(x, sizeof(float) * 128 * I);
    float *dy = gpu->ops->alloc(gpu, sizeof(float) * 128 * O), *dref = gpu->ops->alloc(gpu, sizeof(float) * 128 * O);
    float *dtmp = gpu->ops->alloc(gpu, sizeof(float) * 128 * O);
    float *cy = malloc(sizeof(float) * 128 * O), *cref = malloc(sizeof(float) * 128 * O), *ctmp = malloc(sizeof(float) * 128 * O);
    int same_gpu = 1, same_cpu = 1, cpu_takes = (cpu->ops->weight_types & (1u << t)) != 0;
    int64_t launches = 0;
    for (int ri = 0; ri < 5; ri++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const int32_t R = rows[ri];
            const size_t n = (size_t)R * O;
            const float *bias_d = with_bias ? db : NULL, *bias_h = with_bias ? b : NULL;
            CHECK_OK(gpu->ops->upload(gpu, dy, res, n * sizeof(float)));
            CHECK_OK(gpu->ops->upload(gpu, dref, res, n * sizeof(float)));
            emt_exec_counters c0, c1;
            gpu->ops->counters(eg, &c0);
            gpu->ops->matmul_q_add(eg, &Wd, bias_d, dx, R, I, O, dy, dtmp);
            gpu->ops->counters(eg, &c1);
            launches = c1.launches - c0.launches;
            gpu->ops->matmul_q(eg, &Wd, bias_d, dx, R, I, O, dtmp);
            gpu->ops->add(eg, dref, dtmp, (int64_t)n);
            CHECK_OK(gpu->ops->sync(eg));
            float *got = download(dy, n), *want = download(dref, n);
            same_gpu &= !memcmp(got, want, n * sizeof(float));
            free(got);
            free(want);
            if (cpu_takes) {
                memcpy(cy, res, n * sizeof(float));
                memcpy(cref, res, n * sizeof(float));
                cpu->ops->matmul_q_add(ec, &Wh, bias_h, x, R, I, O, cy, ctmp);
                cpu->ops->matmul_q(ec, &Wh, bias_h, x, R, I, O, ctmp);
                cpu->ops->add(ec, cref, ctmp, (int64_t)n);
                same_cpu &= !memcmp(cy, cref, n * sizeof(float));
            }
        }
    printf("matmul_q_add %-5s 1/13/29/45/128 rows, 67 outputs, with and without bias: device %s matmul_q + add "
           "(%lld launch(es)), CPU %s\n", emt_dtype_name(t), same_gpu ? "bit-identical to" : "DIFFERS from",
           (long long)launches, !cpu_takes ? "(no CPU product for this dtype)" : same_cpu ? "bit-identical" : "DIFFERS");
    CHECK(same_gpu && same_cpu);
    CHECK(launches == (t == EMT_BF16 ? 1 : 2));
    void *rel[] = { (void *)Wd.data, db, dx, dy, dref, dtmp };
    for (int i = 0; i < 6; i++) gpu->ops->release(gpu, rel[i]);
    free(w); free(b); free(x); free(res); free(q); free(cy); free(cref); free(ctmp);
}

/* --------------------------------------------------------------- attention */

/* BF16 K/V caches for the attention calls below when set: the host keeps
 * the F32 values (already BF16-representable), the device and the CPU twin
 * get them as BF16. */
static int g_kv_bf16;

static void round_to_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = emt_bf16_to_f32(emt_f32_to_bf16(x[i]));
}

/* a cache as the attention ops read it: F32 as is, or a BF16 copy */
static void *cache_copy(const float *x, size_t n) {
    if (!g_kv_bf16) return (void *)x;
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; h && i < n; i++) h[i] = emt_f32_to_bf16(x[i]);
    return h;
}
static void cache_free(void *h) {
    if (g_kv_bf16) free(h);
}
static size_t cache_bytes(size_t n) { return n * (g_kv_bf16 ? 2 : 4); }

/* One attention call on the device, downloaded. */
static float *device_attention(const float *q, const float *k, const float *v, int32_t kv_rows, int32_t n_prefix,
                               int32_t n_rows, const uint8_t *mask, int32_t H, int32_t KV, int32_t hd, float cap) {
    size_t qn = (size_t)n_rows * H * hd, kn = (size_t)kv_rows * KV * hd;
    void *hk = cache_copy(k, kn), *hv = cache_copy(v, kn);
    float *dq = dev_bytes(q, qn * 4), *dk = dev_bytes(hk, cache_bytes(kn)), *dv = dev_bytes(hv, cache_bytes(kn));
    cache_free(hk);
    cache_free(hv);
    float *dout = gpu->ops->alloc(gpu, qn * 4);
    if (g_kv_bf16) gpu->ops->set_kv_dtype(eg, EMT_BF16);
    if (cap > 0) gpu->ops->attention_softcap(eg, dq, dk, dv, n_prefix, n_rows, mask, H, KV, hd, cap, dout);
    else gpu->ops->attention(eg, dq, dk, dv, n_prefix, n_rows, mask, H, KV, hd, dout);
    if (g_kv_bf16) gpu->ops->set_kv_dtype(eg, EMT_F32);
    CHECK_OK(gpu->ops->sync(eg));
    float *out = download(dout, qn);
    float *p[] = { dq, dk, dv, dout };
    for (int i = 0; i < 4; i++) gpu->ops->release(gpu, p[i]);
    return out;
}

/* A 128-node tree over a 3000-token prefix: each node's output equals, bit
 * for bit, the one-row AR call over the prefix and its ancestors laid out
 * contiguously; the deep branch crosses the chunk boundary at 3072. With
 * g_kv_bf16 the same over BF16 caches (the CPU twin reading the same BF16
 * values). head_dim 64 takes the tensor-core kernel, 96 the FP32 one. */
static void check_tree_vs_ar_at(int32_t P, float cap, int32_t hd) {
    const int32_t N = emt_test_size(128, 32), H = 8, KV = 2, width = KV * hd;
    uint8_t *mask = calloc((size_t)N * N, 1);
    for (int32_t i = 0; i < N; i++) { /* parents one or two nodes back: depth ~ 85 */
        if (i > 0) memcpy(mask + (size_t)i * N, mask + (size_t)(i - 1 - (i > 1 ? irand(2) : 0)) * N, (size_t)N);
        mask[(size_t)i * N + i] = 1;
    }
    float *q = host_random((size_t)N * H * hd, 1.0f), *k = host_random((size_t)(P + N) * width, 1.0f);
    float *v = host_random((size_t)(P + N) * width, 1.0f);
    if (g_kv_bf16) {
        round_to_bf16(k, (size_t)(P + N) * width);
        round_to_bf16(v, (size_t)(P + N) * width);
    }
    float *tree = device_attention(q, k, v, P + N, P, N, mask, H, KV, hd, cap);

    /* the CPU twin over the whole tree */
    float *cpu_o = malloc(sizeof(float) * N * H * hd);
    const float *ck = cache_copy(k, (size_t)(P + N) * width), *cv = cache_copy(v, (size_t)(P + N) * width);
    if (g_kv_bf16) cpu->ops->set_kv_dtype(ec, EMT_BF16);
    if (cap > 0) cpu->ops->attention_softcap(ec, q, ck, cv, P, N, mask, H, KV, hd, cap, cpu_o);
    else cpu->ops->attention(ec, q, ck, cv, P, N, mask, H, KV, hd, cpu_o);
    if (g_kv_bf16) cpu->ops->set_kv_dtype(ec, EMT_F32);
    cache_free((void *)ck);
    cache_free((void *)cv);
    double worst = 0;
    for (size_t i = 0; i < (size_t)N * H * hd; i++)
        worst = fmax(worst, fabs((double)tree[i] - cpu_o[i]) / (1.0 + fabs((double)cpu_o[i])));

    float *k2 = malloc(sizeof(float) * (P + N) * width), *v2 = malloc(sizeof(float) * (P + N) * width);
    memcpy(k2, k, sizeof(float) * P * width);
    memcpy(v2, v, sizeof(float) * P * width);
    int32_t checked = 0, equal = 0, deepest = 0;
    for (int32_t s = 0; s <= N / 17; s++) { /* a spread of nodes and the last (deepest) one */
        int32_t i = s < N / 17 ? s * 17 : N - 1, d = 0;
        for (int32_t j = 0; j < N; j++)
            if (mask[(size_t)i * N + j]) {
                memcpy(k2 + (size_t)(P + d) * width, k + (size_t)(P + j) * width, sizeof(float) * width);
                memcpy(v2 + (size_t)(P + d) * width, v + (size_t)(P + j) * width, sizeof(float) * width);
                d++;
            }
        /* AR: the node is the one new row at cache row P + d - 1 */
        float *ar = device_attention(q + (size_t)i * H * hd, k2, v2, P + d, P + d - 1, 1, NULL, H, KV, hd, cap);
        equal += !memcmp(ar, tree + (size_t)i * H * hd, sizeof(float) * H * hd);
        checked++;
        deepest = d > deepest ? d : deepest;
        free(ar);
    }
    printf("attention %d+%d tree%s, head_dim %d, %s KV: %d of %d nodes (deepest %d keys past the prefix) "
           "bit-identical to AR; worst relative difference to the CPU %.3g\n",
           P, N, cap > 0 ? " soft-capped" : "", hd, g_kv_bf16 ? "BF16" : "F32", equal, checked, deepest, worst);
    CHECK(equal == checked);
    CHECK(P + deepest > (P / 256 + 1) * 256); /* the deepest node's keys cross a 256-key chunk boundary */
    CHECK(worst < 1e-5);
    free(mask); free(q); free(k); free(v); free(tree); free(cpu_o); free(k2); free(v2);
}
static void check_tree_vs_ar(float cap, int32_t hd) { check_tree_vs_ar_at(emt_test_size(3000, 500), cap, hd); }

/* attention_window: a 64-node tree over a 3000-token prefix with a window
 * of 700 (the first 2300 or so prefix keys hidden, each row's ~700 keys in
 * three 256-key chunks), soft-capped or not: the CPU twin
 * within 1e-5 relative, each checked node bit-identical to the one-row AR
 * call at its position, and the causal prefill form (NULL mask) of 300 rows
 * after a 500-row prefix against the CPU. */
static void check_window(float cap) {
    const int32_t P = emt_test_size(3000, 500), N = 64, H = 4, KV = 2, hd = 64, width = KV * hd,
                  W = emt_test_size(700, 200);
    uint8_t *mask = calloc((size_t)N * N, 1);
    int32_t pos[64], depth[64];
    for (int32_t i = 0; i < N; i++) {
        int32_t parent = i > 0 ? i - 1 - (i > 1 ? irand(2) : 0) : -1;
        if (parent >= 0) memcpy(mask + (size_t)i * N, mask + (size_t)parent * N, (size_t)N);
        mask[(size_t)i * N + i] = 1;
        depth[i] = parent >= 0 ? depth[parent] + 1 : 0;
        pos[i] = P + depth[i];
    }
    float *q = host_random((size_t)N * H * hd, 1.0f), *k = host_random((size_t)(P + N) * width, 1.0f);
    float *v = host_random((size_t)(P + N) * width, 1.0f);
    size_t qn = (size_t)N * H * hd, kn = (size_t)(P + N) * width;
    float *dq = dev_bytes(q, qn * 4), *dk = dev_bytes(k, kn * 4), *dv = dev_bytes(v, kn * 4);
    float *dout = gpu->ops->alloc(gpu, qn * 4);
    gpu->ops->attention_window(eg, dq, dk, dv, P, N, mask, pos, H, KV, hd, W, cap, dout);
    CHECK_OK(gpu->ops->sync(eg));
    float *tree = download(dout, qn), *cpu_o = malloc(sizeof(float) * qn);
    cpu->ops->attention_window(ec, q, k, v, P, N, mask, pos, H, KV, hd, W, cap, cpu_o);
    double worst = 0;
    for (size_t i = 0; i < qn; i++) worst = fmax(worst, fabs((double)tree[i] - cpu_o[i]) / (1.0 + fabs((double)cpu_o[i])));
    float *k2 = malloc(sizeof(float) * kn), *v2 = malloc(sizeof(float) * kn);
    memcpy(k2, k, sizeof(float) * P * width);
    memcpy(v2, v, sizeof(float) * P * width);
    int32_t checked = 0, equal = 0;
    for (int32_t i = 0; i < N; i += 9) {
        int32_t d = 0;
        for (int32_t j = 0; j < N; j++)
            if (mask[(size_t)i * N + j]) {
                memcpy(k2 + (size_t)(P + d) * width, k + (size_t)(P + j) * width, sizeof(float) * width);
                memcpy(v2 + (size_t)(P + d) * width, v + (size_t)(P + j) * width, sizeof(float) * width);
                d++;
            }
        float *dq1 = dev_bytes(q + (size_t)i * H * hd, (size_t)H * hd * 4), *dk2 = dev_bytes(k2, kn * 4);
        float *dv2 = dev_bytes(v2, kn * 4), *do1 = gpu->ops->alloc(gpu, (size_t)H * hd * 4);
        gpu->ops->attention_window(eg, dq1, dk2, dv2, P + d - 1, 1, NULL, &pos[i], H, KV, hd, W, cap, do1);
        CHECK_OK(gpu->ops->sync(eg));
        float *ar = download(do1, (size_t)H * hd);
        equal += !memcmp(ar, tree + (size_t)i * H * hd, sizeof(float) * H * hd);
        checked++;
        float *rel[] = { dq1, dk2, dv2, do1 };
        for (int r = 0; r < 4; r++) gpu->ops->release(gpu, rel[r]);
        free(ar);
    }
    /* causal prefill rows 500..799 (positions = rows; 200..399 shrunk) */
    const int32_t PP = emt_test_size(500, 200), NR = emt_test_size(300, 200);
    int32_t *ppos = malloc(sizeof(int32_t) * NR);
    for (int32_t i = 0; i < NR; i++) ppos[i] = PP + i;
    float *qq = host_random((size_t)NR * H * hd, 1.0f), *dqq = dev_bytes(qq, (size_t)NR * H * hd * 4);
    float *dpo = gpu->ops->alloc(gpu, (size_t)NR * H * hd * 4), *cpo = malloc(sizeof(float) * NR * H * hd);
    gpu->ops->attention_window(eg, dqq, dk, dv, PP, NR, NULL, ppos, H, KV, hd, 128, cap, dpo);
    CHECK_OK(gpu->ops->sync(eg));
    float *gpo = download(dpo, (size_t)NR * H * hd);
    cpu->ops->attention_window(ec, qq, k, v, PP, NR, NULL, ppos, H, KV, hd, 128, cap, cpo);
    double worst_p = 0;
    for (size_t i = 0; i < (size_t)NR * H * hd; i++)
        worst_p = fmax(worst_p, fabs((double)gpo[i] - cpo[i]) / (1.0 + fabs((double)cpo[i])));
    printf("attention_window %d+%d tree, window %d%s: %d of %d nodes bit-identical to AR; worst relative "
           "difference to the CPU %.3g (tree), %.3g (causal %d rows, window 128)\n",
           P, N, W, cap > 0 ? " soft-capped" : "", equal, checked, worst, worst_p, NR);
    CHECK(equal == checked);
    CHECK(worst < 1e-5);
    CHECK(worst_p < 1e-5);
    float *rel[] = { dq, dk, dv, dout, dqq, dpo };
    for (int r = 0; r < 6; r++) gpu->ops->release(gpu, rel[r]);
    free(mask); free(q); free(k); free(v); free(tree); free(cpu_o); free(k2); free(v2);
    free(ppos); free(qq); free(cpo); free(gpo);
}

/* round_bf16 (how K/V rows enter a BF16 cache): the device's bits equal
 * the CPU's for random values, halfway cases (ties to even), subnormals,
 * infinities, overflow to infinity and NaN, with a length that is not a
 * multiple of 4 (the kernel's scalar tail); NaNs stay NaNs. */
static void check_round_bf16(void) {
    const size_t n = 1027;
    float *x = host_random(n, 3.0f);
    const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0xbf808000u, 0x00000001u, 0x00408000u, 0x80000000u,
                                 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x7fc00001u, 0x7f800001u, 0x3f80ffffu };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) memcpy(&x[i * 37], &special[i], 4);
    float *dx = dev_bytes(x, n * 4);
    uint16_t *dy = gpu->ops->alloc(gpu, n * 2), *got = malloc(n * 2), *want = malloc(n * 2);
    gpu->ops->round_bf16(eg, dx, (int64_t)n, dy);
    CHECK_OK(gpu->ops->sync(eg));
    CHECK_OK(gpu->ops->download(eg, got, dy, n * 2));
    cpu->ops->round_bf16(ec, x, (int64_t)n, want);
    int32_t same = 0;
    /* a NaN stays a NaN; its payload may differ (sm_80+ cvt.rn gives the canonical one) */
    for (size_t i = 0; i < n; i++)
        same += got[i] == want[i] || ((got[i] & 0x7fff) > 0x7f80 && (want[i] & 0x7fff) > 0x7f80);
    /* rows that do not start on 16 / 8 bytes (a KV row width not a multiple of 4): the scalar path
     * (element 0 keeps what the aligned call wrote) */
    gpu->ops->round_bf16(eg, dx + 1, (int64_t)n - 1, dy + 1);
    CHECK_OK(gpu->ops->sync(eg));
    CHECK_OK(gpu->ops->download(eg, got, dy, n * 2));
    int32_t same_unaligned = 0;
    for (size_t i = 0; i < n; i++)
        same_unaligned += got[i] == want[i] || ((got[i] & 0x7fff) > 0x7f80 && (want[i] & 0x7fff) > 0x7f80);
    printf("round_bf16: %d of %zu values bit-identical to the CPU's (%d unaligned)\n", same, n, same_unaligned);
    CHECK(same == (int32_t)n && same_unaligned == (int32_t)n);
    CHECK(want[0] == 0x3f80 && want[37] == 0x3f82 && want[6 * 37] == 0x7f80 && want[8 * 37] == 0x7f80);
    gpu->ops->release(gpu, dx);
    gpu->ops->release(gpu, dy);
    free(x); free(got); free(want);
}

/* rope_round_kv (K roped and K, V rounded into BF16 cache rows in one
 * launch): the device's bits equal the CPU twin's, and the CPU twin's equal
 * rope() then round_bf16(), at host positions and at device-resident ones
 * (rope_dyn's len + offsets), for full and partial rotary (n_rot < head_dim:
 * the unrotated dims only rounded) and GQA's 8 heads of 128 at 64 rows. */
static void check_rope_round_kv(int32_t n_rows, int32_t n_kv_heads, int32_t hd, int32_t n_rot, int dyn) {
    const size_t n = (size_t)n_rows * n_kv_heads * hd;
    float *k = host_random(n, 4.0f), *v = host_random(n, 4.0f), *roped = malloc(n * 4);
    int32_t *pos = malloc((size_t)n_rows * 4), len = 2990;
    float *inv_freq = malloc((size_t)(n_rot / 2 + 1) * 4);
    for (int32_t r = 0; r < n_rows; r++) pos[r] = dyn ? irand(9) : 3000 + irand(500);
    for (int32_t i = 0; i < n_rot / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    float *dk = dev_bytes(k, n * 4), *dv = dev_bytes(v, n * 4);
    int32_t *dlen = dev_bytes(&len, 4); /* rope_dyn's rows: the length on the device, the offsets on the host */
    uint16_t *dko = gpu->ops->alloc(gpu, n * 2), *dvo = gpu->ops->alloc(gpu, n * 2);
    uint16_t *gk = malloc(n * 2), *gv = malloc(n * 2), *ck = malloc(n * 2), *cv = malloc(n * 2);
    uint16_t *rk = malloc(n * 2), *rv = malloc(n * 2);
    const emt_dyn_rows hrows = { &len, pos, 0 }, drows = { dlen, pos, 0 };
    gpu->ops->rope_round_kv(eg, dk, dv, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos, dyn ? &drows : NULL,
                            inv_freq, dko, dvo);
    CHECK_OK(gpu->ops->sync(eg));
    CHECK_OK(gpu->ops->download(eg, gk, dko, n * 2));
    CHECK_OK(gpu->ops->download(eg, gv, dvo, n * 2));
    float *gk_in = download(dk, n); /* the kernel leaves its inputs alone */
    cpu->ops->rope_round_kv(ec, k, v, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos, dyn ? &hrows : NULL, inv_freq,
                            ck, cv);
    memcpy(roped, k, n * 4); /* the unfused reference: rope() then round_bf16() */
    if (dyn) cpu->ops->rope_dyn(ec, roped, n_rows, n_kv_heads, hd, n_rot, &hrows, inv_freq);
    else cpu->ops->rope(ec, roped, n_rows, n_kv_heads, hd, n_rot, pos, inv_freq);
    cpu->ops->round_bf16(ec, roped, (int64_t)n, rk);
    cpu->ops->round_bf16(ec, v, (int64_t)n, rv);
    size_t same_gpu = 0, same_ref = 0;
    for (size_t i = 0; i < n; i++) {
        same_gpu += gk[i] == ck[i] && gv[i] == cv[i];
        same_ref += ck[i] == rk[i] && cv[i] == rv[i];
    }
    printf("rope_round_kv %2d rows x %d heads x %3d (n_rot %3d, %s positions): %zu of %zu K/V values bit-identical "
           "to the CPU's, CPU's %zu to rope + round_bf16\n",
           n_rows, n_kv_heads, hd, n_rot, dyn ? "device" : "host", same_gpu, n, same_ref);
    CHECK(same_gpu == n && same_ref == n);
    CHECK(memcmp(gk_in, k, n * 4) == 0);
    void *rel[] = { dk, dv, dlen, dko, dvo };
    for (int i = 0; i < 5; i++) gpu->ops->release(gpu, rel[i]);
    free(k); free(v); free(roped); free(pos); free(inv_freq); free(gk); free(gv); free(ck); free(cv); free(rk);
    free(rv); free(gk_in);
}

/* rope_q_round_kv (Q roped in place, K roped and K, V rounded into BF16
 * cache rows, one launch): the device's Q, K and V bits equal the CPU
 * twin's, the CPU twin's equal rope() then rope_round_kv(), and the device's
 * equal its own rope() then rope_round_kv(), at host and device-resident
 * positions, full and partial rotary, GQA. */
static void check_rope_q_round_kv(int32_t n_rows, int32_t n_heads, int32_t n_kv_heads, int32_t hd, int32_t n_rot,
                                  int dyn) {
    const size_t nq = (size_t)n_rows * n_heads * hd, n = (size_t)n_rows * n_kv_heads * hd;
    float *q = host_random(nq, 4.0f), *k = host_random(n, 4.0f), *v = host_random(n, 4.0f);
    float *cq = malloc(nq * 4), *rq = malloc(nq * 4);
    int32_t *pos = malloc((size_t)n_rows * 4), len = 2990;
    float *inv_freq = malloc((size_t)(n_rot / 2 + 1) * 4);
    for (int32_t r = 0; r < n_rows; r++) pos[r] = dyn ? irand(9) : 3000 + irand(500);
    for (int32_t i = 0; i < n_rot / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    float *dq = dev_bytes(q, nq * 4), *dq2 = dev_bytes(q, nq * 4), *dk = dev_bytes(k, n * 4), *dv = dev_bytes(v, n * 4);
    int32_t *dlen = dev_bytes(&len, 4);
    uint16_t *dko = gpu->ops->alloc(gpu, n * 2), *dvo = gpu->ops->alloc(gpu, n * 2);
    uint16_t *dko2 = gpu->ops->alloc(gpu, n * 2), *dvo2 = gpu->ops->alloc(gpu, n * 2);
    uint16_t *ck = malloc(n * 2), *cv = malloc(n * 2), *rk = malloc(n * 2), *rv = malloc(n * 2);
    uint16_t *gk = malloc(n * 2), *gv = malloc(n * 2), *gk2 = malloc(n * 2), *gv2 = malloc(n * 2);
    const emt_dyn_rows hrows = { &len, pos, 0 }, drows = { dlen, pos, 0 };
    emt_exec_counters c0, c1;
    gpu->ops->counters(eg, &c0);
    gpu->ops->rope_q_round_kv(eg, dq, n_heads, dk, dv, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos,
                              dyn ? &drows : NULL, inv_freq, dko, dvo);
    gpu->ops->counters(eg, &c1);
    /* the device's separate ops */
    if (dyn) gpu->ops->rope_dyn(eg, dq2, n_rows, n_heads, hd, n_rot, &drows, inv_freq);
    else gpu->ops->rope(eg, dq2, n_rows, n_heads, hd, n_rot, pos, inv_freq);
    gpu->ops->rope_round_kv(eg, dk, dv, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos, dyn ? &drows : NULL, inv_freq,
                            dko2, dvo2);
    CHECK_OK(gpu->ops->sync(eg));
    float *gq = download(dq, nq), *gq2 = download(dq2, nq);
    CHECK_OK(gpu->ops->download(eg, gk, dko, n * 2));
    CHECK_OK(gpu->ops->download(eg, gv, dvo, n * 2));
    CHECK_OK(gpu->ops->download(eg, gk2, dko2, n * 2));
    CHECK_OK(gpu->ops->download(eg, gv2, dvo2, n * 2));
    /* the CPU twin, and its separate ops */
    memcpy(cq, q, nq * 4);
    memcpy(rq, q, nq * 4);
    cpu->ops->rope_q_round_kv(ec, cq, n_heads, k, v, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos,
                              dyn ? &hrows : NULL, inv_freq, ck, cv);
    if (dyn) cpu->ops->rope_dyn(ec, rq, n_rows, n_heads, hd, n_rot, &hrows, inv_freq);
    else cpu->ops->rope(ec, rq, n_rows, n_heads, hd, n_rot, pos, inv_freq);
    cpu->ops->rope_round_kv(ec, k, v, n_rows, n_kv_heads, hd, n_rot, dyn ? NULL : pos, dyn ? &hrows : NULL, inv_freq,
                            rk, rv);
    size_t same_cpu = 0, same_ref = 0, same_self = 0;
    for (size_t i = 0; i < nq; i++) {
        same_cpu += !memcmp(gq + i, cq + i, 4);
        same_ref += !memcmp(cq + i, rq + i, 4);
        same_self += !memcmp(gq + i, gq2 + i, 4);
    }
    for (size_t i = 0; i < n; i++) {
        same_cpu += gk[i] == ck[i] && gv[i] == cv[i];
        same_ref += ck[i] == rk[i] && cv[i] == rv[i];
        same_self += gk[i] == gk2[i] && gv[i] == gv2[i];
    }
    printf("rope_q_round_kv %2d rows x %d/%d heads x %3d (n_rot %3d, %s positions), %lld launch(es): of %zu Q and K/V "
           "values %zu bit-identical to the CPU's, %zu to the device's rope + rope_round_kv; CPU's %zu to its own\n",
           n_rows, n_heads, n_kv_heads, hd, n_rot, dyn ? "device" : "host", (long long)(c1.launches - c0.launches),
           nq + n, same_cpu, same_self, same_ref);
    CHECK(same_cpu == nq + n && same_ref == nq + n && same_self == nq + n);
    CHECK(c1.launches - c0.launches == 1);
    void *rel[] = { dq, dq2, dk, dv, dlen, dko, dvo, dko2, dvo2 };
    for (int i = 0; i < 9; i++) gpu->ops->release(gpu, rel[i]);
    void *fr[] = { q, k, v, cq, rq, pos, inv_freq, ck, cv, rk, rv, gk, gv, gk2, gv2, gq, gq2 };
    for (int i = 0; i < 17; i++) free(fr[i]);
}

/* ------------------------------------------------------------ Gemma ops */

static void check_gemma_elementwise(void) {
    const int64_t n = 4096 * 256 + 1001; /* past the grid-stride cap */
    float *a = host_random(n, 6.0f), *b = host_random(n, 3.0f), *out = malloc(sizeof(float) * n);
    float *da = dev_bytes(a, sizeof(float) * n), *db = dev_bytes(b, sizeof(float) * n);
    float *dout = gpu->ops->alloc(gpu, sizeof(float) * n);
    struct { const char *name; double tol; } ops[] = { { "geglu", 1e-5 }, { "scale", 0 }, { "softcap", 1e-6 } };
    for (int k = 0; k < 3; k++) {
        if (k == 0) {
            cpu->ops->geglu(ec, a, b, n, out);
            gpu->ops->geglu(eg, da, db, n, dout);
        } else if (k == 1) {
            memcpy(out, a, sizeof(float) * n);
            cpu->ops->scale(ec, out, n, 5.656854f);
            CHECK_OK(gpu->ops->upload(gpu, dout, a, sizeof(float) * n));
            gpu->ops->scale(eg, dout, n, 5.656854f);
        } else {
            memcpy(out, a, sizeof(float) * n);
            cpu->ops->softcap(ec, out, n, 5.0f); /* |a| up to 6: into tanh's bend */
            CHECK_OK(gpu->ops->upload(gpu, dout, a, sizeof(float) * n));
            gpu->ops->softcap(eg, dout, n, 5.0f);
        }
        float *g = download(dout, n);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)g[i] - out[i]) / (1.0 + fabs((double)out[i])));
        printf("%-8s %lld values, worst relative difference %.3g (tolerance %g)\n", ops[k].name, (long long)n, worst,
               ops[k].tol);
        CHECK(worst <= ops[k].tol);
        free(g);
    }
    gpu->ops->release(gpu, da); gpu->ops->release(gpu, db); gpu->ops->release(gpu, dout);
    free(a); free(b); free(out);
}

int main(void) {
    if (!emt_cuda_test_open_pair(&cpu, &ec, &gpu, &eg)) return 77;
    if (ec && eg) {
        const emt_dtype types[] = { EMT_F32, EMT_F16, EMT_BF16, EMT_Q8_0, EMT_Q4_0, EMT_Q4_1, EMT_Q4_K };
        for (int i = 0; i < 7; i++) {
            CHECK(types[i] == EMT_F32 || (gpu->ops->weight_types & (1u << types[i])));
            check_product(types[i], types[i] == EMT_Q4_K ? 1280 : 1056);
            if (types[i] == EMT_Q8_0 || types[i] == EMT_Q4_0 || types[i] == EMT_Q4_1) check_product(types[i], 1280);
        }
        /* 4352 = 136 units, 34 chunks of 128: the weight rings wrap around (the
         * staged kernel's 4 slices of 32 units, the last one 8 units; the
         * tensor-core kernel's 8 or 3 chunks) */
        check_product(EMT_BF16, 4352);
        check_product(EMT_Q4_0, 4352);
        check_product(EMT_Q4_K, 4352);
        check_fused(EMT_BF16);
        check_fused(EMT_Q8_0);
        check_matmul_add(EMT_BF16);
        check_matmul_add(EMT_Q8_0);
        check_tree_vs_ar(0.0f, 64);
        check_tree_vs_ar(50.0f, 64); /* Gemma 2's attention soft-cap */
        g_kv_bf16 = 1; /* BF16 caches: the tensor-core kernel, soft-capped, and the FP32 kernel */
        check_round_bf16();
        check_rope_round_kv(64, 8, 128, 128, 0);
        check_rope_round_kv(5, 3, 64, 32, 1); /* partial rotary, odd head count */
        check_rope_round_kv(1, 2, 96, 96, 1);
        check_rope_q_round_kv(64, 32, 8, 128, 128, 0);
        check_rope_q_round_kv(5, 9, 3, 64, 32, 1); /* partial rotary, odd head counts */
        check_rope_q_round_kv(1, 4, 2, 96, 96, 1);
        check_tree_vs_ar(0.0f, 64);
        check_tree_vs_ar(50.0f, 64);
        check_tree_vs_ar(0.0f, 128); /* the verify's prefetch over several loads per thread */
        /* nodes on both sides of the first span's end (ATTN_SPAN, 256 keys):
         * the tree's call merges partials, the AR calls of its shallow nodes
         * write their one span's output directly; the same bits either way */
        check_tree_vs_ar_at(emt_test_size(240, 250), 0.0f, 128);
        check_tree_vs_ar_at(emt_test_size(240, 250), 50.0f, 64);
        check_tree_vs_ar(0.0f, 96);
        g_kv_bf16 = 0;
        check_window(0.0f);
        check_window(50.0f);
        check_gemma_elementwise();
        CHECK_OK(gpu->ops->sync(eg));
    }
    emt_cuda_test_close_pair(cpu, ec, gpu, eg);
    return emt_test_finish("test_cuda_kernels");
}
