// Kernel launches and dynamic shared memory, spelled so that the same .cu
// files compile with nvcc (real GPU) and with the host C++ compiler against
// the CPU execution harness (tests/cuda_harness, docs/cuda-harness.md), which
// cannot parse the triple-chevron syntax.
//   EMT_LAUNCH(kernel, grid, block, dynamic_shared_bytes, stream, args...)
//   EMT_DYNAMIC_SHARED(float, buf);   // extern __shared__ float buf[];
//   EMT_UNROLL for (...)               // #pragma unroll (GCC: unroll 8)
//   EMT_NOINLINE                       // __noinline__ (a libstdc++ header spells __attribute__((__noinline__)): no macro of that name on the host)
//   emt_ld(p), emt_st(p, v)            // a counted global or shared access
//   emt_ld_cg(p)                       // a counted global load that bypasses L1 (ld.global.cg)
//   emt_discard_l2(p)                  // discard.global.L2: the 128-byte line at p leaves L2 unwritten
//   EMT_OP("op", bytes, rows, n_in, n_out); // the next launch's op, its shape and the least it must move
//   EMT_REQUEST_TAG(tag)               // the thread's counted accesses from here on belong to region `tag`
//   emt_mma_bf16_m16n8k16(d, a, b, c)  // a warp's tensor-core product D = A B + C (below)
// emt_ld/emt_st compile to a plain load/store with nvcc; on the harness they
// also report the address and width, from which it measures each kernel's
// memory efficiency as Nsight Compute would (docs/cuda-harness.md, "Memory
// efficiency"). Kernels read and write global and shared memory through them
// on their hot paths; EMT_OP names the op of the launch that follows, its
// shape, and the bytes it would move reading its inputs and writing its
// outputs once. EMT_REQUEST_TAG names a region of code that a warp's
// lanes enter together (a warp-uniform value, say the loop iteration of a
// loop whose body some lanes skip parts of): the harness pairs the lanes'
// accesses into warp-level requests within a region, so that lanes that
// skipped accesses in an earlier region do not shift the pairing.
#ifndef EMT_CUDA_LAUNCH_H
#define EMT_CUDA_LAUNCH_H

#include <stdint.h>
#include <string.h>

// Kernels launched by this thread, for the step counters (emt_exec_counters
// in src/backend/backend.h): an engine step runs on one thread.
inline thread_local long long emt_cuda_launch_count = 0;

#ifdef EMT_CUDA_HARNESS
#define EMT_LAUNCH(kernel, grid, block, shmem, stream, ...)                                              \
    do {                                                                                                 \
        ++emt_cuda_launch_count;                                                                         \
        emt_harness::launch(#kernel, __FILE__, __LINE__, kernel, grid, block, shmem, stream, ##__VA_ARGS__); \
    } while (0)
#define EMT_DYNAMIC_SHARED(type, name) type *name = (type *)emt_harness::dynamic_shared()
#define EMT_UNROLL _Pragma("GCC unroll 8")
#define EMT_NOINLINE __attribute__((noinline))
template <typename T>
inline T emt_ld(const T *p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    if (emt_harness::memstats_on) emt_harness::mem_access(p, sizeof(T), false, file, line, 0);
    return *p;
}
// ld.global.cg caches in L2 only: for data other blocks wrote in this launch
// (the harness has no L1 to bypass: a counted load)
template <typename T>
inline T emt_ld_cg(const T *p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    if (emt_harness::memstats_on) emt_harness::mem_access(p, sizeof(T), false, file, line, 0);
    return *p;
}
template <typename T>
inline void emt_st(T *p, T v, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    if (emt_harness::memstats_on) emt_harness::mem_access(p, sizeof(T), true, file, line, 0);
    *p = v;
}
// PTX `discard.global.L2 [p], 128` (sm_80 and later, PTX ISA 7.4): the
// 128-byte line at p (128-byte aligned) is invalidated in L2 without being
// written back to DRAM, "a weak write of an unstable indeterminate value".
// The harness checks the alignment, leaves the line's sectors out of the
// launch's DRAM stores, and poisons the bytes (all ones: NaN as floats) so
// that a kernel that reads a line after discarding it fails its tests.
inline void emt_discard_l2(void *p) {
    emt_harness::mem_discard(p, 128);
    memset(p, 0xff, 128);
}
#define EMT_REQUEST_TAG(tag)                                                \
    do {                                                                    \
        if (emt_harness::memstats_on) emt_harness::mem_request_tag((unsigned)(tag)); \
    } while (0)
#define EMT_OP(op, bytes, rows, n_in, n_out)                                                    \
    do {                                                                                        \
        emt_harness::pending_op = (op);                                                         \
        emt_harness::pending_ideal_bytes = (double)(bytes);                                     \
        emt_harness::pending_shape[0] = (rows), emt_harness::pending_shape[1] = (n_in),         \
        emt_harness::pending_shape[2] = (n_out);                                                \
    } while (0)
#else
#define EMT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    do {                                                    \
        ++emt_cuda_launch_count;                            \
        kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__); \
    } while (0)
#define EMT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define EMT_UNROLL _Pragma("unroll")
#define EMT_NOINLINE __noinline__
template <typename T> __device__ __forceinline__ T emt_ld(const T *p) { return *p; }
template <typename T> __device__ __forceinline__ T emt_ld_cg(const T *p) { return __ldcg(p); }
template <typename T> __device__ __forceinline__ void emt_st(T *p, T v) { *p = v; }
__device__ __forceinline__ void emt_discard_l2(void *p) { asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory"); }
#define EMT_OP(op, bytes, rows, n_in, n_out) ((void)0)
#define EMT_REQUEST_TAG(tag) ((void)0)
#endif

// The warp-level matrix multiply-accumulate of PTX
// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80 and later):
// D (16 x 8, FP32) = A (16 x 16, BF16) x B (16 x 8, BF16) + C (16 x 8, FP32),
// executed by the 32 lanes of a warp together, each holding a fragment.
// With groupID g = lane / 4 and t = lane % 4 (PTX ISA, "Matrix Fragments
// for mma.m16n8k16 with floating point type"), the lower-numbered element in
// the lower 16 bits of each 32-bit register:
//   a[0] = A[g][2t..2t+1]     a[1] = A[g+8][2t..2t+1]
//   a[2] = A[g][2t+8..2t+9]   a[3] = A[g+8][2t+8..2t+9]
//   b[0] = B[2t..2t+1][g]     b[1] = B[2t+8..2t+9][g]
//   c[0], c[1] = C[g][2t], C[g][2t+1]    c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//   (d as c)
// Every lane of the warp must execute it together (.aligned). PTX does not
// document the order and rounding of the FP32 accumulation inside the tensor
// core; element D[m][n] depends on row m of A, column n of B and C[m][n]
// only, which is what the products' batch invariance rests on (cuda/matmul.cu).
// The harness computes each element as the exact sum C + sum_k A B rounded
// once to nearest (tests/cuda_harness: a CPU twin and a test compare them).
#ifdef EMT_CUDA_HARNESS
inline void emt_mma_bf16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                                  const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    emt_harness::mma_fragments f;
    for (int i = 0; i < 4; i++) f.a[i] = a[i], f.c[i] = c[i];
    f.b[0] = b[0], f.b[1] = b[1];
    emt_harness::warp_collective(emt_harness::MMA_BF16_M16N8K16, 0xffffffffu, (uint64_t)(uintptr_t)&f, 0, 32, file,
                                 line);
    for (int i = 0; i < 4; i++) d[i] = f.d[i];
}
#else
__device__ __forceinline__ void emt_mma_bf16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                      const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
}
#endif

#endif
