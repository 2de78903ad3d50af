/*
 * memory_estimate.h — how much memory a `cpparity run` (or `selftest`) will hold, worked out
 * from the case sizes before anything is allocated, and the memory this machine has for it, so
 * that a case that cannot fit is refused at once (exit 2) instead of swapping for minutes or
 * failing out of memory half-way (issue 13).
 *
 * Who states which figure (every figure in bytes, every product and sum checked with
 * common/checked_size.h; a size that overflows int64 is itself a refusal). Each component states
 * its own peak for the case's sizes; this file only adds them up per rank and per process, and
 * mirrors no other folder's allocations:
 *
 *   N = B·S tokens, P parameters (model.md's table), V vocab; at cp: L = ceil(S/cp) tokens per
 *   rank, Sp = cp·L.
 *
 *   reference (reference/memory.h: the model's parameters, gradients, activations, masks,
 *     forward's and backward's scratch with reference_threads() threads) plus what
 *     reference_cache.c compute adds: the batch (common/batch.h, 25 bytes a token) and the
 *     outputs it copies out and keeps until the job ends — logits 8NV, gradients 8P, fully-masked
 *     rows N, the parameter table. The reference holds its model and the largest of its forward,
 *     its backward and those copies.
 *   baseline (harness/judging/naive_model.h naive_model_memory: the naive model's run and the
 *     outputs it keeps, 4NV + 4P, per dtype) plus what compute_naive adds: the batch, the
 *     weights in float64 8P and their table.
 *     The reference and then the baseline run on the root's prefetch thread (run_item.c), one
 *     after the other: that thread holds max(reference, reference kept + baseline), and only
 *     for the first item of the case (and of each dtype); later items find them cached. Where
 *     the job's ranks spread the reference (run.c spread_references), they spread each dtype's
 *     baseline after it too (naive_model_memory_spread, a rank's share), before any item.
 *   implementation, per rank: the implementation's own share — its `estimate`
 *     (distributed/models/implementation.h; the cpu and cuda ones in
 * distributed/models/model_memory.h, the attention kernel's workspace included through
 * kernel_support.h) — plus what run_item.c run_on_rank gives and reads back: the whole batch, the
 * weights in float64 8P, the outputs 4·B·L·V + 4P and two parameter tables; and once per
 * process, from its first item on, the copy of the weights and their table that
 * fixtures/parameter_cache.h keeps (8P, when that is at most 4 MiB). An implementation
 * without `estimate` counts only the latter: the refusal message then says its own share is
 * unknown, and so does `list`
 *     ("+" after the figure), since such an estimate is a lower bound.
 *     An attention-level item runs a kernel alone (attention_item.c): its buffers, the batch,
 *     the reference's masks and attention backward (reference/memory.h) and a CPU kernel's
 *     workspace (cpparity/kernel.h workspace_bytes).
 *   harness, on the group's root: the gathered logits and gradients cp(4·B·L·V + 4P) while every
 *     local rank still holds its own, the judging slices 13·B·L·V and the tensor records; the
 *     values --store keeps (12 bytes an element: all compared tensors under `all`, or under
 *     `failures` when a fault is planted, nothing otherwise), three copies of them while the
 *     item travels to rank 0 (packed, gathered, unpacked) and one in the results until the end.
 *   discrimination (run only, after every item): each home rank reruns the reference for its
 *     cases with a mask feature off (reference/memory.h features_off; without its kept outputs),
 *     next to the cache.
 *
 * Who holds what: with --comm local every rank is a thread of one process, which therefore
 * holds everything; under MPI (or nccl) each rank is a process and the largest is a case's home
 * rank (the reference, baseline and judging beside its own implementation rank). Items run in
 * rounds (run.c run_phase): in one round every group of the phase runs one item, so what one
 * process holds in a round is the sum over its groups' items (each at its own peak, an upper
 * bound), plus the reference outputs cached so far by its ranks (never freed before the end)
 * and the stored results on rank 0. An item's estimate is that sum in its round, for the process
 * holding the most of it; the discrimination phase is estimated the same way.
 *
 * Not counted: the program, its libraries and OpenBLAS's buffers (some 20 MiB, the same for
 * every case), thread stacks, and small allocations that do not grow with the sizes (structs,
 * under a few KiB each). Checked: tests/test_memory_estimate.c counts every allocation of real
 * runs of each part (within 5 %); tests/check_memory_estimate.py compares whole runs with their
 * peak resident memory.
 */
#ifndef CPPARITY_HARNESS_RUNNING_MEMORY_ESTIMATE_H
#define CPPARITY_HARNESS_RUNNING_MEMORY_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "common/fault.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel.h"
#include "results_model/results.h"
#include "harness/running/run_options.h"
#include "harness/running/run_plan.h"

#define MEMORY_TEXT 512 /* bytes of a limit's source or an overflow's description, NUL included */

/* How the job runs, as far as memory goes. */
typedef struct memory_setting {
    const cpparity_implementation *implementation; /* under test (its estimate); NULL: none
                                                      known, only the harness's share counted */
    const cpparity_attention_kernel *kernel;       /* the kernel it calls; NULL: its default */
    bool device_comm;         /* --comm nccl: the communicator moves device memory */
    bool ranks_are_processes; /* mpi / nccl: one process per rank; local: one process for all */
    int64_t ranks;            /* ranks of the job */
    run_store store;          /* --store */
    bool selftest;            /* selftest: every fault planted in turn, no discrimination */
    cpparity_fault fault;     /* run --inject (NONE: none; selftest: every fault) */
} memory_setting;

/* What one item (a case at one cp size) allocates, part by part. */
typedef struct memory_item {
    int64_t reference;            /* computing the float64 reference, its kept outputs included */
    int64_t reference_kept;       /* what the cache keeps of it: logits, gradients, masked rows */
    int64_t reference_spread;     /* the largest rank's share when the job's ranks compute it
                                     together (run_plan.h run_spreads_reference), its kept
                                     outputs included; 0 on one rank */
    int64_t reference_spread_all; /* every rank's share added up: what the ranks hold when
                                     they share one process (local ranks, which run.c does not
                                     spread; the estimate's own test measures it so) */
    int64_t baseline;             /* computing the naive baseline of one dtype, outputs included */
    int64_t baseline_kept;        /* what the cache keeps of it: logits and gradients */
    int64_t baseline_spread;      /* the largest rank's share of it when the job's ranks compute
                                     it together, as the reference (0 on one rank) */
    int64_t baseline_spread_all;  /* every rank's share added up (as reference_spread_all) */
    int64_t implementation;       /* one rank running the implementation, with its inputs/outputs */
    int64_t implementation_own;   /* of which the implementation's estimate (0 when unknown) */
    int64_t implementation_kept;  /* what its instance holds after backward (its estimate's
                                     kept), held while the root reads logits by rows */
    bool implementation_known;    /* the implementation declares an estimate (or none runs) */
    int64_t parameter_cache;      /* the weights fixtures/parameter_cache.h keeps, once a process */
    int64_t rank_outputs;         /* of which a rank still holds while the root judges */
    int64_t judging;              /* the root: gathered outputs, comparison slices, records */
    int64_t stored;               /* values and records the results keep (--store) */
    int64_t discrimination;       /* one rerun of the reference for the discrimination check */
    int64_t discrimination_spread; /* a rank's share of one rerun spread over the ranks (run.c
                                      run_discrimination, when the reference is spread) */
} memory_item;

/* What one process holds at most while a planned item runs. */
typedef struct memory_total {
    int64_t bytes;              /* the most one process holds in the item's round */
    int64_t reference;          /* the item computes the reference: its peak, else 0 */
    bool reference_spread;      /* that reference is computed by every rank before the items
                                   (run_plan.h run_spreads_reference): reference is the share
                                   one process holds */
    int64_t baseline;           /* the item computes a baseline: its peak, else 0 */
    int64_t implementation;     /* one rank of the implementation */
    int64_t implementation_own; /* of which the implementation's estimate */
    bool implementation_known;  /* the implementation declares an estimate */
    int64_t ranks;              /* ranks of the item's group in that process */
    int64_t harness;            /* judging and storing on the root */
    int64_t others;             /* held at the same time: cached outputs, other groups, results */
    bool planned;               /* the item runs on this job (its cp divides the ranks) */
    int64_t query_block;        /* attention level by query blocks of this many tokens over every
                                   rank (attention_stream.h): implementation is one rank's share */
} memory_total;

/* The discrimination phase (run only). */
typedef struct memory_discrimination {
    int64_t bytes;      /* the most one process holds */
    int64_t case_index; /* the case whose rerun is the largest there; −1 when none runs */
    int64_t rerun;      /* that rerun's peak */
} memory_discrimination;

/* The limit a job is checked against. */
typedef struct memory_limit {
    int64_t bytes;            /* per process */
    char source[MEMORY_TEXT]; /* where it came from, for messages */
} memory_limit;

/* --- sizes in text ------------------------------------------------------------------------ */

/* Parses "512M", "24G", "1.5GiB", "4096", ...: a decimal number and an optional unit K, M, G, T
 * or P (with or without "i" and "B", any case; multiples of 1024), or B. False for anything
 * else, for less than 1 byte, and for more than INT64_MAX bytes. */
bool memory_size_parse(const char *text, int64_t *bytes);

/* "17 B", "512.0 KiB", "41.2 GiB" into text. */
void memory_size_format(int64_t bytes, char *text, size_t size);

/* --- the memory this machine has ------------------------------------------------------------ */

/* The memory available to this process tree: the smallest of MemAvailable (/proc/meminfo), and,
 * for each cgroup (v2: memory.max − memory.current; v1: memory.limit_in_bytes −
 * memory.usage_in_bytes) from this process's own up to the root, the room left where a limit is
 * set. root prefixes every path read ("" for the real files; tests give a folder of fakes).
 * False when not even MemAvailable can be read. */
bool memory_available(const char *root, int64_t *bytes, char *source, size_t source_size);

/* The limit for one process: --max-memory when given (max_memory > 0), else memory_available(root)
 * divided, when the ranks are processes, by the node-local rank count (OMPI_COMM_WORLD_LOCAL_SIZE,
 * or MPICH's MPI_LOCALNRANKS, when set). When neither is known (no /proc/meminfo), no limit
 * (INT64_MAX, and the source says so): only sizes that overflow are refused then. */
void memory_limit_resolve(int64_t max_memory, bool ranks_are_processes, const char *root,
                          memory_limit *limit);

/* Makes the process hold what it allocates and not much more: glibc raises its mmap threshold
 * each time a large block is freed (up to 32 MiB), after which blocks below it come from
 * per-thread arenas that keep freed memory resident — measured on cases/nightly-cpu.yaml at 4
 * local ranks: 753 MiB allocated at most, 999 MiB resident; with the threshold pinned at
 * 128 KiB, 678 MiB resident, and no slower. The estimate counts what is allocated, so the
 * threshold is pinned (M_MMAP_THRESHOLD, glibc only) before a run allocates anything. */
void memory_allocator_pin(void);

/* --- estimates ------------------------------------------------------------------------------ */

/* The setting of a job run with options on implementation with kernel (NULL: its default):
 * the communicator (--comm, else mpi when started by mpirun), the rank count (--ranks, else the
 * plan's least rank count for local, the launcher's OMPI_COMM_WORLD_SIZE / PMI_SIZE for mpi),
 * store, fault. */
memory_setting memory_setting_for(const run_options *options, const run_plan *plan,
                                  const cpparity_implementation *implementation,
                                  const cpparity_attention_kernel *kernel);

/* The parts of case c at cp (cp >= 1) in dtype, with layout and algorithm, under setting. False
 * (item zeroed, what says which size) when a size does not fit int64, or the implementation's
 * estimate says so. */
bool memory_estimate_item(const cpparity_case *c, int64_t cp, cpparity_dtype dtype,
                          cpparity_layout layout, cpparity_algorithm_choice algorithm,
                          const memory_setting *setting, memory_item *item, char *what,
                          size_t what_size);

/* The totals of every item (item_count entries, the plan's order) of a job under setting, and
 * of its discrimination phase, by simulating the job's rounds (see above). Items whose cp does
 * not divide setting->ranks are not planned (totals zero). An overflow anywhere: false, with
 * *overflow_item the plan item and *overflow_what its description. CPPARITY_ERROR_RUNTIME only
 * when the simulation's own bookkeeping cannot be allocated. */
cpparity_status memory_estimate_job(const cpparity_case *const *cases, int64_t case_count,
                                    const run_plan_item *items, int64_t item_count,
                                    const memory_setting *setting, memory_total *totals,
                                    memory_discrimination *discrimination, int64_t *overflow_item,
                                    char *overflow_what, size_t overflow_size,
                                    cpparity_error *error);

/* The largest estimate of running case c alone on implementation (`cpparity run SUITE --case
 * NAME`, --comm local on its least rank count, its default kernel, default store): into *bytes,
 * and into *implementation_known whether the implementation declared its own share (false: a
 * lower bound), or false when its sizes overflow (what says which). */
bool memory_estimate_case(const cpparity_case *c, const cpparity_implementation *implementation,
                          int64_t *bytes, bool *implementation_known, char *what, size_t what_size);

/* Checks every planned item of plan, run on implementation with kernel (NULL: its default), and
 * the discrimination phase against the limit (options' --max-memory, else the machine's):
 * CPPARITY_ERROR_INPUT naming the case (file and line), the item, the estimate with its parts
 * (the implementation's own share, or that it is unknown) and the limit with its source, for the
 * largest item over the limit, or for the first item whose sizes overflow. A cp = 1 item (the
 * implementation holding the whole sequence in one rank) over the limit while the case's items at
 * cp > 1 fit is not a refusal: it is marked memory_skipped, its not_run_reason saying "cp 1 not
 * run: needs about N per process, over the limit of L (source)", and the job is estimated
 * without it. The driver calls it right after run_plan_build, before anything else is
 * allocated. */
cpparity_status memory_check_plan(run_plan *plan, const run_options *options,
                                  const cpparity_implementation *implementation,
                                  const cpparity_attention_kernel *kernel, cpparity_error *error);

#endif
