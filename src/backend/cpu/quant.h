/* Quantized weight blocks as GGUF stores them (llama.cpp's layouts: 32
 * values per block, an F16 scale), the 16-bit activation block that the
 * integer kernels take, and the scalar reference of each typed dot product.
 * Activations are 16-bit integers per 32-value block, not 8-bit as in
 * llama.cpp: with 8 bits the greedy tokens of SmolLM2-135M agreed with the
 * F32 path at 97.7% of 256 positions (docs/performance.md); with 16 bits
 * the only difference from F32 left is the order of float additions. (The
 * K-quants' kernels take one activation scale per 256 values instead,
 * EMT_XQ_KSPAN, so their integer sums span a super-block.) The
 * baseline kernel variant runs these references; the SIMD variants compute
 * the same integer block sums. For Q4_0, Q4_1 and Q8_0 the AVX-512 variant
 * also takes the references' float steps, so its products equal them bit
 * for bit; the others differ only in the order of the float additions
 * (tests/unit/test_quant_kernels.c compares them). */
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
 * s = d * sum(q) (what Q4_1's minimum multiplies), and bias8 = { -8 *
 * sum(q), 0 }: Q4_0's offset term, read as one 64-bit value by the packed
 * AVX-512 kernel, whose accumulator lanes come in pairs per output. */
typedef struct { float d, s; int16_t q[EMT_QK]; int32_t bias8[2]; } emt_xq;

#define EMT_XQ_MAX 32767.0f
#define EMT_XQ_KSPAN 256 /* values per activation scale for the K-quants */

/* A block whose largest magnitude is below 2^-87 quantizes to zero. Then
 * d >= 2^-102, so every product the kernels form from it (d times a weight
 * scale, the smallest nonzero f16 being 2^-24) is a normal float: x86 cores
 * take a microcode assist on each subnormal operand, which made ffn_down
 * 12x slower on a random 3B model whose SwiGLU outputs had blocks near
 * 1e-35. Without it 32767 / max|x| also overflows below 9.6e-35 and the
 * codes become -32768. Such a block's exact contribution is below 2^-87
 * times the weights: nothing a float32 sum of normal-sized terms keeps. */
#define EMT_XQ_TINY 0x1p-87f

static inline uint16_t emt_rd16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* x[0..span-1] -> span/32 activation blocks sharing one scale: 32767 /
 * max|x| over the span, each value rounded to nearest even (the SIMD
 * variants round the same way, so every variant gets the same integers).
 * The 32-value types quantize each block alone (span 32); the K-quants
 * take one scale per 256-value super-block (EMT_XQ_KSPAN), so that a
 * super-block's integer sums add up exactly before any float work
 * (kquant.h). */
static inline void emt_quantize_span_ref(const float *x, int32_t span, emt_xq *out) {
    float amax = 0.0f;
    for (int32_t j = 0; j < span; j++) amax = fmaxf(amax, fabsf(x[j]));
    if (amax < EMT_XQ_TINY) amax = 0.0f;
    float d = amax / EMT_XQ_MAX, id = amax > 0.0f ? EMT_XQ_MAX / amax : 0.0f;
    for (int32_t b = 0; b < span / EMT_QK; b++) {
        int32_t sum = 0;
        for (int j = 0; j < EMT_QK; j++) {
            int32_t q = (int32_t)nearbyintf(x[EMT_QK * b + j] * id);
            out[b].q[j] = (int16_t)q;
            sum += q;
        }
        out[b].d = d;
        out[b].s = d * (float)sum;
        out[b].bias8[0] = -8 * sum;
        out[b].bias8[1] = 0;
    }
}

/* x[0..31] -> one activation block (span 32) */
static inline void emt_quantize_block_ref(const float *x, emt_xq *out) { emt_quantize_span_ref(x, EMT_QK, out); }

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
           : t == EMT_Q5_0 ? 22 /* d, qh[4], qs[16] (io/tensor.h) */
                           : sizeof(emt_block_q8_0);
}

/* Reference dot product of one quantized weight row with one quantized
 * activation row of nb blocks: per block fma(dw * dx, isum, .) into one
 * float sum, the Q4_1 minimum terms fma(mw, s, .) into another, added at
 * the end. One sum per output is what a SIMD kernel that keeps each
 * output in its own lane computes (the AVX-512 packed kernels), so for
 * Q4_0, Q4_1 and Q8_0 they equal this bit for bit. */
static inline float emt_dot_q_ref(emt_dtype t, const uint8_t *w, const emt_xq *x, int32_t nb) {
    float acc = 0.0f, acc_min = 0.0f;
    size_t bb = emt_qblock_bytes(t);
    for (int32_t b = 0; b < nb; b++) {
        float dw, mw;
        int32_t isum = emt_block_isum_ref(t, w + (size_t)b * bb, x[b].q, &dw, &mw);
        acc = fmaf(dw * x[b].d, (float)isum, acc);
        acc_min = fmaf(mw, x[b].s, acc_min);
    }
    return acc + acc_min;
}

/* The packed layout (emt_wmat.packed == EMT_PACK_ROWS), for Q4_0, Q4_1,
 * Q8_0, Q5_0, Q4_K, Q5_K and Q6_K matrices whose row count is a multiple of
 * EMT_PACK_ROWS: rows in groups of 8, and per group and block index b the 8
 * rows' block b interleaved (a block: 32 values for Q4_0/Q4_1/Q8_0/Q5_0,
 * the 256-value super-block for the K-quants). The same bytes as the file's 8
 * rows, rearranged, so the memory cost is the matrix's size (it replaces the
 * file's pages), and a group's bytes start where the file's row 8g did. A
 * SIMD kernel reads the 8 rows' codes 4k..4k+3 of a 32-value block (Q4_0,
 * Q4_1, Q8_0; two rows' codes for Q5_0 and the K-quants) with one load, and
 * the 8 rows' scales with another.
 *   Q4_0, Q4_1: the 8 scales (f16; Q4_1: then the 8 minimums), then the 8
 *     rows' 16 nibble bytes by groups of 4: bytes 4k..4k+3 of row 0, of row
 *     1, .., of row 7, for k = 0..3 (byte j holds code j and code j + 16).
 *   Q8_0: the 8 scales, then the 8 rows' 32 codes by groups of 4 as Q4_0's
 *     bytes (codes 4k..4k+3 of rows 0..7, k = 0..7).
 *   Q5_0 (176 bytes): the 8 scales, then the 8 rows' 16 nibble bytes one
 *     after the other (the fifth bits left out of the nibbles),
 *     then per row pair (2p, 2p+1) the fifth bits as two 32-bit masks, one
 *     bit per 16-bit lane of a register holding both rows' codes: codes
 *     0..15 of row 2p then of row 2p+1, then codes 16..31 likewise.
 *   Q4_K (1152 bytes per group and super-block): d[8], dmin[8] (f16), then
 *     per sub-block s and row c one byte sc | (m >> 4) << 6 (64 bytes), per
 *     sub-block pair and row one byte of the minimums' low nibbles (sub-block
 *     2t low, 2t+1 high; 32 bytes), then per sub-block and row 16 bytes
 *     whose byte j holds code j (low nibble) and code j + 16 (high), as Q4_0.
 *   Q5_K (1408 bytes): Q4_K's layout (its low 4 bits of each code), then
 *     per sub-block the fifth bits as Q5_0's masks (32 bytes each).
 *   Q6_K (1680 bytes): d[8], per sub-block and row the two int8 scales of
 *     its halves (128 bytes), per sub-block and row 16 bytes of the codes'
 *     low 4 bits (code j low nibble, j + 16 high), then per sub-block pair
 *     2t, 2t+1 and row 16 bytes of the codes' top 2 bits: byte j holds those
 *     of codes j, j + 16 of sub-block 2t (bits 0-1, 2-3) and of 2t+1 (4-5,
 *     6-7). */
#define EMT_PACK_ROWS 8

static inline int emt_is_kpacked_type(emt_dtype t) { return t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K; }

/* values and bytes of one row's unit of interleaving (a block) */
static inline int emt_pack_unit_elems(emt_dtype t) { return emt_is_kpacked_type(t) ? 256 : EMT_QK; }

static inline int emt_packable(emt_dtype t, int64_t n_out, int64_t n_in) {
    return (t == EMT_Q4_0 || t == EMT_Q4_1 || t == EMT_Q8_0 || t == EMT_Q5_0 || emt_is_kpacked_type(t)) && n_out > 0 &&
           n_out % EMT_PACK_ROWS == 0 && n_in > 0 && n_in % emt_pack_unit_elems(t) == 0;
}

/* bytes of a file block before its codes: the scale (and Q4_1's minimum) */
static inline int emt_qblock_head(emt_dtype t) { return t == EMT_Q4_1 ? 4 : 2; }

static inline size_t emt_pack_unit_bytes(emt_dtype t) {
    return emt_is_kpacked_type(t) ? emt_dtype_block_bytes(t) : emt_qblock_bytes(t);
}

/* Offsets inside a packed Q4_K / Q6_K group super-block (layout above). */
#define EMT_PK4_DMIN 16
#define EMT_PK4_SCM 32   /* [8 sub][8 rows]: sc | (m >> 4) << 6 */
#define EMT_PK4_MLO 96   /* [4 pairs][8 rows]: low nibbles of m */
#define EMT_PK4_QS 128   /* [8 sub][8 rows][16] */
#define EMT_PK5_QH 1152  /* Q5_K: [8 sub][4 pairs][2 masks] */
#define EMT_Q50_QH 144   /* Q5_0: [4 pairs][2 masks] */
#define EMT_PK6_SC 16    /* [8 sub][8 rows][2] int8 */

/* Row c's fifth bits of a 32-value block (bit l: code l) into the masks of
 * its row pair at m (8 bytes: codes 0..15 of both rows, then 16..31). */
static inline void emt_put_fifth_bits(uint32_t bits, int c, uint8_t *m) {
    uint16_t lo = (uint16_t)(bits & 0xFFFF), hi = (uint16_t)(bits >> 16);
    memcpy(m + 8 * (c / 2) + 2 * (c % 2), &lo, 2);
    memcpy(m + 8 * (c / 2) + 4 + 2 * (c % 2), &hi, 2);
}
static inline uint32_t emt_get_fifth_bits(const uint8_t *m, int c) {
    uint16_t lo, hi;
    memcpy(&lo, m + 8 * (c / 2) + 2 * (c % 2), 2);
    memcpy(&hi, m + 8 * (c / 2) + 4 + 2 * (c % 2), 2);
    return (uint32_t)lo | (uint32_t)hi << 16;
}
#define EMT_PK6_QL 144   /* [8 sub][8 rows][16] */
#define EMT_PK6_QH 1168  /* [4 pairs][8 rows][16] */

/* file super-block `src` of row c (0..7) into packed group super-block
 * `dst`. A byte that two sub-blocks share gets one nibble from each, so
 * every byte of a group is written whatever dst held before. */
static inline void emt_kpack_block(emt_dtype t, const uint8_t *src, int c, uint8_t *dst) {
    if (t == EMT_Q4_K || t == EMT_Q5_K) {
        const uint8_t *qs_file = src + (t == EMT_Q5_K ? 48 : 16);
        memcpy(dst + 2 * c, src, 2);
        memcpy(dst + EMT_PK4_DMIN + 2 * c, src + 2, 2);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            emt_kquant_scale_min(src + 4, s, &sc, &m);
            dst[EMT_PK4_SCM + 8 * s + c] = (uint8_t)(sc | (m >> 4) << 6);
            uint8_t *mlo = &dst[EMT_PK4_MLO + 8 * (s / 2) + c];
            *mlo = (uint8_t)(s % 2 ? (*mlo & 0x0F) | (m & 15) << 4 : (*mlo & 0xF0) | (m & 15));
            /* bytes, not codes: loading a large file packs every matrix */
            uint8_t *q = dst + EMT_PK4_QS + 128 * s + 16 * c;
            const uint8_t *f = qs_file + 32 * (s / 2);
            if (s % 2 == 0)
                for (int j = 0; j < 16; j++) q[j] = (uint8_t)((f[j] & 0x0F) | (f[j + 16] & 0x0F) << 4);
            else
                for (int j = 0; j < 16; j++) q[j] = (uint8_t)((f[j] >> 4) | (f[j + 16] & 0xF0));
            if (t == EMT_Q5_K) {
                uint32_t bits = 0;
                for (int l = 0; l < 32; l++) bits |= (uint32_t)((src[16 + l] >> s) & 1) << l;
                emt_put_fifth_bits(bits, c, dst + EMT_PK5_QH + 32 * s);
            }
        }
    } else {
        memcpy(dst + 2 * c, src + 208, 2);
        for (int s = 0; s < 8; s++) {
            memcpy(dst + EMT_PK6_SC + 16 * s + 2 * c, src + 192 + 2 * s, 2);
            uint8_t *ql = dst + EMT_PK6_QL + 128 * s + 16 * c, *qh = dst + EMT_PK6_QH + 128 * (s / 2) + 16 * c;
            const int h = s / 4, k = s % 4, lsh = 4 * (k / 2), hsh = 2 * k;
            const uint8_t *fl = src + 64 * h + 32 * (k % 2), *fh = src + 128 + 32 * h;
            for (int j = 0; j < 16; j++) {
                ql[j] = (uint8_t)(((fl[j] >> lsh) & 15) | ((fl[j + 16] >> lsh) & 15) << 4);
                uint8_t two = (uint8_t)(((fh[j] >> hsh) & 3) | ((fh[j + 16] >> hsh) & 3) << 2);
                qh[j] = (uint8_t)(s % 2 ? (qh[j] & 0x0F) | two << 4 : (qh[j] & 0xF0) | two);
            }
        }
    }
}

/* the inverse: row c's file super-block out of packed group super-block `src` */
static inline void emt_kunpack_block(emt_dtype t, const uint8_t *src, int c, uint8_t *dst) {
    if (t == EMT_Q4_K || t == EMT_Q5_K) {
        memcpy(dst, src + 2 * c, 2);
        memcpy(dst + 2, src + EMT_PK4_DMIN + 2 * c, 2);
        uint8_t sc[8], m[8], *scales = dst + 4, *qs = dst + (t == EMT_Q5_K ? 48 : 16);
        for (int s = 0; s < 8; s++) {
            uint8_t a = src[EMT_PK4_SCM + 8 * s + c], lo = src[EMT_PK4_MLO + 8 * (s / 2) + c];
            sc[s] = a & 63;
            m[s] = (uint8_t)((a >> 6) << 4 | ((lo >> (4 * (s % 2))) & 15));
        }
        /* emt_kquant_scale_min's encoding */
        for (int j = 0; j < 4; j++) {
            scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
            scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
        }
        memset(qs, 0, 128);
        if (t == EMT_Q5_K) memset(dst + 16, 0, 32);
        for (int s = 0; s < 8; s++) {
            if (t == EMT_Q5_K) {
                uint32_t bits = emt_get_fifth_bits(src + EMT_PK5_QH + 32 * s, c);
                for (int l = 0; l < 32; l++) dst[16 + l] |= (uint8_t)(((bits >> l) & 1) << s);
            }
            const uint8_t *q = src + EMT_PK4_QS + 128 * s + 16 * c;
            for (int l = 0; l < 32; l++) {
                int code = l < 16 ? q[l] & 15 : q[l - 16] >> 4;
                qs[32 * (s / 2) + l] |= (uint8_t)(code << (4 * (s % 2)));
            }
        }
    } else {
        memcpy(dst + 208, src + 2 * c, 2);
        memset(dst, 0, 192);
        for (int s = 0; s < 8; s++) {
            memcpy(dst + 192 + 2 * s, src + EMT_PK6_SC + 16 * s + 2 * c, 2);
            const uint8_t *ql = src + EMT_PK6_QL + 128 * s + 16 * c, *qh = src + EMT_PK6_QH + 128 * (s / 2) + 16 * c;
            int h = s / 4, k = s % 4;
            for (int l = 0; l < 32; l++) {
                int lo = l < 16 ? ql[l] & 15 : ql[l - 16] >> 4;
                int two = (qh[l % 16] >> (4 * (s % 2))) & 15, hi = l < 16 ? two & 3 : two >> 2;
                dst[64 * h + 32 * (k % 2) + l] |= (uint8_t)(lo << (4 * (k / 2)));
                dst[128 + 32 * h + l] |= (uint8_t)(hi << (2 * k));
            }
        }
    }
}

/* file block `src` of row c (0..7) into packed group block `dst` */
static inline void emt_pack_block(emt_dtype t, const uint8_t *src, int c, uint8_t *dst) {
    if (emt_is_kpacked_type(t)) {
        emt_kpack_block(t, src, c, dst);
        return;
    }
    memcpy(dst + 2 * c, src, 2);
    if (t == EMT_Q4_1) memcpy(dst + 2 * EMT_PACK_ROWS + 2 * c, src + 2, 2);
    int head = emt_qblock_head(t);
    uint8_t *codes = dst + head * EMT_PACK_ROWS;
    if (t == EMT_Q5_0) {
        uint32_t bits;
        memcpy(&bits, src + 2, 4);
        memcpy(codes + 16 * c, src + 6, 16);
        emt_put_fifth_bits(bits, c, dst + EMT_Q50_QH);
        return;
    }
    for (int k = 0; k < (t == EMT_Q8_0 ? 8 : 4); k++) memcpy(codes + 4 * (EMT_PACK_ROWS * k + c), src + head + 4 * k, 4);
}

/* the inverse: row c's block out of packed group block `src` */
static inline void emt_unpack_block(emt_dtype t, const uint8_t *src, int c, uint8_t *dst) {
    if (emt_is_kpacked_type(t)) {
        emt_kunpack_block(t, src, c, dst);
        return;
    }
    memcpy(dst, src + 2 * c, 2);
    if (t == EMT_Q4_1) memcpy(dst + 2, src + 2 * EMT_PACK_ROWS + 2 * c, 2);
    int head = emt_qblock_head(t);
    const uint8_t *codes = src + head * EMT_PACK_ROWS;
    if (t == EMT_Q5_0) {
        uint32_t bits = emt_get_fifth_bits(src + EMT_Q50_QH, c);
        memcpy(dst + 2, &bits, 4);
        memcpy(dst + 6, codes + 16 * c, 16);
        return;
    }
    for (int k = 0; k < (t == EMT_Q8_0 ? 8 : 4); k++) memcpy(dst + head + 4 * k, codes + 4 * (EMT_PACK_ROWS * k + c), 4);
}

/* A whole matrix, file layout -> packed (n_out a multiple of 8). */
static inline void emt_pack_matrix(emt_dtype t, const uint8_t *src, int64_t n_out, int64_t n_in, uint8_t *dst) {
    size_t bb = emt_pack_unit_bytes(t), rb = emt_dtype_nbytes(t, n_in);
    int64_t nb = n_in / emt_pack_unit_elems(t);
    for (int64_t g = 0; g < n_out / EMT_PACK_ROWS; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *d = dst + (size_t)g * EMT_PACK_ROWS * rb + (size_t)b * EMT_PACK_ROWS * bb;
            for (int c = 0; c < EMT_PACK_ROWS; c++)
                emt_pack_block(t, src + (size_t)(g * EMT_PACK_ROWS + c) * rb + (size_t)b * bb, c, d);
        }
}

/* Row `row` of a weight matrix in the file's layout: a pointer into data
 * when it is not packed, else the row rebuilt into buf (the row's bytes). */
static inline const uint8_t *emt_packed_row(emt_dtype t, const void *data, int32_t packed, int64_t n_in, int64_t row,
                                            uint8_t *buf) {
    size_t rb = emt_dtype_nbytes(t, n_in);
    if (!packed) return (const uint8_t *)data + (size_t)row * rb;
    size_t bb = emt_pack_unit_bytes(t);
    const uint8_t *g = (const uint8_t *)data + (size_t)(row / EMT_PACK_ROWS) * EMT_PACK_ROWS * rb;
    for (int64_t b = 0; b < n_in / emt_pack_unit_elems(t); b++)
        emt_unpack_block(t, g + (size_t)b * EMT_PACK_ROWS * bb, (int)(row % EMT_PACK_ROWS), buf + (size_t)b * bb);
    return buf;
}

/* emt_packed_row, always copied into dst */
static inline void emt_packed_row_into(emt_dtype t, const void *data, int32_t packed, int64_t n_in, int64_t row,
                                       uint8_t *dst) {
    const uint8_t *p = emt_packed_row(t, data, packed, n_in, row, dst);
    if (p != dst) memcpy(dst, p, emt_dtype_nbytes(t, n_in));
}

#endif
