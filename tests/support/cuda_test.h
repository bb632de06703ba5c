/* What the CUDA tests share: a seeded random source (the same sequence on
 * every run), copies of host data onto a backend, the CPU/CUDA backend pair
 * they compare, and the tiny model files the end-to-end ones decode. */
#ifndef EMT_CUDA_TEST_H
#define EMT_CUDA_TEST_H

#include "backend/backend.h"
#include "tiny_model.h"

/* uniform in [-1, 1) and in [0, n) */
float emt_test_urand(uint64_t *state);
int32_t emt_test_irand(uint64_t *state, int32_t n);
/* n values uniform in [-scale, scale) (malloc'ed) */
float *emt_test_host_random(uint64_t *state, size_t n, float scale);
/* a backend allocation holding `bytes` of `host`; NULL (and a failed check) on error */
void *emt_test_device_copy(emt_backend *be, const void *host, size_t bytes);

/* 1 when a CUDA backend can be created (the real plugin with a GPU, or the
 * harness plugin); else 0, after printing "SKIP: <reason>" for CTest (the
 * caller returns 77). */
int emt_cuda_test_have_device(void);
/* The CPU backend and the CUDA one, a context on each; 0 as
 * emt_cuda_test_have_device when there is no CUDA backend. */
int emt_cuda_test_open_pair(emt_backend **cpu, emt_exec **ec, emt_backend **gpu, emt_exec **eg);
void emt_cuda_test_close_pair(emt_backend *cpu, emt_exec *ec, emt_backend *gpu, emt_exec *eg);

/* The end-to-end tests' files, named from `stem` and the process id (the
 * GPU and harness runs of a test may overlap): the tiny model (config *c,
 * vocabulary 32, F32) and 5 Medusa and 5 Hydra heads for it. */
typedef struct emt_cuda_test_files {
    char gguf[512], medusa[512], hydra[512];
} emt_cuda_test_files;
void emt_cuda_test_write_files(const char *stem, emt_tiny_config *c, emt_cuda_test_files *f);
void emt_cuda_test_remove_files(const emt_cuda_test_files *f);

#endif
