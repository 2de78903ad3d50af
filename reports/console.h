/*
 * console.h — what `cpparity run` prints for people (in the manner of nccl-tests): a `#`
 * preamble, one fixed-width line per case and cp size, where each failure is, and a footer with
 * the counts. Progress lines while long cases run go to stderr, on a terminal only.
 */
#ifndef CPPARITY_REPORTS_CONSOLE_H
#define CPPARITY_REPORTS_CONSOLE_H

#include <stdbool.h>
#include <stdio.h>

#include "results_model/results.h"

void console_preamble(FILE *stream, const run_provenance *provenance, int64_t cases, int64_t items);
void console_table_header(FILE *stream);
/* One line for the item, then (for failures and errors) where it failed. */
void console_item(FILE *stream, const run_item *item);
void console_discrimination(FILE *stream, const run_results *results);
/* The counts, the times, where the results are, and OK or FAILED (NOT RUN items fail the run
 * unless allow_not_run). results_path NULL: the outputs could not be written, which fails the
 * run. */
void console_footer(FILE *stream, const run_results *results, const char *results_path,
                    bool allow_not_run);
/* "\r  running CASE cp N ..." on stderr when it is a terminal. */
void console_progress(const char *case_name, int64_t cp, const char *dtype);
/* Erases the progress line (before the table continues). */
void console_progress_clear(void);

#endif
