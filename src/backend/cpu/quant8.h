/* The 8-bit activation mode of prompt processing (entmtp_session_params.
 * prompt_activation_bits = 8): the activation block, its quantizer and the
 * scalar reference of each typed dot product it has a kernel for (Q4_0,
 * Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K; other types keep quant.h's 16-bit
 * activations).
 * Prefill rows use it by default; AR steps and tree-verify rows only with
 * step_activation_bits = 8 (by default they keep the 16-bit activations).
 * Either way a row's product does not depend on the rows beside it, so
 * greedy speculative decoding still equals greedy AR.
 *
 * Per 32 values: a float scale d (x ~= d * q, q in [-127, 127]), s = d *
 * sum(q) for the weight minimums (Q4_1, Q4_K), and four partial sums of the
 * codes that the SIMD kernels use to remove a weight bias in integers.
 *
 * The float order is defined here and every kernel follows it bit for bit
 * (tests/unit/test_quant_kernels.c): per output one float sum; per
 * 32-value block the exact integer sum of its 32 codes, converted, is
 * added by one fused multiply-add with (weight scale * d) (Q6_K, a scale
 * per 16 values: one per 16-value half, half 0 first); the minimum terms
 * mw * s (Q4_1, Q4_K, Q5_K) go by fused multiply-add into a second sum;
 * output = sum + minimum sum. One sum per output lets a tile product
 * (AMX) hold 16 outputs per row in one tile row and take one float step
 * per output and block (half), and the VNNI kernels take one for a row
 * pair's 8 outputs (cpu_variant.h). */
#ifndef EMT_QUANT8_H
#define EMT_QUANT8_H

#include "backend/cpu/quant.h"

typedef struct {
    float d, s;
    /* sums of q over codes {0..3, 8..11}, {4..7, 12..15}, {16..19, 24..27},
     * {20..23, 28..31}: half h (codes 16h..), bit 2 of the index e in lsum[2h + e] */
    int16_t lsum[4];
    int8_t q[EMT_QK];
} emt_xq8;

#define EMT_XQ8_MAX 127.0f

static inline int emt_act8_type(emt_dtype t) {
    return t == EMT_Q4_0 || t == EMT_Q4_1 || t == EMT_Q8_0 || t == EMT_Q5_0 || t == EMT_Q4_K || t == EMT_Q5_K ||
           t == EMT_Q6_K;
}

/* x[0..31] -> one 8-bit block: scale by 127 / max|x|, round to nearest
 * even; quant.h's tiny-block rule (no subnormal scale products). */
static inline void emt_quantize_block8_ref(const float *x, emt_xq8 *out) {
    float amax = 0.0f;
    for (int j = 0; j < EMT_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    if (amax < EMT_XQ_TINY) amax = 0.0f;
    float d = amax / EMT_XQ8_MAX, id = amax > 0.0f ? EMT_XQ8_MAX / amax : 0.0f;
    int32_t sum = 0, part[4] = { 0, 0, 0, 0 };
    for (int j = 0; j < EMT_QK; j++) {
        int32_t q = (int32_t)nearbyintf(x[j] * id);
        q = q > 127 ? 127 : q < -127 ? -127 : q;
        out->q[j] = (int8_t)q;
        sum += q;
        part[2 * (j / 16) + ((j >> 2) & 1)] += q;
    }
    for (int i = 0; i < 4; i++) out->lsum[i] = (int16_t)part[i];
    out->d = d;
    out->s = d * (float)sum;
}

/* One 32-value block of a weight row in the file's layout: codes c[j]
 * (signed values: Q4_0 q - 8, Q5_0 q - 16, Q6_K q - 32; Q4_K / Q5_K the
 * raw q), and the
 * float scales: sc[h] multiplies half h's codes (one value for both halves
 * except Q6_K), mw is the minimum (0 where none). `sub` is the block's
 * index inside a K-quant super-block. */
static inline void emt_block8_decode_ref(emt_dtype t, const uint8_t *blk, int sub, int32_t c[EMT_QK], float sc[2],
                                         float *mw) {
    *mw = 0.0f;
    if (t == EMT_Q4_K || t == EMT_Q5_K) {
        uint8_t s, m;
        emt_kquant_scale_min(blk + 4, sub, &s, &m);
        const uint8_t *qs = blk + (t == EMT_Q5_K ? 48 : 16) + 32 * (sub / 2);
        for (int l = 0; l < EMT_QK; l++) {
            c[l] = sub % 2 ? qs[l] >> 4 : qs[l] & 0x0F;
            if (t == EMT_Q5_K) c[l] |= ((blk[16 + l] >> sub) & 1) << 4;
        }
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk)) * (float)s;
        *mw = -(emt_f16_to_f32(emt_rd16(blk + 2)) * (float)m);
    } else if (t == EMT_Q6_K) {
        int h = sub / 4, k = sub % 4;
        const uint8_t *ql = blk + 64 * h + 32 * (k % 2), *qh = blk + 128 + 32 * h;
        const int8_t *s = (const int8_t *)(blk + 192 + 8 * h + 2 * k);
        for (int l = 0; l < EMT_QK; l++) {
            int lo = k < 2 ? ql[l] & 0x0F : ql[l] >> 4;
            c[l] = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
        }
        float d = emt_f16_to_f32(emt_rd16(blk + 208));
        sc[0] = d * (float)s[0];
        sc[1] = d * (float)s[1];
    } else if (t == EMT_Q5_0) {
        uint32_t qh;
        memcpy(&qh, blk + 2, 4);
        for (int l = 0; l < 16; l++) {
            c[l] = ((blk[6 + l] & 0x0F) | ((qh >> l) & 1) << 4) - 16;
            c[l + 16] = ((blk[6 + l] >> 4) | ((qh >> (l + 16)) & 1) << 4) - 16;
        }
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
    } else if (t == EMT_Q8_0) {
        for (int l = 0; l < EMT_QK; l++) c[l] = ((const int8_t *)(blk + 2))[l];
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
    } else { /* Q4_0, Q4_1 */
        const uint8_t *q = blk + (t == EMT_Q4_1 ? 4 : 2);
        int off = t == EMT_Q4_0 ? 8 : 0;
        for (int l = 0; l < 16; l++) {
            c[l] = (q[l] & 0x0F) - off;
            c[l + 16] = (q[l] >> 4) - off;
        }
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
        if (t == EMT_Q4_1) *mw = emt_f16_to_f32(emt_rd16(blk + 2));
    }
}

/* One block's exact integer sums: part[2h + e] over half h (codes 16h..
 * 16h+15) and the codes with bit 2 of the index e. */
static inline void emt_block8_isums(const int32_t c[EMT_QK], const int8_t *q, int32_t part[4]) {
    for (int i = 0; i < 4; i++) part[i] = 0;
    for (int k = 0; k < 8; k++)
        for (int j = 4 * k; j < 4 * k + 4; j++) part[2 * (k / 4) + (k & 1)] += c[j] * q[j];
}

/* One block's float steps for one row (the header's order): the sum's
 * fused multiply-add (Q6_K: one per half), then the minimum's. */
static inline void emt_block8_accumulate(emt_dtype t, const int32_t part[4], const float sc[2], float mw,
                                         const emt_xq8 *xb, float *sum, float *mins) {
    if (t == EMT_Q6_K) {
        for (int h = 0; h < 2; h++) *sum = fmaf(sc[h] * xb->d, (float)(part[2 * h] + part[2 * h + 1]), *sum);
    } else {
        *sum = fmaf(sc[0] * xb->d, (float)((part[0] + part[1]) + (part[2] + part[3])), *sum);
    }
    if (t == EMT_Q4_1 || t == EMT_Q4_K || t == EMT_Q5_K) *mins = fmaf(mw, xb->s, *mins);
}

/* Reference dot product of one weight row (file layout, nb 32-value
 * blocks) with one 8-bit activation row, in the order the header defines. */
static inline float emt_dot8_ref(emt_dtype t, const uint8_t *w, const emt_xq8 *x, int32_t nb) {
    const int kq = t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K, per = kq ? 8 : 1;
    const size_t bb = kq ? emt_dtype_block_bytes(t) : emt_qblock_bytes(t);
    float sum = 0.0f, mins = 0.0f;
    for (int32_t b = 0; b < nb; b++) {
        int32_t c[EMT_QK], part[4];
        float sc[2], mw;
        emt_block8_decode_ref(t, w + (size_t)(b / per) * bb, b % per, c, sc, &mw);
        emt_block8_isums(c, x[b].q, part);
        emt_block8_accumulate(t, part, sc, mw, &x[b], &sum, &mins);
    }
    return sum + mins;
}

#endif
