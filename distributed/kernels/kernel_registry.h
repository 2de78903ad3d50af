/*
 * kernel_registry.h — attention kernels by name (`--kernel NAME`). The built-in kernels are in
 * the table from the start (kernel_registry.c lists them); more can be added at run time with
 * kernel_registry_add before any rank starts running (this is where a loader of kernels built
 * apart from cpparity adds what it loads; this version has no such loader).
 * `cpparity run --help` and `cpparity --version` list the table.
 *
 * The registry is process-wide. Adding is not thread-safe: add before ranks start; lookups
 * afterwards only read.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_REGISTRY_H
#define CPPARITY_DISTRIBUTED_KERNEL_REGISTRY_H

#include <stdbool.h>

#include "common/error.h"
#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

/* The most kernels the registry holds (built-in ones included). */
#define KERNEL_REGISTRY_CAPACITY 64

/* Number of registered kernels, and kernel index (NULL outside [0, count)), in the order they
 * were registered (built-in ones first). */
int kernel_registry_count(void);
const cpparity_attention_kernel *kernel_registry_at(int index);

/* The kernel called name, or NULL. */
const cpparity_attention_kernel *kernel_registry_find(const char *name);

/* Registers kernel (borrowed: it must outlive every use). CPPARITY_ERROR_INPUT for a NULL or
 * incomplete kernel (no name, no forward or backward), an ABI version this cpparity does not
 * speak, a struct_size too small for its ABI version, an ABI 3 kernel with one block call but
 * not the other (neither is accepted: whole-sequence calls only, kernel_has_block_calls false),
 * a device or dtype outside the ABI's values, a name already registered, or a full registry. */
cpparity_status kernel_registry_add(const cpparity_attention_kernel *kernel, cpparity_error *error);

/* Whether kernel is one of cpparity's own (not added with kernel_registry_add). */
bool kernel_registry_is_built_in(const cpparity_attention_kernel *kernel);

/* "cpu" or "cuda" for a kernel's device field; "unknown" otherwise. */
const char *kernel_device_name(const cpparity_attention_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif
