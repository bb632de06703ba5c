// What the plugin's files share: the execution context (one stream, cuBLAS,
// staging for the host index arrays that ops receive, scratch memory) and
// the entry point of every op that backend_cuda.cu lists in its ops table.
// One .cu file per kernel family; each kernel names its CPU twin.
#ifndef EMT_CUDA_EXEC_H
#define EMT_CUDA_EXEC_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_launch.h"

#include <stdint.h>

extern "C" {
#include "backend/cuda_plugin.h"
}

// Small host-to-device staging for per-call index arrays (tokens, positions,
// masks, frequencies): the caller's host arrays may change as soon as an op
// returns, so they are copied into pinned memory owned by the context first.
struct staging {
    void *host;
    void *dev;
    size_t cap, used;
};

// One recorded step span (graphs.cu): the ops the engine issued between
// graph_begin and graph_end for one (key, variant), and the index arrays
// they staged, which live with the graph (the staging ring is reused after
// every wait, a graph is replayed long after).
enum { GRAPH_NEW, GRAPH_SEEN, GRAPH_READY, GRAPH_FAILED };
struct step_graph {
    const void *key;
    int32_t variant;
    int state;            // GRAPH_SEEN: ran directly once, its staging measured
    size_t const_bytes;   // the staging its ops used
    void *const_host, *const_dev;
    cudaGraphExec_t exec; // GRAPH_READY
};

struct emt_exec {
    emt_backend *be;
    cudaStream_t stream;
    cublasHandle_t blas;
    staging st;
    float *scratch; // attention partials, top-k results and the split tensor-core products' partial sums
    size_t scratch_cap;
    int32_t *tc_arrivals; // the split tensor-core products' arrival counters per tile (zero between launches)
    size_t tc_arrivals_cap;
    int32_t *host_index; // host-side index lists built before staging (tree rows' visible keys)
    size_t host_index_cap;
    emt_exec_counters counters; // syncs and copies (launches: emt_cuda_launch_count)
    // buffers replaced while work that reads them may still be queued: freed
    // after the next wait, so that growing never waits inside a step
    void *retired_dev[32], *retired_host[32];
    int n_retired_dev, n_retired_host;
    // attention: the last tree mask's staged index lists, valid until the next wait
    uint64_t wait_epoch, mask_epoch;
    int32_t mask_rows;
    const int32_t *mask_keys;
    uint8_t mask_copy[128 * 128];
    size_t attn_shared_optin[2]; // attention's dynamic shared memory opted in so far (bytes), F32 and BF16 caches
    int kv_bf16; // set_kv_dtype(EMT_BF16): attention's K/V caches hold BF16
    unsigned tc_shared_optin; // tensor-core product variants whose shared memory is opted in (bit per variant)
    unsigned attn_tc_shared_optin; // tensor-core attention variants (head dims) opted in (bit per variant)
    void *bounce; // pinned landing buffer for small downloads (the step record)
    size_t bounce_cap;
    // step graphs (graphs.cu): off with ENTMTP_CUDA_GRAPHS=0
    int graphs_on;
    step_graph *graphs;
    int n_graphs, graphs_cap;
    step_graph *measuring;      // a span's first use: its staging is counted
    step_graph *recording;      // a span being captured: staging goes to its constants
    size_t const_used;          // of recording->const_bytes
    int capture_broken;         // something the capture cannot hold was asked for
    long long launches_before;  // emt_cuda_launch_count when the capture began
    char error[256];
};

// The first failure of the context is kept (later ones are consequences).
void cu_set_error(emt_exec *ex, const char *what, cudaError_t e);
void cu_fail(emt_exec *ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define CUDA_OK(ex, call) cu_set_error((ex), #call, (call))

// The context's counted waits and device-to-host copies (step_counters.cu).
void cu_wait(emt_exec *ex);
void cu_copy_to_host(emt_exec *ex, void *dst, const void *src, size_t bytes);
void cu_counters(emt_exec *ex, emt_exec_counters *out);
// After a completed wait: staging restarts at 0 and retired buffers are freed.
void cu_after_wait(emt_exec *ex);
// A buffer that queued work may still read: freed after the next wait.
void cu_retire(emt_exec *ex, void *p, int host);

// graphs.cu: the step graphs (backend.h: graph_begin, graph_end, graph_reset)
int cu_graph_begin(emt_exec *ex, const void *key, int32_t variant);
int cu_graph_end(emt_exec *ex, int discard);
void cu_graph_reset(emt_exec *ex);
// Staging while a span is measured or recorded: the device address of the
// recorded copy (NULL after counting, when not recording).
void *cu_graph_stage(emt_exec *ex, const void *src, size_t bytes);

// Copies `bytes` from the host into staging; returns the device copy (NULL
// with the context's error set on failure).
void *cu_stage(emt_exec *ex, const void *src, size_t bytes);
// Copies `bytes` from the host to device memory `dst` through staging (no wait).
void cu_stage_to(emt_exec *ex, void *dst, const void *src, size_t bytes);
// Device scratch of at least `floats` floats, grown (never shrunk) on demand.
float *cu_scratch(emt_exec *ex, size_t floats);
// At least `n` zeroed arrival counters for the split tensor-core products
// (cuda/matmul.cu), grown on demand like cu_scratch; each launch leaves them zero.
int32_t *cu_tc_arrivals(emt_exec *ex, size_t n);
// Host scratch of at least `n` int32 values.
int32_t *cu_host_index(emt_exec *ex, size_t n);

// elementwise.cu
void cu_embed(emt_exec *ex, const float *table, int32_t dim, const int32_t *tokens, int32_t n_rows, float *out);
void cu_embed_rows(emt_exec *ex, const float *table, int32_t dim, const int32_t *d_tokens, int32_t n_rows, float *out);
void cu_rmsnorm(emt_exec *ex, const float *x, const float *w, int32_t n_rows, int32_t dim, float eps, float *out);
void cu_rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
             const int32_t *positions, const float *inv_freq);
void cu_rope_dyn(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                 const emt_dyn_rows *rows, const float *inv_freq);
void cu_swiglu(emt_exec *ex, const float *g, const float *u, int64_t n, float *out);
void cu_geglu(emt_exec *ex, const float *g, const float *u, int64_t n, float *out);
void cu_add(emt_exec *ex, float *x, const float *y, int64_t n);
void cu_silu_residual(emt_exec *ex, const float *res, const float *pre, int64_t n, float *out);
void cu_scale(emt_exec *ex, float *x, int64_t n, float s);
void cu_softcap(emt_exec *ex, float *x, int64_t n, float cap);
void cu_round_bf16(emt_exec *ex, const float *x, int64_t n, uint16_t *out);
void cu_rope_round_kv(emt_exec *ex, const float *k, const float *v, int32_t n_rows, int32_t n_kv_heads,
                      int32_t head_dim, int32_t n_rot, const int32_t *positions, const emt_dyn_rows *rows,
                      const float *inv_freq, uint16_t *k_out, uint16_t *v_out);
void cu_rope_q_round_kv(emt_exec *ex, float *q, int32_t n_heads, const float *k, const float *v, int32_t n_rows,
                        int32_t n_kv_heads, int32_t head_dim, int32_t n_rot, const int32_t *positions,
                        const emt_dyn_rows *rows, const float *inv_freq, uint16_t *k_out, uint16_t *v_out);
void cu_set_kv_dtype(emt_exec *ex, emt_dtype dtype);

// matmul.cu
#define CU_WEIGHT_TYPES \
    ((1u << EMT_F16) | (1u << EMT_BF16) | (1u << EMT_Q8_0) | (1u << EMT_Q4_0) | (1u << EMT_Q4_1) | (1u << EMT_Q4_K))
void cu_matmul(emt_exec *ex, const float *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
               int32_t n_out, float *y, int exact);
void cu_matmul_q(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                 int32_t n_out, float *y);
void cu_matmul_q_add(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                     int32_t n_out, float *y, float *tmp);
void cu_matmul_q_multi(emt_exec *ex, int32_t n_mats, const emt_wmat *const *W, const float *const *bias,
                       const int32_t *n_out, const float *x, int32_t n_rows, int32_t n_in, float *const *y);
void cu_matmul_q_gated(emt_exec *ex, const emt_wmat *Wg, const float *bg, const emt_wmat *Wu, const float *bu,
                       const float *x, int32_t n_rows, int32_t n_in, int32_t n_out, int gelu, float *gate, float *up);
void cu_embed_q(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens, int32_t n_rows, float *out);
void cu_embed_device(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *d_tokens, int32_t n_rows,
                     float *out);

// step_ops.cu: the device step (one-pass top-k, acceptance, the commit gather)
void cu_topk_device(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k, const int32_t *id_map,
                    int32_t *ids, float *probs, float *entropy);
void cu_accept(emt_exec *ex, const emt_accept_desc *d, void *rec);
void cu_commit(emt_exec *ex, const emt_commit_desc *d, const void *rec);
void cu_gather_i32(emt_exec *ex, int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n);
void cu_write_i32(emt_exec *ex, int32_t *dst, const int32_t *src, int32_t n);
void cu_sample_root(emt_exec *ex, const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                    const int32_t *uniform, int32_t *token);
// backend_cuda.cu: the k-rescan top-k for k beyond the one-pass kernel's lists
__global__ void topk_kernel(const float *logits, int32_t vocab, int32_t k, int32_t *ids, float *probs, float *entropy);

// attention.cu
void cu_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                  int32_t n_rows, const uint8_t *mask, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                  float *out);
void cu_attention_softcap(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, float cap, float *out);
void cu_attention_window(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                         int32_t n_rows, const uint8_t *mask, const int32_t *positions, int32_t n_heads,
                         int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out);
void cu_attention_dyn(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                      const emt_dyn_rows *rows, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out);

// Fixed-order warp sums: a butterfly over lane distances 16, 8, 4, 2, 1, the
// same on every call, so a value's rounding never depends on the launch.
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) { // RMSNorm's sum of squares
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

#endif
