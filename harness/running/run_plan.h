/*
 * run_plan.h — what a `cpparity run` will do: the suites loaded, the cases selected, and one
 * item per (case, dtype, cp size, algorithm, layout), baselines at cp = 1 included (the pass
 * rule needs them even when a case does not list cp 1). Every rank builds the same plan from the
 * same files.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_PLAN_H
#define CPPARITY_HARNESS_RUNNING_RUN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/case.h"
#include "distributed/models/implementation.h"
#include "harness/running/run_options.h"

#define RUN_PLAN_REASON_TEXT 256 /* bytes of a not-run reason, NUL included */
#define RUN_PLAN_MAX_RANKS 1024  /* the most ranks least_ranks proposes */

typedef struct run_plan_item {
    int64_t case_index;                  /* into run_plan.cases */
    int64_t cp;                          /* cp size */
    cpparity_dtype dtype;                /* dtype */
    cpparity_layout layout;              /* who holds what (contiguous at cp = 1) */
    cpparity_algorithm_choice algorithm; /* ulysses, ring or hybrid (ulysses at cp = 1) */
    bool is_baseline;                    /* cp == 1 */
    bool runnable;                       /* false: reported as not run with not_run_reason */
    bool memory_skipped; /* a cp = 1 item left out because it cannot fit the memory limit while
                            the case's items at cp > 1 can (memory_estimate.h memory_check_plan):
                            not run on purpose, not a failure of the job; the items at cp > 1
                            are then decided by the naive rule alone, and say so */
    int64_t query_block; /* attention level: > 0 runs it by query blocks of that many tokens,
                            spread over every rank of the job (attention_stream.h), when it does
                            not fit whole or --query-block asks (memory_check_plan); 0: whole */
    char not_run_reason[RUN_PLAN_REASON_TEXT]; /* why not, with what it would need */
    uint64_t seed;                             /* fixture seed (the case's, or --seed) */
} run_plan_item;

typedef struct run_plan {
    cpparity_suite suites[RUN_MAX_SUITES]; /* loaded suites */
    int suite_count;                       /* entries of suites */
    const cpparity_case **cases;           /* (case_count) selected cases, suite order */
    const char **case_suite;               /* (case_count) path of each case's suite */
    int64_t case_count;
    run_plan_item *items; /* (item_count) case, dtype, cp ascending */
    int64_t item_count;
    int64_t largest_cp;   /* largest cp size of the selected cases */
    int64_t least_ranks;  /* least rank count every cp size divides (their least common multiple,
                             or largest_cp when that exceeds RUN_PLAN_MAX_RANKS) */
    int64_t filtered_out; /* runs the selected cases list that --dtype, --layout and --algorithm
                             left out (0 without them) */
    char filters[96];     /* those flags as given, e.g. "--algorithm ring" ("" without them) */
} run_plan;

/* Loads the suites and selects cases (every suite file is read; input errors name file, line
 * and column). ranks = 0 leaves runnability undecided (call run_plan_set_ranks). A --case
 * pattern that matches nothing is an input error, and so are --dtype, --layout and --algorithm
 * when they leave no run at cp > 1 of cases that list some (nothing would check context
 * parallelism); the runs they leave out are counted in filtered_out. The driver then checks, before
 * anything else is allocated, every item the job will run for memory (memory_estimate.h
 * memory_check_plan, which knows the implementation under test): a case whose sizes overflow, or
 * whose estimated peak is over the limit, is an input error giving the estimate and the limit. */
cpparity_status run_plan_build(run_plan *plan, const run_options *options, cpparity_error *error);

/* A suite file's bytes, read by one rank and sent to the others (ranks on other nodes may not see
 * the file: `mpirun` over several hosts without a shared file system). */
typedef struct run_suite_text {
    const char *path; /* as given, for messages (the suite's path) */
    const char *text; /* its bytes */
    size_t length;
} run_suite_text;

/* The suite paths run_plan_build reads for options (the cases/ci.yaml default when none is
 * given), into *paths and *count; none with --random. */
void run_plan_suite_paths(const run_options *options, const char *const **paths, int *count);

/* run_plan_build from the suites' bytes (count of them, in the order of run_plan_suite_paths)
 * instead of the files. */
cpparity_status run_plan_build_texts(run_plan *plan, const run_options *options,
                                     const run_suite_text *texts, int count, cpparity_error *error);

/* The most items run_plan_case_items lays out for one case. */
#define RUN_PLAN_CASE_ITEMS                                                                        \
    ((CPPARITY_MAX_CP_SIZES * CPPARITY_LAYOUT_COUNT * CPPARITY_MAX_ALGORITHMS + 1) *               \
     CPPARITY_DTYPE_COUNT)

/* Lays out case c's items (case_index into the plan's cases) as run_plan_build does: for each
 * dtype options select, a baseline at cp = 1 (unless the case lists cp 1, or must be refused)
 * and each cp size ascending; each cp > 1 once per algorithm and layout of the case, in the
 * case's order (cp = 1 once: contiguous, ulysses, the same computation under every one; a
 * hybrid U×R only at cp = U·R). items
 * holds RUN_PLAN_CASE_ITEMS; returns how many were set. */
int64_t run_plan_case_items(const cpparity_case *c, int64_t case_index, const run_options *options,
                            run_plan_item *items);

/* The least rank count every item's cp divides (their least common multiple), or the largest cp
 * when that exceeds RUN_PLAN_MAX_RANKS; 1 for no items. */
int64_t run_plan_least_ranks(const run_plan_item *items, int64_t count);

/* Marks items runnable on a job of `ranks` ranks running implementation: cp must divide ranks
 * and the implementation must have the item's dtype; the others get their not-run reason. */
void run_plan_set_ranks(run_plan *plan, int ranks, const cpparity_implementation *implementation);

void run_plan_free(run_plan *plan);

/* Whether `cpparity run` has the job's `ranks` compute case c's float64 reference together
 * before its items (run.c spread_references, reference/team.h): a model-level case (not one
 * expected to be refused) on more than one rank, when the ranks are processes (MPI, NCCL: each
 * then holds O(S/R) of the sequence, on its own cores). Local ranks share one process: spread
 * there, each would hold the weights and their gradients and the whole-shaped attention operands
 * again, for no time won (the home rank's reference already has the process's cores), so they
 * keep computing it on the home rank. The memory estimate follows it. */
bool run_spreads_reference(const cpparity_case *c, int64_t ranks, bool ranks_are_processes);

#endif
