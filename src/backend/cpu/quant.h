/* Quantized weight blocks as GGUF stores them (llama.cpp's layouts: 32
 * values per block, an F16 scale), the 16-bit activation block that the
 * integer kernels take, and the scalar reference of each typed dot product.
 * Activations are 16-bit integers per 32-value block, not 8-bit as in
 * llama.cpp: with 8 bits the greedy tokens of SmolLM2-135M agreed with the
 * F32 path at 97.7% of 256 positions (docs/performance.md); with 16 bits
 * the only difference from F32 left is the order of float additions. The
 * baseline kernel variant runs these references; the SIMD variants compute
 * the same integer block sums and differ only in the order of the float
 * additions (tests/unit/test_quant_kernels.c compares them). */
#ifndef EMT_QUANT_H
#define EMT_QUANT_H

#include "io/tensor.h"

#include <math.h>

#define EMT_QK 32

/* Q4_0: v = d * (q - 8). Element j < 16 is the low nibble of qs[j], element
 * j + 16 its high nibble. */
typedef struct { uint16_t d; uint8_t qs[16]; } emt_block_q4_0;
/* Q4_1: v = d * q + m, nibbles as Q4_0. */
typedef struct { uint16_t d, m; uint8_t qs[16]; } emt_block_q4_1;
/* Q8_0: v = d * q. */
typedef struct { uint16_t d; int8_t qs[32]; } emt_block_q8_0;

/* One block of an activation row: x ~= d * q with q in [-32767, 32767],
 * and s = d * sum(q) (what Q4_1's minimum multiplies). */
typedef struct { float d, s; int16_t q[EMT_QK]; } emt_xq;

#define EMT_XQ_MAX 32767.0f

static inline uint16_t emt_rd16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* x[0..31] -> one activation block: scale by 32767 / max|x|, round to
 * nearest even (the SIMD variants round the same way, so every variant
 * gets the same integers). */
static inline void emt_quantize_block_ref(const float *x, emt_xq *out) {
    float amax = 0.0f;
    for (int j = 0; j < EMT_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / EMT_XQ_MAX, id = amax > 0.0f ? EMT_XQ_MAX / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < EMT_QK; j++) {
        int32_t q = (int32_t)nearbyintf(x[j] * id);
        out->q[j] = (int16_t)q;
        sum += q;
    }
    out->d = d;
    out->s = d * (float)sum;
}

/* Integer sum over one block of weight codes times activation codes, and
 * the weight block's scale (and minimum, Q4_1). */
static inline int32_t emt_block_isum_ref(emt_dtype t, const uint8_t *blk, const int16_t *xq,
                                         float *dw, float *mw) {
    int32_t isum = 0;
    *dw = emt_f16_to_f32(emt_rd16(blk));
    *mw = 0.0f;
    if (t == EMT_Q8_0) {
        const int8_t *q = (const int8_t *)(blk + 2);
        for (int j = 0; j < EMT_QK; j++) isum += q[j] * xq[j];
    } else {
        const uint8_t *q = blk + (t == EMT_Q4_1 ? 4 : 2);
        int off = t == EMT_Q4_0 ? 8 : 0;
        for (int j = 0; j < 16; j++)
            isum += ((q[j] & 0x0F) - off) * xq[j] + ((q[j] >> 4) - off) * xq[j + 16];
        if (t == EMT_Q4_1) *mw = emt_f16_to_f32(emt_rd16(blk + 2));
    }
    return isum;
}

static inline size_t emt_qblock_bytes(emt_dtype t) {
    return t == EMT_Q4_0 ? sizeof(emt_block_q4_0) : t == EMT_Q4_1 ? sizeof(emt_block_q4_1)
                                                                 : sizeof(emt_block_q8_0);
}

/* Reference dot product of one quantized weight row with one quantized
 * activation row of nb blocks: per block (dw * dx) * isum into one float
 * sum, the Q4_1 minimum terms mw * s into another, added at the end. */
static inline float emt_dot_q_ref(emt_dtype t, const uint8_t *w, const emt_xq *x, int32_t nb) {
    float acc = 0.0f, acc_min = 0.0f;
    size_t bb = emt_qblock_bytes(t);
    for (int32_t b = 0; b < nb; b++) {
        float dw, mw;
        int32_t isum = emt_block_isum_ref(t, w + (size_t)b * bb, x[b].q, &dw, &mw);
        acc += (dw * x[b].d) * (float)isum;
        acc_min += mw * x[b].s;
    }
    return acc + acc_min;
}

#endif
