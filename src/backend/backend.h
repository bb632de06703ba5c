/* The backend interface: the only place where CPU and CUDA differ.
 *
 * A backend owns device memory and runs ops on it. "Device pointers" are
 * plain pointers that only the backend dereferences (host memory for the CPU
 * backend). Small per-call index arrays (tokens, positions, tree mask) are
 * host pointers; a device backend copies or caches them.
 *
 * Ops are issued on an execution context (emt_exec): one per session, so
 * several sessions can run on several threads over one shared model. On CPU
 * the context owns the session's worker threads; on CUDA, its stream.
 *
 * Determinism contract (the lossless invariant rests on it): with
 * `exact` set, matmul computes every output element with the same sequence of
 * floating-point operations whatever the number of rows, and attention visits
 * the keys of a row in the same order (cache prefix, then tree rows in index
 * order), so a token's hidden state is bit-identical whether it is computed
 * alone (AR) or as a node of a verified tree. Typed weights (matmul_q) keep
 * the contract unconditionally: each output is one row's dot product in a
 * fixed order of blocks, whatever the number of rows. */
#ifndef EMT_BACKEND_H
#define EMT_BACKEND_H

#include "common/common.h"
#include "io/tensor.h"

typedef struct emt_backend emt_backend;
typedef struct emt_exec emt_exec;

/* A weight matrix [n_out][n_in] in its stored dtype: each row is n_in
 * values, in whole blocks for quantized types (data may point into the
 * model file's mapping). `owned` is the backend allocation to release, NULL
 * when the data lives in the mapping. */
typedef struct emt_wmat {
    emt_dtype dtype;
    const void *data;
    void *owned;
} emt_wmat;

/* What an execution context has done since it was created; the engine reads
 * it before and after each step (entmtp bench prints the per-step figures). */
typedef struct emt_exec_counters {
    int64_t launches;              /* kernels launched (on CUDA: by the calling thread) */
    int64_t syncs;                 /* host waits for the context's work */
    int64_t d2h_copies, d2h_bytes; /* device-to-host copies */
    int64_t h2d_copies, h2d_bytes; /* host-to-device copies (staged index arrays) */
    double wait_seconds;           /* host time spent inside those waits */
} emt_exec_counters;

typedef struct emt_backend_ops {
    const char *name;
    int host_memory; /* 1 when device pointers are host memory (CPU) */
    void (*destroy)(emt_backend *be);

    /* memory: zero-initialised device allocation; NULL + last error on failure */
    void *(*alloc)(emt_backend *be, size_t bytes);
    void (*release)(emt_backend *be, void *ptr);
    entmtp_status (*upload)(emt_backend *be, void *dst, const void *src, size_t bytes);
    entmtp_status (*download)(emt_exec *ex, void *dst, const void *src, size_t bytes);
    /* device-to-device copy of rows: dst[dst_rows[i]] = src[src_rows[i]], in order
     * i = 0..n-1 (safe when copying rows toward lower indices in place) */
    void (*copy_rows)(emt_exec *ex, float *dst, const float *src, size_t row_floats,
                      const int32_t *dst_rows, const int32_t *src_rows, int32_t n);

    emt_exec *(*exec_create)(emt_backend *be, int32_t n_threads);
    void (*exec_destroy)(emt_exec *ex);
    /* waits for the context's work; ENTMTP_ERR_BACKEND when an op failed,
     * with the reason in error_text() */
    entmtp_status (*sync)(emt_exec *ex);
    const char *(*error_text)(emt_exec *ex);

    /* out[r] = table[tokens[r]] (rows of `dim` floats); tokens are host ids, checked by the caller */
    void (*embed)(emt_exec *ex, const float *table, int32_t dim, const int32_t *tokens,
                  int32_t n_rows, float *out);
    /* out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w */
    void (*rmsnorm)(emt_exec *ex, const float *x, const float *w, int32_t n_rows, int32_t dim,
                    float eps, float *out);
    /* y[r][o] = sum_i W[o][i] * x[r][i] (+ bias[o]); W is [n_out][n_in] */
    void (*matmul)(emt_exec *ex, const float *W, const float *bias, const float *x,
                   int32_t n_rows, int32_t n_in, int32_t n_out, float *y, int exact);
    /* rotate-half RoPE in place on rows of n_heads*head_dim over the first
     * n_rot dims: angle = position * inv_freq[i], i < n_rot/2 (host array,
     * scaling already folded in by the model) */
    void (*rope)(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim,
                 int32_t n_rot, const int32_t *positions, const float *inv_freq);
    /* Attention of n_rows new queries whose K/V are already stored in the cache
     * at rows n_prefix .. n_prefix+n_rows-1. Row i sees cache rows [0, n_prefix)
     * and new rows j with mask[i*n_rows + j] (NULL mask = causal). Caches are
     * [rows][n_kv_heads*head_dim]. out: [n_rows][n_heads*head_dim]. */
    void (*attention)(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                      int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, float *out);
    /* out[i] = silu(gate[i]) * up[i] */
    void (*swiglu)(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out);
    /* x[i] += y[i] */
    void (*add)(emt_exec *ex, float *x, const float *y, int64_t n);
    /* out[i] = res[i] + silu(pre[i]) (Medusa/Hydra ResBlock) */
    void (*silu_residual)(emt_exec *ex, const float *res, const float *pre, int64_t n, float *out);
    /* Per-row top-k of logits (descending, ties to the lower id) and softmax
     * statistics at temperature 1: host outputs top_ids[r*k..], top_probs[r*k..],
     * entropy[r] (may be NULL). */
    void (*topk)(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                 int32_t *top_ids, float *top_probs, float *entropy);

    /* Typed weights (last, so a backend that lists ops positionally and
     * leaves these out takes F32 only). weight_types has bit (1u << dtype)
     * for each dtype besides F32 that matmul_q and embed_q take; the loader
     * converts any other weight to F32 for matmul. */
    uint32_t weight_types;
    /* matmul over W in its stored dtype; same shapes as matmul */
    void (*matmul_q)(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x,
                     int32_t n_rows, int32_t n_in, int32_t n_out, float *y);
    /* embed from a typed table: rows dequantized to F32 */
    void (*embed_q)(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens,
                    int32_t n_rows, float *out);

    /* ---- Optional ops, needed by some architectures only (Gemma 2/3). A
     * backend may leave them NULL; loading a model that needs one then fails
     * with an error naming the op (emt_model_check_ops). ---- */
    /* x[i] *= s (Gemma's embedding scale, a query scale other than 1/sqrt(head_dim)) */
    void (*scale)(emt_exec *ex, float *x, int64_t n, float s);
    /* out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU) */
    void (*geglu)(emt_exec *ex, const float *gate, const float *up, int64_t n, float *out);
    /* x[i] = cap * tanh(x[i] / cap) (Gemma 2's final logit soft-capping) */
    void (*softcap)(emt_exec *ex, float *x, int64_t n, float cap);
    /* attention() with every score s soft-capped to cap * tanh(s / cap)
     * before the softmax (Gemma 2) */
    void (*attention_softcap)(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                              int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                              int32_t n_kv_heads, int32_t head_dim, float cap, float *out);

    /* ---- Step ops (appended: a backend that lists ops positionally and
     * leaves these out gets NULL, and the engine does without). ---- */
    /* The context's running counters. NULL on the CPU backend, where every
     * op is host work and nothing crosses a device boundary. Deterministic:
     * counts only, no effect on results. */
    void (*counters)(emt_exec *ex, emt_exec_counters *out);

    /* ---- Fused products (appended, optional: NULL makes the engine issue
     * the separate matmul_q / swiglu calls, which give the same bits). They
     * exist because a decode step is a few hundred small products, and on a
     * CPU each separate call costs a hand-off to the worker threads and a
     * fresh preparation of the same input rows. Typed weights only. ---- */
    /* y[m] = x W[m]^T (+ bias[m]) for m < n_mats (at most EMT_MAX_FUSED) over
     * the same input rows x [n_rows][n_in]: Q/K/V, or Hydra's two first-layer
     * projections. Each y[m] is what matmul_q alone would write. */
    void (*matmul_q_multi)(emt_exec *ex, int32_t n_mats, const emt_wmat *const *W, const float *const *bias,
                           const int32_t *n_out, const float *x, int32_t n_rows, int32_t n_in, float *const *y);
    /* gate = act(x Wg^T + bg) * (x Wu^T + bu), act = SiLU (gelu 0) or GELU
     * tanh (gelu 1): matmul_q twice then swiglu/geglu in one job; up
     * [n_rows][n_out] is scratch. */
    void (*matmul_q_gated)(emt_exec *ex, const emt_wmat *Wg, const float *bg, const emt_wmat *Wu,
                           const float *bu, const float *x, int32_t n_rows, int32_t n_in, int32_t n_out,
                           int gelu, float *gate, float *up);

    /* ---- Sliding-window attention (appended, optional: a model whose
     * window is shorter than its context needs it, and loading such a model
     * on a backend without it fails naming 'attention_window'). ----
     * attention_softcap() (cap 0 = none) where a key is also hidden when it
     * lies `window` or more positions before the query: row i (at position
     * positions[i]) sees cache row j < n_prefix (at position j) when
     * positions[i] - j < window, and new row j when the mask allows it and
     * positions[i] - positions[j] < window. Visible keys are visited in
     * attention()'s order, so with every key inside the window the result
     * is attention()'s, bit for bit. */
    void (*attention_window)(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                             int32_t n_prefix, int32_t n_rows, const uint8_t *mask, const int32_t *positions,
                             int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap,
                             float *out);
} emt_backend_ops;

#define EMT_MAX_FUSED 4

/* matmul / embed on a weight of any dtype the backend took at load. */
static inline void emt_matmul(const emt_backend_ops *op, emt_exec *ex, const emt_wmat *W,
                              const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                              int32_t n_out, float *y, int exact) {
    if (W->dtype == EMT_F32) op->matmul(ex, (const float *)W->data, bias, x, n_rows, n_in, n_out, y, exact);
    else op->matmul_q(ex, W, bias, x, n_rows, n_in, n_out, y);
}

/* Products over the same input rows: one fused call when the backend has
 * it and every weight is typed, else one emt_matmul per weight. */
static inline void emt_matmul_multi(const emt_backend_ops *op, emt_exec *ex, int32_t n_mats, const emt_wmat *const *W,
                                    const float *const *bias, const int32_t *n_out, const float *x,
                                    int32_t n_rows, int32_t n_in, float *const *y, int exact) {
    int fused = op->matmul_q_multi != NULL && n_mats <= EMT_MAX_FUSED;
    for (int32_t m = 0; m < n_mats; m++) fused = fused && W[m]->dtype != EMT_F32;
    if (fused) {
        op->matmul_q_multi(ex, n_mats, W, bias, n_out, x, n_rows, n_in, y);
        return;
    }
    for (int32_t m = 0; m < n_mats; m++) emt_matmul(op, ex, W[m], bias[m], x, n_rows, n_in, n_out[m], y[m], exact);
}

/* gate = act(x Wg^T + bg) * (x Wu^T + bu) (act SiLU, or GELU tanh when
 * gelu): fused when the backend can, else two products and the activation. */
static inline void emt_matmul_gated(const emt_backend_ops *op, emt_exec *ex, const emt_wmat *Wg, const float *bg,
                                    const emt_wmat *Wu, const float *bu, const float *x, int32_t n_rows,
                                    int32_t n_in, int32_t n_out, int gelu, float *gate, float *up, int exact) {
    if (op->matmul_q_gated && Wg->dtype != EMT_F32 && Wu->dtype != EMT_F32) {
        op->matmul_q_gated(ex, Wg, bg, Wu, bu, x, n_rows, n_in, n_out, gelu, gate, up);
        return;
    }
    emt_matmul(op, ex, Wg, bg, x, n_rows, n_in, n_out, gate, exact);
    emt_matmul(op, ex, Wu, bu, x, n_rows, n_in, n_out, up, exact);
    if (gelu) op->geglu(ex, gate, up, (int64_t)n_rows * n_out, gate);
    else op->swiglu(ex, gate, up, (int64_t)n_rows * n_out, gate);
}

static inline void emt_embed(const emt_backend_ops *op, emt_exec *ex, const emt_wmat *table,
                             int32_t dim, const int32_t *tokens, int32_t n_rows, float *out) {
    if (table->dtype == EMT_F32) op->embed(ex, (const float *)table->data, dim, tokens, n_rows, out);
    else op->embed_q(ex, table, dim, tokens, n_rows, out);
}

struct emt_backend {
    const emt_backend_ops *ops;
    void *impl;
};

/* sync() with the backend's reason recorded as the last error. */
entmtp_status emt_backend_sync(const emt_backend *be, emt_exec *ex);

/* Creates the CPU backend (always available). */
entmtp_status emt_backend_cpu_create(emt_backend **out);
/* Loads the CUDA plugin and creates a backend on `device`; ENTMTP_ERR_BACKEND
 * with the reason when there is no plugin, no driver or no GPU. */
entmtp_status emt_backend_cuda_create(int32_t device, emt_backend **out);

#endif
