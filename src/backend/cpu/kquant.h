/* The 5-bit and K-quant weight blocks (Q5_0, Q5_1, Q4_K, Q5_K, Q6_K;
 * layouts in io/tensor.h) as the integer kernels see them, and the scalar
 * reference of their dot product with a quantized activation row (the
 * 16-bit activation blocks of quant.h).
 *
 * Every one of these types reduces, per 32-value activation block, to 32
 * 16-bit integer codes, one float scale dw and one float minimum mw:
 *   weight value = dw * code + mw   (mw applies to the whole block)
 * For the K-quants the sub-block scale is folded into the codes (Q4_K/Q5_K:
 * sc * q, at most 63 * 31; Q6_K: sc * (q - 32), at most 128 * 32) and dw is
 * the super-block's d. With the activations quantized per 256 values (one
 * dx per super-block) a whole super-block's dot product (Q6_K: each half
 * of it) is exact integer sums (8 lanes, emt_dot_k_ref) times dw * dx,
 * plus mw * s per block (quant.h's Q4_1 term): the sub-blocks cost integer
 * work only. Q6_K's
 * 16-value sub-blocks become the two halves of a block, each with its own
 * integer scale. */
#ifndef EMT_KQUANT_H
#define EMT_KQUANT_H

#include "backend/cpu/quant.h"

/* One 32-value block of weights, decoded. */
typedef struct {
    int16_t c[EMT_QK];
    float dw, mw;
} emt_kblock;

static inline int emt_is_kblock_type(emt_dtype t) {
    return t == EMT_Q5_0 || t == EMT_Q5_1 || t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K;
}

/* 32-value blocks in one stored block: 8 for the K-quants, 1 for Q5_0/Q5_1. */
static inline int emt_kblock_per_block(emt_dtype t) { return t == EMT_Q5_0 || t == EMT_Q5_1 ? 1 : 8; }

/* Decodes 32-value block `sub` of the stored block at blk. */
static inline void emt_kblock_decode_ref(emt_dtype t, const uint8_t *blk, int sub, emt_kblock *out) {
    if (t == EMT_Q5_0 || t == EMT_Q5_1) {
        int off = t == EMT_Q5_1 ? 4 : 2; /* Q5_1 has its minimum after d */
        uint32_t qh;
        memcpy(&qh, blk + off, 4); /* little-endian host (x86-64, arm64) */
        const uint8_t *qs = blk + off + 4;
        int bias = t == EMT_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            out->c[j] = (int16_t)(((qs[j] & 0x0F) | ((qh >> j) & 1) << 4) - bias);
            out->c[j + 16] = (int16_t)(((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - bias);
        }
        out->dw = emt_f16_to_f32(emt_rd16(blk));
        out->mw = t == EMT_Q5_1 ? emt_f16_to_f32(emt_rd16(blk + 2)) : 0.0f;
    } else if (t == EMT_Q4_K || t == EMT_Q5_K) {
        uint8_t sc, m;
        emt_kquant_scale_min(blk + 4, sub, &sc, &m);
        const uint8_t *qh = t == EMT_Q5_K ? blk + 16 : NULL, *qs = blk + (t == EMT_Q5_K ? 48 : 16) + 32 * (sub / 2);
        for (int l = 0; l < 32; l++) {
            int q = sub % 2 ? qs[l] >> 4 : qs[l] & 0x0F;
            if (qh) q |= ((qh[l] >> sub) & 1) << 4;
            out->c[l] = (int16_t)(sc * q);
        }
        out->dw = emt_f16_to_f32(emt_rd16(blk));
        out->mw = -(emt_f16_to_f32(emt_rd16(blk + 2)) * (float)m);
    } else { /* Q6_K: sub = 4 * half + k */
        int h = sub / 4, k = sub % 4;
        const uint8_t *ql = blk + 64 * h + 32 * (k % 2), *qh = blk + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(blk + 192 + 8 * h + 2 * k);
        for (int l = 0; l < 32; l++) {
            int lo = k < 2 ? ql[l] & 0x0F : ql[l] >> 4;
            int q = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
            out->c[l] = (int16_t)(sc[l / 16] * q);
        }
        out->dw = emt_f16_to_f32(emt_rd16(blk + 208));
        out->mw = 0.0f;
    }
}

/* 32-value blocks whose integer sums a kernel adds before one conversion
 * to float: a whole super-block for Q4_K and Q5_K (their activations share
 * one scale per 256 values, quant.h), half of one for Q6_K, one block for
 * Q5_0/Q5_1. Each of a SIMD kernel's 8 lanes then sums at most 32 (Q6_K:
 * 16) products of a scaled code and an activation code: at most
 * 32 * 63 * 31 * 32767 (Q5_K) or 16 * 4096 * 32767 (Q6_K), below 2^31. */
static inline int emt_kblock_sum_group(emt_dtype t) {
    return t == EMT_Q5_0 || t == EMT_Q5_1 ? 1 : t == EMT_Q6_K ? 4 : 8;
}

/* Reference dot product of one weight row (nb 32-value blocks) with one
 * quantized activation row (K-quants: quantized per 256 values), in the
 * order every SIMD kernel of these types takes (cpu_kquant.h, and the
 * packed AVX-512 kernels), which is how one 256-bit vpmaddwd pair lays the
 * products out: 8 lanes per output, lane d holding codes 2d, 2d + 1,
 * 16 + 2d and 17 + 2d of every block. Per sum group (above) each lane's
 * exact integer sum (below 2^31) is converted and added by one fused
 * multiply-add with dw * dx into the lane's float sum; per block mw * s
 * goes into a separate sum (multiplied, then added); at the end the lanes
 * are added as hsum_ps adds them, ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)),
 * then the minimum sum. */
static inline float emt_dot_k_ref(emt_dtype t, const uint8_t *w, const emt_xq *x, int32_t nb) {
    float lane[8] = { 0 }, acc_min = 0.0f;
    int64_t isum[8] = { 0 };
    int per = emt_kblock_per_block(t), group = emt_kblock_sum_group(t);
    size_t bb = emt_dtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++) {
        emt_kblock k;
        emt_kblock_decode_ref(t, w + (size_t)(b / per) * bb, b % per, &k);
        for (int j = 0; j < EMT_QK; j++) isum[(j % 16) / 2] += (int32_t)k.c[j] * x[b].q[j];
        acc_min += k.mw * x[b].s;
        if ((b + 1) % group == 0)
            for (int d = 0; d < 8; d++) {
                lane[d] = fmaf(k.dw * x[b].d, (float)isum[d], lane[d]);
                isum[d] = 0;
            }
    }
    return (((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]))) + acc_min;
}

#endif
