/*
 * run.h — one `cpparity run` job on a communicator: every rank plans the same items, items run
 * cp size by cp size on groups of cp ranks (several groups at once when the job is larger than
 * cp), finished items travel to rank 0, which prints them, runs the discrimination check,
 * writes every output of run_outputs.h that was asked for and chooses the exit code that every
 * rank then returns.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_H
#define CPPARITY_HARNESS_RUNNING_RUN_H

#include "distributed/comm/comm.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/run_item.h"
#include "harness/running/run_options.h"
#include "harness/running/run_plan.h"

typedef struct run_environment {
    const char *version;      /* cpparity version */
    const char *git_commit;   /* commit built */
    const char *compiler;     /* compiler that built cpparity, with its version */
    const char *libraries;    /* library versions, one line */
    const char *command_line; /* argv joined */
    const char *out_path;     /* the results file to write (resolved default) */
} run_environment;

/* One pass over the plan's runnable items on world (every rank calls it alike): first, on more
 * than one rank, every case's float64 reference computed by all the ranks together
 * (reference/team.h; run_spreads_reference says which cases) and kept by the case's home rank;
 * then cp size by cp size, the cp = 1 items' errors shared as the CP-only check's baselines,
 * finished items stored at their plan index in results on rank 0 (its items are begun first when
 * results has none), printed as they arrive when print is set. The float64 reference comes from
 * cache (kept across passes: it depends on the case and seed only). Only a broken communicator or
 * no memory returns an error; item failures are the items' outcomes. No outputs are written. */
cpparity_status run_pass(cpparity_comm *world, run_plan *plan, const run_options *options,
                         const run_target *target, reference_cache *cache, bool print,
                         run_results *results, cpparity_error *error);

/* Counts the items' outcomes into results' passed, failed, refused, not_run and errors. */
void run_results_count(run_results *results);

/* The exit code of docs/command-line.md: the worst item decides (1 a parity failure, 2 bad input
 * or an unexpected refusal, 3 a runtime failure); an item that could not run here (NOT RUN) is
 * an environment failure (3) unless allow_not_run (--allow-not-run). */
int run_results_exit_code(const run_results *results, bool allow_not_run);

/* Fills the provenance of a job (start time now: run_provenance_start) and, later, its end time
 * (run_provenance_finish). */
void run_provenance_fill(run_provenance *provenance, const cpparity_comm *world,
                         const run_options *options, const run_target *target,
                         const run_environment *environment);
void run_provenance_start(run_provenance *provenance);
void run_provenance_finish(run_provenance *provenance);

/* Runs the job on world (every rank calls it with the same plan, options and target). Returns
 * the exit code of docs/command-line.md, identical on every rank. */
int run_job(cpparity_comm *world, run_plan *plan, const run_options *options,
            const run_target *target, const run_environment *environment);

/* Says on stdout how the reference cache on disk served this rank (--reference-cache: reused,
 * computed and stored, not trusted) and on stderr why an entry was not trusted; nothing without
 * a directory or when it was not used. */
void run_report_reference_cache(const cpparity_comm *world, const reference_cache *cache);

#endif
