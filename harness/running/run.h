/*
 * run.h — one `cpparity run` job on a communicator: every rank plans the same items, items run
 * cp size by cp size on groups of cp ranks (several groups at once when the job is larger than
 * cp), finished items travel to rank 0, which prints them, runs the discrimination check,
 * writes every output of run_outputs.h that was asked for and chooses the exit code that every
 * rank then returns.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_H
#define CPPARITY_HARNESS_RUNNING_RUN_H

#include "distributed/comm.h"
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

/* Runs the job on world (every rank calls it with the same plan, options and target). Returns
 * the exit code of docs/command-line.md, identical on every rank. */
int run_job(cpparity_comm *world, run_plan *plan, const run_options *options,
            const run_target *target, const run_environment *environment);

#endif
