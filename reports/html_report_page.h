/*
 * html_report_page.h — inside html_report.c: the page's model, shared by the HTML it writes
 * (html_report.c) and the JSON data of its plots (html_report_charts.c). Not a public interface.
 *
 * Items are grouped by case; every plot the HTML places (a <canvas id="chart-K">) is listed in
 * charts, in page order, and the JSON block describes charts[K] for the canvas of the same index.
 * The JSON block also holds every compared tensor of the run (html_report_tensors.c), from which
 * the page's script draws an item's table of tensors when it is opened, and the error-against-
 * limit plots: the page never writes those rows as HTML, so it stays small for a large suite.
 */
#ifndef CPPARITY_REPORTS_HTML_REPORT_PAGE_H
#define CPPARITY_REPORTS_HTML_REPORT_PAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "reports/html_report.h"

typedef enum html_chart_kind {
    HTML_CHART_TREND,   /* each case's worst ratio over the runs */
    HTML_CHART_LIMITS,  /* a case's tensors: error against limit, log-log */
    HTML_CHART_PROFILE, /* a case's logits error along the sequence, one item at a time */
    HTML_CHART_LAYERS,  /* a case's gradient error / limit per layer */
} html_chart_kind;

typedef struct html_chart {
    html_chart_kind kind;
    int64_t case_index; /* into html_page.cases; -1 for the trend */
} html_chart;

typedef struct html_case {
    const char *name;
    const char *suite;       /* the suite file it came from */
    int64_t case_index;      /* into read_results.cases, -1 when the file has no layouts */
    const read_case *layout; /* its rows and documents, NULL when the file has none */
    int64_t *items;          /* (item_count) indices into the reported run's items, file order */
    int64_t item_count;
} html_case;

typedef struct html_tensor_data html_tensor_data; /* html_report_tensors.c */

typedef struct html_page {
    const html_report_input *input;
    const read_results *run; /* the reported run: input->runs[run_count - 1] */
    html_case *cases;        /* (case_count) in the run's order */
    int64_t case_count;
    html_chart *charts; /* (chart_count) in page order */
    int64_t chart_count;
    html_tensor_data *tensors; /* the tables of the tensor data (html_tensor_data_build) */
} html_page;

/* The limit that decided a tensor of the file (results_deciding_limit of its error and both
 * rules' limits), with its rule and the error / limit ratio the item's worst ratio is computed
 * from: infinite for a positive error over a zero limit, NaN for a NaN error. */
deciding_limit html_tensor_deciding(const metrics_row *row);

/* What a case's plots would show: tensors compared, logits profiles, gradients. */
bool html_case_has_tensors(const html_page *page, const html_case *c);
bool html_case_has_profiles(const html_page *page, const html_case *c);
bool html_case_has_gradients(const html_page *page, const html_case *c);

/* "charts":[...] of the JSON block, describing page->charts in order. */
void html_put_chart_data(FILE *out, const html_page *page);

/* Indexes every compared tensor of page->run into page->tensors (names, rules, tolerances and
 * reasons, each once): CPPARITY_ERROR_RUNTIME when memory fails. */
cpparity_status html_tensor_data_build(html_page *page, cpparity_error *error);
void html_tensor_data_free(html_page *page);

/* "names":[...],"rules":[...],"tolerances":[...],"reasons":[...],"items":[...] of the JSON block:
 * every compared tensor of every item (the layout is described in html_report_tensors.c). */
void html_put_tensor_data(FILE *out, const html_page *page);

/* A number as JSON with 3 significant digits and the shortest exponent ("1.15e-7"), null for NaN,
 * "inf" or "-inf" for infinities. */
void html_put_short_number(FILE *out, double value);

/* The tensor of an item that gives its worst error / limit (a NaN error above all, the first of
 * equals), NULL when it compared none. */
const metrics_row *html_worst_tensor(const read_item *item);

#endif
