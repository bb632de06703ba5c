/* The typed-weight kernels (matmul_q) of every CPU variant this processor
 * runs, against the scalar reference in backend/cpu/quant.h and against a
 * double-precision product of the dequantized weights, for each weight type
 * and row counts 1..9 (every row-block split): a row's outputs are the same
 * bits alone and inside any batch. */
#include "backend/backend.h"
#include "backend/cpu/cpu_variants.h"
#include "backend/cpu/kquant.h"
#include "backend/cpu/quant8.h"
#include "check.h"
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* An activation row as the kernels of type t quantize it: one scale per
 * 256 values for the K-quants, per 32 for the others (quant.h). */
static void quantize_ref(emt_dtype t, const float *x, int32_t n_in, emt_xq *xq) {
    int32_t span = emt_is_kpacked_type(t) ? EMT_XQ_KSPAN : EMT_QK;
    for (int32_t i = 0; i < n_in; i += span) emt_quantize_span_ref(x + i, span, xq + i / EMT_QK);
}

/* bit_exact: the variant takes the reference's float steps for this type
 * (quant.h's emt_dot_q_ref, kquant.h's emt_dot_k_ref: every integer type
 * in every variant), so every output must equal the reference plus the
 * bias bit for bit. */
static void check_type(const emt_backend_ops *op, emt_exec *ex, emt_dtype t, int32_t n_in, int32_t n_out, int bit_exact) {
    const int32_t R = 9;
    float *wf = malloc(sizeof(float) * (size_t)n_out * n_in), *deq = malloc(sizeof(float) * (size_t)n_out * n_in);
    float *x = malloc(sizeof(float) * (size_t)R * n_in), *bias = malloc(sizeof(float) * (size_t)n_out);
    float *y = malloc(sizeof(float) * (size_t)R * n_out), *y1 = malloc(sizeof(float) * (size_t)R * n_out);
    size_t rb = emt_dtype_nbytes(t, n_in);
    uint8_t *wq = malloc(rb * (size_t)n_out);
    for (int64_t i = 0; i < (int64_t)n_out * n_in; i++) wf[i] = urand();
    for (int64_t i = 0; i < (int64_t)R * n_in; i++) x[i] = urand() * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int32_t o = 0; o < n_out; o++) bias[o] = urand();
    emt_tiny_encode(t, wf, (int64_t)n_out * n_in, wq);
    emt_tensor tt = { "w", t, 1, { (int64_t)n_out * n_in }, wq, rb * (size_t)n_out, "test" };
    CHECK_OK(emt_tensor_to_f32(&tt, 0, (int64_t)n_out * n_in, deq));
    emt_wmat W = { t, wq, NULL };
    op->matmul_q(ex, &W, bias, x, R, n_in, n_out, y);
    CHECK_OK(op->sync(ex));

    int quant = t != EMT_F16 && t != EMT_BF16;
    int32_t nb = n_in / EMT_QK;
    emt_xq *xq = malloc(sizeof(emt_xq) * (size_t)R * nb);
    double worst = 0, worst_ref = 0;
    for (int32_t r = 0; r < R; r++) {
        if (quant) quantize_ref(t, x + (size_t)r * n_in, n_in, xq + r * nb);
        for (int32_t o = 0; o < n_out; o++) {
            double exact = bias[o];
            for (int32_t i = 0; i < n_in; i++) exact += (double)deq[(size_t)o * n_in + i] * x[(size_t)r * n_in + i];
            float got = y[(size_t)r * n_out + o];
            worst = fmax(worst, fabs(exact - got));
            if (quant) { /* the reference kernel on the same integers: float order only */
                const uint8_t *wr = wq + (size_t)o * rb;
                float ref = emt_is_kblock_type(t) ? emt_dot_k_ref(t, wr, xq + r * nb, nb) : emt_dot_q_ref(t, wr, xq + r * nb, nb);
                worst_ref = fmax(worst_ref, fabs((double)ref + bias[o] - got));
                float want = ref + bias[o];
                if (bit_exact && memcmp(&want, &got, sizeof got)) {
                    fprintf(stderr, "%s %dx%d row %d output %d: %.9g, the reference kernel %.9g (expected bit for bit)\n",
                            emt_dtype_name(t), n_out, n_in, r, o, (double)got, (double)want);
                    emt_test_failures++;
                }
            }
        }
    }
    /* 16-bit activations: |error| <= max|x| / 65534 per value (|x| <= 4,
     * |w| <= 1.1) over n_in values, plus float rounding */
    double bound = quant ? 4.0 / 65534.0 * n_in * 1.1 + 1e-4 * n_in : 1e-4 * n_in;
    if (!(worst < bound) || !(worst_ref < 1e-3)) {
        fprintf(stderr, "%s %dx%d: worst |error| %.3g (bound %.3g), vs reference kernel %.3g\n",
                emt_dtype_name(t), n_out, n_in, worst, bound, worst_ref);
        emt_test_failures++;
    }
    /* batch invariance: every row count and starting row gives the same bits */
    for (int32_t n = 1; n <= R; n++)
        for (int32_t r0 = 0; r0 + n <= R; r0 += n) {
            op->matmul_q(ex, &W, bias, x + (size_t)r0 * n_in, n, n_in, n_out, y1);
            if (memcmp(y1, y + (size_t)r0 * n_out, sizeof(float) * (size_t)n * n_out)) {
                fprintf(stderr, "%s: rows %d..%d computed %d at a time differ from the batch of %d\n",
                        emt_dtype_name(t), r0, r0 + n - 1, n, R);
                emt_test_failures++;
            }
        }
    free(wf); free(deq); free(x); free(bias); free(y); free(y1); free(wq); free(xq);
}

/* A random typed matrix [n_out][n_in] (caller frees). */
static uint8_t *random_matrix(emt_dtype t, int32_t n_in, int32_t n_out) {
    float *wf = malloc(sizeof(float) * (size_t)n_out * n_in);
    uint8_t *wq = malloc(emt_dtype_nbytes(t, n_in) * (size_t)n_out);
    for (int64_t i = 0; i < (int64_t)n_out * n_in; i++) wf[i] = urand();
    emt_tiny_encode(t, wf, (int64_t)n_out * n_in, wq);
    free(wf);
    return wq;
}

/* The fused products (matmul_q_multi over Q/K/V-like weights of mixed
 * types, matmul_q_gated with SiLU and GELU) write exactly the bits of the
 * separate matmul_q calls and the swiglu/geglu op, for 1..9 rows. */
static void check_fused(const emt_backend_ops *op, emt_exec *ex) {
    const int32_t n_in = 256, R = 9;
    const emt_dtype types[3] = { EMT_Q4_K, EMT_Q8_0, EMT_F16 }; /* as a Q4_K_M file mixes them */
    const int32_t n_out[3] = { 40, 24, 33 };
    uint8_t *wq[3];
    emt_wmat W[3];
    const emt_wmat *Wp[3];
    float *bias[3], *y[3], *ref[3];
    for (int m = 0; m < 3; m++) {
        wq[m] = random_matrix(types[m], n_in, n_out[m]);
        W[m] = (emt_wmat){ types[m], wq[m], NULL };
        Wp[m] = &W[m];
        bias[m] = malloc(sizeof(float) * (size_t)n_out[m]);
        for (int32_t o = 0; o < n_out[m]; o++) bias[m][o] = urand();
        y[m] = malloc(sizeof(float) * (size_t)R * n_out[m]);
        ref[m] = malloc(sizeof(float) * (size_t)R * n_out[m]);
    }
    float *x = malloc(sizeof(float) * (size_t)R * n_in);
    for (int64_t i = 0; i < (int64_t)R * n_in; i++) x[i] = urand();
    CHECK(op->matmul_q_multi != NULL && op->matmul_q_gated != NULL);
    for (int32_t n = 1; n <= R; n++) {
        const float *b3[3] = { bias[0], NULL, bias[2] };
        op->matmul_q_multi(ex, 3, Wp, b3, n_out, x, n, n_in, y);
        for (int m = 0; m < 3; m++) {
            op->matmul_q(ex, &W[m], b3[m], x, n, n_in, n_out[m], ref[m]);
            if (memcmp(y[m], ref[m], sizeof(float) * (size_t)n * n_out[m])) {
                fprintf(stderr, "matmul_q_multi: product %d (%s) on %d rows differs from matmul_q\n", m,
                        emt_dtype_name(types[m]), n);
                emt_test_failures++;
            }
        }
        for (int gelu = 0; gelu < 2; gelu++) { /* gate: the first 24 rows of the Q4_K matrix, up: the Q8_0 one */
            op->matmul_q_gated(ex, &W[0], bias[0], &W[1], NULL, x, n, n_in, n_out[1], gelu, y[0], y[1]);
            op->matmul_q(ex, &W[0], bias[0], x, n, n_in, n_out[1], ref[0]);
            op->matmul_q(ex, &W[1], NULL, x, n, n_in, n_out[1], ref[1]);
            if (gelu) op->geglu(ex, ref[0], ref[1], (int64_t)n * n_out[1], ref[0]);
            else op->swiglu(ex, ref[0], ref[1], (int64_t)n * n_out[1], ref[0]);
            if (memcmp(y[0], ref[0], sizeof(float) * (size_t)n * n_out[1])) {
                fprintf(stderr, "matmul_q_gated (%s) on %d rows differs from matmul_q + %s\n",
                        gelu ? "GELU" : "SiLU", n, gelu ? "geglu" : "swiglu");
                emt_test_failures++;
            }
        }
    }
    CHECK_OK(op->sync(ex));
    for (int m = 0; m < 3; m++) { free(wq[m]); free(bias[m]); free(y[m]); free(ref[m]); }
    free(x);
}

/* The packed layout (quant.h; the variants with a pack op, for the types
 * each packs; returns whether it packed t): a packed
 * matrix's products are the bits of the same variant's file-layout kernel
 * for every row count 1..R (each row alone and inside any batch, tiles of
 * every height and the row blocks), with bias and without, on the whole
 * matrix, on a view at a row group and over a partial last group; rows read
 * back through emt_packed_row and the embedding equal the file's rows. */
static int check_packed(const emt_backend_ops *op, emt_backend *be, emt_exec *ex, emt_dtype t, int32_t n_in,
                        int32_t n_out) {
    const int32_t R = 37; /* more than one row block (32) and every tile height */
    size_t rb = emt_dtype_nbytes(t, n_in);
    uint8_t *wq = random_matrix(t, n_in, n_out);
    uint8_t *copy = op->alloc(be, rb * (size_t)n_out);
    CHECK(copy != NULL);
    memcpy(copy, wq, rb * (size_t)n_out);
    emt_wmat P = { t, copy, copy, 0 };
    CHECK_OK(op->pack(be, &P, n_out, n_in));
    if (!P.packed) { /* a type the variant does not pack, or ENTMTP_CPU_PACK=0: nothing to compare */
        op->release(be, P.owned);
        free(wq);
        return 0;
    }
    CHECK_EQ_INT(P.packed, EMT_PACK_ROWS);
    CHECK(memcmp(P.data, wq, rb * (size_t)n_out) != 0); /* the bytes did move */
    uint8_t *row = malloc(rb), *dirty = malloc(rb * (size_t)n_out);
    memset(dirty, 0xA5, rb * (size_t)n_out); /* packing writes every byte, whatever the buffer held */
    emt_pack_matrix(t, wq, n_out, n_in, dirty);
    CHECK(!memcmp(dirty, P.data, rb * (size_t)n_out));
    free(dirty);
    for (int32_t o = 0; o < n_out; o++)
        CHECK(!memcmp(emt_packed_row(t, P.data, P.packed, n_in, o, row), wq + (size_t)o * rb, rb));
    float *x = malloc(sizeof(float) * (size_t)R * n_in), *bias = malloc(sizeof(float) * (size_t)n_out);
    size_t out_floats = (size_t)R * n_out > 3 * (size_t)n_in ? (size_t)R * n_out : 3 * (size_t)n_in; /* products, embedding */
    float *ref = malloc(sizeof(float) * out_floats), *got = malloc(sizeof(float) * out_floats);
    for (int64_t i = 0; i < (int64_t)R * n_in; i++) x[i] = urand() * (i % 5 == 0 ? 8.0f : 1.0f);
    for (int32_t o = 0; o < n_out; o++) bias[o] = urand();
    emt_wmat W = { t, wq, NULL, 0 };
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *bs = with_bias ? bias : NULL;
        op->matmul_q(ex, &W, bs, x, R, n_in, n_out, ref);
        for (int32_t n = 1; n <= R; n++) {
            op->matmul_q(ex, &P, bs, x, n, n_in, n_out, got);
            if (memcmp(got, ref, sizeof(float) * (size_t)n * n_out)) {
                fprintf(stderr, "packed %s %dx%d: %d rows differ from the file layout's kernel\n", emt_dtype_name(t),
                        n_out, n_in, n);
                emt_test_failures++;
            }
        }
        for (int32_t r = 0; r < R; r++) { /* each row alone (an AR step) */
            op->matmul_q(ex, &P, bs, x + (size_t)r * n_in, 1, n_in, n_out, got);
            if (memcmp(got, ref + (size_t)r * n_out, sizeof(float) * (size_t)n_out)) {
                fprintf(stderr, "packed %s: row %d alone differs from the batch\n", emt_dtype_name(t), r);
                emt_test_failures++;
            }
        }
    }
    /* a view from row group 1 with a partial last group (as fused Q/K/V views and head subsets read) */
    int32_t v_out = n_out - EMT_PACK_ROWS - 3;
    emt_wmat Wv = { t, wq + EMT_PACK_ROWS * rb, NULL, 0 };
    emt_wmat Pv = { t, (const uint8_t *)P.data + EMT_PACK_ROWS * rb, NULL, P.packed };
    op->matmul_q(ex, &Wv, bias, x, 11, n_in, v_out, ref);
    op->matmul_q(ex, &Pv, bias, x, 11, n_in, v_out, got);
    CHECK(!memcmp(got, ref, sizeof(float) * 11 * (size_t)v_out));
    if (n_in % 64 == 0 || t == EMT_Q8_0) { /* the embedding from the packed table */
        int32_t tok[3] = { n_out - 1, 0, 9 };
        op->embed_q(ex, &W, n_in, tok, 3, ref);
        op->embed_q(ex, &P, n_in, tok, 3, got);
        CHECK(!memcmp(got, ref, sizeof(float) * 3 * (size_t)n_in));
    }
    CHECK_OK(op->sync(ex));
    op->release(be, P.owned);
    free(wq); free(row); free(x); free(bias); free(ref); free(got);
    return 1;
}

/* Blocks far below any real activation (quant.h's EMT_XQ_TINY, 2^-87)
 * quantize to zero in the reference and in every variant's kernels: a row
 * of them gives exactly the bias, and a row mixing them with normal blocks
 * gives the reference's value (the tiny blocks contribute nothing), finite. */
static void check_tiny_blocks(const emt_backend_ops *op, emt_exec *ex, emt_dtype t) {
    const int32_t n_in = 256, n_out = 16, nb = n_in / EMT_QK;
    const float level[8] = { 1.0f, 1e-36f, 1e-30f, 1e-26f, 1e-40f, 1e-3f, 1e-3f, 0x1p-88f };
    float x[2 * 256], bias[16], y[2 * 16];
    for (int32_t i = 0; i < n_in; i++) {
        x[i] = urand() * level[i / EMT_QK];
        x[n_in + i] = urand() * 1e-35f;
    }
    for (int32_t o = 0; o < n_out; o++) bias[o] = urand();
    uint8_t *wq = random_matrix(t, n_in, n_out);
    emt_wmat W = { t, wq, NULL, 0 };
    op->matmul_q(ex, &W, bias, x, 2, n_in, n_out, y);
    CHECK_OK(op->sync(ex));
    emt_xq xq[8], tiny_row[8];
    quantize_ref(t, x, n_in, xq);
    quantize_ref(t, x + n_in, n_in, tiny_row);
    for (int32_t b = 0; b < nb; b++) {
        int tiny = level[b] < 0x1p-87f, zero = 1, saturated = 0, zero_row = 1;
        for (int j = 0; j < EMT_QK; j++) {
            zero &= xq[b].q[j] == 0;
            saturated |= xq[b].q[j] == -32768;
            zero_row &= tiny_row[b].q[j] == 0;
        }
        CHECK(!saturated);
        CHECK(zero_row && tiny_row[b].d == 0.0f && tiny_row[b].s == 0.0f);
        if (emt_is_kpacked_type(t)) /* one scale per 256 values: the largest block's, and codes 0 below it */
            CHECK(xq[b].d == xq[0].d && xq[0].d > 0.0f && (level[b] < 1e-20f ? zero : 1));
        else
            CHECK(tiny ? zero && xq[b].d == 0.0f && xq[b].s == 0.0f : xq[b].d > 0.0f);
    }
    size_t rb = emt_dtype_nbytes(t, n_in);
    for (int32_t o = 0; o < n_out; o++) {
        const uint8_t *wr = wq + (size_t)o * rb;
        float ref = emt_is_kblock_type(t) ? emt_dot_k_ref(t, wr, xq, nb) : emt_dot_q_ref(t, wr, xq, nb);
        CHECK(isfinite(y[o]) && fabsf(ref + bias[o] - y[o]) < 1e-4f);
        if (y[n_out + o] != bias[o]) {
            fprintf(stderr, "%s: a row of tiny blocks gave %.9g, not the bias %.9g\n", emt_dtype_name(t), y[n_out + o], bias[o]);
            emt_test_failures++;
        }
    }
    free(wq);
}

/* The K-quants' largest codes and scales against activations at the
 * largest code: each output's sum group adds up to about 2^33, and each of
 * its 8 lanes (kquant.h) to its bound, just under 2^31 for Q5_K and Q6_K.
 * Every variant's products (file layout, and packed where the variant
 * packs) equal the reference (64-bit lane sums) bit for bit, for 1..R
 * rows, and stay within float rounding of a double product: a kernel whose
 * 32-bit sums overflow fails both. The first differing output of each
 * call is printed. */
static void check_kquant_extremes(const emt_backend_ops *op, emt_backend *be, emt_exec *ex, emt_dtype t) {
    const int32_t n_in = 512, n_out = 16, R = 9, nb = n_in / EMT_QK;
    size_t bb = emt_dtype_block_bytes(t), rb = emt_dtype_nbytes(t, n_in);
    uint8_t *wq = op->alloc(be, rb * (size_t)n_out);
    CHECK(wq != NULL);
    const uint16_t d = 0x1400; /* f16 2^-10 */
    for (int32_t blk = 0; blk < n_out * (n_in / 256); blk++) {
        uint8_t *b = wq + (size_t)blk * bb;
        if (t == EMT_Q6_K) { /* codes 0 - 32 and scales -128: every scaled code is +4096 */
            memset(b, 0, 192);
            memset(b + 192, 0x80, 16);
            memcpy(b + 208, &d, 2);
        } else { /* nibbles (and fifth bits) all set, scales and minimums 63 */
            memset(b, 0xFF, bb);
            memcpy(b, &d, 2);
            memcpy(b + 2, &d, 2);
        }
    }
    float *x = malloc(sizeof(float) * (size_t)R * n_in), *y = malloc(sizeof(float) * (size_t)R * n_out);
    for (int64_t i = 0; i < (int64_t)R * n_in; i++) x[i] = (i / n_in) % 2 ? -3.0f : 1.0f; /* every code +-32767 */
    emt_xq *xq = malloc(sizeof(emt_xq) * (size_t)nb);
    float *deq = malloc(sizeof(float) * (size_t)n_in);
    emt_tensor tt = { "w", t, 1, { n_in }, wq, rb, "test" };
    CHECK_OK(emt_tensor_to_f32(&tt, 0, n_in, deq));
    emt_wmat W[2] = { { t, wq, NULL, 0 }, { t, NULL, NULL, 0 } };
    int layouts = 1;
    if (op->pack) {
        uint8_t *copy = op->alloc(be, rb * (size_t)n_out);
        CHECK(copy != NULL);
        memcpy(copy, wq, rb * (size_t)n_out);
        W[1] = (emt_wmat){ t, copy, copy, 0 };
        CHECK_OK(op->pack(be, &W[1], n_out, n_in));
        layouts = 2;
    }
    for (int l = 0; l < layouts; l++)
        for (int32_t n = 1; n <= R; n++) {
            op->matmul_q(ex, &W[l], NULL, x, n, n_in, n_out, y);
            CHECK_OK(op->sync(ex));
            for (int32_t r = 0; r < n; r++) {
                quantize_ref(t, x + (size_t)r * n_in, n_in, xq);
                double exact = 0;
                for (int32_t i = 0; i < n_in; i++) exact += (double)deq[i] * x[(size_t)r * n_in + i];
                int bad = 0;
                for (int32_t o = 0; o < n_out && !bad; o++) {
                    float want = emt_dot_k_ref(t, wq + (size_t)o * rb, xq, nb), got = y[(size_t)r * n_out + o];
                    bad = memcmp(&want, &got, sizeof got) || !(fabs(got - exact) <= 1e-5 * fabs(exact));
                    if (bad)
                        fprintf(stderr, "%s extremes, %s layout, %d rows: row %d output %d is %.9g, reference %.9g, "
                                "double %.9g\n", emt_dtype_name(t), l ? "packed" : "file", n, r, o, got, want, exact);
                }
                CHECK(!bad);
            }
        }
    if (layouts == 2) op->release(be, W[1].owned);
    op->release(be, wq);
    free(x); free(y); free(xq); free(deq);
}

/* The 8-bit prompt mode (quant8.h, set_activation_bits(8)): for the types
 * it covers, every variant's products equal the scalar reference
 * emt_dot8_ref bit for bit, for every row count, in the file layout and
 * (variants with a pack op) the packed one, alone and fused with a type
 * it does not cover (which keeps its 16-bit bits); the reference stays
 * within 8-bit rounding of a double product; rows of blocks below 2^-87
 * give exactly the bias; set_activation_bits(16) restores the 16-bit bits. */
static void check_act8(const emt_backend_ops *op, emt_backend *be, emt_exec *ex, emt_dtype t, int32_t n_in,
                       int32_t n_out) {
    const int32_t R = 37, nb = n_in / EMT_QK;
    const float level[6] = { 1.0f, 1e-36f, 1e-40f, 0x1p-88f, 1e-3f, 8.0f };
    size_t rb = emt_dtype_nbytes(t, n_in);
    uint8_t *wq = random_matrix(t, n_in, n_out), *w5 = random_matrix(EMT_Q5_1, n_in, n_out);
    if (t == EMT_Q8_0) /* -128, which no encoder writes but a file may hold (the AVX2 kernel's |code|) */
        for (int32_t o = 0; o < n_out; o += 3)
            for (int32_t b = 0; b < nb; b++) wq[(size_t)o * rb + (size_t)b * 34 + 2 + (size_t)(o + b) % 32] = 0x80;
    float *x = malloc(sizeof(float) * (size_t)R * n_in), *bias = malloc(sizeof(float) * (size_t)n_out);
    float *ref = malloc(sizeof(float) * (size_t)R * n_out), *got = malloc(sizeof(float) * (size_t)R * n_out);
    float *y16 = malloc(sizeof(float) * (size_t)R * n_out), *g5 = malloc(sizeof(float) * (size_t)R * n_out);
    float *r5 = malloc(sizeof(float) * (size_t)R * n_out), *deq = malloc(sizeof(float) * (size_t)n_out * n_in);
    emt_xq8 *xq = malloc(sizeof(emt_xq8) * (size_t)R * nb);
    for (int32_t r = 0; r < R; r++)
        for (int32_t i = 0; i < n_in; i++)
            x[(size_t)r * n_in + i] = urand() * (r == 5 ? 1e-35f : r % 4 == 3 ? level[(i / EMT_QK) % 6] : 1.0f);
    for (int32_t o = 0; o < n_out; o++) bias[o] = urand();
    emt_tensor tt = { "w", t, 1, { (int64_t)n_out * n_in }, wq, rb * (size_t)n_out, "test" };
    CHECK_OK(emt_tensor_to_f32(&tt, 0, (int64_t)n_out * n_in, deq));
    double err2 = 0, val2 = 0;
    for (int32_t r = 0; r < R; r++) {
        for (int32_t b = 0; b < nb; b++) emt_quantize_block8_ref(x + (size_t)r * n_in + b * EMT_QK, &xq[r * nb + b]);
        for (int32_t o = 0; o < n_out; o++) {
            ref[(size_t)r * n_out + o] = emt_dot8_ref(t, wq + (size_t)o * rb, xq + r * nb, nb) + bias[o];
            double exact = bias[o];
            for (int32_t i = 0; i < n_in; i++) exact += (double)deq[(size_t)o * n_in + i] * x[(size_t)r * n_in + i];
            if (r % 4 != 3 && r != 5) {
                err2 += (exact - ref[(size_t)r * n_out + o]) * (exact - ref[(size_t)r * n_out + o]);
                val2 += exact * exact;
            }
        }
        if (r == 5)
            for (int32_t o = 0; o < n_out; o++) CHECK(ref[(size_t)r * n_out + o] == bias[o]);
    }
    /* 8-bit rounding: |error| <= max|x| / 254 per value, about 0.5% of the rms */
    if (!(sqrt(err2 / val2) < 0.02)) {
        fprintf(stderr, "%s 8-bit reference: rms error %.3g of the rms value\n", emt_dtype_name(t), sqrt(err2 / val2));
        emt_test_failures++;
    }
    emt_wmat W = { t, wq, NULL, 0 }, W5 = { EMT_Q5_1, w5, NULL, 0 };
    op->matmul_q(ex, &W, bias, x, R, n_in, n_out, y16);
    op->matmul_q(ex, &W5, bias, x, R, n_in, n_out, r5);
    uint8_t *copy = NULL;
    emt_wmat P = W;
    if (op->pack) {
        copy = op->alloc(be, rb * (size_t)n_out);
        memcpy(copy, wq, rb * (size_t)n_out);
        P = (emt_wmat){ t, copy, copy, 0 };
        CHECK_OK(op->pack(be, &P, n_out, n_in));
    }
    op->set_activation_bits(ex, 8);
    long tile_ranges = emt_cpu_amx_tile_ranges();
    for (int layout = 0; layout < (P.packed ? 2 : 1); layout++) {
        const emt_wmat *M = layout ? &P : &W;
        for (int32_t n = 1; n <= R; n++)
            for (int32_t r0 = 0; r0 < R; r0 += n) {
                int32_t k = R - r0 < n ? R - r0 : n;
                op->matmul_q(ex, M, bias, x + (size_t)r0 * n_in, k, n_in, n_out, got);
                if (memcmp(got, ref + (size_t)r0 * n_out, sizeof(float) * (size_t)k * n_out)) {
                    fprintf(stderr, "%s %s 8-bit: rows %d..%d computed %d at a time differ from the reference\n",
                            layout ? "packed" : "file-layout", emt_dtype_name(t), r0, r0 + k - 1, n);
                    emt_test_failures++;
                }
            }
        /* fused with a type without 8-bit kernels: that one keeps its 16-bit bits */
        const emt_wmat *Ws[2] = { M, &W5 };
        const float *bs[2] = { bias, bias };
        int32_t outs[2] = { n_out, n_out };
        float *ys[2] = { got, g5 };
        op->matmul_q_multi(ex, 2, Ws, bs, outs, x, R, n_in, ys);
        CHECK(!memcmp(got, ref, sizeof(float) * (size_t)R * n_out));
        CHECK(!memcmp(g5, r5, sizeof(float) * (size_t)R * n_out));
    }
    CHECK_EQ_INT(emt_cpu_amx_tile_ranges(), tile_ranges); /* up to 37 rows: the 8-bit tile kernels start at 48 */
    op->set_activation_bits(ex, 16);
    op->matmul_q(ex, P.packed ? &P : &W, bias, x, R, n_in, n_out, got);
    CHECK(!memcmp(got, y16, sizeof(float) * (size_t)R * n_out));
    CHECK_OK(op->sync(ex));
    if (copy) op->release(be, P.owned);
    free(wq); free(w5); free(x); free(bias); free(ref); free(got); free(y16); free(g5); free(r5); free(deq); free(xq);
}

/* The 8-bit prompt mode at prompt sizes (48+ rows: the amx variant's tile
 * kernels for packed Q4_0 / Q8_0 / Q4_K / Q5_K / Q6_K): rows in two row blocks with a partial
 * last row tile, blocks in several chunks with a partial last one, a
 * partial last output pair; every row equals emt_dot8_ref bit for bit, in
 * one call and row counts 48..53 at a time; the tile kernels ran where they
 * should and only there. */
static void check_act8_rows(const emt_backend_ops *op, emt_backend *be, emt_exec *ex, emt_dtype t, int amx) {
    const int32_t R = 150, n_in = emt_dtype_block_elems(t) == 256 ? 9 * 256 : 70 * EMT_QK, n_out = 24, nb = n_in / EMT_QK;
    size_t rb = emt_dtype_nbytes(t, n_in);
    uint8_t *wq = random_matrix(t, n_in, n_out);
    float *x = malloc(sizeof(float) * (size_t)R * n_in), *bias = malloc(sizeof(float) * (size_t)n_out);
    float *ref = malloc(sizeof(float) * (size_t)R * n_out), *got = malloc(sizeof(float) * (size_t)R * n_out);
    float *plain = malloc(sizeof(float) * (size_t)R * n_out); /* without the bias */
    emt_xq8 *xq = malloc(sizeof(emt_xq8) * (size_t)nb);
    for (int64_t i = 0; i < (int64_t)R * n_in; i++) x[i] = urand() * (i % 7 == 0 ? 6.0f : 1.0f);
    for (int32_t o = 0; o < n_out; o++) bias[o] = urand();
    for (int32_t r = 0; r < R; r++) {
        for (int32_t b = 0; b < nb; b++) emt_quantize_block8_ref(x + (size_t)r * n_in + b * EMT_QK, &xq[b]);
        for (int32_t o = 0; o < n_out; o++) {
            plain[(size_t)r * n_out + o] = emt_dot8_ref(t, wq + (size_t)o * rb, xq, nb);
            ref[(size_t)r * n_out + o] = plain[(size_t)r * n_out + o] + bias[o];
        }
    }
    uint8_t *copy = op->alloc(be, rb * (size_t)n_out);
    memcpy(copy, wq, rb * (size_t)n_out);
    emt_wmat P = { t, copy, copy, 0 };
    CHECK_OK(op->pack(be, &P, n_out, n_in));
    op->set_activation_bits(ex, 8);
    long tile_ranges = emt_cpu_amx_tile_ranges();
    for (int32_t n = 48; n <= 53; n++)
        for (int32_t r0 = 0; r0 < R; r0 += n) {
            int32_t k = R - r0 < n ? R - r0 : n;
            op->matmul_q(ex, &P, bias, x + (size_t)r0 * n_in, k, n_in, n_out, got);
            if (memcmp(got, ref + (size_t)r0 * n_out, sizeof(float) * (size_t)k * n_out)) {
                fprintf(stderr, "%s 8-bit: rows %d..%d computed %d at a time differ from the reference\n", emt_dtype_name(t),
                        r0, r0 + k - 1, n);
                emt_test_failures++;
            }
        }
    /* the output pair over groups 1..2 of a view (one whole pair from its second group) */
    emt_wmat Pv = { t, (const uint8_t *)P.data + EMT_PACK_ROWS * rb, NULL, P.packed };
    op->matmul_q(ex, &Pv, NULL, x, R, n_in, n_out - EMT_PACK_ROWS, got);
    for (int32_t r = 0; r < R; r++)
        for (int32_t o = 0; o < n_out - EMT_PACK_ROWS; o++)
            CHECK(got[(size_t)r * (n_out - EMT_PACK_ROWS) + o] == plain[(size_t)r * n_out + EMT_PACK_ROWS + o]);
    op->matmul_q(ex, &P, bias, x, R, n_in, n_out, got);
    CHECK(!memcmp(got, ref, sizeof(float) * (size_t)R * n_out));
    op->set_activation_bits(ex, 16);
    CHECK_EQ_INT(emt_cpu_amx_tile_ranges() > tile_ranges, amx && P.packed && (t == EMT_Q4_0 || t == EMT_Q8_0 || t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K));
    CHECK_OK(op->sync(ex));
    op->release(be, P.owned);
    free(wq); free(x); free(bias); free(ref); free(got); free(plain); free(xq);
}

/* Embedding rows from a typed table equal the table's F32 conversion. */
static void check_embed(const emt_backend_ops *op, emt_exec *ex) {
    float wf[4 * 64], deq[4 * 64], out[2 * 64];
    uint8_t wq[4 * 68];
    for (int i = 0; i < 4 * 64; i++) wf[i] = urand();
    emt_tiny_encode(EMT_Q8_0, wf, 4 * 64, wq);
    emt_tensor tt = { "e", EMT_Q8_0, 1, { 4 * 64 }, wq, sizeof wq, "test" };
    CHECK_OK(emt_tensor_to_f32(&tt, 0, 4 * 64, deq));
    emt_wmat W = { EMT_Q8_0, wq, NULL };
    int32_t tok[2] = { 3, 1 };
    op->embed_q(ex, &W, 64, tok, 2, out);
    CHECK(!memcmp(out, deq + 3 * 64, 64 * sizeof(float)));
    CHECK(!memcmp(out + 64, deq + 64, 64 * sizeof(float)));
}

int main(void) {
    /* the reference quantizer's integers: round half to even, sum in s */
    float xb[32];
    for (int j = 0; j < 32; j++) xb[j] = (float)(j - 16) * 0.5f;
    emt_xq q;
    emt_quantize_block_ref(xb, &q);
    CHECK_NEAR(q.d, 8.0 / 32767.0, 1e-9);
    CHECK_EQ_INT(q.q[0], -32767);
    CHECK_EQ_INT(q.q[1], -30719); /* -7.5 * 32767 / 8 = -30719.06 */
    CHECK_EQ_INT(q.q[16], 0);
    /* a 256-value span (the K-quants' activations) shares its largest block's scale */
    float xs[256];
    emt_xq qs[8];
    for (int j = 0; j < 256; j++) xs[j] = j < 32 ? xb[j] : 0.25f * (float)((j % 7) - 3) * 0.01f;
    emt_quantize_span_ref(xs, 256, qs);
    for (int b = 0; b < 8; b++) CHECK(qs[b].d == q.d);
    CHECK(!memcmp(qs[0].q, q.q, sizeof q.q));
    CHECK_EQ_INT(qs[1].q[0], (int)nearbyintf(xs[32] * (32767.0f / 8.0f)));
    const emt_dtype types[] = { EMT_Q4_0, EMT_Q4_1, EMT_Q8_0, EMT_F16, EMT_BF16,
                                EMT_Q5_0, EMT_Q5_1, EMT_Q4_K, EMT_Q5_K, EMT_Q6_K };
    for (int v = 0; v < EMT_CPU_VARIANT_COUNT; v++) {
        if (!emt_cpu_variant_supported((emt_cpu_variant)v)) {
            printf("variant %s: not supported here, skipped\n", emt_cpu_variant_name((emt_cpu_variant)v));
            continue;
        }
        const emt_backend_ops *op = emt_cpu_variant_ops((emt_cpu_variant)v);
        CHECK(op->weight_types == EMT_CPU_WEIGHT_TYPES);
        emt_backend *be = NULL;
        CHECK_OK(emt_backend_cpu_create_variant((emt_cpu_variant)v, &be));
        emt_exec *ex = op->exec_create(be, 2);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            int k = emt_dtype_block_elems(types[i]) == 256; /* K-quant rows: whole 256-value blocks */
            int exact = types[i] != EMT_F16 && types[i] != EMT_BF16; /* every integer type, every variant */
            check_type(op, ex, types[i], k ? 768 : 576, 37, exact);
            check_type(op, ex, types[i], k ? 256 : 64, 130, exact);
            if (types[i] != EMT_F16 && types[i] != EMT_BF16) check_tiny_blocks(op, ex, types[i]);
            if (k) check_kquant_extremes(op, be, ex, types[i]);
        }
        check_embed(op, ex);
        check_fused(op, ex);
        const emt_dtype act8[] = { EMT_Q4_0, EMT_Q4_1, EMT_Q5_0, EMT_Q8_0, EMT_Q4_K, EMT_Q5_K, EMT_Q6_K };
        for (int i = 0; i < 7; i++) {
            int k = emt_dtype_block_elems(act8[i]) == 256;
            const int amx = v == EMT_CPU_AMX;
            check_act8(op, be, ex, act8[i], k ? 512 : 576, 40);
            check_act8(op, be, ex, act8[i], k ? 256 : 64, 16);
            check_act8(op, be, ex, act8[i], k ? 256 : 96, 13); /* a short output tile */
            if (op->pack) check_act8_rows(op, be, ex, act8[i], amx);
        }
        printf("variant %s: 8-bit prompt mode (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K) equals its scalar reference bit for bit\n",
               emt_cpu_variant_name((emt_cpu_variant)v));
        if (op->pack) {
            const emt_dtype packable[] = { EMT_Q4_0, EMT_Q4_1, EMT_Q8_0, EMT_Q5_0, EMT_Q4_K, EMT_Q5_K, EMT_Q6_K };
            char packed_names[64] = "";
            for (int i = 0; i < 7; i++) {
                int k = emt_dtype_block_elems(packable[i]) == 256;
                long tile_ranges = emt_cpu_amx_tile_ranges();
                int packed = check_packed(op, be, ex, packable[i], k ? 512 : 576, 40);
                CHECK_EQ_INT(check_packed(op, be, ex, packable[i], 2048, 72), packed);
                /* the amx variant's Q4_0 / Q8_0 products of 16+ rows (1..37 above) took the tile kernels, and only they */
                int tiles = v == EMT_CPU_AMX && packed && (packable[i] == EMT_Q4_0 || packable[i] == EMT_Q8_0);
                CHECK_EQ_INT(emt_cpu_amx_tile_ranges() > tile_ranges, tiles);
                if (packed) {
                    strcat(packed_names, " ");
                    strcat(packed_names, emt_dtype_name(packable[i]));
                }
                emt_wmat odd = { packable[i], NULL, NULL, 0 }; /* 37 rows: not whole groups, left alone */
                int32_t odd_in = k ? 256 : 64;
                uint8_t *m = random_matrix(packable[i], odd_in, 37);
                odd.data = m;
                CHECK_OK(op->pack(be, &odd, 37, odd_in));
                CHECK(odd.packed == 0 && odd.data == m);
                free(m);
            }
            /* the types each variant packs (a kernel that silently stopped packing would pass the rest) */
            const char *env = getenv("ENTMTP_CPU_PACK"), *name = emt_cpu_variant_name((emt_cpu_variant)v);
            const char *want = strcmp(name, "avx2") == 0 ? " Q4_0 Q4_1 Q8_0 Q4_K Q6_K" : " Q4_0 Q4_1 Q8_0 Q5_0 Q4_K Q5_K Q6_K";
            if (!env || strcmp(env, "0") != 0) CHECK(strcmp(packed_names, want) == 0);
            printf("variant %s: packed%s equal the file layout bit for bit\n", emt_cpu_variant_name((emt_cpu_variant)v),
                   packed_names[0] ? packed_names : " (none: ENTMTP_CPU_PACK=0)");
        }
        printf("variant %s: Q4_0 Q4_1 Q8_0 F16 BF16 Q5_0 Q5_1 Q4_K Q5_K Q6_K checked, fused products equal\n", emt_cpu_variant_name((emt_cpu_variant)v));
        op->exec_destroy(ex);
        op->destroy(be);
    }
    return emt_test_finish("test_quant_kernels");
}
