// Kernel launches and dynamic shared memory, spelled so that the same .cu
// files compile with nvcc (real GPU) and with the host C++ compiler against
// the CPU execution harness (tests/cuda_harness, docs/cuda-harness.md), which
// cannot parse the triple-chevron syntax.
//   EMT_LAUNCH(kernel, grid, block, dynamic_shared_bytes, stream, args...)
//   EMT_DYNAMIC_SHARED(float, buf);   // extern __shared__ float buf[];
//   EMT_UNROLL for (...)               // #pragma unroll (GCC: unroll 8)
#ifndef EMT_CUDA_LAUNCH_H
#define EMT_CUDA_LAUNCH_H

#ifdef EMT_CUDA_HARNESS
#define EMT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    emt_harness::launch(#kernel, __FILE__, __LINE__, kernel, grid, block, shmem, stream, ##__VA_ARGS__)
#define EMT_DYNAMIC_SHARED(type, name) type *name = (type *)emt_harness::dynamic_shared()
#define EMT_UNROLL _Pragma("GCC unroll 8")
#else
#define EMT_LAUNCH(kernel, grid, block, shmem, stream, ...) kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__)
#define EMT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define EMT_UNROLL _Pragma("unroll")
#endif

#endif
