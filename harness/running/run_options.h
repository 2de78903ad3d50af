/*
 * run_options.h — what a `cpparity run` was asked to do (docs/command-line.md), as the command
 * line parser (harness/cli/run_arguments.h) fills it and the run reads it.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_OPTIONS_H
#define CPPARITY_HARNESS_RUNNING_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"
#include "results_model/results.h"
#include "common/fault.h"
#include "harness/running/run_outputs.h"

#define RUN_MAX_SUITES 32
#define RUN_MAX_PATTERNS 32

/* The deadline of every collective unless --timeout says otherwise (waiting for a rank that is
 * computing does not count: comm.h). */
#define RUN_DEFAULT_TIMEOUT_SECONDS 300.0

typedef struct run_options {
    const char *suites[RUN_MAX_SUITES];     /* suite files; the default suite when none */
    int suite_count;                        /* entries of suites */
    const char *patterns[RUN_MAX_PATTERNS]; /* --case globs; every case when none */
    int pattern_count;                      /* entries of patterns */
    const char *outputs[RUN_OUTPUT_COUNT];  /* path per output (run_outputs.h), NULL = not asked
                                               for (the results file then gets its default) */
    const char *device;                     /* "cpu" (default) or "cuda" */
    const char *comm;                       /* a backend of comm_launch.h; NULL = detect */
    int ranks;                              /* --ranks (local only); 0 = choose */
    bool dtype_set;                         /* --dtype given */
    cpparity_dtype dtype;                   /* only this dtype when dtype_set */
    bool layout_set;                        /* --layout given */
    cpparity_layout layout;                 /* only items of this layout (cp 1 has every one) */
    bool algorithm_set;                     /* --algorithm given */
    cpparity_algorithm algorithm;           /* only items of this kind of algorithm (cp 1 has
                                               every one) */
    bool seed_set;                          /* --seed given */
    uint64_t seed;                          /* overrides every case's seed when seed_set */
    bool fresh;           /* --fresh: attention-level cases draw new inputs (never with seed_set) */
    int64_t random_cases; /* --random N: N random attention-level cases from seed instead of
                             suites (harness/suite/random_cases.h); 0 = none */
    const char *kernel;   /* --kernel NAME; NULL = the implementation's */
    double timeout_seconds;                      /* --timeout, default
                                                    RUN_DEFAULT_TIMEOUT_SECONDS */
    run_store store;                             /* --store, default failures */
    bool allow_not_run;                          /* --allow-not-run: NOT RUN items do not fail */
    bool help;                                   /* --help was given */
    cpparity_fault fault;                        /* run --inject: planted fault, NONE by default */
    int seeds;                                   /* selftest --seeds N: clean reruns (default 0) */
    cpparity_fault faults[CPPARITY_FAULT_COUNT]; /* selftest --fault: only these (in order) */
    int fault_count;                             /* entries of faults; 0 = every fault */
    bool selftest;               /* parsed for `cpparity selftest` (every fault planted in turn) */
    const char *reference_cache; /* --reference-cache DIR: reference outputs kept on disk;
                                    NULL for none */
    int threads;         /* --threads: the float64 reference's threads per process; 0 = cores
                            divided by the ranks on this machine */
    int64_t max_memory;  /* --max-memory in bytes, per process; 0 = the memory available here
                            (harness/running/memory_estimate.h) */
    int64_t query_block; /* --query-block N: attention-level items by query blocks of N tokens,
                            spread over the ranks (attention_stream.h); 0 = only those that do
                            not fit whole, by blocks of ATTENTION_STREAM_BLOCK */
} run_options;

#endif
