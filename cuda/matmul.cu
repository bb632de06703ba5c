// The product family y[r][o] = sum_i W[o][i] * x[r][i] (+ bias[o]) for 1..128
// rows, over weights in their stored dtype (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q4_K), and embedding rows from typed tables.
// CPU twins: cpu_matmul (dot1) and cpu_matmul_q (emt_dot_q_ref in
// src/backend/cpu/quant.h, load8_half) for the products, cpu_embed_q for the
// rows; tests/unit/test_cuda_kernels.c compares them.
//
// Batch invariance (the lossless invariant, src/backend/backend.h): one warp
// computes one output o for a tile of up to MM_ROW_TILE rows. Lane l owns a
// fixed share of n_in (dense: elements l, l+32, ...; quantized: 32-value
// units l, l+32, ...) and accumulates each row of the tile in its own register in
// that order; the 32 lanes are then summed by a fixed butterfly. A row's
// operations are therefore the same whatever tile it falls in and however
// many rows the call has: y[r][o] is bit-identical for n_rows = 1 or 128.
// The weight share is read once per tile and used for every row of it.
//
// Numerics: quantized blocks are decoded to float codes and multiplied with
// the float activations, block sum first, then scaled: acc += d * sum_j q_j x_j
// (Q4_1 and Q4_K also acc += m * sum_j x_j), all in FP32. The CPU instead rounds the
// activations to 16-bit integers per 32-value block (quant.h), so the two
// differ by at most sum_b max|x_b| / 65534 * sum_{j in b} |W_j| plus float
// rounding: the bound the parity test asserts. (Q4_K has no CPU product
// yet: the loader converts it to F32 there; its twin is emt_dequant_q4_k.)
#include "cuda_exec.h"
#include "bf16_split.h"

#include <string.h>

#define MM_WARPS 8     // outputs per block, one warp each
#define MM_ROW_TILE 8  // activation rows that share each weight load
#define QK 32          // values per quantized block (quant.h's EMT_QK)

__device__ __forceinline__ uint16_t rd16(const uint8_t *p) { return (uint16_t)(emt_ld(p) | (emt_ld(p + 1) << 8)); }


// IEEE half -> float, exact (as emt_f16_to_f32 in src/io/tensor.h)
__device__ __forceinline__ float f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
    if (em >= 0x7c00u) return bits_to_float(sign | 0x7f800000u | ((em & 0x3ffu) << 13)); // inf, NaN
    if (em >= 0x0400u) return bits_to_float(sign | ((em << 13) + ((127u - 15u) << 23)));  // normal
    float v = (float)em * 5.9604644775390625e-8f; // subnormal: em * 2^-24, exact
    return sign ? -v : v;
}


// Quantized rows are read in units of 32 values: a whole block for Q8_0,
// Q4_0 and Q4_1, one of the eight sub-blocks of a 256-value super-block for
// Q4_K. Bytes per block and values per block:
__host__ __device__ constexpr int block_bytes(int dt) {
    return dt == EMT_Q8_0 ? 34 : dt == EMT_Q4_0 ? 18 : dt == EMT_Q4_1 ? 20 : dt == EMT_Q4_K ? 144 : 0;
}
__host__ __device__ constexpr int block_values(int dt) { return dt == EMT_Q4_K ? 256 : block_bytes(dt) ? QK : 1; }

// Element i of a dense weight row.
template <int DT> __device__ __forceinline__ float dense_at(const uint8_t *row, int32_t i) {
    if (DT == EMT_F32) return emt_ld((const float *)row + i);
    uint16_t h = rd16(row + 2 * (size_t)i);
    return DT == EMT_F16 ? f16_to_float(h) : bf16_to_float(h);
}

// Sub-block j of a Q4_K super-block: 6-bit scale and minimum (CPU twin:
// emt_kquant_scale_min in src/io/tensor.h).
__device__ __forceinline__ void kquant_scale_min(const uint8_t *scales, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = emt_ld(scales + j) & 63;
        *m = emt_ld(scales + j + 4) & 63;
    } else {
        *sc = (emt_ld(scales + j + 4) & 0x0F) | ((emt_ld(scales + j - 4) >> 6) << 4);
        *m = (emt_ld(scales + j + 4) >> 4) | ((emt_ld(scales + j) >> 6) << 4);
    }
}

// Unit u (values 32u .. 32u+31) of a quantized row -> its 32 codes as
// floats, a scale d and an offset m: value j = d * q[j] + m. Layouts:
// src/backend/cpu/quant.h and src/io/tensor.h (CPU twins: emt_tensor_to_f32,
// emt_dequant_q4_k).
template <int DT> __device__ __forceinline__ void decode_unit(const uint8_t *row, int32_t u, float q[QK], float *d, float *m) {
    if (DT == EMT_Q4_K) {
        const uint8_t *blk = row + (size_t)(u / 8) * block_bytes(DT);
        const int s = u % 8;
        int sc, mn;
        kquant_scale_min(blk + 4, s, &sc, &mn);
        *d = f16_to_float(rd16(blk)) * (float)sc;
        *m = -(f16_to_float(rd16(blk + 2)) * (float)mn);
        const uint8_t *qs = blk + 16 + 32 * (s / 2);
        for (int l = 0; l < QK; l++) q[l] = (float)(s % 2 ? emt_ld(qs + l) >> 4 : emt_ld(qs + l) & 0x0F);
        return;
    }
    const uint8_t *blk = row + (size_t)u * block_bytes(DT);
    *d = f16_to_float(rd16(blk));
    *m = DT == EMT_Q4_1 ? f16_to_float(rd16(blk + 2)) : 0.0f;
    if (DT == EMT_Q8_0) {
        for (int j = 0; j < QK; j++) q[j] = (float)(int8_t)emt_ld(blk + 2 + j);
    } else {
        const uint8_t *qs = blk + (DT == EMT_Q4_1 ? 4 : 2);
        const int off = DT == EMT_Q4_0 ? 8 : 0;
        for (int j = 0; j < QK / 2; j++) {
            const uint8_t byte = emt_ld(qs + j);
            q[j] = (float)((byte & 0x0F) - off);
            q[j + QK / 2] = (float)((byte >> 4) - off);
        }
    }
}

// Grid: (ceil(n_rows / MM_ROW_TILE), ceil(n_out / MM_WARPS)), MM_WARPS warps:
// the row tiles of one group of outputs are neighbours in launch order, so
// the weight rows they share come from DRAM once and from L2 after.
template <int DT>
__global__ void __launch_bounds__(MM_WARPS * 32)
    product_kernel(const uint8_t *W, size_t row_bytes, const float *bias, const float *x, int32_t n_rows,
                   int32_t n_in, int32_t n_out, float *y) {
    const int32_t o = blockIdx.y * MM_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (o >= n_out) return; // a whole warp: o is the same for its 32 lanes
    const int32_t r0 = blockIdx.x * MM_ROW_TILE;
    const int nr = n_rows - r0 < MM_ROW_TILE ? n_rows - r0 : MM_ROW_TILE;
    const uint8_t *w = W + (size_t)o * row_bytes;
    const float *xt = x + (size_t)r0 * n_in;
    float acc[MM_ROW_TILE];
    for (int r = 0; r < MM_ROW_TILE; r++) acc[r] = 0.0f;
    if (block_bytes(DT) == 0) {
        for (int32_t i = lane; i < n_in; i += 32) {
            const float wv = dense_at<DT>(w, i);
            EMT_UNROLL
            for (int r = 0; r < MM_ROW_TILE; r++)
                if (r < nr) acc[r] = fmaf(wv, emt_ld(xt + (size_t)r * n_in + i), acc[r]);
        }
    } else {
        for (int32_t b = lane; b < n_in / QK; b += 32) {
            float q[QK], d, m;
            decode_unit<DT>(w, b, q, &d, &m);
            EMT_UNROLL
            for (int r = 0; r < MM_ROW_TILE; r++) {
                if (r >= nr) continue;
                const float *xb = xt + (size_t)r * n_in + (size_t)b * QK;
                float dot = 0.0f;
                for (int j = 0; j < QK; j++) dot = fmaf(q[j], emt_ld(xb + j), dot);
                acc[r] = fmaf(d, dot, acc[r]);
                if (DT == EMT_Q4_1 || DT == EMT_Q4_K) {
                    float sum = 0.0f;
                    for (int j = 0; j < QK; j++) sum += emt_ld(xb + j);
                    acc[r] = fmaf(m, sum, acc[r]);
                }
            }
        }
    }
    EMT_UNROLL
    for (int r = 0; r < MM_ROW_TILE; r++) {
        if (r >= nr) break; // nr is the block's: the whole warp stops together, no reduction of absent rows
        const float v = warp_sum(acc[r]); // every lane reduces: the shuffles need the whole warp
        if (lane == 0 && r < nr) emt_st(y + (size_t)(r0 + r) * n_out + o, bias ? v + emt_ld(bias + o) : v);
    }
}

// The V weights of one 16-byte load as floats.
template <int DT, int V> __device__ __forceinline__ void unpack_dense(const uint4 &wv, float wf[V]) {
    const uint32_t words[4] = { wv.x, wv.y, wv.z, wv.w };
    EMT_UNROLL
    for (int j = 0; j < V; j++) {
        if (DT == EMT_F32) wf[j] = bits_to_float(words[j]);
        else {
            const uint16_t h = (uint16_t)(words[j / 2] >> (16 * (j % 2)));
            wf[j] = DT == EMT_F16 ? f16_to_float(h) : bf16_to_float(h);
        }
    }
}

// The V staged activations at xr (shared memory) in lane order.
template <int V> __device__ __forceinline__ void staged_activations(const float4 *xr, int lane, float xv[V]) {
    if (V == 4) {
        const float4 a = emt_ld(xr);
        xv[0] = a.x, xv[1 % V] = a.y, xv[2 % V] = a.z, xv[3 % V] = a.w;
    } else {
        // lanes 4-7 of each quarter-warp read their second half first: the
        // 8 lanes of a shared-memory phase then hit 32 different banks
        // (lane l's halves lie 32 l bytes apart)
        const int h = (lane >> 2) & 1;
        const float4 a = emt_ld(xr + h), b = emt_ld(xr + 1 - h);
        const float4 lo = h ? b : a, hi = h ? a : b;
        xv[0] = lo.x, xv[1 % V] = lo.y, xv[2 % V] = lo.z, xv[3 % V] = lo.w;
        xv[4 % V] = hi.x, xv[5 % V] = hi.y, xv[6 % V] = hi.z, xv[7 % V] = hi.w;
    }
}

// Dense weights (F32, F16, BF16) in 16-byte loads, for rows whose bytes are
// whole 16-byte units (n_in a multiple of 8) at 16-byte aligned addresses.
// Grid: (ceil(n_rows / MM_ROW_TILE), ceil(n_out / (MM_WARPS * OUTS))),
// MM_WARPS warps, each computing OUTS consecutive outputs for the tile's
// rows (with OUTS > 1, each activation read from shared memory serves all
// OUTS outputs: a verify's product is bound by those reads otherwise). The block stages the tile's activations in shared
// memory, MM_CHUNK values per row at a time, with coalesced 16-byte loads
// that its warps share (instead of each warp reading them again; OUTS = 4
// for more rows than one tile, so that a verify's activations are staged
// once per 32 outputs instead of 8). Lane l's k-th weight load of a chunk is
// the 16 bytes holding values g = 32 V k + V l .. + V (V = 4 floats or 8
// halves): 512 contiguous bytes per warp request, LOADS of them in flight
// per lane. Batch invariance as product_kernel: lane l accumulates each row
// of an output in its own register over the same values in the same order
// (chunks, loads, then the V values), then the fixed butterfly; nothing
// depends on the tile, OUTS or the number of rows.
#define MM_CHUNK 1024
template <int DT, int OUTS>
__device__ __forceinline__ void dense_product(const uint8_t *W, size_t row_bytes, const float *bias, const float *x,
                                              int32_t n_rows, int32_t n_in, int32_t n_out, float *y) {
    constexpr int V = DT == EMT_F32 ? 4 : 8; // weights per 16-byte load
    constexpr int LOADS = MM_CHUNK / (32 * V);
    __shared__ float4 xs[MM_ROW_TILE * MM_CHUNK / 4];
    const int lane = threadIdx.x % 32;
    const int32_t o0 = (blockIdx.y * MM_WARPS + threadIdx.x / 32) * OUTS;
    const int32_t r0 = blockIdx.x * MM_ROW_TILE;
    const int nr = n_rows - r0 < MM_ROW_TILE ? n_rows - r0 : MM_ROW_TILE;
    float acc[OUTS][MM_ROW_TILE];
    for (int oi = 0; oi < OUTS; oi++)
        for (int r = 0; r < MM_ROW_TILE; r++) acc[oi][r] = 0.0f;
    for (int32_t base = 0; base < n_in; base += MM_CHUNK) {
        const int32_t width = n_in - base < MM_CHUNK ? n_in - base : MM_CHUNK; // a multiple of 8
        const int32_t quads = width / 4;
        __syncthreads(); // the previous chunk is consumed
        for (int32_t i = threadIdx.x; i < nr * quads; i += MM_WARPS * 32) {
            const int32_t r = i / quads, c = i % quads;
            emt_st(xs + r * (MM_CHUNK / 4) + c, emt_ld((const float4 *)(x + (size_t)(r0 + r) * n_in + base) + c));
        }
        __syncthreads();
        if (o0 >= n_out) continue; // the same for the whole warp; idle warps still stage activations
        if (OUTS == 1) {
            // all LOADS weight loads first, in flight together
            const uint4 *w = (const uint4 *)(W + (size_t)o0 * row_bytes);
            uint4 wv[LOADS] = {};
            EMT_UNROLL
            for (int k = 0; k < LOADS; k++)
                if (k * 32 * V + lane * V < width) wv[k] = emt_ld(w + (base + k * 32 * V + lane * V) / V);
            EMT_UNROLL
            for (int k = 0; k < LOADS; k++) {
                const int32_t g = k * 32 * V + lane * V;
                if (g >= width) break;
                float wf[V];
                unpack_dense<DT, V>(wv[k], wf);
                EMT_UNROLL
                for (int r = 0; r < MM_ROW_TILE; r++) {
                    if (r >= nr) continue;
                    float xv[V];
                    staged_activations<V>(xs + r * (MM_CHUNK / 4) + g / 4, lane, xv);
                    EMT_UNROLL
                    for (int j = 0; j < V; j++) acc[0][r] = fmaf(wf[j], xv[j], acc[0][r]);
                }
            }
        } else {
            // the OUTS outputs' loads of each k in flight together; each
            // activation read from shared memory once serves OUTS outputs
            const int n_act = n_out - o0 < OUTS ? n_out - o0 : OUTS;
            EMT_UNROLL
            for (int k = 0; k < LOADS; k++) {
                const int32_t g = k * 32 * V + lane * V;
                if (g >= width) break;
                uint4 wv[OUTS] = {};
                EMT_UNROLL
                for (int oi = 0; oi < OUTS; oi++)
                    if (oi < n_act) wv[oi] = emt_ld((const uint4 *)(W + (size_t)(o0 + oi) * row_bytes) + (base + g) / V);
                float wf[OUTS][V];
                EMT_UNROLL
                for (int oi = 0; oi < OUTS; oi++) unpack_dense<DT, V>(wv[oi], wf[oi]);
                EMT_UNROLL
                for (int r = 0; r < MM_ROW_TILE; r++) {
                    if (r >= nr) continue;
                    float xv[V];
                    staged_activations<V>(xs + r * (MM_CHUNK / 4) + g / 4, lane, xv);
                    EMT_UNROLL
                    for (int oi = 0; oi < OUTS; oi++)
                        EMT_UNROLL
                        for (int j = 0; j < V; j++) acc[oi][r] = fmaf(wf[oi][j], xv[j], acc[oi][r]);
                }
            }
        }
    }
    // o and nr are the same for the whole warp: absent outputs and rows are
    // not reduced (an idle warp has passed the block's last barrier)
    for (int oi = 0; oi < OUTS; oi++) {
        const int32_t o = o0 + oi;
        if (o >= n_out) break;
        EMT_UNROLL
        for (int r = 0; r < MM_ROW_TILE; r++) {
            if (r >= nr) break;
            const float v = warp_sum(acc[oi][r]); // every lane of the warp: the shuffles need the whole warp
            if (o < n_out && lane == 0 && r < nr) emt_st(y + (size_t)(r0 + r) * n_out + o, bias ? v + emt_ld(bias + o) : v);
        }
    }
}
template <int DT>
__global__ void __launch_bounds__(MM_WARPS * 32)
    dense_product_kernel(const uint8_t *W, size_t row_bytes, const float *bias, const float *x, int32_t n_rows,
                         int32_t n_in, int32_t n_out, float *y) {
    dense_product<DT, 1>(W, row_bytes, bias, x, n_rows, n_in, n_out, y);
}
template <int DT>
__global__ void __launch_bounds__(MM_WARPS * 32)
    dense_product_x4_kernel(const uint8_t *W, size_t row_bytes, const float *bias, const float *x, int32_t n_rows,
                            int32_t n_in, int32_t n_out, float *y) {
    dense_product<DT, 4>(W, row_bytes, bias, x, n_rows, n_in, n_out, y);
}

// cp.async.cg (sm_80 and later): 16 bytes from global to shared memory
// without passing through a register, completion tracked per thread by
// commit groups (wait_group N: all but the N newest are done). Weight
// streams go this way because a register load shares its scoreboard with
// the other global loads: ptxas then made tc_product_kernel's activation
// staging wait for every weight load in flight, the one issued just before
// included, and its DEPTH chunks of prefetch collapsed to one DRAM latency
// per chunk (docs/performance.md, issue 34). The harness copies at once (a
// counted load and store); a reader of another lane's copies needs the
// writer's wait and then a barrier (__syncwarp, __syncthreads).
#ifdef EMT_CUDA_HARNESS
__device__ inline void cp_async16(uint4 *dst, const uint4 *src) { emt_st(dst, emt_ld(src)); }
__device__ inline void cp_async_commit() {}
template <int N> __device__ inline void cp_async_wait() {}
#else
__device__ __forceinline__ void cp_async16(uint4 *dst, const uint4 *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#endif

// Quantized weights (Q8_0, Q4_0, Q4_1, Q4_K) for rows of whole 16-byte units
// at 16-byte aligned addresses (every 7B row: 4096 and 11008 values). Grid
// and warps as product_kernel: one warp per output, a tile of up to
// MM_ROW_TILE rows per block. The warp stages 32 units (32-value blocks or
// Q4_K sub-blocks) of its weight row in shared memory with coalesced
// 16-byte cp.async copies (576 to 1088 bytes), QS_DEPTH stages ahead of
// their use (a ring; before, each stage waited for its own loads), then decodes
// them with LANES_PER_UNIT lanes per unit, each taking PER_LANE consecutive
// values: the activations of a warp step are then one contiguous run (16-
// or 8-byte loads, 512 or 256 bytes per request) instead of 32 runs 128
// bytes apart, and the shared reads of a step fall in distinct banks or the
// same word. Batch invariance: lane l always takes the same values of every
// unit, in the same order, for every row; then the fixed butterfly.
// TILE is MM_ROW_TILE, or 1 for a one-row call (the AR step): the unrolled
// row loop's absent rows are predicated off, not skipped, and cost issue
// slots all the same (157 SASS instructions per step for Q4_0 at TILE 8,
// the kernel's limit at 1 row: docs/performance.md, issue 34). A row's
// operations are the same in both.
#define QS_UNITS 32 // units staged per warp step
#define QS_DEPTH 4  // stages of a warp's weight row in flight (cp.async ring)
template <int DT, int TILE>
__global__ void __launch_bounds__(MM_WARPS * 32)
    staged_product_kernel(const uint8_t *W, size_t row_bytes, const float *bias, const float *x, int32_t n_rows,
                          int32_t n_in, int32_t n_out, float *y) {
    constexpr int STAGE = QS_UNITS * QK / block_values(DT) * block_bytes(DT); // bytes of 32 units
    constexpr int PER_LANE = DT == EMT_Q8_0 ? 2 : 4;                          // values per lane and unit
    constexpr int LANES_PER_UNIT = QK / PER_LANE;
    constexpr int UNITS_PER_STEP = 32 / LANES_PER_UNIT;
    __shared__ uint4 stage[MM_WARPS][QS_DEPTH][STAGE / 16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int32_t o = blockIdx.y * MM_WARPS + warp;
    if (o >= n_out) return; // a whole warp; the block has no barrier
    const int32_t r0 = blockIdx.x * MM_ROW_TILE;
    const int nr = n_rows - r0 < TILE ? n_rows - r0 : TILE;
    const uint4 *wrow = (const uint4 *)(W + (size_t)o * row_bytes);
    const int sub = lane / LANES_PER_UNIT, t = lane % LANES_PER_UNIT;
    const int32_t n_units = n_in / QK;
    float acc[TILE];
    for (int r = 0; r < TILE; r++) acc[r] = 0.0f;
    // stage u0 / QS_UNITS goes to ring slot (u0 / QS_UNITS) % QS_DEPTH, QS_DEPTH
    // stages ahead of its use (one commit group per stage, empty past the row)
    auto load_stage = [&](int32_t u0) {
        // lanes 0-3 copy a 36- or 68-vector slice's tail alone; the prologue's
        // slices follow one another with no barrier between (harness pairing)
        EMT_REQUEST_TAG(u0 / QS_UNITS);
        if (u0 < n_units) {
            const int32_t units = n_units - u0 < QS_UNITS ? n_units - u0 : QS_UNITS;
            const int32_t vecs = units * QK / block_values(DT) * block_bytes(DT) / 16;
            const uint4 *src = wrow + (size_t)u0 / (block_values(DT) / QK) * block_bytes(DT) / 16;
            uint4 *dst = stage[warp][u0 / QS_UNITS % QS_DEPTH];
            for (int32_t i = lane; i < vecs; i += 32) cp_async16(dst + i, src + i);
        }
        cp_async_commit();
    };
    for (int s = 0; s < QS_DEPTH; s++) load_stage(s * QS_UNITS);
    for (int32_t u0 = 0; u0 < n_units; u0 += QS_UNITS) {
        // whole 16-byte units (row_bytes % 16 == 0) make `units` a multiple
        // of UNITS_PER_STEP: every lane takes part in every step
        const int32_t units = n_units - u0 < QS_UNITS ? n_units - u0 : QS_UNITS;
        const uint8_t *sb = (const uint8_t *)stage[warp][u0 / QS_UNITS % QS_DEPTH];
        cp_async_wait<QS_DEPTH - 1>(); // this lane's copies of the stage
        __syncwarp();                  // ... and the other lanes'
        for (int32_t s = 0; s < units; s += UNITS_PER_STEP) {
            const int32_t u = s + sub;
            float q[PER_LANE], d, m = 0.0f;
            if (DT == EMT_Q8_0) {
                const uint8_t *blk = sb + u * 34;
                d = f16_to_float(emt_ld((const uint16_t *)blk));
                const uint16_t two = emt_ld((const uint16_t *)(blk + 2 + 2 * t));
                q[0] = (float)(int8_t)(two & 0xff);
                q[1 % PER_LANE] = (float)(int8_t)(two >> 8);
            } else if (DT == EMT_Q4_0) {
                const uint8_t *blk = sb + u * 18;
                d = f16_to_float(emt_ld((const uint16_t *)blk));
                const uint16_t *qs = (const uint16_t *)(blk + 2 + 4 * (t % 4));
                const uint32_t four = emt_ld(qs) | (uint32_t)emt_ld(qs + 1) << 16;
                for (int j = 0; j < PER_LANE; j++) q[j] = (float)((int)((four >> (8 * j + (t >= 4 ? 4 : 0))) & 0x0F) - 8);
            } else if (DT == EMT_Q4_1) {
                const uint8_t *blk = sb + u * 20;
                d = f16_to_float(emt_ld((const uint16_t *)blk));
                m = f16_to_float(emt_ld((const uint16_t *)(blk + 2)));
                const uint32_t four = emt_ld((const uint32_t *)(blk + 4 + 4 * (t % 4)));
                for (int j = 0; j < PER_LANE; j++) q[j] = (float)((four >> (8 * j + (t >= 4 ? 4 : 0))) & 0x0F);
            } else { // Q4_K: sub-block u % 8 of super-block u / 8
                const uint8_t *blk = sb + (u / 8) * 144;
                const int sj = u % 8;
                int sc, mn;
                kquant_scale_min(blk + 4, sj, &sc, &mn);
                d = f16_to_float(emt_ld((const uint16_t *)blk)) * (float)sc;
                m = -(f16_to_float(emt_ld((const uint16_t *)(blk + 2))) * (float)mn);
                const uint32_t four = emt_ld((const uint32_t *)(blk + 16 + 32 * (sj / 2) + 4 * t));
                for (int j = 0; j < PER_LANE; j++) q[j] = (float)((four >> (8 * j + (sj % 2 ? 4 : 0))) & 0x0F);
            }
            EMT_UNROLL
            for (int r = 0; r < TILE; r++) {
                if (r >= nr) continue;
                const float *xp = x + (size_t)(r0 + r) * n_in + (size_t)(u0 + u) * QK + PER_LANE * t;
                float xv[PER_LANE];
                if (PER_LANE == 4) {
                    const float4 a = emt_ld((const float4 *)xp);
                    xv[0] = a.x, xv[1 % PER_LANE] = a.y, xv[2 % PER_LANE] = a.z, xv[3 % PER_LANE] = a.w;
                } else {
                    const float2 a = emt_ld((const float2 *)xp);
                    xv[0] = a.x, xv[1 % PER_LANE] = a.y;
                }
                float dot = 0.0f;
                for (int j = 0; j < PER_LANE; j++) dot = fmaf(q[j], xv[j], dot);
                acc[r] = fmaf(d, dot, acc[r]);
                if (DT == EMT_Q4_1 || DT == EMT_Q4_K) {
                    float sum = 0.0f;
                    for (int j = 0; j < PER_LANE; j++) sum += xv[j];
                    acc[r] = fmaf(m, sum, acc[r]);
                }
            }
        }
        __syncwarp(); // the whole warp has read the slot before it is refilled
        load_stage(u0 + QS_DEPTH * QS_UNITS);
    }
    EMT_UNROLL
    for (int r = 0; r < TILE; r++) {
        if (r >= nr) break; // the block's: the whole warp stops together
        const float v = warp_sum(acc[r]);
        if (lane == 0 && r < nr) emt_st(y + (size_t)(r0 + r) * n_out + o, bias ? v + emt_ld(bias + o) : v);
    }
}

static const char *dtype_name(int dt) {
    static const char *const names[] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1" };
    return dt == EMT_Q4_K ? "Q4_K" : dt >= 0 && dt < 6 ? names[dt] : "?";
}

// ------------------------------------------------- tensor-core BF16 product
// BF16 weights on the tensor cores (mma.m16n8k16, FP32 accumulation:
// emt_mma_bf16_m16n8k16 in cuda/cuda_launch.h), for every row count: the AR
// step (1 row, padded to the 8 columns of one mma) and a verify or prefill
// (up to 64 rows per block) run the same kernel, so a tree row gets its AR
// row's bits by construction.
//
// Exactness: each FP32 activation is split into three BF16 values, x = hi +
// mid + lo exactly (hi = bf16(x), mid = bf16(x - hi), lo = x - hi - mid,
// each difference exact in FP32; finite x whose parts stay normal), and a
// weight times each part is exact in FP32, so the products are those of an
// FP32 product; only the accumulation rounds (inside the mma, then across
// k-tiles and warps), as in the CUDA-core kernels, within the same bound
// (test_cuda_kernels). Three mmas per k-tile: at 64 rows of 7B that is
// about as long on H100 tensor cores (mma.sync) as reading the weights
// (scripts/roofline.py).
//
// Batch invariance: the mma's element D[m][n] depends only on row m of A
// (an output's weights), column n of B (one row's activations) and C[m][n]
// (cuda_launch.h). An output's sum is split over TC_KWARPS warps by a fixed
// rule that depends on n_in only: warp kw takes the 32-input steps s with
// s % TC_KWARPS == kw, each as two k-tiles (inputs 8t..8t+3 and 8t+4..8t+7
// of the step in lane t's registers: a 16-byte weight load), hi then mid then
// lo; the warps' partial sums are added in warp order. The rows in a block,
// the outputs per block and the row's position never enter.
//
// Memory: lane (g, t) reads 16 bytes of weight rows o+g and o+g+8 per step
// (64 contiguous bytes per row and request); the block stages the rows'
// activations of each TC_CHUNK inputs once, split, in shared memory (rows
// TC_ROW_BYTES apart: hi, mid and lo planes plus 64 bytes of padding, so the
// 16-byte fragment reads of two rows fall in different bank halves), and
// its MW x MT m-tiles of 16 outputs share them (below: from 17 rows on, 64
// or 128 outputs per staged activation).
// The weights go global -> shared by cp.async into a per-warp ring of DEPTH
// chunks (8 at MT = 1: 8 KB per warp in flight), each lane reading back its
// own 2 x MT x 16 bytes just before its mmas; only the activations pass
// through registers on the way in.
#define TC_KWARPS 4
#define TC_KSTEP 32
#define TC_CHUNK (TC_KWARPS * TC_KSTEP)
#define TC_PLANE (TC_CHUNK * 2)                // bytes of one staged plane of a row
#define TC_ROW_BYTES (3 * TC_PLANE + 64)       // 832: = 64 (mod 128)

// A variant's shape: NT n-tiles of 8 rows per warp, MT m-tiles of 16
// outputs per warp (each B fragment read from shared memory serves MT
// mmas), MW warps of outputs per block, and DEPTH chunks of weight loads in
// flight per warp (fewer where MT multiplies the loads per chunk).
// Two forms of the same arithmetic:
// - in-block (SPLIT false): the block's TC_KWARPS x MW warps; warp w takes
//   the input share kw = w % TC_KWARPS of outputs group MW + w / TC_KWARPS,
//   and warp kw = 0 adds the shares' partial sums in warp order (shared
//   memory). RW = 1.
// - split over blocks (SPLIT true, a verify's 33-64 rows): blockIdx.x is
//   the input share kw (the grid is share x group x row tile, so a tile's
//   blocks run next to each other), the block's MW x RW warps each take MT m-tiles and
//   NT n-tiles (warp w: outputs MW-group w % MW, rows RW-group w / MW), so
//   that a block covers 64 rows x 128 outputs: the weights cross L2 once
//   per launch and each staged activation serves 128 outputs. Each block
//   writes its share's partial sums to global memory; the block of the tile
//   that arrives last (a counter per tile) adds the four shares in share
//   order, as warp kw = 0 does in the in-block form, resets the counter, and
//   discards the shares' lines from L2 (discard.global.L2: read once, they
//   are never written back to DRAM).
// None of NT, MT, MW, RW or SPLIT enters an output's arithmetic.
__host__ __device__ constexpr int tc_depth(int mt) { return mt > 1 ? 3 : 8; }
__host__ __device__ constexpr int tc_warps(int mw, int rw, bool split) { return split ? mw * rw : TC_KWARPS * mw; }

// Shared bytes of a block: the staged rows, then (in-block form, reused) the
// warps' partial sums; after them the weight ring (tc_ring_bytes).
__host__ __device__ constexpr size_t tc_stage_bytes(int nt, int mt, int mw, int rw, bool split) {
    return split || (size_t)8 * nt * rw * TC_ROW_BYTES > (size_t)mw * (TC_KWARPS - 1) * mt * nt * 4 * 32 * 4
               ? (size_t)8 * nt * rw * TC_ROW_BYTES
               : (size_t)mw * (TC_KWARPS - 1) * mt * nt * 4 * 32 * 4;
}
// The weight ring: per warp, DEPTH chunks x MT m-tiles x 2 (rows g, g + 8)
// x 32 lanes x 16 bytes, filled by cp.async (below).
__host__ __device__ constexpr size_t tc_ring_bytes(int mt, int mw, int rw, bool split) {
    return (size_t)tc_warps(mw, rw, split) * tc_depth(mt) * mt * 2 * 32 * 16;
}
__host__ __device__ constexpr size_t tc_shared_bytes(int nt, int mt, int mw, int rw, bool split) {
    return tc_stage_bytes(nt, mt, mw, rw, split) + tc_ring_bytes(mt, mw, rw, split);
}

// Grid: (ceil(n_rows / (8 NT RW)), sum over the matrices of ceil(n_out / (16
// MT MW)), SPLIT ? TC_KWARPS : 1).
// One launch over up to EMT_MAX_FUSED matrices of the same inputs (Q/K/V,
// gate/up: matmul_q_multi, matmul_q_gated): matrix m takes the output groups
// (blockIdx.y) below group_end[m]; its outputs' arithmetic is that of a
// launch of its own. With `add` (matmul_q_add: the residual add in the
// epilogue) each output is added to what y holds, one rounded add
// (__fadd_rn: no contraction) of the value a plain launch stores, so the
// bits of the product then add_kernel.
struct tc_mats {
    const uint8_t *W[EMT_MAX_FUSED];
    const float *bias[EMT_MAX_FUSED];
    float *y[EMT_MAX_FUSED];
    int32_t n_out[EMT_MAX_FUSED], group_end[EMT_MAX_FUSED];
    int n;
    int add;
};

// The split form's partial sums (TC_KWARPS shares per tile, in the warps'
// fragment order: coalesced) and its tiles' arrival counters (zero between
// launches).
struct tc_split {
    float *part;
    int32_t *arrivals;
};

template <int NT, int MT, int MW, int RW, bool SPLIT>
__global__ void __launch_bounds__(tc_warps(MW, RW, SPLIT) * 32)
    tc_product_kernel(tc_mats mats, tc_split split, size_t row_bytes, const float *x, int32_t n_rows, int32_t n_in) {
    constexpr int DEPTH = tc_depth(MT), WARPS = tc_warps(MW, RW, SPLIT);
    int mat = 0; // the block's matrix
    while (mat + 1 < mats.n && (int32_t)blockIdx.y >= mats.group_end[mat]) mat++;
    const int32_t group = (int32_t)blockIdx.y - (mat ? mats.group_end[mat - 1] : 0);
    const uint8_t *W = mats.W[mat];
    const float *bias = mats.bias[mat];
    float *y = mats.y[mat];
    const int32_t n_out = mats.n_out[mat];
    EMT_DYNAMIC_SHARED(uint4, smem);
    uint8_t *stage = (uint8_t *)smem;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // the split form's grid is (share, group, row tile): a tile's TC_KWARPS
    // blocks are adjacent in launch order, so its partial sums are written
    // and read back while they are still in L2
    const int32_t row_tile = SPLIT ? (int32_t)blockIdx.z : (int32_t)blockIdx.x;
    const int32_t row_tiles = SPLIT ? (int32_t)gridDim.z : (int32_t)gridDim.x;
    const int kw = SPLIT ? (int)blockIdx.x : warp % TC_KWARPS, mw = SPLIT ? warp % MW : warp / TC_KWARPS;
    const int wr0 = SPLIT ? warp / MW * 8 * NT : 0; // the warp's first row in the block
    const int32_t o0 = (group * MW + mw) * 16 * MT, r0 = row_tile * 8 * NT * RW;
    const int nr = n_rows - r0 < 8 * NT * RW ? n_rows - r0 : 8 * NT * RW;
    const int nr8 = (nr + 7) & ~7; // staged rows: the last n-tile's missing rows are zeros
    const bool warp_live = o0 < n_out && wr0 < nr; // the whole warp's
    bool has_g[MT], has_g8[MT];
    const uint4 *w_g[MT], *w_g8[MT];
    for (int mt = 0; mt < MT; mt++) {
        const int32_t o = o0 + 16 * mt + g;
        has_g[mt] = o < n_out, has_g8[mt] = o + 8 < n_out;
        w_g[mt] = (const uint4 *)(W + (size_t)(has_g[mt] ? o : 0) * row_bytes);
        w_g8[mt] = (const uint4 *)(W + (size_t)(has_g8[mt] ? o + 8 : 0) * row_bytes);
    }
    float acc[MT][NT][4];
    EMT_UNROLL
    for (int mt = 0; mt < MT; mt++)
        EMT_UNROLL
        for (int j = 0; j < NT; j++)
            for (int i = 0; i < 4; i++) acc[mt][j][i] = 0.0f;
    // the weights of DEPTH chunks in flight: chunk c's loads go out (one
    // cp.async commit group per chunk, empty where the lane has none) when
    // chunk c - DEPTH has been multiplied, into ring slot c % DEPTH; a lane
    // reads back only its own slots (ring[d][mt][0 or 1][lane])
    uint4 *ring = (uint4 *)(stage + tc_stage_bytes(NT, MT, MW, RW, SPLIT)) + (size_t)warp * DEPTH * MT * 2 * 32;
    auto ring_slot = [&](int d, int mt, int half) { return ring + ((d * MT + mt) * 2 + half) * 32 + lane; };
    auto load_weights = [&](int32_t base, int d) {
        const int32_t k = base + kw * TC_KSTEP; // the whole warp's
        if (warp_live && k < n_in) {
            EMT_UNROLL
            for (int mt = 0; mt < MT; mt++) {
                // a missing output's weights are zeros (its mma rows are not stored)
                if (has_g[mt]) cp_async16(ring_slot(d, mt, 0), w_g[mt] + (k + 8 * t) / 8);
                else emt_st(ring_slot(d, mt, 0), uint4{ 0, 0, 0, 0 });
                if (has_g8[mt]) cp_async16(ring_slot(d, mt, 1), w_g8[mt] + (k + 8 * t) / 8);
                else emt_st(ring_slot(d, mt, 1), uint4{ 0, 0, 0, 0 });
            }
        }
        cp_async_commit();
    };
    // the activations of the next chunk in flight too: a thread's share of
    // a chunk's staging loads goes out before the chunk before it is
    // multiplied, so their latency hides behind its mmas. The split form
    // stages only its share's step, where the in-block form's warp kw reads
    // it; lane order is row-major (8 or 16 lanes load and store a row's 64
    // or 128 bytes).
    constexpr int STAGE_QUADS = SPLIT ? TC_KSTEP / 4 : TC_CHUNK / 4;
    constexpr int STAGE_LOADS = (8 * NT * RW * STAGE_QUADS + WARPS * 32 - 1) / (WARPS * 32); // per thread and chunk
    auto stage_quads = [&](int32_t base) { // quads per staged row of the chunk at `base` (0: none)
        const int32_t width = n_in - base < TC_CHUNK ? n_in - base : TC_CHUNK; // a multiple of TC_KSTEP
        return SPLIT ? (kw * TC_KSTEP < width ? TC_KSTEP / 4 : 0) : width / 4;
    };
    const int32_t q0 = SPLIT ? kw * (TC_KSTEP / 4) : 0;
    float4 xa[STAGE_LOADS];
    auto load_activations = [&](int32_t base) {
        const int32_t quads = base < n_in ? stage_quads(base) : 0;
        EMT_UNROLL
        for (int it = 0; it < STAGE_LOADS; it++) {
            xa[it] = float4{ 0.0f, 0.0f, 0.0f, 0.0f };
            const int32_t i = threadIdx.x + it * WARPS * 32;
            if (i >= nr * quads) break; // the thread's tail
            const int32_t r = i / quads, c = q0 + i - r * quads;
            xa[it] = emt_ld((const float4 *)(x + (size_t)(r0 + r) * n_in + base) + c);
        }
    };
    // the last n-tile's rows nr .. nr8 - 1 are zeros for the whole launch:
    // written once here, not split and stored again for every chunk (at 1
    // row that was 7 of the 8 staged rows)
    for (int32_t i = threadIdx.x; i < (nr8 - nr) * (TC_ROW_BYTES / 16); i += WARPS * 32)
        emt_st((uint4 *)(stage + (size_t)nr * TC_ROW_BYTES) + i, uint4{ 0, 0, 0, 0 });
    EMT_UNROLL
    for (int d = 0; d < DEPTH; d++) {
        EMT_REQUEST_TAG(~0u - d); // lanes of a partial m-tile skip the tail of each chunk's loads
        load_weights(d * TC_CHUNK, d);
    }
    EMT_REQUEST_TAG(~0u - DEPTH);
    load_activations(0);
    for (int32_t base0 = 0; base0 < n_in; base0 += DEPTH * TC_CHUNK) {
        EMT_UNROLL
        for (int d = 0; d < DEPTH; d++) {
            const int32_t base = base0 + d * TC_CHUNK;
            if (base >= n_in) break; // the whole block's
            EMT_REQUEST_TAG(base / TC_CHUNK); // the staging loop's lanes skip different tails per chunk
            const int32_t width = n_in - base < TC_CHUNK ? n_in - base : TC_CHUNK; // a multiple of TC_KSTEP
            const int32_t quads = stage_quads(base);
            if (!quads) break; // the split block's share has no step in the last chunk
            __syncthreads(); // the previous chunk is consumed
            EMT_UNROLL
            for (int it = 0; it < STAGE_LOADS; it++) {
                const int32_t i = threadIdx.x + it * WARPS * 32;
                if (i >= nr * quads) break;
                const int32_t r = i / quads, c = q0 + i - r * quads;
                const float vs[4] = { xa[it].x, xa[it].y, xa[it].z, xa[it].w };
                uint32_t h[4], m[4], l[4];
                for (int e = 0; e < 4; e++) split_bf16x3(vs[e], &h[e], &m[e], &l[e]);
                uint8_t *row = stage + (size_t)r * TC_ROW_BYTES + 8 * c;
                emt_st((uint2 *)row, uint2{ h[0] | h[1] << 16, h[2] | h[3] << 16 });
                emt_st((uint2 *)(row + TC_PLANE), uint2{ m[0] | m[1] << 16, m[2] | m[3] << 16 });
                emt_st((uint2 *)(row + 2 * TC_PLANE), uint2{ l[0] | l[1] << 16, l[2] | l[3] << 16 });
            }
            load_activations(base + TC_CHUNK); // the next chunk's, in flight during this one's mmas
            __syncthreads();
            cp_async_wait<DEPTH - 1>(); // this chunk's weights (DEPTH groups were committed after the one before it)
            if (warp_live && kw * TC_KSTEP < width) { // the whole warp's
                uint4 wa[MT], wb[MT];
                EMT_UNROLL
                for (int mt = 0; mt < MT; mt++) wa[mt] = emt_ld(ring_slot(d, mt, 0)), wb[mt] = emt_ld(ring_slot(d, mt, 1));
                EMT_UNROLL
                for (int j = 0; j < NT; j++) {
                    if (wr0 + 8 * j >= nr) break; // the whole warp's
                    const uint8_t *row = stage + (size_t)(wr0 + 8 * j + g) * TC_ROW_BYTES + kw * 64 + 16 * t;
                    EMT_UNROLL
                    for (int plane = 0; plane < 3; plane++) {
                        const uint4 p = emt_ld((const uint4 *)(row + plane * TC_PLANE));
                        // k-tile 0: inputs 8t..8t+3 of the step; k-tile 1: 8t+4..8t+7
                        const uint32_t b0[2] = { p.x, p.y }, b1[2] = { p.z, p.w };
                        EMT_UNROLL
                        for (int mt = 0; mt < MT; mt++) {
                            if (o0 + 16 * mt >= n_out) break; // the whole warp's: m-tiles past the outputs
                            const uint4 ua = wa[mt], ub = wb[mt];
                            const uint32_t a0[4] = { ua.x, ub.x, ua.y, ub.y }, a1[4] = { ua.z, ub.z, ua.w, ub.w };
                            emt_mma_bf16_m16n8k16(acc[mt][j], a0, b0, acc[mt][j]);
                            emt_mma_bf16_m16n8k16(acc[mt][j], a1, b1, acc[mt][j]);
                        }
                    }
                }
            }
            load_weights(base + DEPTH * TC_CHUNK, d);
        }
    }
    // the input shares' partial sums, added in share order: share 0's, then
    // share 1's, ... (the in-block form by warp kw = 0, the split form by the
    // tile's last block); then the bias
    float *part;
    size_t share_stride = 0;
    if (SPLIT) {
        const size_t tile = (size_t)blockIdx.y * row_tiles + row_tile;
        share_stride = (size_t)WARPS * MT * NT * 4 * 32;
        part = split.part + (tile * TC_KWARPS * WARPS + warp) * MT * NT * 4 * 32;
    } else {
        part = (float *)smem + (size_t)mw * (TC_KWARPS - 1) * MT * NT * 4 * 32;
    }
    // share p's slot: the split form keeps share 0's too
    auto slot = [&](int p, int mt, int j, int i) {
        return SPLIT ? part + p * share_stride + (((size_t)mt * NT + j) * 4 + i) * 32 + lane
                     : part + ((((size_t)(p - 1) * MT + mt) * NT + j) * 4 + i) * 32 + lane;
    };
    if (!SPLIT) __syncthreads(); // the last chunk is consumed: its stage becomes the partial sums
    if ((SPLIT || kw > 0) && warp_live) {
        EMT_UNROLL
        for (int mt = 0; mt < MT; mt++)
            EMT_UNROLL
            for (int j = 0; j < NT; j++)
                if (wr0 + 8 * j < nr && o0 + 16 * mt < n_out)
                    for (int i = 0; i < 4; i++) emt_st(slot(kw, mt, j, i), acc[mt][j][i]);
    }
    if (SPLIT) {
        // the last of the tile's TC_KWARPS blocks to arrive adds the shares
        // (threadFenceReduction: each block's stores are visible device-wide
        // before its arrival is counted)
        __shared__ int last_arrival;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            int32_t *arrivals = split.arrivals + (size_t)blockIdx.y * row_tiles + row_tile;
            last_arrival = atomicAdd(arrivals, 1) == TC_KWARPS - 1;
            if (last_arrival) *arrivals = 0; // for the next launch (no other block of the tile is left)
        }
        __syncthreads();
        if (!last_arrival) return;
        __threadfence();
    } else {
        __syncthreads();
        if (kw > 0) return;
    }
    if (!warp_live) return;
    EMT_UNROLL
    for (int mt = 0; mt < MT; mt++)
        EMT_UNROLL
        for (int j = 0; j < NT; j++) {
            if (wr0 + 8 * j >= nr || o0 + 16 * mt >= n_out) break;
            for (int i = 0; i < 4; i++) {
                // the other blocks' shares bypass L1 (ld.global.cg): they were written by other SMs
                float v = SPLIT && kw != 0 ? emt_ld_cg(slot(0, mt, j, i)) : acc[mt][j][i];
                for (int p = 1; p < TC_KWARPS; p++)
                    v += !SPLIT ? emt_ld(slot(p, mt, j, i)) : p == kw ? acc[mt][j][i] : emt_ld_cg(slot(p, mt, j, i));
                const int r = wr0 + 8 * j + 2 * t + (i & 1);
                const int32_t o = o0 + 16 * mt + g + 8 * (i >> 1);
                if (r < nr && o < n_out) {
                    float *out = y + (size_t)(r0 + r) * n_out + o;
                    const float product = bias ? v + emt_ld(bias + o) : v;
                    emt_st(out, mats.add ? __fadd_rn(emt_ld(out), product) : product);
                }
            }
            if (SPLIT) {
                // the shares of these 4 x 32 sums are read (every lane, then
                // __syncwarp): each share's 128-byte line leaves L2 without
                // being written back, so the partial sums cost L2 traffic
                // only, not DRAM (the next launch writes them again first)
                __syncwarp();
                for (int i = 0; i < 4; i++)
                    if (lane < TC_KWARPS) emt_discard_l2(slot(lane, mt, j, i) - lane);
            }
        }
}

template <int NT, int MT, int MW, int RW, bool SPLIT>
static void launch_tc(emt_exec *ex, int variant, tc_mats mats, size_t rb, const float *x, int32_t n_rows,
                      int32_t n_in) {
    const size_t shared = tc_shared_bytes(NT, MT, MW, RW, SPLIT);
    void (*const tc_product_kernel_shaped)(tc_mats, tc_split, size_t, const float *, int32_t, int32_t) =
        tc_product_kernel<NT, MT, MW, RW, SPLIT>; // one macro argument
    if (shared > 48 * 1024 && !(ex->tc_shared_optin & (1u << variant))) {
        const cudaError_t e =
            cudaFuncSetAttribute(tc_product_kernel_shaped, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared);
        if (e != cudaSuccess) {
            cu_set_error(ex, "cudaFuncSetAttribute(tc_product_kernel, max dynamic shared memory)", e);
            return;
        }
        ex->tc_shared_optin |= 1u << variant;
    }
    int32_t groups = 0;
    for (int m = 0; m < mats.n; m++) mats.group_end[m] = groups += (mats.n_out[m] + 16 * MT * MW - 1) / (16 * MT * MW);
    const unsigned row_tiles = (unsigned)((n_rows + 8 * NT * RW - 1) / (8 * NT * RW));
    const dim3 grid = SPLIT ? dim3(TC_KWARPS, (unsigned)groups, row_tiles) : dim3(row_tiles, (unsigned)groups, 1);
    tc_split split = { NULL, NULL };
    if (SPLIT) {
        const size_t tiles = (size_t)grid.x * grid.y;
        split.part = cu_scratch(ex, tiles * TC_KWARPS * (16 * MT * MW) * (8 * NT * RW));
        split.arrivals = cu_tc_arrivals(ex, tiles);
        if (!split.part || !split.arrivals) return; // an error, or a capture that cannot grow them: it runs directly
    }
    EMT_LAUNCH(tc_product_kernel_shaped, grid, tc_warps(MW, RW, SPLIT) * 32, shared, ex->stream, mats, split, rb, x,
               n_rows, n_in);
}

// The tensor-core kernel takes BF16 rows of whole 32-input steps at 16-byte
// aligned addresses.
static bool tc_takes(int dt, const void *W, const float *x, int32_t n_in) {
    return dt == EMT_BF16 && n_in % TC_KSTEP == 0 && (uintptr_t)W % 16 == 0 && (uintptr_t)x % 16 == 0;
}

static void tc_product(emt_exec *ex, const tc_mats &mats, size_t rb, const float *x, int32_t n_rows, int32_t n_in) {
    double ideal = 4.0 * n_rows * n_in; // the weights, the activations and the biases read once, the outputs written once
    for (int m = 0; m < mats.n; m++) // with add: the residual rows read too
        ideal += (double)rb * mats.n_out[m] + (mats.bias[m] ? 4.0 * mats.n_out[m] : 0) +
                 (mats.add ? 8.0 : 4.0) * n_rows * mats.n_out[m];
    int32_t n_out = 0;
    for (int m = 0; m < mats.n; m++) n_out += mats.n_out[m];
    EMT_OP(mats.add ? "BF16+ADD" : dtype_name(EMT_BF16), ideal, n_rows, n_in, n_out);
    // up to 64 rows: blocks of 32 rows (a 64-node verify's 7B products then
    // fill 128 SMs; each block's weights come from DRAM once and from L2 for
    // the second row tile, next to it in launch order); more: 64 rows
    if (n_rows <= 8) launch_tc<1, 1, 1, 1, false>(ex, 0, mats, rb, x, n_rows, n_in);
    else if (n_rows <= 16) launch_tc<2, 1, 1, 1, false>(ex, 1, mats, rb, x, n_rows, n_in);
    else if (n_rows <= 32) launch_tc<2, 4, 1, 1, false>(ex, 2, mats, rb, x, n_rows, n_in);
    else if (n_rows <= 64) launch_tc<4, 4, 2, 2, true>(ex, 3, mats, rb, x, n_rows, n_in);
    else launch_tc<4, 4, 1, 1, false>(ex, 4, mats, rb, x, n_rows, n_in);
}


// Bytes of one row of n values, 0 when the row is not whole blocks (or the
// dtype is not one the plugin takes).
static size_t row_bytes(int dt, int32_t n) {
    if (dt != EMT_F32 && !(CU_WEIGHT_TYPES & (1u << dt))) return 0;
    if (n % block_values(dt)) return 0;
    return block_bytes(dt) ? (size_t)(n / block_values(dt)) * block_bytes(dt) : (size_t)n * (dt == EMT_F32 ? 4 : 2);
}

#define PRODUCT(DT)                                                                                                   \
    EMT_LAUNCH(product_kernel<DT>, grid, MM_WARPS * 32, 0, ex->stream, (const uint8_t *)W, rb, bias, x, n_rows, n_in, \
               n_out, y)

// more rows than one tile (a verify, a prefill): 4 outputs per warp, so
// that each block's staged activations serve 32 outputs
#define DENSE_PRODUCT(DT)                                                                                          \
    do {                                                                                                           \
        if (n_rows > MM_ROW_TILE) {                                                                                \
            const dim3 grid4(grid.x, (unsigned)((n_out + 4 * MM_WARPS - 1) / (4 * MM_WARPS)));                     \
            EMT_LAUNCH(dense_product_x4_kernel<DT>, grid4, MM_WARPS * 32, 0, ex->stream, (const uint8_t *)W, rb,    \
                       bias, x, n_rows, n_in, n_out, y);                                                           \
        } else {                                                                                                   \
            EMT_LAUNCH(dense_product_kernel<DT>, grid, MM_WARPS * 32, 0, ex->stream, (const uint8_t *)W, rb,        \
                       bias, x, n_rows, n_in, n_out, y);                                                           \
        }                                                                                                          \
    } while (0)

// one row (the AR step): the kernel with a row tile of 1
#define STAGED_PRODUCT(DT)                                                                                     \
    do {                                                                                                       \
        void (*const staged_product_kernel_tiled)(const uint8_t *, size_t, const float *, const float *, int32_t, \
                                                  int32_t, int32_t, float *) =                                  \
            n_rows == 1 ? staged_product_kernel<DT, 1> : staged_product_kernel<DT, MM_ROW_TILE>;               \
        EMT_LAUNCH(staged_product_kernel_tiled, grid, MM_WARPS * 32, 0, ex->stream, (const uint8_t *)W, rb, bias, x, \
                   n_rows, n_in, n_out, y);                                                                    \
    } while (0)

static void launch_product(emt_exec *ex, int dt, const void *W, const float *bias, const float *x, int32_t n_rows,
                           int32_t n_in, int32_t n_out, float *y) {
    const size_t rb = row_bytes(dt, n_in);
    if (!rb) {
        cu_fail(ex, "cuda matmul: %s weight rows of %d values: not a dtype the plugin takes or not whole blocks of %d",
                dtype_name(dt), n_in, block_values(dt));
        return;
    }
    const int32_t groups = (n_out + MM_WARPS - 1) / MM_WARPS;
    if (groups > 65535) { // grid y's limit: 524,280 outputs
        cu_fail(ex, "cuda matmul: %d outputs exceed the kernel's %d", n_out, 65535 * MM_WARPS);
        return;
    }
    const dim3 grid((unsigned)((n_rows + MM_ROW_TILE - 1) / MM_ROW_TILE), (unsigned)groups);
    // ideal: the weights, the activations and the bias read once, the outputs written once
    EMT_OP(dtype_name(dt), (double)rb * n_out + 4.0 * n_rows * n_in + (bias ? 4.0 * n_out : 0) + 4.0 * n_rows * n_out,
           n_rows, n_in, n_out);
    if (tc_takes(dt, W, x, n_in)) {
        tc_mats mats = {};
        mats.W[0] = (const uint8_t *)W, mats.bias[0] = bias, mats.y[0] = y, mats.n_out[0] = n_out, mats.n = 1;
        tc_product(ex, mats, rb, x, n_rows, n_in);
        return;
    }
    const bool dense16 = (dt == EMT_F32 || dt == EMT_F16 || dt == EMT_BF16) && n_in % 8 == 0 &&
                         (uintptr_t)W % 16 == 0 && (uintptr_t)x % 16 == 0;
    if (dense16) {
        switch (dt) {
        case EMT_F32: DENSE_PRODUCT(EMT_F32); break;
        case EMT_F16: DENSE_PRODUCT(EMT_F16); break;
        default: DENSE_PRODUCT(EMT_BF16); break;
        }
        return;
    }
    const bool staged = block_bytes(dt) && rb % 16 == 0 && (uintptr_t)W % 16 == 0 && (uintptr_t)x % 16 == 0;
    if (staged) {
        switch (dt) {
        case EMT_Q8_0: STAGED_PRODUCT(EMT_Q8_0); break;
        case EMT_Q4_0: STAGED_PRODUCT(EMT_Q4_0); break;
        case EMT_Q4_1: STAGED_PRODUCT(EMT_Q4_1); break;
        default: STAGED_PRODUCT(EMT_Q4_K); break;
        }
        return;
    }
    switch (dt) {
    case EMT_F32: PRODUCT(EMT_F32); break;
    case EMT_F16: PRODUCT(EMT_F16); break;
    case EMT_BF16: PRODUCT(EMT_BF16); break;
    case EMT_Q8_0: PRODUCT(EMT_Q8_0); break;
    case EMT_Q4_0: PRODUCT(EMT_Q4_0); break;
    case EMT_Q4_1: PRODUCT(EMT_Q4_1); break;
    case EMT_Q4_K: PRODUCT(EMT_Q4_K); break;
    default: break;
    }
}

__global__ void bias_kernel(float *y, const float *bias, int32_t n_rows, int32_t n_out) {
    int64_t n = (int64_t)n_rows * n_out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % n_out];
}

// F32 weights: the batch-invariant kernel for every call the engine marks
// exact (decode, tree verify) and for short calls; cuBLAS for prompt-sized
// products, which AR and EntMTP share (the prefill).
void cu_matmul(emt_exec *ex, const float *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
               int32_t n_out, float *y, int exact) {
    if (exact || n_rows < 16) {
        launch_product(ex, EMT_F32, W, bias, x, n_rows, n_in, n_out, y);
        return;
    }
    // row-major y[n_rows][n_out] = x W^T is column-major y^T = W^T x^T:
    // A = W read as the column-major n_in x n_out matrix, transposed
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasSgemm(ex->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_rows, n_in, &one, W, n_in, x, n_in,
                                   &zero, y, n_out);
    if (s != CUBLAS_STATUS_SUCCESS) cu_fail(ex, "cublasSgemm failed (%d)", (int)s);
    int64_t n = (int64_t)n_rows * n_out;
    if (bias) EMT_LAUNCH(bias_kernel, (int)(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096), 256, 0, ex->stream, y, bias, n_rows, n_out);
}

// Typed weights: always the batch-invariant kernel (the contract of matmul_q).
void cu_matmul_q(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                 int32_t n_out, float *y) {
    launch_product(ex, W->dtype, W->data, bias, x, n_rows, n_in, n_out, y);
}

// y += x W^T (+ bias): the BF16 tensor-core product adds in its epilogue
// (one launch), other dtypes run the product into tmp, then add_kernel.
void cu_matmul_q_add(emt_exec *ex, const emt_wmat *W, const float *bias, const float *x, int32_t n_rows, int32_t n_in,
                     int32_t n_out, float *y, float *tmp) {
    if (!tc_takes(W->dtype, W->data, x, n_in) || n_out > 65535 * MM_WARPS) {
        cu_matmul_q(ex, W, bias, x, n_rows, n_in, n_out, tmp);
        cu_add(ex, y, tmp, (int64_t)n_rows * n_out);
        return;
    }
    tc_mats mats = {};
    mats.W[0] = (const uint8_t *)W->data, mats.bias[0] = bias, mats.y[0] = y, mats.n_out[0] = n_out, mats.n = 1;
    mats.add = 1;
    tc_product(ex, mats, row_bytes(EMT_BF16, n_in), x, n_rows, n_in);
}

// Products over the same input rows: one tensor-core launch for BF16
// weights, else one launch each (the same bits as matmul_q: each output's
// arithmetic does not depend on the launch it is in).
void cu_matmul_q_multi(emt_exec *ex, int32_t n_mats, const emt_wmat *const *W, const float *const *bias,
                       const int32_t *n_out, const float *x, int32_t n_rows, int32_t n_in, float *const *y) {
    bool fused = n_mats >= 1 && n_mats <= EMT_MAX_FUSED;
    int64_t total = 0; // the outputs of one launch: grid y's limit (65535 groups of at least 16)
    for (int32_t m = 0; m < n_mats && fused; m++) {
        fused = tc_takes(W[m]->dtype, W[m]->data, x, n_in);
        total += n_out[m];
    }
    fused = fused && total <= 65535 * MM_WARPS;
    if (!fused) {
        for (int32_t m = 0; m < n_mats; m++) cu_matmul_q(ex, W[m], bias[m], x, n_rows, n_in, n_out[m], y[m]);
        return;
    }
    tc_mats mats = {};
    for (int32_t m = 0; m < n_mats; m++)
        mats.W[m] = (const uint8_t *)W[m]->data, mats.bias[m] = bias[m], mats.y[m] = y[m], mats.n_out[m] = n_out[m];
    mats.n = n_mats;
    tc_product(ex, mats, row_bytes(EMT_BF16, n_in), x, n_rows, n_in);
}

// gate = act(x Wg^T + bg) * (x Wu^T + bu): the two products in one launch
// where they fuse, then the activation, as emt_matmul_gated's unfused path.
void cu_matmul_q_gated(emt_exec *ex, const emt_wmat *Wg, const float *bg, const emt_wmat *Wu, const float *bu,
                       const float *x, int32_t n_rows, int32_t n_in, int32_t n_out, int gelu, float *gate, float *up) {
    const emt_wmat *W[2] = { Wg, Wu };
    const float *bias[2] = { bg, bu };
    const int32_t outs[2] = { n_out, n_out };
    float *y[2] = { gate, up };
    cu_matmul_q_multi(ex, 2, W, bias, outs, x, n_rows, n_in, y);
    if (gelu) cu_geglu(ex, gate, up, (int64_t)n_rows * n_out, gate);
    else cu_swiglu(ex, gate, up, (int64_t)n_rows * n_out, gate);
}

// ------------------------------------------------------------- embed_q

// Element i of a typed row as a float, bit-identical to emt_tensor_to_f32
// (no FMA: the CPU rounds the product, then adds the minimum).
__device__ __forceinline__ float typed_at(int dt, const uint8_t *row, int32_t i) {
    float q[QK], d, m;
    switch (dt) {
    case EMT_F16: return dense_at<EMT_F16>(row, i);
    case EMT_BF16: return dense_at<EMT_BF16>(row, i);
    case EMT_Q8_0: decode_unit<EMT_Q8_0>(row, i / QK, q, &d, &m); return d * q[i % QK];
    case EMT_Q4_0: decode_unit<EMT_Q4_0>(row, i / QK, q, &d, &m); return d * q[i % QK];
    case EMT_Q4_1: decode_unit<EMT_Q4_1>(row, i / QK, q, &d, &m); break;
    default: decode_unit<EMT_Q4_K>(row, i / QK, q, &d, &m); break;
    }
    return __fadd_rn(__fmul_rn(d, q[i % QK]), m);
}

// One block per row. CPU twin: cpu_embed_q (emt_tensor_to_f32).
__global__ void embed_typed_kernel(int dt, const uint8_t *table, size_t row_bytes, int32_t dim, const int32_t *tokens,
                                   float *out) {
    const uint8_t *row = table + (size_t)tokens[blockIdx.x] * row_bytes;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) out[(size_t)blockIdx.x * dim + i] = typed_at(dt, row, i);
}

void cu_embed_q(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *tokens, int32_t n_rows, float *out) {
    const int dt = table->dtype;
    const size_t rb = dt == EMT_F32 ? 0 : row_bytes(dt, dim);
    if (!rb) {
        cu_fail(ex, "cuda embed: %s table rows of %d values: not a dtype the plugin takes or not whole blocks of %d",
                dtype_name(dt), dim, block_values(dt));
        return;
    }
    const int32_t *d_tok = (const int32_t *)cu_stage(ex, tokens, (size_t)n_rows * sizeof(int32_t));
    if (!d_tok) return;
    EMT_LAUNCH(embed_typed_kernel, n_rows, 256, 0, ex->stream, dt, (const uint8_t *)table->data, rb, dim, d_tok, out);
}

// embed_device: token ids already in device memory (the step's own results)
void cu_embed_device(emt_exec *ex, const emt_wmat *table, int32_t dim, const int32_t *d_tokens, int32_t n_rows,
                     float *out) {
    const int dt = table->dtype;
    if (dt == EMT_F32) {
        cu_embed_rows(ex, (const float *)table->data, dim, d_tokens, n_rows, out);
        return;
    }
    const size_t rb = row_bytes(dt, dim);
    if (!rb) {
        cu_fail(ex, "cuda embed: %s table rows of %d values: not a dtype the plugin takes or not whole blocks of %d",
                dtype_name(dt), dim, block_values(dt));
        return;
    }
    EMT_LAUNCH(embed_typed_kernel, n_rows, 256, 0, ex->stream, dt, (const uint8_t *)table->data, rb, dim, d_tokens,
               out);
}
