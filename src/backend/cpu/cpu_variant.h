/* The CPU backend's ops, compiled once per kernel variant (cpu_baseline.c,
 * cpu_avx2.c, cpu_avx512.c each include this file with its own target
 * flags and EMT_CPU_OPS naming the table it defines); cpu_backend.c picks a
 * table from cpuid at load. The same source in every variant: the compiler
 * flags decide which #ifdef __AVX2__ / __AVX512VNNI__ paths exist. Device
 * memory is host memory. */
#include "accept/accept.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_variants.h"
#include "backend/cpu/cpu_step_ops.h"
#include "backend/cpu/pool.h"
#include "backend/cpu/kquant.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/quant8.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef ENTMTP_HAVE_OPENBLAS
#include <cblas.h>
#endif

#if defined(__AMX_INT8__) || defined(__AMXINT8__) /* GCC's and clang's names for -mamx-int8 */
#define EMT_CPU_AMX_TILES 1
#endif

struct emt_exec {
    emt_backend *be;
    emt_pool *pool;
    emt_xq *xq; /* activation rows quantized for the integer kernels, a scale per 32 values */
    size_t xq_cap;
    emt_xq *xqk; /* the same for the K-quants: a scale per 256 values */
    size_t xqk_cap;
    float *xsc; /* per 8-row group and block: the rows' scales d[8], then s[8] */
    size_t xsc_cap;
    emt_xq8 *xq8; /* the same rows with 8-bit codes (prompt mode, quant8.h) */
    size_t xq8_cap;
    int act8; /* set_activation_bits(8): products of emt_act8_type weights take xq8 */
    int kv_bf16; /* set_kv_dtype(EMT_BF16): attention's K/V caches hold BF16 */
    float *attn_partial; /* attention's per-chunk partial results */
    size_t attn_cap;
    uint8_t *amx_x; /* amx variant: xq's rows split for the tile products (amx_split_row) */
    size_t amx_cap;
    int32_t amx_rows; /* rows that amx_x holds (0: none, the products read xq) */
    uint8_t *amx8_x; /* amx variant: xq8's rows split for the tile products (amx8_split_row) */
    size_t amx8_cap;
    int32_t amx8_rows; /* rows that amx8_x holds (0: none) */
    const char *error; /* set by an op that failed; sync reports it */
};

/* ------------------------------------------------------------- memory */

static void cpu_destroy(emt_backend *be) { free(be); }

static void *cpu_alloc(emt_backend *be, size_t bytes) {
    (void)be;
    return emt_calloc(bytes, 1);
}

static void cpu_release(emt_backend *be, void *ptr) {
    (void)be;
    free(ptr);
}

static entmtp_status cpu_upload(emt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    memcpy(dst, src, bytes);
    return ENTMTP_OK;
}

static entmtp_status cpu_download(emt_exec *ex, void *dst, const void *src, size_t bytes) {
    (void)ex;
    memcpy(dst, src, bytes);
    return ENTMTP_OK;
}

static void cpu_copy_rows(emt_exec *ex, float *dst, const float *src, size_t row_floats,
                          const int32_t *dst_rows, const int32_t *src_rows, int32_t n) {
    (void)ex;
    for (int32_t i = 0; i < n; i++) {
        float *d = dst + (size_t)dst_rows[i] * row_floats;
        const float *s = src + (size_t)src_rows[i] * row_floats;
        if (d != s) memmove(d, s, row_floats * sizeof(float));
    }
}

static int32_t online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int32_t)n;
}

static emt_exec *cpu_exec_create(emt_backend *be, int32_t n_threads) {
    emt_exec *ex = emt_calloc(1, sizeof *ex);
    if (!ex) return NULL;
    ex->be = be;
    ex->pool = emt_pool_create(n_threads > 0 ? n_threads : online_cpus());
    if (!ex->pool) { free(ex); return NULL; }
    return ex;
}

static void cpu_exec_destroy(emt_exec *ex) {
    if (!ex) return;
    emt_pool_destroy(ex->pool);
    free(ex->xq);
    free(ex->xqk);
    free(ex->xsc);
    free(ex->xq8);
    free(ex->attn_partial);
    free(ex->amx_x);
    free(ex->amx8_x);
    free(ex);
}

static entmtp_status cpu_sync(emt_exec *ex) {
    return ex->error ? ENTMTP_ERR_BACKEND : ENTMTP_OK;
}

/* the reason for the last failed sync, which it clears */
static const char *cpu_error_text(emt_exec *ex) {
    const char *e = ex->error ? ex->error : "";
    ex->error = NULL;
    return e;
}

/* ---------------------------------------------------------- elementwise */

static void cpu_embed(emt_exec *ex, const float *table, int32_t dim, const int32_t *tokens,
                      int32_t n_rows, float *out) {
    (void)ex;
    for (int32_t r = 0; r < n_rows; r++)
        memcpy(out + (size_t)r * dim, table + (size_t)tokens[r] * dim, (size_t)dim * sizeof(float));
}

static void cpu_rmsnorm(emt_exec *ex, const float *x, const float *w, int32_t n_rows, int32_t dim,
                        float eps, float *out) {
    (void)ex;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        double ss = 0.0;
        for (int32_t i = 0; i < dim; i++) ss += (double)xr[i] * (double)xr[i];
        float scale = (float)(1.0 / sqrt(ss / dim + (double)eps));
        for (int32_t i = 0; i < dim; i++) o[i] = xr[i] * scale * w[i];
    }
}

/* expf with its two ends taken here: below -104 expf's result is +0 (its
 * smallest subnormal is e^-103.3), above 89 +inf (the largest float is
 * e^88.72), but glibc reaches both through a slow errno-setting path, which
 * softmax and SiLU hit often (2% of a verify's samples at depth 512 on 1B
 * Q4_K_M). Bit for bit expf for every float (checked for all |x| > 80). */
static inline float exp_ends(float x) { return x < -104.0f ? 0.0f : x > 89.0f ? INFINITY : expf(x); }

static inline float silu(float v) { return v / (1.0f + exp_ends(-v)); }

/* GELU, tanh approximation (Gemma's gelu_pytorch_tanh) */
static inline float gelu_tanh(float v) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

#define EMT_ELEMENTS_PER_TASK 8192

/* out = act(gate) * up for SwiGLU (SiLU) and GeGLU (GELU): one job, the
 * activation chosen once per task, outside the loop */
typedef struct gated_job {
    const float *gate, *up;
    float *out;
    int64_t n;
    int gelu;
} gated_job;

/* elementwise, so any split gives the same bits; the activation dominates */
static void gated_task(void *ctx, int32_t task) {
    const gated_job *j = ctx;
    int64_t i0 = (int64_t)task * EMT_ELEMENTS_PER_TASK;
    int64_t i1 = i0 + EMT_ELEMENTS_PER_TASK < j->n ? i0 + EMT_ELEMENTS_PER_TASK : j->n;
    if (j->gelu)
        for (int64_t i = i0; i < i1; i++) j->out[i] = gelu_tanh(j->gate[i]) * j->up[i];
    else
        for (int64_t i = i0; i < i1; i++) j->out[i] = silu(j->gate[i]) * j->up[i];
}

static void run_gated(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out, int gelu) {
    gated_job job = { gate, up, out, n, gelu };
    emt_pool_run(ex->pool, (int32_t)((n + EMT_ELEMENTS_PER_TASK - 1) / EMT_ELEMENTS_PER_TASK),
                 gated_task, &job);
}

static void cpu_swiglu(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out) {
    run_gated(ex, gate, up, n, out, 0);
}

static void cpu_geglu(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out) {
    run_gated(ex, gate, up, n, out, 1);
}

static void cpu_scale(emt_exec *ex, float *x, int64_t n, float s) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_softcap(emt_exec *ex, float *x, int64_t n, float cap) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

static void cpu_add(emt_exec *ex, float *x, const float *y, int64_t n) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

static void cpu_silu_residual(emt_exec *ex, const float *res, const float *pre, int64_t n,
                              float *out) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) out[i] = res[i] + silu(pre[i]);
}

/* rope at positions base + positions[r] */
static void rope_rows(float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t base,
                      const int32_t *positions, const float *inv_freq) {
    int32_t half = n_rot / 2;
    for (int32_t r = 0; r < n_rows; r++) {
        for (int32_t i = 0; i < half; i++) {
            double angle = (double)(base + positions[r]) * (double)inv_freq[i];
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int32_t h = 0; h < n_heads; h++) {
                float *v = x + ((size_t)r * n_heads + h) * head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

static void cpu_rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim,
                     int32_t n_rot, const int32_t *positions, const float *inv_freq) {
    (void)ex;
    rope_rows(x, n_rows, n_heads, head_dim, n_rot, 0, positions, inv_freq);
}

static void cpu_rope_dyn(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                         const emt_dyn_rows *rows, const float *inv_freq) {
    (void)ex;
    rope_rows(x, n_rows, n_heads, head_dim, n_rot, rows->len[0], rows->offsets, inv_freq);
}

/* ---------------------------------------------------------------- matmul */

/* The batch-invariant dot product: one 8-wide accumulator over the inputs
 * in steps of 8, a fixed horizontal sum, then a scalar tail. Every kernel
 * below computes each output with exactly this sequence of operations; the
 * kernels differ only in how many weight rows and input rows share each
 * load, so an output's bits do not depend on the number of rows in a call
 * or on which kernel computed it. */
typedef float emt_v8 __attribute__((vector_size(32)));
#ifdef __AVX__
#include <immintrin.h>
#endif

/* a*b + c with one rounding when the machine has FMA (chosen at compile
 * time, the same instruction in every path), else a*b then + c. */
#if defined(__FMA__) && defined(__AVX__)
static inline emt_v8 madd(emt_v8 a, emt_v8 b, emt_v8 c) {
    return (emt_v8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
}
#else
static inline emt_v8 madd(emt_v8 a, emt_v8 b, emt_v8 c) { return a * b + c; }
#endif

static inline emt_v8 load8(const float *p) {
    emt_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* 8 half-precision weights -> floats. */
static inline emt_v8 load8_half(emt_dtype t, const uint16_t *p) {
#if defined(__AVX2__) && defined(__F16C__)
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (t == EMT_F16) return (emt_v8)_mm256_cvtph_ps(h);
    return (emt_v8)_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#else
    emt_v8 v;
    for (int k = 0; k < 8; k++) v[k] = t == EMT_F16 ? emt_f16_to_f32(p[k]) : emt_bf16_to_f32(p[k]);
    return v;
#endif
}

static inline float finish(emt_v8 a, const float *w, const float *x, int32_t i, int32_t n) {
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

static inline float dot1(const float *w, const float *x, int32_t n) {
    emt_v8 a = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) a = madd(load8(w + i), load8(x + i), a);
    return finish(a, w, x, i, n);
}

/* Horizontal sums of 8 (hsum8) or 4 (hsum4) accumulators at once, each in
 * finish()'s order ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)): hadd forms the
 * pairs, a second hadd their sums, then low half + high half. Bit-identical
 * to finish() before its tail. */
#ifdef __AVX__
static inline emt_v8 hsum8(const emt_v8 a[8]) {
    __m256 g0 = _mm256_hadd_ps(_mm256_hadd_ps((__m256)a[0], (__m256)a[1]),
                               _mm256_hadd_ps((__m256)a[2], (__m256)a[3]));
    __m256 g1 = _mm256_hadd_ps(_mm256_hadd_ps((__m256)a[4], (__m256)a[5]),
                               _mm256_hadd_ps((__m256)a[6], (__m256)a[7]));
    return (emt_v8)_mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20),
                                 _mm256_permute2f128_ps(g0, g1, 0x31));
}

static inline void hsum4(const emt_v8 a[4], float out[4]) {
    __m256 g = _mm256_hadd_ps(_mm256_hadd_ps((__m256)a[0], (__m256)a[1]),
                              _mm256_hadd_ps((__m256)a[2], (__m256)a[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(g), _mm256_extractf128_ps(g, 1)));
}
#else
static inline emt_v8 hsum8(const emt_v8 a[8]) {
    emt_v8 s;
    for (int t = 0; t < 8; t++) s[t] = finish(a[t], NULL, NULL, 0, 0);
    return s;
}

static inline void hsum4(const emt_v8 a[4], float out[4]) {
    for (int t = 0; t < 4; t++) out[t] = finish(a[t], NULL, NULL, 0, 0);
}
#endif

/* A loaded vector that the compiler must keep in a register: without this
 * it folds the load into every FMA that uses it as a memory operand,
 * loading it again for each, and the kernels become bound by loads. */
static inline emt_v8 in_reg(emt_v8 v) {
#if defined(__AVX__) && defined(__GNUC__)
    __asm__("" : "+x"(v));
#endif
    return v;
}

/* Outputs are taken in groups of at most EMT_GROUP (every kernel width
 * divides it); rows in blocks of at most EMT_MAX_NR. */
#define EMT_GROUP 6
#define EMT_MAX_NR 6
#define EMT_PF_LOCALITY 2 /* into L2: L1 holds the group and the input rows */

/* nw weight rows (outputs) against nr input rows: nw*nr accumulators (at
 * most 12, so that they, the weight vectors and one input vector fit in the
 * 16 vector registers), each weight load serving nr rows. nw and nr are
 * constants at every call site, so the loops unroll into registers. With
 * pf_rows > 0, the weight rows pf_rows further on (the next group's) are
 * prefetched while this block computes, so the weight stream from memory
 * overlaps the arithmetic instead of alternating with it (prefetches never
 * fault, so those past the last row are harmless). */
static inline __attribute__((always_inline)) void
block(const float *w, size_t n_in, const float *x, int32_t n, int nw, int nr, size_t pf_rows,
      const float *bias, float *y, size_t n_out) {
    emt_v8 acc[EMT_MAX_NR][EMT_GROUP];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nw; k++) acc[r][k] = (emt_v8){ 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (pf_rows && i % 16 == 0) /* one per 64-byte line */
            for (int k = 0; k < nw; k++)
                __builtin_prefetch(w + (k + pf_rows) * n_in + i, 0, EMT_PF_LOCALITY);
        if (nr <= nw) { /* the input rows stay in registers, weights stream */
            emt_v8 xv[EMT_MAX_NR];
            for (int r = 0; r < nr; r++) xv[r] = in_reg(load8(x + r * n_in + i));
            for (int k = 0; k < nw; k++) {
                emt_v8 wk = in_reg(load8(w + k * n_in + i));
                for (int r = 0; r < nr; r++) acc[r][k] = madd(wk, xv[r], acc[r][k]);
            }
        } else { /* the weight rows stay in registers, inputs stream */
            emt_v8 wv[EMT_GROUP];
            for (int k = 0; k < nw; k++) wv[k] = in_reg(load8(w + k * n_in + i));
            for (int r = 0; r < nr; r++) {
                emt_v8 xr = in_reg(load8(x + r * n_in + i));
                for (int k = 0; k < nw; k++) acc[r][k] = madd(wv[k], xr, acc[r][k]);
            }
        }
    }
    /* horizontal sums four at a time (padded with zeros), then the tails */
    enum { MAX_ACC = EMT_MAX_NR * EMT_GROUP };
    emt_v8 flat[MAX_ACC + 3];
    float sum[MAX_ACC + 3];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nw; k++) flat[r * nw + k] = acc[r][k];
    for (int a = nr * nw; a % 4; a++) flat[a] = (emt_v8){ 0 };
    for (int a = 0; a < nr * nw; a += 4) hsum4(flat + a, sum + a);
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nw; k++) {
            float v = sum[r * nw + k];
            for (int32_t t = i; t < n; t++) v += w[k * n_in + t] * x[r * n_in + t];
            y[r * n_out + k] = bias ? v + bias[k] : v;
        }
}

typedef struct matmul_job {
    const float *W, *bias, *x;
    float *y;
    int32_t n_rows, n_in, n_out, chunk;
} matmul_job;

/* The widest kernel for nr rows that keeps <= 12 accumulators. */
static int kernel_width(int nr) { return nr <= 2 ? 6 : nr <= 4 ? 3 : 2; }

/* One group of `step` outputs from o for input rows r0..r0+nr-1, in kernels
 * of nw outputs (nw, nr constant after inlining), prefetching the next group. */
static inline __attribute__((always_inline)) void
group_rows(const matmul_job *j, int32_t r0, int32_t o, int nw, int nr, int step) {
    size_t n_in = (size_t)j->n_in, n_out = (size_t)j->n_out;
    for (int32_t k = 0; k < step; k += nw)
        block(j->W + (size_t)(o + k) * n_in, n_in, j->x + (size_t)r0 * n_in, j->n_in, nw, nr,
              (size_t)step, j->bias ? j->bias + o + k : NULL, j->y + (size_t)r0 * n_out + o + k,
              n_out);
}

static void group_block(const matmul_job *j, int32_t r0, int nr, int32_t o, int step) {
    switch (nr) {
    case 1: group_rows(j, r0, o, 6, 1, step); break;
    case 2: group_rows(j, r0, o, 6, 2, step); break;
    case 3: group_rows(j, r0, o, 3, 3, step); break;
    case 4: group_rows(j, r0, o, 3, 4, step); break;
    case 5: group_rows(j, r0, o, 2, 5, step); break;
    default: group_rows(j, r0, o, 2, 6, step); break;
    }
}

/* Single outputs (the last n_out % step) for rows r0..r0+nr-1. */
static void single_block(const matmul_job *j, int32_t r0, int nr, int32_t o) {
    size_t n_in = (size_t)j->n_in, n_out = (size_t)j->n_out;
    const float *w = j->W + (size_t)o * n_in, *x = j->x + (size_t)r0 * n_in;
    const float *b = j->bias ? j->bias + o : NULL;
    float *y = j->y + (size_t)r0 * n_out + o;
    switch (nr) {
    case 1: block(w, n_in, x, j->n_in, 1, 1, 0, b, y, n_out); break;
    case 2: block(w, n_in, x, j->n_in, 1, 2, 0, b, y, n_out); break;
    case 3: block(w, n_in, x, j->n_in, 1, 3, 0, b, y, n_out); break;
    case 4: block(w, n_in, x, j->n_in, 1, 4, 0, b, y, n_out); break;
    case 5: block(w, n_in, x, j->n_in, 1, 5, 0, b, y, n_out); break;
    default: block(w, n_in, x, j->n_in, 1, 6, 0, b, y, n_out); break;
    }
}

/* First row of block b when n rows are split into n_blocks near-equal
 * blocks (so none has more than EMT_MAX_NR rows). */
static inline int32_t block_start(int32_t n, int32_t n_blocks, int32_t b) {
    return (int32_t)((int64_t)n * b / n_blocks);
}

/* One chunk of outputs for every row. Each group of outputs is read from
 * memory once and serves every row block while it is in cache. The group is
 * one kernel wide when all row blocks use the same kernel width (a smaller
 * working set beside the input rows), else EMT_GROUP wide. */
static void matmul_task(void *ctx, int32_t task) {
    const matmul_job *j = ctx;
    int32_t o0 = task * j->chunk;
    int32_t o1 = o0 + j->chunk < j->n_out ? o0 + j->chunk : j->n_out;
    int32_t n = j->n_rows, n_blocks = (n + EMT_MAX_NR - 1) / EMT_MAX_NR;
    int step = kernel_width(block_start(n, n_blocks, 1) - block_start(n, n_blocks, 0));
    for (int32_t b = 1; b < n_blocks; b++)
        if (kernel_width(block_start(n, n_blocks, b + 1) - block_start(n, n_blocks, b)) != step)
            step = EMT_GROUP;
    int32_t o = o0;
    for (; o + step <= o1; o += step)
        for (int32_t b = 0; b < n_blocks; b++) {
            int32_t r = block_start(n, n_blocks, b);
            group_block(j, r, block_start(n, n_blocks, b + 1) - r, o, step);
        }
    for (; o < o1; o++)
        for (int32_t b = 0; b < n_blocks; b++) {
            int32_t r = block_start(n, n_blocks, b);
            single_block(j, r, block_start(n, n_blocks, b + 1) - r, o);
        }
}

static void cpu_matmul(emt_exec *ex, const float *W, const float *bias, const float *x,
                       int32_t n_rows, int32_t n_in, int32_t n_out, float *y, int exact) {
#ifdef ENTMTP_HAVE_OPENBLAS
    if (!exact && n_rows >= 16) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_rows, n_out, n_in, 1.0f, x, n_in, W,
                    n_in, 0.0f, y, n_out);
        if (bias)
            for (int32_t r = 0; r < n_rows; r++)
                for (int32_t o = 0; o < n_out; o++) y[(size_t)r * n_out + o] += bias[o];
        return;
    }
#endif
    (void)exact;
    matmul_job job = { W, bias, x, y, n_rows, n_in, n_out, 0 };
    /* chunks of outputs, whole groups, about 4 per thread for balance */
    int32_t threads = emt_pool_size(ex->pool);
    int32_t chunk = (n_out + threads * 4 - 1) / (threads * 4);
    chunk = (chunk + EMT_GROUP - 1) / EMT_GROUP * EMT_GROUP;
    if (chunk < 2 * EMT_GROUP) chunk = 2 * EMT_GROUP;
    job.chunk = chunk;
    emt_pool_run(ex->pool, (n_out + chunk - 1) / chunk, matmul_task, &job);
}

/* ------------------------------------------------------------- attention */

#define EMT_ATTN_BLOCK 64

typedef struct attn_job {
    const float *q, *k, *v;
    const uint8_t *mask;
    float *out;
    int32_t n_prefix, n_rows, n_heads, n_kv_heads, head_dim;
    int32_t row0;   /* cache row of new row 0 (n_prefix, or attention_dyn's tree area) */
    float scale;
    float softcap;  /* 0: none */
    float *partial; /* [row][head][chunk] of [m, l, acc[head_dim]] */
    int32_t n_chunks;
    const int32_t *positions; /* with window > 0: the rows' positions, less pos_base */
    int32_t pos_base;         /* attention_dyn: L (positions are then the tree's depths) */
    int32_t window;           /* 0: none; else keys >= window positions back are hidden */
    int kv_bf16;              /* k and v point to BF16 caches */
    int32_t kv_run;           /* KV heads per chunk task (a divisor of n_kv_heads) */
} attn_job;

/* Eight K or V elements of a cache (F32, or BF16 widened exactly: a BF16
 * value is the top half of its float). */
static inline emt_v8 load8_kv(const void *cache, size_t at, int bf16) {
    return bf16 ? load8_half(EMT_BF16, (const uint16_t *)cache + at) : load8((const float *)cache + at);
}

/* One cache element as a float (F32, or BF16 widened). */
static inline float kv_at(const void *cache, size_t at, int bf16) {
    return bf16 ? emt_bf16_to_f32(((const uint16_t *)cache)[at]) : ((const float *)cache)[at];
}

/* madd() on one float: fused where madd is. */
#if defined(__FMA__) && defined(__AVX__)
static inline float madd1(float a, float b, float c) { return fmaf(a, b, c); }
#else
static inline float madd1(float a, float b, float c) { return a * b + c; }
#endif

/* Query heads of one KV head worked at once by the attention's kernels,
 * so that each K or V load serves all of them: as many as the accumulators
 * (8 keys or 64 dims per head) leave registers for. */
#if defined(__AVX512F__)
#define EMT_ATTN_HEADS 2
#else
#define EMT_ATTN_HEADS 1
#endif

/* Scores of keys keys[0..nb) (a cache row each, `stride` elements apart)
 * against the nh queries q[h]: s[h][t] = dot1(q[h], k_t) * scale. Eight
 * keys at a time as eight independent chains per query, summed by hsum8
 * (dot1's sequence per key, its tail where hd is not a multiple of 8
 * included), each K load serving the nh queries. A last partial group
 * repeats its last key, so every key takes this one path; each s[h] must
 * hold nb rounded up to 8. With `ahead` (bytes; 0: none) each key's row
 * that far on is asked for into L2 as the key is read: the next block's
 * row, for a prefix read in order (the loads alone keep too few misses in
 * flight to stream). nh is a constant after inlining. */
static inline __attribute__((always_inline)) void
attn_scores(const float *const *q, int nh, const void *k, int bf16, size_t stride, const int32_t *keys, int32_t nb,
            int32_t hd, float scale, float *const *s, size_t ahead) {
    const int32_t hd8 = hd & ~7;
    const size_t elem = bf16 ? 2 : 4;
    for (int32_t t = 0; t < nb; t += 8) {
        size_t at[8];
        emt_v8 a[EMT_ATTN_HEADS][8];
        for (int u = 0; u < 8; u++) at[u] = (size_t)keys[t + u < nb ? t + u : nb - 1] * stride;
        for (int h = 0; h < nh; h++)
            for (int u = 0; u < 8; u++) a[h][u] = (emt_v8){ 0 };
        if (ahead)
            for (int u = 0; u < 8 && t + u < nb; u++)
                for (size_t o = 0; o < (size_t)hd * elem; o += 64)
                    __builtin_prefetch((const char *)k + at[u] * elem + ahead + o, 0, 2);
        for (int32_t i = 0; i < hd8; i += 8) {
            if (nh == 1) { /* each K load straight into its FMA: 8 sums and the query fill 16 registers */
                emt_v8 qv = in_reg(load8(q[0] + i));
                for (int u = 0; u < 8; u++) a[0][u] = madd(qv, load8_kv(k, at[u] + (size_t)i, bf16), a[0][u]);
                continue;
            }
            emt_v8 kv[8];
            for (int u = 0; u < 8; u++) kv[u] = in_reg(load8_kv(k, at[u] + (size_t)i, bf16));
            for (int h = 0; h < nh; h++) {
                emt_v8 qv = in_reg(load8(q[h] + i));
                for (int u = 0; u < 8; u++) a[h][u] = madd(qv, kv[u], a[h][u]);
            }
        }
        for (int h = 0; h < nh; h++) {
            emt_v8 v = hsum8(a[h]);
            for (int u = 0; u < 8 && hd8 < hd; u++)
                for (int32_t i = hd8; i < hd; i++) v[u] += q[h][i] * kv_at(k, at[u] + (size_t)i, bf16);
            v = v * scale;
            memcpy(s[h] + t, &v, sizeof v);
        }
    }
}

/* e^x for x <= 0 in eight lanes (x = -inf gives 0): x = n ln2 + r with
 * |r| <= ln2 / 2 (Cody-Waite, ln2 in two parts), e^r by its Taylor series
 * to r^7 (truncation below 6e-9 relative), times 2^n built in the exponent
 * bits. Below -87 (e^x < 2^-125) it gives 0. Relative error about 1e-7
 * (2 ulp); plain multiplies and adds, so every variant and every path gives
 * the same bits for the same x: a tree row's softmax is its AR row's. */
typedef int32_t emt_i8 __attribute__((vector_size(32)));
static inline emt_v8 exp_neg8(emt_v8 x) {
    const emt_i8 dead = x < -87.0f;
    x = (emt_v8)(((emt_i8)x & ~dead) | ((emt_i8)((emt_v8){ 0 } - 87.0f) & dead));
    emt_v8 t = x * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: rounds x / ln2 to an integer */
    emt_v8 n = t - 12582912.0f;
    emt_v8 r = x - n * 0.693359375f;     /* exact: n has at most 8 bits, 0.693359375 = 355 / 512 */
    r = r - n * -2.12194440e-4f;         /* ln2 - 0.693359375 */
    emt_v8 p = r * (1.0f / 5040.0f) + (1.0f / 720.0f);
    p = p * r + (1.0f / 120.0f);
    p = p * r + (1.0f / 24.0f);
    p = p * r + (1.0f / 6.0f);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    emt_i8 two_n = ((emt_i8)t - 0x4B400000 + 127) << 23; /* t's low bits hold n */
    return (emt_v8)((emt_i8)(p * (emt_v8)two_n) & ~dead);
}

/* One block of nb keys into a (row, head)'s online softmax state, first
 * half: m (the running maximum) and l (the running sum of e^(s - m)). s is
 * rescaled to e^(s - m_new) in place (s holds nb rounded up to 8; the
 * padding becomes 0); returns e^(m - m_new), by which the caller rescales
 * the running sum of e^(s - m) v (attn_accumulate). */
static inline float attn_softmax(float *m, float *l, float *s, int32_t nb) {
    int32_t nb8 = (nb + 7) & ~7;
    for (int32_t t = nb; t < nb8; t++) s[t] = -INFINITY;
    emt_v8 mx = load8(s);
    for (int32_t t = 8; t < nb8; t += 8) {
        emt_v8 st = load8(s + t);
        mx = (emt_v8)(((emt_i8)st & (st > mx)) | ((emt_i8)mx & ~(st > mx)));
    }
    float mb = mx[0];
    for (int u = 1; u < 8; u++) mb = mx[u] > mb ? mx[u] : mb;
    float m_new = *m > mb ? *m : mb;
    /* the rescale of the earlier blocks, by the same exp: 0 on the first block (m = -inf) */
    float corr = exp_neg8((emt_v8){ 0 } + (*m - m_new))[0];
    emt_v8 lsum = { 0 };
    for (int32_t t = 0; t < nb8; t += 8) {
        emt_v8 p = exp_neg8(load8(s + t) - m_new);
        memcpy(s + t, &p, sizeof p);
        lsum = lsum + p;
    }
    *l = *l * corr + finish(lsum, NULL, NULL, 0, 0);
    *m = m_new;
    return corr;
}

/* The second half, for nh heads at once: acc[h] = acc[h] * corr[h], then
 * acc[h] += p[h][t] v_t key by key, madd per element (64 dims of every
 * head in registers, each V load serving the nh heads); `ahead` as
 * attn_scores' for the V rows. nh is a constant after inlining. */
static inline __attribute__((always_inline)) void
attn_accumulate(float *const *acc, const float *corr, const float *const *p, int nh, const void *v, int bf16,
                size_t stride, const int32_t *keys, int32_t nb, int32_t hd, size_t ahead) {
    const int32_t hd8 = hd & ~7;
    const size_t elem = bf16 ? 2 : 4;
    int32_t d0 = 0;
    for (; d0 + 64 <= hd8; d0 += 64) {
        emt_v8 a[EMT_ATTN_HEADS][8];
        for (int h = 0; h < nh; h++)
            for (int u = 0; u < 8; u++) a[h][u] = load8(acc[h] + d0 + 8 * u) * corr[h];
        for (int32_t t = 0; t < nb; t++) {
            size_t at = (size_t)keys[t] * stride + (size_t)d0;
            if (ahead)
                for (size_t o = 0; o < 64 * elem; o += 64) __builtin_prefetch((const char *)v + at * elem + ahead + o, 0, 2);
            if (nh == 1) { /* as in attn_scores: each V load straight into its FMA */
                emt_v8 pv = (emt_v8){ 0 } + p[0][t];
                for (int u = 0; u < 8; u++) a[0][u] = madd(pv, load8_kv(v, at + 8 * (size_t)u, bf16), a[0][u]);
                continue;
            }
            emt_v8 vv[8];
            for (int u = 0; u < 8; u++) vv[u] = in_reg(load8_kv(v, at + 8 * (size_t)u, bf16));
            for (int h = 0; h < nh; h++) {
                emt_v8 pv = (emt_v8){ 0 } + p[h][t];
                for (int u = 0; u < 8; u++) a[h][u] = madd(pv, vv[u], a[h][u]);
            }
        }
        for (int h = 0; h < nh; h++) memcpy(acc[h] + d0, a[h], sizeof a[h]);
    }
    for (int h = 0; h < nh; h++) {
        for (int32_t d = d0; d < hd8; d += 8) { /* the same steps, 8 dims at a time */
            emt_v8 a = load8(acc[h] + d) * corr[h];
            for (int32_t t = 0; t < nb; t++)
                a = madd((emt_v8){ 0 } + p[h][t], load8_kv(v, (size_t)keys[t] * stride + (size_t)d, bf16), a);
            memcpy(acc[h] + d, &a, sizeof a);
        }
        for (int32_t d = hd8; d < hd; d++) { /* and one at a time */
            float a = acc[h][d] * corr[h];
            for (int32_t t = 0; t < nb; t++) a = madd1(p[h][t], kv_at(v, (size_t)keys[t] * stride + (size_t)d, bf16), a);
            acc[h][d] = a;
        }
    }
}

/* Keys are reduced in chunks of EMT_ATTN_CHUNK visible keys: a row's
 * visible keys are one per position 0..its own, so chunk c always holds
 * positions [c*CHUNK, (c+1)*CHUNK) whether the row is an AR token or a tree
 * node, and the chunks are folded in order; a node's result therefore has
 * the bits AR computes at its position. Chunks let a decode step spread one
 * long context over the threads; a task takes every query head of its KV
 * heads (GQA) and every row of its row block, so each K/V block is read
 * once for all of them (attn_chunk_task). */
#define EMT_ATTN_CHUNK 128

/* The visible keys of `row` with visible index in [v0, v0 + want): cache
 * rows in order, then the row's visible new rows by index. With a sliding
 * window the visible keys start `window - 1` positions before the row's
 * own and the index counts from there, so a tree node and AR at the same
 * position still see the same keys in the same chunks. */
static int32_t chunk_keys(const attn_job *j, int32_t row, int32_t v0, int32_t want, int32_t *keys) {
    int32_t first = 0, pos = 0;
    if (j->window > 0) {
        pos = j->pos_base + j->positions[row];
        first = pos - j->window + 1;
        first = first < 0 ? 0 : first > j->n_prefix ? j->n_prefix : first;
    }
    int32_t nb = 0;
    for (int32_t kr = first + v0; kr < j->n_prefix && nb < want; kr++) keys[nb++] = kr;
    int32_t in_prefix = j->n_prefix - first;
    int32_t skip = v0 > in_prefix ? v0 - in_prefix : 0;
    for (int32_t col = 0; col < j->n_rows && nb < want; col++) {
        int visible = j->mask ? j->mask[(size_t)row * j->n_rows + col] : col <= row;
        if (!visible || (j->window > 0 && pos - (j->pos_base + j->positions[col]) >= j->window)) continue;
        if (skip > 0) { skip--; continue; }
        keys[nb++] = j->row0 + col;
    }
    return nb;
}

/* Rows of one attention task: a tree's rows (and a prompt's, by blocks)
 * share their prefix keys, so a task reads each K/V block once for all of
 * its rows instead of once per row. */
#define EMT_ATTN_ROWS 16

/* Asks for the cache rows keys[0..nb) of KV heads [h0, h1) ahead of their
 * use, one request per cache line (cache rows hold every KV head side by
 * side, so these are contiguous runs). */
static void attn_prefetch(const void *cache, size_t elem, size_t stride, const int32_t *keys, int32_t nb,
                          int32_t h0, int32_t h1, int32_t hd) {
    for (int32_t t = 0; t < nb; t++) {
        const char *r = (const char *)cache + ((size_t)keys[t] * stride + (size_t)h0 * hd) * elem;
        for (size_t o = 0; o < (size_t)(h1 - h0) * hd * elem; o += 64) __builtin_prefetch(r + o, 0, 2); /* to L2: a block is 16-256 KB */
    }
}

/* Query heads hq .. hq + nh - 1 (of one KV head) of one row over one key
 * block: scores, softmax, accumulate into their partial records. nh and
 * bf16 (the cache's type) are constants after inlining. */
static inline __attribute__((always_inline)) void
attn_heads(const attn_job *j, int32_t row, int32_t hq, int nh, int bf16, int32_t chunk, const void *kc,
           const void *vc, const int32_t *keys, int32_t nb, size_t pf) {
    const int32_t hd = j->head_dim;
    const size_t kv_stride = (size_t)j->n_kv_heads * hd, rec = (size_t)hd + 2;
    const float *q[EMT_ATTN_HEADS];
    float *part[EMT_ATTN_HEADS], *acc[EMT_ATTN_HEADS], *p[EMT_ATTN_HEADS], corr[EMT_ATTN_HEADS];
    float s[EMT_ATTN_HEADS][EMT_ATTN_BLOCK] = { { 0 } }; /* all written before read; GCC cannot tell through p */
    for (int h = 0; h < nh; h++) {
        q[h] = j->q + ((size_t)row * j->n_heads + hq + h) * hd;
        part[h] = j->partial + (((size_t)row * j->n_heads + hq + h) * j->n_chunks + chunk) * rec;
        acc[h] = part[h] + 2;
        p[h] = s[h];
    }
    attn_scores(q, nh, kc, bf16, kv_stride, keys, nb, hd, j->scale, p, pf);
    for (int h = 0; h < nh; h++) {
        if (j->softcap > 0.0f)
            for (int32_t t = 0; t < nb; t++) s[h][t] = j->softcap * tanhf(s[h][t] / j->softcap);
        corr[h] = attn_softmax(&part[h][0], &part[h][1], s[h], nb);
    }
    attn_accumulate(acc, corr, (const float *const *)p, nh, vc, bf16, kv_stride, keys, nb, hd, pf);
}

/* One (block of rows, chunk, run of KV heads): for each row and each query
 * head of those KV heads, the online softmax over the row's keys of the
 * chunk in blocks of EMT_ATTN_BLOCK, left in the partial record [m, l,
 * acc[hd]] (m = -inf when the chunk is empty for the row). Key blocks are
 * the outer loop, so a task streams the cache rows of its block (all its
 * KV heads, side by side in a row) instead of one head's slice of each
 * row, and the next block's rows are asked for while this one is worked
 * on. Each (row, head) takes the same steps as it would alone, so how rows
 * and heads are grouped into tasks does not change a bit. */
static void attn_chunk_task(void *ctx, int32_t task) {
    const attn_job *j = ctx;
    int32_t chunk = task % j->n_chunks, rest = task / j->n_chunks;
    int32_t runs = j->n_kv_heads / j->kv_run;
    int32_t h0 = rest % runs * j->kv_run, h1 = h0 + j->kv_run, r0 = rest / runs * EMT_ATTN_ROWS;
    int32_t r1 = r0 + EMT_ATTN_ROWS < j->n_rows ? r0 + EMT_ATTN_ROWS : j->n_rows;
    int32_t hd = j->head_dim, group = j->n_heads / j->n_kv_heads;
    size_t kv_stride = (size_t)j->n_kv_heads * hd, rec = (size_t)hd + 2, elem = j->kv_bf16 ? 2 : 4;
    for (int32_t row = r0; row < r1; row++)
        for (int32_t head = h0 * group; head < h1 * group; head++) {
            float *part = j->partial + (((size_t)row * j->n_heads + head) * j->n_chunks + chunk) * rec;
            part[0] = -INFINITY;
            part[1] = 0.0f;
            for (int32_t d = 0; d < hd; d++) part[2 + d] = 0.0f;
        }
    int32_t keys[EMT_ATTN_ROWS][EMT_ATTN_BLOCK], nbs[EMT_ATTN_ROWS];
    const int32_t c0 = chunk * EMT_ATTN_CHUNK, c1 = c0 + EMT_ATTN_CHUNK;
    for (int32_t v0 = c0; v0 < c1; v0 += EMT_ATTN_BLOCK) {
        int any = 0;
        for (int32_t row = r0; row < r1; row++) {
            nbs[row - r0] = chunk_keys(j, row, v0, EMT_ATTN_BLOCK, keys[row - r0]);
            any |= nbs[row - r0] > 0;
        }
        if (!any) break;
        if (v0 == c0) {
            attn_prefetch(j->k, elem, kv_stride, keys[0], nbs[0], h0, h1, hd);
            attn_prefetch(j->v, elem, kv_stride, keys[0], nbs[0], h0, h1, hd);
        }
        /* the next block's rows (the prefix's: cache rows in order), asked
         * for by the first row's first head as it reads this block's */
        const size_t ahead = v0 + EMT_ATTN_BLOCK < c1 ? (size_t)EMT_ATTN_BLOCK * kv_stride * elem : 0;
        for (int32_t kv_head = h0; kv_head < h1; kv_head++) {
            const void *kc = (const char *)j->k + (size_t)kv_head * hd * elem;
            const void *vc = (const char *)j->v + (size_t)kv_head * hd * elem;
            for (int32_t row = r0; row < r1; row++) { /* the block's K and V rows stay in cache across rows and heads */
                int32_t nb = nbs[row - r0];
                if (nb == 0) continue; /* this row's keys of the chunk ended */
                for (int32_t hq = kv_head * group; hq < (kv_head + 1) * group; hq += EMT_ATTN_HEADS) {
                    int nh = (kv_head + 1) * group - hq < EMT_ATTN_HEADS ? (kv_head + 1) * group - hq : EMT_ATTN_HEADS;
                    size_t pf = row == r0 && hq == kv_head * group ? ahead : 0;
                    const int32_t *kr = keys[row - r0];
/* nh and the cache type constant in each call: the heads' sums stay in registers */
#define EMT_ATTN_HEADS_CALL(n)                                                                          \
    (j->kv_bf16 ? attn_heads(j, row, hq, n, 1, chunk, kc, vc, kr, nb, pf)                               \
                : attn_heads(j, row, hq, n, 0, chunk, kc, vc, kr, nb, pf))
                    switch (nh) {
                    case 1: EMT_ATTN_HEADS_CALL(1); break;
#if EMT_ATTN_HEADS >= 2
                    case 2: EMT_ATTN_HEADS_CALL(2); break;
#endif
                    default: break;
                    }
#undef EMT_ATTN_HEADS_CALL
                }
            }
        }
    }
}

/* One (row, head): the chunks' partials folded in chunk order. */
static void attn_fold_task(void *ctx, int32_t task) {
    const attn_job *j = ctx;
    int32_t hd = j->head_dim;
    size_t rec = (size_t)hd + 2;
    const float *p = j->partial + (size_t)task * j->n_chunks * rec;
    float *o = j->out + (size_t)task * hd;
    float m = -INFINITY, l = 0.0f;
    for (int32_t d = 0; d < hd; d++) o[d] = 0.0f;
    for (int32_t c = 0; c < j->n_chunks; c++, p += rec) {
        if (p[0] == -INFINITY) continue; /* empty chunk (past this row's position) */
        float m_new = m > p[0] ? m : p[0];
        float a = exp_ends(m - m_new), b = exp_ends(p[0] - m_new);
        l = l * a + p[1] * b;
        for (int32_t d = 0; d < hd; d++) o[d] = o[d] * a + p[2 + d] * b;
        m = m_new;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t d = 0; d < hd; d++) o[d] *= inv;
}

/* attention(), attention_softcap() and attention_window() (window 0:
 * none; cap 0: none): the chunk tasks, then the folds. */
static void run_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          int32_t n_prefix, int32_t row0, int32_t n_rows, const uint8_t *mask, const int32_t *positions,
                          int32_t pos_base, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap,
                          float *out) {
    int32_t n_chunks = (n_prefix + n_rows + EMT_ATTN_CHUNK - 1) / EMT_ATTN_CHUNK;
    size_t need = (size_t)n_rows * n_heads * n_chunks * ((size_t)head_dim + 2);
    if (need > ex->attn_cap) {
        float *p = realloc(ex->attn_partial, need * sizeof *p);
        if (!p) {
            ex->error = "cpu attention: out of memory for the chunk partials";
            return;
        }
        ex->attn_partial = p;
        ex->attn_cap = need;
    }
    attn_job job = { q, k_cache, v_cache, mask, out, n_prefix, n_rows, n_heads, n_kv_heads,
                     head_dim, row0, 1.0f / sqrtf((float)head_dim), cap, ex->attn_partial, n_chunks, positions,
                     pos_base, window, ex->kv_bf16 };
    /* KV heads per task: all of them (whole cache rows), halved while that
     * leaves fewer than 4 tasks a thread */
    int32_t row_blocks = (n_rows + EMT_ATTN_ROWS - 1) / EMT_ATTN_ROWS;
    job.kv_run = n_kv_heads;
    while (job.kv_run % 2 == 0 && row_blocks * n_chunks * (n_kv_heads / job.kv_run) < 4 * emt_pool_size(ex->pool))
        job.kv_run /= 2;
    emt_pool_run(ex->pool, row_blocks * n_chunks * (n_kv_heads / job.kv_run), attn_chunk_task, &job);
    emt_pool_run(ex->pool, n_rows * n_heads, attn_fold_task, &job);
}

static void cpu_attention_softcap(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                                  int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                                  int32_t n_kv_heads, int32_t head_dim, float cap, float *out) {
    run_attention(ex, q, k_cache, v_cache, n_prefix, n_prefix, n_rows, mask, NULL, 0, n_heads, n_kv_heads, head_dim, 0,
                  cap, out);
}

static void cpu_attention_dyn(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                              const emt_dyn_rows *rows, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    if (rows->len[0] < 0 || rows->len[0] > rows->row0) {
        ex->error = "cpu attention_dyn: the prefix length lies outside [0, row0]";
        return;
    }
    run_attention(ex, q, k_cache, v_cache, rows->len[0], rows->row0, n_rows, mask, rows->offsets, rows->len[0],
                  n_heads, n_kv_heads, head_dim, window, cap, out);
}

static void cpu_attention_window(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                                 int32_t n_prefix, int32_t n_rows, const uint8_t *mask, const int32_t *positions,
                                 int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap,
                                 float *out) {
    run_attention(ex, q, k_cache, v_cache, n_prefix, n_prefix, n_rows, mask, positions, 0, n_heads, n_kv_heads,
                  head_dim, window, cap, out);
}

static void cpu_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, float *out) {
    cpu_attention_softcap(ex, q, k_cache, v_cache, n_prefix, n_rows, mask, n_heads, n_kv_heads, head_dim,
                          0.0f, out);
}

/* ----------------------------------------------------------------- top-k */

typedef struct topk_job {
    const float *logits;
    int32_t vocab, k;
    int32_t *top_ids;
    float *top_probs, *entropy;
} topk_job;

/* One row: emt_topk_softmax (accept.c). */
static void topk_task(void *ctx, int32_t r) {
    const topk_job *j = ctx;
    int32_t vocab = j->vocab, k = j->k;
    const float *x = j->logits + (size_t)r * vocab;
    int32_t *ids = j->top_ids + (size_t)r * k;
    float *vals = j->top_probs + (size_t)r * k;
    emt_topk_softmax(x, vocab, k, ids, vals, j->entropy ? &j->entropy[r] : NULL);
}

/* Rows are independent (the exp over the vocabulary dominates): one task
 * per row, each computed exactly as alone. */
static void cpu_topk(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                     int32_t *top_ids, float *top_probs, float *entropy) {
    topk_job job = { logits, vocab, k > vocab ? vocab : k, top_ids, top_probs, entropy };
    emt_pool_run(ex->pool, n_rows, topk_task, &job);
}


/* --------------------------------------------------------- typed weights */

/* Sum of 8 lanes in one fixed order (the same in every SIMD variant). */
#ifdef __AVX2__
static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Several products' integer lanes reduced together (qtile_rows): exact
 * 32-bit sums (none can overflow), so any order gives the same.
 * EMT_MERGE_LANES(a, b) adds lane pairs (lo, hi: the
 * blend masks, swap: the shuffle that brings a pair together) of two
 * vectors into one, with one shuffle, two blends (more ports than
 * shuffles) and one add: EMT_MERGE_LANES(v0, v1, 0x55, 0xAA, 0xB1) holds v0's
 * sums of lanes 01, v1's 01, then 23, 45, 67 alike. (A macro: the masks
 * must be constants at every optimisation level.) */
#define EMT_MERGE_LANES(a, b, lo, hi, swap) \
    _mm256_add_epi32(_mm256_blend_epi32(a, b, hi), _mm256_shuffle_epi32(_mm256_blend_epi32(a, b, lo), swap))

/* Products l = 0..7 pushed in order (s_l: 8 lane sums each), merged as
 * soon as two, then four, are in: s_prev holds an even product, m_prev a
 * merged pair of the first half of a four, h[l / 4] lanes: the four's sums
 * of lanes 0..3, then of 4..7. Few registers stay live. */
#define EMT_PUSH_LANES(l, s1)                                                                  \
    do {                                                                                       \
        if ((l) % 2 == 0) {                                                                    \
            s_prev = (s1);                                                                     \
        } else {                                                                               \
            __m256i pair_ = EMT_MERGE_LANES(s_prev, s1, 0x55, 0xAA, 0xB1);                         \
            if ((l) % 4 == 1) m_prev = pair_;                                                  \
            else h[(l) / 4] = EMT_MERGE_LANES(m_prev, pair_, 0x33, 0xCC, 0x4E);                     \
        }                                                                                      \
    } while (0)

/* Lane l = product l's sum of all 8 lanes, from h[0] (products 0..3) and h[1] (4..7). */
static inline __m256i lane_totals(__m256i h0, __m256i h1) {
    return _mm256_add_epi32(_mm256_blend_epi32(h0, h1, 0xF0), _mm256_permute2x128_si256(h0, h1, 0x21));
}

/* Lane i = a[2i]*b[2i] + a[2i+1]*b[2i+1] (16-bit signed, 32-bit sums),
 * added to acc. VNNI does it in one instruction; madd + add give the same
 * integers (no sum here can overflow 32 bits). */
static inline __m256i dot_i16(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* A weight block's 32 codes as two vectors of 16-bit integers (elements
 * 0..15, 16..31): Q4 nibbles (minus 8 for Q4_0 when `offset`; without it
 * the caller adds the activations' bias8[0] = -8 * sum(q) to the exact
 * sum), or Q8_0 bytes. */
static inline void weight_codes(emt_dtype t, const uint8_t *w, int offset, __m256i *lo, __m256i *hi) {
    if (t == EMT_Q8_0) {
        *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 2)));
        *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 18)));
        return;
    }
    /* byte j holds code j (low nibble) and code 16 + j (high): widened to
     * 16 bits, a mask gives the first and a shift the second */
    __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + (t == EMT_Q4_1 ? 4 : 2))));
    *lo = _mm256_and_si256(v, _mm256_set1_epi16(0x0F));
    *hi = _mm256_srli_epi16(v, 4);
    if (t == EMT_Q4_0 && offset) {
        *lo = _mm256_sub_epi16(*lo, _mm256_set1_epi16(8));
        *hi = _mm256_sub_epi16(*hi, _mm256_set1_epi16(8));
    }
}
#endif

/* One activation row -> n/32 blocks of 16-bit codes, one scale per span
 * of 32 or 256 values (emt_quantize_span_ref's integers). */
static void quantize_row(const float *x, int32_t n, int32_t span, emt_xq *out) {
    for (int32_t s0 = 0; s0 < n; s0 += span, x += span, out += span / EMT_QK) {
#ifdef __AVX2__
        const __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 amax = _mm256_setzero_ps();
        for (int32_t i = 0; i < span; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float am = _mm_cvtss_f32(m);
        if (am < EMT_XQ_TINY) am = 0.0f; /* quant.h: no subnormal scale products */
        float d = am / EMT_XQ_MAX, id = am > 0.0f ? EMT_XQ_MAX / am : 0.0f;
        for (int32_t b = 0; b < span / EMT_QK; b++) {
            const float *xb = x + (size_t)b * EMT_QK;
            __m256i q[4], sum = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), _mm256_set1_ps(id)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_cvtps_epi32(r);
                sum = _mm256_add_epi32(sum, q[k]);
            }
            /* packs interleave 128-bit lanes; the permute puts elements back in order */
            __m256i p0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
            __m256i p1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
            _mm256_storeu_si256((__m256i *)out[b].q, p0);
            _mm256_storeu_si256((__m256i *)(out[b].q + 16), p1);
            int32_t isum = hsum_epi32(sum);
            out[b].d = d;
            out[b].s = d * (float)isum;
            out[b].bias8[0] = -8 * isum;
            out[b].bias8[1] = 0;
        }
#else
        emt_quantize_span_ref(x, span, out);
#endif
    }
}

/* A product's weights stream from memory once (an AR step's matrices do
 * not fit in the cache): the kernels ask for the bytes emt_cpu_prefetch_bytes
 * ahead of the block they decode, so that more lines are in flight than
 * the hardware prefetcher keeps. Past a matrix's end this only touches
 * the cache. The file-layout loop does the same per weight row. The
 * distance depends on the machine's memory latency (cpu_variants.h): 2 KiB
 * was the fastest of 1-8 KiB on a Xeon without AMX (1B Q4_K_M), 8 KiB
 * 7-11% faster than 2 KiB on a Xeon with AMX (1B Q4_0 and Q8_0 AR steps). */
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *p, size_t bytes) {
    const uint8_t *ahead = p + emt_cpu_prefetch_bytes;
    for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(ahead + i, 0, 3);
}

/* The packed K-quant kernels' prefetch: a group block (1152-1680 bytes,
 * 18-27 lines) takes long to decode, so its lines are asked for in eighths,
 * one per sub-block (part of parts), EMT_KPREFETCH_AHEAD bytes ahead,
 * rather than all at the block's start: a burst of 18-27 prefetches fills
 * the line-fill buffers and stalls (perf: ~30% of the one-row kernel's
 * samples sat on the burst), then leaves them idle while the block
 * decodes. 4 KiB measured faster than 2 and 3 KiB when spread. */
#define EMT_KPREFETCH_AHEAD 4096
static inline __attribute__((always_inline)) void prefetch_part(const uint8_t *p, size_t bytes, int part, int parts) {
    size_t lines = (bytes + 63) / 64, a = lines * (size_t)part / (size_t)parts, b = lines * (size_t)(part + 1) / (size_t)parts;
    for (size_t i = a; i < b; i++) __builtin_prefetch(p + EMT_KPREFETCH_AHEAD + 64 * i, 0, 3);
}

#define EMT_QROWS 8 /* activation rows that share each decoded weight block */

/* The AVX-512 variant packs matrices (EMT_CPU_PACKED: quant.h's layout).
 * The SIMD file-layout kernel of Q4_0, Q4_1 and Q8_0 (qtile_rows: the
 * AVX2 variant, and matrices the AVX-512 one leaves unpacked) reads the
 * rows' scales by 8-row group (prepare_rows' xsc: EMT_QDOT_XSC). */
#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512DQ__)
#define EMT_CPU_PACKED 1
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
/* The AVX2 variant packs Q4_0, Q4_1, Q8_0, Q4_K and Q6_K (lanes_range);
 * Q5_0 and Q5_K keep the file's layout. */
#define EMT_CPU_PACKS_LANES 1
#endif
#ifdef __AVX2__
#define EMT_QDOT_XSC 1
#else
#define EMT_QDOT_XSC 0
#endif

/* One quantized weight row (Q4_0, Q4_1, Q8_0) against nr activation rows
 * of nb blocks each, in the variant without SIMD: emt_dot_q_ref per row
 * (the AVX2 and AVX-512 variants run qtile_rows below, or the packed
 * kernels). */
static inline __attribute__((always_inline)) void
qdot_rows(emt_dtype t, const uint8_t *w, const emt_xq *x, int32_t nb, int nr, float *out) {
    for (int r = 0; r < nr; r++) out[r] = emt_dot_q_ref(t, w, x + (size_t)r * nb, nb);
}


/* Packed weights (quant.h: 8 rows interleaved block by block), AVX-512
 * variant only (the others run qdot_rows on the file's layout).
 *
 * Q4_0, Q4_1, Q8_0: one zmm of 32-bit lanes holds the group's 8 outputs,
 * two lanes each (lane 2c + h: output c, the code pairs 2k + h of each
 * 4-code group k). A block costs per row eight VNNI instructions (the 8
 * outputs' codes 4k..4k+3 against one broadcast quadword of activation
 * codes), two to add each output's lane pair, and one conversion, one
 * multiply and one FMA for the 8 outputs; the weight decode is shared by
 * the tile's rows. Each output's exact integer block sum is converted once
 * and taken in by fma(dw * dx, isum, acc): emt_dot_q_ref's sequence, so
 * these products equal the scalar reference bit for bit whatever the tile
 * height (tests/unit/test_quant_kernels.c checks it). Against one lane
 * block per output pair (two VNNI, one conversion, one multiply and one FMA
 * per pair) that is 13 instructions per row and block instead of 20. From
 * two rows on, a row pair's lane pairs are added by two permutes and an
 * add into one zmm (row 2p's 8 outputs, then row 2p + 1's) that takes one
 * set of float steps for both rows: 8 rows of Q4_0 / Q8_0 9-17% faster.
 *
 * Q5_0 keeps 8 lanes per output (its fifth bits are laid out for them):
 * one zmm holds two outputs' 8 lanes, per output pair two VNNI
 * instructions, one conversion, one multiply and one FMA, lane l summing
 * elements {2l, 2l+1, 16+2l, 17+2l}; then hsum_ps: the sequence of its
 * file-layout kernel (kdot_rows, cpu_kquant.h), lane for lane. */
#ifdef EMT_CPU_PACKED
/* Tiles of up to 8 rows. Q5_0 takes up to 4 rows' 4 output pairs in one
 * pass (16 accumulators of the 32 registers) and 5..8 rows in two passes
 * of 2 pairs. Q4_1 keeps tiles of 4: with its 8 minimum vectors beside 8
 * rows' accumulators and the 8 code vectors, tiles of 8 measured no
 * faster (bench_qkernels, 8 rows: 1752 against 1776 us). The K-quants
 * take tiles of 4 (packed_krows). */
#define EMT_TILE_ROWS 8
#define EMT_KPAIR_ROWS 4
static inline int packed_tile_rows(emt_dtype t) {
    return t == EMT_Q4_1 ? 4 : emt_is_kpacked_type(t) ? EMT_KPAIR_ROWS : EMT_TILE_ROWS;
}

/* Two rows' partial sums (lane 2c + h of output c) as one vector of block
 * sums: row a's 8 outputs in lanes 0-7, row b's in 8-15 (two permutes and
 * an add), so a row pair takes one set of float steps. */
static inline __m512i pair_lanes_add(__m512i a, __m512i b) {
    const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, evens, b), _mm512_permutex2var_epi32(a, odds, b));
}

/* Q4_0 / Q4_1 / Q8_0: nr activation rows (x, nb blocks each) x the 8
 * outputs of packed group g: out[r * 8 + c]. t and nr are constants after
 * inlining. */
static inline __attribute__((always_inline)) void
packed_lanes_rows(emt_dtype t, const uint8_t *g, const emt_xq *x, int32_t nb, int nr, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_qblock_bytes(t);
    const uint8_t *codes_at = g + emt_qblock_head(t) * EMT_PACK_ROWS;
    /* output c's scale into lanes 2c, 2c + 1 */
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i nib = _mm512_set1_epi16(0x0F), nib16 = _mm512_set1_epi16(0xF0);
    __m512 acc[EMT_TILE_ROWS];
    __m256 acc_min[EMT_TILE_ROWS]; /* Q4_1: lane c = output c's minimum term */
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm512_setzero_ps();
        acc_min[r] = _mm256_setzero_ps();
    }
    for (int32_t b = 0; b < nb; b++, g += gb, codes_at += gb) {
        prefetch_ahead(g, gb);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)); /* the 8 outputs' d */
        __m512 dw = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(d8));
        __m256 mw = t == EMT_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 2 * EMT_PACK_ROWS)))
                                  : _mm256_setzero_ps();
        /* w[k]: 16-bit word 4c + j = output c's code 4k + j; Q4_0 / Q4_1 codes 16..31 (w[4..7]) are
         * kept times 16 (the high nibble masked in place, an AND instead of a shift on the port the
         * multiply-adds need) and their sums divided by 16 exactly after */
        __m512i w[8];
        if (t == EMT_Q8_0) {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) w[k] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(codes_at + 32 * k)));
        } else {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) { /* a byte: code 4k + j (low nibble), 16 + 4k + j (high) */
                __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(codes_at + 32 * k)));
                w[k] = _mm512_and_si512(v, nib);
                w[4 + k] = _mm512_and_si512(v, nib16);
            }
        }
        /* a row's partial sums: lane 2c + h of output c (the Q4_0 offset in the low lane) */
#define EMT_ROW_ISUM(xb, isum)                                                                           \
    do {                                                                                                 \
        long long q4[8], bias;                                                                           \
        memcpy(q4, (xb)->q, sizeof q4);                                                                  \
        memcpy(&bias, (xb)->bias8, sizeof bias);                                                         \
        isum = t == EMT_Q4_0 ? _mm512_set1_epi64(bias) : _mm512_setzero_si512();                        \
        if (t == EMT_Q8_0) {                                                                             \
            for (int k = 0; k < 8; k++) isum = _mm512_dpwssd_epi32(isum, w[k], _mm512_set1_epi64(q4[k])); \
        } else { /* |16 x sum| < 2^31: 16 codes x 240 x 32767 */                                       \
            __m512i hi16 = _mm512_setzero_si512();                                                       \
            for (int k = 0; k < 4; k++) {                                                                \
                isum = _mm512_dpwssd_epi32(isum, w[k], _mm512_set1_epi64(q4[k]));                        \
                hi16 = _mm512_dpwssd_epi32(hi16, w[4 + k], _mm512_set1_epi64(q4[4 + k]));                \
            }                                                                                            \
            isum = _mm512_add_epi32(isum, _mm512_srai_epi32(hi16, 4));                                   \
        }                                                                                                \
    } while (0)
        if (nr == 1) {
            __m512i isum;
            EMT_ROW_ISUM(x + b, isum);
            /* lane 2c: output c's block sum (the pair swapped by a shuffle, off the multiply-add port) */
            isum = _mm512_add_epi32(isum, _mm512_shuffle_epi32(isum, _MM_PERM_CDAB));
            acc[0] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x[b].d)), _mm512_cvtepi32_ps(isum), acc[0]);
            if (t == EMT_Q4_1) acc_min[0] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[b].s), acc_min[0]);
            continue;
        }
        /* 2+ rows: a row pair's block sums in one zmm (row 2p's 8 outputs, then row 2p + 1's), one set of
         * float steps per pair; the same per-output steps as one row's */
        const __m512 dw2 = _mm512_insertf32x8(_mm512_castps256_ps512(d8), d8, 1);
        for (int p = 0; p < (nr + 1) / 2; p++) { /* nr is constant: unrolled at -O2 and up */
            const emt_xq *xa = x + (size_t)(2 * p) * nb + b, *xc = 2 * p + 1 < nr ? xa + nb : xa;
            __m512i sa, sc;
            EMT_ROW_ISUM(xa, sa);
            if (2 * p + 1 < nr) EMT_ROW_ISUM(xc, sc);
            else sc = sa;
            const __m512i sum = pair_lanes_add(sa, sc);
            const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(xa->d), _mm256_set1_ps(xc->d), 1);
            acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw2, dx), _mm512_cvtepi32_ps(sum), acc[p]);
            if (t == EMT_Q4_1) {
                acc_min[2 * p] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xa->s), acc_min[2 * p]);
                if (2 * p + 1 < nr) acc_min[2 * p + 1] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xc->s), acc_min[2 * p + 1]);
            }
        }
#undef EMT_ROW_ISUM
    }
    if (nr == 1) {
        const __m512i evens = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
        _mm256_storeu_ps(out, _mm256_add_ps(_mm512_castps512_ps256(_mm512_permutexvar_ps(evens, acc[0])), acc_min[0]));
        return;
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) { /* row r's sums: half r % 2 of acc[r / 2] */
        __m256 sum = r % 2 ? _mm512_extractf32x8_ps(acc[r / 2], 1) : _mm512_castps512_ps256(acc[r / 2]);
        _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(sum, acc_min[r]));
    }
}

/* Q5_0's codes of outputs 2p and 2p+1 in one packed block: lo = elements
 * 0..15 of both (2p in the low half), hi = elements 16..31; the fifth bits
 * (quant.h's masks) and the bias of 16 applied. */
static inline __attribute__((always_inline)) void packed_q5_0_codes(const uint8_t *blk, int p, __m512i *lo, __m512i *hi) {
    const uint8_t *codes = blk + emt_qblock_head(EMT_Q5_0) * EMT_PACK_ROWS;
    __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(codes + 32 * p)));
    *lo = _mm512_and_si512(v, _mm512_set1_epi16(0x0F));
    *hi = _mm512_srli_epi16(v, 4);
    uint32_t mlo, mhi;
    memcpy(&mlo, blk + EMT_Q50_QH + 8 * p, 4);
    memcpy(&mhi, blk + EMT_Q50_QH + 8 * p + 4, 4);
    const __m512i sixteen = _mm512_set1_epi16(16);
    *lo = _mm512_sub_epi16(_mm512_mask_add_epi16(*lo, (__mmask32)mlo, *lo, sixteen), sixteen);
    *hi = _mm512_sub_epi16(_mm512_mask_add_epi16(*hi, (__mmask32)mhi, *hi, sixteen), sixteen);
}

/* A packed tile's sums to out[r * 8 + c] for output pairs p0 .. p0 + np - 1
 * (acc[r][q] holds pair p0 + q): each lane pair's horizontal sum plus
 * output c's minimum term (zero where the type has none). */
static inline __attribute__((always_inline)) void
packed_tile_store(__m512 acc[][4], const __m256 *acc_min, int nr, int p0, int np, float *out) {
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        float mins[8];
        _mm256_storeu_ps(mins, acc_min[r]);
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            const int p = p0 + q;
            out[r * 8 + 2 * p] = hsum_ps(_mm512_castps512_ps256(acc[r][q])) + mins[2 * p];
            out[r * 8 + 2 * p + 1] = hsum_ps(_mm512_extractf32x8_ps(acc[r][q], 1)) + mins[2 * p + 1];
        }
    }
}

/* Q5_0: nr activation rows (x, nb blocks each) x output pairs p0 .. p0 +
 * np - 1 of packed group g: out[r * 8 + c] for those outputs c. nr, p0
 * and np are constants after inlining. */
static inline __attribute__((always_inline)) void
packed_q5_0_pairs(const uint8_t *g, const emt_xq *x, int32_t nb, int nr, int p0, int np, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_qblock_bytes(EMT_Q5_0);
    __m512 acc[EMT_TILE_ROWS][4];
    __m256 acc_min[EMT_TILE_ROWS]; /* zero: Q5_0 has no minimum term */
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        acc_min[r] = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) acc[r][q] = _mm512_setzero_ps();
    }
    /* lanes 0..7 take output 2p's scale, 8..15 output 2p+1's */
    const __m512i pair0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int32_t b = 0; b < nb; b++, g += gb) {
        if (p0 == 0) prefetch_ahead(g, gb);
        __m512 dw = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)));
        /* one row: the 8 products dw * dx in one multiply, then spread by
         * pair (the same products, so the same bits as a multiply per pair) */
        if (nr == 1) dw = _mm512_mul_ps(dw, _mm512_set1_ps(x[b].d));
        __m512i lo[4], hi[4];
        __m512 wsc[4];
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            packed_q5_0_codes(g, p0 + q, &lo[q], &hi[q]);
            wsc[q] = _mm512_permutexvar_ps(_mm512_add_epi32(pair0, _mm512_set1_epi32(2 * (p0 + q))), dw);
        }
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            const emt_xq *xb = x + (size_t)r * nb + b;
            __m512i xlo = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->q));
            __m512i xhi = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb->q + 16)));
            __m512 dx = _mm512_set1_ps(xb->d);
#pragma GCC unroll 4
            for (int q = 0; q < np; q++) {
                __m512i isum = _mm512_dpwssd_epi32(_mm512_madd_epi16(lo[q], xlo), hi[q], xhi);
                acc[r][q] = _mm512_fmadd_ps(nr == 1 ? wsc[q] : _mm512_mul_ps(wsc[q], dx), _mm512_cvtepi32_ps(isum),
                                            acc[r][q]);
            }
        }
    }
    packed_tile_store(acc, acc_min, nr, p0, np, out);
}

/* nr activation rows (x, nb blocks each) x the 8 outputs of packed group g:
 * out[r * 8 + c]. Q5_0: one pass of 4 output pairs up to 4 rows, two of 2
 * pairs above (each output's sequence is the same either way). t and nr
 * are constants after inlining. */
static inline __attribute__((always_inline)) void
packed_rows(emt_dtype t, const uint8_t *g, const emt_xq *x, int32_t nb, int nr, float *out) {
    if (t != EMT_Q5_0) {
        packed_lanes_rows(t, g, x, nb, nr, out);
    } else if (nr <= 4) {
        packed_q5_0_pairs(g, x, nb, nr, 0, 4, out);
    } else {
        packed_q5_0_pairs(g, x, nb, nr, 0, 2, out);
        packed_q5_0_pairs(g, x, nb, nr, 2, 2, out);
    }
}

/* Scaled 16-bit codes of output pair p of sub-block s of packed group
 * super-block g: lo = elements 0..15 of both outputs, hi = 16..31. */
static inline __attribute__((always_inline)) void
packed_kcodes(emt_dtype t, const uint8_t *g, int s, int p, __m512i *lo, __m512i *hi) {
    /* 16-bit lanes 0..15 take entry a of a scale vector, 16..31 entry b */
    const __m512i half_sel = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
                                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i nib = _mm512_set1_epi16(0x0F);
    if (t != EMT_Q6_K) {
        __m128i a = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(g + EMT_PK4_SCM + 8 * s)));
        __m512i sc = _mm512_castsi128_si512(_mm_and_si128(a, _mm_set1_epi16(63)));
        __m512i scp = _mm512_permutexvar_epi16(_mm512_add_epi16(half_sel, _mm512_set1_epi16((short)(2 * p))), sc);
        __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(g + EMT_PK4_QS + 128 * s + 32 * p)));
        __m512i ql = _mm512_and_si512(v, nib), qh = _mm512_srli_epi16(v, 4);
        if (t == EMT_Q5_K) { /* the fifth bits: 16 where quant.h's masks say */
            uint32_t mlo, mhi;
            memcpy(&mlo, g + EMT_PK5_QH + 32 * s + 8 * p, 4);
            memcpy(&mhi, g + EMT_PK5_QH + 32 * s + 8 * p + 4, 4);
            ql = _mm512_mask_add_epi16(ql, (__mmask32)mlo, ql, _mm512_set1_epi16(16));
            qh = _mm512_mask_add_epi16(qh, (__mmask32)mhi, qh, _mm512_set1_epi16(16));
        }
        *lo = _mm512_mullo_epi16(ql, scp);
        *hi = _mm512_mullo_epi16(qh, scp);
    } else {
        __m512i sc = _mm512_castsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g + EMT_PK6_SC + 16 * s))));
        const __m512i top = _mm512_set1_epi16(0x30), bias = _mm512_set1_epi16(32);
        __m512i sel = _mm512_add_epi16(_mm512_add_epi16(half_sel, half_sel), _mm512_set1_epi16((short)(4 * p)));
        __m512i sc_lo = _mm512_permutexvar_epi16(sel, sc);
        __m512i sc_hi = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(1)), sc);
        __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(g + EMT_PK6_QL + 128 * s + 32 * p)));
        __m512i h = _mm512_srl_epi16(
            _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(g + EMT_PK6_QH + 128 * (s / 2) + 32 * p))),
            _mm_cvtsi32_si128(4 * (s % 2)));
        __m512i qlo = _mm512_or_si512(_mm512_and_si512(v, nib), _mm512_and_si512(_mm512_slli_epi16(h, 4), top));
        __m512i qhi = _mm512_or_si512(_mm512_srli_epi16(v, 4), _mm512_and_si512(_mm512_slli_epi16(h, 2), top));
        *lo = _mm512_mullo_epi16(_mm512_sub_epi16(qlo, bias), sc_lo);
        *hi = _mm512_mullo_epi16(_mm512_sub_epi16(qhi, bias), sc_hi);
    }
}

/* Q6_K: packed_kcodes for output pairs p and p + 1 at once. Their codes
 * are decoded as 64 bytes (ql's nibbles and qh's 2-bit tops, biased to
 * signed bytes) and widened only then: half the instructions of two
 * packed_kcodes calls, the same 16-bit values. */
static inline __attribute__((always_inline)) void
packed_q6_codes2(const uint8_t *g, int s, int p, __m512i lo[2], __m512i hi[2]) {
    const __m512i half_sel = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
                                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i nib = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30), bias = _mm512_set1_epi8(32);
    __m512i ql = _mm512_loadu_si512((const void *)(g + EMT_PK6_QL + 128 * s + 32 * p));
    /* qh's 2-bit fields of sub-block s at bits 0..3 of each byte (the bits a
     * 16-bit shift brings in from the next byte land at 4..7 and are masked) */
    __m512i qh = _mm512_srl_epi16(_mm512_loadu_si512((const void *)(g + EMT_PK6_QH + 128 * (s / 2) + 32 * p)),
                                  _mm_cvtsi32_si128(4 * (s % 2)));
    __m512i top_lo = _mm512_and_si512(_mm512_slli_epi16(qh, 4), top), top_hi = _mm512_and_si512(_mm512_slli_epi16(qh, 2), top);
    /* 0xCA: nib ? a : b, bit by bit */
    __m512i c_lo = _mm512_sub_epi8(_mm512_ternarylogic_epi32(nib, ql, top_lo, 0xCA), bias);
    __m512i c_hi = _mm512_sub_epi8(_mm512_ternarylogic_epi32(nib, _mm512_srli_epi16(ql, 4), top_hi, 0xCA), bias);
    __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g + EMT_PK6_SC + 16 * s))));
#pragma GCC unroll 2
    for (int u = 0; u < 2; u++) {
        __m512i sel = _mm512_add_epi16(_mm512_add_epi16(half_sel, half_sel), _mm512_set1_epi16((short)(4 * (p + u))));
        __m512i sc_lo = _mm512_permutexvar_epi16(sel, sc);
        __m512i sc_hi = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(1)), sc);
        __m256i bl = u ? _mm512_extracti64x4_epi64(c_lo, 1) : _mm512_castsi512_si256(c_lo);
        __m256i bh = u ? _mm512_extracti64x4_epi64(c_hi, 1) : _mm512_castsi512_si256(c_hi);
        lo[u] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(bl), sc_lo);
        hi[u] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(bh), sc_hi);
    }
}

/* -(dmin * m) of the 8 outputs of packed Q4_K / Q5_K group super-block g
 * (the minimums that multiply the blocks' activation sums), two sub-blocks
 * a register: mins[t] holds sub-block 2t in floats 0..7, 2t + 1 in 8..15. */
static inline void packed_kmins(const uint8_t *g, __m512 mins[4]) {
    const __m512 dmin = _mm512_broadcast_f32x8(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + EMT_PK4_DMIN))));
    const __m512i nibble_at = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(g + EMT_PK4_SCM + 16 * t)));
        long long lo4;
        memcpy(&lo4, g + EMT_PK4_MLO + 8 * t, sizeof lo4);
        __m512i ml = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_set1_epi64x(lo4)), nibble_at);
        __m512i m = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(a, 6), 4), _mm512_and_si512(ml, _mm512_set1_epi32(15)));
        mins[t] = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m))),
                                                       _mm512_set1_epi32((int)0x80000000u)));
    }
}

/* sub-block s's 8 minimums out of packed_kmins' registers */
static inline __m256 kmins_of(const __m512 mins[4], int s) {
    return s % 2 ? _mm512_extractf32x8_ps(mins[s / 2], 1) : _mm512_castps512_ps256(mins[s / 2]);
}

/* Packed Q4_K / Q5_K / Q6_K (quant.h): a tile of up to EMT_KPAIR_ROWS
 * activation rows x the group's 8 outputs: out[r * 8 + c]. Per 32-value
 * sub-block the codes of an output pair are widened to 16 bits and
 * multiplied by their integer sub-block scale (Q6_K: their half's), which
 * gives kquant.h's scaled codes, and one broadcast of a row's 16 codes
 * serves all four pairs. The float steps are emt_dot_k_ref's, so the
 * products equal the scalar reference bit for bit: 8 lanes per output (a
 * pair's register holds output 2p in lanes 0..7, 2p + 1 in 8..15), each
 * lane's exact integer sum per sum group converted and fused in with
 * dw * dx; per sub-block mw * s into the minimum sum; packed_tile_store
 * adds the lanes as hsum_ps does.
 * Tiles of 4 rows (16 integer sums beside the decoded codes), not 8: per
 * tile of 8 rows two passes of two pairs, or any arrangement of one
 * output per lane pair (the Q4_0 kernel's), measured slower
 * (docs/performance.md, "K-quant products in tiles of 4 rows"). */
static inline __attribute__((always_inline)) void
packed_krows(emt_dtype t, const uint8_t *g, const emt_xq *x, int32_t nb, int nr, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_dtype_block_bytes(t);
    const int group = emt_kblock_sum_group(t), step = t == EMT_Q6_K ? 2 : 1;
    /* up to 2 rows sum codes 0..15 and 16..31 in separate chains, so that enough hide their latency */
    const int split = nr <= 2;
    __m512 acc[EMT_KPAIR_ROWS][4]; /* per output pair: 8 float lanes each */
    __m256 acc_min[EMT_KPAIR_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        acc_min[r] = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) acc[r][q] = _mm512_setzero_ps();
    }
    const __m512i pair0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int32_t b0 = 0; b0 < nb; b0 += 8, g += gb) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m512 mins[4];
        if (t != EMT_Q6_K) packed_kmins(g, mins);
        for (int s0 = 0; s0 < 8; s0 += group) {
            __m512i isum[EMT_KPAIR_ROWS][4], isum_hi[2][4];
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    isum[r][q] = _mm512_setzero_si512();
                    if (split) isum_hi[r][q] = _mm512_setzero_si512();
                }
            for (int s = s0; s < s0 + group; s++) {
                prefetch_part(g, gb, s, 8); /* the block 4 KiB ahead, an eighth per sub-block */
#pragma GCC unroll 4
                for (int q = 0; q < 4; q += step) {
                    __m512i lo[2], hi[2];
                    if (t == EMT_Q6_K) packed_q6_codes2(g, s, q, lo, hi);
                    else packed_kcodes(t, g, s, q, &lo[0], &hi[0]);
#pragma GCC unroll 4
                    for (int r = 0; r < nr; r++) {
                        const emt_xq *xb = x + (size_t)r * nb + b0 + s;
                        __m512i xlo = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->q));
                        __m512i xhi = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb->q + 16)));
#pragma GCC unroll 2
                        for (int u = 0; u < step; u++) {
                            if (split) {
                                isum[r][q + u] = _mm512_dpwssd_epi32(isum[r][q + u], lo[u], xlo);
                                isum_hi[r][q + u] = _mm512_dpwssd_epi32(isum_hi[r][q + u], hi[u], xhi);
                            } else {
                                isum[r][q + u] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum[r][q + u], lo[u], xlo), hi[u], xhi);
                            }
                        }
                    }
                }
                if (t != EMT_Q6_K)
#pragma GCC unroll 4
                    for (int r = 0; r < nr; r++)
                        acc_min[r] = _mm256_add_ps(acc_min[r], _mm256_mul_ps(kmins_of(mins, s), _mm256_set1_ps(x[(size_t)r * nb + b0 + s].s)));
            }
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m512 wsc = _mm512_permutexvar_ps(_mm512_add_epi32(pair0, _mm512_set1_epi32(2 * q)), _mm512_castps256_ps512(dw));
#pragma GCC unroll 4
                for (int r = 0; r < nr; r++) {
                    __m512i sum = split ? _mm512_add_epi32(isum[r][q], isum_hi[r][q]) : isum[r][q];
                    acc[r][q] = _mm512_fmadd_ps(_mm512_mul_ps(wsc, _mm512_set1_ps(x[(size_t)r * nb + b0 + s0 + group - 1].d)),
                                                _mm512_cvtepi32_ps(sum), acc[r][q]);
                }
            }
        }
    }
    packed_tile_store(acc, acc_min, nr, 0, 4, out);
}

/* The 8-bit prompt mode's packed kernels (quant8.h): a tile of nr (<= 8)
 * activation rows x a group's 8 outputs. Per row and 32-value block four
 * vpdpbusd (8 codes of all 8 outputs against one broadcast quadword of
 * activation codes) leave output c's partial sums in lanes 2c, 2c+1;
 * quant8.h's one sum per output comes from adding each lane pair for two
 * rows at once (two permutes and an add: pair_isum8), so one zmm holds a
 * row pair's 8 outputs and takes one set of float steps (a conversion, a
 * multiply and an FMA; Q6_K one per half) per row pair. The 16-bit
 * kernels spend five instructions per output pair. The weight codes
 * go in unsigned (Q4 nibbles, Q6_K's 6-bit codes, Q8_0 codes plus 128) and
 * the bias comes out exactly: each lane's accumulator starts at -bias
 * times the lane's activation sum (emt_xq8.lsum). */
#define EMT_TILE8_ROWS 8

/* The qwords of 16 bytes per output (128 bytes of a packed group at p),
 * gathered: out[0] = bytes 0..7 of outputs 0..7, out[1] = bytes 8..15. */
static inline __attribute__((always_inline)) void gather_halves(const uint8_t *p, __m512i out[2]) {
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    __m512i a = _mm512_loadu_si512((const void *)p), b = _mm512_loadu_si512((const void *)(p + 64));
    out[0] = _mm512_permutex2var_epi64(a, even, b);
    out[1] = _mm512_permutex2var_epi64(a, odd, b);
}

/* gather_halves for Q4_0 / Q4_1 / Q8_0 (quant.h: each row's codes by
 * 4-byte groups): the same two vectors out of the 4 groups at p (128 bytes) */
static inline __attribute__((always_inline)) void gather_groups(const uint8_t *p, __m512i out[2]) {
    const __m512i zip = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    out[0] = _mm512_permutexvar_epi32(zip, _mm512_loadu_si512((const void *)p));
    out[1] = _mm512_permutexvar_epi32(zip, _mm512_loadu_si512((const void *)(p + 64)));
}

/* lanes (2e, 2e + 1 of every output) start at -bias * the activation sums */
static inline __m512i lane_init(int bias, int32_t s0, int32_t s1) {
    if (!bias) return _mm512_setzero_si512();
    uint64_t v = (uint64_t)(uint32_t)(-bias * s0) | (uint64_t)(uint32_t)(-bias * s1) << 32;
    return _mm512_set1_epi64((long long)v);
}

/* Q5_0 / Q5_K: the fifth bits of a packed block (quant.h's masks, 8 bytes
 * per row pair at qh) as byte masks of the 4 code vectors: bit 8c + j of
 * m[k] is code 8k + j of output c. One in-lane byte shuffle gathers them:
 * lane 0 holds rows 0..3, lane 1 rows 4..7, dword k of a lane chunk k. */
static inline void fifth_bit_masks(const uint8_t *qh, __mmask64 m[4]) {
    const __m256i sel = _mm256_setr_epi8(0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15,
                                         0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15);
    uint32_t d[8];
    _mm256_storeu_si256((__m256i *)d, _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)qh), sel));
    for (int k = 0; k < 4; k++) m[k] = (__mmask64)((uint64_t)d[k] | (uint64_t)d[4 + k] << 32);
}

static inline __m512i x_quad(const emt_xq8 *xb, int k) {
    int64_t v;
    memcpy(&v, xb->q + 8 * k, 8);
    return _mm512_set1_epi64(v);
}

/* A row pair's exact sums over code vectors v[k0 .. k0 + nk - 1] (8 codes
 * of the 8 outputs each): rows xa and xb (the same row when `two` is 0),
 * from the lane_init values sa, sb; each row's lane pairs added, row a's 8
 * sums in lanes 0-7 and row b's in 8-15. */
static inline __attribute__((always_inline)) __m512i pair_isum8(const __m512i *v, int k0, int nk, const emt_xq8 *xa,
                                                                const emt_xq8 *xb, int two, __m512i sa, __m512i sb) {
#pragma GCC unroll 4
    for (int k = k0; k < k0 + nk; k++) {
        sa = _mm512_dpbusd_epi32(sa, v[k], x_quad(xa, k));
        if (two) sb = _mm512_dpbusd_epi32(sb, v[k], x_quad(xb, k));
    }
    if (!two) sb = sa; /* a last odd row: its sums twice */
    return pair_lanes_add(sa, sb);
}

/* The rows' scales d for pair_isum8's lanes: xa's in 0-7, xb's in 8-15 */
static inline __m512 pair_dx8(const emt_xq8 *xa, const emt_xq8 *xb) {
    return _mm512_insertf32x8(_mm512_set1_ps(xa->d), _mm256_set1_ps(xb->d), 1);
}

/* One block (sub-block) of a row pair for the types with one scale per
 * block: pair_isum8 over its 32 codes (bias as lane_init's), then one FMA
 * of the pair by sc2 (the 8 outputs' weight scales, twice) times the rows'
 * d. */
static inline __attribute__((always_inline)) __m512 pair_block8(const __m512i v[4], __m512 sc2, const emt_xq8 *xa,
                                                                const emt_xq8 *xb, int two, int bias, __m512 acc) {
    __m512i sa = lane_init(bias, xa->lsum[0] + xa->lsum[2], xa->lsum[1] + xa->lsum[3]);
    __m512i sb = two ? lane_init(bias, xb->lsum[0] + xb->lsum[2], xb->lsum[1] + xb->lsum[3]) : sa;
    __m512i sum = pair_isum8(v, 0, 4, xa, xb, two, sa, sb);
    return _mm512_fmadd_ps(_mm512_mul_ps(sc2, pair_dx8(xa, xb)), _mm512_cvtepi32_ps(sum), acc);
}

/* prefetch: ask for the weights ahead as the 16-bit kernels do (the first
 * tile of a row block; later tiles read the group from cache). Without it
 * the one-row Q6_K kernel stalled on its loads: 3x slower, and 1B Q4_K_M's
 * AR step at 8 bits a third slower (docs/performance.md). */
static inline __attribute__((always_inline)) void
packed8_rows(emt_dtype t, const uint8_t *g, const emt_xq8 *x, int32_t nb, int nr, int prefetch, float *out) {
    const int kq = emt_is_kpacked_type(t), per = kq ? 8 : 1;
    const size_t gb = EMT_PACK_ROWS * emt_pack_unit_bytes(t);
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512 acc[EMT_TILE8_ROWS];
    __m256 mins[EMT_TILE8_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm512_setzero_ps();
        mins[r] = _mm256_setzero_ps();
    }
    for (int32_t b0 = 0; b0 < nb; b0 += per, g += gb) {
        const __m256 dw8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)); /* the 8 outputs' d */
        if (!kq) {
            if (prefetch) prefetch_ahead(g, gb); /* as the 16-bit packed kernels: emt_cpu_prefetch_bytes ahead */
            __m256 mw = t == EMT_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 2 * EMT_PACK_ROWS)))
                                      : _mm256_setzero_ps();
            const uint8_t *codes = g + emt_qblock_head(t) * EMT_PACK_ROWS;
            __m512i v[4], h[2];
            if (t == EMT_Q5_0) gather_halves(codes, h);
            else gather_groups(codes, h);
            if (t == EMT_Q8_0) { /* codes 0..7, 8..15 | 16..23, 24..31, as unsigned + 128 */
                const __m512i flip = _mm512_set1_epi8((char)0x80);
                v[0] = _mm512_xor_si512(h[0], flip);
                v[1] = _mm512_xor_si512(h[1], flip);
                gather_groups(codes + 16 * EMT_PACK_ROWS, h);
                v[2] = _mm512_xor_si512(h[0], flip);
                v[3] = _mm512_xor_si512(h[1], flip);
            } else { /* low nibbles: codes 0..7, 8..15; high: 16..23, 24..31 */
                v[0] = _mm512_and_si512(h[0], nib);
                v[1] = _mm512_and_si512(h[1], nib);
                v[2] = _mm512_and_si512(_mm512_srli_epi16(h[0], 4), nib);
                v[3] = _mm512_and_si512(_mm512_srli_epi16(h[1], 4), nib);
                if (t == EMT_Q5_0) {
                    __mmask64 fifth[4];
                    fifth_bit_masks(g + EMT_Q50_QH, fifth);
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) v[k] = _mm512_mask_add_epi8(v[k], fifth[k], v[k], _mm512_set1_epi8(16));
                }
            }
            const int bias = t == EMT_Q4_0 ? 8 : t == EMT_Q5_0 ? 16 : t == EMT_Q8_0 ? 128 : 0;
            /* one sum per output (quant8.h): a row pair's sums in one zmm (pair_block8) */
            const __m512 dw2 = _mm512_insertf32x8(_mm512_castps256_ps512(dw8), dw8, 1);
            for (int p = 0; p < (nr + 1) / 2; p++) { /* nr is constant: unrolled at -O2 and up */
                const emt_xq8 *xa = x + (size_t)(2 * p) * nb + b0, *xb = 2 * p + 1 < nr ? xa + nb : xa;
                acc[p] = pair_block8(v, dw2, xa, xb, 2 * p + 1 < nr, bias, acc[p]);
                if (t == EMT_Q4_1) {
                    mins[2 * p] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xa->s), mins[2 * p]);
                    if (2 * p + 1 < nr) mins[2 * p + 1] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb->s), mins[2 * p + 1]);
                }
            }
            continue;
        }
        __m512 kmin[4];
        if (t != EMT_Q6_K) packed_kmins(g, kmin);
        for (int s = 0; s < 8; s++) {
            if (prefetch) prefetch_part(g, gb, s, 8); /* as packed_krows: the block 4 KiB ahead, an eighth per sub-block */
            __m512i v[4], h[2];
            __m512 sc0, sc1 = _mm512_setzero_ps();
            __m256 mw = _mm256_setzero_ps();
            if (t != EMT_Q6_K) { /* sc0: the 8 outputs' d * sc, twice (pair_block8) */
                __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(g + EMT_PK4_SCM + 8 * s)));
                __m256 sc8 = _mm256_mul_ps(dw8, _mm256_cvtepi32_ps(_mm256_and_si256(a, _mm256_set1_epi32(63))));
                sc0 = _mm512_insertf32x8(_mm512_castps256_ps512(sc8), sc8, 1);
                mw = kmins_of(kmin, s);
                gather_halves(g + EMT_PK4_QS + 128 * s, h);
                v[0] = _mm512_and_si512(h[0], nib);
                v[1] = _mm512_and_si512(h[1], nib);
                v[2] = _mm512_and_si512(_mm512_srli_epi16(h[0], 4), nib);
                v[3] = _mm512_and_si512(_mm512_srli_epi16(h[1], 4), nib);
                if (t == EMT_Q5_K) {
                    __mmask64 fifth[4];
                    fifth_bit_masks(g + EMT_PK5_QH + 32 * s, fifth);
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) v[k] = _mm512_mask_add_epi8(v[k], fifth[k], v[k], _mm512_set1_epi8(16));
                }
            } else { /* Q6_K: v[0], v[1] half 0 (codes 0..7, 8..15), v[2], v[3] half 1 */
                /* d * the half's scale of the 8 outputs, twice (pair_isum8's lanes) */
                __m512i sci = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(g + EMT_PK6_SC + 16 * s)));
                const __m512i h0 = _mm512_set_epi32(14, 12, 10, 8, 6, 4, 2, 0, 14, 12, 10, 8, 6, 4, 2, 0);
                const __m512 dw2 = _mm512_insertf32x8(_mm512_castps256_ps512(dw8), dw8, 1);
                sc0 = _mm512_mul_ps(dw2, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(h0, sci)));
                sc1 = _mm512_mul_ps(dw2, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(_mm512_add_epi32(h0, _mm512_set1_epi32(1)), sci)));
                __m512i hb[2];
                gather_halves(g + EMT_PK6_QL + 128 * s, h);
                gather_halves(g + EMT_PK6_QH + 128 * (s / 2), hb);
                const int sh = 4 * (s % 2);
                const __m512i three = _mm512_set1_epi8(3);
#pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    __m512i top = _mm512_srl_epi16(hb[k], _mm_cvtsi32_si128(sh));
                    __m512i t0 = _mm512_slli_epi16(_mm512_and_si512(top, three), 4);
                    __m512i t1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(top, 2), three), 4);
                    v[k] = _mm512_or_si512(_mm512_and_si512(h[k], nib), t0);
                    v[2 + k] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(h[k], 4), nib), t1);
                }
            }
            if (t != EMT_Q6_K) {
                for (int p = 0; p < (nr + 1) / 2; p++) { /* nr is constant: unrolled at -O2 and up */
                    const emt_xq8 *xa = x + (size_t)(2 * p) * nb + b0 + s, *xb = 2 * p + 1 < nr ? xa + nb : xa;
                    acc[p] = pair_block8(v, sc0, xa, xb, 2 * p + 1 < nr, 0, acc[p]);
                    mins[2 * p] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xa->s), mins[2 * p]);
                    if (2 * p + 1 < nr) mins[2 * p + 1] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb->s), mins[2 * p + 1]);
                }
                continue;
            }
            /* Q6_K: per half, the codes' offset 32 taken off by lane_init */
            for (int p = 0; p < (nr + 1) / 2; p++) { /* nr is constant: unrolled at -O2 and up */
                const emt_xq8 *xa = x + (size_t)(2 * p) * nb + b0 + s, *xb = 2 * p + 1 < nr ? xa + nb : xa;
                const int two = 2 * p + 1 < nr;
                const __m512 dx = pair_dx8(xa, xb);
                __m512i h0a = lane_init(32, xa->lsum[0], xa->lsum[1]), h1a = lane_init(32, xa->lsum[2], xa->lsum[3]);
                __m512i h0b = lane_init(32, xb->lsum[0], xb->lsum[1]), h1b = lane_init(32, xb->lsum[2], xb->lsum[3]);
                __m512i s0 = pair_isum8(v, 0, 2, xa, xb, two, h0a, h0b), s1 = pair_isum8(v, 2, 2, xa, xb, two, h1a, h1b);
                acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(sc0, dx), _mm512_cvtepi32_ps(s0), acc[p]);
                acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(sc1, dx), _mm512_cvtepi32_ps(s1), acc[p]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) { /* row r's sums: half r % 2 of acc[r / 2] */
        __m256 sum = r % 2 ? _mm512_extractf32x8_ps(acc[r / 2], 1) : _mm512_castps512_ps256(acc[r / 2]);
        _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(sum, mins[r]));
    }
}
#endif

#include "backend/cpu/cpu_kquant.h" /* kdot_rows: Q5_0, Q5_1, Q4_K, Q5_K, Q6_K */

/* One F16/BF16 weight row against nr float rows: dot1's sequence per output
 * on the converted weights. */
static inline __attribute__((always_inline)) void
hdot_rows(emt_dtype t, const uint16_t *w, const float *x, int32_t n, int nr, float *out) {
    emt_v8 acc[EMT_QROWS];
    for (int r = 0; r < nr; r++) acc[r] = (emt_v8){ 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        emt_v8 wv = load8_half(t, w + i);
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) acc[r] = madd(wv, load8(x + (size_t)r * n + i), acc[r]);
    }
    for (int r = 0; r < nr; r++) {
        emt_v8 a = acc[r];
        float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        for (int32_t k = i; k < n; k++)
            s += (t == EMT_F16 ? emt_f16_to_f32(w[k]) : emt_bf16_to_f32(w[k])) * x[(size_t)r * n + k];
        out[r] = s;
    }
}

typedef struct qmatmul_job {
    const emt_wmat *W;
    size_t row_bytes;
    const emt_xq *xq; /* quantized rows (integer types) */
    const emt_xq8 *xq8; /* 8-bit rows: used for emt_act8_type weights when set */
    const float *xsc; /* their scales by 8-row group (prepare_rows) */
    const float *x, *bias;
    float *y;
    int32_t n_rows, n_in, n_out, chunk;
    const uint8_t *amx_x; /* amx variant: xq split for the tile products (NULL: not prepared) */
    const uint8_t *amx8_x; /* amx variant: xq8 split for the tile products (NULL: not prepared) */
} qmatmul_job;

/* A tile's outputs v[r * stride + c] (rows r0.., outputs o..o+nc) into y, plus the bias. */
static inline void store_tile(const qmatmul_job *j, int32_t r0, int nr, int32_t o, int nc, const float *v,
                              int stride) {
    for (int r = 0; r < nr; r++) {
        float *y = j->y + (size_t)(r0 + r) * j->n_out + o;
        for (int c = 0; c < nc; c++) y[c] = j->bias ? v[r * stride + c] + j->bias[o + c] : v[r * stride + c];
    }
}

/* Outputs [o0, o1) for every row, rows in blocks of EMT_QROWS per weight row
 * (the weight row stays in L1 while the blocks pass). */
static inline __attribute__((always_inline)) void
qmatmul_range(const qmatmul_job *j, emt_dtype t, int32_t o0, int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    float v[EMT_QROWS];
    for (int32_t o = o0; o < o1; o++) {
        const uint8_t *w = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
        if (!kdot_streams(t, j->n_rows)) prefetch_ahead(w, j->row_bytes);
        for (int32_t r0 = 0; r0 < j->n_rows; r0 += EMT_QROWS) {
            int nr = j->n_rows - r0 < EMT_QROWS ? j->n_rows - r0 : EMT_QROWS;
            const float *x = j->x + (size_t)r0 * j->n_in;
            const emt_xq *xq = j->xq + (size_t)r0 * nb;
            /* nr constant in each call, so the row loops unroll into registers */
#define EMT_ROWS_CALL(k)                                                                           \
    ((t == EMT_F16 || t == EMT_BF16) ? hdot_rows(t, (const uint16_t *)w, x, j->n_in, k, v)         \
     : emt_is_kblock_type(t)         ? kdot_rows(t, w, xq, nb, k, v)                               \
                                     : qdot_rows(t, w, xq, nb, k, v))
            switch (nr) {
            case 1: EMT_ROWS_CALL(1); break;
            case 2: EMT_ROWS_CALL(2); break;
            case 3: EMT_ROWS_CALL(3); break;
            case 4: EMT_ROWS_CALL(4); break;
            case 5: EMT_ROWS_CALL(5); break;
            case 6: EMT_ROWS_CALL(6); break;
            case 7: EMT_ROWS_CALL(7); break;
            default: EMT_ROWS_CALL(8); break;
            }
#undef EMT_ROWS_CALL
            for (int r = 0; r < nr; r++)
                j->y[(size_t)(r0 + r) * j->n_out + o] = j->bias ? v[r] + j->bias[o] : v[r];
        }
    }
}

#ifdef __AVX2__
/* Q4_0, Q4_1 and Q8_0 on the file's layout with AVX2: a tile of R rows x
 * C = 8 / R outputs (R = 1, 2, 4 or 8), whose 8 products (output c, row r)
 * sit in lane c * R + r. Per block, each product's 32 codes give 8 exact
 * integer lane sums (vpmaddwd), the 8 products' lanes are reduced together
 * (EMT_PUSH_LANES, lane_totals) so lane l holds product l's exact block sum,
 * and one conversion, one multiply dw * dx and one FMA take in all 8:
 * emt_dot_q_ref's steps per output, the minimum terms in a second sum
 * added at the end. Nothing of an output's sequence depends on R or C, so
 * every row count gives the reference's bits (tests/unit/test_quant_kernels.c).
 * One row (every AR step) runs 8 outputs against one activation block in
 * registers; 8 rows share each decoded weight block. w[c]: output c's row
 * (c < C); sc: the rows' scales in prepare_rows' xsc for this group, at
 * the tile's first row (R >= 2). out[r * 8 + c]. */
static inline __attribute__((always_inline)) void
qtile_rows(emt_dtype t, const uint8_t *const w[8], const emt_xq *x, const float *sc, int32_t nb, int R,
           const uint8_t *pf, size_t pf_bytes, float *out) {
    const int C = 8 / R;
    const size_t pf_lines = (pf_bytes + 63) / 64;
    size_t pf_next = 0, pf_due = 0; /* lines asked for; pf_due / nb: lines due */
    /* R = 8: the output's codes decoded first, then each row read once;
     * else one output's codes at a time against the R rows. Either way few
     * registers stay live, and lane l = c * R + r. */
    const int rows_outer = R == 8;
    /* one row: Q4_0's offset added once to the 8 exact sums (the block's
     * bias8[0]) instead of subtracted from every output's codes */
    const int q4_bias = t == EMT_Q4_0 && R == 1;
    const size_t bb = emt_qblock_bytes(t);
    /* lane l's output (dw) and row (dx) from C scales or R rows' scales */
    const __m256i by_out = R == 2 ? _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3) : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++, sc += 2 * EMT_QROWS) {
        /* pf: the next bytes to stream, asked for in nb even parts (a burst
         * would fill the line-fill buffers and stall, then leave them idle);
         * counted without a division per block */
        for (pf_due += pf_lines; pf_due >= (size_t)nb; pf_due -= (size_t)nb) __builtin_prefetch(pf + 64 * pf_next++, 0, 3);
        __m256i s_prev = _mm256_setzero_si256(), m_prev = _mm256_setzero_si256(), h[2], wlo[8], whi[8];
        uint16_t dh[8] = { 0 }, mh[8] = { 0 };
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const uint8_t *blk = w[c] + (size_t)b * bb;
            dh[c] = emt_rd16(blk);
            if (t == EMT_Q4_1) mh[c] = emt_rd16(blk + 2);
            weight_codes(t, blk, !q4_bias, &wlo[c], &whi[c]);
            if (rows_outer) continue;
            /* each output reads the rows' codes from L1 again: kept from one
             * output to the next they would be spilled (the empty asm keeps
             * GCC from reusing the loads) */
            const emt_xq *xr = x;
            if (R > 1) __asm__("" : "+r"(xr));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const emt_xq *xb = xr + (size_t)r * nb + b;
                __m256i s1 = dot_i16(_mm256_madd_epi16(wlo[c], _mm256_loadu_si256((const __m256i *)xb->q)), whi[c],
                                     _mm256_loadu_si256((const __m256i *)(xb->q + 16)));
                EMT_PUSH_LANES(c * R + r, s1);
            }
        }
        if (rows_outer)
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const emt_xq *xb = x + (size_t)r * nb + b;
                const __m256i xlo = _mm256_loadu_si256((const __m256i *)xb->q);
                const __m256i xhi = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
#pragma GCC unroll 2
                for (int c = 0; c < C; c++) {
                    __m256i s1 = dot_i16(_mm256_madd_epi16(wlo[c], xlo), whi[c], xhi);
                    EMT_PUSH_LANES(c * R + r, s1);
                }
            }
        __m256 dw, dx, mw = _mm256_setzero_ps(), sx = _mm256_setzero_ps();
        if (C == 1) {
            dw = _mm256_set1_ps(_cvtsh_ss(dh[0]));
            if (t == EMT_Q4_1) mw = _mm256_set1_ps(_cvtsh_ss(mh[0]));
        } else {
            dw = _mm256_cvtph_ps(_mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2], (short)dh[3], (short)dh[4],
                                                (short)dh[5], (short)dh[6], (short)dh[7]));
            if (t == EMT_Q4_1)
                mw = _mm256_cvtph_ps(_mm_setr_epi16((short)mh[0], (short)mh[1], (short)mh[2], (short)mh[3], (short)mh[4],
                                                    (short)mh[5], (short)mh[6], (short)mh[7]));
            if (C < 8) {
                dw = _mm256_permutevar8x32_ps(dw, by_out);
                mw = _mm256_permutevar8x32_ps(mw, by_out);
            }
        }
        if (R == 1) {
            dx = _mm256_set1_ps(x[b].d);
            sx = _mm256_set1_ps(x[b].s);
        } else if (R == 2) { /* rows 0, 1 alternate */
            dx = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)sc));
            sx = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(sc + EMT_QROWS)));
        } else if (R == 4) { /* rows 0..3 twice */
            dx = _mm256_broadcast_ps((const __m128 *)sc);
            sx = _mm256_broadcast_ps((const __m128 *)(sc + EMT_QROWS));
        } else {
            dx = _mm256_loadu_ps(sc);
            sx = _mm256_loadu_ps(sc + EMT_QROWS);
        }
        __m256i isum = lane_totals(h[0], h[1]);
        if (q4_bias) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(x[b].bias8[0]));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc);
        if (t == EMT_Q4_1) acc_min = _mm256_fmadd_ps(mw, sx, acc_min);
    }
    float a[8];
    _mm256_storeu_ps(a, _mm256_add_ps(acc, acc_min));
#pragma GCC unroll 8
    for (int l = 0; l < 8; l++) out[(l % R) * 8 + l / R] = a[l];
}

/* Outputs [o0, o1) of a Q4_0, Q4_1 or Q8_0 matrix in the file's layout for
 * every row: rows in blocks of 32 that stay in cache while the outputs pass
 * in groups of 8, each group in qtile_rows tiles of 8 rows x 1 output, then
 * 4 x 2, 2 x 4 and 1 x 8 for the block's last rows. */
static inline __attribute__((always_inline)) void qtile_range(const qmatmul_job *j, emt_dtype t, int32_t o0,
                                                              int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    float v[8 * 8];
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += 32) {
        int32_t rb1 = rb0 + 32 < j->n_rows ? rb0 + 32 : j->n_rows;
        for (int32_t o = o0; o < o1; o += 8) {
            int nc = o1 - o < 8 ? o1 - o : 8;
            const uint8_t *row0 = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            for (int32_t r0 = rb0; r0 < rb1;) {
                int32_t left = rb1 - r0;
                int R = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1, C = 8 / R;
                const emt_xq *xq = j->xq + (size_t)r0 * nb;
                const float *sc = j->xsc + (size_t)(r0 / EMT_QROWS) * nb * 2 * EMT_QROWS + r0 % EMT_QROWS;
                for (int c0 = 0; c0 < nc; c0 += C) {
                    const uint8_t *w[8];
                    for (int c = 0; c < 8; c++) /* a short tile repeats its last row, stored once */
                        w[c] = row0 + (size_t)(c0 + c < nc ? c0 + c : nc - 1) * j->row_bytes;
                    /* the first row tile streams the group: it asks for the next group's
                     * rows (contiguous in the file) while it reads its own */
                    size_t pf_bytes = r0 == rb0 ? (size_t)C * j->row_bytes : 0;
                    const uint8_t *pf = row0 + (size_t)(nc + c0) * j->row_bytes;
                    switch (R) { /* R constant in each call: the tile stays in registers */
                    case 1: qtile_rows(t, w, xq, sc, nb, 1, pf, pf_bytes, v); break;
                    case 2: qtile_rows(t, w, xq, sc, nb, 2, pf, pf_bytes, v); break;
                    case 4: qtile_rows(t, w, xq, sc, nb, 4, pf, pf_bytes, v); break;
                    default: qtile_rows(t, w, xq, sc, nb, 8, pf, pf_bytes, v); break;
                    }
                    int n = nc - c0 < C ? nc - c0 : C;
                    store_tile(j, r0, R, o + c0, n, v, 8);
                }
                r0 += R;
            }
        }
    }
}
#endif

#ifdef EMT_CPU_PACKED
#define EMT_ROW_BLOCK 32 /* activation rows that stay in cache while a task's weight groups pass */

/* Outputs [o0, o1) (o0 a multiple of 8) of a packed matrix for every row:
 * tiles of EMT_TILE_ROWS rows x one group's 8 outputs. */

static inline __attribute__((always_inline)) void
packed_range(const qmatmul_job *j, emt_dtype t, int32_t o0, int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    const int tile = packed_tile_rows(t);
    float v[EMT_TILE_ROWS * EMT_PACK_ROWS];
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += EMT_ROW_BLOCK) {
        int32_t rb1 = rb0 + EMT_ROW_BLOCK < j->n_rows ? rb0 + EMT_ROW_BLOCK : j->n_rows;
        for (int32_t o = o0; o < o1; o += EMT_PACK_ROWS) {
            const uint8_t *g = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            int nc = o1 - o < EMT_PACK_ROWS ? o1 - o : EMT_PACK_ROWS;
            for (int32_t r0 = rb0; r0 < rb1; r0 += tile) {
                int nr = rb1 - r0 < tile ? rb1 - r0 : tile;
                const emt_xq *xq = j->xq + (size_t)r0 * nb;
                /* nr constant in each call: the tile stays in registers */
                if (emt_is_kpacked_type(t)) {
                    switch (nr) {
                    case 1: packed_krows(t, g, xq, nb, 1, v); break;
                    case 2: packed_krows(t, g, xq, nb, 2, v); break;
                    case 3: packed_krows(t, g, xq, nb, 3, v); break;
                    default: packed_krows(t, g, xq, nb, 4, v); break;
                    }
                } else {
                    switch (nr) {
                    case 1: packed_rows(t, g, xq, nb, 1, v); break;
                    case 2: packed_rows(t, g, xq, nb, 2, v); break;
                    case 3: packed_rows(t, g, xq, nb, 3, v); break;
                    case 4: packed_rows(t, g, xq, nb, 4, v); break;
                    case 5: packed_rows(t, g, xq, nb, 5, v); break;
                    case 6: packed_rows(t, g, xq, nb, 6, v); break;
                    case 7: packed_rows(t, g, xq, nb, 7, v); break;
                    default: packed_rows(t, g, xq, nb, 8, v); break;
                    }
                }
                store_tile(j, r0, nr, o, nc, v, EMT_PACK_ROWS);
            }
        }
    }
}
#endif

/* The 8-bit prompt mode in the baseline variant: quant8.h's reference order (emt_dot8_ref's steps per row),
 * each weight block decoded once for up to 64 rows. */
#ifndef __AVX2__
#define EMT_ACT8_REF_ROWS 64
static void act8_ref_range(const qmatmul_job *j, int32_t o0, int32_t o1) {
    const emt_dtype t = j->W->dtype;
    const int per = t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K ? 8 : 1;
    const size_t bb = per == 8 ? emt_dtype_block_bytes(t) : emt_qblock_bytes(t);
    int32_t nb = j->n_in / EMT_QK;
    float sum[EMT_ACT8_REF_ROWS], mins[EMT_ACT8_REF_ROWS];
    for (int32_t o = o0; o < o1; o++) {
        const uint8_t *w = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
        for (int32_t r0 = 0; r0 < j->n_rows; r0 += EMT_ACT8_REF_ROWS) {
            int32_t nr = j->n_rows - r0 < EMT_ACT8_REF_ROWS ? j->n_rows - r0 : EMT_ACT8_REF_ROWS;
            for (int32_t r = 0; r < nr; r++) sum[r] = mins[r] = 0.0f;
            for (int32_t b = 0; b < nb; b++) {
                int32_t c[EMT_QK], part[4];
                float sc[2], mw;
                emt_block8_decode_ref(t, w + (size_t)(b / per) * bb, b % per, c, sc, &mw);
                for (int32_t r = 0; r < nr; r++) {
                    const emt_xq8 *xb = j->xq8 + (size_t)(r0 + r) * nb + b;
                    emt_block8_isums(c, xb->q, part);
                    emt_block8_accumulate(t, part, sc, mw, xb, &sum[r], &mins[r]);
                }
            }
            for (int32_t r = 0; r < nr; r++) {
                float v = sum[r] + mins[r];
                j->y[(size_t)(r0 + r) * j->n_out + o] = j->bias ? v + j->bias[o] : v;
            }
        }
    }
}
#endif

#ifdef __AVX2__
/* The 8-bit prompt mode on the file's layout with AVX2 (the avx2 variant,
 * and unpacked matrices elsewhere): a tile of nr (<= 8) rows x 4 outputs.
 * One ymm holds the 4 outputs' two float lanes (output c in lanes 2c, 2c+1),
 * as the AVX-512 kernel's zmm holds 8. Without vpdpbusd, vpmaddubsw (unsigned
 * codes x signed activation codes, adjacent pairs to 16 bits) and vpmaddwd
 * with ones (pairs to 32 bits) make the same exact lane sums: no 16-bit sum
 * can saturate (stated per type below), so the integers, and then the float
 * steps, are quant8.h's. */
#define EMT_FILE8_ROWS 8
#define EMT_FILE8_COLS 4

/* A block's 32 codes of one weight row as bytes in order (Q8_0: the signed
 * codes; the others unsigned, the bias removed later), with its float
 * scales sc[2] (per half: Q6_K's differ) and minimum mw (quant8.h's
 * emt_block8_decode_ref, vectorised). */
static inline __attribute__((always_inline)) __m256i block8_codes_avx2(emt_dtype t, const uint8_t *blk, int sub,
                                                                       float sc[2], float *mw) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    /* 16 bytes of nibbles -> codes 0..15 (low nibbles), 16..31 (high) */
#define EMT_NIBBLES(p, shift_lo, shift_hi)                                                             \
    _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p))), \
                                       _mm256_setr_epi64x(shift_lo, shift_lo, shift_hi, shift_hi)),      \
                     nib)
    *mw = 0.0f;
    if (t == EMT_Q8_0) {
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
        return _mm256_loadu_si256((const __m256i *)(blk + 2));
    }
    if (t == EMT_Q4_0 || t == EMT_Q4_1) {
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
        if (t == EMT_Q4_1) *mw = emt_f16_to_f32(emt_rd16(blk + 2));
        return EMT_NIBBLES(blk + (t == EMT_Q4_1 ? 4 : 2), 0, 4);
    }
    /* byte l of the result: bit l of the 32-bit mask qh, times 16 */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
#define EMT_FIFTH(mask32)                                                                              \
    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)(mask32)), spread), bit), bit), \
                     _mm256_set1_epi8(16))
    if (t == EMT_Q5_0) {
        uint32_t qh;
        memcpy(&qh, blk + 2, 4);
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk));
        return _mm256_or_si256(EMT_NIBBLES(blk + 6, 0, 4), EMT_FIFTH(qh));
    }
    if (t == EMT_Q4_K || t == EMT_Q5_K) {
        uint8_t s, m;
        emt_kquant_scale_min(blk + 4, sub, &s, &m);
        sc[0] = sc[1] = emt_f16_to_f32(emt_rd16(blk)) * (float)s;
        *mw = -(emt_f16_to_f32(emt_rd16(blk + 2)) * (float)m);
        const uint8_t *qs = blk + (t == EMT_Q5_K ? 48 : 16) + 32 * (sub / 2);
        __m256i c = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)qs), 4 * (sub % 2)), nib);
        if (t == EMT_Q5_K) { /* bit `sub` of qh[l] */
            __m256i hb = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(blk + 16)),
                                                           _mm_cvtsi32_si128(sub)),
                                          _mm256_set1_epi8(1));
            c = _mm256_or_si256(c, _mm256_slli_epi16(hb, 4));
        }
        return c;
    }
    /* Q6_K */
    int h = sub / 4, k = sub % 4;
    const uint8_t *ql = blk + 64 * h + 32 * (k % 2), *qh = blk + 128 + 32 * h;
    const int8_t *s = (const int8_t *)(blk + 192 + 8 * h + 2 * k);
    float d = emt_f16_to_f32(emt_rd16(blk + 208));
    sc[0] = d * (float)s[0];
    sc[1] = d * (float)s[1];
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)ql), 4 * (k / 2)), nib);
    __m256i hi = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)qh), _mm_cvtsi32_si128(2 * k)),
                                  _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
#undef EMT_NIBBLES
#undef EMT_FIFTH
}

/* Outputs c = 0..3's codes (one ymm each, codes in order) -> v[k] = codes
 * 8k..8k+7 of outputs 0, 1, 2, 3 (the AVX-512 kernel's quadword layout). */
static inline __attribute__((always_inline)) void codes_to_quads(const __m256i c[4], __m256i v[4]) {
    __m256i lo01 = _mm256_unpacklo_epi64(c[0], c[1]), hi01 = _mm256_unpackhi_epi64(c[0], c[1]);
    __m256i lo23 = _mm256_unpacklo_epi64(c[2], c[3]), hi23 = _mm256_unpackhi_epi64(c[2], c[3]);
    v[0] = _mm256_permute2x128_si256(lo01, lo23, 0x20);
    v[1] = _mm256_permute2x128_si256(hi01, hi23, 0x20);
    v[2] = _mm256_permute2x128_si256(lo01, lo23, 0x31);
    v[3] = _mm256_permute2x128_si256(hi01, hi23, 0x31);
}

static inline __m256i x_quad_avx2(const emt_xq8 *xb, int k) {
    int64_t v;
    memcpy(&v, xb->q + 8 * k, 8);
    return _mm256_set1_epi64x(v);
}

/* lanes (2c, 2c + 1) of every output start at -bias * the two sums */
static inline __m256i lane_init_avx2(int bias, int32_t s0, int32_t s1) {
    if (!bias) return _mm256_setzero_si256();
    uint64_t v = (uint64_t)(uint32_t)(-bias * s0) | (uint64_t)(uint32_t)(-bias * s1) << 32;
    return _mm256_set1_epi64x((long long)v);
}

/* Weight rows w[0..3] (file layout) x nr 8-bit rows: out[r * 4 + c]. */
static inline __attribute__((always_inline)) void file8_rows(emt_dtype t, const uint8_t *const w[EMT_FILE8_COLS],
                                                             const emt_xq8 *x, int32_t nb, int nr, float *out) {
    const int kq = t == EMT_Q4_K || t == EMT_Q5_K || t == EMT_Q6_K, per = kq ? 8 : 1;
    const size_t bb = kq ? emt_dtype_block_bytes(t) : emt_qblock_bytes(t);
    const int bias = t == EMT_Q4_0 ? 8 : t == EMT_Q5_0 ? 16 : t == EMT_Q6_K ? 32 : 0;
    const int has_min = t == EMT_Q4_1 || t == EMT_Q4_K || t == EMT_Q5_K;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[EMT_FILE8_ROWS];
    __m128 mins[EMT_FILE8_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm256_setzero_ps();
        mins[r] = _mm_setzero_ps();
    }
    for (int32_t b = 0; b < nb; b++) {
        __m256i c[4], v[4];
        float sc[4][2], mw[4];
#pragma GCC unroll 4
        for (int o = 0; o < 4; o++) c[o] = block8_codes_avx2(t, w[o] + (size_t)(b / per) * bb, b % per, sc[o], &mw[o]);
        const __m256 sc0 = _mm256_setr_ps(sc[0][0], sc[0][0], sc[1][0], sc[1][0], sc[2][0], sc[2][0], sc[3][0], sc[3][0]);
        const __m256 sc1 = _mm256_setr_ps(sc[0][1], sc[0][1], sc[1][1], sc[1][1], sc[2][1], sc[2][1], sc[3][1], sc[3][1]);
        const __m128 mwv = _mm_setr_ps(mw[0], mw[1], mw[2], mw[3]);
        codes_to_quads(c, v);
        __m256i sgn[4];
        if (t == EMT_Q8_0) /* |code| goes in unsigned, its sign onto the activations */
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                sgn[k] = v[k];
                v[k] = _mm256_abs_epi8(v[k]);
            }
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            const emt_xq8 *xb = x + (size_t)r * nb + b;
            const __m256 dx = _mm256_set1_ps(xb->d);
            __m256i m[4];
            if (t == EMT_Q8_0) {
                /* |pair| <= 2 * 128 * 127 < 2^15, one pair per 16-bit sum */
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) m[k] = _mm256_maddubs_epi16(v[k], _mm256_sign_epi8(x_quad_avx2(xb, k), sgn[k]));
                __m256i isum = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(m[0], ones), _mm256_madd_epi16(m[1], ones)),
                                                _mm256_add_epi32(_mm256_madd_epi16(m[2], ones), _mm256_madd_epi16(m[3], ones)));
                isum = _mm256_add_epi32(isum, _mm256_shuffle_epi32(isum, 0xB1)); /* one sum per output, in both its lanes */
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc0, dx), _mm256_cvtepi32_ps(isum), acc[r]);
                continue;
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) m[k] = _mm256_maddubs_epi16(v[k], x_quad_avx2(xb, k));
            if (t == EMT_Q6_K) {
                /* codes < 64: two pairs per 16-bit sum, |sum| <= 4 * 63 * 127 < 2^15 */
                __m256i i0 = _mm256_add_epi32(lane_init_avx2(32, xb->lsum[0], xb->lsum[1]),
                                              _mm256_madd_epi16(_mm256_add_epi16(m[0], m[1]), ones));
                __m256i i1 = _mm256_add_epi32(lane_init_avx2(32, xb->lsum[2], xb->lsum[3]),
                                              _mm256_madd_epi16(_mm256_add_epi16(m[2], m[3]), ones));
                /* each half's sum per output, in both its lanes */
                i0 = _mm256_add_epi32(i0, _mm256_shuffle_epi32(i0, 0xB1));
                i1 = _mm256_add_epi32(i1, _mm256_shuffle_epi32(i1, 0xB1));
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc0, dx), _mm256_cvtepi32_ps(i0), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc1, dx), _mm256_cvtepi32_ps(i1), acc[r]);
                continue;
            }
            /* codes < 32: four pairs per 16-bit sum, |sum| <= 8 * 31 * 127 < 2^15 */
            __m256i isum = _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(m[0], m[1]), _mm256_add_epi16(m[2], m[3])), ones);
            isum = _mm256_add_epi32(lane_init_avx2(bias, xb->lsum[0] + xb->lsum[2], xb->lsum[1] + xb->lsum[3]), isum);
            isum = _mm256_add_epi32(isum, _mm256_shuffle_epi32(isum, 0xB1)); /* one sum per output, in both its lanes */
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc0, dx), _mm256_cvtepi32_ps(isum), acc[r]);
            if (has_min) mins[r] = _mm_fmadd_ps(mwv, _mm_set1_ps(xb->s), mins[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) { /* sum + minimum sum (each output's sum is in both its lanes) */
        __m256 both = acc[r];
        __m256 ev = _mm256_permutevar8x32_ps(both, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
        _mm_storeu_ps(out + 4 * r, _mm_add_ps(_mm256_castps256_ps128(ev), mins[r]));
    }
}

/* Outputs [o0, o1) for every 8-bit row: tiles of EMT_FILE8_ROWS rows x 4
 * outputs, the rows in blocks that stay in cache while the outputs pass. */
static inline __attribute__((always_inline)) void file8_range(const qmatmul_job *j, emt_dtype t, int32_t o0,
                                                              int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    float v[EMT_FILE8_ROWS * EMT_FILE8_COLS];
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += 32) {
        int32_t rb1 = rb0 + 32 < j->n_rows ? rb0 + 32 : j->n_rows;
        for (int32_t o = o0; o < o1; o += EMT_FILE8_COLS) {
            int nc = o1 - o < EMT_FILE8_COLS ? o1 - o : EMT_FILE8_COLS;
            const uint8_t *w[EMT_FILE8_COLS];
            for (int c = 0; c < EMT_FILE8_COLS; c++) /* a short tile repeats its last row, stored once */
                w[c] = (const uint8_t *)j->W->data + (size_t)(o + (c < nc ? c : nc - 1)) * j->row_bytes;
            for (int32_t r0 = rb0; r0 < rb1; r0 += EMT_FILE8_ROWS) {
                int nr = rb1 - r0 < EMT_FILE8_ROWS ? rb1 - r0 : EMT_FILE8_ROWS;
                const emt_xq8 *xq = j->xq8 + (size_t)r0 * nb;
                switch (nr) { /* nr constant in each call: the tile stays in registers */
                case 1: file8_rows(t, w, xq, nb, 1, v); break;
                case 2: file8_rows(t, w, xq, nb, 2, v); break;
                case 3: file8_rows(t, w, xq, nb, 3, v); break;
                case 4: file8_rows(t, w, xq, nb, 4, v); break;
                case 5: file8_rows(t, w, xq, nb, 5, v); break;
                case 6: file8_rows(t, w, xq, nb, 6, v); break;
                case 7: file8_rows(t, w, xq, nb, 7, v); break;
                default: file8_rows(t, w, xq, nb, 8, v); break;
                }
                store_tile(j, r0, nr, o, nc, v, EMT_FILE8_COLS);
            }
        }
    }
}
#endif

#ifdef EMT_CPU_PACKS_LANES
/* The AVX2 variant's packed Q4_0, Q4_1 and Q8_0 kernels (quant.h's layout:
 * one 32-byte load holds codes 4k..4k+3 of the group's 8 outputs). Each
 * output keeps two 32-bit lanes in a pair of registers (outputs 0..3 and
 * 4..7), fed by vpmaddwd against one broadcast quadword of activation codes,
 * so no lanes are merged across outputs: per block one horizontal add
 * joins each output's lane pair into its exact integer sum, then one
 * conversion, one multiply dw * dx and one FMA take in all 8 outputs.
 * That is emt_dot_q_ref's sequence per output, bit for bit, for any tile
 * height (tests/unit/test_quant_kernels.c). Against qtile_rows (8 rows'
 * codes decoded one output at a time, then reduced across outputs) a
 * one-row block costs about 60 instructions instead of 90, and the 8
 * scales come in one load. Tiles of up to 4 rows: 8 integer accumulators
 * beside the 4 decoded code vectors fill the 16 registers. */
#define EMT_LANES_ROWS 4

static inline __attribute__((always_inline)) void
lanes_rows_avx2(emt_dtype t, const uint8_t *g, const emt_xq *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_qblock_bytes(t);
    const uint8_t *codes = g + emt_qblock_head(t) * EMT_PACK_ROWS;
    /* _mm256_hadd_epi32(outputs 0..3, 4..7) holds outputs 0, 1, 4, 5, 2, 3,
     * 6, 7: the scales are put in that order, the sums back at the end (the
     * permutation is its own inverse) */
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    const __m256i nib = _mm256_set1_epi16(0x0F);
    const int ks = t == EMT_Q8_0 ? 8 : 4; /* 32-byte code groups per block */
    __m256 acc[EMT_LANES_ROWS], acc_min[EMT_LANES_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) acc[r] = acc_min[r] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++, g += gb, codes += gb) {
        if (prefetch) prefetch_ahead(g, gb);
        __m256i s03[EMT_LANES_ROWS], s47[EMT_LANES_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) { /* Q4_0's offset: lane 2c of each output starts at -8 * sum(q) */
            long long bias;
            memcpy(&bias, x[(size_t)r * nb + b].bias8, sizeof bias);
            s03[r] = s47[r] = t == EMT_Q4_0 ? _mm256_set1_epi64x(bias) : _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int k = 0; k < ks; k++) {
            /* 16-bit word 4c + j: output c's code 4k + j (Q4: and 16 + 4k + j) */
            __m256i lo03, lo47, hi03 = _mm256_setzero_si256(), hi47 = _mm256_setzero_si256();
            if (t == EMT_Q8_0) {
                lo03 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(codes + 32 * k)));
                lo47 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(codes + 32 * k + 16)));
            } else {
                __m256i v03 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(codes + 32 * k)));
                __m256i v47 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(codes + 32 * k + 16)));
                lo03 = _mm256_and_si256(v03, nib);
                lo47 = _mm256_and_si256(v47, nib);
                hi03 = _mm256_srli_epi16(v03, 4);
                hi47 = _mm256_srli_epi16(v47, 4);
            }
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) {
                const int16_t *q = x[(size_t)r * nb + b].q;
                long long ql, qh;
                memcpy(&ql, q + 4 * k, sizeof ql);
                const __m256i xl = _mm256_set1_epi64x(ql);
                s03[r] = dot_i16(s03[r], lo03, xl);
                s47[r] = dot_i16(s47[r], lo47, xl);
                if (t == EMT_Q8_0) continue;
                memcpy(&qh, q + 16 + 4 * k, sizeof qh);
                const __m256i xh = _mm256_set1_epi64x(qh);
                s03[r] = dot_i16(s03[r], hi03, xh);
                s47[r] = dot_i16(s47[r], hi47, xh);
            }
        }
        const __m256 dw = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)), order);
        const __m256 mw = t == EMT_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 2 * EMT_PACK_ROWS)))
                                        : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const emt_xq *xb = x + (size_t)r * nb + b;
            __m256i isum = _mm256_hadd_epi32(s03[r], s47[r]);
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb->d)), _mm256_cvtepi32_ps(isum), acc[r]);
            if (t == EMT_Q4_1) acc_min[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb->s), acc_min[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(_mm256_permutevar8x32_ps(acc[r], order), acc_min[r]));
}

/* The same at 8-bit activations (quant8.h's order): per block and row, the
 * codes 4k..4k+3 and 16 + 4k.. of the 8 outputs against two broadcast
 * dwords of activation codes (vpmaddubsw, the weight codes unsigned: Q4
 * nibbles, |Q8_0 code| with its sign moved onto the activations), summed in
 * 16 bits (Q8_0: per code quad) and widened to the block's one sum per
 * output (quant8.h); Q4_0's offset comes out of the block's activation
 * sums (emt_xq8.lsum). The 8 outputs come out in order, so the scales need
 * no permutation. */
static inline __attribute__((always_inline)) void
lanes8_rows_avx2(emt_dtype t, const uint8_t *g, const emt_xq8 *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_qblock_bytes(t);
    const uint8_t *codes = g + emt_qblock_head(t) * EMT_PACK_ROWS;
    const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[EMT_LANES_ROWS], mins[EMT_LANES_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) acc[r] = mins[r] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; b++, g += gb, codes += gb) {
        if (prefetch) prefetch_ahead(g, gb);
        __m256i isum[EMT_LANES_ROWS]; /* the 8 outputs' block sums (quant8.h: one per output) */
        if (t == EMT_Q8_0) {
            /* |pair| <= 2 * 128 * 127 < 2^15: each code group widened on its own */
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(codes + 32 * k)), aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
                for (int r = 0; r < nr; r++) {
                    int32_t q4;
                    memcpy(&q4, x[(size_t)r * nb + b].q + 4 * k, sizeof q4);
                    __m256i m = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(q4), w));
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(m, ones));
                }
            }
        } else {
            /* codes < 16: eight code pairs per 16-bit sum, |sum| <= 16 * 15 * 127 < 2^15 */
            __m256i m16[EMT_LANES_ROWS][2];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(codes + 32 * k));
                const __m256i lo = _mm256_and_si256(v, nib), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
#pragma GCC unroll 4
                for (int r = 0; r < nr; r++) {
                    const int8_t *q = x[(size_t)r * nb + b].q;
                    int32_t ql, qh;
                    memcpy(&ql, q + 4 * k, sizeof ql);
                    memcpy(&qh, q + 16 + 4 * k, sizeof qh);
                    __m256i m = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(ql)),
                                                 _mm256_maddubs_epi16(hi, _mm256_set1_epi32(qh)));
                    m16[r][k & 1] = k < 2 ? m : _mm256_add_epi16(m16[r][k & 1], m);
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) {
                const emt_xq8 *xb = x + (size_t)r * nb + b;
                isum[r] = _mm256_madd_epi16(_mm256_add_epi16(m16[r][0], m16[r][1]), ones);
                if (t == EMT_Q4_0) /* codes are q - 8: the sum loses 8 * the block's activation sum */
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_set1_epi32(-8 * ((xb->lsum[0] + xb->lsum[1]) + (xb->lsum[2] + xb->lsum[3]))));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        const __m256 mw = t == EMT_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 2 * EMT_PACK_ROWS)))
                                        : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const emt_xq8 *xb = x + (size_t)r * nb + b;
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb->d)), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            if (t == EMT_Q4_1) mins[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb->s), mins[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(acc[r], mins[r]));
}

/* -(dmin * m) of the 8 outputs of a packed Q4_K group super-block's
 * sub-block s (the minimum that multiplies the block's activation sum). */
static inline __m256 kmins_avx2(const uint8_t *g, int s, __m256 dmin) {
    long long scm, mlo;
    memcpy(&scm, g + EMT_PK4_SCM + 8 * s, sizeof scm);
    memcpy(&mlo, g + EMT_PK4_MLO + 8 * (s / 2), sizeof mlo);
    __m256i hi2 = _mm256_slli_epi32(_mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(scm)), 6), 4);
    __m256i lo4 = _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mlo)), 4 * (s % 2)),
                                   _mm256_set1_epi32(15));
    __m256 p = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_or_si256(hi2, lo4)));
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(p), _mm256_set1_epi32((int)0x80000000u)));
}

/* The 8-bit K kernels' sums (quant8.h's lanes: per 32-value block,
 * half h = codes 16h..16h+15, lane e = bit 2 of the code index). Two
 * outputs' codes (c in the low 128 bits, c + 1 in the high; lo = codes
 * 0..15, hi = 16..31, unsigned bytes) are reordered by dwords into
 * w[0] = {0-3, 16-19, 4-7, 20-23} and w[1] = {8-11, 24-27, 12-15, 28-31},
 * a row's activation codes the same way in both halves (pair8_x), and one
 * vpmaddubsw each, a 16-bit add (|sum| <= 4 * 63 * 127, no saturation)
 * and one vpmaddwd give per output the four exact sums [(h0, e0), (h1,
 * e0), (h0, e1), (h1, e1)]: 4 instructions per row and output pair, where
 * summing each output's 8 dwords and merging 8 outputs to their lanes took
 * about 38 per row and 8 outputs. */
static inline __attribute__((always_inline)) void pair8_codes(__m256i lo, __m256i hi, __m256i w[2]) {
    w[0] = _mm256_unpacklo_epi32(lo, hi);
    w[1] = _mm256_unpackhi_epi32(lo, hi);
}
static inline __attribute__((always_inline)) void pair8_x(const emt_xq8 *xb, __m256i q[2]) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)xb->q);
    q[0] = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    q[1] = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(2, 6, 3, 7, 2, 6, 3, 7));
}
static inline __m256i pair8_sums(const __m256i w[2], const __m256i q[2]) {
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w[0], q[0]), _mm256_maddubs_epi16(w[1], q[1])),
                             _mm256_set1_epi16(1));
}
/* Packed Q4_K (quant.h's layout) on AVX2: a tile of up to EMT_LANES_ROWS
 * rows x a group's 8 outputs, one output at a time. Per 32-value sub-block
 * an output's 16 code bytes are widened once for the tile's rows; per row
 * two vpmaddwd give kquant.h's 8 lanes (lane d: codes 2d, 2d+1, 16+2d,
 * 17+2d). One row: the unscaled codes' sums times the sub-block's 6-bit
 * scale by one vpmulld; 2-4 rows: the codes scaled once by two vpmullw
 * for all the tile's rows (kdot_rows' way). Both are the same exact
 * integers. The float steps are emt_dot_k_ref's:
 * per super-block one FMA of the 8 lanes by dw * dx, per sub-block
 * mw * s into the minimum sum (8 outputs a register), the lanes added by
 * hsum_ps at the end; so the products equal the reference bit for bit.
 * The scales and minimums of the group's 8 rows come in one load each. */
static inline __attribute__((always_inline)) void
klanes_rows_avx2(const uint8_t *g, const emt_xq *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_dtype_block_bytes(EMT_Q4_K);
    const __m256i nib = _mm256_set1_epi16(0x0F);
    __m256 acc[EMT_LANES_ROWS][EMT_PACK_ROWS], acc_min[EMT_LANES_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        acc_min[r] = _mm256_setzero_ps();
        for (int c = 0; c < EMT_PACK_ROWS; c++) acc[r][c] = _mm256_setzero_ps();
    }
    for (int32_t b0 = 0; b0 < nb; b0 += 8, g += gb) {
        /* the minimums: -(dmin * m) for the 8 outputs, sub-block by sub-block */
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + EMT_PK4_DMIN)));
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            if (prefetch) prefetch_part(g, gb, s, 8); /* the block 4 KiB ahead, an eighth per sub-block */
            const __m256 mw = kmins_avx2(g, s, dmin);
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++)
                acc_min[r] = _mm256_add_ps(acc_min[r], _mm256_mul_ps(mw, _mm256_set1_ps(x[(size_t)r * nb + b0 + s].s)));
        }
        /* dw * dx of the 8 outputs for each row (the rows' one scale per 256 values) */
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        __m256 wx[EMT_LANES_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) wx[r] = _mm256_mul_ps(dw, _mm256_set1_ps(x[(size_t)r * nb + b0].d));
        for (int c = 0; c < EMT_PACK_ROWS; c++) {
            __m256i isum[EMT_LANES_ROWS];
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++) {
                const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + EMT_PK4_QS + 128 * s + 16 * c)));
                const __m256i lo = _mm256_and_si256(v, nib), hi = _mm256_srli_epi16(v, 4);
                const int scale = g[EMT_PK4_SCM + 8 * s + c] & 63;
                if (nr == 1) { /* one vpmulld on the row's lane sums */
                    const emt_xq *xb = x + b0 + s;
                    __m256i p = _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)xb->q)),
                                                 _mm256_madd_epi16(hi, _mm256_loadu_si256((const __m256i *)(xb->q + 16))));
                    isum[0] = _mm256_add_epi32(isum[0], _mm256_mullo_epi32(p, _mm256_set1_epi32(scale)));
                } else { /* the codes scaled once for the tile's rows (|scale * q| <= 945) */
                    const __m256i sc = _mm256_set1_epi16((short)scale);
                    const __m256i ls = _mm256_mullo_epi16(lo, sc), hs = _mm256_mullo_epi16(hi, sc);
#pragma GCC unroll 4
                    for (int r = 0; r < nr; r++) {
                        const emt_xq *xb = x + (size_t)r * nb + b0 + s;
                        isum[r] = dot_i16(dot_i16(isum[r], ls, _mm256_loadu_si256((const __m256i *)xb->q)), hs,
                                          _mm256_loadu_si256((const __m256i *)(xb->q + 16)));
                    }
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(wx[r], _mm256_set1_epi32(c)), _mm256_cvtepi32_ps(isum[r]),
                                            acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        float mins[8];
        _mm256_storeu_ps(mins, acc_min[r]);
        for (int c = 0; c < EMT_PACK_ROWS; c++) out[r * 8 + c] = hsum_ps(acc[r][c]) + mins[c];
    }
}

/* The same at 8-bit activations (quant8.h: per 32-value block one sum per
 * output, fused in with the block's float scale d * sc times dx; the
 * minimums by FMA). Per sub-block and output pair pair8_sums gives the
 * four (half, lane) sums, one vphaddd per two pairs adds the halves
 * (outputs 0..3 as [0 e0, 0 e1, 2 e0, 2 e1 | 1 e0, 1 e1, 3 e0, 3 e1], 4..7
 * the same) and one more the lanes: the 8 outputs' sums as [0, 2, 4, 6 |
 * 1, 3, 5, 7]; the scales are put in that order. */
static inline __attribute__((always_inline)) void
klanes8_rows_avx2(const uint8_t *g, const emt_xq8 *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_dtype_block_bytes(EMT_Q4_K);
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i ord = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256 acc[EMT_LANES_ROWS], mins[EMT_LANES_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) acc[r] = mins[r] = _mm256_setzero_ps();
    for (int32_t b0 = 0; b0 < nb; b0 += 8, g += gb) {
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + EMT_PK4_DMIN)));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        for (int s = 0; s < 8; s++) {
            if (prefetch) prefetch_part(g, gb, s, 8);
            const __m256 mw = kmins_avx2(g, s, dmin);
            long long scm;
            memcpy(&scm, g + EMT_PK4_SCM + 8 * s, sizeof scm);
            /* d * sc of the 8 outputs in the sums' order */
            const __m256i sc = _mm256_and_si256(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(scm)), _mm256_set1_epi32(63));
            const __m256 dsc = _mm256_permutevar8x32_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)), ord);
            __m256i w[4][2]; /* output pair p (outputs 2p, 2p + 1): pair8_codes */
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + EMT_PK4_QS + 128 * s + 32 * p));
                pair8_codes(_mm256_and_si256(v, nib), _mm256_and_si256(_mm256_srli_epi16(v, 4), nib), w[p]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < nr; r++) {
                const emt_xq8 *xb = x + (size_t)r * nb + b0 + s;
                __m256i q[2];
                pair8_x(xb, q);
                const __m256i l0 = _mm256_hadd_epi32(pair8_sums(w[0], q), pair8_sums(w[1], q));
                const __m256i l1 = _mm256_hadd_epi32(pair8_sums(w[2], q), pair8_sums(w[3], q));
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dsc, _mm256_set1_ps(xb->d)),
                                         _mm256_cvtepi32_ps(_mm256_hadd_epi32(l0, l1)), acc[r]);
                mins[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb->s), mins[r]);
            }
        }
    }
    const __m256i back = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* output c's sum: lane back[c] */
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(_mm256_permutevar8x32_ps(acc[r], back), mins[r]));
}

/* Packed Q6_K on AVX2: output c of a group, sub-block s as 16-bit codes
 * q - 32 (lo: codes 0..15, hi: 16..31), from the 4 low bits (QL) and the
 * 2 top bits (QH, four sub-block halves to a byte). */
static inline __attribute__((always_inline)) void q6_codes_avx2(const uint8_t *g, int s, int c, __m256i *lo, __m256i *hi) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + EMT_PK6_QL + 128 * s + 16 * c)));
    const __m256i h = _mm256_srli_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(g + EMT_PK6_QH + 128 * (s / 2) + 16 * c))), 4 * (s % 2));
    const __m256i bias = _mm256_set1_epi16(32);
    *lo = _mm256_sub_epi16(_mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi16(15)),
                                           _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(3)), 4)),
                           bias);
    *hi = _mm256_sub_epi16(_mm256_or_si256(_mm256_srli_epi16(v, 4),
                                           _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(12)), 2)),
                           bias);
}

/* Packed Q6_K on AVX2: outputs c and c + 1 of a group, sub-block s, as
 * unsigned bytes q (0..63): lo holds codes 0..15 of output c (low 128
 * bits) and of c + 1 (high), hi codes 16..31. Decoded 32 bytes at a time:
 * half the instructions per output of a 16-byte decode. The qh fields of
 * sub-block s sit at bits 0..3 of each byte after the shift (a 16-bit
 * shift's carry from the next byte lands at bits 4..7 and is masked). */
static inline __attribute__((always_inline)) void q6_bytes2_avx2(const uint8_t *g, int s, int c, __m256i *lo, __m256i *hi) {
    const __m256i nib = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(g + EMT_PK6_QL + 128 * s + 16 * c));
    const __m256i qh = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(g + EMT_PK6_QH + 128 * (s / 2) + 16 * c)),
                                         4 * (s % 2));
    *lo = _mm256_or_si256(_mm256_and_si256(ql, nib), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), nib), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
}

/* The Q6_K kernels below take tiles of up to 8 rows where the other AVX2
 * kernels take 4: Q6_K's decode (about twice Q4_K's per sub-block) is what
 * the tile's rows share, and 8 rows' accumulators, partly spilled, cost
 * less than decoding twice (bench_qkernels: 8 rows and more 33 -> 37-39
 * multiply-adds per ns at 8 bits, 27-28 -> 29-32 at 16; Q4_K measured no
 * faster at 8). */
#define EMT_K6_LANES_ROWS 8

/* Packed Q6_K, 16-bit activations: as klanes_rows_avx2, but the codes
 * scaled first (each 16-value half by its int8 scale, as kdot_rows does),
 * one FMA per sum group (half a super-block), no minimum term. */
static inline __attribute__((always_inline)) void
k6lanes_rows_avx2(const uint8_t *g, const emt_xq *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_dtype_block_bytes(EMT_Q6_K);
    const int group = emt_kblock_sum_group(EMT_Q6_K);
    __m256 acc[EMT_K6_LANES_ROWS][EMT_PACK_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < EMT_PACK_ROWS; c++) acc[r][c] = _mm256_setzero_ps();
    for (int32_t b0 = 0; b0 < nb; b0 += 8, g += gb) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g));
        if (prefetch)
            for (int s = 0; s < 8; s++) prefetch_part(g, gb, s, 8);
        for (int s0 = 0; s0 < 8; s0 += group) {
            __m256 wx[EMT_K6_LANES_ROWS];
#pragma GCC unroll 8
            for (int r = 0; r < nr; r++) wx[r] = _mm256_mul_ps(dw, _mm256_set1_ps(x[(size_t)r * nb + b0 + s0 + group - 1].d));
            for (int c = 0; c < EMT_PACK_ROWS; c++) {
                __m256i isum[EMT_K6_LANES_ROWS];
#pragma GCC unroll 8
                for (int r = 0; r < nr; r++) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int s = s0; s < s0 + group; s++) {
                    __m256i lo, hi;
                    q6_codes_avx2(g, s, c, &lo, &hi);
                    /* kquant.h's scaled codes: |scale * (q - 32)| <= 4096 */
                    const int8_t *sc = (const int8_t *)(g + EMT_PK6_SC + 16 * s + 2 * c);
                    lo = _mm256_mullo_epi16(lo, _mm256_set1_epi16(sc[0]));
                    hi = _mm256_mullo_epi16(hi, _mm256_set1_epi16(sc[1]));
#pragma GCC unroll 8
                    for (int r = 0; r < nr; r++) {
                        const emt_xq *xb = x + (size_t)r * nb + b0 + s;
                        isum[r] = dot_i16(dot_i16(isum[r], lo, _mm256_loadu_si256((const __m256i *)xb->q)), hi,
                                          _mm256_loadu_si256((const __m256i *)(xb->q + 16)));
                    }
                }
#pragma GCC unroll 8
                for (int r = 0; r < nr; r++)
                    acc[r][c] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(wx[r], _mm256_set1_epi32(c)),
                                                _mm256_cvtepi32_ps(isum[r]), acc[r][c]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < EMT_PACK_ROWS; c++) out[r * 8 + c] = hsum_ps(acc[r][c]) + 0.0f; /* the reference's zero minimum sum */
}

/* Packed Q6_K, 8-bit activations (quant8.h: per block and half h, the
 * half's exact sum fused in with d * scale_h * dx, half 0 first): the codes
 * q unsigned through pair8_sums, 32 times the half's activation sums
 * (emt_xq8.lsum) taken off; per output pair the four sums put in (half,
 * lane) order, two vphaddd per four pairs add the lanes, and two shuffles
 * gather each half's 8 sums as [0, 2, 4, 6 | 1, 3, 5, 7] (klanes8's
 * order); the scales are put in that order. */
static inline __attribute__((always_inline)) void
k6lanes8_rows_avx2(const uint8_t *g, const emt_xq8 *x, int32_t nb, int nr, int prefetch, float *out) {
    const size_t gb = EMT_PACK_ROWS * emt_dtype_block_bytes(EMT_Q6_K);
    const __m256i ord = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    /* the scale bytes [0h0 0h1 1h0 1h1 ..] of half 0 (half 1) in the sums' order */
    const __m128i half0 = _mm_setr_epi8(0, 4, 8, 12, 2, 6, 10, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i half1 = _mm_setr_epi8(1, 5, 9, 13, 3, 7, 11, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256 acc[EMT_K6_LANES_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int32_t b0 = 0; b0 < nb; b0 += 8, g += gb) {
        const __m256 d = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g)), ord);
        for (int s = 0; s < 8; s++) {
            if (prefetch) prefetch_part(g, gb, s, 8);
            const __m128i sc = _mm_loadu_si128((const __m128i *)(g + EMT_PK6_SC + 16 * s));
            const __m256 sc0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, half0))));
            const __m256 sc1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, half1))));
            __m256i w[4][2]; /* output pair p: pair8_codes of the codes q (0..63) */
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i lo, hi;
                q6_bytes2_avx2(g, s, 2 * p, &lo, &hi);
                pair8_codes(lo, hi, w[p]);
            }
#pragma GCC unroll 8
            for (int r = 0; r < nr; r++) {
                const emt_xq8 *xb = x + (size_t)r * nb + b0 + s;
                __m256i q[2];
                pair8_x(xb, q);
                /* the codes' offset: -32 times the activation sum of each (half, lane), in pair8_sums' order */
                const int32_t o0 = -32 * xb->lsum[0], o1 = -32 * xb->lsum[1], o2 = -32 * xb->lsum[2], o3 = -32 * xb->lsum[3];
                const __m256i bias = _mm256_setr_epi32(o0, o2, o1, o3, o0, o2, o1, o3);
                __m256i t[4]; /* per pair, by output: [h0 e0, h0 e1, h1 e0, h1 e1] */
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) t[p] = _mm256_shuffle_epi32(_mm256_add_epi32(pair8_sums(w[p], q), bias), 0xD8);
                /* [0 h0, 0 h1, 2 h0, 2 h1 | 1 h0, 1 h1, 3 h0, 3 h1], then outputs 4..7 the same */
                const __m256 u01 = _mm256_castsi256_ps(_mm256_hadd_epi32(t[0], t[1]));
                const __m256 u23 = _mm256_castsi256_ps(_mm256_hadd_epi32(t[2], t[3]));
                const __m256i h0 = _mm256_castps_si256(_mm256_shuffle_ps(u01, u23, 0x88)); /* [0 2 4 6 | 1 3 5 7] */
                const __m256i h1 = _mm256_castps_si256(_mm256_shuffle_ps(u01, u23, 0xDD));
                const __m256 dx = _mm256_set1_ps(xb->d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc0, dx), _mm256_cvtepi32_ps(h0), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(sc1, dx), _mm256_cvtepi32_ps(h1), acc[r]);
            }
        }
    }
    const __m256i back = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* output c's sum: lane back[c] */
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++) /* + the zero minimum sum */
        _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(_mm256_permutevar8x32_ps(acc[r], back), _mm256_setzero_ps()));
}

/* Outputs [o0, o1) (o0 a multiple of 8) of a packed Q4_0 / Q4_1 / Q8_0 /
 * Q4_K / Q6_K matrix for every row, 16- or 8-bit: tiles of EMT_LANES_ROWS
 * rows (Q6_K: EMT_K6_LANES_ROWS) x one group's 8 outputs, the rows in
 * blocks of 32 that stay in cache while the groups pass; a block's first
 * tile asks for the weights ahead. */
/* Rows per tile: 8 for the Q6_K kernels, 4 for the others. */
static inline int lanes_tile(emt_dtype t) { return t == EMT_Q6_K ? EMT_K6_LANES_ROWS : EMT_LANES_ROWS; }

static inline __attribute__((always_inline)) void lanes_range(const qmatmul_job *j, emt_dtype t, int bits8,
                                                              int32_t o0, int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    const int tile = lanes_tile(t);
    float v[EMT_K6_LANES_ROWS * EMT_PACK_ROWS];
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += 32) {
        int32_t rb1 = rb0 + 32 < j->n_rows ? rb0 + 32 : j->n_rows;
        for (int32_t o = o0; o < o1; o += EMT_PACK_ROWS) {
            const uint8_t *g = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            int nc = o1 - o < EMT_PACK_ROWS ? o1 - o : EMT_PACK_ROWS;
            for (int32_t r0 = rb0; r0 < rb1; r0 += tile) {
                int nr = rb1 - r0 < tile ? rb1 - r0 : tile;
                const int first = r0 == rb0;
#define EMT_LANES_CALL(n)                                                                              \
    (t == EMT_Q4_K ? (bits8 ? klanes8_rows_avx2(g, j->xq8 + (size_t)r0 * nb, nb, n, first, v)           \
                             : klanes_rows_avx2(g, j->xq + (size_t)r0 * nb, nb, n, first, v))           \
     : t == EMT_Q6_K ? (bits8 ? k6lanes8_rows_avx2(g, j->xq8 + (size_t)r0 * nb, nb, n, first, v)        \
                               : k6lanes_rows_avx2(g, j->xq + (size_t)r0 * nb, nb, n, first, v))        \
     : bits8        ? lanes8_rows_avx2(t, g, j->xq8 + (size_t)r0 * nb, nb, n, first, v)                  \
                   : lanes_rows_avx2(t, g, j->xq + (size_t)r0 * nb, nb, n, first, v))
/* 5..8 rows: the tiles of 8 only, Q6_K's (for the other types lanes_tile
 * rules the calls out at compile time, so their code stays as with tiles
 * of 4) */
#define EMT_K6_CALL(n)                                                                                 \
    if (lanes_tile(t) >= (n))                                                                          \
        (bits8 ? k6lanes8_rows_avx2(g, j->xq8 + (size_t)r0 * nb, nb, n, first, v)                     \
                : k6lanes_rows_avx2(g, j->xq + (size_t)r0 * nb, nb, n, first, v))
                switch (nr) { /* nr constant in each call: the tile stays in registers */
                case 1: EMT_LANES_CALL(1); break;
                case 2: EMT_LANES_CALL(2); break;
                case 3: EMT_LANES_CALL(3); break;
                case 4: EMT_LANES_CALL(4); break;
                case 5: EMT_K6_CALL(5); break;
                case 6: EMT_K6_CALL(6); break;
                case 7: EMT_K6_CALL(7); break;
                default: EMT_K6_CALL(8); break;
                }
#undef EMT_K6_CALL
#undef EMT_LANES_CALL
                store_tile(j, r0, nr, o, nc, v, EMT_PACK_ROWS);
            }
        }
    }
}

#endif

/* One non-inlined function per packed type and activation width, around
 * one call of its range function with constant arguments: each kernel
 * family gets its own registers and code (inlined together into
 * qmatmul_task, adding the AVX2 8-bit K kernels and the Q6_K tiles of 8
 * made the unchanged 16-bit Q4_K kernel 5-8% slower at 2-8 rows). */
#define EMT_RANGE_FN(name, call)                                                                        \
    static __attribute__((noinline)) void name(const qmatmul_job *j, int32_t o0, int32_t o1) { call; }

#ifdef EMT_CPU_PACKS_LANES
EMT_RANGE_FN(lanes_q4_0_16, lanes_range(j, EMT_Q4_0, 0, o0, o1))
EMT_RANGE_FN(lanes_q4_0_8, lanes_range(j, EMT_Q4_0, 1, o0, o1))
EMT_RANGE_FN(lanes_q4_1_16, lanes_range(j, EMT_Q4_1, 0, o0, o1))
EMT_RANGE_FN(lanes_q4_1_8, lanes_range(j, EMT_Q4_1, 1, o0, o1))
EMT_RANGE_FN(lanes_q8_0_16, lanes_range(j, EMT_Q8_0, 0, o0, o1))
EMT_RANGE_FN(lanes_q8_0_8, lanes_range(j, EMT_Q8_0, 1, o0, o1))
EMT_RANGE_FN(lanes_q4_k_16, lanes_range(j, EMT_Q4_K, 0, o0, o1))
EMT_RANGE_FN(lanes_q4_k_8, lanes_range(j, EMT_Q4_K, 1, o0, o1))
EMT_RANGE_FN(lanes_q6_k_16, lanes_range(j, EMT_Q6_K, 0, o0, o1))
EMT_RANGE_FN(lanes_q6_k_8, lanes_range(j, EMT_Q6_K, 1, o0, o1))
#endif

#ifdef EMT_CPU_PACKED
/* Outputs [o0, o1) of a packed matrix for every 8-bit row: tiles of
 * EMT_TILE8_ROWS rows x one group's 8 outputs. */
static inline __attribute__((always_inline)) void
packed8_range(const qmatmul_job *j, emt_dtype t, int32_t o0, int32_t o1) {
    int32_t nb = j->n_in / EMT_QK;
    float v[EMT_TILE8_ROWS * EMT_PACK_ROWS];
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += EMT_ROW_BLOCK) {
        int32_t rb1 = rb0 + EMT_ROW_BLOCK < j->n_rows ? rb0 + EMT_ROW_BLOCK : j->n_rows;
        for (int32_t o = o0; o < o1; o += EMT_PACK_ROWS) {
            const uint8_t *g = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            int nc = o1 - o < EMT_PACK_ROWS ? o1 - o : EMT_PACK_ROWS;
            for (int32_t r0 = rb0; r0 < rb1; r0 += EMT_TILE8_ROWS) {
                int nr = rb1 - r0 < EMT_TILE8_ROWS ? rb1 - r0 : EMT_TILE8_ROWS;
                const emt_xq8 *xq = j->xq8 + (size_t)r0 * nb;
                const int first = r0 == rb0; /* the row block's first tile asks for the weights ahead */
                switch (nr) { /* nr constant in each call: the tile stays in registers */
                case 1: packed8_rows(t, g, xq, nb, 1, first, v); break;
                case 2: packed8_rows(t, g, xq, nb, 2, first, v); break;
                case 3: packed8_rows(t, g, xq, nb, 3, first, v); break;
                case 4: packed8_rows(t, g, xq, nb, 4, first, v); break;
                case 5: packed8_rows(t, g, xq, nb, 5, first, v); break;
                case 6: packed8_rows(t, g, xq, nb, 6, first, v); break;
                case 7: packed8_rows(t, g, xq, nb, 7, first, v); break;
                default: packed8_rows(t, g, xq, nb, 8, first, v); break;
                }
                store_tile(j, r0, nr, o, nc, v, EMT_PACK_ROWS);
            }
        }
    }
}
#endif

#ifdef EMT_CPU_AMX_TILES
/* AMX tile products (the amx variant): a product of 16 or more rows (a
 * verify of 16+ nodes, a 16-bit prompt) of a packed Q4_0 or Q8_0 matrix
 * with the 16-bit activation rows, equal bit for bit to the scalar
 * reference (emt_dot_q_ref) and so to the one-row kernel. Below 16 rows
 * the VNNI kernels are faster: each block's sums must leave the tiles
 * through memory for the reference's float step, and with 8 tiles that
 * round trip is latency-bound (docs/performance.md).
 *
 * A tile multiply sums exactly in 32-bit integers, but only over 8-bit
 * operands, so each 16-bit activation code is split: q = 256 * hi + lo with
 * hi = q >> 8 (signed) and lo = q & 255 (unsigned), and a block's integer
 * sum is 256 * (hi . w) + (lo . w) (at most 2^27 in magnitude), plus Q4_0's
 * -8 * sum(q). The A tiles are a row tile's high and low bytes of one block
 * (up to 16 rows x 32 bytes, amx_split_row); a B tile is one packed group's
 * block: row k holds codes 4k..4k+3 of the 8 outputs, which is the packed
 * Q8_0 block as stored and the packed Q4_0 block's nibbles unpacked (rows
 * 0-3 low nibbles: codes 0..15, rows 4-7 high: codes 16..31). A C tile is
 * rows x 8 outputs. Two groups per pass: tiles 0-1 A, 2-3 B, 4-7 C.
 * Each block's sums leave the tiles through memory and take the
 * reference's float steps, fma(dw * dx, isum, acc), in zmm registers that
 * hold two rows x 8 outputs. */
#define EMT_AMX_M 16        /* activation rows per tile */
#define EMT_AMX_MIN_ROWS 16 /* fewer rows keep the VNNI kernels: faster there (docs/performance.md) */
/* per (row tile, block): 16 rows x (32 high bytes, 32 low bytes), then the rows' d[16] and Q4_0 bias[16] */
#define EMT_AMX_UNIT (EMT_AMX_M * 64 + 128)

/* GCC's tile load and store intrinsics are asm statements without a memory
 * clobber: without this fence the compiler may drop or move the vector
 * stores a tile load reads, and the loads of what a tile store wrote. */
#define EMT_AMX_FENCE() __asm__ volatile("" ::: "memory")

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} emt_amx_config;
_Static_assert(sizeof(emt_amx_config) == 64, "the tile configuration is 64 bytes");

/* Loads the tile configuration c. GCC's _tile_loadconfig tells the
 * compiler that it reads only the first 8 bytes of the configuration, so
 * the stores of the rows and widths may be dropped (an -O2 build did, and
 * its first tile load raised #UD); this asm reads all 64. */
static inline void amx_load_config(const emt_amx_config *c) { __asm__ volatile("ldtilecfg %0" ::"m"(*c)); }

/* A and C tiles of m rows, B tiles of 8 rows, all 32 bytes wide */
static void amx_configure(int m) {
    emt_amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 32;
        c.rows[t] = (uint8_t)(t == 2 || t == 3 ? 8 : m);
    }
    amx_load_config(&c);
}

/* Row r of the prepared 16-bit rows (nb blocks) into the split layout;
 * rows of a last, partial row tile beyond n_rows are left zero by row 0. */
static void amx_split_row(const emt_xq *xq, int32_t nb, int32_t r, int32_t n_rows, uint8_t *base) {
    const int32_t rt = r / EMT_AMX_M, m = r % EMT_AMX_M;
    const int pad = m == 0 && n_rows - r < EMT_AMX_M ? n_rows - r : EMT_AMX_M;
    const __m512i low = _mm512_set1_epi16(0xFF);
    for (int32_t b = 0; b < nb; b++) {
        uint8_t *u = base + ((size_t)rt * nb + b) * EMT_AMX_UNIT;
        __m512i q = _mm512_loadu_si512((const void *)xq[b].q);
        _mm256_storeu_si256((__m256i *)(u + 64 * m), _mm512_cvtepi16_epi8(_mm512_srai_epi16(q, 8)));
        _mm256_storeu_si256((__m256i *)(u + 64 * m + 32), _mm512_cvtepi16_epi8(_mm512_and_si512(q, low)));
        memcpy(u + EMT_AMX_M * 64 + 4 * m, &xq[b].d, 4);
        memcpy(u + EMT_AMX_M * 64 + 64 + 4 * m, &xq[b].bias8[0], 4);
        for (int p = pad; p < EMT_AMX_M; p++) { /* the unused rows: zero codes, scales and biases */
            memset(u + 64 * p, 0, 64);
            memset(u + EMT_AMX_M * 64 + 4 * p, 0, 4);
            memset(u + EMT_AMX_M * 64 + 64 + 4 * p, 0, 4);
        }
    }
}

/* A packed Q4_0 block's codes (128 bytes) as a B tile (256 bytes): rows 0-3
 * the low nibbles (codes 0..15), rows 4-7 the high ones (codes 16..31). */
static inline void amx_unpack_q4_0(const uint8_t *codes, uint8_t *bq) {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512i c01 = _mm512_loadu_si512((const void *)codes), c23 = _mm512_loadu_si512((const void *)(codes + 64));
    _mm512_store_si512((void *)bq, _mm512_and_si512(c01, nib));
    _mm512_store_si512((void *)(bq + 64), _mm512_and_si512(c23, nib));
    _mm512_store_si512((void *)(bq + 128), _mm512_and_si512(_mm512_srli_epi16(c01, 4), nib));
    _mm512_store_si512((void *)(bq + 192), _mm512_and_si512(_mm512_srli_epi16(c23, 4), nib));
}

/* Block b's float steps for P row pairs and 1 + two groups, from its
 * integer sums in cs (C tiles: high, low per group). */
static inline __attribute__((always_inline)) void
amx_block_steps(emt_dtype t, const uint8_t *const gs[2], int two, const uint8_t *u,
                const int32_t (*cs)[EMT_AMX_M * EMT_PACK_ROWS], int P, __m512 acc[2][EMT_AMX_M / 2]) {
    const __m512 dx = _mm512_loadu_ps((const float *)(u + EMT_AMX_M * 64));
    const __m512i bias = _mm512_loadu_si512((const void *)(u + EMT_AMX_M * 64 + 64));
    __m512 dw[2];
    for (int k = 0; k < 1 + two; k++) {
        __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gs[k]));
        dw[k] = _mm512_insertf32x8(_mm512_castps256_ps512(d8), d8, 1); /* the 8 outputs, for two rows */
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) {
        const __m512i pair = _mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                              2 * p + 1, 2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p,
                                              2 * p);
        const __m512 dxp = _mm512_permutexvar_ps(pair, dx);
        const __m512i bp = t == EMT_Q4_0 ? _mm512_permutexvar_epi32(pair, bias) : _mm512_setzero_si512();
        for (int k = 0; k < 1 + two; k++) {
            __m512i hi = _mm512_load_si512((const void *)(cs[2 * k] + 16 * p));
            __m512i lo = _mm512_load_si512((const void *)(cs[2 * k + 1] + 16 * p));
            __m512i isum = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo), bp);
            acc[k][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[k], dxp), _mm512_cvtepi32_ps(isum), acc[k][p]);
        }
    }
}

/* One row tile (m rows, P = (m + 1) / 2 row pairs) x the 8 outputs of
 * group g0 and, when two, of the group after it: out[k][r * 8 + c].
 * Software-pipelined: block b's tile products run while block b - 1's
 * float steps read the sums stored the iteration before, and Q4_0's next B
 * tiles are unpacked an iteration ahead, so no load waits on a store that
 * has just been issued (measured here: zero + multiply + tile store about
 * 21 cycles, a tile load of just-stored vector bytes about 40 against 8). */
static inline __attribute__((always_inline)) void
amx_rows(emt_dtype t, const uint8_t *g0, size_t group_bytes, int two, const uint8_t *units, int32_t nb, int P,
         int prefetch, float out[2][EMT_AMX_M * EMT_PACK_ROWS]) {
    const size_t gb = EMT_PACK_ROWS * emt_qblock_bytes(t);
    const uint8_t *gs[2] = { g0, g0 + group_bytes };
    __attribute__((aligned(64))) int32_t csum[2][4][EMT_AMX_M * EMT_PACK_ROWS]; /* by block parity */
    __attribute__((aligned(64))) uint8_t bq[2][2][256];                          /* by block parity, group */
    __m512 acc[2][EMT_AMX_M / 2];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) acc[0][p] = acc[1][p] = _mm512_setzero_ps();
    if (t == EMT_Q4_0)
        for (int k = 0; k < 1 + two; k++) amx_unpack_q4_0(gs[k] + 2 * EMT_PACK_ROWS, bq[0][k]);
    EMT_AMX_FENCE();
    for (int32_t b = 0; b < nb; b++) {
        const uint8_t *u = units + (size_t)b * EMT_AMX_UNIT;
        const int par = b & 1;
        _tile_loadd(0, u, 64);      /* high bytes */
        _tile_loadd(1, u + 32, 64); /* low bytes */
        const uint8_t *b0 = gs[0] + (size_t)b * gb, *b1 = gs[1] + (size_t)b * gb;
        if (prefetch) {
            prefetch_ahead(b0, gb);
            if (two) prefetch_ahead(b1, gb);
        }
/* group k's block (at blk) into B tile tb, its high and low sums into C
 * tiles th, tl; then stored, the second group's multiplies first so the
 * tile unit (in order) does not wait for the first's sums at once; tile
 * numbers must be constants, hence macros */
#define EMT_AMX_MUL(k, blk, tb, th, tl)                                        \
    do {                                                                       \
        if (t == EMT_Q8_0) _tile_loadd(tb, (blk) + 2 * EMT_PACK_ROWS, 32);     \
        else _tile_loadd(tb, bq[par][k], 32);                                  \
        _tile_zero(th);                                                        \
        _tile_zero(tl);                                                        \
        _tile_dpbssd(th, 0, tb);                                               \
        _tile_dpbusd(tl, 1, tb);                                               \
    } while (0)
#define EMT_AMX_STORE(k, th, tl)                                               \
    do {                                                                       \
        _tile_stored(th, csum[par][2 * (k)], 32);                              \
        _tile_stored(tl, csum[par][2 * (k) + 1], 32);                          \
    } while (0)
        EMT_AMX_MUL(0, b0, 2, 4, 5);
        if (two) EMT_AMX_MUL(1, b1, 3, 6, 7);
        EMT_AMX_STORE(0, 4, 5);
        if (two) EMT_AMX_STORE(1, 6, 7);
#undef EMT_AMX_MUL
#undef EMT_AMX_STORE
        if (t == EMT_Q4_0 && b + 1 < nb)
            for (int k = 0; k < 1 + two; k++) amx_unpack_q4_0(gs[k] + (size_t)(b + 1) * gb + 2 * EMT_PACK_ROWS, bq[!par][k]);
        EMT_AMX_FENCE();
        if (b > 0) {
            const uint8_t *prev[2] = { b0 - gb, b1 - gb };
            amx_block_steps(t, prev, two, u - EMT_AMX_UNIT, (const int32_t (*)[EMT_AMX_M * EMT_PACK_ROWS])csum[!par], P, acc);
        }
    }
    {
        const uint8_t *last[2] = { gs[0] + (size_t)(nb - 1) * gb, gs[1] + (size_t)(nb - 1) * gb };
        amx_block_steps(t, last, two, units + (size_t)(nb - 1) * EMT_AMX_UNIT,
                        (const int32_t (*)[EMT_AMX_M * EMT_PACK_ROWS])csum[(nb - 1) & 1], P, acc);
    }
    const __m512 zero = _mm512_setzero_ps(); /* the reference's acc + acc_min, acc_min = +0 */
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
        for (int k = 0; k < 1 + two; k++) _mm512_storeu_ps(out[k] + 16 * p, _mm512_add_ps(acc[k][p], zero));
}

/* Outputs [o0, o1) of a packed Q4_0 / Q8_0 matrix for every row: row tiles
 * of up to 16 x two groups' 16 outputs, rows in blocks of EMT_ROW_BLOCK. */
static inline __attribute__((always_inline)) void
amx_range(const qmatmul_job *j, emt_dtype t, int32_t o0, int32_t o1) {
    const int32_t nb = j->n_in / EMT_QK;
    const size_t group_bytes = EMT_PACK_ROWS * j->row_bytes;
    float v[2][EMT_AMX_M * EMT_PACK_ROWS];
    int configured = 0;
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += EMT_ROW_BLOCK) {
        int32_t rb1 = rb0 + EMT_ROW_BLOCK < j->n_rows ? rb0 + EMT_ROW_BLOCK : j->n_rows;
        for (int32_t o = o0; o < o1; o += 2 * EMT_PACK_ROWS) {
            const uint8_t *g = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            const int two = o + EMT_PACK_ROWS < o1;
            for (int32_t r0 = rb0; r0 < rb1; r0 += EMT_AMX_M) {
                const int m = rb1 - r0 < EMT_AMX_M ? rb1 - r0 : EMT_AMX_M;
                if (m != configured) amx_configure(configured = m);
                const uint8_t *units = j->amx_x + (size_t)(r0 / EMT_AMX_M) * nb * EMT_AMX_UNIT;
                const int first = r0 == rb0;
                switch ((m + 1) / 2) { /* row pairs constant in each call: the accumulators stay in registers */
                case 1: amx_rows(t, g, group_bytes, two, units, nb, 1, first, v); break;
                case 2: amx_rows(t, g, group_bytes, two, units, nb, 2, first, v); break;
                case 3: amx_rows(t, g, group_bytes, two, units, nb, 3, first, v); break;
                case 4: amx_rows(t, g, group_bytes, two, units, nb, 4, first, v); break;
                case 5: amx_rows(t, g, group_bytes, two, units, nb, 5, first, v); break;
                case 6: amx_rows(t, g, group_bytes, two, units, nb, 6, first, v); break;
                case 7: amx_rows(t, g, group_bytes, two, units, nb, 7, first, v); break;
                default: amx_rows(t, g, group_bytes, two, units, nb, 8, first, v); break;
                }
                int nc = o1 - o < EMT_PACK_ROWS ? o1 - o : EMT_PACK_ROWS;
                store_tile(j, r0, m, o, nc, v[0], EMT_PACK_ROWS);
                if (two) {
                    nc = o1 - o - EMT_PACK_ROWS < EMT_PACK_ROWS ? o1 - o - EMT_PACK_ROWS : EMT_PACK_ROWS;
                    store_tile(j, r0, m, o + EMT_PACK_ROWS, nc, v[1], EMT_PACK_ROWS);
                }
            }
        }
    }
    if (configured) _tile_release();
    emt_cpu_amx_tile_range_done();
}
#endif

#ifdef EMT_CPU_AMX_TILES
/* The 8-bit prompt mode's tile products (quant8.h; the amx variant): a
 * product of EMT_AMX8_MIN_ROWS or more 8-bit rows (prompts) with a packed
 * Q4_0 or Q8_0 matrix,
 * equal bit for bit to emt_dot8_ref and so to the VNNI kernels. The codes
 * are 8-bit on both sides, so one signed tile multiply per block gives the
 * exact integer sums of 16 rows x 16 outputs (two packed groups: quant8.h
 * keeps one sum per output for these types, so each tile column is one
 * output). A block costs its tile instructions plus its float steps (per
 * row one conversion, one multiply and one FMA over the 16 outputs, where
 * the VNNI kernel spends 8 vpdpbusd and two such steps for 8 outputs each):
 * on the Xeon measured the two do not overlap (one 512-bit FMA port, shared
 * with the tile unit), so the float steps per output and block are what the
 * tiles cost, and below EMT_AMX8_MIN_ROWS rows the tiles lose to VNNI
 * (docs/performance.md).
 *
 * A tiles come from the rows split by amx8_split_row: per (row tile,
 * block) the 16 rows' 32 codes, contiguous, then their scales d. A group
 * pair's B tiles are built EMT_AMX8_CHUNK blocks at a time and serve every row
 * tile of a row block (EMT_AMX8_ROW_BLOCK rows); a row tile's 16 float sums
 * stay in registers across the chunk. Tiles 0-1 A, 2-3 B, 4-5 C, by block
 * parity, so each block's multiply runs while the previous block's sums
 * take their float steps. */
#define EMT_AMX8_ROW_BLOCK 128
#define EMT_AMX8_CHUNK 32 /* blocks: 16 KiB of B tiles */
#define EMT_AMX8_UNIT (EMT_AMX_M * 32 + 2 * EMT_AMX_M * 4) /* 16 rows' codes, then their d[16], then s[16] */
#define EMT_AMX8_MIN_ROWS 48 /* fewer rows keep the VNNI kernels: faster there (docs/performance.md) */

/* A tiles of 16 rows x 32 bytes, B tiles of 8 x 64, C tiles of 16 x 64
 * (Q6_K: A 16 x 16, B 4 x 64, one product per 16-value half) */
static void amx8_configure(emt_dtype type) {
    const int half = type == EMT_Q6_K; /* Q6_K: a product per 16-value half, A 16 x 16, B 4 x 64 */
    emt_amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 6; t++) {
        c.colsb[t] = (uint16_t)(t < 2 ? (half ? 16 : 32) : 64);
        c.rows[t] = (uint8_t)(t == 2 || t == 3 ? (half ? 4 : 8) : EMT_AMX_M);
    }
    amx_load_config(&c);
}

/* Row r's 8-bit blocks (nb) into the split layout; the rows of a last,
 * partial row tile beyond n_rows are zeroed by that tile's first row. */
static void amx8_split_row(const emt_xq8 *xq, int32_t nb, int32_t r, int32_t n_rows, uint8_t *base) {
    const int32_t rt = r / EMT_AMX_M, m = r % EMT_AMX_M;
    const int pad = m == 0 && n_rows - r < EMT_AMX_M ? n_rows - r : EMT_AMX_M;
    for (int32_t b = 0; b < nb; b++) {
        uint8_t *u = base + ((size_t)rt * nb + b) * EMT_AMX8_UNIT;
        memcpy(u + 32 * m, xq[b].q, 32);
        memcpy(u + EMT_AMX_M * 32 + 4 * m, &xq[b].d, 4);
        memcpy(u + EMT_AMX_M * 36 + 4 * m, &xq[b].s, 4);
        for (int p = pad; p < EMT_AMX_M; p++) {
            memset(u + 32 * p, 0, 32);
            memset(u + EMT_AMX_M * 32 + 4 * p, 0, 4);
            memset(u + EMT_AMX_M * 36 + 4 * p, 0, 4);
        }
    }
}

/* Quad rows 2i, 2i + 1 of block b of a packed Q4_0 / Q8_0 group g (blocks
 * of gb bytes) in v[i] (bytes 0-31, 32-63: 8 outputs x 4 codes each), with
 * quant8.h's signed codes (Q4_0: nibble - 8); zero without a group. */
static inline __attribute__((always_inline)) void amx8_quads(emt_dtype t, const uint8_t *g, size_t gb, int32_t b,
                                                             __m512i v[4]) {
    if (!g) {
        v[0] = v[1] = v[2] = v[3] = _mm512_setzero_si512();
        return;
    }
    const uint8_t *codes = g + (size_t)b * gb + emt_qblock_head(t) * EMT_PACK_ROWS;
    if (t == EMT_Q8_0) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) v[i] = _mm512_loadu_si512((const void *)(codes + 64 * i));
    } else { /* rows 0-3: the low nibbles (codes 0..15), rows 4-7 the high ones */
        const __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
        __m512i c01 = _mm512_loadu_si512((const void *)codes), c23 = _mm512_loadu_si512((const void *)(codes + 64));
        v[0] = _mm512_sub_epi8(_mm512_and_si512(c01, nib), eight);
        v[1] = _mm512_sub_epi8(_mm512_and_si512(c23, nib), eight);
        v[2] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(c01, 4), nib), eight);
        v[3] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(c23, 4), nib), eight);
    }
}

/* Block b of two packed Q4_0 / Q8_0 groups g0, g1 (g1 NULL: none) as one
 * B tile (512 bytes at bt): row k holds the code quad k of g0's 8 outputs
 * (bytes 0-31) then of g1's (32-63), so C's column c is output c of the
 * 16. Returns the 16 outputs' weight scales (zero without g1). */
static inline __attribute__((always_inline)) __m512 amx8_block(emt_dtype t, const uint8_t *g0, const uint8_t *g1,
                                                                size_t gb, int32_t b, uint8_t *bt) {
    __m512i v0[4], v1[4];
    amx8_quads(t, g0, gb, b, v0);
    amx8_quads(t, g1, gb, b, v1);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* 128-bit lanes 0-1 of each (row 2i), then 2-3 (row 2i + 1) */
        _mm512_store_si512((void *)(bt + 128 * i), _mm512_shuffle_i64x2(v0[i], v1[i], 0x44));
        _mm512_store_si512((void *)(bt + 128 * i + 64), _mm512_shuffle_i64x2(v0[i], v1[i], 0xEE));
    }
    __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g0 + (size_t)b * gb)));
    __m256 d1 = g1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g1 + (size_t)b * gb))) : _mm256_setzero_ps();
    return _mm512_insertf32x8(_mm512_castps256_ps512(d0), d1, 1);
}

/* Q4_K: sub-block s of packed super-blocks s0, s1 (s1 NULL: none) as the
 * B tile's 8 rows at bt (amx8_kblock's layout). */
static inline __attribute__((always_inline)) void amx8_k4rows(const uint8_t *s0, const uint8_t *s1, int s, uint8_t *bt) {
    const __m512i rows01 = _mm512_set_epi32(29, 25, 21, 17, 13, 9, 5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
    const __m512i rows23 = _mm512_set_epi32(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2);
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512i p0[2], p1[2] = { _mm512_setzero_si512(), _mm512_setzero_si512() };
    {
        const __m512i a = _mm512_loadu_si512((const void *)(s0 + EMT_PK4_QS + 128 * s));
        const __m512i c = _mm512_loadu_si512((const void *)(s0 + EMT_PK4_QS + 128 * s + 64));
        p0[0] = _mm512_permutex2var_epi32(a, rows01, c);
        p0[1] = _mm512_permutex2var_epi32(a, rows23, c);
    }
    if (s1) {
        const __m512i a = _mm512_loadu_si512((const void *)(s1 + EMT_PK4_QS + 128 * s));
        const __m512i c = _mm512_loadu_si512((const void *)(s1 + EMT_PK4_QS + 128 * s + 64));
        p1[0] = _mm512_permutex2var_epi32(a, rows01, c);
        p1[1] = _mm512_permutex2var_epi32(a, rows23, c);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) { /* bytes of rows 2i (256-bit lanes 0 of p0, p1) and 2i + 1 (lanes 1) */
        const __m512i r0 = _mm512_shuffle_i64x2(p0[i], p1[i], 0x44), r1 = _mm512_shuffle_i64x2(p0[i], p1[i], 0xEE);
        _mm512_store_si512((void *)(bt + 64 * (2 * i)), _mm512_and_si512(r0, nib));
        _mm512_store_si512((void *)(bt + 64 * (2 * i + 1)), _mm512_and_si512(r1, nib));
        _mm512_store_si512((void *)(bt + 64 * (2 * i + 4)), _mm512_and_si512(_mm512_srli_epi16(r0, 4), nib));
        _mm512_store_si512((void *)(bt + 64 * (2 * i + 5)), _mm512_and_si512(_mm512_srli_epi16(r1, 4), nib));
    }
}

/* Sub-block b % 8 of super-block b / 8 of two packed Q4_K / Q5_K groups
 * g0, g1 (g1 NULL: none; super-blocks of gb bytes) as one B tile of
 * unsigned codes 0..15 (Q5_K: 0..31; row k: codes 4k..4k+3 of the 16
 * outputs), with the 16
 * outputs' d * sc (returned) and minimums -(dmin * m) (*mw) from kmin0/1
 * (packed_kmins of the two super-blocks). A packed sub-block holds per
 * output 16 bytes, byte j = code j | code 16 + j << 4: row k < 4 gathers
 * dword k of each output (low nibbles), row 4 + k the same bytes' high
 * nibbles. */
static inline __attribute__((always_inline)) __m512 amx8_kblock(emt_dtype t, const uint8_t *g0, const uint8_t *g1,
                                                                 size_t gb, int32_t b, const __m512 kmin0[4],
                                                                 const __m512 kmin1[4], uint8_t *bt, __m512 *mw) {
    const int s = b % 8;
    const uint8_t *s0 = g0 + (size_t)(b / 8) * gb, *s1 = g1 ? g1 + (size_t)(b / 8) * gb : NULL;
    if (t == EMT_Q5_K) { /* codes 0..31: packed8_rows' code vectors (fifth bits added), then rows by dword */
        __m512i v[2][4];
        for (int gi = 0; gi < 2; gi++) {
            const uint8_t *sb = gi ? s1 : s0;
            if (!sb) {
                v[gi][0] = v[gi][1] = v[gi][2] = v[gi][3] = _mm512_setzero_si512();
                continue;
            }
            const __m512i nib = _mm512_set1_epi8(0x0F);
            __m512i h[2];
            __mmask64 fifth[4];
            gather_halves(sb + EMT_PK4_QS + 128 * s, h);
            fifth_bit_masks(sb + EMT_PK5_QH + 32 * s, fifth);
            v[gi][0] = _mm512_and_si512(h[0], nib);
            v[gi][1] = _mm512_and_si512(h[1], nib);
            v[gi][2] = _mm512_and_si512(_mm512_srli_epi16(h[0], 4), nib);
            v[gi][3] = _mm512_and_si512(_mm512_srli_epi16(h[1], 4), nib);
            for (int k = 0; k < 4; k++) v[gi][k] = _mm512_mask_add_epi8(v[gi][k], fifth[k], v[gi][k], _mm512_set1_epi8(16));
        }
        /* v[k]: codes 8k..8k+7 of each output, a qword per output: row 2k = its low dwords, 2k + 1 the high */
        const __m512i lo = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i hi = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            _mm512_store_si512((void *)(bt + 64 * (2 * k)), _mm512_permutex2var_epi32(v[0][k], lo, v[1][k]));
            _mm512_store_si512((void *)(bt + 64 * (2 * k + 1)), _mm512_permutex2var_epi32(v[0][k], hi, v[1][k]));
        }
    } else {
        amx8_k4rows(s0, s1, s, bt);
    }
    const __m256i six = _mm256_set1_epi32(63);
    long long q0, q1 = 0;
    memcpy(&q0, s0 + EMT_PK4_SCM + 8 * s, sizeof q0);
    if (s1) memcpy(&q1, s1 + EMT_PK4_SCM + 8 * s, sizeof q1);
    const __m256 sc0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)s0)),
                                     _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q0)), six)));
    const __m256 sc1 = s1 ? _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)s1)),
                                          _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q1)), six)))
                          : _mm256_setzero_ps();
    *mw = _mm512_insertf32x8(_mm512_castps256_ps512(kmins_of(kmin0, s)), s1 ? kmins_of(kmin1, s) : _mm256_setzero_ps(), 1);
    return _mm512_insertf32x8(_mm512_castps256_ps512(sc0), sc1, 1);
}

/* Sub-block b % 8 of super-block b / 8 of two packed Q6_K groups g0, g1
 * (g1 NULL: none) as two B tiles of signed codes q - 32 (bt: half 0, codes
 * 0..15, rows k: codes 4k..4k+3 of the 16 outputs; bt + 256: half 1), with
 * the 16 outputs' d * scale of each half (dh[0], dh[1]). A packed
 * sub-block holds per output 16 bytes of low bits (byte j: code j's 4 low
 * bits | code 16 + j's << 4) and, in its pair's qh bytes, the 2 top bits
 * (q6_bytes2_avx2's order): dword k of each output gives rows k of both
 * halves. */
static inline __attribute__((always_inline)) void amx8_q6block(const uint8_t *g0, const uint8_t *g1, size_t gb,
                                                               int32_t b, uint8_t *bt, __m512 dh[2]) {
    const int s = b % 8;
    const uint8_t *sb[2] = { g0 + (size_t)(b / 8) * gb, g1 ? g1 + (size_t)(b / 8) * gb : NULL };
    const __m512i rows01 = _mm512_set_epi32(29, 25, 21, 17, 13, 9, 5, 1, 28, 24, 20, 16, 12, 8, 4, 0);
    const __m512i rows23 = _mm512_set_epi32(31, 27, 23, 19, 15, 11, 7, 3, 30, 26, 22, 18, 14, 10, 6, 2);
    __m512i ql[2][2], qh[2][2]; /* [group][dword pair] */
    for (int gi = 0; gi < 2; gi++) {
        if (!sb[gi]) {
            ql[gi][0] = ql[gi][1] = qh[gi][0] = qh[gi][1] = _mm512_setzero_si512();
            continue;
        }
        const uint8_t *l = sb[gi] + EMT_PK6_QL + 128 * s, *h = sb[gi] + EMT_PK6_QH + 128 * (s / 2);
        const __m128i sh = _mm_cvtsi32_si128(4 * (s % 2));
        const __m512i la = _mm512_loadu_si512((const void *)l), lc = _mm512_loadu_si512((const void *)(l + 64));
        const __m512i ha = _mm512_srl_epi16(_mm512_loadu_si512((const void *)h), sh);
        const __m512i hc = _mm512_srl_epi16(_mm512_loadu_si512((const void *)(h + 64)), sh);
        ql[gi][0] = _mm512_permutex2var_epi32(la, rows01, lc);
        ql[gi][1] = _mm512_permutex2var_epi32(la, rows23, lc);
        qh[gi][0] = _mm512_permutex2var_epi32(ha, rows01, hc);
        qh[gi][1] = _mm512_permutex2var_epi32(ha, rows23, hc);
    }
    const __m512i nib = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) { /* row k = 2i + e: 256-bit lane e of each group's registers */
            const int k = 2 * i + e; /* the shuffles' selectors must be literals (-O0 builds) */
            const __m512i l = e ? _mm512_shuffle_i64x2(ql[0][i], ql[1][i], 0xEE) : _mm512_shuffle_i64x2(ql[0][i], ql[1][i], 0x44);
            const __m512i h = e ? _mm512_shuffle_i64x2(qh[0][i], qh[1][i], 0xEE) : _mm512_shuffle_i64x2(qh[0][i], qh[1][i], 0x44);
            const __m512i c0 = _mm512_or_si512(_mm512_and_si512(l, nib), _mm512_and_si512(_mm512_slli_epi16(h, 4), top));
            const __m512i c1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), nib),
                                               _mm512_and_si512(_mm512_slli_epi16(h, 2), top));
            _mm512_store_si512((void *)(bt + 64 * k), _mm512_sub_epi8(c0, off));
            _mm512_store_si512((void *)(bt + 256 + 64 * k), _mm512_sub_epi8(c1, off));
        }
    const __m128i pick[2] = { _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1),
                              _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1) };
    for (int h = 0; h < 2; h++) {
        __m256 v[2];
        for (int gi = 0; gi < 2; gi++) {
            if (!sb[gi]) {
                v[gi] = _mm256_setzero_ps();
                continue;
            }
            const __m128i sc = _mm_loadu_si128((const __m128i *)(sb[gi] + EMT_PK6_SC + 16 * s));
            v[gi] = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb[gi])),
                                  _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, pick[h]))));
        }
        dh[h] = _mm512_insertf32x8(_mm512_castps256_ps512(v[0]), v[1], 1);
    }
}

/* One block's float steps for a row tile, from its sums cs (16 rows x 16
 * outputs) and the rows' scales dx: emt_block8_accumulate for 16 outputs
 * at once. */
static inline __attribute__((always_inline)) void
amx8_block_steps(const int32_t *cs, const float *dx, __m512 dw, __m512 acc[EMT_AMX_M]) {
#pragma GCC unroll 16
    for (int r = 0; r < EMT_AMX_M; r++)
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx[r])),
                                 _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cs + 16 * r))), acc[r]);
}

/* A row tile's sums over nbc blocks (B tiles bt, scale vectors dw; A units
 * from u) added to acc; Q6_K takes each block as two steps, its 16-value
 * halves (A: the units' 16 bytes of the half, B: 256 bytes each, dw per
 * half). The tile unit runs its instructions in order and a multiply's
 * sums take about 50 cycles to be ready for the store, so step i + 1's
 * multiply is issued before step i's sums are stored, and step i - 1's
 * float steps read sums stored an iteration ago. */
static inline __attribute__((always_inline)) void
amx8_tile_blocks(emt_dtype t, const uint8_t *bt, const __m512 *dw, const uint8_t *u, const uint8_t *u_next, int32_t nbc,
                 __m512 acc[EMT_AMX_M]) {
    __attribute__((aligned(64))) int32_t cs[2][16 * 16]; /* by step parity */
    const int halves = t == EMT_Q6_K ? 2 : 1;
    const int32_t steps = nbc * halves;
/* step i's multiply into C tile tc (A, B tiles ta, tb); tile numbers must be constants, hence macros */
#define EMT_AMX8_MUL(i, ta, tb, tc)                                                                   \
    do {                                                                                              \
        _tile_loadd(ta, u + (size_t)((i) / halves) * EMT_AMX8_UNIT + 16 * ((i) % halves), 32);        \
        _tile_loadd(tb, bt + (512 / halves) * (size_t)(i), 64);                                       \
        _tile_zero(tc);                                                                               \
        if (t == EMT_Q4_K || t == EMT_Q5_K) _tile_dpbsud(tc, ta, tb);                                 \
        else _tile_dpbssd(tc, ta, tb);                                                                \
    } while (0)
#define EMT_AMX8_DX(i) ((const float *)(u + (size_t)((i) / halves) * EMT_AMX8_UNIT + EMT_AMX_M * 32))
    EMT_AMX8_MUL(0, 0, 2, 4);
    for (int32_t i = 0; i < steps; i++) {
        /* the A units come from L2 (a row block's rows pass once per group pair): ask for block b + 3's
         * now, the next row tile's first ones near the end */
        if (i % halves == 0) {
            const int32_t b = i / halves;
            const uint8_t *ahead = b + 3 < nbc ? u + (size_t)(b + 3) * EMT_AMX8_UNIT : u_next + (size_t)(b + 3 - nbc) * EMT_AMX8_UNIT;
            for (int l = 0; l < EMT_AMX8_UNIT / 64; l++) _mm_prefetch((const char *)(ahead + 64 * l), _MM_HINT_T0);
        }
        if (i & 1) {
            if (i + 1 < steps) EMT_AMX8_MUL(i + 1, 0, 2, 4);
            _tile_stored(5, cs[1], 64);
        } else {
            if (i + 1 < steps) EMT_AMX8_MUL(i + 1, 1, 3, 5);
            _tile_stored(4, cs[0], 64);
        }
        EMT_AMX_FENCE();
        if (i > 0) amx8_block_steps(cs[(i - 1) & 1], EMT_AMX8_DX(i - 1), dw[i - 1], acc);
    }
    amx8_block_steps(cs[(steps - 1) & 1], EMT_AMX8_DX(steps - 1), dw[steps - 1], acc);
#undef EMT_AMX8_MUL
#undef EMT_AMX8_DX
}

/* Row tile rows' minimum sums over a chunk's nbc blocks (Q4_K): mins[r] +=
 * mw[b] * s of row r, block by block (quant8.h's second sum; the first
 * sums' steps are independent of it, so it runs after them). */
static inline __attribute__((always_inline)) void amx8_tile_mins(const __m512 *mw, const uint8_t *u, int32_t nbc,
                                                                 float mins[EMT_AMX_M][16]) {
#pragma GCC unroll 2
    for (int r = 0; r < EMT_AMX_M; r++) {
        __m512 m = _mm512_load_ps(mins[r]);
        for (int32_t b = 0; b < nbc; b++)
            m = _mm512_fmadd_ps(mw[b], _mm512_set1_ps(((const float *)(u + (size_t)b * EMT_AMX8_UNIT + EMT_AMX_M * 36))[r]), m);
        _mm512_store_ps(mins[r], m);
    }
}

/* Outputs [o0, o1) of a packed Q4_0 / Q8_0 / Q4_K / Q6_K matrix for every
 * 8-bit row, two groups (16 outputs) at a time. */
static inline __attribute__((always_inline)) void
amx8_range(const qmatmul_job *j, emt_dtype t, int32_t o0, int32_t o1) {
    const int32_t nb = j->n_in / EMT_QK;
    const int kq = t == EMT_Q4_K || t == EMT_Q5_K, q6 = t == EMT_Q6_K;
    /* bytes per block of a group (the K-quants: per super-block of 8 blocks) */
    const size_t gb = EMT_PACK_ROWS * (kq || q6 ? emt_dtype_block_bytes(t) : emt_qblock_bytes(t));
    __attribute__((aligned(64))) uint8_t bt[EMT_AMX8_CHUNK * 512];
    __m512 dw[2 * EMT_AMX8_CHUNK], mw[EMT_AMX8_CHUNK], kmin0[4], kmin1[4]; /* dw: per step (Q6_K: half) */
    __attribute__((aligned(64))) float saved[EMT_AMX8_ROW_BLOCK][16]; /* row tiles' sums between chunks */
    __attribute__((aligned(64))) float mins[EMT_AMX8_ROW_BLOCK][16];  /* Q4_K: their minimum sums */
    amx8_configure(t);
    for (int32_t rb0 = 0; rb0 < j->n_rows; rb0 += EMT_AMX8_ROW_BLOCK) {
        const int32_t rb1 = rb0 + EMT_AMX8_ROW_BLOCK < j->n_rows ? rb0 + EMT_AMX8_ROW_BLOCK : j->n_rows;
        const int32_t tiles = (rb1 - rb0 + EMT_AMX_M - 1) / EMT_AMX_M;
        const uint8_t *units = j->amx8_x + (size_t)(rb0 / EMT_AMX_M) * nb * EMT_AMX8_UNIT;
        for (int32_t o = o0; o < o1; o += 2 * EMT_PACK_ROWS) {
            const uint8_t *g0 = (const uint8_t *)j->W->data + (size_t)o * j->row_bytes;
            const int nc = o1 - o < 2 * EMT_PACK_ROWS ? o1 - o : 2 * EMT_PACK_ROWS;
            const uint8_t *g1 = nc > EMT_PACK_ROWS ? g0 + (size_t)EMT_PACK_ROWS * j->row_bytes : NULL;
            if (kq) memset(mins, 0, sizeof(float) * 16 * (size_t)tiles * EMT_AMX_M);
            for (int32_t c0 = 0; c0 < nb; c0 += EMT_AMX8_CHUNK) {
                const int32_t nbc = nb - c0 < EMT_AMX8_CHUNK ? nb - c0 : EMT_AMX8_CHUNK;
                for (int32_t b = 0; b < nbc; b++) {
                    const int32_t at = c0 + b;
                    if (!kq && !q6) {
                        if (rb0 == 0) {
                            prefetch_ahead(g0 + (size_t)at * gb, gb);
                            if (g1) prefetch_ahead(g1 + (size_t)at * gb, gb);
                        }
                        dw[b] = amx8_block(t, g0, g1, gb, at, bt + 512 * b);
                        continue;
                    }
                    if (at % 8 == 0 && rb0 == 0) { /* the weights ahead, a super-block at a time */
                        prefetch_ahead(g0 + (size_t)(at / 8) * gb, gb);
                        if (g1) prefetch_ahead(g1 + (size_t)(at / 8) * gb, gb);
                    }
                    if (q6) {
                        amx8_q6block(g0, g1, gb, at, bt + 512 * b, dw + 2 * b);
                        continue;
                    }
                    if (at % 8 == 0) { /* a super-block's minimums */
                        packed_kmins(g0 + (size_t)(at / 8) * gb, kmin0);
                        if (g1) packed_kmins(g1 + (size_t)(at / 8) * gb, kmin1);
                    }
                    dw[b] = amx8_kblock(t, g0, g1, gb, at, kmin0, kmin1, bt + 512 * b, &mw[b]);
                }
                EMT_AMX_FENCE();
                for (int32_t rt = 0; rt < tiles; rt++) {
                    const uint8_t *u = units + ((size_t)rt * nb + c0) * EMT_AMX8_UNIT;
                    /* the next row tile's units, or the first row tile's (the next groups' pass) */
                    const uint8_t *u_next = rt + 1 < tiles ? u + (size_t)nb * EMT_AMX8_UNIT : units + (size_t)c0 * EMT_AMX8_UNIT;
                    __m512 acc[EMT_AMX_M];
#pragma GCC unroll 16
                    for (int r = 0; r < EMT_AMX_M; r++) acc[r] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(saved[rt * EMT_AMX_M + r]);
                    amx8_tile_blocks(t, bt, dw, u, u_next, nbc, acc);
                    if (kq) amx8_tile_mins(mw, u, nbc, mins + rt * EMT_AMX_M);
                    if (c0 + nbc < nb) {
#pragma GCC unroll 16
                        for (int r = 0; r < EMT_AMX_M; r++) _mm512_store_ps(saved[rt * EMT_AMX_M + r], acc[r]);
                        continue;
                    }
                    /* output = sum + the minimum sum (zero for Q4_0 / Q8_0: quant8.h), then the bias (store_tile) */
                    const int32_t r0 = rb0 + rt * EMT_AMX_M, nr = rb1 - r0 < EMT_AMX_M ? rb1 - r0 : EMT_AMX_M;
                    __attribute__((aligned(64))) float v[EMT_AMX_M * 16];
#pragma GCC unroll 16
                    for (int r = 0; r < EMT_AMX_M; r++)
                        _mm512_store_ps(v + 16 * r, _mm512_add_ps(acc[r], kq ? _mm512_load_ps(mins[rt * EMT_AMX_M + r]) : _mm512_setzero_ps()));
                    store_tile(j, r0, nr, o, nc, v, 16);
                }
            }
        }
    }
    _tile_release();
    emt_cpu_amx_tile_range_done();
}
#endif

#ifdef EMT_CPU_AMX_TILES
EMT_RANGE_FN(amx_q4_0_16, amx_range(j, EMT_Q4_0, o0, o1))
EMT_RANGE_FN(amx_q8_0_16, amx_range(j, EMT_Q8_0, o0, o1))
EMT_RANGE_FN(amx_q4_0_8, amx8_range(j, EMT_Q4_0, o0, o1))
EMT_RANGE_FN(amx_q8_0_8, amx8_range(j, EMT_Q8_0, o0, o1))
EMT_RANGE_FN(amx_q4_k_8, amx8_range(j, EMT_Q4_K, o0, o1))
EMT_RANGE_FN(amx_q5_k_8, amx8_range(j, EMT_Q5_K, o0, o1))
EMT_RANGE_FN(amx_q6_k_8, amx8_range(j, EMT_Q6_K, o0, o1))
#endif

#ifdef EMT_CPU_PACKED
EMT_RANGE_FN(packed_q4_0_16, packed_range(j, EMT_Q4_0, o0, o1))
EMT_RANGE_FN(packed_q4_1_16, packed_range(j, EMT_Q4_1, o0, o1))
EMT_RANGE_FN(packed_q8_0_16, packed_range(j, EMT_Q8_0, o0, o1))
EMT_RANGE_FN(packed_q5_0_16, packed_range(j, EMT_Q5_0, o0, o1))
EMT_RANGE_FN(packed_q4_k_16, packed_range(j, EMT_Q4_K, o0, o1))
EMT_RANGE_FN(packed_q5_k_16, packed_range(j, EMT_Q5_K, o0, o1))
EMT_RANGE_FN(packed_q6_k_16, packed_range(j, EMT_Q6_K, o0, o1))
EMT_RANGE_FN(packed_q4_0_8, packed8_range(j, EMT_Q4_0, o0, o1))
EMT_RANGE_FN(packed_q4_1_8, packed8_range(j, EMT_Q4_1, o0, o1))
EMT_RANGE_FN(packed_q8_0_8, packed8_range(j, EMT_Q8_0, o0, o1))
EMT_RANGE_FN(packed_q5_0_8, packed8_range(j, EMT_Q5_0, o0, o1))
EMT_RANGE_FN(packed_q4_k_8, packed8_range(j, EMT_Q4_K, o0, o1))
EMT_RANGE_FN(packed_q5_k_8, packed8_range(j, EMT_Q5_K, o0, o1))
EMT_RANGE_FN(packed_q6_k_8, packed8_range(j, EMT_Q6_K, o0, o1))
#endif
#undef EMT_RANGE_FN

static void qmatmul_task(void *ctx, int32_t task) {
    const qmatmul_job *j = ctx;
    int32_t o0 = task * j->chunk;
    int32_t o1 = o0 + j->chunk < j->n_out ? o0 + j->chunk : j->n_out;
#ifdef EMT_CPU_PACKS_LANES
    if (j->W->packed) { /* 16- or 8-bit rows */
        const int b8 = j->xq8 != NULL;
        switch (j->W->dtype) {
        case EMT_Q4_0: (b8 ? lanes_q4_0_8 : lanes_q4_0_16)(j, o0, o1); return;
        case EMT_Q4_1: (b8 ? lanes_q4_1_8 : lanes_q4_1_16)(j, o0, o1); return;
        case EMT_Q4_K: (b8 ? lanes_q4_k_8 : lanes_q4_k_16)(j, o0, o1); return;
        case EMT_Q6_K: (b8 ? lanes_q6_k_8 : lanes_q6_k_16)(j, o0, o1); return;
        default: (b8 ? lanes_q8_0_8 : lanes_q8_0_16)(j, o0, o1); return;
        }
    }
#endif
#ifdef EMT_CPU_AMX_TILES
    if (j->W->packed && j->amx_x && !j->xq8 && (j->W->dtype == EMT_Q4_0 || j->W->dtype == EMT_Q8_0)) {
        (j->W->dtype == EMT_Q4_0 ? amx_q4_0_16 : amx_q8_0_16)(j, o0, o1);
        return;
    }
    if (j->W->packed && j->xq8 && j->amx8_x) {
        switch (j->W->dtype) {
        case EMT_Q4_0: amx_q4_0_8(j, o0, o1); return;
        case EMT_Q8_0: amx_q8_0_8(j, o0, o1); return;
        case EMT_Q4_K: amx_q4_k_8(j, o0, o1); return;
        case EMT_Q5_K: amx_q5_k_8(j, o0, o1); return;
        case EMT_Q6_K: amx_q6_k_8(j, o0, o1); return;
        default: break; /* the VNNI kernels below */
        }
    }
#endif
#ifdef EMT_CPU_PACKED
    if (j->W->packed) { /* 16- or 8-bit rows */
        const int b8 = j->xq8 != NULL;
        switch (j->W->dtype) {
        case EMT_Q4_0: (b8 ? packed_q4_0_8 : packed_q4_0_16)(j, o0, o1); return;
        case EMT_Q4_1: (b8 ? packed_q4_1_8 : packed_q4_1_16)(j, o0, o1); return;
        case EMT_Q5_0: (b8 ? packed_q5_0_8 : packed_q5_0_16)(j, o0, o1); return;
        case EMT_Q4_K: (b8 ? packed_q4_k_8 : packed_q4_k_16)(j, o0, o1); return;
        case EMT_Q5_K: (b8 ? packed_q5_k_8 : packed_q5_k_16)(j, o0, o1); return;
        case EMT_Q6_K: (b8 ? packed_q6_k_8 : packed_q6_k_16)(j, o0, o1); return;
        default: (b8 ? packed_q8_0_8 : packed_q8_0_16)(j, o0, o1); return;
        }
    }
#endif
    if (j->xq8) {
#ifdef __AVX2__
        switch (j->W->dtype) {
        case EMT_Q4_0: file8_range(j, EMT_Q4_0, o0, o1); return;
        case EMT_Q4_1: file8_range(j, EMT_Q4_1, o0, o1); return;
        case EMT_Q8_0: file8_range(j, EMT_Q8_0, o0, o1); return;
        case EMT_Q5_0: file8_range(j, EMT_Q5_0, o0, o1); return;
        case EMT_Q4_K: file8_range(j, EMT_Q4_K, o0, o1); return;
        case EMT_Q5_K: file8_range(j, EMT_Q5_K, o0, o1); return;
        default: file8_range(j, EMT_Q6_K, o0, o1); return;
        }
#else
        act8_ref_range(j, o0, o1);
        return;
#endif
    }
    switch (j->W->dtype) { /* one specialised loop per dtype */
#ifdef __AVX2__
    case EMT_Q4_0: qtile_range(j, EMT_Q4_0, o0, o1); break;
    case EMT_Q4_1: qtile_range(j, EMT_Q4_1, o0, o1); break;
    case EMT_Q8_0: qtile_range(j, EMT_Q8_0, o0, o1); break;
#else
    case EMT_Q4_0: qmatmul_range(j, EMT_Q4_0, o0, o1); break;
    case EMT_Q4_1: qmatmul_range(j, EMT_Q4_1, o0, o1); break;
    case EMT_Q8_0: qmatmul_range(j, EMT_Q8_0, o0, o1); break;
#endif
    case EMT_Q5_0: qmatmul_range(j, EMT_Q5_0, o0, o1); break;
    case EMT_Q5_1: qmatmul_range(j, EMT_Q5_1, o0, o1); break;
    case EMT_Q4_K: qmatmul_range(j, EMT_Q4_K, o0, o1); break;
    case EMT_Q5_K: qmatmul_range(j, EMT_Q5_K, o0, o1); break;
    case EMT_Q6_K: qmatmul_range(j, EMT_Q6_K, o0, o1); break;
    case EMT_F16: qmatmul_range(j, EMT_F16, o0, o1); break;
    default: qmatmul_range(j, EMT_BF16, o0, o1); break;
    }
}

typedef struct quantize_job {
    const float *x;
    emt_xq *xq;
    int32_t n_in, span, n_rows;
    uint8_t *amx_x; /* amx variant: also split each row for the tile products */
} quantize_job;

static void quantize_task(void *ctx, int32_t r) {
    const quantize_job *j = ctx;
    quantize_row(j->x + (size_t)r * j->n_in, j->n_in, j->span, j->xq + (size_t)r * (j->n_in / EMT_QK));
#ifdef EMT_CPU_AMX_TILES
    if (j->amx_x) amx_split_row(j->xq + (size_t)r * (j->n_in / EMT_QK), j->n_in / EMT_QK, r, j->n_rows, j->amx_x);
#endif
}

static int is_half_type(emt_dtype t) { return t == EMT_F16 || t == EMT_BF16; }

/* Activation scale span of a weight type's kernels (quant.h). */
static int32_t act_span(emt_dtype t) { return emt_is_kpacked_type(t) ? EMT_XQ_KSPAN : EMT_QK; }

/* Grows *buf to n elements of size `size`; 0 with ex->error set when it cannot. */
static int grow(emt_exec *ex, void **buf, size_t *cap, size_t n, size_t size, const char *what) {
    if (n <= *cap) return 1;
    void *p = realloc(*buf, n * size);
    if (!p) {
        ex->error = what;
        return 0;
    }
    *buf = p;
    *cap = n;
    return 1;
}

#ifdef EMT_CPU_AMX_TILES
/* The buffer of rows split for a tile product over n_rows (unit bytes per
 * 16-row tile and block), grown; *held records the rows it will hold, 0
 * below min_rows (the products then read the plain rows). 0 with
 * ex->error set when it cannot grow. */
static int amx_split_buffer(emt_exec *ex, uint8_t **buf, size_t *cap, int32_t *held, int32_t n_rows, int32_t min_rows,
                            int32_t n_in, size_t unit, const char *what) {
    *held = 0;
    if (n_rows < min_rows) return 1;
    size_t tiles = (size_t)(n_rows + EMT_AMX_M - 1) / EMT_AMX_M;
    if (!grow(ex, (void **)buf, cap, tiles * (size_t)(n_in / EMT_QK) * unit, 1, what)) return 0;
    *held = n_rows;
    return 1;
}
#endif

/* The input rows as the integer kernels read them (16-bit codes per
 * 32-value block, one scale per `span` values; span 32 also fills, in the
 * AVX2 variant, the scales by 8-row group of qdot_rows), in the context's
 * buffer for that span; NULL with ex->error set when it cannot grow. One
 * preparation serves every product of that span over these rows. */
static const emt_xq *prepare_rows(emt_exec *ex, const float *x, int32_t n_rows, int32_t n_in, int32_t span) {
    size_t need = (size_t)n_rows * (size_t)(n_in / EMT_QK);
    emt_xq **buf = span == EMT_QK ? &ex->xq : &ex->xqk;
    size_t *cap = span == EMT_QK ? &ex->xq_cap : &ex->xqk_cap;
    if (!grow(ex, (void **)buf, cap, need, sizeof(emt_xq), "cpu matmul: out of memory for the quantized activation rows"))
        return NULL;
    quantize_job job = { x, *buf, n_in, span, n_rows, NULL };
#ifdef EMT_CPU_AMX_TILES
    if (span == EMT_QK) {
        if (!amx_split_buffer(ex, &ex->amx_x, &ex->amx_cap, &ex->amx_rows, n_rows, EMT_AMX_MIN_ROWS, n_in, EMT_AMX_UNIT,
                              "cpu matmul: out of memory for the AMX activation tiles"))
            return NULL;
        if (ex->amx_rows) job.amx_x = ex->amx_x;
    }
#endif
    if (n_rows == 1) quantize_task(&job, 0);
    else emt_pool_run(ex->pool, n_rows, quantize_task, &job);
    if (span != EMT_QK || !EMT_QDOT_XSC) return *buf;
    int32_t nb = n_in / EMT_QK, groups = (n_rows + EMT_QROWS - 1) / EMT_QROWS;
    if (!grow(ex, (void **)&ex->xsc, &ex->xsc_cap, (size_t)groups * nb * 2 * EMT_QROWS, sizeof(float),
              "cpu matmul: out of memory for the activation scales"))
        return NULL;
    for (int32_t g = 0; g < groups; g++)
        for (int32_t b = 0; b < nb; b++) {
            float *sc = ex->xsc + ((size_t)g * nb + b) * 2 * EMT_QROWS;
            for (int32_t i = 0; i < EMT_QROWS; i++) {
                int32_t r = g * EMT_QROWS + i;
                const emt_xq *xb = r < n_rows ? &ex->xq[(size_t)r * nb + b] : NULL;
                sc[i] = xb ? xb->d : 0.0f;
                sc[EMT_QROWS + i] = xb ? xb->s : 0.0f;
            }
        }
    return ex->xq;
}

/* emt_quantize_block8_ref's integers and scales (the same float
 * operations: max, 127 / amax, x * id rounded to nearest even) */
static inline void quantize_block8(const float *x, emt_xq8 *out) {
#ifdef __AVX2__
    __m256 v[4], amax = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float am = _mm_cvtss_f32(m);
    if (am < EMT_XQ_TINY) am = 0.0f;
    float d = am / EMT_XQ8_MAX, id = am > 0.0f ? EMT_XQ8_MAX / am : 0.0f;
    __m256i q[4];
    const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
    for (int k = 0; k < 4; k++) {
        __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), lim), nlim);
    }
    /* codes 8k..8k+7 in q[k]: lanes 0-3 and 4-7 are the two lanes' groups */
    __m256i s01 = _mm256_add_epi32(q[0], q[1]), s23 = _mm256_add_epi32(q[2], q[3]);
    __m128i h01 = _mm_hadd_epi32(_mm256_castsi256_si128(s01), _mm256_extracti128_si256(s01, 1));
    __m128i h23 = _mm_hadd_epi32(_mm256_castsi256_si128(s23), _mm256_extracti128_si256(s23, 1));
    __m128i part = _mm_hadd_epi32(h01, h23); /* lsum[0], lsum[1], lsum[2], lsum[3] */
    _mm_storel_epi64((__m128i *)out->lsum, _mm_packs_epi32(part, part));
    __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
    __m256i p16b = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
    __m256i p8 = _mm256_permute4x64_epi64(_mm256_packs_epi16(p16, p16b), 0xD8);
    _mm256_storeu_si256((__m256i *)out->q, p8);
    int32_t sum = out->lsum[0] + out->lsum[1] + out->lsum[2] + out->lsum[3];
    out->d = d;
    out->s = d * (float)sum;
#else
    emt_quantize_block8_ref(x, out);
#endif
}

static void quantize8_task(void *ctx, int32_t r) {
    qmatmul_job *j = ctx;
    const float *x = j->x + (size_t)r * j->n_in;
    emt_xq8 *out = (emt_xq8 *)j->xq8 + (size_t)r * (j->n_in / EMT_QK);
    for (int32_t b = 0; b < j->n_in / EMT_QK; b++) quantize_block8(x + (size_t)b * EMT_QK, &out[b]);
#ifdef EMT_CPU_AMX_TILES
    if (j->amx8_x) amx8_split_row(out, j->n_in / EMT_QK, r, j->n_rows, (uint8_t *)j->amx8_x);
#endif
}

/* The input rows with 8-bit codes (quant8.h) in the context's buffer; NULL
 * with ex->error set when it cannot grow. */
static const emt_xq8 *prepare_rows8(emt_exec *ex, const float *x, int32_t n_rows, int32_t n_in) {
    size_t need = (size_t)n_rows * (size_t)(n_in / EMT_QK);
    if (need > ex->xq8_cap) {
        emt_xq8 *p = realloc(ex->xq8, need * sizeof *p);
        if (!p) {
            ex->error = "cpu matmul: out of memory for the 8-bit activation rows";
            return NULL;
        }
        ex->xq8 = p;
        ex->xq8_cap = need;
    }
    qmatmul_job job = { NULL, 0, NULL, ex->xq8, NULL, x, NULL, NULL, n_rows, n_in, 0, 0, NULL, NULL };
#ifdef EMT_CPU_AMX_TILES
    if (!amx_split_buffer(ex, &ex->amx8_x, &ex->amx8_cap, &ex->amx8_rows, n_rows, EMT_AMX8_MIN_ROWS, n_in, EMT_AMX8_UNIT,
                          "cpu matmul: out of memory for the 8-bit AMX activation tiles"))
        return NULL;
    if (ex->amx8_rows) job.amx8_x = ex->amx8_x;
#endif
    if (n_rows == 1) quantize8_task(&job, 0);
    else emt_pool_run(ex->pool, n_rows, quantize8_task, &job);
    return ex->xq8;
}

/* The activation rows that the products over weights W[0..n) read,
 * prepared once: xq[0] the 16-bit rows with a scale per 32 values, xq[1]
 * per 256 values (the K-quants), and the 8-bit rows of the prompt mode
 * (quant8.h) in ex->xq8 for the types that have 8-bit kernels; 0 with
 * ex->error set when a buffer cannot grow. */
static int prepare_all(emt_exec *ex, const emt_wmat *const *W, int32_t n, const float *x, int32_t n_rows,
                       int32_t n_in, const emt_xq *xq[2]) {
    int need[3] = { 0, 0, 0 };
    for (int32_t m = 0; m < n; m++) {
        emt_dtype t = W[m]->dtype;
        if (is_half_type(t)) continue;
        need[ex->act8 && emt_act8_type(t) ? 2 : act_span(t) != EMT_QK] = 1;
    }
    xq[0] = xq[1] = NULL;
    if (need[0] && !(xq[0] = prepare_rows(ex, x, n_rows, n_in, EMT_QK))) return 0;
    if (need[1] && !(xq[1] = prepare_rows(ex, x, n_rows, n_in, EMT_XQ_KSPAN))) return 0;
    if (need[2] && !prepare_rows8(ex, x, n_rows, n_in)) return 0;
    return 1;
}

/* 8: prompt rows take the 8-bit activations; 16 (the default) restores the
 * 16-bit ones. The engine brackets prefill with it. */
static void cpu_set_activation_bits(emt_exec *ex, int32_t bits) { ex->act8 = bits == 8; }

static void cpu_set_kv_dtype(emt_exec *ex, emt_dtype dtype) { ex->kv_bf16 = dtype == EMT_BF16; }

static void cpu_round_bf16(emt_exec *ex, const float *x, int64_t n, uint16_t *out) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) out[i] = emt_f32_to_bf16(x[i]);
}

/* rope_rows() on k then emt_f32_to_bf16 on k and v, into the cache rows: the
 * same products in the same order, so rope() then round_bf16() bit for bit */
static void cpu_rope_round_kv(emt_exec *ex, const float *k, const float *v, int32_t n_rows, int32_t n_kv_heads,
                              int32_t head_dim, int32_t n_rot, const int32_t *positions, const emt_dyn_rows *rows,
                              const float *inv_freq, uint16_t *k_out, uint16_t *v_out) {
    (void)ex;
    const int32_t half = n_rot / 2, base = rows ? rows->len[0] : 0;
    const int32_t *pos = rows ? rows->offsets : positions;
    const size_t n = (size_t)n_rows * n_kv_heads * head_dim;
    for (size_t i = 0; i < n; i++) {
        k_out[i] = emt_f32_to_bf16(k[i]); /* the dims past n_rot; the rotated ones are rewritten below */
        v_out[i] = emt_f32_to_bf16(v[i]);
    }
    for (int32_t r = 0; r < n_rows; r++) {
        for (int32_t i = 0; i < half; i++) {
            double angle = (double)(base + pos[r]) * (double)inv_freq[i];
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int32_t h = 0; h < n_kv_heads; h++) {
                const size_t at = ((size_t)r * n_kv_heads + h) * head_dim;
                float a = k[at + i], b = k[at + i + half];
                k_out[at + i] = emt_f32_to_bf16(a * c - b * s);
                k_out[at + i + half] = emt_f32_to_bf16(b * c + a * s);
            }
        }
    }
}

/* rope_rows() on q, then cpu_rope_round_kv(): the two ops, one call */
static void cpu_rope_q_round_kv(emt_exec *ex, float *q, int32_t n_heads, const float *k, const float *v,
                                int32_t n_rows, int32_t n_kv_heads, int32_t head_dim, int32_t n_rot,
                                const int32_t *positions, const emt_dyn_rows *rows, const float *inv_freq,
                                uint16_t *k_out, uint16_t *v_out) {
    rope_rows(q, n_rows, n_heads, head_dim, n_rot, rows ? rows->len[0] : 0, rows ? rows->offsets : positions,
              inv_freq);
    cpu_rope_round_kv(ex, k, v, n_rows, n_kv_heads, head_dim, n_rot, positions, rows, inv_freq, k_out, v_out);
}

/* Outputs per task, a multiple of 8 (whole packed row groups; the same for
 * every dtype, so the gate and up products of a fused job split alike).
 * Rows > 1: about 4 tasks per thread, for balance. One row (the AR step,
 * which only streams weights): one task per thread, so each thread reads one
 * run of memory and the prefetchers never restart mid-product (measured on
 * 1B Q4_K_M, 2 threads: AR 2-4% faster, verifies unchanged). The pool's
 * caller takes a late worker's task, so a descheduled thread still cannot
 * stall the step for longer than that one task. */
static int32_t output_chunk(const emt_exec *ex, int32_t n_rows, int32_t n_out) {
    int32_t threads = emt_pool_size(ex->pool), per_thread = n_rows == 1 ? 1 : 4;
    int32_t chunk = (n_out + threads * per_thread - 1) / (threads * per_thread);
    return (chunk + EMT_PACK_ROWS - 1) / EMT_PACK_ROWS * EMT_PACK_ROWS;
}

static qmatmul_job product_job(emt_exec *ex, const emt_wmat *W, const float *bias, const emt_xq *const xq[2],
                               const float *x, int32_t n_rows, int32_t n_in, int32_t n_out, float *y) {
    const emt_xq *q = is_half_type(W->dtype) ? NULL : xq[act_span(W->dtype) != EMT_QK];
    qmatmul_job j = { W, emt_dtype_nbytes(W->dtype, n_in), q, NULL, q && EMT_QDOT_XSC ? ex->xsc : NULL, x, bias, y, n_rows, n_in, n_out, 0, NULL, NULL };
    if (q && q == ex->xq && ex->amx_rows == n_rows && n_rows > 0) j.amx_x = ex->amx_x; /* amx variant only */
    if (ex->act8 && emt_act8_type(W->dtype)) {
        j.xq8 = ex->xq8;
        if (ex->amx8_rows == n_rows && n_rows > 0) j.amx8_x = ex->amx8_x; /* amx variant only */
    }
    j.chunk = output_chunk(ex, n_rows, n_out);
    return j;
}

static void cpu_matmul_q(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x,
                         int32_t n_rows, int32_t n_in, int32_t n_out, float *y) {
    const emt_xq *xq[2];
    if (!prepare_all(ex, &W, 1, x, n_rows, n_in, xq)) return;
    qmatmul_job job = product_job(ex, W, bias, xq, x, n_rows, n_in, n_out, y);
    emt_pool_run(ex->pool, (n_out + job.chunk - 1) / job.chunk, qmatmul_task, &job);
}

/* Several products over the same rows as one job: the tasks of product m
 * are [first[m], first[m+1]), each a chunk of its outputs. */
typedef struct qmulti_job {
    qmatmul_job p[EMT_MAX_FUSED];
    int32_t first[EMT_MAX_FUSED + 1];
} qmulti_job;

static void qmulti_task(void *ctx, int32_t task) {
    const qmulti_job *j = ctx;
    int32_t m = 0;
    while (task >= j->first[m + 1]) m++;
    qmatmul_task((void *)&j->p[m], task - j->first[m]);
}

static void cpu_matmul_q_multi(emt_exec *ex, int32_t n_mats, const emt_wmat *const *W, const float *const *bias,
                               const int32_t *n_out, const float *x, int32_t n_rows, int32_t n_in, float *const *y) {
    const emt_xq *xq[2];
    if (!prepare_all(ex, W, n_mats, x, n_rows, n_in, xq)) return;
    qmulti_job job;
    job.first[0] = 0;
    for (int32_t m = 0; m < n_mats; m++) {
        job.p[m] = product_job(ex, W[m], bias[m], xq, x, n_rows, n_in, n_out[m], y[m]);
        job.first[m + 1] = job.first[m] + (n_out[m] + job.p[m].chunk - 1) / job.p[m].chunk;
    }
    emt_pool_run(ex->pool, job.first[n_mats], qmulti_task, &job);
}

/* The residual add in the product's task: a chunk of outputs into tmp,
 * then y += tmp over that chunk (cpu_add's expression, element by element). */
typedef struct qadd_job {
    qmatmul_job product;
    float *y;
} qadd_job;

static void qadd_task(void *ctx, int32_t task) {
    const qadd_job *j = ctx;
    qmatmul_task((void *)&j->product, task);
    const int32_t n_out = j->product.n_out, o0 = task * j->product.chunk;
    const int32_t o1 = o0 + j->product.chunk < n_out ? o0 + j->product.chunk : n_out;
    for (int32_t r = 0; r < j->product.n_rows; r++) {
        float *y = j->y + (size_t)r * n_out;
        const float *t = j->product.y + (size_t)r * n_out;
        for (int32_t o = o0; o < o1; o++) y[o] += t[o];
    }
}

static void cpu_matmul_q_add(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows,
                             int32_t n_in, int32_t n_out, float *y, float *tmp) {
    const emt_xq *xq[2];
    if (!prepare_all(ex, &W, 1, x, n_rows, n_in, xq)) return;
    qadd_job job = { product_job(ex, W, bias, xq, x, n_rows, n_in, n_out, tmp), y };
    emt_pool_run(ex->pool, (n_out + job.product.chunk - 1) / job.product.chunk, qadd_task, &job);
}

/* gate = act(gate) * up over one chunk of outputs, after both products of
 * that chunk: the same expression gated_task evaluates per element. */
typedef struct qgated_job {
    qmatmul_job gate, up;
    int gelu;
} qgated_job;

static void qgated_task(void *ctx, int32_t task) {
    const qgated_job *j = ctx;
    qmatmul_task((void *)&j->gate, task);
    qmatmul_task((void *)&j->up, task);
    int32_t n_out = j->gate.n_out, o0 = task * j->gate.chunk;
    int32_t o1 = o0 + j->gate.chunk < n_out ? o0 + j->gate.chunk : n_out;
    for (int32_t r = 0; r < j->gate.n_rows; r++) {
        float *g = j->gate.y + (size_t)r * n_out;
        const float *u = j->up.y + (size_t)r * n_out;
        if (j->gelu)
            for (int32_t o = o0; o < o1; o++) g[o] = gelu_tanh(g[o]) * u[o];
        else
            for (int32_t o = o0; o < o1; o++) g[o] = silu(g[o]) * u[o];
    }
}

static void cpu_matmul_q_gated(emt_exec *ex, const emt_wmat *Wg, const float *bg, const emt_wmat *Wu,
                               const float *bu, const float *x, int32_t n_rows, int32_t n_in, int32_t n_out,
                               int gelu, float *gate, float *up) {
    const emt_xq *xq[2];
    const emt_wmat *const both[2] = { Wg, Wu };
    if (!prepare_all(ex, both, 2, x, n_rows, n_in, xq)) return;
    qgated_job job = { product_job(ex, Wg, bg, xq, x, n_rows, n_in, n_out, gate),
                       product_job(ex, Wu, bu, xq, x, n_rows, n_in, n_out, up), gelu };
    emt_pool_run(ex->pool, (n_out + job.gate.chunk - 1) / job.gate.chunk, qgated_task, &job);
}

/* Embedding rows from a typed table (the loader checked every scale). */
static void cpu_embed_q(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens,
                        int32_t n_rows, float *out) {
    size_t rb = emt_dtype_nbytes(table->dtype, dim);
    uint8_t *buf = table->packed ? malloc(rb) : NULL;
    if (table->packed && !buf) {
        ex->error = "cpu embed: out of memory for a packed table's row";
        return;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        const uint8_t *src = emt_packed_row(table->dtype, table->data, table->packed, dim, tokens[r], buf);
        emt_tensor row = { "embedding row", table->dtype, 1, { dim }, src, rb, NULL };
        (void)emt_tensor_to_f32(&row, 0, dim, out + (size_t)r * dim);
    }
    free(buf);
}

/* The device step ops (cpu_step_ops.c, the CUDA kernels' twins). */
static void cpu_topk_device(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                            const int32_t *id_map, int32_t *ids, float *probs, float *entropy) {
    emt_cpu_topk_device(ex->pool, logits, n_rows, vocab, k, id_map, ids, probs, entropy);
}
static void cpu_embed_device(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens,
                             int32_t n_rows, float *out) {
    if (table->dtype == EMT_F32) cpu_embed(ex, (const float *)table->data, dim, tokens, n_rows, out);
    else cpu_embed_q(ex, table, dim, tokens, n_rows, out);
}
static void cpu_accept(emt_exec *ex, const emt_accept_desc *d, void *rec) {
    const char *e = emt_cpu_accept(d, rec);
    if (e && !ex->error) ex->error = e;
}
static void cpu_commit(emt_exec *ex, const emt_commit_desc *d, const void *rec) {
    (void)ex;
    emt_cpu_commit(d, rec);
}
static void cpu_gather_i32(emt_exec *ex, int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n) {
    (void)ex;
    emt_cpu_gather_i32(dst, src, idx, n);
}

static void cpu_write_i32(emt_exec *ex, int32_t *dst, const int32_t *src, int32_t n) {
    (void)ex;
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

/* The root sample, on the host: the twin itself (accept.c) */
static void cpu_sample_root(emt_exec *ex, const float *logits, int32_t vocab, float temperature, float epsilon,
                            float delta, const int32_t *uniform, int32_t *token) {
    (void)ex;
    *token = emt_cpu_sample_root(logits, vocab, temperature, epsilon, delta, uniform);
}

#if defined(EMT_CPU_PACKED) || defined(EMT_CPU_PACKS_LANES)
#include <sys/mman.h>
/* A buffer for packed weights. From 2 MB up it starts on a 2 MB boundary
 * and its whole 2 MB pages are offered to transparent huge pages (the
 * kernel's default mode only grants them on request): an AR step streams
 * every weight once, and 4 KB pages cost a TLB walk each and stop the
 * hardware prefetcher at every page boundary (a speed-up seen in paired runs
 * under load was not confirmed by the quiet llama.cpp matrix,
 * docs/performance.md). The tail stays in small pages, so no memory is
 * added. */
static void *packed_alloc(emt_backend *be, size_t bytes) {
    const size_t huge = (size_t)1 << 21;
    if (bytes < huge || bytes > SIZE_MAX - huge) return cpu_alloc(be, bytes);
    void *p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge); /* C11: a multiple of the alignment */
    if (!p) {
        emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for packed weights", bytes);
        return NULL;
    }
    (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE); /* advice: refused, it only costs speed */
    return p;
}

/* Q4_0, Q4_1, Q8_0, Q5_0, Q4_K, Q5_K and Q6_K matrices (AVX2: all but
 * Q5_0 and Q5_K) into the packed layout (quant.h), unless
 * ENTMTP_CPU_PACK=0 (the file layout's kernels, for comparison): a buffer of
 * the same size replaces the data (an owned copy is released; the loader
 * drops the file pages of a mapped one). */
static entmtp_status cpu_pack(emt_backend *be, emt_wmat *w, int64_t n_out, int64_t n_in) {
    const char *env = getenv("ENTMTP_CPU_PACK");
    if ((env && strcmp(env, "0") == 0) || w->packed || !emt_packable(w->dtype, n_out, n_in)) return ENTMTP_OK;
#ifdef EMT_CPU_PACKS_LANES
    if (w->dtype == EMT_Q5_0 || w->dtype == EMT_Q5_K) return ENTMTP_OK;
#endif
    size_t bytes = (size_t)n_out * emt_dtype_nbytes(w->dtype, n_in);
    uint8_t *dst = packed_alloc(be, bytes);
    if (!dst) return ENTMTP_ERR_OUT_OF_MEMORY;
    emt_pack_matrix(w->dtype, w->data, n_out, n_in, dst);
    if (w->owned) cpu_release(be, w->owned);
    w->data = w->owned = dst;
    w->packed = EMT_PACK_ROWS;
    return ENTMTP_OK;
}
#endif

const emt_backend_ops EMT_CPU_OPS = {
    .name = "cpu",
    .host_memory = 1,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy_rows = cpu_copy_rows,
    .exec_create = cpu_exec_create,
    .exec_destroy = cpu_exec_destroy,
    .sync = cpu_sync,
    .error_text = cpu_error_text,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .silu_residual = cpu_silu_residual,
    .topk = cpu_topk,
    .weight_types = EMT_CPU_WEIGHT_TYPES,
    .matmul_q = cpu_matmul_q,
    .embed_q = cpu_embed_q,
    .scale = cpu_scale,
    .geglu = cpu_geglu,
    .softcap = cpu_softcap,
    .attention_softcap = cpu_attention_softcap,
    .matmul_q_multi = cpu_matmul_q_multi,
    .matmul_q_gated = cpu_matmul_q_gated,
    .topk_device = cpu_topk_device,
    .embed_device = cpu_embed_device,
    .accept = cpu_accept,
    .commit = cpu_commit,
    .gather_i32 = cpu_gather_i32,
    .attention_window = cpu_attention_window,
    .rope_dyn = cpu_rope_dyn,
    .attention_dyn = cpu_attention_dyn,
    .write_i32 = cpu_write_i32,
    .sample_root = cpu_sample_root,
    .set_activation_bits = cpu_set_activation_bits,
#if defined(EMT_CPU_PACKED) || defined(EMT_CPU_PACKS_LANES)
    .pack = cpu_pack,
#endif
    .set_kv_dtype = cpu_set_kv_dtype,
    .round_bf16 = cpu_round_bf16,
    .rope_round_kv = cpu_rope_round_kv,
    .matmul_q_add = cpu_matmul_q_add,
    .rope_q_round_kv = cpu_rope_q_round_kv,
};
