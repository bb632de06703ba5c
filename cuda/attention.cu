// Tree attention, flash-decoding style with the K/V of the shared context
// loaded once per block for every row of the tree. CPU twin: attn_task in
// src/backend/cpu/cpu_variant.h (one online softmax over the same keys in
// the same order, in blocks of 64; the two agree to float rounding, not bit
// for bit).
//
// Which keys, in which order: row i sees the cache prefix [0, n_prefix)
// (from its first prefix row f with a sliding window), then the new rows j
// (cache rows row0 + j) that the mask lets it see, in index order (NULL
// mask: j <= i). Call the t-th of those keys the row's key at list position
// t. For a tree node that list is exactly the key list of the AR step that
// would put the node's token at the same position (the prefix, then its
// ancestors, root first).
//
// The reduction depends only on list positions, never on the call's other
// rows, so a node's output is bit-identical to AR's at its position
// (tests/unit/test_cuda_kernels.c): a row's keys are cut into spans of
// ATTN_SPAN list positions, each span into steps of ATTN_KEYS (one key per
// lane); a step scores its keys (lane t: a sequential fmaf over the head
// dimension), takes the step's max and sum by fixed butterflies, and
// rescales the running (max, sum, weighted values) online, values summed
// key by key in list order. Each span ends in a partial (max, sum, values)
// per (row, head); the combine kernel merges a row's spans in span order.
//
// Work split (issue 34): one block per (KV head, span, group of queries),
// where the queries are every (row, query head of the GQA group) of the
// call, up to attn_queries(head_dim) of them per block (64 at head_dim 128).
// A step stages the prefix rows it covers into shared memory once, in
// 16-byte loads, for all those queries; keys past the prefix (a tree's own
// rows, different per row) are read from global memory, where they stay
// hot in L1/L2. A block loops over spans blockIdx.y, + gridDim.y, ... up to
// the longest key list, read on the device (attention_dyn's *d_len), so a
// replayed graph launches at most ATTN_MAX_SPAN_BLOCKS blocks per (KV head,
// query group), not one per span of the KV capacity.
#include "cuda_exec.h"

#include <string.h>

#include <math.h>

#define ATTN_KEYS 32             // keys per step: one per lane
#define ATTN_SPAN 512            // list positions per partial: 16 steps
#define ATTN_WARPS 8
#define ATTN_THREADS (ATTN_WARPS * 32)
#define ATTN_MAX_HEAD_DIM 512
#define ATTN_MAX_SPAN_BLOCKS 16  // blocks per (KV head, query group) looping over the spans
#define ATTN_SHARED_BUDGET 163840 // dynamic shared memory per block, within sm_80's and sm_90's opt-in limits

// Row strides of the staged tiles, in floats. K is read by lanes over keys,
// 16 bytes each: an odd number of 16-byte units per row puts 8 consecutive
// keys on 8 distinct bank quads. V, the queries and the accumulators are read
// by lanes over the head dimension (consecutive banks): whole 16-byte units.
__host__ __device__ inline int32_t attn_v_stride(int32_t hd) { return (hd + 3) / 4 * 4; }
__host__ __device__ inline int32_t attn_k_stride(int32_t hd) {
    const int32_t units = (hd + 3) / 4;
    return 4 * (units % 2 ? units : units + 1);
}
// Queries per block: as many as the shared-memory budget holds next to the
// K/V tiles (each query: its vector, its accumulators, its max and sum), a
// multiple of the warp count, at most 64.
static int32_t attn_queries(int32_t hd) {
    const long tiles = (long)ATTN_KEYS * (attn_k_stride(hd) + attn_v_stride(hd)) * 4;
    const long per_query = 2L * attn_v_stride(hd) * 4 + 8;
    long n = (ATTN_SHARED_BUDGET - tiles) / per_query / ATTN_WARPS * ATTN_WARPS;
    return (int32_t)(n < ATTN_WARPS ? ATTN_WARPS : n > 64 ? 64 : n);
}
static size_t attn_shared_bytes(int32_t hd, int32_t n_queries) {
    return sizeof(float) * ((size_t)ATTN_KEYS * (attn_k_stride(hd) + attn_v_stride(hd)) +
                            (size_t)n_queries * (2 * attn_v_stride(hd) + 2));
}

// With a sliding window (attention_window), row i's list starts at cache
// row first[i] (the first prefix row fewer than `window` positions back)
// and its new rows are only those inside the window; an AR step at the same
// position starts at the same position, so the steps and spans still match.
//
// The row's first prefix row f: first[row] (NULL: 0), which attention_dyn
// gives relative to its prefix length n_prefix = *d_len (the tree's depth
// less window - 1), so it is clamped to [0, n_prefix] on the device.
__device__ __forceinline__ int32_t first_row(const int32_t *first, int32_t row, const int32_t *d_len,
                                             int32_t n_prefix) {
    if (!first) return 0;
    const int32_t f = (d_len ? n_prefix : 0) + first[row];
    return f < 0 ? 0 : f > n_prefix ? n_prefix : f;
}

// The cache row of the row's key at position t. tree_keys: for each row,
// the visible new rows in index order (NULL: causal, row i sees 0..i); f:
// the row's first prefix row. The new rows' K/V are at cache rows row0..
// (row0 = n_prefix, or the fixed tree area of attention_dyn, whose
// n_prefix is read from device memory: *d_len).
__device__ __forceinline__ int32_t key_row(int32_t t, int32_t n_prefix, int32_t row0, const int32_t *tree_keys,
                                           int32_t n_rows, int32_t row, int32_t f) {
    if (t < n_prefix - f) return f + t;
    t -= n_prefix - f;
    return row0 + (tree_keys ? tree_keys[(size_t)row * n_rows + t] : t);
}

__device__ __forceinline__ int32_t keys_of_row(int32_t n_prefix, const int32_t *tree_count, int32_t row, int32_t f) {
    return n_prefix - f + (tree_count ? tree_count[row] : row + 1);
}

// Grid (n_kv_heads, span blocks, query groups); ATTN_THREADS threads; the
// dynamic shared memory of attn_shared_bytes(hd, n_queries). Query qi of the
// call is row qi / group, query head kv_head * group + qi % group.
__global__ void __launch_bounds__(ATTN_THREADS)
    attn_span_kernel(const float *q, const float *k, const float *v, const int32_t *d_len, int32_t n_prefix,
                     int32_t row0, int32_t n_rows, const int32_t *tree_keys, const int32_t *tree_count,
                     const int32_t *first, int32_t n_heads, int32_t n_kv_heads, int32_t hd, float scale, float cap,
                     int32_t n_queries, int32_t n_spans, float *part_acc, float *part_ml) {
    EMT_DYNAMIC_SHARED(float, smem);
    __shared__ float step_p[ATTN_WARPS][ATTN_KEYS]; // a warp's step: each key's weight and cache row
    __shared__ int32_t step_row[ATTN_WARPS][ATTN_KEYS];
    const int32_t kst = attn_k_stride(hd), vst = attn_v_stride(hd);
    float *ks = smem, *vs = ks + ATTN_KEYS * kst, *qs = vs + ATTN_KEYS * vst, *accs = qs + (size_t)n_queries * vst;
    float *ms = accs + (size_t)n_queries * vst, *ls = ms + n_queries;
    if (d_len) n_prefix = *d_len;
    const int32_t group = n_heads / n_kv_heads, kv_head = blockIdx.x, q_first = blockIdx.z * n_queries;
    const int32_t n_q = n_rows * group - q_first < n_queries ? n_rows * group - q_first : n_queries;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t stride = (size_t)n_kv_heads * hd, kv_off = (size_t)kv_head * hd;
    // 16-byte loads where every row starts on 16 bytes; the arithmetic is the same either way
    const bool vec = hd % 4 == 0 && (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0 && (uintptr_t)q % 16 == 0;
    // the block's longest key list; tiles start at its first row's first prefix row
    int32_t max_keys = 0;
    for (int32_t qi = 0; qi < n_q; qi++) {
        const int32_t row = (q_first + qi) / group, n = keys_of_row(n_prefix, tree_count, row, first_row(first, row, d_len, n_prefix));
        max_keys = n > max_keys ? n : max_keys;
    }
    const int32_t f0 = first_row(first, q_first / group, d_len, n_prefix);
    if ((int32_t)blockIdx.y * ATTN_SPAN >= max_keys) return; // the whole block: no span of its own
    for (int32_t i = threadIdx.x; i < n_q * hd; i += ATTN_THREADS) {
        const int32_t qi = i / hd, d = i % hd, row = (q_first + qi) / group;
        const int32_t head = kv_head * group + (q_first + qi) % group;
        emt_st(qs + (size_t)qi * vst + d, emt_ld(q + ((size_t)row * n_heads + head) * hd + d));
    }
    for (int32_t span = (int32_t)blockIdx.y; span * ATTN_SPAN < max_keys; span += (int32_t)gridDim.y) {
        __syncthreads(); // the previous span's partials are written
        for (int32_t i = threadIdx.x; i < n_q * vst; i += ATTN_THREADS) accs[i] = 0.0f;
        for (int32_t i = threadIdx.x; i < n_q; i += ATTN_THREADS) {
            ms[i] = -INFINITY;
            ls[i] = 0.0f;
        }
        const int32_t t_end = (span + 1) * ATTN_SPAN < max_keys ? (span + 1) * ATTN_SPAN : max_keys;
        for (int32_t t0 = span * ATTN_SPAN; t0 < t_end; t0 += ATTN_KEYS) {
            // the prefix rows [lo, hi) of this step, staged for every query
            const int32_t lo = f0 + t0, hi = lo + ATTN_KEYS < n_prefix ? lo + ATTN_KEYS : n_prefix;
            __syncthreads(); // the previous step's readers are done with the tiles
            if (vec) {
                const int32_t units = hd / 4;
                for (int32_t i = threadIdx.x; i < (hi - lo) * units; i += ATTN_THREADS) {
                    const int32_t r = i / units, u = i % units;
                    const size_t src = (size_t)(lo + r) * stride + kv_off;
                    emt_st((float4 *)(ks + (size_t)r * kst) + u, emt_ld((const float4 *)(k + src) + u));
                    emt_st((float4 *)(vs + (size_t)r * vst) + u, emt_ld((const float4 *)(v + src) + u));
                }
            } else {
                for (int32_t i = threadIdx.x; i < (hi - lo) * hd; i += ATTN_THREADS) {
                    const int32_t r = i / hd, d = i % hd;
                    const size_t src = (size_t)(lo + r) * stride + kv_off + d;
                    ks[(size_t)r * kst + d] = k[src];
                    vs[(size_t)r * vst + d] = v[src];
                }
            }
            __syncthreads();
            for (int32_t qi = warp; qi < n_q; qi += ATTN_WARPS) {
                const int32_t row = (q_first + qi) / group, f = first_row(first, row, d_len, n_prefix);
                const int32_t nk = keys_of_row(n_prefix, tree_count, row, f) - t0;
                if (nk <= 0) continue; // warp-uniform: this row's keys ended
                // scores: lane t scores the key at t0 + t
                int32_t r = -1;
                float s = -INFINITY;
                EMT_REQUEST_TAG(((uint32_t)t0 / ATTN_KEYS) * (uint32_t)n_queries + (uint32_t)qi + 1u);
                if (lane < nk) {
                    r = key_row(t0 + lane, n_prefix, row0, tree_keys, n_rows, row, f);
                    const float *qv = qs + (size_t)qi * vst;
                    // the staged prefix (shared memory) or a row of the tree (global): two paths, one arithmetic
                    const bool staged = r >= lo && r < hi;
                    const float *k_staged = ks + (size_t)(staged ? r - lo : 0) * kst;
                    const float *k_global = k + (size_t)r * stride + kv_off;
                    float dot = 0.0f;
                    if (vec) {
                        for (int32_t d = 0; d < hd; d += 4) {
                            const float4 a = emt_ld((const float4 *)(qv + d));
                            float4 b;
                            if (staged)
                                b = emt_ld((const float4 *)(k_staged + d));
                            else
                                b = emt_ld((const float4 *)(k_global + d));
                            dot = fmaf(a.x, b.x, dot);
                            dot = fmaf(a.y, b.y, dot);
                            dot = fmaf(a.z, b.z, dot);
                            dot = fmaf(a.w, b.w, dot);
                        }
                    } else {
                        for (int32_t d = 0; d < hd; d++) dot = fmaf(qv[d], staged ? k_staged[d] : k_global[d], dot);
                    }
                    s = dot * scale;
                    if (cap > 0.0f) s = cap * tanhf(s / cap);
                }
                const float m_old = ms[qi], l_old = ls[qi];
                const float m_new = fmaxf(m_old, warp_max(s));
                const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                const float p = lane < nk ? expf(s - m_new) : 0.0f;
                const float l_new = fmaf(l_old, alpha, warp_sum(p));
                __syncwarp(); // every lane has read the old state and the previous query's step
                step_p[warp][lane] = p;
                step_row[warp][lane] = r;
                if (lane == 0) {
                    ms[qi] = m_new;
                    ls[qi] = l_new;
                }
                __syncwarp();
                // weighted values: lanes over the dimensions, keys in list order
                const int32_t n_step = nk < ATTN_KEYS ? nk : ATTN_KEYS;
                float *acc = accs + (size_t)qi * vst;
                for (int32_t d = lane; d < hd; d += 32) {
                    float a = emt_ld(acc + d) * alpha;
                    for (int32_t j = 0; j < n_step; j++) {
                        const int32_t rj = step_row[warp][j]; // the same for every lane: a uniform branch
                        float vj;
                        if (rj >= lo && rj < hi)
                            vj = emt_ld(vs + (size_t)(rj - lo) * vst + d);
                        else
                            vj = emt_ld(v + (size_t)rj * stride + kv_off + d);
                        a = fmaf(step_p[warp][j], vj, a);
                    }
                    emt_st(acc + d, a);
                }
            }
        }
        __syncthreads();
        // the span's partials, for the queries with keys in it
        for (int32_t qi = warp; qi < n_q; qi += ATTN_WARPS) {
            const int32_t row = (q_first + qi) / group, head = kv_head * group + (q_first + qi) % group;
            if (keys_of_row(n_prefix, tree_count, row, first_row(first, row, d_len, n_prefix)) <= span * ATTN_SPAN) continue;
            const size_t part = ((size_t)row * n_heads + head) * n_spans + span;
            for (int32_t d = lane; d < hd; d += 32) emt_st(part_acc + part * hd + d, emt_ld(accs + (size_t)qi * vst + d));
            if (lane == 0) {
                emt_st(part_ml + part * 2, ms[qi]);
                emt_st(part_ml + part * 2 + 1, ls[qi]);
            }
        }
    }
}

// One block per (row, head): the row's spans merged in span order.
__global__ void __launch_bounds__(128)
    attn_combine_kernel(const int32_t *d_len, int32_t n_prefix, const int32_t *tree_count, const int32_t *first, int32_t n_heads, int32_t hd,
                        int32_t n_spans, const float *part_acc, const float *part_ml, float *out) {
    const int32_t row = blockIdx.x / n_heads;
    if (d_len) n_prefix = *d_len;
    const int32_t f = first_row(first, row, d_len, n_prefix);
    const int32_t nc = (keys_of_row(n_prefix, tree_count, row, f) + ATTN_SPAN - 1) / ATTN_SPAN;
    const float *ml = part_ml + (size_t)blockIdx.x * n_spans * 2;
    const float *acc = part_acc + (size_t)blockIdx.x * n_spans * hd;
    float m = -INFINITY;
    for (int32_t c = 0; c < nc; c++) m = fmaxf(m, emt_ld(ml + 2 * c));
    float l = 0.0f;
    for (int32_t c = 0; c < nc; c++) l = fmaf(emt_ld(ml + 2 * c + 1), expf(emt_ld(ml + 2 * c) - m), l);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int32_t c = 0; c < nc; c++) a = fmaf(emt_ld(acc + (size_t)c * hd + d), expf(ml[2 * c] - m), a);
        emt_st(out + (size_t)blockIdx.x * hd + d, a * inv);
    }
}

// Every attention op: n_prefix = *d_len when d_len is given (at most
// row0), else the argument; the new rows' K/V at cache rows row0... With
// d_len, `positions` are relative to it (the tree's depths).
static void attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, const int32_t *d_len,
                      int32_t n_prefix, int32_t row0, int32_t n_rows, const uint8_t *mask, const int32_t *positions,
                      int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    if (head_dim > ATTN_MAX_HEAD_DIM || n_kv_heads <= 0 || n_heads % n_kv_heads) {
        cu_fail(ex, "cuda attention: head_dim %d (at most %d), %d heads over %d kv heads not supported", head_dim,
                ATTN_MAX_HEAD_DIM, n_heads, n_kv_heads);
        return;
    }
    const int32_t *d_keys = NULL, *d_count = NULL, *d_first = NULL;
    if (window <= 0 && mask && ex->mask_rows == n_rows && ex->mask_epoch == ex->wait_epoch &&
        !memcmp(ex->mask_copy, mask, (size_t)n_rows * n_rows)) {
        // the same tree as the previous layer's call, staged since the last
        // wait (staging restarts only after one): its lists are still there
        d_keys = ex->mask_keys;
        d_count = d_keys + (size_t)n_rows * n_rows;
    } else if (mask || window > 0) {
        // row i's visible new rows (mask, else causal; inside the window),
        // then the counts, then (window) each row's first prefix row
        const size_t n_idx = (size_t)n_rows * n_rows + (size_t)n_rows * (window > 0 ? 2 : 1);
        int32_t *h = cu_host_index(ex, n_idx);
        if (!h) return;
        int32_t *count = h + (size_t)n_rows * n_rows, *first = count + n_rows;
        for (int32_t i = 0; i < n_rows; i++) {
            count[i] = 0;
            for (int32_t j = 0; j < n_rows; j++) {
                int visible = mask ? mask[(size_t)i * n_rows + j] : j <= i;
                if (visible && (window <= 0 || positions[i] - positions[j] < window))
                    h[(size_t)i * n_rows + count[i]++] = j;
            }
            if (window > 0) { // relative to *d_len (clamped on the device) or absolute
                int32_t f = positions[i] - window + 1;
                first[i] = d_len ? f : f < 0 ? 0 : f > n_prefix ? n_prefix : f;
            }
        }
        d_keys = (const int32_t *)cu_stage(ex, h, n_idx * sizeof(int32_t));
        if (!d_keys) return;
        d_count = d_keys + (size_t)n_rows * n_rows;
        if (window > 0) {
            d_first = d_count + n_rows; // lists of this window and these positions: not kept
        } else if ((size_t)n_rows * n_rows <= sizeof ex->mask_copy) {
            memcpy(ex->mask_copy, mask, (size_t)n_rows * n_rows);
            ex->mask_rows = n_rows;
            ex->mask_epoch = ex->wait_epoch;
            ex->mask_keys = d_keys;
        }
    }
    const int32_t max_prefix = d_len ? row0 : n_prefix;
    const int32_t n_spans = (max_prefix + n_rows + ATTN_SPAN - 1) / ATTN_SPAN;
    const int32_t n_queries = attn_queries(head_dim), group = n_heads / n_kv_heads;
    const int32_t n_groups = (n_rows * group + n_queries - 1) / n_queries;
    const size_t parts = (size_t)n_rows * n_heads * n_spans, shared = attn_shared_bytes(head_dim, n_queries);
    float *part_acc = cu_scratch(ex, parts * (head_dim + 2));
    if (!part_acc) return;
    float *part_ml = part_acc + parts * head_dim;
    if (shared > 48 * 1024 && shared > ex->attn_shared_optin) { // the kernel's opt-in, once per size and context
        const cudaError_t e = cudaFuncSetAttribute(attn_span_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)shared);
        if (e != cudaSuccess) {
            cu_set_error(ex, "cudaFuncSetAttribute(attn_span_kernel, max dynamic shared memory)", e);
            return;
        }
        ex->attn_shared_optin = shared;
    }
    const float scale = 1.0f / sqrtf((float)head_dim);
    dim3 grid((unsigned)n_kv_heads, (unsigned)(n_spans < ATTN_MAX_SPAN_BLOCKS ? n_spans : ATTN_MAX_SPAN_BLOCKS),
              (unsigned)n_groups);
    // ideal: the K/V rows the call can see and its queries read once (the
    // prefix length of attention_dyn is on the device: its capacity stands in)
    const double kv_bytes = 2.0 * sizeof(float) * ((double)max_prefix + n_rows) * n_kv_heads * head_dim;
    const double q_bytes = (double)sizeof(float) * n_rows * n_heads * head_dim;
    EMT_OP("ATTN", kv_bytes + q_bytes, n_rows, max_prefix, n_heads * head_dim);
    EMT_LAUNCH(attn_span_kernel, grid, ATTN_THREADS, shared, ex->stream, q, k_cache, v_cache, d_len, n_prefix, row0,
               n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, head_dim, scale, cap, n_queries, n_spans,
               part_acc, part_ml);
    EMT_OP("ATTN_COMBINE", q_bytes, n_rows, n_spans, n_heads * head_dim);
    EMT_LAUNCH(attn_combine_kernel, n_rows * n_heads, 128, 0, ex->stream, d_len, n_prefix, d_count, d_first,
               n_heads, head_dim, n_spans, part_acc, part_ml, out);
}

void cu_attention_window(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                         int32_t n_rows, const uint8_t *mask, const int32_t *positions, int32_t n_heads,
                         int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    attention(ex, q, k_cache, v_cache, NULL, n_prefix, n_prefix, n_rows, mask, positions, n_heads, n_kv_heads,
              head_dim, window, cap, out);
}

void cu_attention_dyn(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                      const emt_dyn_rows *rows, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    attention(ex, q, k_cache, v_cache, rows->len, 0, rows->row0, n_rows, mask, rows->offsets, n_heads, n_kv_heads,
              head_dim, window, cap, out);
}

void cu_attention_softcap(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                          int32_t n_prefix, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, float cap, float *out) {
    cu_attention_window(ex, q, k_cache, v_cache, n_prefix, n_rows, mask, NULL, n_heads, n_kv_heads, head_dim, 0, cap,
                        out);
}

void cu_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                  int32_t n_rows, const uint8_t *mask, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                  float *out) {
    cu_attention_softcap(ex, q, k_cache, v_cache, n_prefix, n_rows, mask, n_heads, n_kv_heads, head_dim, 0.0f, out);
}
