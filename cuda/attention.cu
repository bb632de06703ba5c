// Tree attention, flash-decoding style with the K/V of the shared context
// loaded once per block for every row of the tree. CPU twin: run_attention in
// src/backend/cpu/cpu_variant.h (one online softmax over the same keys in
// the same order, in blocks of 64; the two agree to float rounding, not bit
// for bit). Two kernels with the same keys, steps, spans and partials:
// attn_tc_span_kernel (below: QK^T and PV on tensor cores, for head_dim 32,
// 64, 128, 256 and 16-byte aligned K/V caches) and attn_span_kernel (FP32
// cores, every other case); a head width and cache always take the same one,
// AR step and verify alike. Both are templates over the caches' element type
// (set_kv_dtype: F32, or BF16 read as the F32 values it stands for; the CPU
// twin reads the same values). What follows describes the FP32 one.
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
// per (row, head); the combine kernel merges a row's spans in span order
// (the tensor-core kernel does it in the same launch: the last of a (KV
// head, query group)'s span blocks to arrive merges, same arithmetic; a
// block whose queries all have one span writes their outputs itself, the
// same bits as merging that span).
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
#include "bf16_split.h"

#include <string.h>

#include <math.h>

#define ATTN_KEYS 32             // keys per step: one per lane
// list positions per partial: 8 steps. 512 until the first GPU run (issue
// 34): a block's 16 steps in a row were the AR step's latency at long
// contexts; 256 doubles the blocks and halves the steps in a row, the
// partials (and their combine, merge_spans_warp) twice as many
#define ATTN_SPAN 256
#define ATTN_WARPS 8
#define ATTN_THREADS (ATTN_WARPS * 32)
#define ATTN_MAX_HEAD_DIM 512
#define ATTN_MAX_SPAN_BLOCKS 32  // blocks per (KV head, query group) looping over the spans
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

// K/V cache elements (set_kv_dtype): F32, or BF16 standing for the F32
// values they are (exactly). Both kernels are templates over the element
// type KV; a BF16 cache is read 16 bytes (8 values) at a time where the F32
// one reads 4 values.
__device__ __forceinline__ float bf16_low(uint32_t w) { return bits_to_float(w << 16); }
__device__ __forceinline__ float bf16_high(uint32_t w) { return bits_to_float(w & 0xffff0000u); }
__device__ __forceinline__ float kv_value(const float *p) { return emt_ld(p); }
__device__ __forceinline__ float kv_value(const uint16_t *p) { return bf16_to_float(emt_ld(p)); }
__device__ __forceinline__ float4 kv_quad(const float *p) { return emt_ld((const float4 *)p); }
__device__ __forceinline__ float4 kv_quad(const uint16_t *p) {
    const uint2 w = emt_ld((const uint2 *)p);
    return float4{ bf16_low(w.x), bf16_high(w.x), bf16_low(w.y), bf16_high(w.y) };
}
// one 16-byte load: 4 F32 values or 8 BF16 ones, as F32
__device__ __forceinline__ void kv_load16(const float *p, float (&x)[4]) {
    const float4 a = emt_ld((const float4 *)p);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
}
__device__ __forceinline__ void kv_load16(const uint16_t *p, float (&x)[8]) {
    const uint4 a = emt_ld((const uint4 *)p);
    const uint32_t w[4] = { a.x, a.y, a.z, a.w };
    for (int i = 0; i < 4; i++) x[2 * i] = bf16_low(w[i]), x[2 * i + 1] = bf16_high(w[i]);
}
// (the F32 instantiation's never-taken twin of the BF16 staging path)
__device__ __forceinline__ void kv_load16(const float *p, float (&x)[8]) {
    const float4 a = emt_ld((const float4 *)p), b = emt_ld((const float4 *)p + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ uint4 shfl_uint4(uint4 v, int src) {
    return uint4{ __shfl_sync(0xffffffffu, v.x, src), __shfl_sync(0xffffffffu, v.y, src),
                  __shfl_sync(0xffffffffu, v.z, src), __shfl_sync(0xffffffffu, v.w, src) };
}
// A BF16 cache's 16-byte load of 8 values makes two 16-byte units of a
// staged tile; a lane storing its own two would write every other unit of
// the warp's span (a 2-way bank conflict). Instead lane L stores unit
// 2 i0 + L, then 2 i0 + 32 + L, taken by shuffle from the lane that loaded
// it (items i0 + L/2, then i0 + 16 + L/2; item i's units are 2i and 2i + 1):
// consecutive lanes, consecutive units. Every lane of the warp calls it;
// items at or past `total` are not stored; addr(item, half) is a unit's place.
template <typename Addr>
__device__ __forceinline__ void store_units_spread(const uint4 (&unit)[2], int32_t i0, int32_t total, int lane,
                                                   Addr addr) {
    EMT_UNROLL
    for (int h = 0; h < 2; h++) {
        const int src = 16 * h + lane / 2;
        const uint4 a = shfl_uint4(unit[0], src), b = shfl_uint4(unit[1], src);
        if (i0 + src < total) emt_st(addr(i0 + src, lane & 1), lane & 1 ? b : a);
    }
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

// The longest key list of a block's queries q_first .. q_first + n_q - 1
// (query qi is row qi / group): how far its spans reach.
__device__ __forceinline__ int32_t block_max_keys(int32_t n_q, int32_t q_first, int32_t group, int32_t n_prefix,
                                                  const int32_t *tree_count, const int32_t *first, const int32_t *d_len) {
    int32_t max_keys = 0;
    for (int32_t qi = 0; qi < n_q; qi++) {
        const int32_t row = (q_first + qi) / group, n = keys_of_row(n_prefix, tree_count, row, first_row(first, row, d_len, n_prefix));
        max_keys = n > max_keys ? n : max_keys;
    }
    return max_keys;
}

// Grid (n_kv_heads, span blocks, query groups); ATTN_THREADS threads; the
// dynamic shared memory of attn_shared_bytes(hd, n_queries). Query qi of the
// call is row qi / group, query head kv_head * group + qi % group. KV: the
// caches' element type (float or BF16 bits); the tiles are F32 either way.
template <typename KV>
__global__ void __launch_bounds__(ATTN_THREADS)
    attn_span_kernel(const float *q, const KV *k, const KV *v, const int32_t *d_len, int32_t n_prefix,
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
    constexpr int32_t W = 16 / sizeof(KV); // values per 16-byte load
    const bool vec = hd % W == 0 && (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0 && (uintptr_t)q % 16 == 0;
    // tiles start at the block's first row's first prefix row
    const int32_t max_keys = block_max_keys(n_q, q_first, group, n_prefix, tree_count, first, d_len);
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
            if (vec && W == 8) { // BF16: 16-byte loads, stores spread over the warp (store_units_spread)
                const int32_t units = hd / 8, total = (hi - lo) * units;
                for (int32_t i0 = (int32_t)threadIdx.x - lane; i0 < total; i0 += ATTN_THREADS) { // warp-uniform
                    const int32_t i = i0 + lane, r = i / units, u = i % units;
                    float xk[8] = {}, xv[8] = {};
                    if (i < total) {
                        const size_t src = (size_t)(lo + r) * stride + kv_off + (size_t)8 * u;
                        kv_load16(k + src, xk);
                        kv_load16(v + src, xv);
                    }
                    const uint4 uk[2] = { { float_bits(xk[0]), float_bits(xk[1]), float_bits(xk[2]), float_bits(xk[3]) },
                                          { float_bits(xk[4]), float_bits(xk[5]), float_bits(xk[6]), float_bits(xk[7]) } };
                    const uint4 uv[2] = { { float_bits(xv[0]), float_bits(xv[1]), float_bits(xv[2]), float_bits(xv[3]) },
                                          { float_bits(xv[4]), float_bits(xv[5]), float_bits(xv[6]), float_bits(xv[7]) } };
                    store_units_spread(uk, i0, total, lane, [&](int32_t item, int half) {
                        return (uint4 *)(ks + (size_t)(item / units) * kst + 8 * (item % units) + 4 * half);
                    });
                    store_units_spread(uv, i0, total, lane, [&](int32_t item, int half) {
                        return (uint4 *)(vs + (size_t)(item / units) * vst + 8 * (item % units) + 4 * half);
                    });
                }
            } else if (vec) {
                const int32_t units = hd / W;
                for (int32_t i = threadIdx.x; i < (hi - lo) * units; i += ATTN_THREADS) {
                    const int32_t r = i / units, u = i % units;
                    const size_t src = (size_t)(lo + r) * stride + kv_off + (size_t)W * u;
                    float xk[W], xv[W];
                    kv_load16(k + src, xk);
                    kv_load16(v + src, xv);
                    EMT_UNROLL
                    for (int e = 0; e < W; e += 4) {
                        emt_st((float4 *)(ks + (size_t)r * kst + W * u + e), float4{ xk[e], xk[e + 1], xk[e + 2], xk[e + 3] });
                        emt_st((float4 *)(vs + (size_t)r * vst + W * u + e), float4{ xv[e], xv[e + 1], xv[e + 2], xv[e + 3] });
                    }
                }
            } else {
                for (int32_t i = threadIdx.x; i < (hi - lo) * hd; i += ATTN_THREADS) {
                    const int32_t r = i / hd, d = i % hd;
                    const size_t src = (size_t)(lo + r) * stride + kv_off + d;
                    ks[(size_t)r * kst + d] = kv_value(k + src);
                    vs[(size_t)r * vst + d] = kv_value(v + src);
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
                    const KV *k_global = k + (size_t)r * stride + kv_off;
                    float dot = 0.0f;
                    if (vec) {
                        for (int32_t d = 0; d < hd; d += 4) {
                            const float4 a = emt_ld((const float4 *)(qv + d));
                            float4 b;
                            if (staged)
                                b = emt_ld((const float4 *)(k_staged + d));
                            else
                                b = kv_quad(k_global + d);
                            dot = fmaf(a.x, b.x, dot);
                            dot = fmaf(a.y, b.y, dot);
                            dot = fmaf(a.z, b.z, dot);
                            dot = fmaf(a.w, b.w, dot);
                        }
                    } else {
                        for (int32_t d = 0; d < hd; d++) dot = fmaf(qv[d], staged ? k_staged[d] : kv_value(k_global + d), dot);
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
                            vj = kv_value(v + (size_t)rj * stride + kv_off + d);
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

// The number of spans (partials) of a row's key list: both combines' loop bound.
__device__ __forceinline__ int32_t spans_of_row(const int32_t *first, int32_t row, const int32_t *d_len, int32_t n_prefix,
                                                const int32_t *tree_count) {
    const int32_t f = first_row(first, row, d_len, n_prefix);
    return (keys_of_row(n_prefix, tree_count, row, f) + ATTN_SPAN - 1) / ATTN_SPAN;
}

// The spans of (row, head) `rh` = row * n_heads + head merged in span
// order into its output row, by threads first.. of a stride of `threads`
// (the CUDA-core kernel's combine launch; the tensor-core kernel's fused
// combine, merge_spans_warp, has the same arithmetic).
__device__ __forceinline__ void merge_spans(int32_t rh, int32_t row, int32_t n_prefix, const int32_t *d_len,
                                            const int32_t *tree_count, const int32_t *first, int32_t hd, int32_t n_spans,
                                            const float *part_acc, const float *part_ml, float *out, int32_t first_thread,
                                            int32_t threads) {
    const int32_t nc = spans_of_row(first, row, d_len, n_prefix, tree_count);
    const float *ml = part_ml + (size_t)rh * n_spans * 2;
    const float *acc = part_acc + (size_t)rh * n_spans * hd;
    float m = -INFINITY;
    for (int32_t c = 0; c < nc; c++) m = fmaxf(m, emt_ld(ml + 2 * c));
    float l = 0.0f;
    for (int32_t c = 0; c < nc; c++) l = fmaf(emt_ld(ml + 2 * c + 1), expf(emt_ld(ml + 2 * c) - m), l);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t d = first_thread; d < hd; d += threads) {
        float a = 0.0f;
        for (int32_t c = 0; c < nc; c++) a = fmaf(emt_ld(acc + (size_t)c * hd + d), expf(emt_ld(ml + 2 * c) - m), a);
        emt_st(out + (size_t)rh * hd + d, a * inv);
    }
}

// The tensor-core kernel's fused combine: one warp merges (row, head) rh's
// nc spans in span order, merge_spans' arithmetic to the bit (the maximum
// is exact in any order; the sums of l and of each value dimension are the
// same fmaf chains over the spans in order), but latency-bound no more
// (issue 34): the lanes load the spans' (max, sum) 32 at a time, and each
// lane loads 8 spans' values of its dimensions before it sums them, where
// merge_spans waits for one load per span and loop. A call of its own
// (noinline), so that ptxas allocates the span loop's registers without it
// (inlined, the BF16 head_dim 64 instance spilled).
template <int HD>
__device__ EMT_NOINLINE void merge_spans_warp(int32_t rh, int32_t nc, int32_t n_spans, const float *part_acc,
                                              const float *part_ml, float *out) {
    constexpr int DL = HD / 32; // dimensions per lane: lane + 32 i
    constexpr int BATCH = 8;    // spans whose values are loaded before they are summed
    const int lane = threadIdx.x % 32;
    const float *ml = part_ml + (size_t)rh * n_spans * 2, *acc = part_acc + (size_t)rh * n_spans * HD;
    float m = -INFINITY; // (max, sum) pairs in 8-byte loads: consecutive lanes, consecutive pairs
    for (int32_t c = lane; c < nc; c += 32) m = fmaxf(m, emt_ld_cg((const float2 *)(ml + 2 * c)).x);
    m = warp_max(m);
    float l = 0.0f, a[DL];
    EMT_UNROLL
    for (int i = 0; i < DL; i++) a[i] = 0.0f;
    for (int32_t c0 = 0; c0 < nc; c0 += 32) { // warp-uniform
        const int32_t n = nc - c0 < 32 ? nc - c0 : 32;
        float l_c = 0.0f, e_c = 0.0f; // lane j: span c0 + j's sum and weight
        if (lane < n) {
            const float2 span_ml = emt_ld_cg((const float2 *)(ml + 2 * (c0 + lane)));
            l_c = span_ml.y;
            e_c = expf(span_ml.x - m);
        }
        for (int32_t j0 = 0; j0 < n; j0 += BATCH) {
            float x[BATCH][DL];
            EMT_UNROLL
            for (int j = 0; j < BATCH; j++)
                EMT_UNROLL
                for (int i = 0; i < DL; i++)
                    x[j][i] = j0 + j < n ? emt_ld_cg(acc + (size_t)(c0 + j0 + j) * HD + lane + 32 * i) : 0.0f;
            EMT_UNROLL
            for (int j = 0; j < BATCH; j++) {
                const float e = __shfl_sync(0xffffffffu, e_c, (j0 + j) & 31), lj = __shfl_sync(0xffffffffu, l_c, (j0 + j) & 31);
                if (j0 + j >= n) continue; // warp-uniform
                l = fmaf(lj, e, l);
                EMT_UNROLL
                for (int i = 0; i < DL; i++) a[i] = fmaf(x[j][i], e, a[i]);
            }
        }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    EMT_UNROLL
    for (int i = 0; i < DL; i++) emt_st(out + (size_t)rh * HD + lane + 32 * i, a[i] * inv);
}

// ------------------------------------------------ tree attention on tensor cores
// QK^T and PV on the warp's mma.m16n8k16 (emt_mma_bf16_m16n8k16,
// cuda/cuda_launch.h), for head_dim 32, 64, 128 and 256 with 16-byte aligned
// K and V caches (attention() picks it; the AR step and a verify always take
// the same kernel). Same grid, spans, partials and combine as
// attn_span_kernel; a warp owns an m-tile of 16 queries of the block.
//
// F32 fidelity: queries, keys, values and probabilities are split into three
// BF16 parts (x = hi + mid + lo exactly, bf16_split.h) and each product a b is
// summed as the six part products whose magnitude is above 2^-24 |a b|
// (lo*hi, mid*mid, hi*lo, mid*hi, hi*mid, hi*hi, in that order per k-tile), so
// a score or a weighted value is an FP32-rounded dot product up to 3 * 2^-24
// relative per term: within the CPU twin's 1e-5 (test_cuda_kernels). A BF16
// cache's keys and values are their own one part: three part products
// (mma_split3), the queries' and probabilities' three parts against it.
//
// Tree == AR, by construction: the mma's D[m][n] depends only on row m of A,
// column n of B and C[m][n]. Scores: A = the m-tile's queries, column n of B
// = the key at list position t0 + n of the query (zero past its list). PV:
// A = the probabilities, column d of B = value dimension d of the keys at
// the step's list positions (zero past the list), C = the query's running
// sum. A step's B is built per group of queries whose 32 list positions map
// to the same cache rows (every query of the m-tile when the step lies in
// the shared prefix; a tree's own rows split them up), from the staged tile
// when the group's keys are its rows in order, else from global memory:
// two paths, one value per element. The mma runs for all 16 rows; only the
// group's rows keep their D. So a query's scores, probabilities and sums
// are a function of its own query, its own key list and the list position
// only, whatever else the launch holds; the AR step runs this kernel with
// its one row (padded to the m-tile) and gets the same bits.
//
// Shared memory: the K tile and the staged queries as rows of three BF16
// planes (TCA row stride = 64 mod 128 bytes: the 16-byte fragment reads of
// two rows fall in different bank halves); V as pairs of keys per dimension
// (a 32-bit B register = two consecutive keys), pair rows 32 mod 128 bytes
// apart (the 4 pair rows a warp's B read touches are on distinct banks).
#define TCA_WARPS 4
#define TCA_THREADS (TCA_WARPS * 32)
#define TCA_MAX_QUERIES (16 * TCA_WARPS) // one m-tile per warp

__host__ __device__ constexpr int32_t tca_k_stride(int32_t hd) { return 6 * hd + ((64 - 6 * hd % 128) % 128 + 128) % 128; }
__host__ __device__ constexpr int32_t tca_v_stride(int32_t hd) { return 4 * hd + 32; }
__host__ __device__ constexpr int32_t tca_rows_stride() { return ATTN_KEYS + 1; } // a query's step rows: no bank conflicts down a column
// A BF16 cache's staged K row: its one BF16 plane (the mid and lo planes of
// an F32 key are never there), 64 mod 128 bytes apart like the F32 rows.
__host__ __device__ constexpr int32_t tca_kb_stride(int32_t hd) { return 2 * hd + ((64 - 2 * hd % 128) % 128 + 128) % 128; }
// K tile row stride and V planes of a tile: three BF16 planes over an F32
// cache, one over a BF16 cache.
__host__ __device__ constexpr int32_t tca_k_tile_stride(int32_t hd, bool bf16) { return bf16 ? tca_kb_stride(hd) : tca_k_stride(hd); }
__host__ __device__ constexpr int32_t tca_v_planes(bool bf16) { return bf16 ? 1 : 3; }
// The verify's register prefetch (all warps load step s + 1 while they
// compute step s): a BF16 cache up to head_dim 128, whose next step fits the
// registers next to the step's (ptxas: no spills on sm_90, 8 bytes on sm_80
// at head_dim 128); every other instance
// stages a verify's step between two barriers.
__host__ __device__ constexpr bool tca_prefetches(int32_t hd, bool bf16) { return bf16 && hd <= 128; }
static bool tca_takes(int32_t hd, const float *k, const float *v) {
    return (hd == 32 || hd == 64 || hd == 128 || hd == 256) && (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0;
}
// One K/V tile buffer; the warps' step rows.
static size_t tca_tile_bytes(int32_t hd, bool bf16) {
    return (size_t)ATTN_KEYS * tca_k_tile_stride(hd, bf16) + tca_v_planes(bf16) * (ATTN_KEYS / 2) * (size_t)tca_v_stride(hd);
}
static size_t tca_rows_bytes() { return (size_t)TCA_WARPS * 16 * tca_rows_stride() * 4; }
// Staged query rows: all of a block's, or a call's few (the AR step: then
// two tile buffers and two blocks per SM fit); a zero row follows them.
static int32_t tca_query_rows(int32_t n_queries, int32_t call_queries) {
    return call_queries < n_queries ? call_queries : n_queries;
}
// Queries per block: the tile buffers and as many queries as the budget
// holds next to them (at most one m-tile per warp); a call of at most 16
// queries (the AR step) takes one m-tile and two tile buffers, a larger call
// two where its instance prefetches (tca_prefetches), else one.
static int32_t tca_queries(int32_t hd, int32_t call_queries, bool bf16) {
    if (call_queries <= 16) return 16;
    const long bufs = tca_prefetches(hd, bf16) ? 2 : 1;
    long n = (ATTN_SHARED_BUDGET - bufs * (long)tca_tile_bytes(hd, bf16) - (long)tca_rows_bytes()) / tca_k_stride(hd) - 1;
    n = n / 16 * 16; // the zero row apart
    return (int32_t)(n > TCA_MAX_QUERIES ? TCA_MAX_QUERIES : n < 16 ? 16 : n);
}
static size_t tca_shared_bytes(int32_t hd, int32_t q_rows, int32_t n_bufs, bool bf16) {
    return n_bufs * tca_tile_bytes(hd, bf16) + tca_rows_bytes() + (size_t)(q_rows + 1) * tca_k_stride(hd);
}
static int32_t tca_buffers(int32_t hd, int32_t call_queries, int32_t q_rows, bool bf16) {
    return (call_queries <= 16 || tca_prefetches(hd, bf16)) && tca_shared_bytes(hd, q_rows, 2, bf16) <= ATTN_SHARED_BUDGET
               ? 2 : 1;
}

// One k-tile of a product over BF16 parts: D += A B as the six part products
// above 2^-24 of the whole, smallest first.
__device__ __forceinline__ void mma_split6(float d[4], const uint32_t (&a)[3][4], const uint32_t (&b)[3][2]) {
    emt_mma_bf16_m16n8k16(d, a[2], b[0], d);
    emt_mma_bf16_m16n8k16(d, a[1], b[1], d);
    emt_mma_bf16_m16n8k16(d, a[0], b[2], d);
    emt_mma_bf16_m16n8k16(d, a[1], b[0], d);
    emt_mma_bf16_m16n8k16(d, a[0], b[1], d);
    emt_mma_bf16_m16n8k16(d, a[0], b[0], d);
}
// The same over a BF16 cache's keys or values, which are one part: three
// products (the query's or probability's parts, smallest first).
__device__ __forceinline__ void mma_split3(float d[4], const uint32_t (&a)[3][4], const uint32_t (&b)[2]) {
    emt_mma_bf16_m16n8k16(d, a[2], b, d);
    emt_mma_bf16_m16n8k16(d, a[1], b, d);
    emt_mma_bf16_m16n8k16(d, a[0], b, d);
}
__device__ __forceinline__ uint32_t pack_bf16(uint32_t lo, uint32_t hi) { return lo | hi << 16; }
// Four FP32 values as the three planes' 8-byte halves of a fragment.
__device__ __forceinline__ void split4(const float4 &x, uint2 (&out)[3]) {
    const float v[4] = { x.x, x.y, x.z, x.w };
    uint32_t p[3][4];
    for (int e = 0; e < 4; e++) split_bf16x3(v[e], &p[0][e], &p[1][e], &p[2][e]);
    for (int s = 0; s < 3; s++) out[s] = uint2{ pack_bf16(p[s][0], p[s][1]), pack_bf16(p[s][2], p[s][3]) };
}
// Where dims 4u..4u+3 of a row go in its staged plane: a 32-dim chunk's lane
// t holds dims 4t..4t+3 (k-tile 0) and 16+4t..16+4t+3 (k-tile 1) in one
// 16-byte fragment, so that the lanes' global loads of either half are 64
// contiguous bytes per row.
__device__ __forceinline__ int32_t tca_unit_offset(int32_t u) { return 64 * (u / 8) + 16 * (u % 4) + 8 * (u % 8 / 4); }

// Grid (n_kv_heads, span blocks, query groups); TCA_THREADS threads; the
// dynamic shared memory of tca_shared_bytes(HD, q_rows, n_bufs, BF16 cache): q_rows of the
// block's n_queries queries are staged (the others are zeros: the AR step
// stages its few), then a zero row. Query qi of the
// call is row qi / group, query head kv_head * group + qi % group.
// (__launch_bounds__ with one block per SM asked for: ptxas otherwise caps
// some instances at 168 registers, three blocks' worth, and spills; with
// 255 at most two blocks still fit an SM's registers)
template <int HD, typename KV>
__global__ void __launch_bounds__(TCA_THREADS, 1)
    attn_tc_span_kernel(const float *q, const KV *k, const KV *v, const int32_t *d_len, int32_t n_prefix,
                        int32_t row0, int32_t n_rows, const int32_t *tree_keys, const int32_t *tree_count,
                        const int32_t *first, int32_t n_heads, int32_t n_kv_heads, float scale, float cap,
                        int32_t n_queries, int32_t q_rows, int32_t n_bufs, int32_t n_spans, float *part_acc,
                        float *part_ml, int32_t *arrivals, float *out) {
    // a BF16 cache: K and V are their own high part (one plane each in the
    // tile), staged from 16-byte loads of 8 values, and each product takes
    // three mmas instead of six
    constexpr bool BF = sizeof(KV) == 2;
    constexpr int32_t KST = tca_k_stride(HD), VST = tca_v_stride(HD), RST = tca_rows_stride();
    constexpr int32_t KTS = tca_k_tile_stride(HD, BF); // the K tile's rows (KST: the staged queries')
    constexpr int NC = HD / 32, ND = HD / 8, PLANE = HD * 2; // 32-dim chunks, 8-dim n-tiles, bytes of a plane
    constexpr size_t TILE = (size_t)ATTN_KEYS * KTS + tca_v_planes(BF) * (ATTN_KEYS / 2) * VST; // one K/V tile buffer
    // the verify's prefetch (tca_prefetches): each thread's share of a step's
    // 16-byte K units and V key pairs (two units each), held across a step
    constexpr bool PREFETCH = tca_prefetches(HD, BF);
    constexpr int KI = PREFETCH ? (ATTN_KEYS * (HD / 8) + TCA_THREADS - 1) / TCA_THREADS : 1;
    constexpr int VI = PREFETCH ? ((ATTN_KEYS / 2) * (HD / 8) + TCA_THREADS - 1) / TCA_THREADS : 1;
    EMT_DYNAMIC_SHARED(uint4, tca_smem);
    uint8_t *tiles = (uint8_t *)tca_smem, *qs = tiles + n_bufs * TILE;
    int32_t *step_rows = (int32_t *)(qs + (size_t)(q_rows + 1) * KST);
    if (d_len) n_prefix = *d_len;
    const int32_t group = n_heads / n_kv_heads, kv_head = blockIdx.x, q_first = blockIdx.z * n_queries;
    const int32_t n_q = n_rows * group - q_first < n_queries ? n_rows * group - q_first : n_queries;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const size_t stride = (size_t)n_kv_heads * HD, kv_off = (size_t)kv_head * HD;
    const int32_t max_keys = block_max_keys(n_q, q_first, group, n_prefix, tree_count, first, d_len);
    const int32_t f0 = first_row(first, q_first / group, d_len, n_prefix);
    if ((int32_t)blockIdx.y * ATTN_SPAN >= max_keys) return; // the whole block: no span of its own
    // every query of the block has one span (the AR step and a verify below
    // ATTN_SPAN keys): the block writes the outputs itself, without partials,
    // fence, arrival or combine (issue 34); bit-identical to the combine of a
    // launch whose other queries have more spans (one span's weight is 1)
    const bool single_span = max_keys <= ATTN_SPAN;
    uint32_t tag = 1; // the harness's request regions (EMT_REQUEST_TAG); unused by nvcc
    (void)tag;
    EMT_REQUEST_TAG(tag++);
    // the block's queries, split, one row of three planes each (zeros past the call's)
    const bool q_vec = (uintptr_t)q % 16 == 0;
    for (int32_t i = threadIdx.x; i < (q_rows + 1) * (HD / 4); i += TCA_THREADS) {
        const int32_t qi = i / (HD / 4), u = i % (HD / 4);
        float4 x = { 0, 0, 0, 0 };
        if (qi < n_q) {
            const int32_t row = (q_first + qi) / group, head = kv_head * group + (q_first + qi) % group;
            const float *src = q + ((size_t)row * n_heads + head) * HD + 4 * u;
            x = q_vec ? emt_ld((const float4 *)src) : float4{ src[0], src[1], src[2], src[3] };
        }
        uint2 parts[3];
        split4(x, parts);
        EMT_UNROLL
        for (int s = 0; s < 3; s++) emt_st((uint2 *)(qs + (size_t)qi * KST + s * PLANE + tca_unit_offset(u)), parts[s]);
    }
    // this warp's m-tile: queries m0..m0+15; lane (g, t) holds rows g and g+8 of its fragments
    const int32_t m0 = warp * 16;
    const bool warp_live = m0 < n_q; // the whole warp's
    // the staged rows of queries m0+g and m0+g+8: past q_rows, the zero row q_rows
    const int32_t q_row[2] = { m0 + g < q_rows ? m0 + g : q_rows, m0 + g + 8 < q_rows ? m0 + g + 8 : q_rows };
    int32_t *rows = step_rows + warp * 16 * RST;
    int32_t row_of[2] = { -1, -1 }, f_of[2] = { 0, 0 }, keys_of[2] = { 0, 0 }, head_of[2] = { 0, 0 };
    EMT_UNROLL
    for (int h = 0; h < 2; h++) {
        const int32_t qi = m0 + g + 8 * h;
        if (qi >= n_q) continue;
        row_of[h] = (q_first + qi) / group;
        head_of[h] = kv_head * group + (q_first + qi) % group;
        f_of[h] = first_row(first, row_of[h], d_len, n_prefix);
        keys_of[h] = keys_of_row(n_prefix, tree_count, row_of[h], f_of[h]);
    }
    // A BF16 step's rows [lo, hi) in 16-byte loads of 8 values: K unit i
    // (row i / (HD / 8), unit i % (HD / 8)), and V key pair i's two rows
    // (keys 2 (i / (HD / 8)) and + 1: zeros past hi); zeros past the totals.
    auto k_unit = [&](int32_t lo, int32_t i, int32_t k_total) {
        uint4 x = { 0, 0, 0, 0 };
        if (i < k_total) x = emt_ld((const uint4 *)(k + (size_t)(lo + i / (HD / 8)) * stride + kv_off) + i % (HD / 8));
        return x;
    };
    auto v_pair = [&](int32_t lo, int32_t hi, int32_t i, int32_t v_total, uint4 &a, uint4 &b) {
        const int32_t r = 2 * (i / (HD / 8)), w = i % (HD / 8);
        a = b = uint4{ 0, 0, 0, 0 };
        if (i < v_total) {
            a = emt_ld((const uint4 *)(v + (size_t)(lo + r) * stride + kv_off) + w);
            if (r + 1 < hi - lo) b = emt_ld((const uint4 *)(v + (size_t)(lo + r + 1) * stride + kv_off) + w);
        }
    };
    // ... and their stores into a tile. K: lane quad = w % 4 holds units 2q,
    // 2q + 1 of a 32-dim chunk; fragment t (16 bytes at 16t) is units t and
    // t + 4 (tca_unit_offset): lanes quad and quad ^ 2 trade a half and each
    // stores one whole fragment (t = 2 quad, or 2 (quad - 2) + 1), the quad's
    // 64 bytes in one go. V: key pairs, a dimension's word holding keys r (low
    // half) and r + 1, spread over the lanes (store_units_spread). Every lane
    // of the warp calls them (shuffles); i0 is the warp's first item.
    auto k_unit_store = [&](uint8_t *ks, uint4 x, int32_t i, int32_t k_total) {
        const int32_t r = i / (HD / 8), w = i % (HD / 8), quad = w % 4;
        const uint2 mine = quad < 2 ? uint2{ x.x, x.y } : uint2{ x.z, x.w }, give = quad < 2 ? uint2{ x.z, x.w } : uint2{ x.x, x.y };
        const uint2 got = { __shfl_xor_sync(0xffffffffu, give.x, 2), __shfl_xor_sync(0xffffffffu, give.y, 2) };
        const int32_t frag = quad < 2 ? 2 * quad : 2 * (quad - 2) + 1;
        if (i < k_total)
            emt_st((uint4 *)(ks + (size_t)r * KTS + 64 * (w / 4) + 16 * frag),
                   quad < 2 ? uint4{ mine.x, mine.y, got.x, got.y } : uint4{ got.x, got.y, mine.x, mine.y });
    };
    auto v_pair_store = [&](uint8_t *vp, uint4 a, uint4 b, int32_t i0, int32_t v_total) {
        const uint4 pairs[2] = { { (a.x & 0xffffu) | b.x << 16, a.x >> 16 | (b.x & 0xffff0000u),
                                   (a.y & 0xffffu) | b.y << 16, a.y >> 16 | (b.y & 0xffff0000u) },
                                 { (a.z & 0xffffu) | b.z << 16, a.z >> 16 | (b.z & 0xffff0000u),
                                   (a.w & 0xffffu) | b.w << 16, a.w >> 16 | (b.w & 0xffff0000u) } };
        store_units_spread(pairs, i0, v_total, lane, [&](int32_t item, int half) {
            return (uint4 *)(vp + (size_t)(item / (HD / 8)) * VST) + 2 * (item % (HD / 8)) + half;
        });
    };
    auto step_hi = [&](int32_t lo) { return lo + ATTN_KEYS < n_prefix ? lo + ATTN_KEYS : n_prefix; };
    // stage step t0's prefix rows into one tile buffer (K split into three
    // planes per row, V into three planes of key pairs; over a BF16 cache one
    // plane each), by threads first_thread.. first_thread + count - 1
    auto stage = [&](int32_t t0, uint8_t *tile, int first_thread, int count) {
        const int32_t lo = f0 + t0, hi = step_hi(lo);
        uint8_t *ks = tile, *vp = tile + ATTN_KEYS * KTS;
        if (BF) { // warp-uniform loops (shuffles), HD / 8 a multiple of 4
            const int32_t k_total = (hi - lo) * (HD / 8);
            for (int32_t i0 = (int32_t)threadIdx.x - first_thread - lane; i0 < k_total; i0 += count)
                k_unit_store(ks, k_unit(lo, i0 + lane, k_total), i0 + lane, k_total);
            const int32_t v_total = (hi - lo + 1) / 2 * (HD / 8);
            for (int32_t i0 = (int32_t)threadIdx.x - first_thread - lane; i0 < v_total; i0 += count) {
                uint4 a, b;
                v_pair(lo, hi, i0 + lane, v_total, a, b);
                v_pair_store(vp, a, b, i0, v_total);
            }
        } else {
            for (int32_t i = (int32_t)threadIdx.x - first_thread; i < (hi - lo) * (HD / 4); i += count) {
                const int32_t r = i / (HD / 4), u = i % (HD / 4);
                uint2 parts[3];
                split4(emt_ld((const float4 *)(k + (size_t)(lo + r) * stride + kv_off) + u), parts);
                EMT_UNROLL
                for (int s = 0; s < 3; s++) emt_st((uint2 *)(ks + (size_t)r * KTS + s * PLANE + tca_unit_offset(u)), parts[s]);
            }
            for (int32_t i = (int32_t)threadIdx.x - first_thread; i < (hi - lo + 1) / 2 * (HD / 4); i += count) {
                const int32_t j = i / (HD / 4), c = i % (HD / 4), r = 2 * j;
                const float4 a = emt_ld((const float4 *)(v + (size_t)(lo + r) * stride + kv_off) + c);
                const float4 b = r + 1 < hi - lo ? emt_ld((const float4 *)(v + (size_t)(lo + r + 1) * stride + kv_off) + c)
                                                 : float4{ 0, 0, 0, 0 };
                const float av[4] = { a.x, a.y, a.z, a.w }, bv[4] = { b.x, b.y, b.z, b.w };
                uint32_t pa[3][4], pb[3][4];
                EMT_UNROLL
                for (int e = 0; e < 4; e++) {
                    split_bf16x3(av[e], &pa[0][e], &pa[1][e], &pa[2][e]);
                    split_bf16x3(bv[e], &pb[0][e], &pb[1][e], &pb[2][e]);
                }
                EMT_UNROLL
                for (int s = 0; s < 3; s++)
                    emt_st((uint4 *)(vp + ((size_t)s * (ATTN_KEYS / 2) + j) * VST) + c,
                           uint4{ pack_bf16(pa[s][0], pb[s][0]), pack_bf16(pa[s][1], pb[s][1]),
                                  pack_bf16(pa[s][2], pb[s][2]), pack_bf16(pa[s][3], pb[s][3]) });
            }
        }
    };
    for (int32_t span = (int32_t)blockIdx.y; span * ATTN_SPAN < max_keys; span += (int32_t)gridDim.y) {
        float acc[ND][4];
        EMT_UNROLL
        for (int nd = 0; nd < ND; nd++)
            EMT_UNROLL
            for (int i = 0; i < 4; i++) acc[nd][i] = 0.0f;
        float m_run[2] = { -INFINITY, -INFINITY }, l_run[2] = { 0.0f, 0.0f };
        const int32_t t_end = (span + 1) * ATTN_SPAN < max_keys ? (span + 1) * ATTN_SPAN : max_keys;
        // the next step's K units and V pairs, loaded while this one computes
        // (prefetch: two tile buffers; since issue 34 the AR step's one
        // m-tile too: its warps 1-3 staged the next step in rounds of load,
        // shuffle, store, 9 dependent round trips a step, where the registers
        // take one; the tiles hold the same values either way)
        const bool prefetch = PREFETCH && n_bufs > 1; // the launch's
        uint4 next_k[KI] = {}, next_va[VI] = {}, next_vb[VI] = {};
        // a step's rows [lo1, step_hi(lo1)) into the registers: every load issued before any is used
        auto load_step = [&](int32_t lo1) {
            const int32_t hi1 = step_hi(lo1);
            const int32_t k_total = (hi1 - lo1) * (HD / 8), v_total = (hi1 - lo1 + 1) / 2 * (HD / 8);
            EMT_UNROLL
            for (int j = 0; j < KI; j++) next_k[j] = k_unit(lo1, warp * 32 + j * TCA_THREADS + lane, k_total);
            EMT_UNROLL
            for (int j = 0; j < VI; j++) v_pair(lo1, hi1, warp * 32 + j * TCA_THREADS + lane, v_total, next_va[j], next_vb[j]);
        };
        if (n_bufs > 1) { // the span's first step, staged by every warp (prefetch: loaded, stored in the loop)
            EMT_REQUEST_TAG(tag++);
            __syncthreads(); // the previous span's readers are done with the tiles
            if (prefetch)
                load_step(f0 + span * ATTN_SPAN);
            else
                stage(span * ATTN_SPAN, tiles, 0, TCA_THREADS);
        }
        for (int32_t t0 = span * ATTN_SPAN, step = 0; t0 < t_end; t0 += ATTN_KEYS, step++) {
            // the prefix rows [lo, hi) of this step, split and staged into shared
            // memory for every query by all the block's warps; with two tile
            // buffers, either warps 1.. stage the next step while warp 0
            // computes this one (the AR step's one m-tile where the instance
            // does not prefetch: F32 caches, head_dim 256), or (prefetch) every
            // warp loads the next step's rows into registers before it computes
            // this one and stores them into the other buffer after
            const int32_t lo = f0 + t0, hi = step_hi(lo);
            uint8_t *tile = tiles + (size_t)(step % n_bufs) * TILE;
            const uint8_t *ks = tile, *vp = tile + ATTN_KEYS * KTS;
            EMT_REQUEST_TAG(tag++);
            if (prefetch) { // this step's rows, loaded during the previous one (the first: before the loop)
                const int32_t k_total = (hi - lo) * (HD / 8), v_total = (hi - lo + 1) / 2 * (HD / 8);
                EMT_UNROLL
                for (int j = 0; j < KI; j++)
                    k_unit_store(tile, next_k[j], warp * 32 + j * TCA_THREADS + lane, k_total);
                EMT_UNROLL
                for (int j = 0; j < VI; j++)
                    v_pair_store(tile + ATTN_KEYS * KTS, next_va[j], next_vb[j], warp * 32 + j * TCA_THREADS, v_total);
            }
            __syncthreads(); // this step's tiles are staged; the readers of the buffer staged next are done
            if (n_bufs == 1) {
                stage(t0, tile, 0, TCA_THREADS);
                __syncthreads();
            } else if (prefetch) {
                if (t0 + ATTN_KEYS < t_end) load_step(lo + ATTN_KEYS); // the next step's rows (its own lo, hi)
            } else if (warp > 0 && t0 + ATTN_KEYS < t_end) {
                stage(t0 + ATTN_KEYS, tiles + (size_t)((step + 1) % n_bufs) * TILE, 32, TCA_THREADS - 32);
            }
            if (!warp_live) continue;
            // each query's cache rows at the step's list positions (-1: past its list)
            EMT_REQUEST_TAG(tag++);
            for (int m = 0; m < 16; m++) {
                const int32_t qi = m0 + m;
                int32_t r = -1;
                if (qi < n_q) {
                    const int32_t row = (q_first + qi) / group, f = first_row(first, row, d_len, n_prefix);
                    if (t0 + lane < keys_of_row(n_prefix, tree_count, row, f))
                        r = key_row(t0 + lane, n_prefix, row0, tree_keys, n_rows, row, f);
                }
                emt_st(rows + m * RST + lane, r);
            }
            const int32_t nk[2] = { keys_of[0] - t0, keys_of[1] - t0 }; // this step's keys of rows g, g+8
            const bool live[2] = { nk[0] > 0, nk[1] > 0 };
            uint32_t pending = __ballot_sync(0xffffffffu, lane < 16 && m0 + lane < n_q && rows[lane * RST] >= 0) & 0xffffu;
            __syncwarp();
            if (!pending) continue; // the whole warp's: every row of the m-tile has ended
            // the groups of queries with the same keys this step; scores per group
            uint32_t groups[16], staged_groups = 0;
            int keys_of_group[16];
            int n_groups = 0;
            float sc[4][4] = {};
            while (pending) {
                const int leader = __ffs(pending) - 1;
                bool same = false;
                if (lane < 16 && (pending >> lane & 1)) {
                    same = true;
                    for (int n = 0; n < ATTN_KEYS; n++) same &= rows[lane * RST + n] == rows[leader * RST + n];
                }
                const uint32_t members = __ballot_sync(0xffffffffu, same) & 0xffffu;
                const int32_t my_row = rows[leader * RST + lane];
                const bool staged = __all_sync(0xffffffffu, my_row == lo + lane && my_row < hi);
                // the group's keys this step (its list's positions are a prefix of the step's):
                // n-tiles and k-tiles wholly past them are zeros and are skipped (the same
                // for every call: it depends on the list only)
                const int group_keys = __popc(__ballot_sync(0xffffffffu, my_row >= 0));
                pending &= ~members;
                groups[n_groups] = members;
                keys_of_group[n_groups] = group_keys;
                staged_groups |= (uint32_t)staged << n_groups;
                n_groups++;
                float d[4][4];
                EMT_UNROLL
                for (int nt = 0; nt < 4; nt++)
                    EMT_UNROLL
                    for (int i = 0; i < 4; i++) d[nt][i] = 0.0f;
                const int32_t first_key = rows[leader * RST]; // a row of the list, for the lanes past it
                EMT_UNROLL
                for (int c = 0; c < NC; c++) {
                    uint4 qa[3], qb[3];
                    EMT_UNROLL
                    for (int s = 0; s < 3; s++) {
                        qa[s] = emt_ld((const uint4 *)(qs + (size_t)q_row[0] * KST + s * PLANE + 64 * c + 16 * t));
                        qb[s] = emt_ld((const uint4 *)(qs + (size_t)q_row[1] * KST + s * PLANE + 64 * c + 16 * t));
                    }
                    // k-tile 0: dims 4t..4t+3 of the chunk; k-tile 1: 16+4t..16+4t+3 (tca_unit_offset)
                    const uint32_t a0[3][4] = { { qa[0].x, qb[0].x, qa[0].y, qb[0].y }, { qa[1].x, qb[1].x, qa[1].y, qb[1].y },
                                                { qa[2].x, qb[2].x, qa[2].y, qb[2].y } };
                    const uint32_t a1[3][4] = { { qa[0].z, qb[0].z, qa[0].w, qb[0].w }, { qa[1].z, qb[1].z, qa[1].w, qb[1].w },
                                                { qa[2].z, qb[2].z, qa[2].w, qb[2].w } };
                    EMT_UNROLL
                    for (int nt = 0; nt < 4; nt++) {
                        if (8 * nt >= group_keys) break; // the whole warp's
                        uint4 kb[3];
                        if (BF) {
                            if (staged) {
                                kb[0] = emt_ld((const uint4 *)(ks + (size_t)(8 * nt + g) * KTS + 64 * c + 16 * t));
                            } else { // 8 bytes of each half of the chunk's 32 dims (the staged layout's order)
                                const int32_t r = rows[leader * RST + 8 * nt + g];
                                const KV *src = k + (size_t)(r >= 0 ? r : first_key) * stride + kv_off + 32 * c + 4 * t;
                                uint2 x0 = emt_ld((const uint2 *)src), x1 = emt_ld((const uint2 *)(src + 16));
                                if (r < 0) x0 = x1 = uint2{ 0, 0 };
                                kb[0] = uint4{ x0.x, x0.y, x1.x, x1.y };
                            }
                            const uint32_t b0[2] = { kb[0].x, kb[0].y }, b1[2] = { kb[0].z, kb[0].w };
                            mma_split3(d[nt], a0, b0);
                            mma_split3(d[nt], a1, b1);
                        } else {
                            if (staged) {
                                EMT_UNROLL
                                for (int s = 0; s < 3; s++)
                                    kb[s] = emt_ld((const uint4 *)(ks + (size_t)(8 * nt + g) * KTS + s * PLANE + 64 * c + 16 * t));
                            } else { // a key of the tree, or a list that is not the tile's rows in order
                                const int32_t r = rows[leader * RST + 8 * nt + g];
                                const float *src = (const float *)(k + (size_t)(r >= 0 ? r : first_key) * stride + kv_off + 32 * c + 4 * t);
                                float4 x0 = emt_ld((const float4 *)src), x1 = emt_ld((const float4 *)(src + 16));
                                if (r < 0) x0 = x1 = float4{ 0, 0, 0, 0 };
                                uint2 h0[3], h1[3];
                                split4(x0, h0);
                                split4(x1, h1);
                                EMT_UNROLL
                                for (int s = 0; s < 3; s++) kb[s] = uint4{ h0[s].x, h0[s].y, h1[s].x, h1[s].y };
                            }
                            const uint32_t b0[3][2] = { { kb[0].x, kb[0].y }, { kb[1].x, kb[1].y }, { kb[2].x, kb[2].y } };
                            const uint32_t b1[3][2] = { { kb[0].z, kb[0].w }, { kb[1].z, kb[1].w }, { kb[2].z, kb[2].w } };
                            mma_split6(d[nt], a0, b0);
                            mma_split6(d[nt], a1, b1);
                        }
                    }
                }
                EMT_UNROLL
                for (int nt = 0; nt < 4; nt++)
                    EMT_UNROLL
                    for (int i = 0; i < 4; i++)
                        if (members >> (g + 8 * (i >> 1)) & 1) sc[nt][i] = d[nt][i];
            }
            // online softmax per row: lane (g, t) holds keys 8nt + 2t, +1 of rows g (i = 0, 1) and g+8 (i = 2, 3)
            float p[4][4], alpha[2], m_new[2], sum[2] = { 0.0f, 0.0f };
            EMT_UNROLL
            for (int h = 0; h < 2; h++) {
                float mx = -INFINITY;
                EMT_UNROLL
                for (int nt = 0; nt < 4; nt++)
                    for (int i = 2 * h; i < 2 * h + 2; i++) {
                        float s = -INFINITY;
                        if (8 * nt + 2 * t + (i & 1) < nk[h]) {
                            s = sc[nt][i] * scale;
                            if (cap > 0.0f) s = cap * tanhf(s / cap);
                        }
                        p[nt][i] = s;
                        mx = fmaxf(mx, s);
                    }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                m_new[h] = fmaxf(m_run[h], mx);
                alpha[h] = !live[h] ? 1.0f : m_run[h] == -INFINITY ? 0.0f : expf(m_run[h] - m_new[h]);
                EMT_UNROLL
                for (int nt = 0; nt < 4; nt++)
                    for (int i = 2 * h; i < 2 * h + 2; i++) {
                        p[nt][i] = p[nt][i] == -INFINITY ? 0.0f : expf(p[nt][i] - m_new[h]);
                        sum[h] += p[nt][i];
                    }
                sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
                sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
                if (live[h]) {
                    m_run[h] = m_new[h];
                    l_run[h] = fmaf(l_run[h], alpha[h], sum[h]);
                }
            }
            // the probabilities as A fragments (three parts): k-tile kk = keys 16kk..16kk+15 = n-tiles 2kk, 2kk+1
            uint32_t pa[2][3][4];
            EMT_UNROLL
            for (int kk = 0; kk < 2; kk++)
                EMT_UNROLL
                for (int i = 0; i < 4; i++) { // a[i]: row g (i even) or g+8, keys 2t.. (i < 2) or 2t+8..
                    const int nt = 2 * kk + (i >> 1), e = 2 * (i & 1);
                    uint32_t x[3], y[3];
                    split_bf16x3(p[nt][e], &x[0], &x[1], &x[2]);
                    split_bf16x3(p[nt][e + 1], &y[0], &y[1], &y[2]);
                    EMT_UNROLL
                    for (int s = 0; s < 3; s++) pa[kk][s][i] = pack_bf16(x[s], y[s]);
                }
            EMT_UNROLL
            for (int nd = 0; nd < ND; nd++)
                EMT_UNROLL
                for (int i = 0; i < 4; i++) acc[nd][i] *= alpha[i >> 1];
            // weighted values per group: C = the running sums, kept for the group's rows
            for (int gi = 0; gi < n_groups; gi++) {
                const uint32_t members = groups[gi];
                const int leader = __ffs(members) - 1;
                const bool staged = staged_groups >> gi & 1;
                const int group_keys = keys_of_group[gi];
                const int32_t first_key = rows[leader * RST];
                int32_t key_r[2][4]; // keys 16kk + 2t, +1, +8, +9 of the group's list
                EMT_UNROLL
                for (int kk = 0; kk < 2; kk++)
                    EMT_UNROLL
                    for (int j = 0; j < 4; j++) key_r[kk][j] = rows[leader * RST + 16 * kk + 2 * t + (j & 1) + 8 * (j >> 1)];
                const bool keep[2] = { (members >> g & 1) != 0, (members >> (g + 8) & 1) != 0 };
                EMT_UNROLL
                for (int nd = 0; nd < ND; nd++) {
                    float d[4] = { acc[nd][0], acc[nd][1], acc[nd][2], acc[nd][3] };
                    EMT_UNROLL
                    for (int kk = 0; kk < 2; kk++) {
                        if (16 * kk >= group_keys) break; // the whole warp's
                        uint32_t b[3][2];
                        if (BF) {
                            if (staged) {
                                EMT_UNROLL
                                for (int j = 0; j < 2; j++)
                                    b[0][j] = emt_ld((const uint32_t *)(vp + ((size_t)8 * kk + t + 4 * j) * VST) + 8 * nd + g);
                            } else {
                                uint32_t x[4];
                                EMT_UNROLL
                                for (int j = 0; j < 4; j++) {
                                    const int32_t r = key_r[kk][j];
                                    x[j] = emt_ld((const uint16_t *)(v + (size_t)(r >= 0 ? r : first_key) * stride + kv_off + 8 * nd + g));
                                    if (r < 0) x[j] = 0;
                                }
                                b[0][0] = pack_bf16(x[0], x[1]), b[0][1] = pack_bf16(x[2], x[3]);
                            }
                            mma_split3(d, pa[kk], b[0]);
                        } else {
                            if (staged) {
                                EMT_UNROLL
                                for (int s = 0; s < 3; s++)
                                    EMT_UNROLL
                                    for (int j = 0; j < 2; j++)
                                        b[s][j] = emt_ld((const uint32_t *)(vp + ((size_t)s * (ATTN_KEYS / 2) + 8 * kk + t + 4 * j) * VST) +
                                                         8 * nd + g);
                            } else {
                                uint32_t x[4][3];
                                EMT_UNROLL
                                for (int j = 0; j < 4; j++) {
                                    const int32_t r = key_r[kk][j];
                                    float val = emt_ld((const float *)(v + (size_t)(r >= 0 ? r : first_key) * stride + kv_off + 8 * nd + g));
                                    if (r < 0) val = 0.0f;
                                    split_bf16x3(val, &x[j][0], &x[j][1], &x[j][2]);
                                }
                                EMT_UNROLL
                                for (int s = 0; s < 3; s++) b[s][0] = pack_bf16(x[0][s], x[1][s]), b[s][1] = pack_bf16(x[2][s], x[3][s]);
                            }
                            mma_split6(d, pa[kk], b);
                        }
                    }
                    EMT_UNROLL
                    for (int i = 0; i < 4; i++)
                        if (keep[i >> 1]) acc[nd][i] = d[i];
                }
            }
        }
        // the span's partials, for the queries with keys in it
        if (warp_live) {
            EMT_REQUEST_TAG(tag++);
            EMT_UNROLL
            for (int h = 0; h < 2; h++) {
                if (row_of[h] < 0 || keys_of[h] <= span * ATTN_SPAN) continue;
                if (single_span) { // the output: merge_spans' arithmetic over one span, whose weight is expf(0) = 1
                    const float l = fmaf(l_run[h], 1.0f, 0.0f), inv = l > 0.0f ? 1.0f / l : 0.0f;
                    float *o = out + ((size_t)row_of[h] * n_heads + head_of[h]) * HD + 2 * t;
                    EMT_UNROLL
                    for (int nd = 0; nd < ND; nd++)
                        emt_st((float2 *)(o + 8 * nd), float2{ fmaf(acc[nd][2 * h], 1.0f, 0.0f) * inv,
                                                               fmaf(acc[nd][2 * h + 1], 1.0f, 0.0f) * inv });
                    continue;
                }
                const size_t part = ((size_t)row_of[h] * n_heads + head_of[h]) * n_spans + span;
                EMT_UNROLL
                for (int nd = 0; nd < ND; nd++)
                    emt_st((float2 *)(part_acc + part * HD + 8 * nd + 2 * t), float2{ acc[nd][2 * h], acc[nd][2 * h + 1] });
                if (t == 0) {
                    emt_st(part_ml + part * 2, m_run[h]);
                    emt_st(part_ml + part * 2 + 1, l_run[h]);
                }
            }
        }
    }
    // the combine, fused: the last of the (KV head, query group)'s span
    // blocks to arrive merges each of its queries' spans in span order
    // (threadFenceReduction, as the split products: each block's partials
    // are visible device-wide before its arrival is counted); the blocks
    // with a span are those below the group's longest list
    if (single_span) return; // the outputs are written; the arrival count stays 0
    __shared__ int last_arrival;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const int32_t spans = (max_keys + ATTN_SPAN - 1) / ATTN_SPAN;
        const int32_t live = spans < (int32_t)gridDim.y ? spans : (int32_t)gridDim.y;
        int32_t *arrival = arrivals + (size_t)blockIdx.z * gridDim.x + blockIdx.x;
        last_arrival = atomicAdd(arrival, 1) == live - 1;
        if (last_arrival) *arrival = 0; // for the next launch (no other block of the group is left)
    }
    __syncthreads();
    if (!last_arrival) return;
    __threadfence();
    EMT_REQUEST_TAG(tag++);
    for (int32_t qi = warp; qi < n_q; qi += TCA_WARPS) { // a warp per query
        const int32_t row = (q_first + qi) / group, head = kv_head * group + (q_first + qi) % group;
        merge_spans_warp<HD>(row * n_heads + head, spans_of_row(first, row, d_len, n_prefix, tree_count), n_spans,
                             part_acc, part_ml, out);
    }
}

// One block per (row, head): the row's spans merged in span order (the
// CUDA-core span kernel's second launch).
__global__ void __launch_bounds__(128)
    attn_combine_kernel(const int32_t *d_len, int32_t n_prefix, const int32_t *tree_count, const int32_t *first, int32_t n_heads, int32_t hd,
                        int32_t n_spans, const float *part_acc, const float *part_ml, float *out) {
    if (d_len) n_prefix = *d_len;
    merge_spans(blockIdx.x, blockIdx.x / n_heads, n_prefix, d_len, tree_count, first, hd, n_spans, part_acc,
                       part_ml, out, threadIdx.x, blockDim.x);
}

// a comma inside EMT_LAUNCH's kernel argument (a macro argument is split at
// commas before it is expanded)
#define EMT_TEMPLATE_COMMA ,

// The tensor-core span kernel for head dim HD and cache elements KV
// (variant: its opt-in bit).
template <int HD, typename KV>
static void launch_tca(emt_exec *ex, int variant, dim3 grid, size_t shared, const float *q, const KV *k,
                       const KV *v, const int32_t *d_len, int32_t n_prefix, int32_t row0, int32_t n_rows,
                       const int32_t *tree_keys, const int32_t *tree_count, const int32_t *first, int32_t n_heads,
                       int32_t n_kv_heads, float scale, float cap, int32_t n_queries, int32_t q_rows, int32_t n_bufs,
                       int32_t n_spans, float *part_acc, float *part_ml, float *out, double ideal_bytes,
                       int32_t max_prefix) {
    int32_t *arrivals = cu_tc_arrivals(ex, (size_t)grid.x * grid.z); // the fused combine's, per (KV head, query group)
    if (!arrivals) return; // an error, or a capture that cannot grow them: it runs directly
    if (shared > 48 * 1024 && !(ex->attn_tc_shared_optin & (1u << variant))) { // the budget: AR and verify sizes differ
        const cudaError_t e = cudaFuncSetAttribute(attn_tc_span_kernel<HD, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   ATTN_SHARED_BUDGET);
        if (e != cudaSuccess) {
            cu_set_error(ex, "cudaFuncSetAttribute(attn_tc_span_kernel, max dynamic shared memory)", e);
            return;
        }
        ex->attn_tc_shared_optin |= 1u << variant;
    }
    (void)ideal_bytes, (void)max_prefix; // the harness's op record only (EMT_OP is empty with nvcc)
    EMT_OP(sizeof(KV) == 2 ? "ATTN_BF16" : "ATTN", ideal_bytes, n_rows, max_prefix, n_heads * HD);
    EMT_LAUNCH(attn_tc_span_kernel<HD EMT_TEMPLATE_COMMA KV>, grid, TCA_THREADS, shared, ex->stream, q, k, v, d_len, n_prefix, row0, n_rows,
               tree_keys, tree_count, first, n_heads, n_kv_heads, scale, cap, n_queries, q_rows, n_bufs, n_spans,
               part_acc, part_ml, arrivals, out);
}

// Every attention op: n_prefix = *d_len when d_len is given (at most
// row0), else the argument; the new rows' K/V at cache rows row0... With
// d_len, `positions` are relative to it (the tree's depths).
// KV: the caches' element type (ex->kv_bf16 picks it).
template <typename KV>
static void attention(emt_exec *ex, const float *q, const KV *k_cache, const KV *v_cache, const int32_t *d_len,
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
    const bool tc = tca_takes(head_dim, (const float *)k_cache, (const float *)v_cache);
    const bool bf16 = sizeof(KV) == 2;
    const int32_t group = n_heads / n_kv_heads;
    const int32_t n_queries = tc ? tca_queries(head_dim, n_rows * group, bf16) : attn_queries(head_dim);
    const int32_t n_groups = (n_rows * group + n_queries - 1) / n_queries;
    const size_t parts = (size_t)n_rows * n_heads * n_spans;
    const int32_t q_rows = tca_query_rows(n_queries, n_rows * group);
    const int32_t n_bufs = tca_buffers(head_dim, n_rows * group, q_rows, bf16);
    const size_t shared = tc ? tca_shared_bytes(head_dim, q_rows, n_bufs, bf16) : attn_shared_bytes(head_dim, n_queries);
    float *part_acc = cu_scratch(ex, parts * (head_dim + 2));
    if (!part_acc) return;
    float *part_ml = part_acc + parts * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    dim3 grid((unsigned)n_kv_heads, (unsigned)(n_spans < ATTN_MAX_SPAN_BLOCKS ? n_spans : ATTN_MAX_SPAN_BLOCKS),
              (unsigned)n_groups);
    // ideal: the K/V rows the call can see and its queries read once, and
    // (the tensor-core kernel, its combine fused) its output written once (the
    // prefix length of attention_dyn is on the device: its capacity stands in)
    const double kv_bytes = 2.0 * sizeof(KV) * ((double)max_prefix + n_rows) * n_kv_heads * head_dim;
    const int variant_base = sizeof(KV) == 2 ? 4 : 0; // the BF16 kernels' opt-in bits follow the F32 ones'
    const double q_bytes = (double)sizeof(float) * n_rows * n_heads * head_dim;
    if (tc) {
        switch (head_dim) {
        case 32: launch_tca<32>(ex, variant_base + 0, grid, shared, q, k_cache, v_cache, d_len, n_prefix, row0, n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, scale, cap, n_queries, q_rows, n_bufs, n_spans, part_acc, part_ml, out, kv_bytes + 2 * q_bytes, max_prefix); break;
        case 64: launch_tca<64>(ex, variant_base + 1, grid, shared, q, k_cache, v_cache, d_len, n_prefix, row0, n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, scale, cap, n_queries, q_rows, n_bufs, n_spans, part_acc, part_ml, out, kv_bytes + 2 * q_bytes, max_prefix); break;
        case 128: launch_tca<128>(ex, variant_base + 2, grid, shared, q, k_cache, v_cache, d_len, n_prefix, row0, n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, scale, cap, n_queries, q_rows, n_bufs, n_spans, part_acc, part_ml, out, kv_bytes + 2 * q_bytes, max_prefix); break;
        default: launch_tca<256>(ex, variant_base + 3, grid, shared, q, k_cache, v_cache, d_len, n_prefix, row0, n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, scale, cap, n_queries, q_rows, n_bufs, n_spans, part_acc, part_ml, out, kv_bytes + 2 * q_bytes, max_prefix); break;
        }
    } else {
        size_t *optin = &ex->attn_shared_optin[sizeof(KV) == 2];
        if (shared > 48 * 1024 && shared > *optin) { // the kernel's opt-in, once per size and context
            const cudaError_t e = cudaFuncSetAttribute(attn_span_kernel<KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)shared);
            if (e != cudaSuccess) {
                cu_set_error(ex, "cudaFuncSetAttribute(attn_span_kernel, max dynamic shared memory)", e);
                return;
            }
            *optin = shared;
        }
        EMT_OP(sizeof(KV) == 2 ? "ATTN_BF16" : "ATTN", kv_bytes + q_bytes, n_rows, max_prefix, n_heads * head_dim);
        EMT_LAUNCH(attn_span_kernel<KV>, grid, ATTN_THREADS, shared, ex->stream, q, k_cache, v_cache, d_len, n_prefix, row0,
                   n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, head_dim, scale, cap, n_queries, n_spans,
                   part_acc, part_ml);
        EMT_OP("ATTN_COMBINE", q_bytes, n_rows, n_spans, n_heads * head_dim);
        EMT_LAUNCH(attn_combine_kernel, n_rows * n_heads, 128, 0, ex->stream, d_len, n_prefix, d_count, d_first,
                   n_heads, head_dim, n_spans, part_acc, part_ml, out);
    }
}

void cu_attention_window(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                         int32_t n_rows, const uint8_t *mask, const int32_t *positions, int32_t n_heads,
                         int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    if (ex->kv_bf16)
        attention(ex, q, (const uint16_t *)(const void *)k_cache, (const uint16_t *)(const void *)v_cache, NULL,
                  n_prefix, n_prefix, n_rows, mask, positions, n_heads, n_kv_heads, head_dim, window, cap, out);
    else
        attention(ex, q, k_cache, v_cache, NULL, n_prefix, n_prefix, n_rows, mask, positions, n_heads, n_kv_heads,
                  head_dim, window, cap, out);
}

void cu_attention_dyn(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache,
                      const emt_dyn_rows *rows, int32_t n_rows, const uint8_t *mask, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, int32_t window, float cap, float *out) {
    if (ex->kv_bf16)
        attention(ex, q, (const uint16_t *)(const void *)k_cache, (const uint16_t *)(const void *)v_cache, rows->len,
                  0, rows->row0, n_rows, mask, rows->offsets, n_heads, n_kv_heads, head_dim, window, cap, out);
    else
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
