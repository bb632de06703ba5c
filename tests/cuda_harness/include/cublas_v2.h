// A host stand-in for the few cuBLAS calls cuda/*.cu makes, for the CUDA
// execution harness (docs/cuda-harness.md). It is NOT cuBLAS: it computes the
// same product (column-major, as cuBLAS defines it) in a plain loop, queued on
// the handle's stream like the real call, with its arguments and the extent
// of every matrix checked against device allocations. The real cuBLAS is
// exercised only on a GPU (scripts/gpu-check.sh).
#ifndef EMT_CUDA_HARNESS_CUBLAS_H
#define EMT_CUDA_HARNESS_CUBLAS_H

#include "cuda_runtime.h"

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

struct cublasContext;
typedef cublasContext *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
// C = alpha * op(A) * op(B) + beta * C, all column-major; alpha and beta are
// host pointers (CUBLAS_POINTER_MODE_HOST, the default).
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);

#endif
