// Tree attention, flash-decoding style: the keys a query row sees are split
// into chunks at absolute positions, each chunk reduced by its own block to
// a partial (max, sum, weighted values), then the partials combined in chunk
// order. CPU twin: attn_task in src/backend/cpu/cpu_variant.h (one online
// softmax over the same keys in the same order, in blocks of 64).
//
// Which keys, in which order: row i sees the cache prefix [0, n_prefix),
// then the new rows j (cache rows n_prefix + j) that the mask lets it see, in
// index order (NULL mask: j <= i). Call the t-th of those keys the row's key
// at position t. For a tree node that list is exactly the key list of the AR
// step that would put the node's token at the same position (the prefix,
// then its ancestors, root first), so a chunk c holds the keys at positions
// [c*ATTN_CHUNK, (c+1)*ATTN_CHUNK) in both cases and a node's output is
// bit-identical to AR's at its position (tests/unit/test_cuda_kernels.c).
// No score buffer over the context: a block keeps its chunk's scores in
// shared memory; what goes to global memory is (head_dim + 2) floats per
// chunk, row and head.
#include "cuda_exec.h"

#include <string.h>

#include <math.h>

#define ATTN_CHUNK 256   // keys per chunk (positions [c*256, (c+1)*256))
#define ATTN_THREADS 128 // 4 warps
#define ATTN_MAX_HEAD_DIM 512

// With a sliding window (attention_window), row i's list starts at cache
// row first[i] (the first prefix row fewer than `window` positions back)
// and its new rows are only those inside the window; an AR step at the same
// position starts at the same position, so the chunks still match.
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

// One block per (row, head) x chunk: grid (n_rows * n_heads, n_chunks), so
// the blocks reading one chunk of K/V run next to each other. With d_len
// the grid covers the longest prefix (the KV capacity) and the blocks past
// a row's keys return at once.
__global__ void __launch_bounds__(ATTN_THREADS)
    attn_chunk_kernel(const float *q, const float *k, const float *v, const int32_t *d_len, int32_t n_prefix,
                      int32_t row0, int32_t n_rows,
                      const int32_t *tree_keys, const int32_t *tree_count, const int32_t *first, int32_t n_heads,
                      int32_t n_kv_heads, int32_t hd, float scale, float cap, float *part_acc, float *part_ml) {
    __shared__ float qs[ATTN_MAX_HEAD_DIM];
    __shared__ float p[ATTN_CHUNK];
    __shared__ int32_t rows[ATTN_CHUNK];
    const int32_t row = blockIdx.x / n_heads, head = blockIdx.x % n_heads, c = blockIdx.y;
    if (d_len) n_prefix = *d_len;
    const int32_t f = first_row(first, row, d_len, n_prefix);
    const int32_t n_keys = keys_of_row(n_prefix, tree_count, row, f), t0 = c * ATTN_CHUNK;
    if (t0 >= n_keys) return; // past this row's keys: the combine does not read it
    const int32_t nk = n_keys - t0 < ATTN_CHUNK ? n_keys - t0 : ATTN_CHUNK;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const size_t stride = (size_t)n_kv_heads * hd, kv_off = (size_t)(head / (n_heads / n_kv_heads)) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[((size_t)row * n_heads + head) * hd + d];
    for (int32_t t = threadIdx.x; t < nk; t += blockDim.x) rows[t] = key_row(t0 + t, n_prefix, row0, tree_keys, n_rows, row, f);
    __syncthreads();
    // scores: one warp per key, lanes over head_dim, a fixed butterfly
    for (int32_t t = warp; t < nk; t += ATTN_THREADS / 32) {
        const float *kt = k + (size_t)rows[t] * stride + kv_off;
        float dot = 0.0f;
        for (int32_t d = lane; d < hd; d += 32) dot = fmaf(qs[d], kt[d], dot);
        float s = warp_sum(dot) * scale;
        if (cap > 0.0f) s = cap * tanhf(s / cap);
        if (lane == 0) p[t] = s;
    }
    __syncthreads();
    // chunk max and sum of exponentials: warp 0, lanes over keys
    if (warp == 0) {
        float m = -INFINITY;
        for (int32_t t = lane; t < nk; t += 32) m = fmaxf(m, p[t]);
        m = warp_max(m);
        float l = 0.0f;
        for (int32_t t = lane; t < nk; t += 32) {
            p[t] = expf(p[t] - m);
            l += p[t];
        }
        l = warp_sum(l);
        if (lane == 0) {
            part_ml[((size_t)blockIdx.x * gridDim.y + c) * 2] = m;
            part_ml[((size_t)blockIdx.x * gridDim.y + c) * 2 + 1] = l;
        }
    }
    __syncthreads();
    // weighted values: a thread per dimension, keys in order
    float *acc = part_acc + ((size_t)blockIdx.x * gridDim.y + c) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int32_t t = 0; t < nk; t++) a = fmaf(p[t], v[(size_t)rows[t] * stride + kv_off + d], a);
        acc[d] = a;
    }
}

// One block per (row, head): the row's chunks combined in chunk order.
__global__ void __launch_bounds__(ATTN_THREADS)
    attn_combine_kernel(const int32_t *d_len, int32_t n_prefix, const int32_t *tree_count, const int32_t *first, int32_t n_heads, int32_t hd,
                        int32_t n_chunks, const float *part_acc, const float *part_ml, float *out) {
    const int32_t row = blockIdx.x / n_heads;
    if (d_len) n_prefix = *d_len;
    const int32_t f = first_row(first, row, d_len, n_prefix);
    const int32_t nc = (keys_of_row(n_prefix, tree_count, row, f) + ATTN_CHUNK - 1) / ATTN_CHUNK;
    const float *ml = part_ml + (size_t)blockIdx.x * n_chunks * 2;
    const float *acc = part_acc + (size_t)blockIdx.x * n_chunks * hd;
    float m = -INFINITY;
    for (int32_t c = 0; c < nc; c++) m = fmaxf(m, ml[2 * c]);
    float l = 0.0f;
    for (int32_t c = 0; c < nc; c++) l = fmaf(ml[2 * c + 1], expf(ml[2 * c] - m), l);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int32_t c = 0; c < nc; c++) a = fmaf(acc[(size_t)c * hd + d], expf(ml[2 * c] - m), a);
        out[(size_t)blockIdx.x * hd + d] = a * inv;
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
    const int32_t n_chunks = (max_prefix + n_rows + ATTN_CHUNK - 1) / ATTN_CHUNK;
    const size_t parts = (size_t)n_rows * n_heads * n_chunks;
    float *part_acc = cu_scratch(ex, parts * (head_dim + 2));
    if (!part_acc) return;
    float *part_ml = part_acc + parts * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    dim3 grid((unsigned)(n_rows * n_heads), (unsigned)n_chunks);
    EMT_LAUNCH(attn_chunk_kernel, grid, ATTN_THREADS, 0, ex->stream, q, k_cache, v_cache, d_len, n_prefix, row0,
               n_rows, d_keys, d_count, d_first, n_heads, n_kv_heads, head_dim, scale, cap, part_acc, part_ml);
    EMT_LAUNCH(attn_combine_kernel, n_rows * n_heads, ATTN_THREADS, 0, ex->stream, d_len, n_prefix, d_count, d_first,
               n_heads, head_dim, n_chunks, part_acc, part_ml, out);
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
