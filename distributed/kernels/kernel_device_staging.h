/*
 * kernel_device_staging.h — a CUDA float32 attention kernel called on host buffers: each call
 * copies the inputs to the device, calls the kernel there on a stream of its own, waits, and
 * copies the outputs back. This is how attention-level cases (harness/running/attention_item.h)
 * run a CUDA kernel, built in or a plugin, with the same poisoned, guarded calls as a CPU kernel
 * (kernel_call.h): the host outputs' contents (NaN poison) travel to the device, and each device
 * output has guard regions of its own, checked after the call, so a write out of bounds on the
 * device is reported as such. A kernel with block calls (ABI 3) keeps them: its index arrays are
 * copied to the device too (kernel.h: a CUDA kernel reads them there).
 *
 * kernel_device_staging_wrap(&wrapper, cuda_kernel, why, size) fills wrapper (a CPU kernel with
 * the CUDA kernel's name, version, capabilities and support test); false with the reason in why
 * when this build has no CUDA, no device is usable, or the kernel is not a CUDA float32 one.
 * Release with kernel_device_staging_release. Calls of one wrapper must not overlap.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_DEVICE_STAGING_H
#define CPPARITY_DISTRIBUTED_KERNEL_DEVICE_STAGING_H

#include <stdbool.h>
#include <stddef.h>

#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

bool kernel_device_staging_wrap(cpparity_attention_kernel *wrapper,
                                const cpparity_attention_kernel *cuda_kernel, char *why,
                                size_t size);

/* Releases what wrap made (the stream); safe on a zeroed wrapper. */
void kernel_device_staging_release(cpparity_attention_kernel *wrapper);

#ifdef __cplusplus
}
#endif

#endif
