/* Quantized types: blocks built byte by byte and decoded by hand, and tiny
 * GGUF models written in every type decode to the F32 model within the
 * quantization step (catches writer and reader disagreeing on layouts). */
#include "check.h"
#include "io/gguf.h"
#include "tiny_model.h"
#include "model/heads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hand_blocks(void) {
    /* f16 0x3C00 = 1.0, 0x3800 = 0.5, 0xC000 = -2.0 */
    uint8_t q40[18] = { 0x00, 0x38 }; /* d = 0.5 */
    for (int j = 0; j < 16; j++) q40[2 + j] = (uint8_t)((j & 0xF) | ((15 - j) << 4));
    emt_tensor t = { "q40", EMT_Q4_0, 1, { 32 }, q40, 18, "hand" };
    float out[32];
    CHECK_OK(emt_tensor_to_f32(&t, 0, 32, out));
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(out[j], (j - 8) * 0.5, 0);            /* low nibble, minus 8, times d */
        CHECK_NEAR(out[j + 16], (15 - j - 8) * 0.5, 0);  /* high nibble -> element j+16 */
    }
    uint8_t q41[20] = { 0x00, 0x3C, 0x00, 0xC0 };     /* d = 1, m = -2 */
    for (int j = 0; j < 16; j++) q41[4 + j] = (uint8_t)(j | (j << 4));
    emt_tensor t1 = { "q41", EMT_Q4_1, 1, { 32 }, q41, 20, "hand" };
    CHECK_OK(emt_tensor_to_f32(&t1, 0, 32, out));
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(out[j], j - 2.0, 0);
        CHECK_NEAR(out[j + 16], j - 2.0, 0);
    }
    uint8_t q80[34] = { 0x00, 0x38 };                 /* d = 0.5 */
    for (int j = 0; j < 32; j++) q80[2 + j] = (uint8_t)(int8_t)(j - 16);
    emt_tensor t8 = { "q80", EMT_Q8_0, 1, { 32 }, q80, 34, "hand" };
    CHECK_OK(emt_tensor_to_f32(&t8, 0, 32, out));
    for (int j = 0; j < 32; j++) CHECK_NEAR(out[j], (j - 16) * 0.5, 0);
    uint8_t f16[8] = { 0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x7C }; /* 1, -2, min subnormal, inf */
    emt_tensor th = { "f16", EMT_F16, 1, { 4 }, f16, 8, "hand" };
    CHECK_OK(emt_tensor_to_f32(&th, 0, 4, out));
    CHECK_NEAR(out[0], 1.0, 0);
    CHECK_NEAR(out[1], -2.0, 0);
    CHECK_NEAR(out[2], ldexp(1.0, -24), 0);
    CHECK(isinf(out[3]) && out[3] > 0);
    uint8_t bf[4] = { 0x80, 0x3F, 0x40, 0xC0 };      /* bf16 1.0, -3.0 */
    emt_tensor tb = { "bf16", EMT_BF16, 1, { 2 }, bf, 4, "hand" };
    CHECK_OK(emt_tensor_to_f32(&tb, 0, 2, out));
    CHECK_NEAR(out[0], 1.0, 0);
    CHECK_NEAR(out[1], -3.0, 0);
    /* the load-time finiteness check reads bits, converting nothing */
    int64_t bad = 0;
    CHECK_OK(emt_tensor_check_finite(&t8, &bad));
    CHECK_EQ_INT((int)bad, -1);
    CHECK_OK(emt_tensor_check_finite(&th, &bad)); /* f16: 1, -2, subnormal, inf */
    CHECK_EQ_INT((int)bad, 3);
    CHECK_OK(emt_tensor_check_finite(&tb, &bad));
    CHECK_EQ_INT((int)bad, -1);
    uint8_t bfnan[6] = { 0x80, 0x3F, 0xC1, 0x7F, 0x80, 0xFF }; /* 1.0, NaN, -inf */
    emt_tensor tbn = { "bfnan", EMT_BF16, 1, { 3 }, bfnan, 6, "hand" };
    CHECK_OK(emt_tensor_check_finite(&tbn, &bad));
    CHECK_EQ_INT((int)bad, 1);
    float f32[3] = { 1.0f, 3e38f, 0.0f };
    emt_tensor tf = { "f32", EMT_F32, 1, { 3 }, f32, 12, "hand" };
    CHECK_OK(emt_tensor_check_finite(&tf, &bad));
    CHECK_EQ_INT((int)bad, -1);
    f32[2] = f32[1] * 10.0f; /* overflows to inf */
    CHECK_OK(emt_tensor_check_finite(&tf, &bad));
    CHECK_EQ_INT((int)bad, 2);
    /* Q4_1 blocks: the second block's minimum is NaN */
    uint8_t q41b[2 * 20] = { 0x00, 0x3C, 0x00, 0x00 };
    q41b[20] = 0x00; q41b[21] = 0x3C; q41b[22] = 0x01; q41b[23] = 0x7E;
    emt_tensor t41 = { "q41", EMT_Q4_1, 1, { 64 }, q41b, sizeof q41b, "hand" };
    CHECK_ERR(emt_tensor_check_finite(&t41, &bad), ENTMTP_ERR_FORMAT, "block 1 has a non-finite minimum");
    /* Q6_K keeps d at the end of its 210 bytes */
    uint8_t q6k[210] = { 0 };
    q6k[208] = 0x00; q6k[209] = 0x3C;
    emt_tensor t6 = { "q6k", EMT_Q6_K, 1, { 256 }, q6k, sizeof q6k, "hand" };
    CHECK_OK(emt_tensor_check_finite(&t6, &bad));
    q6k[209] = 0x7C;
    CHECK_ERR(emt_tensor_check_finite(&t6, &bad), ENTMTP_ERR_FORMAT, "block 0 has a non-finite scale");
    /* a non-finite block scale is a format error naming the tensor */
    q80[0] = 0x00; q80[1] = 0x7C;
    CHECK_ERR(emt_tensor_to_f32(&t8, 0, 32, out), ENTMTP_ERR_FORMAT, "q80");
    CHECK_ERR(emt_tensor_check_finite(&t8, &bad), ENTMTP_ERR_FORMAT, "q80");
}

static float *embedding(const char *path, emt_dtype type, int64_t *n) {
    emt_tiny_config c = emt_tiny_default_config();
    if (emt_tiny_write_gguf(path, &c, type) != ENTMTP_OK) return NULL;
    emt_gguf *g = NULL;
    if (emt_gguf_open(path, &g) != ENTMTP_OK) return NULL;
    const emt_tensor *t = emt_gguf_find_tensor(g, "token_embd.weight");
    *n = emt_tensor_numel(t);
    float *v = malloc((size_t)*n * sizeof(float));
    if (emt_tensor_to_f32(t, 0, *n, v) != ENTMTP_OK) { free(v); v = NULL; }
    CHECK_EQ_INT(t->dtype, type);
    emt_gguf_close(g);
    return v;
}

/* The Q8_0 quantizer: d = amax / 127, q = round(x / d); exact where the
 * values are whole multiples of a representable d, within d/2 elsewhere. */
static void q8_0_quantizer(void) {
    float x[64], out[64];
    uint8_t q[2 * 34];
    for (int j = 0; j < 32; j++) x[j] = j == 31 ? 127.0f : (float)(j * 8 - 127);      /* -127..113, then 127: d = 1 */
    for (int j = 0; j < 32; j++) x[32 + j] = 0.0f;                                  /* an all-zero block */
    CHECK_OK(emt_quantize_blocks(EMT_Q8_0, x, 64, q));
    CHECK_EQ_INT(q[0] | q[1] << 8, 0x3C00);                                         /* d = 1.0 in F16 */
    CHECK_EQ_INT(q[34] | q[35] << 8, 0);
    emt_tensor t = { "q8", EMT_Q8_0, 1, { 64 }, q, sizeof q, "hand" };
    CHECK_OK(emt_tensor_to_f32(&t, 0, 64, out));
    for (int j = 0; j < 64; j++) CHECK_NEAR(out[j], x[j], 0);
    /* arbitrary values: within half a step (the step itself rounded to F16) */
    for (int j = 0; j < 64; j++) x[j] = emt_tiny_uniform(7, "q8_0", j) * (j < 32 ? 3.0f : 0.05f);
    CHECK_OK(emt_quantize_blocks(EMT_Q8_0, x, 64, q));
    CHECK_OK(emt_tensor_to_f32(&t, 0, 64, out));
    for (int b = 0; b < 2; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        for (int j = 0; j < 32; j++) CHECK(fabs(out[32 * b + j] - x[32 * b + j]) <= amax / 127 * 0.502 + amax * 1e-3);
    }
    CHECK_ERR(emt_quantize_blocks(EMT_Q8_0, x, 48, q), ENTMTP_ERR_INVALID_ARGUMENT, "48 values are not whole Q8_0 blocks");
}

/* Draft heads stored as plain floats are kept in Q8_0 when the model computes
 * natively (a draft level reads half the bytes of F16), and in F32 under
 * ENTMTP_COMPUTE_F32; the Q8_0 weights are the file's within half a step. */
static void heads_in_q8_0(void) {
    char model_path[512], heads_path[512];
    snprintf(model_path, sizeof model_path, "%s/quant_heads_model.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads_path, sizeof heads_path, "%s/quant_heads.hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    emt_tiny_config c = emt_tiny_default_config();
    CHECK_OK(emt_tiny_write_gguf(model_path, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_hydra_heads(heads_path, c.hidden, c.vocab, 2, 1, 0, 11));
    float *weights[2] = { NULL, NULL };
    const int64_t rows = c.hidden, cols = 2 * c.hidden; /* head 0's first block reads [h, e(root)] */
    for (int native = 0; native < 2; native++) {
        entmtp_model_params mp = entmtp_model_default_params();
        mp.backend = ENTMTP_BACKEND_CPU;
        mp.compute_type = native ? ENTMTP_COMPUTE_NATIVE : ENTMTP_COMPUTE_F32;
        entmtp_model *m = NULL;
        entmtp_heads *h = NULL;
        CHECK_OK(entmtp_model_load(model_path, &mp, &m));
        if (m) CHECK_OK(entmtp_heads_load(m, heads_path, &h));
        if (!h) { entmtp_model_free(m); continue; }
        const emt_head_layer *L = &h->heads[0].layers[0];
        CHECK_EQ_INT(L->w.dtype, native ? EMT_Q8_0 : EMT_F32);
        CHECK_EQ_INT(L->res_w.dtype, native ? EMT_Q8_0 : EMT_F32);
        CHECK_EQ_INT(h->heads[1].layers[0].w.dtype, native ? EMT_Q8_0 : EMT_F32);
        weights[native] = malloc((size_t)(rows * cols) * sizeof(float));
        if (native) {
            emt_tensor t = { "w", EMT_Q8_0, 2, { rows, cols }, L->w.data, emt_dtype_nbytes(EMT_Q8_0, rows * cols), "q8" };
            CHECK_OK(emt_tensor_to_f32(&t, 0, rows * cols, weights[1]));
        } else {
            memcpy(weights[0], L->w.data, (size_t)(rows * cols) * sizeof(float));
        }
        entmtp_heads_free(h);
        entmtp_model_free(m);
    }
    if (weights[0] && weights[1])
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < cols / 32; b++) {
                const float *f = weights[0] + r * cols + b * 32, *g = weights[1] + r * cols + b * 32;
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(f[j]));
                for (int j = 0; j < 32; j++) CHECK(fabs(g[j] - f[j]) <= amax / 127 * 0.502 + amax * 1e-3);
            }
    free(weights[0]);
    free(weights[1]);
}

int main(void) {
    hand_blocks();
    q8_0_quantizer();
    heads_in_q8_0();
    char path[512];
    snprintf(path, sizeof path, "%s/quant_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    int64_t n = 0, m = 0;
    float *ref = embedding(path, EMT_F32, &n);
    CHECK(ref != NULL);
    /* embedding values are uniform in [-1, 1): quantization steps 2/15 (Q4), 1/127 (Q8) */
    const struct { emt_dtype t; double bound; } cases[] = {
        { EMT_F16, 1e-3 }, { EMT_Q8_0, 1.0 / 127 * 0.51 + 1e-3 }, { EMT_Q4_0, 1.0 / 8 + 1e-3 }, { EMT_Q4_1, 2.0 / 15 * 0.51 + 1e-3 } };
    for (size_t i = 0; i < 4 && ref; i++) {
        float *q = embedding(path, cases[i].t, &m);
        CHECK(q && m == n);
        double worst = 0;
        for (int64_t k = 0; q && k < n; k++) worst = fmax(worst, fabs((double)q[k] - ref[k]));
        printf("%s: max |error| %.5f (bound %.5f)\n", emt_dtype_name(cases[i].t), worst, cases[i].bound);
        CHECK(worst <= cases[i].bound);
        free(q);
    }
    free(ref);
    return emt_test_finish("test_quant");
}
