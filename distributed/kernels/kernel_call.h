/*
 * kernel_call.h — how the CPU model calls an attention kernel: the outputs are poisoned with NaN
 * first, so an element the kernel never writes shows as a non-finite value where it is compared;
 * and a kernel that is not built in (a plugin) writes into buffers with guard regions before and
 * after each output, checked after the call, so a write out of bounds is reported as such (naming
 * the kernel, the output and how far) instead of corrupting whatever lies next to it. Calls to a
 * kernel without CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS are serialised across threads (the
 * threading contract of include/cpparity/kernel.h).
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_CALL_H
#define CPPARITY_DISTRIBUTED_KERNEL_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "distributed/kernels/kernel.h"

#ifdef __cplusplus /* the CUDA model (.cu, compiled as C++) calls kernel_call_begin/end */
extern "C" {
#endif

/* Floats of each guard region (before and after every output of a guarded call). */
#define KERNEL_CALL_GUARD 256

/* The guard pattern: a NaN with a payload no arithmetic produces. */
static inline float kernel_call_guard_value(void) {
    const uint32_t bits = 0x7fc0c0deu;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* How many of the count floats of a guard region no longer hold the pattern (bitwise). */
static inline int64_t kernel_call_guards_overwritten(const float *region, int64_t count) {
    const float guard = kernel_call_guard_value();
    int64_t overwritten = 0;
    for (int64_t i = 0; i < count; i++) {
        overwritten += memcmp(&region[i], &guard, sizeof guard) != 0;
    }
    return overwritten;
}

/* Around every call of a kernel's forward or backward made outside kernel_call_forward/backward
 * (the CUDA model, device staging): without CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS, begin
 * waits until no other such call runs and end lets the next one in; with it, both do nothing. */
void kernel_call_begin(const cpparity_attention_kernel *kernel);
void kernel_call_end(const cpparity_attention_kernel *kernel);

/* kernel->forward into out [B, S, H, Dh] and lse [B, H, S]. 0, or non-zero with message filled
 * (the kernel's own failure, a guard overwritten, or no memory for the guarded buffers). */
int kernel_call_forward(const cpparity_attention_kernel *kernel, float *out, float *lse,
                        const float *q, const float *k, const float *v,
                        const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                        float scale, char *message, size_t size);

/* kernel->backward into dq [B, S, H, Dh], dk and dv [B, S, Hkv, Dh]; as kernel_call_forward. */
int kernel_call_backward(const cpparity_attention_kernel *kernel, float *dq, float *dk, float *dv,
                         const float *dout, const float *q, const float *k, const float *v,
                         const float *out, const float *lse, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, float scale, char *message,
                         size_t size);

/* The block calls of ABI 3 (kernel_support.h kernel_has_block_calls must hold): out [B, Sq, H,
 * Dh] and lse [B, H, Sq]; dq [B, Sq, H, Dh], dk and dv [B, Sk, Hkv, Dh]; as the two above. */
int kernel_call_forward_block(const cpparity_attention_kernel *kernel, float *out, float *lse,
                              const float *q, const float *k, const float *v,
                              const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims,
                              const cpparity_attention_block *block, float scale, char *message,
                              size_t size);
int kernel_call_backward_block(const cpparity_attention_kernel *kernel, float *dq, float *dk,
                               float *dv, const float *dout, const float *q, const float *k,
                               const float *v, const float *out, const float *lse,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims,
                               const cpparity_attention_block *block, float scale, char *message,
                               size_t size);

#ifdef __cplusplus
}
#endif

#endif
