/*
 * markdown.h — a run's results as a GitHub-flavoured Markdown summary, for CI job summaries
 * (--markdown).
 *
 * A header line with the verdict and the outcome counts, a provenance line, then one table row
 * per run item: | case | cp | dtype | outcome | worst tensor | error | limit | ratio | (error and
 * limit of the item's worst tensor, ratio = error / limit). Below it, one section per FAIL or
 * ERROR item with its message and, for FAIL, a table of its failing tensors (rank, error, limit,
 * the tolerance with where each part came from, worst coordinates, reason), worst first; then
 * the reasons of NOT RUN items and the mask features cases cannot detect (discrimination).
 * '|' in cells is escaped as "\|", '<' as "&lt;" and line breaks become spaces.
 */
#ifndef CPPARITY_REPORTS_MARKDOWN_H
#define CPPARITY_REPORTS_MARKDOWN_H

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results.h"

/* The most failing tensors listed for one item (the rest are counted). */
#define MARKDOWN_FAILING_TENSORS_LISTED 50

/* Writes the summary to a new file at path, through a temporary file (output_file.h). An
 * existing path is refused with CPPARITY_ERROR_INPUT naming "--markdown"; a write failure is
 * CPPARITY_ERROR_RUNTIME. On failure nothing is left at path. results is only read. */
cpparity_status markdown_write(const run_results *results, const char *path, cpparity_error *error);

/* The same into an output_file begun by the caller (one of a set published together); nothing is
 * published. */
cpparity_status markdown_write_staged(const run_results *results, const output_file *file,
                                      cpparity_error *error);

#endif
