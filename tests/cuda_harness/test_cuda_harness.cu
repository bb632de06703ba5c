// The CUDA execution harness's own semantics (docs/cuda-harness.md): barrier
// ordering, warp shuffles and votes, a block reduction, atomics, dynamic
// shared memory, streams and events; and the faults it must report: a
// divergent __syncthreads, a partial-warp shuffle, a mask without the caller,
// a host pointer passed to a kernel, launch configurations past GPU limits;
// the memory-efficiency counters on access patterns of known cost.
#include <cuda_runtime.h>

#include "cuda_launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

static int failures = 0;
#define EXPECT(cond)                                                                          \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond);         \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

// A fault must be reported (sticky, like a device fault) with a message that
// names it; then the device is reset for the next case.
static void expect_fault(const char *what, const char *needle) {
    cudaError_t e = cudaDeviceSynchronize();
    const char *msg = emt_harness::last_diagnostic();
    if (e == cudaSuccess || !strstr(msg, needle)) {
        fprintf(stderr, "%s: expected a fault mentioning \"%s\", got %s (%s)\n", what, needle, cudaGetErrorName(e),
                msg);
        failures++;
    } else {
        printf("reported as expected (%s): %s\n", what, msg);
    }
    emt_harness::reset();
}

template <typename T> static T *device_array(size_t n) {
    T *p = nullptr;
    EXPECT(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    return p;
}

// ------------------------------------------------------------------ barrier
// Each thread writes its slot, then (after the barrier) reads its right
// neighbour's: every neighbour must have written first.
__global__ void barrier_kernel(int *out) {
    __shared__ int slot[256];
    slot[threadIdx.x] = (int)(threadIdx.x * 10 + blockIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x];
}

static void test_barrier(void) {
    const int blocks = 3, threads = 256;
    int *d = device_array<int>(blocks * threads), h[blocks * threads];
    EMT_LAUNCH(barrier_kernel, blocks, threads, 0, 0, d);
    EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    int bad = 0;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < threads; t++) bad += h[b * threads + t] != ((t + 1) % threads) * 10 + b;
    EXPECT(bad == 0);
    cudaFree(d);
}

// -------------------------------------------------------- shuffles, votes
__global__ void shuffle_kernel(int *out) {
    int lane = threadIdx.x & 31, v = lane * 3 + 1;
    int *o = out + threadIdx.x * 8;
    o[0] = __shfl_sync(0xffffffffu, v, 5);                 // broadcast lane 5
    o[1] = __shfl_up_sync(0xffffffffu, v, 3);              // lanes < 3 keep their own
    o[2] = __shfl_down_sync(0xffffffffu, v, 7);            // lanes > 24 keep their own
    o[3] = __shfl_xor_sync(0xffffffffu, v, 9);             // butterfly
    o[4] = __shfl_down_sync(0xffffffffu, v, 2, 8);         // within 8-lane segments
    o[5] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0); // lanes 0,3,..,30
    o[6] = __any_sync(0xffffffffu, lane == 17) + 2 * __all_sync(0xffffffffu, lane < 31);
    double d = __shfl_sync(0xffffffffu, (double)lane + 0.5, 31); // 8-byte values
    o[7] = (int)(d * 2);
}

static void test_shuffles(void) {
    const int n = 64; // two warps
    int *d = device_array<int>(n * 8), h[n * 8];
    EMT_LAUNCH(shuffle_kernel, 1, n, 0, 0, d);
    EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    unsigned ballot = 0;
    for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
    int bad = 0;
    for (int t = 0; t < n; t++) {
        int l = t & 31, v = l * 3 + 1;
        const int *o = h + t * 8;
        int want[8] = { 5 * 3 + 1,
                        l >= 3 ? (l - 3) * 3 + 1 : v,
                        l + 7 < 32 ? (l + 7) * 3 + 1 : v,
                        (l ^ 9) * 3 + 1,
                        (l & 7) + 2 < 8 ? (l + 2) * 3 + 1 : v,
                        (int)ballot,
                        1 + 0,
                        63 };
        for (int i = 0; i < 8; i++)
            if (o[i] != want[i]) {
                if (bad++ < 5) fprintf(stderr, "thread %d result %d: %d, expected %d\n", t, i, o[i], want[i]);
            }
    }
    EXPECT(bad == 0);
    cudaFree(d);
}

// --------------------------------------------------- a reduction, atomics
// Block sums by a shared-memory tree then a warp-shuffle finish; the grid
// total with atomicAdd. Odd n: the last block is partly empty.
__global__ void sum_kernel(const float *x, int n, float *block_sums, float *total) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        float v = part[threadIdx.x];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (threadIdx.x == 0) {
            block_sums[blockIdx.x] = v;
            atomicAdd(total, v);
        }
    }
}

static void test_reduction(void) {
    const int n = 5000, blocks = (n + 255) / 256;
    float h[n], sums[blocks], total = 0;
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7) - 2.0f; // small integers: exact sums
    float *dx = device_array<float>(n), *ds = device_array<float>(blocks), *dt = device_array<float>(1);
    EXPECT(cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(cudaMemset(dt, 0, sizeof(float)) == cudaSuccess);
    EMT_LAUNCH(sum_kernel, blocks, 256, 0, 0, dx, n, ds, dt);
    EXPECT(cudaMemcpy(sums, ds, sizeof sums, cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(cudaMemcpy(&total, dt, sizeof total, cudaMemcpyDeviceToHost) == cudaSuccess);
    double want_total = 0;
    for (int b = 0; b < blocks; b++) {
        double want = 0;
        for (int i = b * 256; i < n && i < (b + 1) * 256; i++) want += h[i];
        EXPECT(sums[b] == (float)want);
        want_total += want;
    }
    EXPECT(total == (float)want_total);
    cudaFree(dx);
    cudaFree(ds);
    cudaFree(dt);
}

// ------------------------------------------------ dynamic shared memory
__global__ void reverse_kernel(const int *in, int *out) {
    EMT_DYNAMIC_SHARED(int, buf);
    buf[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

static void test_dynamic_shared(void) {
    const int n = 100;
    int h[n], r[n];
    for (int i = 0; i < n; i++) h[i] = i * i;
    int *din = device_array<int>(n), *dout = device_array<int>(n);
    EXPECT(cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess);
    EMT_LAUNCH(reverse_kernel, 1, n, n * sizeof(int), 0, din, dout);
    EXPECT(cudaMemcpy(r, dout, sizeof r, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int i = 0; i < n; i++) EXPECT(r[i] == h[n - 1 - i]);
    cudaFree(din);
    cudaFree(dout);
}

// ---------------------------------------------------- streams and events
__global__ void add_one_kernel(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

static void test_streams(void) {
    const int n = 300;
    int *pinned = nullptr, *d = device_array<int>(n);
    EXPECT(cudaMallocHost(&pinned, n * sizeof(int)) == cudaSuccess);
    for (int i = 0; i < n; i++) pinned[i] = i;
    cudaStream_t a, b;
    cudaEvent_t ev;
    EXPECT(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaEventCreate(&ev) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(d, pinned, n * sizeof(int), cudaMemcpyHostToDevice, a) == cudaSuccess);
    // an async copy from pinned memory reads it when the stream gets there:
    // the host's later write shows, as on a GPU (this is what staging must avoid)
    pinned[0] = 1000;
    EMT_LAUNCH(add_one_kernel, (n + 127) / 128, 128, 0, a, d, n);
    EXPECT(cudaEventRecord(ev, a) == cudaSuccess);
    EXPECT(cudaStreamQuery(a) == cudaErrorNotReady); // nothing has run yet
    EXPECT(cudaStreamWaitEvent(b, ev, 0) == cudaSuccess);
    EMT_LAUNCH(add_one_kernel, (n + 127) / 128, 128, 0, b, d, n);
    EXPECT(cudaMemcpyAsync(pinned, d, n * sizeof(int), cudaMemcpyDeviceToHost, b) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(b) == cudaSuccess); // runs a's work first, through the event
    EXPECT(cudaEventQuery(ev) == cudaSuccess);
    EXPECT(pinned[0] == 1002);
    for (int i = 1; i < n; i++) EXPECT(pinned[i] == i + 2);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFreeHost(pinned);
    cudaFree(d);
}

// ------------------------------------------------------------------ graphs
// A captured copy-in, kernel, copy-out: nothing runs while capturing; every
// launch of the instantiated graph replays the three with the same
// addresses, reading the pinned input as it is at replay time. A wait inside
// the capture invalidates it.
static void test_graphs(void) {
    const int n = 200;
    int *in = nullptr, *out = nullptr, *d = device_array<int>(n);
    EXPECT(cudaMallocHost(&in, n * sizeof(int)) == cudaSuccess);
    EXPECT(cudaMallocHost(&out, n * sizeof(int)) == cudaSuccess);
    for (int i = 0; i < n; i++) in[i] = i, out[i] = -1;
    cudaStream_t s;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    cudaStreamCaptureStatus cs;
    EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    EXPECT(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive);
    EXPECT(cudaMemcpyAsync(d, in, n * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
    EMT_LAUNCH(add_one_kernel, (n + 127) / 128, 128, 0, s, d, n);
    EXPECT(cudaMemcpyAsync(out, d, n * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
    cudaGraph_t g = nullptr;
    EXPECT(cudaStreamEndCapture(s, &g) == cudaSuccess && g);
    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    EXPECT(out[0] == -1 && out[n - 1] == -1); // captured, not run
    cudaGraphExec_t x = nullptr;
    EXPECT(cudaGraphInstantiate(&x, g, 0) == cudaSuccess && x);
    EXPECT(cudaGraphDestroy(g) == cudaSuccess); // the instance is a snapshot
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < n; i++) in[i] = i * (rep + 1);
        EXPECT(cudaGraphLaunch(x, s) == cudaSuccess);
        EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
        int ok = 1;
        for (int i = 0; i < n; i++) ok &= out[i] == i * (rep + 1) + 1;
        EXPECT(ok);
    }
    // a wait on the capturing stream is refused and spoils the capture
    EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    EMT_LAUNCH(add_one_kernel, (n + 127) / 128, 128, 0, s, d, n);
    EXPECT(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusInvalidated);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && !g);
    // so does a pageable copy
    int pageable[4] = { 0, 0, 0, 0 };
    EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(d, pageable, sizeof pageable, cudaMemcpyHostToDevice, s) == cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
    EXPECT(cudaGetLastError() != cudaSuccess); // the refusals were reported, not sticky
    EXPECT(cudaGetLastError() == cudaSuccess);
    EXPECT(cudaGraphExecDestroy(x) == cudaSuccess);
    cudaStreamDestroy(s);
    cudaFreeHost(in);
    cudaFreeHost(out);
    cudaFree(d);
}

// ------------------------------------------------------------ the faults
__global__ void divergent_barrier_kernel(float *x) {
    if (threadIdx.x < 100) __syncthreads(); // the rest of the block never arrives
    x[threadIdx.x] = 1.0f;
}

__global__ void partial_warp_shuffle_kernel(float *x) {
    float v = x[threadIdx.x];
    if ((threadIdx.x & 31) < 16) v += __shfl_down_sync(0xffffffffu, v, 1); // lanes 16..31 skip it
    x[threadIdx.x] = v;
}

__global__ void mask_without_caller_kernel(float *x) {
    float v = x[threadIdx.x];
    if ((threadIdx.x & 31) < 16) v += __shfl_down_sync(0x0000ffffu, v, 1);
    else v += __shfl_down_sync(0x0000ffffu, v, 1); // lanes 16..31 are not in this mask
    x[threadIdx.x] = v;
}

__global__ void short_block_shuffle_kernel(float *x) {
    x[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1); // block of 40: lanes 8..31 of warp 1 don't exist
}

// ------------------------------------------------------- tensor-core mma
// Each lane fills its fragments from row-major A (16 x 16 BF16), B (16 x 8
// BF16, B[k][n]) and C (16 x 8) by the PTX ISA's formulas for
// mma.m16n8k16 (.bf16): groupID = lane >> 2, threadID_in_group = lane % 4;
// A: row = groupID for a_i with i in {0,1,4,5}, else groupID + 8; col =
// threadID_in_group * 2 + (i & 1), + 8 for i >= 4. B: row = threadID_in_group
// * 2 + (i & 1), + 8 for i >= 2; col = groupID. C/D: row = groupID for
// c0, c1, else groupID + 8; col = threadID_in_group * 2 + (i & 1).
__global__ void mma_kernel(const uint16_t *A, const uint16_t *B, const float *C, float *D) {
    const int lane = threadIdx.x % 32, group = lane >> 2, tig = lane % 4;
    uint16_t ah[8], bh[4];
    for (int i = 0; i < 8; i++) {
        const int row = (i == 0 || i == 1 || i == 4 || i == 5) ? group : group + 8;
        const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        ah[i] = A[row * 16 + col];
    }
    for (int i = 0; i < 4; i++) bh[i] = B[(tig * 2 + (i & 1) + (i >= 2 ? 8 : 0)) * 8 + group];
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = ah[2 * i] | (uint32_t)ah[2 * i + 1] << 16;
    for (int i = 0; i < 2; i++) b[i] = bh[2 * i] | (uint32_t)bh[2 * i + 1] << 16;
    float c[4], d[4];
    for (int i = 0; i < 4; i++) c[i] = C[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)];
    emt_mma_bf16_m16n8k16(d, a, b, c);
    for (int i = 0; i < 4; i++) D[(i < 2 ? group : group + 8) * 8 + tig * 2 + (i & 1)] = d[i];
}

// every lane of each warp at one mma (zeros)
__global__ void mma_half_warp_kernel_whole(float *x) {
    const uint32_t a[4] = {}, b[2] = {};
    const float c[4] = {};
    float d[4];
    emt_mma_bf16_m16n8k16(d, a, b, c);
    x[threadIdx.x] = d[0];
}

__global__ void mma_half_warp_kernel(float *x) {
    if (threadIdx.x >= 16) return; // lanes 16..31 never reach the mma
    const uint32_t a[4] = {}, b[2] = {};
    const float c[4] = {};
    float d[4];
    emt_mma_bf16_m16n8k16(d, a, b, c);
    x[threadIdx.x] = d[0];
}

static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// D for host A, B, C through the kernel
static void device_mma(const uint16_t *A, const uint16_t *B, const float *C, float *D) {
    uint16_t *dA = device_array<uint16_t>(256), *dB = device_array<uint16_t>(128);
    float *dC = device_array<float>(128), *dD = device_array<float>(128);
    cudaMemcpy(dA, A, 512, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, 256, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C, 512, cudaMemcpyHostToDevice);
    EMT_LAUNCH(mma_kernel, 1, 32, 0, 0, (const uint16_t *)dA, (const uint16_t *)dB, (const float *)dC, dD);
    EXPECT(cudaMemcpy(D, dD, 512, cudaMemcpyDeviceToHost) == cudaSuccess);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
}

static void test_mma(void) {
    uint16_t A[256], B[128];
    float C[128], D[128];
    // small integers: every sum exact whatever the order, so D = C + A B
    // exactly, computed here independently of the harness's twin
    unsigned seed = 7;
    auto next = [&seed]() { return seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff; };
    auto bf16_of_int = [](int v) { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); };
    int Ai[256], Bi[128], Ci[128];
    for (int i = 0; i < 256; i++) A[i] = bf16_of_int(Ai[i] = (int)(next() % 15) - 7);
    for (int i = 0; i < 128; i++) B[i] = bf16_of_int(Bi[i] = (int)(next() % 15) - 7);
    for (int i = 0; i < 128; i++) C[i] = (float)(Ci[i] = (int)(next() % 201) - 100);
    device_mma(A, B, C, D);
    int wrong = 0;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            int want = Ci[m * 8 + n];
            for (int k = 0; k < 16; k++) want += Ai[m * 16 + k] * Bi[k * 8 + n];
            wrong += D[m * 8 + n] != (float)want;
        }
    EXPECT(wrong == 0);
    printf("mma m16n8k16 on integers: %d of 128 elements differ from C + A B\n", wrong);

    // random BF16 values and C: the fragment-level collective equals the
    // whole-matrix twin bit for bit
    float Af[16][16], Bf[16][8], Cf[16][8], Dref[16][8];
    for (int i = 0; i < 256; i++) A[i] = (uint16_t)((next() & 0x1) << 15 | (0x3c00 + next() % 0x0600)); // +-2^-7 .. 2^5
    for (int i = 0; i < 128; i++) B[i] = (uint16_t)((next() & 0x1) << 15 | (0x3c00 + next() % 0x0600));
    for (int i = 0; i < 128; i++) C[i] = ((float)next() - 16384.0f) / 1024.0f;
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++) Af[m][k] = bf16_value(A[m * 16 + k]);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) Bf[k][n] = bf16_value(B[k * 8 + n]);
    memcpy(Cf, C, sizeof Cf);
    emt_harness::mma_bf16_m16n8k16_reference(Af, Bf, Cf, Dref);
    device_mma(A, B, C, D);
    EXPECT(!memcmp(D, Dref, sizeof Dref));
    // column n of D depends on column n of B and C only
    uint16_t B2[128];
    float C2[128], D2[128];
    memcpy(B2, B, sizeof B2);
    memcpy(C2, C, sizeof C2);
    for (int k = 0; k < 16; k++) B2[k * 8 + 3] ^= 0x0040;
    for (int m = 0; m < 16; m++) C2[m * 8 + 5] += 1.0f;
    device_mma(A, B2, C2, D2);
    int others_same = 1, changed = 0;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            if (n == 3 || n == 5) changed += D2[m * 8 + n] != D[m * 8 + n];
            else others_same &= D2[m * 8 + n] == D[m * 8 + n];
        }
    EXPECT(others_same);
    EXPECT(changed >= 16);
    printf("mma m16n8k16 on random BF16: equal to the twin %s; other columns unchanged by one column's B and C: %s\n",
           memcmp(D, Dref, sizeof Dref) ? "no" : "yes", others_same ? "yes" : "no");

    float *x = device_array<float>(32);
    EMT_LAUNCH(mma_half_warp_kernel, 1, 32, 0, 0, x);
    expect_fault("mma by half a warp", "partial warp");
}

static void test_faults(void) {
    float *d = device_array<float>(1024);
    EMT_LAUNCH(divergent_barrier_kernel, 1, 128, 0, 0, d);
    expect_fault("divergent __syncthreads", "divergent __syncthreads");

    d = device_array<float>(1024);
    EMT_LAUNCH(partial_warp_shuffle_kernel, 1, 64, 0, 0, d);
    expect_fault("partial-warp shuffle", "partial warp");

    d = device_array<float>(1024);
    EMT_LAUNCH(mask_without_caller_kernel, 1, 32, 0, 0, d);
    expect_fault("caller outside its mask", "excludes its lane");

    d = device_array<float>(1024);
    EMT_LAUNCH(short_block_shuffle_kernel, 1, 40, 0, 0, d);
    expect_fault("mask names missing lanes", "does not have");

    float host[64];
    EMT_LAUNCH(add_one_kernel, 1, 64, 0, 0, (int *)host, 64);
    expect_fault("host pointer argument", "not live device memory");

    int *freed = device_array<int>(64);
    cudaFree(freed);
    EMT_LAUNCH(add_one_kernel, 1, 64, 0, 0, freed, 64);
    expect_fault("freed pointer argument", "not live device memory");

    d = device_array<float>(1024);
    EMT_LAUNCH(add_one_kernel, 1, 1025, 0, 0, (int *)d, 64);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration);
    EXPECT(cudaGetLastError() == cudaSuccess); // a launch error is not sticky
    EMT_LAUNCH(add_one_kernel, dim3(1, 65536), 32, 0, 0, (int *)d, 64);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration);
    EMT_LAUNCH(reverse_kernel, 1, 32, 48 * 1024 + 4, 0, (const int *)d, (int *)d);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration);
    EXPECT(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) ==
           cudaSuccess);
    EMT_LAUNCH(reverse_kernel, 1, 32, 48 * 1024 + 4, 0, (const int *)d, (int *)d);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess); // opted in
    float h4[4];
    EXPECT(cudaMemcpy(h4, d + 1023, sizeof h4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue); // past the end
    emt_harness::reset();
}


// ------------------------------------------------------ memory efficiency
// The counters of docs/cuda-harness.md ("Memory efficiency") on access
// patterns whose cost is known: each kernel is one warp.
static const int MEM_LINE_COALESCED = __LINE__; __global__ void mem_coalesced(const float *x, float *y) { emt_st(y + threadIdx.x, emt_ld(x + threadIdx.x)); }
static const int MEM_LINE_STRIDED = __LINE__; __global__ void mem_strided(const float *x, float *y) { emt_st(y + threadIdx.x, emt_ld(x + 32 * threadIdx.x)); }
static const int MEM_LINE_BROADCAST = __LINE__; __global__ void mem_broadcast(const float *x, float *y) { emt_st(y + threadIdx.x, emt_ld(x + 5)); }
static const int MEM_LINE_WIDE = __LINE__ + 2; // the loop's line
__global__ void mem_wide_loop(const float4 *x, float4 *y) {
    for (int k = 0; k < 4; k++) emt_st(y + 32 * k + threadIdx.x, emt_ld(x + 32 * k + threadIdx.x));
}
static const int MEM_LINE_BYTES = __LINE__; __global__ void mem_bytes(const uint8_t *x, float *y) { emt_st(y + threadIdx.x, (float)emt_ld(x + 2 * threadIdx.x)); }
static const int MEM_LINE_SHARED = __LINE__; // the conflict 8 lines below, the 16-byte loads 12
__global__ void mem_shared(const float *x, float *y) {
    __shared__ float s[64];
    __shared__ float4 v[32];
    emt_st(s + threadIdx.x, emt_ld(x + threadIdx.x));
    emt_st(s + 32 + threadIdx.x, 0.0f);
    __syncwarp();
    // lanes l and l + 16 read words 2l and 2l + 32: the same bank, 2 wavefronts
    float a = emt_ld(s + 2 * (threadIdx.x % 32));
    // 16-byte accesses: four phases of 8 lanes, each over all 32 banks
    emt_st(v + threadIdx.x, float4{ a, a, a, a });
    __syncwarp();
    const float4 b = emt_ld(v + threadIdx.x);
    emt_st(y + threadIdx.x, b.x);
}

// EMT_REQUEST_TAG: in region 1 half the lanes skip the load, in region 2
// every lane loads words 16 + l. Paired by region: 1 wavefront each. Paired
// by occurrence only, lanes 16-31's first load (region 2, words 32-47, banks
// 0-15) would join lanes 0-15's (words 0-15): a 2-way conflict.
static const int MEM_LINE_TAGGED = __LINE__ + 9; // the load's line
__global__ void mem_tagged(const float *x, float *y) {
    __shared__ float s[64];
    s[threadIdx.x] = x[threadIdx.x];
    s[32 + threadIdx.x] = 0.0f;
    __syncwarp();
    float a = 0.0f;
    for (int region = 1; region <= 2; region++) {
        EMT_REQUEST_TAG(region);
        if (region == 2 || threadIdx.x < 16) a += emt_ld(s + (region - 1) * 16 + threadIdx.x);
    }
    y[threadIdx.x] = a;
}

// Block 0 stores 32 floats, block 1 loads them back and stores them
// elsewhere: the load hits L2 (an earlier block of the launch stored those
// sectors), so the launch's DRAM bytes are its 256 stored bytes only.
__global__ void mem_store_then_load(float *x, float *y) {
    if (blockIdx.x == 0) emt_st(x + threadIdx.x, (float)threadIdx.x);
    else emt_st(y + threadIdx.x, emt_ld(x + threadIdx.x));
}

// The report line of the last launch.
static bool last_report_line(const char *path, char *line, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool any = false;
    while (fgets(line, (int)cap, f)) any = true;
    fclose(f);
    return any;
}

// The site at `line_no` of this file with `pattern` in its counters.
static void expect_site(const char *report, const char *what, int line_no, const char *pattern) {
    char key[64];
    snprintf(key, sizeof key, "test_cuda_harness.cu:%d:", line_no);
    for (const char *site = strstr(report, key); site; site = strstr(site + 1, key)) {
        const char *end = strchr(site, '}');
        if (end && std::string(site, end).find(pattern) != std::string::npos) {
            printf("memstats %s: %s\n", what, pattern);
            return;
        }
    }
    fprintf(stderr, "memstats %s: no site at line %d with \"%s\": %s\n", what, line_no, pattern, report);
    failures++;
}

static void test_memstats(void) {
    char path[] = "/tmp/emt_memstats_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    if (fd < 0) return;
    close(fd);
    setenv("EMT_CUDA_HARNESS_MEMSTATS", path, 1);
    float *x = device_array<float>(1024), *y = device_array<float>(1024);
    EXPECT(cudaMemset(x, 0, 1024 * sizeof(float)) == cudaSuccess);
    static char line[1 << 16];
    struct {
        const char *what;
        int line_no;
        const char *pattern;
    } cases[] = {
        { "coalesced 4-byte loads", 0, "\"width\": 4, \"requests\": 1, \"lane_accesses\": 32, \"bytes\": 128, \"distinct_bytes\": 128, \"sectors\": 4, \"ideal_sectors\": 4" },
        { "4-byte loads 128 bytes apart", 0, "\"requests\": 1, \"lane_accesses\": 32, \"bytes\": 128, \"distinct_bytes\": 128, \"sectors\": 32, \"ideal_sectors\": 4" },
        { "one address for the warp", 0, "\"requests\": 1, \"lane_accesses\": 32, \"bytes\": 128, \"distinct_bytes\": 4, \"sectors\": 1, \"ideal_sectors\": 1" },
        { "16-byte loads, a loop of 4", 0, "\"width\": 16, \"requests\": 4, \"lane_accesses\": 128, \"bytes\": 2048, \"distinct_bytes\": 2048, \"sectors\": 64, \"ideal_sectors\": 64" },
        { "bytes 2 apart", 0, "\"width\": 1, \"requests\": 1, \"lane_accesses\": 32, \"bytes\": 32, \"distinct_bytes\": 32, \"sectors\": 2, \"ideal_sectors\": 1" },
    };
    const int lines[] = { MEM_LINE_COALESCED, MEM_LINE_STRIDED, MEM_LINE_BROADCAST, MEM_LINE_WIDE, MEM_LINE_BYTES };
    for (int i = 0; i < 5; i++) {
        switch (i) {
        case 0: EMT_LAUNCH(mem_coalesced, 1, 32, 0, 0, x, y); break;
        case 1: EMT_LAUNCH(mem_strided, 1, 32, 0, 0, x, y); break;
        case 2: EMT_LAUNCH(mem_broadcast, 1, 32, 0, 0, x, y); break;
        case 3: EMT_LAUNCH(mem_wide_loop, 1, 32, 0, 0, (const float4 *)x, (float4 *)y); break;
        default: EMT_LAUNCH(mem_bytes, 1, 32, 0, 0, (const uint8_t *)x, y); break;
        }
        EXPECT(cudaDeviceSynchronize() == cudaSuccess);
        EXPECT(last_report_line(path, line, sizeof line));
        expect_site(line, cases[i].what, lines[i], cases[i].pattern);
    }
    // per launch: DRAM bytes are the distinct sectors (the strided loads: 32
    // sectors of 32 bytes), stores included
    EMT_LAUNCH(mem_strided, 1, 32, 0, 0, x, y);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(last_report_line(path, line, sizeof line));
    EXPECT(strstr(line, "\"dram_load_bytes\": 1024, \"dram_store_bytes\": 128") != nullptr);
    // a sector an earlier block of the launch stored is read from L2
    EMT_LAUNCH(mem_store_then_load, 2, 32, 0, 0, x, y);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(last_report_line(path, line, sizeof line));
    EXPECT(strstr(line, "\"dram_load_bytes\": 0, \"dram_store_bytes\": 256") != nullptr);
    if (!strstr(line, "\"dram_load_bytes\": 0, \"dram_store_bytes\": 256")) fprintf(stderr, "store then load: %s\n", line);
    EMT_LAUNCH(mem_shared, 1, 32, 0, 0, x, y);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(last_report_line(path, line, sizeof line));
    expect_site(line, "shared, lanes l and l+16 on one bank", MEM_LINE_SHARED + 8,
                "\"space\": \"shared\", \"dir\": \"load\", \"width\": 4, \"requests\": 1, \"lane_accesses\": 32, \"bytes\": 128, \"distinct_bytes\": 0, \"sectors\": 0, \"ideal_sectors\": 0, \"wavefronts\": 2, \"ideal_wavefronts\": 1");
    expect_site(line, "shared 16-byte loads", MEM_LINE_SHARED + 12,
                "\"space\": \"shared\", \"dir\": \"load\", \"width\": 16, \"requests\": 1, \"lane_accesses\": 32, \"bytes\": 512, \"distinct_bytes\": 0, \"sectors\": 0, \"ideal_sectors\": 0, \"wavefronts\": 4, \"ideal_wavefronts\": 4");
    EMT_LAUNCH(mem_tagged, 1, 32, 0, 0, x, y);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(last_report_line(path, line, sizeof line));
    expect_site(line, "shared, requests paired per EMT_REQUEST_TAG region", MEM_LINE_TAGGED,
                "\"space\": \"shared\", \"dir\": \"load\", \"width\": 4, \"requests\": 2, \"lane_accesses\": 48, \"bytes\": 192, \"distinct_bytes\": 0, \"sectors\": 0, \"ideal_sectors\": 0, \"wavefronts\": 2, \"ideal_wavefronts\": 2");
    // two warps, one mma each: the launch's report counts 2
    EMT_LAUNCH(mma_half_warp_kernel_whole, 1, 64, 0, 0, y);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    EXPECT(last_report_line(path, line, sizeof line));
    EXPECT(strstr(line, "\"mma\": 2,") != nullptr);
    unsetenv("EMT_CUDA_HARNESS_MEMSTATS");
    cudaFree(x);
    cudaFree(y);
    remove(path);
}

// The integer intrinsics the kernels use (CUDA Math API): __ffs counts from 1, 0 for 0.
static void test_intrinsics(void) {
    EXPECT(__ffs(0) == 0);
    EXPECT(__ffs(1) == 1);
    EXPECT(__ffs(0x50) == 5);
    EXPECT(__ffs((int)0x80000000u) == 32);
    EXPECT(__popc(0u) == 0);
    EXPECT(__popc(0xf0f0u) == 8);
    EXPECT(__popc(0xffffffffu) == 32);
}

int main(void) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    test_barrier();
    test_shuffles();
    test_reduction();
    test_dynamic_shared();
    test_streams();
    test_graphs();
    test_mma();
    test_faults();
    test_memstats();
    test_intrinsics();
    if (failures) {
        fprintf(stderr, "test_cuda_harness: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cuda_harness: all checks passed\n");
    return 0;
}
