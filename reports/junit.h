/*
 * junit.h — a run's results as JUnit XML, for CI systems that show test reports (--junit).
 *
 * One <testsuite name="cpparity"> (tests, failures, errors, skipped, time, timestamp, hostname,
 * and the run's provenance as <properties>) with one <testcase> per run item:
 *   classname = "<suite file stem>.<case>"  (e.g. "ci.full-no-padding"),
 *   name      = "cp<n>-<dtype>"             (e.g. "cp2-bf16"),
 *   time      = the implementation's plus the reference's seconds for that item.
 * PASS passes (system-out names the worst tensor); FAIL has <failure message="..."> whose body
 * lists the worst failing tensors (name, rank, error, limit and how it was built, reason, worst
 * element's coordinates); ERROR has <error>; NOT RUN is <skipped message="..."/>; REFUSED
 * passes, with system-out saying that the implementation refused as the case expected.
 * Every text is XML-escaped (& < > " ' and control characters).
 */
#ifndef CPPARITY_REPORTS_JUNIT_H
#define CPPARITY_REPORTS_JUNIT_H

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results.h"

/* The most failing tensors listed in one <failure> body (the rest are counted). */
#define JUNIT_FAILING_TENSORS_LISTED 20

/* Writes results as JUnit XML to a new file at path, through a temporary file (output_file.h).
 * An existing path is refused with CPPARITY_ERROR_INPUT naming "--junit"; a write failure is
 * CPPARITY_ERROR_RUNTIME. On failure nothing is left at path. results is only read. */
cpparity_status junit_write(const run_results *results, const char *path, cpparity_error *error);

/* The same into an output_file begun by the caller (one of a set published together); nothing is
 * published. */
cpparity_status junit_write_staged(const run_results *results, const output_file *file,
                                   cpparity_error *error);

#endif
