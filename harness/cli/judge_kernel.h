/*
 * judge_kernel.h — `cpparity judge EXPORT.h5 KERNEL_DUMP.h5` for an attention-level export
 * (docs/dump-format.md, "The kernel dump"): every case of the export rebuilt from its suite, the
 * dump read (harness/storage/kernel_dump.h) and replayed as a kernel (harness/running/
 * kernel_replay.h) through attention_item_run_observed, one item per case, as `run --kernel`
 * judges a plugin on the same cases with the same inputs. The outputs and exit codes are run's.
 */
#ifndef CPPARITY_HARNESS_CLI_JUDGE_KERNEL_H
#define CPPARITY_HARNESS_CLI_JUDGE_KERNEL_H

#include "harness/running/run_outputs.h"
#include "harness/storage/attention_export_reader.h"
#include "results_model/results.h"

typedef struct judge_kernel_request {
    const char *export_path;
    const attention_export_reading *reading; /* the export, read */
    const char *dump_path;
    const char *const *paths; /* [RUN_OUTPUT_COUNT] where the outputs go (claimed) */
    run_store store;
    int argc;
    char **argv;
} judge_kernel_request;

/* Judges the dump and writes the outputs; returns the exit code (docs/command-line.md). */
int judge_kernel(const judge_kernel_request *request);

#endif
