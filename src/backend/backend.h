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
 * fixed order of blocks, whatever the number of rows. (On CUDA, BF16
 * products run on tensor cores for every row count, one row padded to an
 * mma's 8 columns: an mma element depends on its own row and column only,
 * cuda/matmul.cu.) */
#ifndef EMT_BACKEND_H
#define EMT_BACKEND_H

#include "common/common.h"
#include "io/tensor.h"

typedef struct emt_backend emt_backend;
typedef struct emt_exec emt_exec;
typedef struct emt_accept_desc emt_accept_desc; /* device step ops, defined below */
typedef struct emt_commit_desc emt_commit_desc;

/* A weight matrix [n_out][n_in] in its stored dtype: each row is n_in
 * values, in whole blocks for quantized types (data may point into the
 * model file's mapping). `owned` is the backend allocation to release, NULL
 * when the data lives in the mapping. */
typedef struct emt_wmat {
    emt_dtype dtype;
    const void *data;
    void *owned;
    /* 0: rows as the file stores them. EMT_PACK_ROWS (quant.h): the
     * backend's pack op interleaved each group of that many rows block by
     * block (same bytes per group, so a view that starts at a multiple of
     * the group is still a matrix); read a row through emt_wmat_row. */
    int32_t packed;
} emt_wmat;

/* What an execution context has done since it was created; the engine reads
 * it before and after each step (entmtp bench prints the per-step figures). */
typedef struct emt_exec_counters {
    int64_t launches;              /* kernels launched (on CUDA: by the calling thread) */
    int64_t syncs;                 /* host waits for the context's work */
    int64_t d2h_copies, d2h_bytes; /* device-to-host copies */
    int64_t h2d_copies, h2d_bytes; /* host-to-device copies (staged index arrays) */
    double wait_seconds;           /* host time spent inside those waits */
    /* CUDA graphs (graph_begin/graph_end): launches of captured graphs (each
     * counted here, not in `launches`), captures made, and captures that
     * failed or were not attempted, whose ops ran as direct launches */
    int64_t graph_launches, graph_captures, graph_fallbacks;
} emt_exec_counters;

/* The rows of a verify step whose lengths live in device memory, so that
 * the step's launches do not depend on the context length and can be
 * captured once and replayed (graph_begin): the committed length
 * L = len[0] (device int32, at most row0), new row i at position
 * L + offsets[i] (host [n_rows], the tree's depths) with its K and V at
 * cache row row0 + i (a fixed area past the KV capacity), attending to the
 * cache prefix [0, L) and then to the new rows under the mask. */
typedef struct emt_dyn_rows {
    const int32_t *len;
    const int32_t *offsets;
    int32_t row0;
} emt_dyn_rows;

/* graph_begin's answer when it launched a recorded graph */
#define EMT_GRAPH_REPLAYED 1

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

    /* ---- Device step ops (appended after the fused products; NULL on a backend
     * that lacks them, and the engine then keeps its host path). With them
     * a greedy step leaves the device once: accept, commit and the next
     * step's root and heads run on the device into an emt_step_record
     * that the engine downloads in one copy (docs/architecture.md). ---- */
    /* topk() with its results left in device memory: ids[r*k..] (mapped
     * through id_map[] when non-NULL, a device array: draft-vocabulary
     * positions -> token ids), probs[r*k..], entropy[r] (may be NULL). One
     * pass over each row; same ids as topk (descending, ties to the lower
     * id), probabilities and entropy within rounding of topk's. */
    void (*topk_device)(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                        const int32_t *id_map, int32_t *ids, float *probs, float *entropy);
    /* embed_q / embed over a table of any dtype the backend took, with the
     * token ids in device memory (checked by whoever wrote them) */
    void (*embed_device)(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens,
                         int32_t n_rows, float *out);
    /* Acceptance over every candidate path (emt_evaluate_posterior_nodes,
     * src/accept/accept.c: greedy at temperature 0, else typical with
     * threshold min(eps, delta*exp(-H)); ties as the reference), then the
     * step's cuts (a stop token, max_tokens, the KV room), into the device
     * record `rec` (header, path, tokens; emt_step_record_layout). */
    void (*accept)(emt_exec *ex, const emt_accept_desc *d, void *rec);
    /* The accepted path's KV rows of every layer moved to rows L..L+n_emit-1
     * in path order (toward lower rows: safe in place), the last accepted
     * node's hidden row to last_hidden and its logits row to next_logits, as
     * one gather that reads n_emit and the path from the device record. */
    void (*commit)(emt_exec *ex, const emt_commit_desc *d, const void *rec);
    /* dst[i] = src[idx[i]], i < n: int32 values in device memory, idx a host
     * array (Hydra's draft tokens assembled where the heads left them) */
    void (*gather_i32)(emt_exec *ex, int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n);

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

    /* ---- Device-resident lengths (appended, optional: without them the
     * device step passes L as an argument, and nothing is captured). ----
     * rope() at positions rows->len[0] + rows->offsets[i] */
    void (*rope_dyn)(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                     const emt_dyn_rows *rows, const float *inv_freq);
    /* attention_window() (window 0 = none, cap 0 = none) over the prefix
     * [0, rows->len[0]) and the new rows at cache rows rows->row0 + j, the
     * rows at positions L + rows->offsets[i]: the same keys in the same
     * order as attention_window() with n_prefix = L, the new rows at L and
     * those positions, so the same bits */
    void (*attention_dyn)(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          const emt_dyn_rows *rows, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out);
    /* dst[i] = src[i], i < n: host values into device memory, queued (no wait) */
    void (*write_i32)(emt_exec *ex, int32_t *dst, const int32_t *src, int32_t n);

    /* ---- Graphs (appended, optional; NULL on the CPU). The ops the engine
     * issues between graph_begin and graph_end are recorded once per
     * (key, variant) and replayed on later calls with the same key: every
     * argument of those ops (host index arrays included) must then be the
     * same, and whatever changes between steps must be read from device
     * memory (emt_dyn_rows, the accept and commit descriptors' `lengths`).
     * graph_begin returns EMT_GRAPH_REPLAYED when it launched the recorded
     * graph (the engine issues nothing), else 0: the engine issues the ops,
     * then calls graph_end, which returns 0 when they ran (recorded and
     * launched, or launched directly) and nonzero when a capture failed and
     * nothing ran (the engine issues them again; that key is not captured
     * again). With `discard` (the engine failed while issuing) a recording
     * is dropped unlaunched. graph_reset forgets every graph (session reset). */
    int (*graph_begin)(emt_exec *ex, const void *key, int32_t variant);
    int (*graph_end)(emt_exec *ex, int discard);
    void (*graph_reset)(emt_exec *ex);

    /* ---- The sampled root (appended, optional: without it, or without
     * write_i32, a step at temperature > 0 samples its root on the host
     * from the downloaded distribution). ----
     * *token (device) = emt_sample_typical_u(logits, vocab, temperature,
     * epsilon, delta, u) (src/accept/accept.h), the same sums in the same
     * order, with u = emt_u53_uniform(u53) read from device memory:
     * uniform[0] and uniform[1] are the low and high 32 bits of u53, drawn
     * on the host (the session's RNG) and written with the step's inputs.
     * Bit-exact promise: the CPU op equals the twin token for token. A
     * device's exp/log may differ from glibc's in the last bit (no FMA
     * contraction: cuda/step_ops.cu is built with -fmad=false), so where u
     * lies within 1e-12 of the boundary between two allowed tokens' intervals
     * it may pick the neighbour (test_cuda_step_ops, SAMPLE_BAND); greedy
     * steps are untouched by this. */
    void (*sample_root)(emt_exec *ex, const float *logits, int32_t vocab, float temperature, float epsilon,
                        float delta, const int32_t *uniform, int32_t *token);
    /* Optional, host-memory backends: reorder w (n_out x n_in, placed by
     * the loader) into the layout the backend's kernels stream best, once at
     * load; sets w->packed, may replace data and owned (a weight in the
     * file's mapping gets an allocation of the same size, and the mapping's
     * pages are dropped). Leaves w alone for a shape or dtype it does not
     * pack. */
    entmtp_status (*pack)(emt_backend *be, emt_wmat *w, int64_t n_out, int64_t n_in);
    /* Optional: 8 makes the context's later typed products take 8-bit
     * activations where the backend has them (the CPU's prompt mode,
     * src/backend/cpu/quant8.h), 16 (the default) the full ones. The engine
     * sets 8 around a prefill only, never around a step or a verify. */
    void (*set_activation_bits)(emt_exec *ex, int32_t bits);

    /* ---- KV cache element type (appended, optional: NULL, or any of the
     * three (with rope_round_kv below) NULL, and the backend keeps F32
     * caches only; a session asking for BF16 then fails naming kv_type). ----
     * The K/V caches the context's later attention ops (all four) read hold
     * `dtype` elements: EMT_F32 (the default) or EMT_BF16, rows of
     * n_kv_heads*head_dim BF16 values, which the attention reads as the F32
     * values they stand for (exactly), so a BF16 cache attends as an F32
     * cache of the same rounded values would. The engine sets it around its
     * target model's attention only (a drafter's own cache stays F32). */
    void (*set_kv_dtype)(emt_exec *ex, emt_dtype dtype);
    /* out[i] = x[i] rounded to BF16, to nearest even (NaN stays a NaN):
     * how K/V rows enter a BF16 cache */
    void (*round_bf16)(emt_exec *ex, const float *x, int64_t n, uint16_t *out);
    /* The new K/V rows into a BF16 cache in one launch (appended, optional:
     * NULL, and the backend keeps F32 caches only): k and v are n_rows rows
     * of n_kv_heads*head_dim F32 values; k_out gets k as rope() would leave
     * it (positions[r], or rows->len[0] + rows->offsets[r] when rows is not
     * NULL: rope_dyn()'s) rounded as round_bf16() rounds, v_out gets v
     * rounded. k and v are left as they were. Bit for bit rope() then
     * round_bf16() on each, in one pass over the rows. */
    void (*rope_round_kv)(emt_exec *ex, const float *k, const float *v, int32_t n_rows, int32_t n_kv_heads,
                          int32_t head_dim, int32_t n_rot, const int32_t *positions, const emt_dyn_rows *rows,
                          const float *inv_freq, uint16_t *k_out, uint16_t *v_out);

    /* ---- Fewer launches (appended, optional: NULL, and the engine issues
     * the separate ops; emt_matmul_add and emt_rope_q_round_kv below). ----
     * The residual add in the product's epilogue: y[r][o] += matmul_q()'s
     * element (W typed), bit for bit matmul_q() into tmp then add(y, tmp):
     * the same product value and one float add. tmp: n_rows*n_out floats
     * the backend may use as scratch (CUDA's BF16 tensor-core product adds
     * in its epilogue and leaves tmp alone). x overlaps neither y nor tmp. */
    void (*matmul_q_add)(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows,
                         int32_t n_in, int32_t n_out, float *y, float *tmp);
    /* Q's RoPE with the new K/V rows: rope() (rope_dyn() when rows is not
     * NULL) on q, n_rows rows of n_heads*head_dim in place, and
     * rope_round_kv() on k and v, bit for bit those two ops, in one launch
     * where the backend can. */
    void (*rope_q_round_kv)(emt_exec *ex, float *q, int32_t n_heads, const float *k, const float *v, int32_t n_rows,
                            int32_t n_kv_heads, int32_t head_dim, int32_t n_rot, const int32_t *positions,
                            const emt_dyn_rows *rows, const float *inv_freq, uint16_t *k_out, uint16_t *v_out);
} emt_backend_ops;

#define EMT_MAX_FUSED 4


/* The step record: what one greedy step sends to the host, in one copy.
 * A header, then int32 path[max_path], int32 tokens[max_path], int32
 * head_ids[n_heads*k], float head_p[n_heads*k] (the next step's heads). */
typedef struct emt_step_record {
    int32_t best_row;      /* candidate row of the best path */
    int32_t accepted;      /* draft tokens accepted beyond the root */
    int32_t n_emit;        /* tokens kept after the cuts (>= 1) */
    int32_t stopped;       /* a stop token was among them (the last one) */
    int32_t kv_full;       /* cut by the KV room */
    int32_t last_node;     /* node id of the last kept token */
    int32_t next_root;     /* argmax of the next-token logits (ties to the lower id) */
    float next_p0, next_entropy; /* its probability and the entropy at T = 1 */
    int32_t reserved[7];
} emt_step_record;

/* Offsets (in 4-byte words) of the record's arrays, and its size. */
typedef struct emt_step_record_layout {
    int32_t max_path, n_heads, k;
    size_t path, tokens, head_ids, head_p, words;
} emt_step_record_layout;

static inline emt_step_record_layout emt_step_record_layout_make(int32_t max_path, int32_t n_heads, int32_t k) {
    emt_step_record_layout l;
    l.max_path = max_path;
    l.n_heads = n_heads;
    l.k = k;
    l.path = sizeof(emt_step_record) / 4;
    l.tokens = l.path + (size_t)max_path;
    l.head_ids = l.tokens + (size_t)max_path;
    l.head_p = l.head_ids + (size_t)n_heads * k;
    l.words = l.head_p + (size_t)n_heads * k;
    return l;
}

struct emt_accept_desc {
    const float *node_logits;   /* device [n_nodes][vocab] */
    const int32_t *node_tokens; /* host [n_nodes] (root first) */
    const int32_t *retrieve;    /* host [n_rows][width], -1 padded (unused when width == 1) */
    int32_t n_nodes, vocab, n_rows, width;
    float temperature, epsilon, delta;
    int32_t max_tokens;         /* > 0: keep at most this many tokens */
    int32_t kv_room;            /* KV rows left (>= 1): a cut to it sets kv_full */
    const uint8_t *stop;        /* device [vocab], 1 for a stop token; NULL: none */
    int32_t max_path;           /* the record's path capacity (>= width) */
    const int32_t *node_tokens_device; /* non-NULL: the node tokens in device memory, used instead */
    /* non-NULL: device [2] = { L, max_tokens } used instead of max_tokens
     * and kv_room (kv_room = kv_capacity - L) */
    const int32_t *lengths;
    int32_t kv_capacity;
};

struct emt_commit_desc {
    float *kv;                  /* device: 2*n_layers slabs, K of layer l at slab 2l, V at 2l+1 */
    size_t slab_floats, row_floats; /* in 4-byte words (a BF16 row: half its values) */
    int32_t n_slabs, L;         /* L: the first row of the tree's nodes */
    const float *hidden;        /* [n_nodes][hidden_dim] */
    float *last_hidden;         /* [hidden_dim] */
    int32_t hidden_dim;
    const float *logits;        /* [n_nodes][vocab] */
    float *next_logits;         /* [vocab] */
    int32_t vocab;
    int32_t max_path;           /* the record's path capacity */
    /* non-NULL: device [1.. ] whose [0] is L, used instead of L, and the
     * tree's nodes are at rows src_row0.. (emt_dyn_rows.row0) instead of L.. */
    const int32_t *lengths;
    int32_t src_row0;
};

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

/* y += x W^T (+ bias), the residual add after a product: one call when
 * the backend has it and W is typed, else the product into tmp and add(). */
static inline void emt_matmul_add(const emt_backend_ops *op, emt_exec *ex, const emt_wmat *W, const float *bias,
                                  const float *x, int32_t n_rows, int32_t n_in, int32_t n_out, float *y, float *tmp,
                                  int exact) {
    if (op->matmul_q_add && W->dtype != EMT_F32) {
        op->matmul_q_add(ex, W, bias, x, n_rows, n_in, n_out, y, tmp);
        return;
    }
    emt_matmul(op, ex, W, bias, x, n_rows, n_in, n_out, tmp, exact);
    op->add(ex, y, tmp, (int64_t)n_rows * n_out);
}

/* Q roped in place and K (roped) and V rounded into BF16 cache rows: one
 * call when the backend has it, else rope()/rope_dyn() then rope_round_kv(). */
static inline void emt_rope_q_round_kv(const emt_backend_ops *op, emt_exec *ex, float *q, int32_t n_heads,
                                       const float *k, const float *v, int32_t n_rows, int32_t n_kv_heads,
                                       int32_t head_dim, int32_t n_rot, const int32_t *positions,
                                       const emt_dyn_rows *rows, const float *inv_freq, uint16_t *k_out,
                                       uint16_t *v_out) {
    if (op->rope_q_round_kv) {
        op->rope_q_round_kv(ex, q, n_heads, k, v, n_rows, n_kv_heads, head_dim, n_rot, rows ? NULL : positions, rows,
                            inv_freq, k_out, v_out);
        return;
    }
    if (rows) op->rope_dyn(ex, q, n_rows, n_heads, head_dim, n_rot, rows, inv_freq);
    else op->rope(ex, q, n_rows, n_heads, head_dim, n_rot, positions, inv_freq);
    op->rope_round_kv(ex, k, v, n_rows, n_kv_heads, head_dim, n_rot, rows ? NULL : positions, rows, inv_freq, k_out,
                      v_out);
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
