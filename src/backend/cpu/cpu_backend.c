/* The CPU backend: the reference implementation of every backend op, and the
 * fallback on machines without a GPU. Device memory is host memory. */
#include "backend/backend.h"
#include "backend/cpu/pool.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef ENTMTP_HAVE_OPENBLAS
#include <cblas.h>
#endif

struct emt_exec {
    emt_backend *be;
    emt_pool *pool;
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
    free(ex);
}

static entmtp_status cpu_sync(emt_exec *ex) {
    (void)ex;
    return ENTMTP_OK;
}

static const char *cpu_error_text(emt_exec *ex) {
    (void)ex;
    return "";
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

static inline float silu(float v) { return v / (1.0f + expf(-v)); }

static void cpu_swiglu(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out) {
    (void)ex;
    for (int64_t i = 0; i < n; i++) out[i] = silu(gate[i]) * up[i];
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

static void cpu_rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim,
                     int32_t n_rot, const int32_t *positions, const float *inv_freq) {
    (void)ex;
    int32_t half = n_rot / 2;
    for (int32_t r = 0; r < n_rows; r++) {
        for (int32_t i = 0; i < half; i++) {
            double angle = (double)positions[r] * (double)inv_freq[i];
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

/* ---------------------------------------------------------------- matmul */

/* The batch-invariant dot product: one 8-wide accumulator over the inputs
 * in steps of 8, a fixed horizontal sum, then a scalar tail. dot1, dot4 and
 * dot4x2 compute every output with exactly this sequence of operations; they
 * differ only in how many weight rows and input rows share each load. */
typedef float emt_v8 __attribute__((vector_size(32)));

/* a*b + c with one rounding when the machine has FMA (chosen at compile
 * time, the same instruction in every path), else a*b then + c. */
#if defined(__FMA__) && defined(__AVX__)
#include <immintrin.h>
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

/* four weight rows against one input row */
static inline void dot4(const float *w0, const float *w1, const float *w2, const float *w3,
                        const float *x, int32_t n, float *out) {
    emt_v8 a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        emt_v8 xv = load8(x + i);
        a0 = madd(load8(w0 + i), xv, a0);
        a1 = madd(load8(w1 + i), xv, a1);
        a2 = madd(load8(w2 + i), xv, a2);
        a3 = madd(load8(w3 + i), xv, a3);
    }
    out[0] = finish(a0, w0, x, i, n);
    out[1] = finish(a1, w1, x, i, n);
    out[2] = finish(a2, w2, x, i, n);
    out[3] = finish(a3, w3, x, i, n);
}

/* four weight rows against two input rows: each weight load serves two rows */
static inline void dot4x2(const float *w0, const float *w1, const float *w2, const float *w3,
                          const float *x, const float *y, int32_t n, float *ox, float *oy) {
    emt_v8 a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 }, b0 = { 0 }, b1 = { 0 }, b2 = { 0 }, b3 = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        emt_v8 xv = load8(x + i), yv = load8(y + i), w;
        w = load8(w0 + i); a0 = madd(w, xv, a0); b0 = madd(w, yv, b0);
        w = load8(w1 + i); a1 = madd(w, xv, a1); b1 = madd(w, yv, b1);
        w = load8(w2 + i); a2 = madd(w, xv, a2); b2 = madd(w, yv, b2);
        w = load8(w3 + i); a3 = madd(w, xv, a3); b3 = madd(w, yv, b3);
    }
    ox[0] = finish(a0, w0, x, i, n);
    ox[1] = finish(a1, w1, x, i, n);
    ox[2] = finish(a2, w2, x, i, n);
    ox[3] = finish(a3, w3, x, i, n);
    oy[0] = finish(b0, w0, y, i, n);
    oy[1] = finish(b1, w1, y, i, n);
    oy[2] = finish(b2, w2, y, i, n);
    oy[3] = finish(b3, w3, y, i, n);
}

typedef struct matmul_job {
    const float *W, *bias, *x;
    float *y;
    int32_t n_rows, n_in, n_out, chunk;
} matmul_job;

static void matmul_task(void *ctx, int32_t task) {
    const matmul_job *j = ctx;
    int32_t o0 = task * j->chunk;
    int32_t o1 = o0 + j->chunk < j->n_out ? o0 + j->chunk : j->n_out;
    size_t n_in = (size_t)j->n_in;
    int32_t o = o0;
    for (; o + 4 <= o1; o += 4) {
        const float *w = j->W + (size_t)o * n_in;
        int32_t r = 0;
        for (; r + 2 <= j->n_rows; r += 2) {
            float v[4], u[4];
            dot4x2(w, w + n_in, w + 2 * n_in, w + 3 * n_in, j->x + (size_t)r * n_in,
                   j->x + (size_t)(r + 1) * n_in, j->n_in, v, u);
            float *yr = j->y + (size_t)r * j->n_out + o, *yu = yr + j->n_out;
            for (int k = 0; k < 4; k++) {
                yr[k] = j->bias ? v[k] + j->bias[o + k] : v[k];
                yu[k] = j->bias ? u[k] + j->bias[o + k] : u[k];
            }
        }
        for (; r < j->n_rows; r++) {
            float v[4];
            dot4(w, w + n_in, w + 2 * n_in, w + 3 * n_in, j->x + (size_t)r * n_in, j->n_in, v);
            float *yr = j->y + (size_t)r * j->n_out + o;
            for (int k = 0; k < 4; k++) yr[k] = j->bias ? v[k] + j->bias[o + k] : v[k];
        }
    }
    for (; o < o1; o++) {
        const float *w = j->W + (size_t)o * n_in;
        for (int32_t r = 0; r < j->n_rows; r++) {
            float v = dot1(w, j->x + (size_t)r * n_in, j->n_in);
            j->y[(size_t)r * j->n_out + o] = j->bias ? v + j->bias[o] : v;
        }
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
    /* chunks of outputs, a multiple of 4, about 4 per thread for balance */
    int32_t threads = emt_pool_size(ex->pool);
    int32_t chunk = (n_out + threads * 4 - 1) / (threads * 4);
    chunk = (chunk + 3) & ~3;
    if (chunk < 16) chunk = 16;
    job.chunk = chunk;
    emt_pool_run(ex->pool, (n_out + chunk - 1) / chunk, matmul_task, &job);
}

/* ------------------------------------------------------------- attention */

#define EMT_ATTN_BLOCK 64
#define EMT_MAX_HEAD_DIM 512

typedef struct attn_job {
    const float *q, *k, *v;
    const uint8_t *mask;
    float *out;
    int32_t n_prefix, n_rows, n_heads, n_kv_heads, head_dim;
    float scale;
} attn_job;

/* One (row, head): online softmax over the visible keys in a fixed order
 * (cache prefix, then the row's visible new rows by index), in blocks. */
static void attn_task(void *ctx, int32_t task) {
    const attn_job *j = ctx;
    int32_t row = task / j->n_heads, head = task % j->n_heads;
    int32_t hd = j->head_dim;
    int32_t kv_head = head / (j->n_heads / j->n_kv_heads);
    size_t kv_stride = (size_t)j->n_kv_heads * hd;
    const float *q = j->q + ((size_t)row * j->n_heads + head) * hd;
    float acc[EMT_MAX_HEAD_DIM];
    for (int32_t d = 0; d < hd; d++) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int32_t keys[EMT_ATTN_BLOCK];
    float s[EMT_ATTN_BLOCK];
    int32_t total = j->n_prefix + j->n_rows;
    int32_t kr = 0;
    while (kr < total) {
        int32_t nb = 0;
        for (; kr < total && nb < EMT_ATTN_BLOCK; kr++) {
            if (kr >= j->n_prefix) {
                int32_t col = kr - j->n_prefix;
                int visible = j->mask ? j->mask[(size_t)row * j->n_rows + col] : col <= row;
                if (!visible) continue;
            }
            keys[nb++] = kr;
        }
        if (nb == 0) continue;
        float mb = -INFINITY;
        for (int32_t t = 0; t < nb; t++) {
            s[t] = dot1(q, j->k + (size_t)keys[t] * kv_stride + (size_t)kv_head * hd, hd) * j->scale;
            if (s[t] > mb) mb = s[t];
        }
        float m_new = m > mb ? m : mb;
        float corr = expf(m - m_new); /* exp(-inf) = 0 on the first block */
        l *= corr;
        for (int32_t d = 0; d < hd; d++) acc[d] *= corr;
        for (int32_t t = 0; t < nb; t++) {
            float p = expf(s[t] - m_new);
            l += p;
            const float *v = j->v + (size_t)keys[t] * kv_stride + (size_t)kv_head * hd;
            for (int32_t d = 0; d < hd; d++) acc[d] += p * v[d];
        }
        m = m_new;
    }
    float *o = j->out + ((size_t)row * j->n_heads + head) * hd;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t d = 0; d < hd; d++) o[d] = acc[d] * inv;
}

static void cpu_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, float *out) {
    attn_job job = { q, k_cache, v_cache, mask, out, n_prefix, n_rows, n_heads, n_kv_heads,
                     head_dim, 1.0f / sqrtf((float)head_dim) };
    emt_pool_run(ex->pool, n_rows * n_heads, attn_task, &job);
}

/* ----------------------------------------------------------------- top-k */

static void cpu_topk(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                     int32_t *top_ids, float *top_probs, float *entropy) {
    (void)ex;
    if (k > vocab) k = vocab;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *x = logits + (size_t)r * vocab;
        int32_t *ids = top_ids + (size_t)r * k;
        float *vals = top_probs + (size_t)r * k;
        int32_t n = 0;
        for (int32_t i = 0; i < vocab; i++) {
            float v = x[i];
            if (n == k && !(v > vals[k - 1])) continue;
            int32_t pos = n < k ? n++ : k - 1;
            while (pos > 0 && v > vals[pos - 1]) {
                vals[pos] = vals[pos - 1];
                ids[pos] = ids[pos - 1];
                pos--;
            }
            vals[pos] = v;
            ids[pos] = i;
        }
        double mx = vals[0], z = 0.0, sxz = 0.0;
        for (int32_t i = 0; i < vocab; i++) {
            double e = exp((double)x[i] - mx);
            z += e;
            sxz += e * ((double)x[i] - mx);
        }
        for (int32_t t = 0; t < k; t++) vals[t] = (float)(exp((double)vals[t] - mx) / z);
        if (entropy) entropy[r] = (float)(log(z) - sxz / z);
    }
}

static const emt_backend_ops cpu_ops = {
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
};

entmtp_status emt_backend_cpu_create(emt_backend **out) {
    emt_backend *be = emt_calloc(1, sizeof *be);
    if (!be) return ENTMTP_ERR_OUT_OF_MEMORY;
    be->ops = &cpu_ops;
    *out = be;
    return ENTMTP_OK;
}
