// The CUDA backend plugin (libentmtp-cuda.so): every op of
// src/backend/backend.h on the GPU. This file: memory, the execution context,
// staging, top-k and the ops table; the kernels are grouped by family in
// elementwise.cu, matmul.cu and attention.cu, each naming its CPU twin in
// src/backend/cpu/cpu_variant.h. Status: run in CI on the CPU execution
// harness (docs/cuda-harness.md), not yet on a GPU (docs/gpu-check.md).
#include "cuda_exec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_backend {
    int device;
};

void cu_set_error(emt_exec *ex, const char *what, cudaError_t e) {
    if (e != cudaSuccess && !ex->error[0]) snprintf(ex->error, sizeof ex->error, "%s: %s", what, cudaGetErrorString(e));
}

void cu_fail(emt_exec *ex, const char *fmt, ...) {
    if (ex->error[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->error, sizeof ex->error, fmt, ap);
    va_end(ap);
}

// A buffer that queued work may still read: freed after the next wait (at
// once after a wait when the list is full, which a step never fills).
void cu_retire(emt_exec *ex, void *p, int host) {
    int *n = host ? &ex->n_retired_host : &ex->n_retired_dev;
    if (*n == 32) cu_wait(ex);
    (host ? ex->retired_host : ex->retired_dev)[(*n)++] = p;
}

// Reserve `bytes` of staging and copy `src` there; the pinned copy goes to
// `dst` when given, else to the ring's device half. Returns the device copy.
static void *stage(emt_exec *ex, void *dst, const void *src, size_t bytes) {
    // inside a step graph's span (graphs.cu) the staged index arrays are the
    // graph's constants: counted on the key's first use, copied there while
    // it is recorded; a per-step input (dst) cannot be recorded
    if (ex->recording || ex->measuring) {
        if (dst) ex->capture_broken = 1;
        else if (ex->recording) return cu_graph_stage(ex, src, bytes);
        else cu_graph_stage(ex, src, bytes);
    }
    size_t need = ex->st.used + ((bytes + 255) & ~(size_t)255);
    if (need > ex->st.cap) {
        // grow: only when a larger request than ever before arrives; queued
        // copies may still read the old buffers, which are freed after the
        // next wait (so growing never waits inside a step)
        size_t cap = need * 2 > ((size_t)4 << 20) ? need * 2 : ((size_t)4 << 20);
        if (ex->st.host) cu_retire(ex, ex->st.host, 1);
        if (ex->st.dev) cu_retire(ex, ex->st.dev, 0);
        ex->st.host = NULL;
        ex->st.dev = NULL;
        CUDA_OK(ex, cudaMallocHost(&ex->st.host, cap));
        CUDA_OK(ex, cudaMalloc(&ex->st.dev, cap));
        ex->st.cap = ex->st.host && ex->st.dev ? cap : 0;
        ex->st.used = 0;
        if (!ex->st.cap) return NULL;
    }
    // wrap around once the previous uses have completed (every wait also
    // restarts staging: cu_after_wait)
    if (ex->st.used + bytes > ex->st.cap) {
        cu_wait(ex);
        ex->st.used = 0;
    }
    char *h = (char *)ex->st.host + ex->st.used;
    char *d = dst ? (char *)dst : (char *)ex->st.dev + ex->st.used;
    memcpy(h, src, bytes);
    CUDA_OK(ex, cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, ex->stream));
    ex->counters.h2d_copies++;
    ex->counters.h2d_bytes += (int64_t)bytes;
    ex->st.used += (bytes + 255) & ~(size_t)255;
    return d;
}

void *cu_stage(emt_exec *ex, const void *src, size_t bytes) { return stage(ex, NULL, src, bytes); }

void cu_stage_to(emt_exec *ex, void *dst, const void *src, size_t bytes) { stage(ex, dst, src, bytes); }

// Grown by half again at least, the old buffer retired: kernels queued
// before may still use it.
float *cu_scratch(emt_exec *ex, size_t floats) {
    if (floats > ex->scratch_cap) {
        if (ex->recording) { // no allocation inside a capture: it fails, the span runs directly
            ex->capture_broken = 1;
            return NULL;
        }
        cu_graph_reset(ex); // the recorded graphs read the old buffer
        if (ex->scratch) cu_retire(ex, ex->scratch, 0);
        ex->scratch = NULL;
        size_t cap = floats + floats / 2;
        CUDA_OK(ex, cudaMalloc(&ex->scratch, cap * sizeof(float)));
        ex->scratch_cap = ex->scratch ? cap : 0;
    }
    return ex->scratch;
}

int32_t *cu_tc_arrivals(emt_exec *ex, size_t n) {
    if (n > ex->tc_arrivals_cap) {
        if (ex->recording) { // as cu_scratch
            ex->capture_broken = 1;
            return NULL;
        }
        cu_graph_reset(ex);
        if (ex->tc_arrivals) cu_retire(ex, ex->tc_arrivals, 0);
        ex->tc_arrivals = NULL;
        size_t cap = n + n / 2;
        CUDA_OK(ex, cudaMalloc(&ex->tc_arrivals, cap * sizeof(int32_t)));
        ex->tc_arrivals_cap = 0;
        if (!ex->tc_arrivals) return NULL;
        CUDA_OK(ex, cudaMemsetAsync(ex->tc_arrivals, 0, cap * sizeof(int32_t), ex->stream));
        ex->tc_arrivals_cap = cap;
    }
    return ex->tc_arrivals;
}

void cu_after_wait(emt_exec *ex) {
    ex->st.used = 0;
    ex->wait_epoch++;
    for (int i = 0; i < ex->n_retired_dev; i++) cudaFree(ex->retired_dev[i]);
    for (int i = 0; i < ex->n_retired_host; i++) cudaFreeHost(ex->retired_host[i]);
    ex->n_retired_dev = ex->n_retired_host = 0;
}

int32_t *cu_host_index(emt_exec *ex, size_t n) {
    if (n > ex->host_index_cap) {
        free(ex->host_index);
        ex->host_index = (int32_t *)malloc(n * sizeof(int32_t));
        ex->host_index_cap = ex->host_index ? n : 0;
        if (!ex->host_index) cu_fail(ex, "cuda: out of host memory for %zu index values", n);
    }
    return ex->host_index;
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

// Small copies (the step record) land in a pinned buffer of the context
// (an asynchronous DMA, no pageable staging by the driver), larger ones go
// straight to the caller's memory. One copy and one wait either way.
static entmtp_status cu_download(emt_exec *ex, void *dst, const void *src, size_t bytes) {
    const size_t small = (size_t)64 << 10;
    if (bytes <= small && !ex->bounce) {
        if (cudaMallocHost(&ex->bounce, small) == cudaSuccess) ex->bounce_cap = small;
        else ex->bounce = NULL;
    }
    if (bytes <= ex->bounce_cap) {
        cu_copy_to_host(ex, ex->bounce, src, bytes);
        cu_wait(ex);
        if (!ex->error[0]) memcpy(dst, ex->bounce, bytes);
    } else {
        cu_copy_to_host(ex, dst, src, bytes);
        cu_wait(ex);
    }
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
    const char *graphs = getenv("ENTMTP_CUDA_GRAPHS");
    ex->graphs_on = !(graphs && !strcmp(graphs, "0"));
    return ex;
}

static void cu_exec_destroy(emt_exec *ex) {
    if (!ex) return;
    cudaStreamSynchronize(ex->stream);
    cu_graph_reset(ex);
    free(ex->graphs);
    cublasDestroy(ex->blas);
    cudaStreamDestroy(ex->stream);
    if (ex->st.host) cudaFreeHost(ex->st.host);
    if (ex->st.dev) cudaFree(ex->st.dev);
    if (ex->scratch) cudaFree(ex->scratch);
    if (ex->tc_arrivals) cudaFree(ex->tc_arrivals);
    cu_after_wait(ex);
    if (ex->bounce) cudaFreeHost(ex->bounce);
    free(ex->host_index);
    free(ex);
}

static entmtp_status cu_sync(emt_exec *ex) {
    cu_wait(ex);
    CUDA_OK(ex, cudaGetLastError());
    return ex->error[0] ? ENTMTP_ERR_BACKEND : ENTMTP_OK;
}

static const char *cu_error_text(emt_exec *ex) { return ex->error; }

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
    float *s = cu_scratch(ex, 2 * nk + (size_t)n_rows + 64);
    if (!s) return;
    int32_t *d_ids = (int32_t *)s;
    float *d_p = s + nk, *d_h = s + 2 * nk;
    EMT_LAUNCH(topk_kernel, n_rows, 256, 0, ex->stream, logits, vocab, k, d_ids, d_p, d_h);
    cu_copy_to_host(ex, top_ids, d_ids, nk * sizeof(int32_t));
    cu_copy_to_host(ex, top_probs, d_p, nk * sizeof(float));
    if (entropy) cu_copy_to_host(ex, entropy, d_h, (size_t)n_rows * sizeof(float));
    cu_wait(ex);
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
    CU_WEIGHT_TYPES,
    cu_matmul_q,
    cu_embed_q,
    cu_scale,
    cu_geglu,
    cu_softcap,
    cu_attention_softcap,
    cu_counters,
    cu_matmul_q_multi, // BF16: one tensor-core launch for Q/K/V (fewer launches); other dtypes one each
    cu_matmul_q_gated, // BF16: gate and up in one launch, then the activation
    cu_topk_device,
    cu_embed_device,
    cu_accept,
    cu_commit,
    cu_gather_i32,
    cu_attention_window,
    cu_rope_dyn,
    cu_attention_dyn,
    cu_write_i32,
    cu_graph_begin,
    cu_graph_end,
    cu_graph_reset,
    cu_sample_root,
    NULL, /* pack: device weights keep the file's layout (the products stage them per warp) */
    NULL, /* set_activation_bits: the device products take float activations */
    cu_set_kv_dtype,
    cu_round_bf16,
    cu_rope_round_kv,
    cu_matmul_q_add, // BF16: the residual add in the tensor-core product's epilogue; other dtypes the product, then add
    cu_rope_q_round_kv, // Q's RoPE in rope_round_kv's launch
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
