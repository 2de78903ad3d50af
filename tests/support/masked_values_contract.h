/*
 * masked_values_contract.h — the kernel contract that values a mask hides cannot change a result:
 * an element of out, lse or dq depends only on the keys its query row may see, and an element of
 * dk or dv only on the queries that may see its key. A kernel that multiplies a masked pair by a
 * probability of 0 instead of skipping it breaks this as soon as the hidden value is Inf or NaN
 * (0 · Inf = NaN), which real inputs produce: padding tokens whose activations overflowed,
 * another document's garbage, a cache slot never written.
 *
 * masked_values_contract_check(kernel, report, size) runs the kernel (host pointers, float32
 * tensors: a CPU kernel, or a CUDA one wrapped by kernel_device_staging.h) on small problems of
 * every layer type with padding, packed documents and several tiles, once with finite inputs and
 * once with Inf and NaN written into one key position's k and v (then one query position's q and
 * dout), and requires every element that the mask keeps apart from the poisoned position to keep
 * its bits. Returns true when the contract holds; else false with the first violation in report
 * (problem, tensor, batch row, position, head, both values). Uses only the kernel ABI and the
 * implementation's own mask predicate (mask_predicate.h), so it needs neither Criterion nor a
 * reference: the GPU probes run it too.
 */
#ifndef CPPARITY_TESTS_SUPPORT_MASKED_VALUES_CONTRACT_H
#define CPPARITY_TESTS_SUPPORT_MASKED_VALUES_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

bool masked_values_contract_check(const cpparity_attention_kernel *kernel, char *report,
                                  size_t size);

#ifdef __cplusplus
}
#endif

#endif
