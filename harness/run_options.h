/*
 * run_options.h — the options of `cpparity run` (../shared/spec/interface.md), parsed and
 * checked. Every bad flag is an input error (exit 2) naming the flag.
 */
#ifndef CPPARITY_HARNESS_RUN_OPTIONS_H
#define CPPARITY_HARNESS_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "harness/case.h"

#define RUN_MAX_SUITES 32
#define RUN_MAX_PATTERNS 32

typedef enum run_store {
    RUN_STORE_METRICS = 0,
    RUN_STORE_FAILURES = 1,
    RUN_STORE_ALL = 2
} run_store;

typedef struct run_options {
    const char *suites[RUN_MAX_SUITES]; /* suite files; the default suite when none */
    int suite_count;
    const char *patterns[RUN_MAX_PATTERNS]; /* --case globs; every case when none */
    int pattern_count;
    const char *out;        /* --out, or NULL for results/<UTC timestamp>.h5 */
    const char *junit;      /* --junit or NULL */
    const char *markdown;   /* --markdown or NULL */
    const char *device;     /* "cpu" (default) or "cuda" */
    const char *comm;       /* "mpi", "local" or "nccl"; NULL = choose */
    int ranks;              /* --ranks (local only); 0 = choose */
    bool dtype_set;         /* --dtype given */
    cpparity_dtype dtype;   /* only this dtype when dtype_set */
    bool seed_set;          /* --seed given */
    uint64_t seed;          /* overrides every case's seed when seed_set */
    const char *kernel;     /* --kernel NAME (only "cpu-f32" on CPU) */
    double timeout_seconds; /* --timeout, default 300 */
    run_store store;        /* --store, default failures */
    bool help;              /* --help was given */
} run_options;

/* Parses argv (argv[0] = "run"). CPPARITY_ERROR_INPUT with the flag named on a bad option. */
cpparity_status run_options_parse(run_options *options, int argc, char **argv,
                                  cpparity_error *error);

/* The --help text. */
const char *run_options_usage(void);

/* "metrics", "failures", "all". */
const char *run_store_name(run_store store);

#endif
