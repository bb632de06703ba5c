// The harness's memory-efficiency counters (docs/cuda-harness.md, "Memory
// efficiency"): what the kernels' counted loads and stores (emt_ld/emt_st in
// cuda/cuda_launch.h) would cost on a GPU, per warp-level request, as Nsight
// Compute counts it. Internal to the harness runtime.
#ifndef EMT_CUDA_HARNESS_MEMSTATS_H
#define EMT_CUDA_HARNESS_MEMSTATS_H

#include "cuda_runtime.h"

namespace emt_harness {
// The launch about to run / its blocks / its end (cuda_harness.cpp calls these).
void memstats_launch_begin(const kernel_call &k);
void memstats_block_begin(unsigned n_threads);
void memstats_block_end(void);
void memstats_mma(void); // a warp completed an mma (counted per launch)
void memstats_launch_end(bool failed);
// For memstats.cpp: the running thread's lane and warp, whether [p, p+n) is
// device memory.
void current_lane_warp(unsigned *lane, unsigned *warp, unsigned *thread);
bool memstats_is_device(const void *p, size_t bytes);
} // namespace emt_harness

#endif
