// The CUDA execution harness: the subset of CUDA that cuda/*.cu uses, for the
// host C++ compiler, so that the kernels run on the CPU with CUDA's semantics
// (docs/cuda-harness.md). Test support only; never shipped in libentmtp.
//
// Every thread of a block is a cooperative fiber; a block runs until all its
// threads have exited, switching fibers only at __syncthreads, warp
// collectives (__shfl_*_sync, votes, __syncwarp) and exit. Blocks of a grid
// run one after another, so `__shared__` is a function-scope static: shared
// by the threads of a block, seen by ASan like any global.
//
// What a GPU would report, the harness reports as a sticky launch failure
// (every later call returns it, like a device fault) with a diagnostic on
// stderr: bad launch configuration, a host pointer passed to a kernel, a
// barrier or warp collective reached by part of a block or warp, a mask that
// excludes the calling lane or names a lane that does not exist.
#ifndef EMT_CUDA_HARNESS_RUNTIME_H
#define EMT_CUDA_HARNESS_RUNTIME_H

#ifndef EMT_CUDA_HARNESS
#define EMT_CUDA_HARNESS 1
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

// ------------------------------------------------------------ qualifiers
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// Blocks run one at a time: a function-scope static is exactly one block's
// shared memory. (extern __shared__ arrays: use EMT_DYNAMIC_SHARED.)
#define __shared__ static
#define __constant__ static

// ------------------------------------------------------------------ types
struct uint3 {
    unsigned int x, y, z;
};
// the vector types the kernels load with (16-byte and 8-byte accesses)
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned int x, y;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorLaunchFailure = 4,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorIllegalInstruction = 715,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct CUstream_st;
struct CUevent_st;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u
#define cudaEventDefault 0x00u
#define cudaEventDisableTiming 0x02u
#define cudaHostAllocDefault 0x00u

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
    int warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], multiProcessorCount, major, minor;
};

// ------------------------------------------------------ host runtime API
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
// the typed overloads cuda_runtime.h has too
template <typename T> inline cudaError_t cudaMalloc(T **ptr, size_t bytes) { return cudaMalloc((void **)ptr, bytes); }
template <typename T> inline cudaError_t cudaMallocHost(T **ptr, size_t bytes) {
    return cudaMallocHost((void **)ptr, bytes);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream = 0);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
// Stream capture and graphs: work issued to a capturing (non-blocking)
// stream is recorded, not queued; an instantiated graph's launch queues the
// recorded operations again, with the same kernel arguments, copy addresses
// and sizes (pinned host memory is read or written at replay time, as on a
// GPU). A wait on the capturing stream, a device-wide wait, a pageable copy
// or an event on it invalidates the capture (cudaStreamEndCapture then
// returns cudaErrorStreamCaptureInvalidated).
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
// The harness has no clock: elapsed time is the number of stream operations
// executed between the two events, in "milliseconds" (for plumbing tests only).
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

// ------------------------------------------------- the harness internals
namespace emt_harness {

struct thread_state;                  // one fiber
extern thread_state *current;         // the fiber now running
extern uint3 block_idx, block_dim, grid_dim;
const uint3 &thread_idx_of(const thread_state *t);

// Kernel bodies: the launch's arguments, bound by value at launch as CUDA does.
struct kernel_call {
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t shared_bytes;
    const void *kernel; // identity, for cudaFuncSetAttribute limits
    std::function<void()> body;
    const char *op;     // the op, its ideal bytes and shape, from EMT_OP before the launch
    double ideal_bytes;
    long long shape[3]; // rows, n_in, n_out
};

// Memory-efficiency counters (docs/cuda-harness.md): on while a launch runs
// with EMT_CUDA_HARNESS_MEMSTATS set; every emt_ld/emt_st (cuda_launch.h)
// then reports its address and width.
extern bool memstats_on;
void mem_access(const void *p, unsigned bytes, bool store, const char *file, int line, int col);
// The running thread's request tag (EMT_REQUEST_TAG in cuda_launch.h).
void mem_request_tag(unsigned tag);
// discard.global.L2 of the `bytes`-byte line at p (emt_discard_l2 in
// cuda_launch.h): faults unless p is global memory aligned to the line; the
// line's sectors leave the launch's DRAM stores at the block's end.
void mem_discard(void *p, unsigned bytes);
// The op and ideal bytes the next launch of this thread declares.
inline thread_local const char *pending_op = nullptr;
inline thread_local double pending_ideal_bytes = 0;
inline thread_local long long pending_shape[3] = { 0, 0, 0 };

// Validates the configuration and the pointer arguments, then queues the
// launch on `stream`. Errors become the sticky/last error like on a GPU.
void enqueue_launch(kernel_call &&call, cudaStream_t stream);
// A pointer argument: NULL and device memory are fine; anything else is an error.
void check_pointer_arg(const char *kernel, const char *file, int line, int index, const void *p);
void *dynamic_shared(void);

enum collective_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR, VOTE_ALL, VOTE_ANY, VOTE_BALLOT, SYNCWARP, MMA_BF16_M16N8K16 };
// One lane's fragments of a warp's mma (emt_mma_bf16_m16n8k16 in
// cuda/cuda_launch.h): the collective's value is its address; the lane's d
// is written when the whole warp has arrived.
struct mma_fragments {
    uint32_t a[4], b[2];
    float c[4], d[4];
};
// The tensor-core product as the harness defines it, on whole matrices (the
// CPU twin the fragment-level collective is tested against): D[m][n] =
// C[m][n] + sum_k A[m][k] B[k][n], the BF16 operands as floats (exact),
// summed in double in k order after C (exact while the 17 terms lie within
// about 2^24 of each other in magnitude: a BF16 product has 16 significant
// bits) and rounded once to FP32, to nearest.
void mma_bf16_m16n8k16_reference(const float A[16][16], const float B[16][8], const float C[16][8], float D[16][8]);
// Blocks the calling lane until every lane of `mask` arrives at the same call
// site; returns the lane's shuffled value (bits) or the vote's result.
uint64_t warp_collective(collective_kind kind, unsigned mask, uint64_t value, int arg, int width, const char *file,
                         int line);
void syncthreads(const char *file, int line);
// A harness-detected kernel fault: reported, and the launch is abandoned.
[[noreturn]] void kernel_fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

template <typename T> inline void check_arg(const char *k, const char *f, int l, int i, const T &a) {
    if constexpr (std::is_pointer<T>::value) check_pointer_arg(k, f, l, i, (const void *)a);
}

template <typename... P, typename... A>
void launch(const char *name, const char *file, int line, void (*kernel)(P...), dim3 grid, dim3 block,
            size_t shared_bytes, cudaStream_t stream, A... args) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel called with the wrong number of arguments");
    int i = 0;
    (check_arg(name, file, line, i++, args), ...);
    kernel_call c{ name, file, line, grid, block, shared_bytes, (const void *)kernel,
                   [kernel, args...]() { kernel(args...); }, pending_op, pending_ideal_bytes,
                   { pending_shape[0], pending_shape[1], pending_shape[2] } };
    pending_op = nullptr;
    pending_ideal_bytes = 0;
    pending_shape[0] = pending_shape[1] = pending_shape[2] = 0;
    enqueue_launch(static_cast<kernel_call &&>(c), stream);
}

template <typename T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <typename T> inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

// For host stand-ins of CUDA libraries (cublas_standin.cpp): device-memory
// extent checks, work queued on a stream, and errors reported like a kernel's.
bool is_device_range(const void *p, size_t bytes);
void enqueue_host_work(cudaStream_t stream, std::function<void()> work);
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Diagnostics for the harness's own tests.
const char *last_diagnostic(void);
// cudaDeviceReset for the tests: clears the sticky error and every allocation.
void reset(void);

} // namespace emt_harness

cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value);
template <typename F> inline cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)kernel, attr, value);
}

// ---------------------------------------------------------- device side
#define threadIdx (emt_harness::thread_idx_of(emt_harness::current))
#define blockIdx (static_cast<const uint3 &>(emt_harness::block_idx))
#define blockDim (static_cast<const uint3 &>(emt_harness::block_dim))
#define gridDim (static_cast<const uint3 &>(emt_harness::grid_dim))
constexpr int warpSize = 32;

#define __syncthreads() emt_harness::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) emt_harness::syncwarp_at(__FILE__, __LINE__, ##__VA_ARGS__)
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

namespace emt_harness {
inline void syncwarp_at(const char *file, int line, unsigned mask = 0xffffffffu) {
    warp_collective(SYNCWARP, mask, 0, 0, 32, file, line);
}
} // namespace emt_harness

template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, const char *file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
    return emt_harness::from_bits<T>(
        emt_harness::warp_collective(emt_harness::SHFL_IDX, mask, emt_harness::to_bits(v), src, width, file, line));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    return emt_harness::from_bits<T>(emt_harness::warp_collective(emt_harness::SHFL_UP, mask, emt_harness::to_bits(v),
                                                                  (int)delta, width, file, line));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, const char *file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
    return emt_harness::from_bits<T>(emt_harness::warp_collective(
        emt_harness::SHFL_DOWN, mask, emt_harness::to_bits(v), (int)delta, width, file, line));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const char *file = __builtin_FILE(),
                         int line = __builtin_LINE()) {
    return emt_harness::from_bits<T>(emt_harness::warp_collective(emt_harness::SHFL_XOR, mask, emt_harness::to_bits(v),
                                                                  lane_mask, width, file, line));
}
inline int __all_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)emt_harness::warp_collective(emt_harness::VOTE_ALL, mask, pred != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)emt_harness::warp_collective(emt_harness::VOTE_ANY, mask, pred != 0, 0, 32, file, line);
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
    return (unsigned)emt_harness::warp_collective(emt_harness::VOTE_BALLOT, mask, pred != 0, 0, 32, file, line);
}

// Atomics: fibers never interleave inside one, so a plain read-modify-write
// is atomic here.
template <typename T> inline T atomicAdd(T *p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T> inline T atomicSub(T *p, T v) {
    T old = *p;
    *p = old - v;
    return old;
}
template <typename T> inline T atomicExch(T *p, T v) {
    T old = *p;
    *p = v;
    return old;
}
template <typename T> inline T atomicMax(T *p, T v) {
    T old = *p;
    *p = old > v ? old : v;
    return old;
}
template <typename T> inline T atomicMin(T *p, T v) {
    T old = *p;
    *p = old < v ? old : v;
    return old;
}
template <typename T> inline T atomicCAS(T *p, T compare, T v) {
    T old = *p;
    if (old == compare) *p = v;
    return old;
}
template <typename T> inline T __ldg(const T *p) { return *p; }
// single roundings that nvcc never contracts into an FMA (the host compiler
// does not contract either)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
// The position of the least significant set bit, counting from 1; 0 for 0 (CUDA Math API, integer intrinsics).
inline int __ffs(int x) { return __builtin_ffs(x); }
// The number of set bits (CUDA Math API, integer intrinsics).
inline int __popc(unsigned x) { return __builtin_popcount(x); }

#endif
