/*
 * cuda_runtime.h (tests/emulation) — the part of the CUDA runtime cpparity's CUDA sources use, on
 * the CPU, for the emulation test (tests/emulation/README.md). Not CUDA: a test double that lets
 * the CUDA model's host code and its kernels run where no GPU is. C and C++ (the launches,
 * threads and typed overloads are C++'s, as in the real header).
 *
 * Memory is host memory (cudaMalloc fills new blocks with 0xFF bytes, NaN as floats, so that a
 * read of memory nobody wrote shows); copies are memcpy; streams run everything at once, in
 * order. A launch (rewritten by rewrite_cuda.py into cuda_emulation_launch) runs the grid's blocks
 * one after another on the calling thread, each block's threads as fibers (ucontext) that switch
 * at __syncthreads: every thread of the block reaches the barrier before any goes on, as on the
 * device. __shared__ variables are thread_local statics (one block runs at a time per thread);
 * dynamic shared memory is a per-launch buffer, filled with 0xFF bytes too.
 */
#ifndef CPPARITY_TESTS_EMULATION_CUDA_RUNTIME_H
#define CPPARITY_TESTS_EMULATION_CUDA_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" { /* C linkage: C sources (kernel_device_staging.c) call the runtime too */
#endif

/* --- qualifiers ------------------------------------------------------------------------------ */
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __launch_bounds__(...)

/* --- errors, streams, memory ----------------------------------------------------------------- */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };

typedef enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 } cudaDeviceAttr;
typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8
} cudaFuncAttribute;
struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    int maxThreadsPerBlock;
};

cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute, int device);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t stream);
cudaError_t cudaMallocHost(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream);
cudaError_t cudaFreeHost(void *pointer);
cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemset(void *to, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *to, int value, size_t bytes, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */

/* the typed overloads cuda_runtime.h gives C++ callers */
template <typename T> cudaError_t cudaMalloc(T **pointer, size_t bytes) {
    return cudaMalloc((void **)pointer, bytes);
}
template <typename T> cudaError_t cudaMallocAsync(T **pointer, size_t bytes, cudaStream_t stream) {
    return cudaMallocAsync((void **)pointer, bytes, stream);
}
template <typename T> cudaError_t cudaMallocHost(T **pointer, size_t bytes) {
    return cudaMallocHost((void **)pointer, bytes);
}
template <typename T> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, T *) {
    attributes->sharedSizeBytes = 0;
    attributes->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
template <typename T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int) {
    return cudaSuccess;
}

/* --- threads and launches ------------------------------------------------------------------- */
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {
    }
};
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

/* The barrier of a block's threads. */
void __syncthreads(void);
/* The launch's dynamic shared memory (its third configuration value, in bytes). */
void *cuda_emulation_dynamic_shared(void);
/* Runs body(context) as every thread of every block of the grid; records a launch error (read by
 * cudaGetLastError) for a block of more than 1024 threads or an empty grid. */
void cuda_emulation_run(dim3 grid, dim3 block, size_t shared_bytes, void (*body)(void *),
                        void *context);

template <typename F>
void cuda_emulation_launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                           F kernel) {
    (void)stream; /* every stream runs at once, in order */
    cuda_emulation_run(
        grid, block, shared_bytes, [](void *f) { (*(F *)f)(); }, &kernel);
}
#endif /* __cplusplus */

#endif
