// Host stand-in for cuBLAS (see include/cublas_v2.h): the same product, in
// the same column-major convention, on the handle's stream. Not cuBLAS.
#include "cublas_v2.h"

#include <math.h>
#include <stdlib.h>

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = (cublasHandle_t)calloc(1, sizeof(cublasContext));
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

// floats spanned by a column-major rows x cols matrix with leading dimension ld
static size_t extent(int rows, int cols, int ld) {
    return rows && cols ? (size_t)ld * (size_t)(cols - 1) + (size_t)rows : 0;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    // cuBLAS's own argument checks
    if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
        ldc < (m > 1 ? m : 1)) {
        emt_harness::report("cublasSgemm(m %d, n %d, k %d, lda %d, ldb %d, ldc %d): invalid value", m, n, k, lda, ldb,
                            ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    // what a GPU would fault on: a matrix that leaves its allocation
    const struct {
        const char *name;
        const float *p;
        size_t floats;
    } mats[] = { { "A", A, extent(a_rows, a_cols, lda) }, { "B", B, extent(b_rows, b_cols, ldb) },
                 { "C", C, extent(m, n, ldc) } };
    for (const auto &x : mats)
        if (x.floats && !emt_harness::is_device_range(x.p, x.floats * sizeof(float))) {
            emt_harness::report("cublasSgemm: matrix %s (%p, %zu floats) is not inside one device allocation", x.name,
                                (const void *)x.p, x.floats);
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
    float al = *alpha, be = *beta;
    emt_harness::enqueue_host_work(handle->stream, [=]() {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float acc = 0.0f;
                for (int p = 0; p < k; p++) {
                    float a = ta ? A[p + (size_t)i * lda] : A[i + (size_t)p * lda];
                    float b = tb ? B[j + (size_t)p * ldb] : B[p + (size_t)j * ldb];
                    acc = fmaf(a, b, acc);
                }
                float *c = &C[i + (size_t)j * ldc];
                *c = be == 0.0f ? al * acc : al * acc + be * *c; // beta 0: C is not read
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}
