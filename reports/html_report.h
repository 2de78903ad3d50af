/*
 * html_report.h — a run for people, as one self-contained HTML page (`cpparity report`):
 * provenance; a case × cp grid coloured by outcome and by error-to-limit ratio; failures and
 * what changed since a baseline; per case every compared tensor with its error, limit, the rule
 * and origin of its tolerance, refusals and NOT RUN items with their messages; and plots drawn
 * by Chart.js (inlined, so the page opens offline): error versus limit per tensor, the logits
 * error along the sequence per rank (rank boundaries, padding and document starts marked),
 * gradient error per layer, and with several runs the trend of each case's worst ratio.
 *
 * Every text from a results file is escaped (html_escape.h). The data of the plots and of every
 * compared tensor is one JSON block, from which the page's script draws the plots and, when an
 * item is opened, its table of tensors: the page grows with the items, not with their tensors.
 * The script sets data-report="rendered" on <html> once every plot is drawn, or "error" with the
 * messages in #render-errors (what tests/browser_report.sh and browser_report_suite.sh check).
 */
#ifndef CPPARITY_REPORTS_HTML_REPORT_H
#define CPPARITY_REPORTS_HTML_REPORT_H

#include <stdint.h>

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results_diff.h"
#include "results_model/results_reader.h"

typedef struct html_report_input {
    const read_results *const *runs; /* (run_count ≥ 1) oldest first: the trend; the last one
                                        is the run the page reports */
    int64_t run_count;
    const results_diff *changes;      /* the reported run against changes_from, or NULL */
    const read_results *changes_from; /* the run it was compared with (a baseline) */
    const char *chart_library;        /* Chart.js's source, inlined (html_chart_library.h) */
    const char *chart_library_source; /* where it was read from, named in the page */
} html_report_input;

/* Writes the page into file's temporary (output_file_write_text): CPPARITY_ERROR_RUNTIME when
 * memory or the disk fails. */
cpparity_status html_report_write(const output_file *file, const html_report_input *input,
                                  cpparity_error *error);

#endif
