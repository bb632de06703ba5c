// Kernel launches and dynamic shared memory, spelled so that the same .cu
// files compile with nvcc (real GPU) and with the host C++ compiler against
// the CPU execution harness (tests/cuda_harness, docs/cuda-harness.md), which
// cannot parse the triple-chevron syntax.
//   EMT_LAUNCH(kernel, grid, block, dynamic_shared_bytes, stream, args...)
//   EMT_DYNAMIC_SHARED(float, buf);   // extern __shared__ float buf[];
//   EMT_UNROLL for (...)               // #pragma unroll (GCC: unroll 8)
//   emt_ld(p), emt_st(p, v)            // a counted global or shared access
//   EMT_OP("op", bytes, rows, n_in, n_out); // the next launch's op, its shape and the least it must move
//   EMT_REQUEST_TAG(tag)               // the thread's counted accesses from here on belong to region `tag`
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
template <typename T>
inline T emt_ld(const T *p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    if (emt_harness::memstats_on) emt_harness::mem_access(p, sizeof(T), false, file, line, 0);
    return *p;
}
template <typename T>
inline void emt_st(T *p, T v, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    if (emt_harness::memstats_on) emt_harness::mem_access(p, sizeof(T), true, file, line, 0);
    *p = v;
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
template <typename T> __device__ __forceinline__ T emt_ld(const T *p) { return *p; }
template <typename T> __device__ __forceinline__ void emt_st(T *p, T v) { *p = v; }
#define EMT_OP(op, bytes, rows, n_in, n_out) ((void)0)
#define EMT_REQUEST_TAG(tag) ((void)0)
#endif

#endif
