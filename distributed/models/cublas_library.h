/*
 * cublas_library.h — the cuBLAS functions the CUDA model calls, resolved from the cuBLAS shared
 * library when a CUDA model is first made, not when cpparity starts.
 *
 * cuBLAS is large (its libraries are over 500 MB): linking it would make every process load it,
 * about 0.3 s and 200 MiB of resident memory before main, though most runs are on CPU ranks. The
 * library is opened with dlopen by its soname (libcublas.so.<CUDA major version>: the search of
 * LD_LIBRARY_PATH, the executable's run path and the loader's cache), then from the folder the
 * build found it in. Loading happens once per process, whatever the number of threads asking.
 *
 * cublas_library_load(&library, error) gives the table, or records what was tried and why it
 * failed (CPPARITY_ERROR_RUNTIME). The names are cuBLAS's own (cublas_v2.h), without the prefix.
 * CUBLAS_CHECK (cublas_check.h) names a failed status through the loaded table.
 */
#ifndef CPPARITY_DISTRIBUTED_CUBLAS_LIBRARY_H
#define CPPARITY_DISTRIBUTED_CUBLAS_LIBRARY_H

#include <cublas_v2.h>

#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublas_library {
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*destroy)(cublasHandle_t handle);
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
    cublasStatus_t (*set_math_mode)(cublasHandle_t handle, cublasMath_t mode);
    cublasStatus_t (*set_atomics_mode)(cublasHandle_t handle, cublasAtomicsMode_t mode);
    cublasStatus_t (*sgemm)(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const float *alpha,
                            const float *A, int lda, const float *B, int ldb, const float *beta,
                            float *C, int ldc);
    const char *(*get_status_name)(cublasStatus_t status);
    const char *(*get_status_string)(cublasStatus_t status);
} cublas_library;

/* The loaded table in *library; the first call loads, later calls give the same table or the same
 * error. Thread-safe. */
cpparity_status cublas_library_load(const cublas_library **library, cpparity_error *error);

/* The name of a status for messages: cuBLAS's own when the library is loaded, else its number. */
const char *cublas_library_status_name(cublasStatus_t status);
const char *cublas_library_status_string(cublasStatus_t status);

#ifdef __cplusplus
}
#endif

#endif
