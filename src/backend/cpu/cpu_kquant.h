/* The 5-bit and K-quant kernels (Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) of one CPU
 * variant; included by cpu_variant.h after its shared helpers (dot_i16,
 * hsum_ps, EMT_QROWS). Each stored block is decoded once into the scaled
 * 16-bit codes of kquant.h (emt_kblock_decode_ref is the scalar twin) and
 * then shared by up to EMT_QROWS activation rows. Per output the sequence
 * of operations does not depend on the number of rows (batch invariant);
 * AVX2 and AVX-512 compute the same integers and the same float order,
 * emt_dot_k_ref's (VNNI only fuses the integer multiply-add), so every
 * variant's products equal the reference bit for bit; the baseline runs
 * the reference. */
#ifndef EMT_CPU_KQUANT_H
#define EMT_CPU_KQUANT_H

#include "backend/cpu/kquant.h"

#ifdef __AVX2__
/* Widen 32 bytes of codes to two vectors of 16-bit values (elements
 * 0..15, 16..31), minus bias, times scales s_lo (elements 0..15) and s_hi. */
static inline void widen_codes(__m256i bytes, int bias, int s_lo, int s_hi, __m256i *lo, __m256i *hi) {
    __m256i a = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(bytes));
    __m256i b = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(bytes, 1));
    a = _mm256_sub_epi16(a, _mm256_set1_epi16((int16_t)bias));
    b = _mm256_sub_epi16(b, _mm256_set1_epi16((int16_t)bias));
    *lo = _mm256_mullo_epi16(a, _mm256_set1_epi16((int16_t)s_lo));
    *hi = _mm256_mullo_epi16(b, _mm256_set1_epi16((int16_t)s_hi));
}

/* Bits `shift`.. of every byte of v, `width` bits, moved up to bit 4. The
 * 16-bit shift brings bits of the next byte down only above `width`,
 * where the mask clears them. */
static inline __m256i high_bits(__m256i v, int shift, int width) {
    __m256i b = _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)((1 << width) - 1)));
    return _mm256_slli_epi16(b, 4);
}

/* Q5_0 / Q5_1: one block of 32 (fifth bits spread from the u32 qh). */
static inline void decode_q5(emt_dtype t, const uint8_t *w, __m256i *lo, __m256i *hi, float *dw, float *mw) {
    int off = t == EMT_Q5_1 ? 4 : 2;
    uint32_t qh;
    memcpy(&qh, w + off, 4);
    __m128i qs = _mm_loadu_si128((const __m128i *)(w + off + 4));
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m256i a = _mm256_cvtepu8_epi16(_mm_and_si128(qs, nib));
    __m256i b = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(qs, 4), nib));
    /* lane j gets 16 where bit j of its half of qh is set */
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                                          0x4000, (int16_t)0x8000);
    __m256i ha = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((int16_t)(qh & 0xFFFF)), bit), bit);
    __m256i hb = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((int16_t)(qh >> 16)), bit), bit);
    const __m256i sixteen = _mm256_set1_epi16(16);
    a = _mm256_or_si256(a, _mm256_and_si256(ha, sixteen));
    b = _mm256_or_si256(b, _mm256_and_si256(hb, sixteen));
    if (t == EMT_Q5_0) {
        a = _mm256_sub_epi16(a, sixteen);
        b = _mm256_sub_epi16(b, sixteen);
    }
    *lo = a;
    *hi = b;
    *dw = _cvtsh_ss(emt_rd16(w));
    *mw = t == EMT_Q5_1 ? _cvtsh_ss(emt_rd16(w + 2)) : 0.0f;
}

/* Q4_K / Q5_K sub-block s of super-block w (q: the 32 bytes of qs that
 * hold it, qh: Q5_K's fifth bits): its codes times its scale, and its
 * minimum m. */
static inline void q45_k_sub(emt_dtype t, const uint8_t *w, __m256i q, __m256i qh, int s, __m256i *lo, __m256i *hi,
                             uint8_t *m) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    __m256i c = s % 2 ? _mm256_and_si256(_mm256_srli_epi16(q, 4), nib) : _mm256_and_si256(q, nib);
    if (t == EMT_Q5_K) c = _mm256_or_si256(c, high_bits(qh, s, 1));
    uint8_t sc;
    emt_kquant_scale_min(w + 4, s, &sc, m);
    widen_codes(c, 0, sc, sc, lo, hi);
}

/* Q6_K sub-block 4h + k of a super-block (ql: its half h's 64 bytes of
 * low bits, qh: the half's 32 bytes of top bits, sc: the half's 8 int8
 * scales): (q - 32) times each 16-value part's scale. */
static inline void q6_k_sub(__m256i qla, __m256i qlb, __m256i qh, const int8_t *sc, int k, __m256i *lo, __m256i *hi) {
    const __m256i nib = _mm256_set1_epi8(0x0F), ql = k % 2 ? qlb : qla;
    const __m256i low = k < 2 ? _mm256_and_si256(ql, nib) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), nib);
    widen_codes(_mm256_or_si256(low, high_bits(qh, 2 * k, 2)), 32, sc[2 * k], sc[2 * k + 1], lo, hi);
}

/* Q4_K / Q5_K: 8 blocks of 32, sub-block scales folded into the codes. */
static inline void decode_q45_k(emt_dtype t, const uint8_t *w, __m256i lo[8], __m256i hi[8], float *dw, float mw[8]) {
    float dmin = _cvtsh_ss(emt_rd16(w + 2));
    const uint8_t *qs = w + (t == EMT_Q5_K ? 48 : 16);
    __m256i qh = t == EMT_Q5_K ? _mm256_loadu_si256((const __m256i *)(w + 16)) : _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        uint8_t m;
        q45_k_sub(t, w, _mm256_loadu_si256((const __m256i *)(qs + 32 * (s / 2))), qh, s, &lo[s], &hi[s], &m);
        mw[s] = -(dmin * (float)m);
    }
    *dw = _cvtsh_ss(emt_rd16(w));
}

/* Q6_K: 8 blocks of 32, each two 16-value sub-blocks with int8 scales. */
static inline void decode_q6_k(const uint8_t *w, __m256i lo[8], __m256i hi[8], float *dw, float mw[8]) {
    for (int h = 0; h < 2; h++) {
        __m256i qla = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
        __m256i qlb = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
        for (int k = 0; k < 4; k++) {
            q6_k_sub(qla, qlb, qh, (const int8_t *)(w + 192 + 8 * h), k, &lo[4 * h + k], &hi[4 * h + k]);
            mw[4 * h + k] = 0.0f;
        }
    }
    *dw = _cvtsh_ss(emt_rd16(w + 208));
}
#endif

/* Whether kdot_rows streams this product's weights itself (kdot_one: one
 * row of a K-quant), so the caller asks for none ahead. */
static inline int kdot_streams(emt_dtype t, int32_t n_rows) {
#ifdef __AVX2__
    return n_rows == 1 && emt_is_kpacked_type(t);
#else
    (void)t, (void)n_rows;
    return 0;
#endif
}

#ifdef __AVX2__
/* kdot_rows for one activation row (the AR step) of Q4_K, Q5_K or Q6_K:
 * each 32-value block decoded and multiplied at once, so the 16 decoded
 * vectors that several rows share never go through memory; the same
 * integers and float steps as kdot_rows. */
static inline __attribute__((always_inline)) float kdot_one(emt_dtype t, const uint8_t *w, const emt_xq *x,
                                                            int32_t nb) {
    const size_t bb = emt_dtype_block_bytes(t);
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0.0f;
    for (int32_t b0 = 0; b0 < nb; b0 += 8, w += bb, x += 8) {
        /* the weights stream from memory: each super-block asks for its
         * lines EMT_KPREFETCH_AHEAD bytes on (the caller leaves one-row
         * products to this, not to a burst at the row's start) */
        for (size_t i = 0; i < bb; i += 64) __builtin_prefetch(w + EMT_KPREFETCH_AHEAD + i, 0, 3);
        __m256i isum = _mm256_setzero_si256(), lo, hi;
        if (t == EMT_Q6_K) {
            const float dw = _cvtsh_ss(emt_rd16(w + 208));
            for (int h = 0; h < 2; h++) { /* a sum group: half of the super-block */
                const __m256i qla = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
                const __m256i qlb = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const emt_xq *xb = x + 4 * h + k;
                    q6_k_sub(qla, qlb, qh, (const int8_t *)(w + 192 + 8 * h), k, &lo, &hi);
                    isum = dot_i16(dot_i16(isum, lo, _mm256_loadu_si256((const __m256i *)xb->q)), hi,
                                   _mm256_loadu_si256((const __m256i *)(xb->q + 16)));
                }
                acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[4 * h].d), _mm256_cvtepi32_ps(isum), acc);
                isum = _mm256_setzero_si256();
            }
            continue;
        }
        const float dmin = _cvtsh_ss(emt_rd16(w + 2));
        const uint8_t *qs = w + (t == EMT_Q5_K ? 48 : 16);
        const __m256i qh = t == EMT_Q5_K ? _mm256_loadu_si256((const __m256i *)(w + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            uint8_t m;
            q45_k_sub(t, w, _mm256_loadu_si256((const __m256i *)(qs + 32 * (s / 2))), qh, s, &lo, &hi, &m);
            isum = dot_i16(dot_i16(isum, lo, _mm256_loadu_si256((const __m256i *)x[s].q)), hi,
                           _mm256_loadu_si256((const __m256i *)(x[s].q + 16)));
            const float mw = -(dmin * (float)m);
            acc_min += mw * x[s].s;
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(emt_rd16(w)) * x[0].d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc) + acc_min;
}
#endif

/* One weight row of a 5-bit or K-quant type against nr (<= EMT_QROWS)
 * activation rows of nb blocks: out[r] = the row's dot product. The float
 * order per output: per sum group (kquant.h: a K-quant super-block, half of
 * one for Q6_K, a block for Q5_0/Q5_1) one fused multiply-add of the 8
 * lanes' exact integer sums by dw * dx, per block mw * s into a scalar,
 * lanes summed at the end: emt_dot_k_ref's order, and packed_krows'. */
static inline __attribute__((always_inline)) void
kdot_rows(emt_dtype t, const uint8_t *w, const emt_xq *x, int32_t nb, int nr, float *out) {
#ifdef __AVX2__
    if (kdot_streams(t, nr)) {
        out[0] = kdot_one(t, w, x, nb);
        return;
    }
    const int per = emt_kblock_per_block(t), group = emt_kblock_sum_group(t);
    const size_t bb = emt_dtype_block_bytes(t);
    const int has_min = t != EMT_Q5_0 && t != EMT_Q6_K;
    __m256 acc[EMT_QROWS];
    float acc_min[EMT_QROWS];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm256_setzero_ps();
        acc_min[r] = 0.0f;
    }
    for (int32_t b0 = 0; b0 < nb; b0 += per, w += bb) {
        __m256i lo[8], hi[8];
        float dw, mw[8];
        if (t == EMT_Q5_0 || t == EMT_Q5_1) decode_q5(t, w, &lo[0], &hi[0], &dw, &mw[0]);
        else if (t == EMT_Q6_K) decode_q6_k(w, lo, hi, &dw, mw);
        else decode_q45_k(t, w, lo, hi, &dw, mw);
        for (int s0 = 0; s0 < per; s0 += group) {
#pragma GCC unroll 8
            for (int r = 0; r < nr; r++) {
                const emt_xq *xb = x + (size_t)r * nb + b0 + s0;
                __m256i isum = _mm256_setzero_si256();
                for (int s = 0; s < group; s++) {
                    __m256i xlo = _mm256_loadu_si256((const __m256i *)xb[s].q);
                    __m256i xhi = _mm256_loadu_si256((const __m256i *)(xb[s].q + 16));
                    isum = dot_i16(dot_i16(isum, lo[s0 + s], xlo), hi[s0 + s], xhi);
                    if (has_min) acc_min[r] += mw[s0 + s] * xb[s].s;
                }
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb->d), _mm256_cvtepi32_ps(isum), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]) + acc_min[r];
#else
    for (int r = 0; r < nr; r++) out[r] = emt_dot_k_ref(t, w, x + (size_t)r * nb, nb);
#endif
}

#endif
