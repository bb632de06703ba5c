/* The 5-bit and K-quant blocks of llama.cpp (layouts in io/tensor.h):
 * scalar reference dequantization, and quantizers that make such blocks
 * from floats (for synthetic models and tests; simpler than llama.cpp's
 * search for the best scales, the same format). */
#include "io/tensor.h"

#include <math.h>

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* Q5_0 / Q5_1 share the 5-bit codes: nibbles of qs, fifth bits in qh. */
static void q5_codes(const uint8_t *qh4, const uint8_t *qs, int32_t q[32]) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int32_t)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int32_t)((qh >> (j + 16)) & 1) << 4;
    }
}

void emt_dequant_q5_0(const uint8_t *blk, float *out) {
    float d = emt_f16_to_f32(rd16(blk));
    int32_t q[32];
    q5_codes(blk + 2, blk + 6, q);
    for (int j = 0; j < 32; j++) out[j] = (float)(q[j] - 16) * d;
}

void emt_dequant_q5_1(const uint8_t *blk, float *out) {
    float d = emt_f16_to_f32(rd16(blk)), m = emt_f16_to_f32(rd16(blk + 2));
    int32_t q[32];
    q5_codes(blk + 4, blk + 8, q);
    for (int j = 0; j < 32; j++) out[j] = (float)q[j] * d + m;
}

/* Q4_K and Q5_K: qh is NULL for Q4_K. */
static void dequant_q45_k(const uint8_t *blk, const uint8_t *qh, const uint8_t *qs, float *out) {
    float d = emt_f16_to_f32(rd16(blk)), dmin = emt_f16_to_f32(rd16(blk + 2));
    const uint8_t *scales = blk + 4;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        emt_kquant_scale_min(scales, s, &sc, &m);
        float ds = d * (float)sc, ms = dmin * (float)m;
        const uint8_t *q = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++) {
            int v = s % 2 ? q[l] >> 4 : q[l] & 0x0F;
            if (qh) v |= ((qh[l] >> s) & 1) << 4;
            out[32 * s + l] = ds * (float)v - ms;
        }
    }
}

void emt_dequant_q4_k(const uint8_t *blk, float *out) { dequant_q45_k(blk, NULL, blk + 16, out); }
void emt_dequant_q5_k(const uint8_t *blk, float *out) { dequant_q45_k(blk, blk + 16, blk + 48, out); }

/* Q6_K: each half of 128 values reads ql[64] and qh[32]; value l + 32 * k
 * (k = 0..3) of the half takes the low (k = 0, 1) or high (k = 2, 3) nibble
 * of ql[l + 32 * (k % 2)] and bits 2k, 2k+1 of qh[l]; scale index 8h + 2k + l / 16. */
void emt_dequant_q6_k(const uint8_t *blk, float *out) {
    const uint8_t *ql = blk, *qh = blk + 128;
    const int8_t *sc = (const int8_t *)(blk + 192);
    float d = emt_f16_to_f32(rd16(blk + 208));
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, out += 128)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int lo = k < 2 ? ql[l + 32 * (k % 2)] & 0x0F : ql[l + 32 * (k % 2)] >> 4;
                int q = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                out[32 * k + l] = d * (float)sc[2 * k + l / 16] * (float)q;
            }
}


/* ---------------------------------------------------------- quantizers */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value an F16 scale will hold once stored. */
static float f16_round(float v) { return emt_f16_to_f32(emt_f32_to_f16(v)); }

static void pack_q5(const int q[32], uint8_t *qh4, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh4[k] = (uint8_t)(qh >> (8 * k));
}

/* Q5_0: d = the value of largest magnitude / -16, q = round(x / d) + 16. */
static void quantize_q5_0(const float *x, uint8_t *o) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = f16_round(max / -16.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++) q[j] = clampi((int)lrintf(x[j] * id) + 16, 0, 31);
    wr16(o, emt_f32_to_f16(d));
    pack_q5(q, o + 2, o + 6);
}

/* Q5_1: d = (max - min) / 31, m = min, q = round((x - m) / d). */
static void quantize_q5_1(const float *x, uint8_t *o) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; j++) { mn = fminf(mn, x[j]); mx = fmaxf(mx, x[j]); }
    float d = f16_round((mx - mn) / 31.0f), m = f16_round(mn), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++) q[j] = clampi((int)lrintf((x[j] - m) * id), 0, 31);
    wr16(o, emt_f32_to_f16(d));
    wr16(o + 2, emt_f32_to_f16(m));
    pack_q5(q, o + 4, o + 8);
}

/* Q4_K (nmax 15, qh NULL) and Q5_K (nmax 31): per sub-block of 32 a range
 * [min(0, x), max x]; its step and -min become 6-bit multiples of the
 * super-block's d and dmin. */
static void quantize_q45_k(const float *x, int nmax, uint8_t *blk, uint8_t *qh, uint8_t *qs) {
    float step[8], neg_min[8], smax = 0.0f, mmax = 0.0f;
    for (int s = 0; s < 8; s++) {
        float mn = 0.0f, mx = x[32 * s];
        for (int l = 0; l < 32; l++) { mn = fminf(mn, x[32 * s + l]); mx = fmaxf(mx, x[32 * s + l]); }
        step[s] = (mx - mn) / (float)nmax;
        neg_min[s] = -mn;
        smax = fmaxf(smax, step[s]);
        mmax = fmaxf(mmax, neg_min[s]);
    }
    float d = f16_round(smax / 63.0f), dmin = f16_round(mmax / 63.0f);
    uint8_t *scales = blk + 4;
    memset(scales, 0, 12);
    memset(qs, 0, 128);
    if (qh) memset(qh, 0, 32);
    for (int s = 0; s < 8; s++) {
        int sc = d > 0.0f ? clampi((int)lrintf(step[s] / d), 0, 63) : 0;
        int m = dmin > 0.0f ? clampi((int)lrintf(neg_min[s] / dmin), 0, 63) : 0;
        if (s < 4) {
            scales[s] |= (uint8_t)sc;
            scales[s + 4] |= (uint8_t)m;
        } else { /* low 4 bits in scales[s + 4], high 2 bits in the top of scales[s - 4] and scales[s] */
            scales[s + 4] = (uint8_t)((sc & 0x0F) | (m & 0x0F) << 4);
            scales[s - 4] |= (uint8_t)((sc >> 4) << 6);
            scales[s] |= (uint8_t)((m >> 4) << 6);
        }
        float ds = d * (float)sc, ms = dmin * (float)m, ids = ds > 0.0f ? 1.0f / ds : 0.0f;
        for (int l = 0; l < 32; l++) {
            int q = clampi((int)lrintf((x[32 * s + l] + ms) * ids), 0, nmax);
            qs[32 * (s / 2) + l] |= (uint8_t)((q & 0x0F) << (4 * (s % 2)));
            if (qh) qh[l] |= (uint8_t)((q >> 4) << s);
        }
    }
    wr16(blk, emt_f32_to_f16(d));
    wr16(blk + 2, emt_f32_to_f16(dmin));
}

/* Q6_K: per sub-block of 16 a signed step (the value of largest magnitude
 * maps to -32), an 8-bit multiple of d. */
static void quantize_q6_k(const float *x, uint8_t *blk) {
    float step[16], smax = 0.0f;
    for (int s = 0; s < 16; s++) {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < 16; l++)
            if (fabsf(x[16 * s + l]) > amax) { amax = fabsf(x[16 * s + l]); max = x[16 * s + l]; }
        step[s] = max / -32.0f;
        smax = fmaxf(smax, amax / 32.0f);
    }
    float d = f16_round(smax / 127.0f);
    uint8_t *ql = blk, *qh = blk + 128;
    memset(blk, 0, 208);
    for (int s = 0; s < 16; s++) {
        int sc = d > 0.0f ? clampi((int)lrintf(step[s] / d), -128, 127) : 0;
        blk[192 + s] = (uint8_t)(int8_t)sc;
        float ds = d * (float)sc, ids = ds != 0.0f ? 1.0f / ds : 0.0f;
        for (int l = 0; l < 16; l++) {
            int e = 16 * s + l, h = e / 128, k = e % 128 / 32, i = e % 32;
            int q = clampi((int)lrintf(x[e] * ids), -32, 31) + 32;
            ql[64 * h + i + 32 * (k % 2)] |= (uint8_t)((q & 0x0F) << (k < 2 ? 0 : 4));
            qh[32 * h + i] |= (uint8_t)((q >> 4) << (2 * k));
        }
    }
    wr16(blk + 208, emt_f32_to_f16(d));
}

/* Q8_0: one F16 scale d = amax / 127 and 32 signed bytes round(x / d). */
static void quantize_q8_0(const float *x, uint8_t *o) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    wr16(o, emt_f32_to_f16(d));
    for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)clampi((int)lrintf(x[j] * id), -127, 127);
}

entmtp_status emt_quantize_blocks(emt_dtype t, const float *x, int64_t n, void *out) {
    int64_t be = (int64_t)emt_dtype_block_elems(t), bb = (int64_t)emt_dtype_block_bytes(t);
    if (!emt_dtype_is_quantized(t) || n % be)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "quantize: %lld values are not whole %s blocks",
                        (long long)n, emt_dtype_name(t));
    uint8_t *o = out;
    for (int64_t b = 0; b < n / be; b++, x += be, o += bb) {
        switch (t) {
        case EMT_Q8_0: quantize_q8_0(x, o); break;
        case EMT_Q4_0: emt_quantize_q4_0(x, 32, o); break;
        case EMT_Q5_0: quantize_q5_0(x, o); break;
        case EMT_Q5_1: quantize_q5_1(x, o); break;
        case EMT_Q4_K: quantize_q45_k(x, 15, o, NULL, o + 16); break;
        case EMT_Q5_K: quantize_q45_k(x, 31, o, o + 16, o + 48); break;
        case EMT_Q6_K: quantize_q6_k(x, o); break;
        default:
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "quantize: no quantizer for %s", emt_dtype_name(t));
        }
    }
    return ENTMTP_OK;
}
