/*
 * cublas_check.h — the one check every cuBLAS return code goes through, beside CUDA_CHECK
 * (cuda_check.h). CUBLAS_CHECK(call, error, what) runs call; on failure it records in error the
 * cuBLAS status name and text, what was being done, the call and its source line, and returns
 * CPPARITY_ERROR_RUNTIME from the enclosing function. The calls go through the table of
 * cublas_library.h (cuBLAS is loaded on first use), which names the status.
 */
#ifndef CPPARITY_DISTRIBUTED_CUBLAS_CHECK_H
#define CPPARITY_DISTRIBUTED_CUBLAS_CHECK_H

#include "common/error.h"
#include "distributed/models/cublas_library.h"

#define CUBLAS_CHECK(call, error, what)                                                            \
    do {                                                                                           \
        const cublasStatus_t cublas_check_code_ = (call);                                          \
        if (cublas_check_code_ != CUBLAS_STATUS_SUCCESS) {                                         \
            return cpparity_error_set(                                                             \
                (error), CPPARITY_ERROR_RUNTIME, "cuBLAS: %s failed: %s returned %s (%s) (%s:%d)", \
                (what), #call, cublas_library_status_name(cublas_check_code_),                     \
                cublas_library_status_string(cublas_check_code_), __FILE__, __LINE__);             \
        }                                                                                          \
    } while (0)

#endif
