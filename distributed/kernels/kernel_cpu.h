/*
 * kernel_cpu.h — the built-in CPU float32 attention kernel ("cpu-f32"): tiled over keys with an
 * online softmax (distributed/kernels/online_softmax.h), tiles classified all / none / mixed by the
 * shared predicate (distributed/kernels/mask_predicate.h) so empty tiles are skipped; backward
 * recomputes probabilities from lse. A tile's products run as small vector loops over tiles packed
 * in cache, with fused multiply-adds on CPUs with AVX2 and FMA, a multiply then an add elsewhere.
 * Deterministic: every sum in a fixed order, the same bits for the same inputs on one CPU.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_CPU_H
#define CPPARITY_DISTRIBUTED_KERNEL_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "common/fault.h"
#include "distributed/kernels/kernel.h"

/* The kernel, tiles of 32 queries × 32 keys (a static object: never freed). */
const cpparity_attention_kernel *cpparity_cpu_f32_kernel(void);

/* The same code with tiles of 8 ("cpu-f32-tile8"): short sequences span many tiles, so the
 * online-softmax merge, tile classification and partial tiles are exercised by small cases. */
const cpparity_attention_kernel *cpparity_cpu_f32_small_tile_kernel(void);

/* The same code with the plain tile loops on every CPU ("cpu-f32-plain"): what CPUs without AVX2
 * and FMA run, so that a machine with them checks (and covers) that path too. */
const cpparity_attention_kernel *cpparity_cpu_f32_plain_loops_kernel(void);

/* What a copy of the kernel is told beyond kernel.h: a planted fault (fault.h; the kernel's
 * own faults, gqa-kv-mapping, and none) and the shard length L the shard-local faults need. */
typedef struct kernel_cpu_options {
    cpparity_fault fault; /* CPPARITY_FAULT_NONE: the kernel as built */
    int64_t shard_length; /* L: tokens per rank (window-local, chunk-local) */
    int64_t tile;         /* queries and keys per tile, 1..32 (others: 32) */
    bool plain_loops;     /* the plain-C tile loops even where the CPU has AVX2 and FMA (what
                           * other CPUs run: tests cover both paths on one machine) */
} kernel_cpu_options;

/* Fills *copy with kernel whose context is options (borrowed: it must outlive the copy) when
 * kernel is one of these built-in kernels, setting options->tile to that kernel's tile size (and
 * plain_loops when that kernel runs the plain loops); false, copy and options untouched, for any
 * other kernel. */
bool kernel_cpu_with_options(cpparity_attention_kernel *copy,
                             const cpparity_attention_kernel *kernel, kernel_cpu_options *options);

#endif
