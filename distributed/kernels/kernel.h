/*
 * kernel.h — the attention kernel interface inside cpparity: the public ABI of
 * include/cpparity/kernel.h (documented there), which built-in kernels
 * (distributed/kernels/kernel_cpu.h, kernel_cuda.h) and plugins loaded with `--kernel PATH.so`
 * (kernel_plugin.h) both implement.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_H
#define CPPARITY_DISTRIBUTED_KERNEL_H

#include "cpparity/kernel.h"

#endif
