/*
 * selftest.h — `cpparity selftest` as a job on a communicator (docs/command-line.md): the
 * suites run clean (every case must pass), then once per fault planted in the implementation
 * under test (common/fault.h; each must be caught by at least SELFTEST_MINIMUM_CASES
 * cases), then clean again under seeds 1..N (any failure is a false alarm). The float64
 * reference of a (case, seed) is computed once and reused by every fault pass. Rank 0 prints the
 * detection matrix and writes it, with the clean run, into the results file.
 */
#ifndef CPPARITY_HARNESS_RUNNING_SELFTEST_H
#define CPPARITY_HARNESS_RUNNING_SELFTEST_H

#include "distributed/comm/comm.h"
#include "harness/running/run.h"

/* Runs the self-test on world (every rank calls it with the same plan, options and target;
 * target->fault is ignored). Returns the exit code, identical on every rank: 0 when every clean
 * case passed, every applicable fault was caught by enough cases and no seed raised a false
 * alarm; 1 when not; 2 or 3 when it could not be decided (bad input, a broken job). */
int selftest_job(cpparity_comm *world, run_plan *plan, const run_options *options,
                 const run_target *target, const run_environment *environment);

#endif
