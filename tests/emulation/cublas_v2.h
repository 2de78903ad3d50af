/*
 * cublas_v2.h (tests/emulation) — the cuBLAS types cpparity's CUDA model names, for the CPU
 * emulation (tests/emulation/README.md); the functions are cublas_emulation.cpp's table, behind
 * distributed/models/cublas_library.h as the real library's are.
 */
#ifndef CPPARITY_TESTS_EMULATION_CUBLAS_V2_H
#define CPPARITY_TESTS_EMULATION_CUBLAS_V2_H

#include "cuda_runtime.h"

typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;
typedef enum { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 } cublasAtomicsMode_t;

#endif
