/* What the CUDA tests share: a seeded random source (the same sequence on
 * every run) and copies of host data onto a backend. */
#ifndef EMT_CUDA_TEST_H
#define EMT_CUDA_TEST_H

#include "backend/backend.h"

/* uniform in [-1, 1) and in [0, n) */
float emt_test_urand(uint64_t *state);
int32_t emt_test_irand(uint64_t *state, int32_t n);
/* n values uniform in [-scale, scale) (malloc'ed) */
float *emt_test_host_random(uint64_t *state, size_t n, float scale);
/* a backend allocation holding `bytes` of `host`; NULL (and a failed check) on error */
void *emt_test_device_copy(emt_backend *be, const void *host, size_t bytes);

#endif
