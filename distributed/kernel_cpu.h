/*
 * kernel_cpu.h — the built-in CPU float32 attention kernel ("cpu-f32"): tiled over keys with an
 * online softmax (distributed/online_softmax.h), tiles classified all / none / mixed by the
 * shared predicate (distributed/mask_predicate.h) so empty tiles are skipped; backward
 * recomputes probabilities from lse. Deterministic: every sum in a fixed order.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_CPU_H
#define CPPARITY_DISTRIBUTED_KERNEL_CPU_H

#include "distributed/kernel.h"

/* The kernel (a static object: never freed). */
const cpparity_attention_kernel *cpparity_cpu_f32_kernel(void);

#endif
