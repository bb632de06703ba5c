/* CPU backend ops against naive double-precision references on random
 * inputs with odd sizes, and the batch invariance the lossless invariant
 * rests on: a row computed alone equals the same row inside a batch, bit for
 * bit (matmul and tree attention). Every kernel variant this processor runs
 * is checked. */
#include "backend/backend.h"
#include "backend/cpu/cpu_variants.h"
#include "check.h"

#include <math.h>

static uint64_t rng = 42;
static int variant_fma; /* the variant's madd is one fused operation */
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The documented per-output sequence, one lane at a time: lane l sums
 * w[i]*x[i] for i = l mod 8 in steps of 8 (one rounding with FMA, like the
 * kernel), then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the scalar tail. */
static float ref_dot(const float *w, const float *x, int32_t n) {
    float a[8] = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) {
            a[l] = variant_fma ? fmaf(w[i + l], x[i + l], a[l]) : a[l] + w[i + l] * x[i + l];
        }
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

/* Every row count 1..20 (each register block and row split) and odd sizes
 * (n_in not a multiple of 8, n_out not a multiple of the output group):
 * each output has the reference sequence's bits, so a row's results do not
 * depend on the other rows in the call. */
static void matmul_bits(emt_exec *ex, const emt_backend_ops *op) {
    const int32_t sizes[][2] = { { 576, 61 }, { 37, 13 }, { 8, 6 }, { 1, 1 }, { 100, 25 } };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int32_t I = sizes[si][0], O = sizes[si][1];
        for (int32_t R = 1; R <= 20; R++) {
            float *W = malloc(sizeof(float) * (size_t)O * I), *b = malloc(sizeof(float) * (size_t)O);
            float *x = malloc(sizeof(float) * (size_t)R * I), *y = malloc(sizeof(float) * (size_t)R * O);
            for (int64_t i = 0; i < (int64_t)O * I; i++) W[i] = urand();
            for (int32_t i = 0; i < O; i++) b[i] = urand();
            for (int64_t i = 0; i < (int64_t)R * I; i++) x[i] = urand();
            const float *bias = R % 2 ? b : NULL;
            op->matmul(ex, W, bias, x, R, I, O, y, 1);
            int bad = 0;
            for (int32_t r = 0; r < R; r++)
                for (int32_t o = 0; o < O; o++) {
                    float ref = ref_dot(W + (size_t)o * I, x + (size_t)r * I, I);
                    if (bias) ref = ref + bias[o];
                    bad += memcmp(&ref, y + (size_t)r * O + o, sizeof ref) != 0;
                }
            if (bad) {
                fprintf(stderr, "matmul %dx%dx%d: %d outputs differ from the reference sequence\n", R, I, O, bad);
                emt_test_failures++;
            }
            free(W); free(b); free(x); free(y);
        }
    }
}

/* Row r of a tree as an AR row: the cache (k1, v1) holds the P prefix keys
 * and then the tree keys row r sees, in order; returns their count. */
static int32_t keys_of_row(const float *k, const float *v, int32_t P, int32_t N, const uint8_t *mask, int32_t r,
                           size_t row, float *k1, float *v1) {
    memcpy(k1, k, sizeof(float) * P * row);
    memcpy(v1, v, sizeof(float) * P * row);
    int32_t n = P;
    for (int32_t c = 0; c < N; c++)
        if (mask[r * N + c]) {
            memcpy(k1 + n * row, k + (P + c) * row, sizeof(float) * row);
            memcpy(v1 + n * row, v + (P + c) * row, sizeof(float) * row);
            n++;
        }
    return n;
}

/* The same over BF16 K/V caches (set_kv_dtype): each tree row equals its AR
 * row bit for bit, and both equal, bit for bit, attention over F32 caches
 * holding the same (BF16-representable) values; round_bf16 rounds to
 * nearest even. */
static uint16_t *to_bf16(const float *x, size_t n) {
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; h && i < n; i++) h[i] = emt_f32_to_bf16(x[i]);
    return h;
}

/* rope_round_kv (K roped, K and V rounded into BF16 cache rows, one op):
 * bit for bit rope() (or rope_dyn()) then round_bf16() on each, with partial
 * rotary (the unrotated dims only rounded), leaving its inputs alone. */
static void rope_round_kv_matches(emt_exec *ex, const emt_backend_ops *op) {
    enum { R = 3, KV = 2, HD = 24, N = R * KV * HD };
    const int32_t n_rot[2] = { HD, 16 };
    float k[N], v[N], k0[N], roped[N], inv_freq[HD / 2];
    int32_t pos[R] = { 5, 700, 1 }, len = 40;
    uint16_t ko[N], vo[N], want_k[N], want_v[N];
    for (int i = 0; i < N; i++) k[i] = k0[i] = 8 * urand(), v[i] = 8 * urand();
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = powf(10000.0f, -(float)i / (HD / 2));
    for (int dyn = 0; dyn < 2; dyn++)
        for (int ri = 0; ri < 2; ri++) {
            const emt_dyn_rows rows = { &len, pos, 0 };
            op->rope_round_kv(ex, k, v, R, KV, HD, n_rot[ri], dyn ? NULL : pos, dyn ? &rows : NULL, inv_freq, ko, vo);
            memcpy(roped, k, sizeof k);
            if (dyn) op->rope_dyn(ex, roped, R, KV, HD, n_rot[ri], &rows, inv_freq);
            else op->rope(ex, roped, R, KV, HD, n_rot[ri], pos, inv_freq);
            op->round_bf16(ex, roped, N, want_k);
            op->round_bf16(ex, v, N, want_v);
            CHECK(memcmp(ko, want_k, sizeof ko) == 0 && memcmp(vo, want_v, sizeof vo) == 0);
            CHECK(memcmp(k, k0, sizeof k) == 0);
            CHECK(memcmp(roped, k, sizeof k) != 0); /* the rotation did something */
        }
}

/* rope_q_round_kv: rope() (or rope_dyn()) on Q, then rope_round_kv(), bit
 * for bit, with partial rotary and GQA (3 query heads on 1 KV head). */
static void rope_q_round_kv_matches(emt_exec *ex, const emt_backend_ops *op) {
    enum { R = 3, H = 3, KV = 1, HD = 24, NQ = R * H * HD, N = R * KV * HD };
    const int32_t n_rot[2] = { HD, 16 };
    float q[NQ], q_want[NQ], k[N], v[N], inv_freq[HD / 2];
    int32_t pos[R] = { 9, 1, 300 }, len = 77;
    uint16_t ko[N], vo[N], want_k[N], want_v[N];
    for (int i = 0; i < N; i++) k[i] = 8 * urand(), v[i] = 8 * urand();
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = powf(10000.0f, -(float)i / (HD / 2));
    for (int dyn = 0; dyn < 2; dyn++)
        for (int ri = 0; ri < 2; ri++) {
            const emt_dyn_rows rows = { &len, pos, 0 };
            for (int i = 0; i < NQ; i++) q[i] = q_want[i] = 8 * urand();
            op->rope_q_round_kv(ex, q, H, k, v, R, KV, HD, n_rot[ri], dyn ? NULL : pos, dyn ? &rows : NULL, inv_freq,
                                ko, vo);
            if (dyn) op->rope_dyn(ex, q_want, R, H, HD, n_rot[ri], &rows, inv_freq);
            else op->rope(ex, q_want, R, H, HD, n_rot[ri], pos, inv_freq);
            op->rope_round_kv(ex, k, v, R, KV, HD, n_rot[ri], dyn ? NULL : pos, dyn ? &rows : NULL, inv_freq, want_k,
                              want_v);
            CHECK(memcmp(q, q_want, sizeof q) == 0);
            CHECK(memcmp(ko, want_k, sizeof ko) == 0 && memcmp(vo, want_v, sizeof vo) == 0);
        }
}

/* matmul_q_add: y += the product, bit for bit matmul_q() then add(), with
 * and without a bias, over row counts that take different tiles. */
static void matmul_q_add_matches(emt_exec *ex, const emt_backend_ops *op) {
    enum { I = 96, O = 37, RMAX = 9 };
    uint16_t w[O * I];
    float b[O], x[RMAX * I], y[RMAX * O], want[RMAX * O], tmp[RMAX * O];
    for (int i = 0; i < O * I; i++) w[i] = emt_f32_to_bf16(0.1f * urand());
    for (int i = 0; i < O; i++) b[i] = urand();
    for (int i = 0; i < RMAX * I; i++) x[i] = urand();
    const emt_wmat W = { EMT_BF16, w, NULL, 0 };
    const int32_t rows[3] = { 1, 4, RMAX };
    for (int ri = 0; ri < 3; ri++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const int32_t R = rows[ri];
            for (int i = 0; i < R * O; i++) y[i] = want[i] = 4 * urand();
            op->matmul_q_add(ex, &W, with_bias ? b : NULL, x, R, I, O, y, tmp);
            op->matmul_q(ex, &W, with_bias ? b : NULL, x, R, I, O, tmp);
            op->add(ex, want, tmp, (int64_t)R * O);
            CHECK(memcmp(y, want, sizeof(float) * (size_t)R * O) == 0);
        }
}

static void attention_blocks_bf16(emt_exec *ex, const emt_backend_ops *op) {
    const float halfway[3] = { 1.00390625f, 1.01171875f, -1.00390625f }; /* ties: to the even neighbour */
    uint16_t rounded[3];
    op->round_bf16(ex, halfway, 3, rounded);
    CHECK(rounded[0] == 0x3f80 && rounded[1] == 0x3f82 && rounded[2] == 0xbf80);
    const int32_t dims[] = { 64, 20 };
    for (int di = 0; di < 2; di++) {
        const int32_t H = 6, KV = 2, hd = dims[di], P = 150, N = 11;
        uint8_t mask[11 * 11];
        for (int r = 0; r < N; r++)
            for (int c = 0; c < N; c++) {
                int a = r;
                while (a > c) a = (a - 1) / 2;
                mask[r * N + c] = a == c;
            }
        size_t row = (size_t)KV * hd, qrow = (size_t)H * hd, kn = (size_t)(P + N) * row;
        float *q = malloc(sizeof(float) * N * qrow), *k = malloc(sizeof(float) * kn), *v = malloc(sizeof(float) * kn);
        float *out = malloc(sizeof(float) * N * qrow), *ref = malloc(sizeof(float) * N * qrow);
        float *k1 = malloc(sizeof(float) * kn), *v1 = malloc(sizeof(float) * kn), *o1 = malloc(sizeof(float) * qrow);
        for (size_t i = 0; i < N * qrow; i++) q[i] = 3 * urand();
        for (size_t i = 0; i < kn; i++) { /* BF16-representable values */
            k[i] = emt_bf16_to_f32(emt_f32_to_bf16(urand()));
            v[i] = emt_bf16_to_f32(emt_f32_to_bf16(urand()));
        }
        uint16_t *k16 = to_bf16(k, kn), *v16 = to_bf16(v, kn);
        op->attention(ex, q, k, v, P, N, mask, H, KV, hd, ref); /* F32 caches of the same values */
        op->set_kv_dtype(ex, EMT_BF16);
        op->attention(ex, q, (const float *)(void *)k16, (const float *)(void *)v16, P, N, mask, H, KV, hd, out);
        CHECK(!memcmp(out, ref, sizeof(float) * N * qrow));
        for (int r = 0; r < N; r++) {
            int32_t n = keys_of_row(k, v, P, N, mask, r, row, k1, v1);
            uint16_t *k1h = to_bf16(k1, (size_t)n * row), *v1h = to_bf16(v1, (size_t)n * row);
            op->attention(ex, q + r * qrow, (const float *)(void *)k1h, (const float *)(void *)v1h, n - 1, 1, NULL, H,
                          KV, hd, o1);
            if (memcmp(o1, out + r * qrow, sizeof(float) * qrow)) {
                fprintf(stderr, "attention hd %d, BF16 KV: tree row %d differs from its AR computation\n", hd, r);
                emt_test_failures++;
            }
            free(k1h); free(v1h);
        }
        op->set_kv_dtype(ex, EMT_F32);
        free(q); free(k); free(v); free(out); free(ref); free(k1); free(v1); free(o1); free(k16); free(v16);
    }
}

/* The softmax's weights against exp in double: a query row that sees two
 * keys, scores 0 and s (s from 0 down to -87, 3000 values, and a few below),
 * with V rows (1, 0, ...) and (0, 1, ...), gives out[1] = e^s / (1 + e^s).
 * The attention's own exp is good to about 2 ulp, and the steps after it
 * (the sum 1 + e^s, the fold's 1 / l) add about 2 more: 6e-7 relative. Below
 * -87 the weight is 0 or below 2^-125. */
static void attention_softmax_precision(emt_exec *ex, const emt_backend_ops *op) {
    const int32_t hd = 8;
    const float scale = 1.0f / sqrtf((float)hd); /* the op's own */
    float q[8] = { 0 }, k[2 * 8] = { 0 }, v[2 * 8] = { 0 }, out[8];
    k[8] = 1.0f; /* the row's own key: score q[0] * scale */
    v[0] = 1.0f;
    v[8 + 1] = 1.0f;
    double worst = 0, worst_s = 0;
    for (int i = 0; i <= 3005; i++) {
        float want_s = i <= 3000 ? -87.0f * (float)i / 3000.0f : -87.0f - 10.0f * (float)(i - 3000);
        q[0] = want_s / scale;
        float s = q[0] * scale;
        op->attention(ex, q, k, v, 1, 1, NULL, 1, 1, hd, out);
        double p = exp((double)s), ref = p / (1.0 + p);
        if (s >= -87.0f) {
            double rel = fabs(out[1] - ref) / ref;
            if (rel > worst) {
                worst = rel;
                worst_s = s;
            }
        } else if (!(out[1] >= 0.0f && out[1] < 0x1p-125f)) {
            fprintf(stderr, "attention softmax: score %.9g gives weight %.9g\n", s, out[1]);
            emt_test_failures++;
        }
    }
    if (worst > 6e-7) {
        fprintf(stderr, "attention softmax: relative error %.3g at score %.9g\n", worst, worst_s);
        emt_test_failures++;
    }
}

/* Tree attention over several key blocks (prefix of 150, head_dim 64 and an
 * odd one): each tree row equals the same query computed alone as an AR row
 * whose cache holds the prefix and the row's ancestors in order. */
static void attention_blocks(emt_exec *ex, const emt_backend_ops *op) {
    const int32_t dims[] = { 64, 20 };
    for (int di = 0; di < 2; di++) {
        const int32_t H = 6, KV = 2, hd = dims[di], P = 150, N = 11;
        uint8_t mask[11 * 11];
        for (int r = 0; r < N; r++) /* node r's parent: (r - 1) / 2 */
            for (int c = 0; c < N; c++) {
                int a = r;
                while (a > c) a = (a - 1) / 2;
                mask[r * N + c] = a == c;
            }
        size_t row = (size_t)KV * hd, qrow = (size_t)H * hd;
        float *q = malloc(sizeof(float) * N * qrow), *k = malloc(sizeof(float) * (P + N) * row);
        float *v = malloc(sizeof(float) * (P + N) * row), *out = malloc(sizeof(float) * N * qrow);
        float *k1 = malloc(sizeof(float) * (P + N) * row), *v1 = malloc(sizeof(float) * (P + N) * row);
        float *o1 = malloc(sizeof(float) * qrow);
        for (size_t i = 0; i < N * qrow; i++) q[i] = 3 * urand();
        for (size_t i = 0; i < (P + N) * row; i++) { k[i] = urand(); v[i] = urand(); }
        op->attention(ex, q, k, v, P, N, mask, H, KV, hd, out);
        for (int r = 0; r < N; r++) {
            int32_t n = keys_of_row(k, v, P, N, mask, r, row, k1, v1);
            op->attention(ex, q + r * qrow, k1, v1, n - 1, 1, NULL, H, KV, hd, o1);
            if (memcmp(o1, out + r * qrow, sizeof(float) * qrow)) {
                fprintf(stderr, "attention hd %d: tree row %d differs from its AR computation\n", hd, r);
                emt_test_failures++;
            }
        }
        free(q); free(k); free(v); free(out); free(k1); free(v1); free(o1);
    }
}

/* Every row count 1..20 over a chain or a random tree, plain, soft-capped, windowed
 * and at device-resident lengths (attention_dyn, the tree area away from the
 * prefix): each row equals the same query computed alone as an AR row over
 * the prefix and its ancestors, so a change in how rows are split into
 * tasks (say, rows sharing a chunk task and its K/V blocks) fails here if it
 * moves any row's bits; the prefix lengths put block and chunk boundaries
 * inside the tree part. */
static void attention_rows(emt_exec *ex, const emt_backend_ops *op) {
    const int32_t H = 6, KV = 2, hd = 64, NMAX = 20, PMAX = 100 + 13 * 20, GAP = 5;
    const int32_t cases[][2] = { { 0, 0 }, { 0, 5 }, { 90, 0 }, { 37, 5 }, { 7, 0 } }; /* window, cap */
    size_t row = (size_t)KV * hd, qrow = (size_t)H * hd, cache = (size_t)(PMAX + GAP + NMAX);
    float *q = malloc(sizeof(float) * NMAX * qrow), *k = malloc(sizeof(float) * cache * row);
    float *v = malloc(sizeof(float) * cache * row), *out = malloc(sizeof(float) * NMAX * qrow);
    float *k1 = malloc(sizeof(float) * cache * row), *v1 = malloc(sizeof(float) * cache * row);
    float *o1 = malloc(sizeof(float) * qrow), *kd = malloc(sizeof(float) * cache * row);
    float *vd = malloc(sizeof(float) * cache * row);
    uint8_t mask[20 * 20];
    int32_t parent[20], depth[20], pos[20];
    for (int32_t N = 1; N <= NMAX; N++) {
        const int32_t P = 100 + 13 * N;
        for (int32_t r = 0; r < N; r++) { /* a chain (deep: windows cut it) or a random tree */
            int32_t any = (int32_t)((urand() + 1.0f) * 0.5f * (float)r);
            parent[r] = r == 0 ? -1 : N % 2 ? r - 1 : any % r;
            depth[r] = r ? depth[parent[r]] + 1 : 0;
            pos[r] = P + depth[r];
            for (int32_t c = 0; c < N; c++) {
                int32_t a = r;
                while (a > c) a = parent[a];
                mask[r * N + c] = a == c;
            }
        }
        for (size_t i = 0; i < N * qrow; i++) q[i] = 3 * urand();
        for (size_t i = 0; i < (P + N) * row; i++) { k[i] = urand(); v[i] = urand(); }
        /* attention_dyn's cache: the prefix, GAP unused rows, then the tree */
        memcpy(kd, k, sizeof(float) * P * row);
        memcpy(vd, v, sizeof(float) * P * row);
        memcpy(kd + (P + GAP) * row, k + P * row, sizeof(float) * N * row);
        memcpy(vd + (P + GAP) * row, v + P * row, sizeof(float) * N * row);
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int32_t window = cases[ci][0];
            float cap = (float)cases[ci][1];
            for (int pass = 0; pass < 3; pass++) {
                if (pass == 0 && window == 0 && cap == 0.0f)
                    op->attention(ex, q, k, v, P, N, mask, H, KV, hd, out);
                else if (pass == 0)
                    op->attention_window(ex, q, k, v, P, N, mask, pos, H, KV, hd, window, cap, out);
                else if (pass == 1 && window == 0)
                    op->attention_softcap(ex, q, k, v, P, N, mask, H, KV, hd, cap, out);
                else if (pass == 1)
                    continue;
                else {
                    int32_t len = P;
                    emt_dyn_rows dr = { &len, depth, P + GAP };
                    op->attention_dyn(ex, q, kd, vd, &dr, N, mask, H, KV, hd, window, cap, out);
                }
                int bad = 0;
                for (int32_t r = 0; r < N; r++) {
                    int32_t n = keys_of_row(k, v, P, N, mask, r, row, k1, v1);
                    int32_t at = n - 1; /* the AR row's position: P + depth */
                    op->attention_window(ex, q + r * qrow, k1, v1, n - 1, 1, NULL, &at, H, KV, hd, window, cap, o1);
                    bad += memcmp(o1, out + r * qrow, sizeof(float) * qrow) != 0;
                }
                if (bad) {
                    fprintf(stderr, "attention %d rows (window %d, cap %g, pass %d): %d rows differ from AR\n", N,
                            window, (double)cap, pass, bad);
                    emt_test_failures++;
                }
            }
        }
    }
    free(q); free(k); free(v); free(out); free(k1); free(v1); free(o1); free(kd); free(vd);
}

static void check_variant(emt_cpu_variant variant) {
    emt_backend *be = NULL;
    CHECK_OK(emt_backend_cpu_create_variant(variant, &be));
    if (!be) return;
    variant_fma = variant != EMT_CPU_BASELINE;
    printf("variant %s\n", emt_cpu_variant_name(variant));
    emt_exec *ex = be->ops->exec_create(be, 2);
    const emt_backend_ops *op = be->ops;

    /* matmul: sizes that exercise the blocked and the tail paths */
    const int32_t shapes[][3] = { { 1, 33, 7 }, { 7, 576, 130 }, { 64, 100, 37 }, { 3, 8, 5 } };
    for (size_t si = 0; si < 4; si++) {
        int32_t R = shapes[si][0], I = shapes[si][1], O = shapes[si][2];
        float *W = malloc(sizeof(float) * (size_t)O * I), *b = malloc(sizeof(float) * (size_t)O);
        float *x = malloc(sizeof(float) * (size_t)R * I), *y = malloc(sizeof(float) * (size_t)R * O);
        float *y1 = malloc(sizeof(float) * (size_t)O);
        for (int64_t i = 0; i < (int64_t)O * I; i++) W[i] = urand();
        for (int32_t i = 0; i < O; i++) b[i] = urand();
        for (int64_t i = 0; i < (int64_t)R * I; i++) x[i] = urand();
        op->matmul(ex, W, b, x, R, I, O, y, 1);
        double worst = 0;
        for (int32_t r = 0; r < R; r++)
            for (int32_t o = 0; o < O; o++) {
                double ref = b[o];
                for (int32_t i = 0; i < I; i++) ref += (double)W[(size_t)o * I + i] * x[(size_t)r * I + i];
                worst = fmax(worst, fabs(ref - y[(size_t)r * O + o]));
            }
        CHECK(worst < 1e-3 * sqrt((double)I));
        for (int32_t r = 0; r < R; r++) { /* each row alone: bit-identical */
            op->matmul(ex, W, b, x + (size_t)r * I, 1, I, O, y1, 1);
            if (memcmp(y1, y + (size_t)r * O, sizeof(float) * (size_t)O)) {
                fprintf(stderr, "matmul %dx%dx%d: row %d alone differs from the batch\n", R, I, O, r);
                emt_test_failures++;
            }
        }
        free(W); free(b); free(x); free(y); free(y1);
    }

    matmul_bits(ex, op);
    attention_blocks(ex, op);
    attention_blocks_bf16(ex, op);
    rope_round_kv_matches(ex, op);
    rope_q_round_kv_matches(ex, op);
    matmul_q_add_matches(ex, op);
    attention_rows(ex, op);
    attention_softmax_precision(ex, op);

    /* attention: 3 prefix keys + a 4-node tree (root, two children, a grandchild) */
    const int32_t H = 4, KV = 2, hd = 16, P = 3, N = 4;
    const uint8_t mask[16] = { 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1 };
    float q[4 * 4 * 16], k[7 * 2 * 16], v[7 * 2 * 16], out[4 * 4 * 16];
    for (int i = 0; i < 4 * 4 * 16; i++) q[i] = urand();
    for (int i = 0; i < 7 * 2 * 16; i++) { k[i] = urand(); v[i] = urand(); }
    op->attention(ex, q, k, v, P, N, mask, H, KV, hd, out);
    double worst = 0;
    for (int r = 0; r < N; r++)
        for (int h = 0; h < H; h++) {
            double sc[7], mx = -1e300, z = 0;
            int vis[7];
            for (int key = 0; key < P + N; key++) {
                vis[key] = key < P || mask[r * N + key - P];
                double d = 0;
                for (int e = 0; e < hd; e++) d += (double)q[(r * H + h) * hd + e] * k[(key * KV + h / 2) * hd + e];
                sc[key] = d / sqrt((double)hd);
                if (vis[key] && sc[key] > mx) mx = sc[key];
            }
            for (int key = 0; key < P + N; key++) if (vis[key]) z += exp(sc[key] - mx);
            for (int e = 0; e < hd; e++) {
                double acc = 0;
                for (int key = 0; key < P + N; key++)
                    if (vis[key]) acc += exp(sc[key] - mx) / z * v[(key * KV + h / 2) * hd + e];
                worst = fmax(worst, fabs(acc - out[(r * H + h) * hd + e]));
            }
        }
    CHECK(worst < 1e-5);
    /* node 3 (root -> 1 -> 3) computed as the last of three AR rows on the
     * path must give the same bits: cache = prefix + root + node 1, then node 3 */
    float k2[6 * 2 * 16], v2[6 * 2 * 16], out1[4 * 16];
    memcpy(k2, k, sizeof(float) * 5 * 2 * 16);
    memcpy(v2, v, sizeof(float) * 5 * 2 * 16);
    memcpy(k2 + 5 * 32, k + 6 * 32, sizeof(float) * 32);
    memcpy(v2 + 5 * 32, v + 6 * 32, sizeof(float) * 32);
    op->attention(ex, q + 3 * 4 * 16, k2, v2, 5, 1, NULL, H, KV, hd, out1);
    CHECK(!memcmp(out1, out + 3 * 4 * 16, sizeof out1));

    /* rmsnorm, swiglu, topk */
    float xr[37], w[37], o[37];
    for (int i = 0; i < 37; i++) { xr[i] = urand(); w[i] = urand(); }
    op->rmsnorm(ex, xr, w, 1, 37, 1e-5f, o);
    double ss = 0;
    for (int i = 0; i < 37; i++) ss += (double)xr[i] * xr[i];
    for (int i = 0; i < 37; i++) CHECK_NEAR(o[i], xr[i] / sqrt(ss / 37 + 1e-5) * w[i], 1e-5);
    float lg[2 * 9] = { 1, 5, 3, 5, 0, 0, 0, 0, 0, /* row 2 */ 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    int32_t ids[4];
    float pr[4], ent[2];
    op->topk(ex, lg, 2, 9, 2, ids, pr, ent);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(ids[1], 3); /* tie with id 1: lower id first, then 3 */
    CHECK_NEAR(ent[1], log(9.0), 1e-6);
    CHECK_NEAR(pr[2], 1.0 / 9.0, 1e-6);
    be->ops->exec_destroy(ex);
    be->ops->destroy(be);
}

/* ENTMTP_CPU_PREFETCH: a bad value is an error naming it; a good one, set
 * before the first CPU backend, is the kernels' prefetch distance. Run
 * first: the distance is fixed by the process's first backend. */
static void check_prefetch_setting(void) {
    const char *bad[] = { "100", "-64", "65600", "4k", " 64" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ENTMTP_CPU_PREFETCH", bad[i], 1);
        emt_backend *be = NULL;
        CHECK(emt_backend_cpu_create_variant(EMT_CPU_BASELINE, &be) == ENTMTP_ERR_INVALID_ARGUMENT);
        CHECK(be == NULL);
        CHECK(strstr(entmtp_last_error(), "ENTMTP_CPU_PREFETCH") != NULL && strstr(entmtp_last_error(), bad[i]) != NULL);
    }
    setenv("ENTMTP_CPU_PREFETCH", "4096", 1);
    emt_backend *be = NULL;
    CHECK_OK(emt_backend_cpu_create_variant(EMT_CPU_BASELINE, &be));
    CHECK(emt_cpu_prefetch_bytes == 4096);
    be->ops->destroy(be);
    unsetenv("ENTMTP_CPU_PREFETCH");
}

int main(void) {
    check_prefetch_setting();
    for (int v = 0; v < EMT_CPU_VARIANT_COUNT; v++)
        if (emt_cpu_variant_supported((emt_cpu_variant)v)) check_variant((emt_cpu_variant)v);
    return emt_test_finish("test_cpu_backend");
}
