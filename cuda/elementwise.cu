// Per-element and per-row ops: embedding rows, RMSNorm, RoPE, the gated
// activations (SwiGLU, GeGLU), residual adds and Gemma's scale and soft-cap.
// CPU twins: the functions of the same name in src/backend/cpu/cpu_variant.h
// (cpu_embed, cpu_rmsnorm, cpu_rope, cpu_swiglu/cpu_geglu, cpu_add,
// cpu_silu_residual, cpu_scale, cpu_softcap).
#include "cuda_exec.h"
#include "bf16_split.h"

#include <math.h>

__global__ void embed_kernel(const float *table, int32_t dim, const int32_t *tokens, float *out) {
    int32_t r = blockIdx.x;
    const float *src = table + (size_t)tokens[r] * dim;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) emt_st(out + (size_t)r * dim + i, emt_ld(src + i));
}

void cu_embed(emt_exec *ex, const float *table, int32_t dim, const int32_t *tokens, int32_t n_rows, float *out) {
    const int32_t *d_tok = (const int32_t *)cu_stage(ex, tokens, (size_t)n_rows * sizeof(int32_t));
    if (!d_tok) return;
    cu_embed_rows(ex, table, dim, d_tok, n_rows, out);
}

void cu_embed_rows(emt_exec *ex, const float *table, int32_t dim, const int32_t *d_tokens, int32_t n_rows, float *out) {
    EMT_OP("EMBED", 2.0 * sizeof(float) * n_rows * dim, n_rows, dim, dim);
    EMT_LAUNCH(embed_kernel, n_rows, 256, 0, ex->stream, table, dim, d_tokens, out);
}

// One block per row; the sum of squares in double, as the CPU does (the
// double sum's order differs from the CPU's loop, but its error is far below
// a float's rounding: the scale, rounded to float, is the same bits). Latency
// bound at one row (the AR step, issue 34): each thread issues all its loads
// of x and w (RMS_PER_THREAD values, 16-byte loads where the rows allow)
// before it uses one, keeps them in registers for the output, and the block
// reduces by warp shuffles (two barriers: the warps' sums, the scale)
// instead of an 8-level shared-memory tree.
#define RMS_PER_THREAD 16
#define RMS_MAX_THREADS 256
__device__ __forceinline__ double sum_squares(float x) { return (double)x * (double)x; }
__device__ __forceinline__ double sum_squares(float4 x) {
    return (double)x.x * (double)x.x + (double)x.y * (double)x.y + (double)x.z * (double)x.z + (double)x.w * (double)x.w;
}
__device__ __forceinline__ float rms_scaled(float x, float scale, float w) { return x * scale * w; }
__device__ __forceinline__ float4 rms_scaled(float4 x, float scale, float4 w) {
    return float4{ x.x * scale * w.x, x.y * scale * w.y, x.z * scale * w.z, x.w * scale * w.w };
}
// T: float, or float4 where dim % 4 == 0 and x, w, out are 16-byte aligned;
// n: the row's T units; U: the units a thread holds per pass.
template <typename T>
__global__ void rmsnorm_kernel(const float *x, const float *w, int32_t dim, float eps, float *out) {
    constexpr int U = RMS_PER_THREAD * (int)sizeof(float) / (int)sizeof(T);
    __shared__ double warp_ss[RMS_MAX_THREADS / 32];
    __shared__ float row_scale;
    const int32_t n = dim / (int32_t)(sizeof(T) / sizeof(float)), step = U * (int32_t)blockDim.x;
    const T *xr = (const T *)(x + (size_t)blockIdx.x * dim), *wr = (const T *)w;
    T *o = (T *)(out + (size_t)blockIdx.x * dim);
    T xv[U] = {}, wv[U] = {}; // the thread's whole share of the row when n <= step
    double ss = 0.0;
    for (int32_t base = (int32_t)threadIdx.x; base < n; base += step) {
        EMT_UNROLL
        for (int u = 0; u < U; u++) {
            const int32_t i = base + u * (int32_t)blockDim.x;
            xv[u] = i < n ? emt_ld(xr + i) : T{};
            wv[u] = i < n ? emt_ld(wr + i) : T{}; // issued now: their latency overlaps the reduction
        }
        EMT_UNROLL
        for (int u = 0; u < U; u++) ss += sum_squares(xv[u]); // zeros past the row add nothing
    }
    ss = warp_sum(ss);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = (blockDim.x + 31) / 32;
    if (lane == 0) emt_st(warp_ss + warp, ss);
    __syncthreads();
    if (warp == 0) {
        double total = lane < n_warps ? emt_ld(warp_ss + lane) : 0.0;
        total = warp_sum(total);
        if (lane == 0) emt_st(&row_scale, (float)(1.0 / sqrt(total / dim + (double)eps)));
    }
    __syncthreads();
    const float scale = emt_ld(&row_scale);
    const bool one_pass = n <= step; // else every pass's units are loaded again
    for (int32_t base = (int32_t)threadIdx.x; base < n; base += step) {
        EMT_UNROLL
        for (int u = 0; u < U; u++) {
            const int32_t i = base + u * (int32_t)blockDim.x;
            if (!one_pass && i < n) xv[u] = emt_ld(xr + i), wv[u] = emt_ld(wr + i);
        }
        EMT_UNROLL
        for (int u = 0; u < U; u++) {
            const int32_t i = base + u * (int32_t)blockDim.x;
            if (i < n) emt_st(o + i, rms_scaled(xv[u], scale, wv[u]));
        }
    }
}

void cu_rmsnorm(emt_exec *ex, const float *x, const float *w, int32_t n_rows, int32_t dim, float eps, float *out) {
    EMT_OP("RMSNORM", sizeof(float) * (2.0 * n_rows * dim + dim), n_rows, dim, dim);
    const bool vec = dim % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)out % 16 == 0;
    const int32_t units = vec ? dim / 4 : dim, per_thread = vec ? RMS_PER_THREAD / 4 : RMS_PER_THREAD;
    // a whole number of warps, each thread a full pass where the row allows
    int32_t threads = ((units + per_thread - 1) / per_thread + 31) / 32 * 32;
    threads = threads < 32 ? 32 : threads > RMS_MAX_THREADS ? RMS_MAX_THREADS : threads;
    if (vec)
        EMT_LAUNCH(rmsnorm_kernel<float4>, n_rows, threads, 0, ex->stream, x, w, dim, eps, out);
    else
        EMT_LAUNCH(rmsnorm_kernel<float>, n_rows, threads, 0, ex->stream, x, w, dim, eps, out);
}

// rotate-half RoPE of thread idx < n_heads * half of row r: head idx / half,
// pair (i, i + half) with i = idx % half; row r at position pos[r], plus
// *d_base when given (rope_dyn: the committed length). Products unfused
// (__fmul_rn), so nvcc's FMA contraction cannot move a bit from the CPU
// twin's (rope_rows, built with -ffp-contract=off).
__device__ __forceinline__ void rope_thread(float *x, int32_t r, int32_t idx, int32_t n_heads, int32_t head_dim,
                                            int32_t half, const int32_t *d_base, const int32_t *pos,
                                            const float *inv_freq) {
    int32_t h = idx / half, i = idx % half;
    double angle = (double)((d_base ? *d_base : 0) + emt_ld(pos + r)) * (double)emt_ld(inv_freq + i);
    float c = (float)cos(angle), s = (float)sin(angle);
    float *v = x + ((size_t)r * n_heads + h) * head_dim;
    float a = emt_ld(v + i), b = emt_ld(v + i + half);
    emt_st(v + i, __fadd_rn(__fmul_rn(a, c), -__fmul_rn(b, s)));
    emt_st(v + i + half, __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
}

// one thread per (row, head, i < n_rot/2)
__global__ void rope_kernel(float *x, int32_t n_heads, int32_t head_dim, int32_t half, const int32_t *d_base,
                            const int32_t *pos, const float *inv_freq) {
    int32_t r = blockIdx.x, idx = threadIdx.x + blockIdx.y * blockDim.x;
    if (idx >= n_heads * half) return;
    rope_thread(x, r, idx, n_heads, head_dim, half, d_base, pos, inv_freq);
}

static void rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                 const int32_t *d_base, const int32_t *positions, const float *inv_freq) {
    int32_t half = n_rot / 2;
    const int32_t *d_pos = (const int32_t *)cu_stage(ex, positions, (size_t)n_rows * sizeof(int32_t));
    const float *d_freq = (const float *)cu_stage(ex, inv_freq, (size_t)half * sizeof(float));
    if (!d_pos || !d_freq) return;
    dim3 grid(n_rows, (n_heads * half + 255) / 256);
    EMT_OP("ROPE", 2.0 * sizeof(float) * n_rows * n_heads * 2 * half, n_rows, n_heads * head_dim, n_heads * head_dim);
    EMT_LAUNCH(rope_kernel, grid, 256, 0, ex->stream, x, n_heads, head_dim, half, d_base, d_pos, d_freq);
}

void cu_rope(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
             const int32_t *positions, const float *inv_freq) {
    rope(ex, x, n_rows, n_heads, head_dim, n_rot, NULL, positions, inv_freq);
}

void cu_rope_dyn(emt_exec *ex, float *x, int32_t n_rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                 const emt_dyn_rows *rows, const float *inv_freq) {
    rope(ex, x, n_rows, n_heads, head_dim, n_rot, rows->len, rows->offsets, inv_freq);
}

// The new K/V rows into a BF16 cache in one launch (rope_round_kv): thread
// t < half of a head ropes K's pair (t, t + half) as rope_kernel does and
// rounds it; thread t >= half rounds K's unrotated dim n_rot + t - half;
// each thread rounds V at the dims it handled in K. Products unfused
// (__fmul_rn: no FMA contraction) and cvt.rn (bf16_bits_rn), so the bits are
// the CPU twin's: rope_rows() then emt_f32_to_bf16. Loads and stores are
// contiguous across the warp, as rope_kernel's.
__device__ __forceinline__ void round_kv_thread(const float *k, const float *v, int32_t r, int32_t idx,
                                                int32_t n_kv_heads, int32_t head_dim, int32_t half, int32_t n_rot,
                                                const int32_t *d_base, const int32_t *pos, const float *inv_freq,
                                                uint16_t *k_out, uint16_t *v_out) {
    const int32_t per_head = head_dim - half;
    const int32_t h = idx / per_head, t = idx % per_head;
    const size_t at = ((size_t)r * n_kv_heads + h) * head_dim;
    if (t < half) {
        double angle = (double)((d_base ? *d_base : 0) + emt_ld(pos + r)) * (double)emt_ld(inv_freq + t);
        float c = (float)cos(angle), s = (float)sin(angle);
        const float a = emt_ld(k + at + t), b = emt_ld(k + at + t + half);
        emt_st(k_out + at + t, (uint16_t)bf16_bits_rn(__fadd_rn(__fmul_rn(a, c), -__fmul_rn(b, s))));
        emt_st(k_out + at + t + half, (uint16_t)bf16_bits_rn(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s))));
        emt_st(v_out + at + t, (uint16_t)bf16_bits_rn(emt_ld(v + at + t)));
        emt_st(v_out + at + t + half, (uint16_t)bf16_bits_rn(emt_ld(v + at + t + half)));
    } else {
        const size_t d = at + n_rot + (t - half);
        emt_st(k_out + d, (uint16_t)bf16_bits_rn(emt_ld(k + d)));
        emt_st(v_out + d, (uint16_t)bf16_bits_rn(emt_ld(v + d)));
    }
}

__global__ void rope_round_kv_kernel(const float *k, const float *v, int32_t n_kv_heads, int32_t head_dim,
                                     int32_t half, int32_t n_rot, const int32_t *d_base, const int32_t *pos,
                                     const float *inv_freq, uint16_t *k_out, uint16_t *v_out) {
    const int32_t r = blockIdx.x, idx = threadIdx.x + blockIdx.y * blockDim.x;
    if (idx >= n_kv_heads * (head_dim - half)) return;
    round_kv_thread(k, v, r, idx, n_kv_heads, head_dim, half, n_rot, d_base, pos, inv_freq, k_out, v_out);
}

// Q's RoPE in the same launch (rope_q_round_kv): a row's first n_heads *
// half threads rope Q's pairs as rope_kernel does, the rest do
// rope_round_kv_kernel's work, so each part keeps its coalescing.
__global__ void rope_q_round_kv_kernel(float *q, int32_t n_heads, const float *k, const float *v, int32_t n_kv_heads,
                                       int32_t head_dim, int32_t half, int32_t n_rot, const int32_t *d_base,
                                       const int32_t *pos, const float *inv_freq, uint16_t *k_out, uint16_t *v_out) {
    const int32_t r = blockIdx.x, idx = threadIdx.x + blockIdx.y * blockDim.x, q_threads = n_heads * half;
    if (idx < q_threads) {
        rope_thread(q, r, idx, n_heads, head_dim, half, d_base, pos, inv_freq);
        return;
    }
    if (idx - q_threads >= n_kv_heads * (head_dim - half)) return;
    round_kv_thread(k, v, r, idx - q_threads, n_kv_heads, head_dim, half, n_rot, d_base, pos, inv_freq, k_out, v_out);
}

void cu_rope_round_kv(emt_exec *ex, const float *k, const float *v, int32_t n_rows, int32_t n_kv_heads,
                      int32_t head_dim, int32_t n_rot, const int32_t *positions, const emt_dyn_rows *rows,
                      const float *inv_freq, uint16_t *k_out, uint16_t *v_out) {
    const int32_t half = n_rot / 2, per_head = head_dim - half;
    const int32_t *d_base = rows ? rows->len : NULL; // device memory; the offsets are host ones, as rope_dyn's
    const int32_t *d_pos =
        (const int32_t *)cu_stage(ex, rows ? rows->offsets : positions, (size_t)n_rows * sizeof(int32_t));
    const float *d_freq = (const float *)cu_stage(ex, inv_freq, (size_t)half * sizeof(float)); // as rope() stages it
    if (!d_pos || !d_freq) return;
    dim3 grid(n_rows, (n_kv_heads * per_head + 255) / 256);
    // K and V: 4 bytes read and 2 written per value
    EMT_OP("ROPE_ROUND_KV", 2.0 * (sizeof(float) + sizeof(uint16_t)) * n_rows * n_kv_heads * head_dim, n_rows,
           2 * n_kv_heads * head_dim, 2 * n_kv_heads * head_dim);
    EMT_LAUNCH(rope_round_kv_kernel, grid, 256, 0, ex->stream, k, v, n_kv_heads, head_dim, half, n_rot, d_base, d_pos,
               d_freq, k_out, v_out);
}

void cu_rope_q_round_kv(emt_exec *ex, float *q, int32_t n_heads, const float *k, const float *v, int32_t n_rows,
                        int32_t n_kv_heads, int32_t head_dim, int32_t n_rot, const int32_t *positions,
                        const emt_dyn_rows *rows, const float *inv_freq, uint16_t *k_out, uint16_t *v_out) {
    const int32_t half = n_rot / 2, threads = n_heads * half + n_kv_heads * (head_dim - half);
    const int32_t *d_base = rows ? rows->len : NULL;
    const int32_t *d_pos =
        (const int32_t *)cu_stage(ex, rows ? rows->offsets : positions, (size_t)n_rows * sizeof(int32_t));
    const float *d_freq = (const float *)cu_stage(ex, inv_freq, (size_t)half * sizeof(float));
    if (!d_pos || !d_freq) return;
    dim3 grid(n_rows, (threads + 255) / 256);
    // Q's rotated dims 4 bytes in and out each; K and V 4 bytes in and 2 out per value
    EMT_OP("ROPE_Q_ROUND_KV",
           2.0 * sizeof(float) * n_rows * n_heads * 2 * half +
               2.0 * (sizeof(float) + sizeof(uint16_t)) * n_rows * n_kv_heads * head_dim,
           n_rows, n_heads * head_dim + 2 * n_kv_heads * head_dim, n_heads * head_dim + 2 * n_kv_heads * head_dim);
    EMT_LAUNCH(rope_q_round_kv_kernel, grid, 256, 0, ex->stream, q, n_heads, k, v, n_kv_heads, head_dim, half, n_rot,
               d_base, d_pos, d_freq, k_out, v_out);
}

// ------------------------------------------------- elementwise, grid-stride

__device__ __forceinline__ float silu_d(float v) { return v / (1.0f + expf(-v)); }

// GELU, tanh approximation (Gemma's gelu_pytorch_tanh), as cpu_variant.h's gelu_tanh
__device__ __forceinline__ float gelu_tanh_d(float v) {
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// out = act(gate) * up; the activation is a template argument so each
// variant is a straight loop
template <int GELU> __global__ void gated_kernel(const float *g, const float *u, int64_t n, float *out) {
    GRID_STRIDE(i, n) emt_st(out + i, (GELU ? gelu_tanh_d(emt_ld(g + i)) : silu_d(emt_ld(g + i))) * emt_ld(u + i));
}
__global__ void add_kernel(float *x, const float *y, int64_t n) {
    GRID_STRIDE(i, n) emt_st(x + i, emt_ld(x + i) + emt_ld(y + i));
}
__global__ void silu_residual_kernel(const float *res, const float *pre, int64_t n, float *out) {
    GRID_STRIDE(i, n) emt_st(out + i, emt_ld(res + i) + silu_d(emt_ld(pre + i)));
}
__global__ void scale_kernel(float *x, int64_t n, float s) {
    GRID_STRIDE(i, n) emt_st(x + i, emt_ld(x + i) * s);
}
__global__ void softcap_kernel(float *x, int64_t n, float cap) {
    GRID_STRIDE(i, n) emt_st(x + i, cap * tanhf(emt_ld(x + i) / cap));
}

// x rounded to BF16 (nearest even, cuda/bf16_split.h: the CPU twin's
// emt_f32_to_bf16 bit for bit), four values a thread: a 16-byte load and an
// 8-byte store, each contiguous across the warp (vec: x on 16 bytes, out on
// 8; else one value a thread)
__global__ void round_bf16_kernel(const float *x, int64_t n, uint16_t *out, int vec) {
    const int64_t quads = vec ? n / 4 : 0;
    GRID_STRIDE(i, quads) {
        const float4 v = emt_ld((const float4 *)x + i);
        emt_st((uint2 *)out + i, uint2{ bf16_bits_rn(v.x) | bf16_bits_rn(v.y) << 16, bf16_bits_rn(v.z) | bf16_bits_rn(v.w) << 16 });
    }
    GRID_STRIDE(j, n - 4 * quads) emt_st(out + 4 * quads + j, (uint16_t)bf16_bits_rn(emt_ld(x + 4 * quads + j)));
}

static int blocks_for(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (int)(b > 4096 ? 4096 : (b < 1 ? 1 : b));
}

void cu_swiglu(emt_exec *ex, const float *g, const float *u, int64_t n, float *out) {
    EMT_OP("SWIGLU", 3.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(gated_kernel<0>, blocks_for(n), 256, 0, ex->stream, g, u, n, out);
}
void cu_geglu(emt_exec *ex, const float *g, const float *u, int64_t n, float *out) {
    EMT_OP("GEGLU", 3.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(gated_kernel<1>, blocks_for(n), 256, 0, ex->stream, g, u, n, out);
}
void cu_add(emt_exec *ex, float *x, const float *y, int64_t n) {
    EMT_OP("ADD", 3.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(add_kernel, blocks_for(n), 256, 0, ex->stream, x, y, n);
}
void cu_silu_residual(emt_exec *ex, const float *res, const float *pre, int64_t n, float *out) {
    EMT_OP("SILU_RESIDUAL", 3.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(silu_residual_kernel, blocks_for(n), 256, 0, ex->stream, res, pre, n, out);
}
void cu_scale(emt_exec *ex, float *x, int64_t n, float s) {
    EMT_OP("SCALE", 2.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(scale_kernel, blocks_for(n), 256, 0, ex->stream, x, n, s);
}
void cu_round_bf16(emt_exec *ex, const float *x, int64_t n, uint16_t *out) {
    const int vec = (uintptr_t)x % 16 == 0 && (uintptr_t)out % 8 == 0; // a KV row width that is not a multiple of 4: scalar
    EMT_OP("ROUND_BF16", (sizeof(float) + sizeof(uint16_t)) * (double)n, 1, n, n);
    EMT_LAUNCH(round_bf16_kernel, blocks_for(vec ? (n + 3) / 4 : n), 256, 0, ex->stream, x, n, out, vec);
}
void cu_set_kv_dtype(emt_exec *ex, emt_dtype dtype) { ex->kv_bf16 = dtype == EMT_BF16; }
void cu_softcap(emt_exec *ex, float *x, int64_t n, float cap) {
    EMT_OP("SOFTCAP", 2.0 * sizeof(float) * n, 1, n, n);
    EMT_LAUNCH(softcap_kernel, blocks_for(n), 256, 0, ex->stream, x, n, cap);
}
