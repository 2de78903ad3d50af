/* cublas_emulation.cpp — distributed/models/cublas_library.h for the CPU emulation: the table of
 * cuBLAS functions the CUDA model calls, sgemm by OpenBLAS (column-major, as cuBLAS). */
#include <cblas.h>
#include <stdlib.h>

#include "distributed/models/cublas_library.h"

struct cublasContext {
    int unused;
};

static cublasStatus_t create(cublasHandle_t *handle) {
    *handle = (cublasHandle_t)calloc(1, sizeof(cublasContext));
    return *handle != NULL ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

static cublasStatus_t destroy(cublasHandle_t handle) {
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream) {
    (void)handle, (void)stream;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t set_math_mode(cublasHandle_t handle, cublasMath_t mode) {
    (void)handle;
    return mode == CUBLAS_PEDANTIC_MATH || mode == CUBLAS_DEFAULT_MATH
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_INVALID_VALUE;
}

static cublasStatus_t set_atomics_mode(cublasHandle_t handle, cublasAtomicsMode_t mode) {
    (void)handle, (void)mode;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const float *alpha,
                            const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc) {
    if (handle == NULL || m < 0 || n < 0 || k < 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cblas_sgemm(CblasColMajor, transa == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                transb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k, *alpha, A, lda, B, ldb,
                *beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

static const char *status_name(cublasStatus_t status) {
    return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
                                           : "CUBLAS_STATUS_INVALID_VALUE";
}

static const char *status_string(cublasStatus_t status) {
    return status == CUBLAS_STATUS_SUCCESS ? "success (emulated)" : "invalid value (emulated)";
}

static const cublas_library emulated = {create,           destroy, set_stream,  set_math_mode,
                                        set_atomics_mode, sgemm,   status_name, status_string};

cpparity_status cublas_library_load(const cublas_library **library, cpparity_error *error) {
    (void)error;
    *library = &emulated;
    return CPPARITY_OK;
}

const char *cublas_library_status_name(cublasStatus_t status) {
    return status_name(status);
}

const char *cublas_library_status_string(cublasStatus_t status) {
    return status_string(status);
}
