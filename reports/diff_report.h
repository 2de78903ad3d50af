/*
 * diff_report.h — a results_diff (results_model/results_diff.h) for people: plain text for
 * the console, and Markdown for a CI job summary (`cpparity diff --markdown FILE`). Regressions
 * come first, then fixed items, items still failing, other changes and items in one run only;
 * each line names the case, dtype, cp, and (for grown errors) the tensor, rank, both errors, the
 * factor and the limit.
 */
#ifndef CPPARITY_REPORTS_DIFF_REPORT_H
#define CPPARITY_REPORTS_DIFF_REPORT_H

#include <stdio.h>

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results_diff.h"

void diff_report_console(FILE *stream, const results_diff *diff, const read_results *old_run,
                         const read_results *new_run);

/* The Markdown summary as a new file at path (never over an existing one; output_file.h). */
cpparity_status diff_report_markdown(const char *path, const results_diff *diff,
                                     const read_results *old_run, const read_results *new_run,
                                     cpparity_error *error);

#endif
