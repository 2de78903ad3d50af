/*
 * judge_provenance.h — the provenance of a `cpparity judge` results file, rank dumps and kernel
 * dumps alike: this cpparity's version and commit, the host, the command line, comm "judge",
 * device "framework", the implementation as "FRAMEWORK VERSION" (never a stray space), the
 * kernel, no fault, the ranks and --store; started now (run_provenance_start).
 */
#ifndef CPPARITY_HARNESS_CLI_JUDGE_PROVENANCE_H
#define CPPARITY_HARNESS_CLI_JUDGE_PROVENANCE_H

#include "results_model/results.h"

void judge_provenance(run_provenance *p, int argc, char **argv, run_store store,
                      const char *framework, const char *framework_version, const char *kernel,
                      int ranks);

#endif
