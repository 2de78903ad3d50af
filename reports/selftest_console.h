/*
 * selftest_console.h — what `cpparity selftest` prints (results_model/selftest_matrix.h): a
 * preamble, one line for the clean run, one per fault as its pass ends, one per seed, then the
 * detection matrix (fault × case) and the verdict.
 */
#ifndef CPPARITY_REPORTS_SELFTEST_CONSOLE_H
#define CPPARITY_REPORTS_SELFTEST_CONSOLE_H

#include <stdio.h>

#include "results_model/results.h"
#include "results_model/selftest_matrix.h"

void selftest_console_preamble(FILE *stream, const run_provenance *provenance,
                               const selftest_matrix *matrix);

/* The clean run: counts, its margin, and every item that did not pass. */
void selftest_console_clean(FILE *stream, const selftest_matrix *matrix, const run_results *clean,
                            double seconds);

/* Fault row f after its pass (or why it was not planted). */
void selftest_console_fault(FILE *stream, const selftest_matrix *matrix, int64_t f);

/* Seed row s after its pass, with every item that did not pass. */
void selftest_console_seed(FILE *stream, const selftest_matrix *matrix, int64_t s,
                           const run_results *results);

/* The matrix, the smallest detection ratio and the verdict. */
void selftest_console_summary(FILE *stream, const selftest_matrix *matrix);

#endif
