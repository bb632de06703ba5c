// The CUDA backend plugin (libentmtp-cuda.so): every op of
// src/backend/backend.h on the GPU. CPU twin of each kernel:
// src/backend/cpu/cpu_backend.c. Status: compiled in CI, not yet verified on a
// GPU (see docs/gpu-check.md); written for correctness first: straightforward
// kernels, cuBLAS for prompt-sized products.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_launch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda_plugin.h"
}

struct cuda_backend {
    int device;
};

// Small host-to-device staging for per-call index arrays (tokens, positions,
// masks, frequencies): the caller's host arrays may change as soon as an op
// returns, so they are copied into pinned memory owned by the context first.
struct staging {
    void *host;
    void *dev;
    size_t cap, used;
};

struct emt_exec {
    emt_backend *be;
    cudaStream_t stream;
    cublasHandle_t blas;
    staging st;
    float *scratch; // attention scores and top-k results
    size_t scratch_cap;
    char error[256];
};

static void set_error(emt_exec *ex, const char *what, cudaError_t e) {
    if (e != cudaSuccess && !ex->error[0]) snprintf(ex->error, sizeof ex->error, "%s: %s", what, cudaGetErrorString(e));
}

#define CUDA_OK(ex, call) set_error((ex), #call, (call))

// Reserve `bytes` of staging and copy `src` there; returns the device pointer.
static void *stage(emt_exec *ex, const void *src, size_t bytes) {
    size_t need = ex->st.used + ((bytes + 255) & ~(size_t)255);
    if (need > ex->st.cap) {
        // grow: only when a larger request than ever before arrives
        CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
        size_t cap = need * 2 > ((size_t)1 << 20) ? need * 2 : ((size_t)1 << 20);
        if (ex->st.host) cudaFreeHost(ex->st.host);
        if (ex->st.dev) cudaFree(ex->st.dev);
        ex->st.host = NULL;
        ex->st.dev = NULL;
        CUDA_OK(ex, cudaMallocHost(&ex->st.host, cap));
        CUDA_OK(ex, cudaMalloc(&ex->st.dev, cap));
        ex->st.cap = ex->st.host && ex->st.dev ? cap : 0;
        ex->st.used = 0;
        if (!ex->st.cap) return NULL;
    }
    // wrap around once the previous uses have completed
    if (ex->st.used + bytes > ex->st.cap) {
        CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
        ex->st.used = 0;
    }
    char *h = (char *)ex->st.host + ex->st.used;
    char *d = (char *)ex->st.dev + ex->st.used;
    memcpy(h, src, bytes);
    CUDA_OK(ex, cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, ex->stream));
    ex->st.used += (bytes + 255) & ~(size_t)255;
    return d;
}

static float *scratch(emt_exec *ex, size_t floats) {
    if (floats > ex->scratch_cap) {
        CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
        if (ex->scratch) cudaFree(ex->scratch);
        ex->scratch = NULL;
        CUDA_OK(ex, cudaMalloc(&ex->scratch, floats * sizeof(float)));
        ex->scratch_cap = ex->scratch ? floats : 0;
    }
    return ex->scratch;
}

// ------------------------------------------------------------------ memory

static void cu_destroy(emt_backend *be) {
    free(be->impl);
    free(be);
}

static void *cu_alloc(emt_backend *be, size_t bytes) {
    cuda_backend *cb = (cuda_backend *)be->impl;
    cudaSetDevice(cb->device);
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    // cudaMemset is asynchronous on the legacy stream, which the contexts'
    // non-blocking streams do not wait for: finish it before anyone uses p
    if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaStreamSynchronize(0) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cu_release(emt_backend *be, void *p) {
    (void)be;
    cudaFree(p);
}

static entmtp_status cu_upload(emt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? ENTMTP_OK : ENTMTP_ERR_BACKEND;
}

static entmtp_status cu_download(emt_exec *ex, void *dst, const void *src, size_t bytes) {
    CUDA_OK(ex, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ex->stream));
    CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
    return ex->error[0] ? ENTMTP_ERR_BACKEND : ENTMTP_OK;
}

// Rows are copied one after another on the stream, in order: the engine's
// commit moves rows toward lower indices inside one buffer.
static void cu_copy_rows(emt_exec *ex, float *dst, const float *src, size_t row_floats, const int32_t *dst_rows,
                         const int32_t *src_rows, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        float *d = dst + (size_t)dst_rows[i] * row_floats;
        const float *s = src + (size_t)src_rows[i] * row_floats;
        if (d != s) CUDA_OK(ex, cudaMemcpyAsync(d, s, row_floats * sizeof(float), cudaMemcpyDeviceToDevice, ex->stream));
    }
}

static emt_exec *cu_exec_create(emt_backend *be, int32_t n_threads) {
    (void)n_threads;
    emt_exec *ex = (emt_exec *)calloc(1, sizeof *ex);
    if (!ex) return NULL;
    ex->be = be;
    cudaSetDevice(((cuda_backend *)be->impl)->device);
    if (cudaStreamCreateWithFlags(&ex->stream, cudaStreamNonBlocking) != cudaSuccess) { free(ex); return NULL; }
    if (cublasCreate(&ex->blas) != CUBLAS_STATUS_SUCCESS) { cudaStreamDestroy(ex->stream); free(ex); return NULL; }
    cublasSetStream(ex->blas, ex->stream);
    return ex;
}

static void cu_exec_destroy(emt_exec *ex) {
    if (!ex) return;
    cudaStreamSynchronize(ex->stream);
    cublasDestroy(ex->blas);
    cudaStreamDestroy(ex->stream);
    if (ex->st.host) cudaFreeHost(ex->st.host);
    if (ex->st.dev) cudaFree(ex->st.dev);
    if (ex->scratch) cudaFree(ex->scratch);
    free(ex);
}

static entmtp_status cu_sync(emt_exec *ex) {
    CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
    CUDA_OK(ex, cudaGetLastError());
    return ex->error[0] ? ENTMTP_ERR_BACKEND : ENTMTP_OK;
}

static const char *cu_error_text(emt_exec *ex) { return ex->error; }

// ------------------------------------------------------------- elementwise

__global__ void embed_kernel(const float *table, int32_t dim, const int32_t *tokens, float *out) {
    int32_t r = blockIdx.x;
    const float *src = table + (size_t)tokens[r] * dim;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) out[(size_t)r * dim + i] = src[i];
}

static void cu_embed(emt_exec *ex, const float *table, int32_t dim, const int32_t *tokens, int32_t n_rows, float *out) {
    const int32_t *d_tok = (const int32_t *)stage(ex, tokens, (size_t)n_rows * sizeof(int32_t));
    if (!d_tok) return;
    EMT_LAUNCH(embed_kernel, n_rows, 256, 0, ex->stream, table, dim, d_tok, out);
}

// one block per row; the sum of squares in double, as the CPU does
__global__ void rmsnorm_kernel(const float *x, const float *w, int32_t dim, float eps, float *out) {
    __shared__ double partial[256];
    const float *xr = x + (size_t)blockIdx.x * dim;
    double ss = 0.0;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
    partial[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    float scale = (float)(1.0 / sqrt(partial[0] / dim + (double)eps));
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) out[(size_t)blockIdx.x * dim + i] = xr[i] * scale * w[i];
}

static void cu_rmsnorm(emt_exec *ex, const float *x, const float *w, int32_t n_rows, int32_t dim, float eps, float *out) {
    EMT_LAUNCH(rmsnorm_kernel, n_rows, 256, 0, ex->stream, x, w, dim, eps, out);
}

__device__ __forceinline__ float silu_d(float v) { return v / (1.0f + expf(-v)); }

__global__ void swiglu_kernel(const float *g, const float *u, int64_t n, float *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = silu_d(g[i]) * u[i];
}
__global__ void add_kernel(float *x, const float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) x[i] += y[i];
}
__global__ void silu_residual_kernel(const float *res, const float *pre, int64_t n, float *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = res[i] + silu_d(pre[i]);
}

static int blocks_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (int)(b > 4096 ? 4096 : (b < 1 ? 1 : b));
}

static void cu_swiglu(emt_exec *ex, const float *g, const float *u, int64_t n, float *out) {
    EMT_LAUNCH(swiglu_kernel, blocks_for(n), 256, 0, ex->stream, g, u, n, out);
}
static void cu_add(emt_exec *ex, float *x, const float *y, int64_t n) {
    EMT_LAUNCH(add_kernel, blocks_for(n), 256, 0, ex->stream, x, y, n);
}
static void cu_silu_residual(emt_exec *ex, const float *res, const float *pre, int64_t n, float *out) {
    EMT_LAUNCH(silu_residual_kernel, blocks_for(n), 256, 0, ex->stream, res, pre, n, out);
}

// rotate-half RoPE: one thread per (row, head, i < n_rot/2)
__global__ void rope_kernel(float *x, int32_t n_heads, int32_t head_dim, int32_t half, const int32_t *pos,
                            const float *inv_freq) {
    int32_t r = blockIdx.x, idx = threadIdx.x + blockIdx.y * blockDim.x;
    if (idx >= n_heads * half) return;
    int32_t h = idx / half, i = idx % half;
    double angle = (double)pos[r] * (double)inv_freq[i];
    float c = (float)cos(angle), s = (float)sin(angle);
    float *v = x + ((size_t)r * n_heads + h) * head_dim;
    float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
}

static void cu_rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                    const int32_t *positions, const float *inv_freq) {
    int32_t half = n_rot / 2;
    const int32_t *d_pos = (const int32_t *)stage(ex, positions, (size_t)n_rows * sizeof(int32_t));
    const float *d_freq = (const float *)stage(ex, inv_freq, (size_t)half * sizeof(float));
    if (!d_pos || !d_freq) return;
    dim3 grid(n_rows, (n_heads * half + 255) / 256);
    EMT_LAUNCH(rope_kernel, grid, 256, 0, ex->stream, x, n_heads, head_dim, half, d_pos, d_freq);
}

// ------------------------------------------------------------------ matmul

// Batch-invariant product: one warp per output element, lanes stride over the
// inputs and reduce with a fixed shuffle tree, so y[r][o] does not depend on
// how many rows are in the call.
__global__ void matmul_exact_kernel(const float *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                                    int32_t n_out, float *y) {
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= (int64_t)n_rows * n_out) return;
    int32_t r = (int32_t)(warp / n_out), o = (int32_t)(warp % n_out);
    const float *w = W + (size_t)o * n_in, *xr = x + (size_t)r * n_in;
    float acc = 0.0f;
    for (int32_t i = lane; i < n_in; i += 32) acc = fmaf(w[i], xr[i], acc);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[(size_t)r * n_out + o] = bias ? acc + bias[o] : acc;
}

__global__ void bias_kernel(float *y, const float *bias, int32_t n_rows, int32_t n_out) {
    int64_t n = (int64_t)n_rows * n_out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % n_out];
}

static void cu_matmul(emt_exec *ex, const float *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                      int32_t n_out, float *y, int exact) {
    if (exact || n_rows < 16) {
        int64_t threads = (int64_t)n_rows * n_out * 32;
        EMT_LAUNCH(matmul_exact_kernel, (unsigned)((threads + 255) / 256), 256, 0, ex->stream, W, bias, x, n_rows, n_in,
                   n_out, y);
        return;
    }
    // row-major y[n_rows][n_out] = x[n_rows][n_in] * W[n_out][n_in]^T, i.e.
    // column-major y^T (n_out x n_rows) = W^T' ... : op(A) = W (as n_in x n_out col-major, transposed)
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasSgemm(ex->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_rows, n_in, &one, W, n_in, x, n_in,
                                   &zero, y, n_out);
    if (s != CUBLAS_STATUS_SUCCESS && !ex->error[0]) snprintf(ex->error, sizeof ex->error, "cublasSgemm failed (%d)", (int)s);
    if (bias) EMT_LAUNCH(bias_kernel, blocks_for((int64_t)n_rows * n_out), 256, 0, ex->stream, y, bias, n_rows, n_out);
}

// --------------------------------------------------------------- attention

// Scores of every (row, head) against every key, -inf where masked.
__global__ void scores_kernel(const float *q, const float *k, const uint8_t *mask, int32_t n_prefix, int32_t n_rows,
                              int32_t n_heads, int32_t n_kv_heads, int32_t hd, float scale, float *s) {
    int32_t total = n_prefix + n_rows;
    int32_t row = blockIdx.y / n_heads, head = blockIdx.y % n_heads;
    int32_t key = blockIdx.x * blockDim.x + threadIdx.x;
    if (key >= total) return;
    float *out = s + (size_t)blockIdx.y * total;
    if (key >= n_prefix) {
        int32_t col = key - n_prefix;
        int visible = mask ? mask[(size_t)row * n_rows + col] : col <= row;
        if (!visible) { out[key] = -INFINITY; return; }
    }
    int32_t kvh = head / (n_heads / n_kv_heads);
    const float *qv = q + ((size_t)row * n_heads + head) * hd;
    const float *kv = k + (size_t)key * n_kv_heads * hd + (size_t)kvh * hd;
    float acc = 0.0f;
    for (int32_t d = 0; d < hd; d++) acc = fmaf(qv[d], kv[d], acc);
    out[key] = acc * scale;
}

// Softmax over the keys and the weighted sum of values: one block per (row, head).
__global__ void softmax_av_kernel(const float *s, const float *v, int32_t total, int32_t n_heads, int32_t n_kv_heads,
                                  int32_t hd, float *out) {
    __shared__ float red[256];
    int32_t row = blockIdx.x / n_heads, head = blockIdx.x % n_heads;
    const float *sc = s + (size_t)blockIdx.x * total;
    float m = -INFINITY;
    for (int32_t k = threadIdx.x; k < total; k += blockDim.x) m = fmaxf(m, sc[k]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + st]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float l = 0.0f;
    for (int32_t k = threadIdx.x; k < total; k += blockDim.x) l += sc[k] == -INFINITY ? 0.0f : expf(sc[k] - m);
    red[threadIdx.x] = l;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st) red[threadIdx.x] += red[threadIdx.x + st];
        __syncthreads();
    }
    l = red[0];
    int32_t kvh = head / (n_heads / n_kv_heads);
    float *o = out + ((size_t)row * n_heads + head) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int32_t k = 0; k < total; k++) {
            if (sc[k] == -INFINITY) continue;
            acc += expf(sc[k] - m) * v[(size_t)k * n_kv_heads * hd + (size_t)kvh * hd + d];
        }
        o[d] = l > 0.0f ? acc / l : 0.0f;
    }
}

static void cu_attention(emt_exec *ex, const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                         int32_t n_rows, const uint8_t *mask, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                         float *out) {
    int32_t total = n_prefix + n_rows;
    const uint8_t *d_mask = mask ? (const uint8_t *)stage(ex, mask, (size_t)n_rows * n_rows) : NULL;
    if (mask && !d_mask) return;
    float *s = scratch(ex, (size_t)n_rows * n_heads * total);
    if (!s) return;
    dim3 grid((total + 127) / 128, n_rows * n_heads);
    EMT_LAUNCH(scores_kernel, grid, 128, 0, ex->stream, q, k_cache, d_mask, n_prefix, n_rows, n_heads, n_kv_heads,
               head_dim, 1.0f / sqrtf((float)head_dim), s);
    EMT_LAUNCH(softmax_av_kernel, n_rows * n_heads, 256, 0, ex->stream, s, v_cache, total, n_heads, n_kv_heads,
               head_dim, out);
}

// ------------------------------------------------------------------- top-k

// One block per row: k rounds of a block argmax (ties to the lower id), then
// softmax statistics at temperature 1 in double.
__global__ void topk_kernel(const float *logits, int32_t vocab, int32_t k, int32_t *ids, float *probs, float *entropy) {
    __shared__ float best_v[256];
    __shared__ int32_t best_i[256];
    __shared__ double red[256];
    const float *x = logits + (size_t)blockIdx.x * vocab;
    int32_t *rid = ids + (size_t)blockIdx.x * k;
    float *rp = probs + (size_t)blockIdx.x * k;
    for (int32_t t = 0; t < k; t++) {
        float bv = -INFINITY;
        int32_t bi = INT32_MAX;
        for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
            int taken = 0;
            for (int32_t u = 0; u < t; u++) taken |= rid[u] == i;
            float v = x[i];
            if (!taken && (v > bv || (v == bv && i < bi))) { bv = v; bi = i; }
        }
        best_v[threadIdx.x] = bv;
        best_i[threadIdx.x] = bi;
        __syncthreads();
        for (int st = blockDim.x / 2; st > 0; st >>= 1) {
            if ((int)threadIdx.x < st) {
                float ov = best_v[threadIdx.x + st];
                int32_t oi = best_i[threadIdx.x + st];
                if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
                    best_v[threadIdx.x] = ov;
                    best_i[threadIdx.x] = oi;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) { rid[t] = best_i[0]; rp[t] = best_v[0]; }
        __syncthreads();
    }
    double mx = rp[0], z = 0.0, sxz = 0.0;
    for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        double e = exp((double)x[i] - mx);
        z += e;
        sxz += e * ((double)x[i] - mx);
    }
    red[threadIdx.x] = z;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st) red[threadIdx.x] += red[threadIdx.x + st];
        __syncthreads();
    }
    z = red[0];
    __syncthreads();
    red[threadIdx.x] = sxz;
    __syncthreads();
    for (int st = blockDim.x / 2; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st) red[threadIdx.x] += red[threadIdx.x + st];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        for (int32_t t = 0; t < k; t++) rp[t] = (float)(exp((double)rp[t] - mx) / z);
        if (entropy) entropy[blockIdx.x] = (float)(log(z) - red[0] / z);
    }
}

static void cu_topk(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k, int32_t *top_ids,
                    float *top_probs, float *entropy) {
    if (k > vocab) k = vocab;
    size_t nk = (size_t)n_rows * k;
    float *s = scratch(ex, 2 * nk + (size_t)n_rows + 64);
    if (!s) return;
    int32_t *d_ids = (int32_t *)s;
    float *d_p = s + nk, *d_h = s + 2 * nk;
    EMT_LAUNCH(topk_kernel, n_rows, 256, 0, ex->stream, logits, vocab, k, d_ids, d_p, d_h);
    CUDA_OK(ex, cudaMemcpyAsync(top_ids, d_ids, nk * sizeof(int32_t), cudaMemcpyDeviceToHost, ex->stream));
    CUDA_OK(ex, cudaMemcpyAsync(top_probs, d_p, nk * sizeof(float), cudaMemcpyDeviceToHost, ex->stream));
    if (entropy) CUDA_OK(ex, cudaMemcpyAsync(entropy, d_h, (size_t)n_rows * sizeof(float), cudaMemcpyDeviceToHost, ex->stream));
    CUDA_OK(ex, cudaStreamSynchronize(ex->stream));
}

static const emt_backend_ops cuda_ops = {
    "cuda",
    0,
    cu_destroy,
    cu_alloc,
    cu_release,
    cu_upload,
    cu_download,
    cu_copy_rows,
    cu_exec_create,
    cu_exec_destroy,
    cu_sync,
    cu_error_text,
    cu_embed,
    cu_rmsnorm,
    cu_matmul,
    cu_rope,
    cu_attention,
    cu_swiglu,
    cu_add,
    cu_silu_residual,
    cu_topk,
    0,    /* weight_types: F32 only; the loader converts typed weights */
    NULL, /* matmul_q */
    NULL, /* embed_q */
    /* optional ops (Gemma) not written yet: loading a model that needs one
     * fails naming it */
    NULL, /* scale */
    NULL, /* geglu */
    NULL, /* softcap */
    NULL, /* attention_softcap */
};

extern "C" __attribute__((visibility("default"))) int entmtp_cuda_plugin_create(int abi_version, int32_t device,
                                                                               emt_backend **out, char *err,
                                                                               size_t err_cap) {
    *out = NULL;
    if (abi_version != EMT_CUDA_PLUGIN_ABI) {
        snprintf(err, err_cap, "plugin implements interface %d, library wants %d", EMT_CUDA_PLUGIN_ABI, abi_version);
        return 1;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, err_cap, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 1;
    }
    if (device < 0 || device >= count) {
        snprintf(err, err_cap, "device %d outside the %d CUDA device(s)", device, count);
        return 1;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess) {
        snprintf(err, err_cap, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
        return 1;
    }
    emt_backend *be = (emt_backend *)calloc(1, sizeof *be);
    cuda_backend *cb = (cuda_backend *)calloc(1, sizeof *cb);
    if (!be || !cb) {
        free(be);
        free(cb);
        snprintf(err, err_cap, "out of memory");
        return 1;
    }
    cb->device = device;
    be->ops = &cuda_ops;
    be->impl = cb;
    *out = be;
    return 0;
}
