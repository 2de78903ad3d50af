/*
 * run_outputs.h — the files a `cpparity run` can write, in one table: the flag that names each,
 * its line in `cpparity run --help`, and the writer. The option parser, the help text, the
 * check that no output exists before anything runs, and the end of the run all iterate this
 * table; adding an output (an HTML report, say) is one enum value and one table row.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_OUTPUTS_H
#define CPPARITY_HARNESS_RUNNING_RUN_OUTPUTS_H

#include <stddef.h>

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results.h"

typedef enum run_output {
    RUN_OUTPUT_RESULTS = 0,  /* --out: the HDF5 results file (always written) */
    RUN_OUTPUT_JUNIT = 1,    /* --junit: JUnit XML */
    RUN_OUTPUT_MARKDOWN = 2, /* --markdown: Markdown summary */
} run_output;
#define RUN_OUTPUT_COUNT 3

typedef struct run_output_writer {
    const char *flag;     /* "--out" */
    const char *argument; /* "FILE.h5", for the help text */
    const char *usage;    /* what it is, for the help text */
    const char *what;     /* "results file", for messages */
    /* Writes results into the file's temporary (output_file.h); the run publishes every output
     * together once all are written (output_set_publish), or none. */
    cpparity_status (*write)(const run_results *results, const output_file *file,
                             cpparity_error *error);
} run_output_writer;

/* Indexed by run_output. */
extern const run_output_writer run_output_writers[RUN_OUTPUT_COUNT];

/* The default --out, into path, creating results/: results/<prefix><UTC time>Z-<host>-<pid>.h5,
 * e.g. results/judge-20261204T213457.123456Z-node7-4242.h5. Never another run's: a process is
 * unique by its host and process id while it runs, and a run started later on the same host
 * with the same process id starts a microsecond later at least; the fixed-width time first makes
 * the names sort by start time, whichever host or prefix. */
void run_outputs_default_path(char *path, size_t size, const char *prefix);

/* Before anything runs: every output of paths (indexed by run_output, NULL = not written) is
 * checked (output_file_check: an existing file is refused, nothing is ever overwritten, and so is
 * a folder that is missing or takes no new file), then claimed (output_file_claim), so a second
 * command writing the same path stops now, not after its compute. Release with
 * run_outputs_release, whatever happened. */
cpparity_status run_outputs_claim(const char *const paths[RUN_OUTPUT_COUNT],
                                  output_claim claims[RUN_OUTPUT_COUNT], cpparity_error *error);

void run_outputs_release(output_claim claims[RUN_OUTPUT_COUNT]);

/* Every output of paths written from results, each to its temporary file, then published
 * together; when one fails none is published and no temporary file is left. */
cpparity_status run_outputs_write(const run_results *results,
                                  const char *const paths[RUN_OUTPUT_COUNT], cpparity_error *error);

#endif
