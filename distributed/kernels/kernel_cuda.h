/*
 * kernel_cuda.h — the built-in CUDA attention kernels, behind kernel.h: "cuda-f32" (float32
 * tensors) and "cuda-bf16" (bfloat16 tensors as uint16_t bits; lse stays float32). Tensor
 * pointers are device pointers and `stream` a cudaStream_t (NULL: the default stream); the mask
 * description's arrays are host pointers, copied to the device by each call. A call returns once
 * its work on the stream has finished. Deterministic: two calls give identical bits (no atomics;
 * every sum in a fixed order). Available when cpparity is built with CUDA
 * (CPPARITY_HAVE_CUDA_KERNELS); the implementation is in kernel_cuda.cu.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_CUDA_H
#define CPPARITY_DISTRIBUTED_KERNEL_CUDA_H

#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

/* The kernels (static objects: never freed). Head dimensions 1 to 256. */
const cpparity_attention_kernel *cpparity_cuda_f32_kernel(void);
const cpparity_attention_kernel *cpparity_cuda_bf16_kernel(void);

#ifdef __cplusplus
}
#endif

#endif
