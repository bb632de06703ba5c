// The step counters of a context (emt_exec_counters, src/backend/backend.h):
// every host wait and every device-to-host copy of the plugin goes through
// these two functions (graphs.cu counts graph launches and captures), so `entmtp bench --backend cuda` and the harness test
// (tests/unit/test_step_counters.c) see exactly what the plugin did. Kernel
// launches are counted by EMT_LAUNCH (cuda_launch.h). No CPU twin: the CPU
// backend has no device boundary to count.
#include "cuda_exec.h"

#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cu_wait(emt_exec *ex) {
    if (ex->recording) { // a wait cannot be recorded: the capture fails, the span runs directly
        ex->capture_broken = 1;
        return;
    }
    double t0 = now_seconds();
    cudaError_t e = cudaStreamSynchronize(ex->stream);
    CUDA_OK(ex, e);
    if (e == cudaSuccess) cu_after_wait(ex);
    ex->counters.syncs++;
    ex->counters.wait_seconds += now_seconds() - t0;
}

void cu_copy_to_host(emt_exec *ex, void *dst, const void *src, size_t bytes) {
    if (ex->recording) { // a download inside a span: not replayable
        ex->capture_broken = 1;
        return;
    }
    CUDA_OK(ex, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ex->stream));
    ex->counters.d2h_copies++;
    ex->counters.d2h_bytes += (int64_t)bytes;
}

void cu_counters(emt_exec *ex, emt_exec_counters *out) {
    *out = ex->counters;
    out->launches = emt_cuda_launch_count;
}
