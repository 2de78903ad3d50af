/*
 * kernel_plugin.h — attention kernels from a shared library: `--kernel PATH.so` (or
 * `PATH.so:NAME` to pick one of several). The library is loaded with dlopen, its
 * cpparity_kernel_plugin entry (cpparity/kernel.h) is asked for ABI version 2, every kernel it
 * returns is copied (the fields its struct_size covers; the later ones, such as workspace_bytes
 * for a plugin built before it, stay zero), checked and registered (kernel_registry.h), and the
 * one for the run's device is chosen. Anything wrong — no such file, not a shared library, no entry
 * symbol, another ABI version, a descriptor that makes no sense, a name already taken, no kernel
 * for the device — is bad input (CPPARITY_ERROR_INPUT) naming the flag, the path and the reason.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_PLUGIN_H
#define CPPARITY_DISTRIBUTED_KERNEL_PLUGIN_H

#include <stdbool.h>

#include "common/error.h"
#include "distributed/kernels/kernel.h"

/* Whether a --kernel argument names a plugin rather than a built-in kernel: it contains a '/'
 * or ends in ".so" (optionally followed by ":NAME"). */
bool kernel_plugin_is_path(const char *argument);

/* Loads the plugin argument names and returns in *kernel its kernel for device ("cpu" or
 * "cuda"): the one called NAME with PATH.so:NAME, else its only kernel for that device. The
 * library stays loaded for the life of the process. */
cpparity_status kernel_plugin_load(const char *argument, const char *device,
                                   const cpparity_attention_kernel **kernel, cpparity_error *error);

#endif
