/*
 * kernel_support.h — whether an attention kernel supports a concrete call: the capabilities the
 * call needs (from its mask description and sizes, cpparity/kernel.h's CPPARITY_KERNEL_SUPPORTS_*)
 * against those the kernel declares, its head dims, and its own supports() when it has one.
 * cpparity never calls a kernel outside what it supports; such an item is reported "unsupported
 * by kernel" instead. And what a call costs the kernel beyond its tensors: its workspace, for
 * the memory estimates.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_SUPPORT_H
#define CPPARITY_DISTRIBUTED_KERNEL_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The capabilities a call needs: GQA when heads > kv_heads; key padding when a key is padding;
 * documents when a row's real tokens span several documents; sliding or chunked (by origin) from
 * the layer type; fully masked rows when a query has no allowed key. O(B·S). */
uint32_t kernel_call_needs(const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims);

/* "GQA", "key padding", "packed documents", "sliding windows", "chunks from the row start",
 * "chunks from each document", "fully masked rows", "deterministic backward"; "?" otherwise. */
const char *kernel_capability_name(uint32_t capability);

/* Whether kernel declares itself deterministic (identical bits call after call): its
 * CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC capability, the one declaration cpparity reads. The
 * `deterministic` field is ABI 1's and is not read (include/cpparity/kernel.h). */
bool kernel_declares_deterministic(const cpparity_attention_kernel *kernel);

/* Whether kernel supports the call; when not, why says which capability or head dim is missing
 * (or the kernel's own reason). */
bool kernel_supports_call(const cpparity_attention_kernel *kernel,
                          const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, char *why, size_t size);

/* The bytes kernel allocates itself in one call of dims (cpparity/kernel.h workspace_bytes) into
 * *bytes: its figure when its struct_size covers the field and it is set, else 0 (an older
 * descriptor, or none declared). False (*bytes 0) when the kernel says the figure does not fit
 * int64 (−1, or any negative value). */
bool kernel_workspace_bytes(const cpparity_attention_kernel *kernel,
                            const cpparity_attention_dims *dims, int64_t *bytes);

/* Whether kernel has block calls (ABI 3: abi_version >= 3, struct_size covering forward_block
 * and backward_block, both set): what ring attention needs. Block calls are optional at ABI 3:
 * an ABI 3 kernel with both NULL (an ABI 2 source recompiled against today's kernel.h) has none,
 * like an ABI 2 kernel. Every caller decides on this, never on abi_version; messages say "kernel
 * ABI 2 has no block calls" for abi_version 2, "kernel NAME has no block calls
 * (forward_block/backward_block NULL)" from 3 on. */
bool kernel_has_block_calls(const cpparity_attention_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif
