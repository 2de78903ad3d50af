/*
 * cuda_check.h — the one check every CUDA runtime return code goes through. CUDA_CHECK(call,
 * error, what) runs call; on failure it records in error the CUDA error name and text, what was
 * being done, the call and its source line, and returns CPPARITY_ERROR_RUNTIME from the
 * enclosing function. It needs only cuda_runtime.h: .cu files and C files built against the CUDA
 * runtime (comm_nccl.c) use it alike; callers put the rank into `what`.
 */
#ifndef CPPARITY_DISTRIBUTED_CUDA_CHECK_H
#define CPPARITY_DISTRIBUTED_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "common/error.h"

#define CUDA_CHECK(call, error, what)                                                              \
    do {                                                                                           \
        const cudaError_t cuda_check_code_ = (call);                                               \
        if (cuda_check_code_ != cudaSuccess) {                                                     \
            return cpparity_error_set((error), CPPARITY_ERROR_RUNTIME,                             \
                                      "CUDA: %s failed: %s returned %s (%s) (%s:%d)", (what),      \
                                      #call, cudaGetErrorName(cuda_check_code_),                   \
                                      cudaGetErrorString(cuda_check_code_), __FILE__, __LINE__);   \
        }                                                                                          \
    } while (0)

#endif
