/* html_report.c — a run as one self-contained HTML page (see html_report.h). */
#include "reports/html_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/html_escape.h"
#include "reports/html_report_assets.h"
#include "reports/html_report_page.h"

/* Rows of a case's layout listed in its heading; the rest are counted. */
#define LAYOUT_ROWS_SHOWN 8
/* Changes since the baseline listed open; a longer list is folded (the grid marks them). */
#define CHANGES_SHOWN_OPEN 20

static bool is_failure(const read_item *item) {
    return strcmp(item->outcome, "FAIL") == 0 || strcmp(item->outcome, "ERROR") == 0;
}

/* "pass", "fail", "refused", "not-run", "error": an outcome as a CSS class. */
static const char *outcome_class(const char *outcome) {
    static const char *const names[][2] = {{"PASS", "pass"},
                                           {"FAIL", "fail"},
                                           {"REFUSED", "refused"},
                                           {"NOT RUN", "not-run"},
                                           {"NOT CLAIMED", "not-claimed"},
                                           {"ERROR", "error"}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if (strcmp(outcome, names[k][0]) == 0) {
            return names[k][1];
        }
    }
    return "error";
}

/* A number for people: 3 significant digits, "NaN" and "inf" spelled out. */
static void put_number(FILE *out, double value) {
    if (isnan(value)) {
        fputs("NaN", out);
    } else if (isinf(value)) {
        fputs(value > 0 ? "inf" : "-inf", out);
    } else {
        fprintf(out, "%.3g", value);
    }
}

/* ---- the page's model ------------------------------------------------------------------------ */

static bool same_case(const read_results *run, const html_case *c, const read_item *item) {
    const bool indexed =
        run->cases != NULL && item->case_index >= 0 && item->case_index < run->case_count;
    if (indexed || c->case_index >= 0) {
        return indexed && c->case_index == item->case_index;
    }
    return strcmp(c->name, item->case_name) == 0 && strcmp(c->suite, item->suite) == 0;
}

static void page_free(html_page *page) {
    for (int64_t c = 0; c < page->case_count; c++) {
        free(page->cases[c].items);
    }
    free(page->cases);
    free(page->charts);
    html_tensor_data_free(page);
    memset(page, 0, sizeof *page);
}

/* Groups the reported run's items by case and lists the plots in page order. */
static cpparity_status page_build(html_page *page, const html_report_input *input,
                                  cpparity_error *error) {
    memset(page, 0, sizeof *page);
    page->input = input;
    page->run = input->runs[input->run_count - 1];
    const read_results *run = page->run;
    /* At most one case per item, 3 plots per case and the trend. */
    page->cases = calloc((size_t)run->item_count + 1, sizeof *page->cases);
    page->charts = calloc(3 * (size_t)run->item_count + 1, sizeof *page->charts);
    if (page->cases == NULL || page->charts == NULL) {
        page_free(page);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory for the report");
    }
    for (int64_t i = 0; i < run->item_count; i++) {
        const read_item *item = &run->items[i];
        html_case *c = NULL;
        for (int64_t k = 0; k < page->case_count && c == NULL; k++) {
            c = same_case(run, &page->cases[k], item) ? &page->cases[k] : NULL;
        }
        if (c == NULL) {
            c = &page->cases[page->case_count++];
            const bool indexed =
                run->cases != NULL && item->case_index >= 0 && item->case_index < run->case_count;
            c->name = item->case_name;
            c->suite = item->suite;
            c->case_index = indexed ? item->case_index : -1;
            c->layout = indexed ? &run->cases[item->case_index] : NULL;
            c->items = calloc((size_t)run->item_count, sizeof *c->items);
            if (c->items == NULL) {
                page_free(page);
                return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                          "out of memory for the report");
            }
        }
        c->items[c->item_count++] = i;
    }
    const cpparity_status status = html_tensor_data_build(page, error);
    if (status != CPPARITY_OK) {
        page_free(page);
        return status;
    }
    if (input->run_count > 1) {
        page->charts[page->chart_count++] = (html_chart){HTML_CHART_TREND, -1};
    }
    for (int64_t k = 0; k < page->case_count; k++) {
        if (html_case_has_tensors(page, &page->cases[k])) {
            page->charts[page->chart_count++] = (html_chart){HTML_CHART_LIMITS, k};
        }
        if (html_case_has_profiles(page, &page->cases[k])) {
            page->charts[page->chart_count++] = (html_chart){HTML_CHART_PROFILE, k};
        }
        if (html_case_has_gradients(page, &page->cases[k])) {
            page->charts[page->chart_count++] = (html_chart){HTML_CHART_LAYERS, k};
        }
    }
    return CPPARITY_OK;
}

/* The index in page->charts of a case's plot of a kind, or -1. */
static int64_t chart_index(const html_page *page, html_chart_kind kind, int64_t case_index) {
    for (int64_t k = 0; k < page->chart_count; k++) {
        if (page->charts[k].kind == kind && page->charts[k].case_index == case_index) {
            return k;
        }
    }
    return -1;
}

/* ---- the sections ---------------------------------------------------------------------------- */

typedef struct outcome_counts {
    int64_t passed, failed, refused, not_run, errors, not_claimed;
} outcome_counts;

static outcome_counts count_outcomes(const read_results *run) {
    outcome_counts counts = {0};
    for (int64_t i = 0; i < run->item_count; i++) {
        const char *outcome = run->items[i].outcome;
        counts.passed += strcmp(outcome, "PASS") == 0;
        counts.failed += strcmp(outcome, "FAIL") == 0;
        counts.refused += strcmp(outcome, "REFUSED") == 0;
        counts.not_run += strcmp(outcome, "NOT RUN") == 0 && !run->items[i].by_choice;
        counts.errors += strcmp(outcome, "ERROR") == 0;
        counts.not_claimed += strcmp(outcome, "NOT CLAIMED") == 0;
    }
    return counts;
}

/* "FAILED", "INCOMPLETE" (items not run) or "PASSED". */
static const char *verdict(const outcome_counts *counts) {
    if (counts->failed + counts->errors > 0) {
        return "FAILED";
    }
    return counts->not_run > 0 ? "INCOMPLETE" : "PASSED";
}

static void put_head(FILE *out, const html_page *page, const outcome_counts *counts) {
    const read_results *run = page->run;
    fprintf(out,
            "<!DOCTYPE html>\n<html lang=\"en\" data-report=\"loading\" "
            "data-charts-expected=\"%" PRId64 "\">\n<head>\n<meta charset=\"utf-8\">\n",
            page->chart_count);
    fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", out);
    fprintf(out, "cpparity %s: ", verdict(counts));
    html_put_text(out, run->provenance.start_time);
    fputs(" (", out);
    html_put_text(out, run->path);
    fputs(")</title>\n<style>\n", out);
    fputs(html_report_style, out);
    /* Errors anywhere (the library, the page's script, the console) are listed in the page
     * (html_report.js) and mark it. */
    fputs("</style>\n<script>\nwindow.reportErrors = [];\n"
          "window.addEventListener('error', function (event) {\n"
          "  window.reportErrors.push(String(event.message || event.error || event));\n"
          "  document.documentElement.setAttribute('data-report', 'error');\n});\n"
          "(function (original) {\n  console.error = function () {\n"
          "    window.reportErrors.push('console.error: ' + "
          "Array.prototype.join.call(arguments, ' '));\n"
          "    document.documentElement.setAttribute('data-report', 'error');\n"
          "    return original.apply(console, arguments);\n  };\n})(console.error);\n"
          "</script>\n</head>\n",
          out);
}

static void put_provenance_row(FILE *out, const char *name, const char *value) {
    fprintf(out, "<tr><th>%s</th><td>", name);
    html_put_text(out, value);
    fputs("</td></tr>\n", out);
}

static void put_header(FILE *out, const html_page *page, const outcome_counts *counts) {
    const read_results *run = page->run;
    const run_provenance *p = &run->provenance;
    fprintf(out,
            "<header>\n<h1>cpparity report <span class=\"verdict %s\" id=\"verdict\">%s</span>"
            "</h1>\n",
            strcmp(verdict(counts), "PASSED") == 0 ? "pass" : "fail", verdict(counts));
    const struct {
        const char *class_name, *words;
        int64_t count;
    } chips[] = {{"pass", "passed", counts->passed},
                 {"fail", "failed", counts->failed},
                 {"refused", "refused", counts->refused},
                 {"not-run", "not run", counts->not_run},
                 {"error", "errors", counts->errors},
                 {"not-claimed", "not claimed", counts->not_claimed}};
    fputs("<p class=\"counts\" id=\"counts\">", out);
    for (size_t k = 0; k < sizeof chips / sizeof *chips; k++) { /* a zero is never alarming */
        if (strcmp(chips[k].class_name, "not-claimed") == 0 && chips[k].count == 0) {
            continue; /* only kernels that declare a lack have them */
        }
        fprintf(out, "<span class=\"chip %s\">%" PRId64 " %s</span> ",
                chips[k].count > 0 ? chips[k].class_name : "zero", chips[k].count, chips[k].words);
    }
    fprintf(out, "of %" PRId64 " items</p>\n", run->item_count);
    if (p->fault[0] != '\0' && strcmp(p->fault, "none") != 0) {
        fputs("<p class=\"fault\" id=\"fault\">FAULT INJECTED: <b>", out);
        html_put_text(out, p->fault);
        fputs("</b> was planted in the implementation under test on purpose "
              "(<code>--inject</code>): failures are expected.</p>\n",
              out);
    }
    fputs("<noscript><p class=\"fault\">The plots and the tables of tensors need JavaScript; the "
          "grid, the failures and the items do not.</p></noscript>\n",
          out);
    fputs("<details class=\"provenance\" open><summary>Provenance</summary>\n"
          "<table class=\"provenance\" id=\"provenance\">\n",
          out);
    put_provenance_row(out, "results file", run->path);
    put_provenance_row(out, "cpparity", p->version);
    put_provenance_row(out, "commit", p->git_commit);
    put_provenance_row(out, "started", p->start_time);
    put_provenance_row(out, "ended", p->end_time);
    put_provenance_row(out, "host", p->host);
    put_provenance_row(out, "command line", p->command_line);
    char ranks[64];
    snprintf(ranks, sizeof ranks, "%d ranks, communicator %s, device %s", p->ranks, p->comm,
             p->device);
    put_provenance_row(out, "job", ranks);
    put_provenance_row(out, "implementation", p->implementation);
    put_provenance_row(out, "kernel", p->kernel);
    put_provenance_row(out, "fault", p->fault);
    put_provenance_row(out, "stored tensors", p->store);
    put_provenance_row(out, "compiler", p->compiler);
    put_provenance_row(out, "libraries", p->libraries);
    fputs("</table>\n</details>\n</header>\n", out);
}

/* A PASS chip's colour: green at ratio 0 turning amber as the error nears its limit. */
static void put_chip_style(FILE *out, const read_item *item) {
    if (strcmp(item->outcome, "PASS") != 0 || !isfinite(item->worst_ratio)) {
        return;
    }
    const double ratio = item->worst_ratio < 0.0   ? 0.0
                         : item->worst_ratio > 1.0 ? 1.0
                                                   : item->worst_ratio;
    fprintf(out, " style=\"background:hsl(%.0f,70%%,%.0f%%)\"", 130.0 - 90.0 * ratio,
            82.0 - 10.0 * ratio);
}

/* The change of an item since the baseline (a regression first), or NULL. */
static const diff_entry *change_of(const html_page *page, const read_item *item) {
    const results_diff *diff = page->input->changes;
    const diff_entry *found = NULL;
    char variant[48];
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    for (int64_t e = 0; diff != NULL && e < diff->count; e++) {
        const diff_entry *entry = &diff->entries[e];
        if (entry->cp == item->cp && strcmp(entry->dtype, item->dtype) == 0 &&
            strcmp(entry->variant, variant) == 0 &&
            strcmp(entry->case_name, item->case_name) == 0 &&
            (found == NULL || (entry->regression && !found->regression))) {
            found = entry;
        }
    }
    return found;
}

/* "f32 cp 4 zigzag ring": an item's dtype, cp and variant, as HTML (the names are the file's). */
static void put_item_name(FILE *out, const read_item *item) {
    char variant[48]; /* another layout or algorithm than contiguous Ulysses, named */
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    html_put_text(out, item->dtype);
    fprintf(out, " cp %" PRId64 "%s", item->cp, variant[0] != '\0' ? " " : "");
    html_put_text(out, variant);
}

/* "grads/model.norm.weight rank 1: error 3e-07, limit 2.6e-06 (cp 1), error / limit 0.115": the
 * tensor that decided an item, with the limit of the rule that decided it. */
static void put_worst_tensor(FILE *out, const metrics_row *row) {
    const deciding_limit decided = html_tensor_deciding(row);
    html_put_text(out, row->tensor);
    fprintf(out, " rank %d: error ", (int)row->rank);
    put_number(out, row->relative_l2);
    if (row->nonfinite > 0) {
        fprintf(out, " (%" PRId64 " non-finite)", row->nonfinite);
    }
    fputs(row->passed ? ", limit " : " &gt; limit ", out);
    put_number(out, decided.limit);
    fprintf(out, " (%s), error / limit ", decided.rule);
    put_number(out, decided.ratio);
}

static bool is_alphanumeric(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The short name of a layout or an algorithm in a busy cell of the grid: the legend's letters
 * ("c", "z", "r"; "U", "R", "H" and a hybrid's sizes), else the name's first letter; ASCII
 * letters and digits only, whatever the file holds. Appended to text (of size bytes). */
static void abbreviate(const char *name, const char *const table[][2], size_t n, char *text,
                       size_t size) {
    size_t at = strlen(text);
    const char *rest = "";
    const char *letters = NULL;
    for (size_t k = 0; k < n && letters == NULL; k++) {
        if (strncmp(name, table[k][0], strlen(table[k][0])) == 0) {
            letters = table[k][1];
            rest = name + strlen(table[k][0]); /* "hybrid:2x2" -> "H2x2" */
        }
    }
    for (const char *c = letters != NULL ? letters : ""; *c != '\0' && at + 1 < size; c++) {
        text[at++] = *c;
    }
    if (letters == NULL && at + 1 < size) {
        text[at++] = is_alphanumeric(name[0]) ? name[0] : '?';
    }
    for (const char *c = rest; *c != '\0' && at + 1 < size; c++) {
        if (is_alphanumeric(*c)) {
            text[at++] = *c;
        }
    }
    text[at] = '\0';
}

/* "z.R": an item's layout and algorithm, short, for a chip among others of its dtype (the page
 * writes the '.' as a middle dot). */
static void variant_abbreviation(const read_item *item, char *text, size_t size) {
    static const char *const layouts[][2] = {
        {"contiguous", "c"}, {"zigzag", "z"}, {"round-robin", "r"}, {"permutation", "p"}};
    static const char *const algorithms[][2] = {{"ulysses", "U"}, {"ring", "R"}, {"hybrid", "H"}};
    text[0] = '\0';
    abbreviate(item->token_layout[0] != '\0' ? item->token_layout : "contiguous", layouts,
               sizeof layouts / sizeof *layouts, text, size);
    const size_t at = strlen(text);
    if (at + 2 < size) {
        text[at] = '.', text[at + 1] = '\0';
    }
    abbreviate(item->algorithm, algorithms, sizeof algorithms / sizeof *algorithms, text, size);
}

/* About how many characters wide an item's chip is (put_chip), to share the grid's width. */
static int64_t chip_characters(const read_item *item, bool dtype_shown, bool variant_shown) {
    char variant[40];
    variant_abbreviation(item, variant, sizeof variant);
    int64_t characters = 2; /* its padding and the gap after it */
    characters += dtype_shown ? 0 : (int64_t)strlen(item->dtype) + 1;
    characters += variant_shown ? (int64_t)strlen(variant) + 1 : 0;
    characters += strcmp(item->outcome, "PASS") == 0 ? 0 : (int64_t)strlen(item->outcome) + 1;
    characters += item->tensor_count > 0 ? 4 : 0; /* "0.25", smaller */
    return characters;
}

/* An item as a chip linked to its row (which opens its tensors), coloured by outcome and worst
 * ratio: its dtype (unless the cell's line names it), its layout and algorithm where its dtype
 * has several in the cell, its outcome unless PASS, the worst error / limit, and a mark when it
 * regressed ("new" failure, error that "grew") or was "fixed" since the baseline. The tooltip
 * spells out the item, the tensor that decided it with its limit and rule, and the message. */
static void put_chip(FILE *out, const html_page *page, const read_item *item, int64_t index,
                     bool dtype_shown, bool variant_shown) {
    const diff_entry *change = change_of(page, item);
    const char *mark = NULL;
    if (change != NULL && change->kind == DIFF_NEW_FAILURE) {
        mark = "new";
    } else if (change != NULL && change->kind == DIFF_GREW) {
        mark = "grew";
    } else if (change != NULL && change->kind == DIFF_FIXED) {
        mark = "fixed";
    }
    fprintf(out, "<a class=\"chip %s%s\" href=\"#item-%" PRId64 "\"", outcome_class(item->outcome),
            mark == NULL         ? ""
            : change->regression ? " regressed"
                                 : " fixed",
            index);
    put_chip_style(out, item);
    fputs(" title=\"", out);
    put_item_name(out, item);
    fputs(": ", out);
    html_put_text(out, item->outcome);
    const metrics_row *worst = html_worst_tensor(item);
    if (worst != NULL) {
        fputs("; worst ", out);
        put_worst_tensor(out, worst);
    }
    if (item->message[0] != '\0') {
        fputs("; ", out);
        html_put_text(out, item->message);
    }
    fputs("\">", out);
    const char *space = "";
    if (!dtype_shown) {
        html_put_text(out, item->dtype);
        space = " ";
    }
    if (variant_shown) {
        char variant[40];
        variant_abbreviation(item, variant, sizeof variant);
        fputs(space, out);
        for (const char *c = variant; *c != '\0'; c++) {
            if (*c == '.') {
                fputs("&middot;", out);
            } else {
                fputc(*c, out);
            }
        }
        space = " ";
    }
    if (strcmp(item->outcome, "PASS") != 0) {
        fputs(space, out);
        html_put_text(out, item->outcome);
        space = " ";
    }
    if (item->tensor_count > 0) {
        fprintf(out, "%s<small>", space);
        if (isfinite(item->worst_ratio)) {
            fprintf(out, "%.2g", item->worst_ratio);
        } else {
            put_number(out, item->worst_ratio);
        }
        fputs("</small>", out);
    }
    if (mark != NULL) {
        fprintf(out, "<sup>%s</sup>", mark);
    }
    fputs("</a>", out);
}

/* The items of a case at one cp size, on lines: one line when each dtype has one item there
 * (*busy false); else a line per dtype (*busy true). Returns about how many characters wide its
 * widest line is (chip_characters). */
static int64_t cell_lines(const html_page *page, const html_case *hc, int64_t cp, bool *busy) {
    const read_results *run = page->run;
    *busy = false;
    for (int64_t i = 0; i < hc->item_count && !*busy; i++) {
        const read_item *item = &run->items[hc->items[i]];
        for (int64_t j = i + 1; j < hc->item_count && item->cp == cp && !*busy; j++) {
            const read_item *other = &run->items[hc->items[j]];
            *busy = other->cp == cp && strcmp(other->dtype, item->dtype) == 0;
        }
    }
    int64_t widest = 0;
    for (int64_t i = 0; i < hc->item_count; i++) {
        const read_item *item = &run->items[hc->items[i]];
        if (item->cp != cp) {
            continue;
        }
        if (!*busy) {
            widest += chip_characters(item, false, false);
            continue;
        }
        int64_t line = (int64_t)strlen(item->dtype) + 1; /* its dtype's line, from its start */
        for (int64_t j = 0; j < hc->item_count; j++) {
            const read_item *other = &run->items[hc->items[j]];
            if (other->cp == cp && strcmp(other->dtype, item->dtype) == 0) {
                line += chip_characters(other, true, true);
            }
        }
        widest = line > widest ? line : widest;
    }
    return widest;
}

/* The chips of a case at one cp size, on the lines cell_lines chooses; in a line per dtype the
 * chips are named by layout and algorithm. */
static void put_cell(FILE *out, const html_page *page, const html_case *hc, int64_t cp) {
    const read_results *run = page->run;
    bool busy;
    cell_lines(page, hc, cp, &busy);
    if (!busy) {
        fputs("<div class=\"line\">", out);
        for (int64_t i = 0; i < hc->item_count; i++) {
            const read_item *item = &run->items[hc->items[i]];
            if (item->cp == cp) {
                put_chip(out, page, item, hc->items[i], false, false);
            }
        }
        fputs("</div>", out);
        return;
    }
    for (int64_t i = 0; i < hc->item_count; i++) {
        const read_item *first = &run->items[hc->items[i]];
        bool seen = first->cp != cp; /* each dtype's line once, in the order first met */
        for (int64_t j = 0; j < i && !seen; j++) {
            const read_item *before = &run->items[hc->items[j]];
            seen = before->cp == cp && strcmp(before->dtype, first->dtype) == 0;
        }
        if (seen) {
            continue;
        }
        fputs("<div class=\"line\"><span class=\"dtype\">", out);
        html_put_text(out, first->dtype);
        fputs("</span>", out);
        for (int64_t j = i; j < hc->item_count; j++) {
            const read_item *item = &run->items[hc->items[j]];
            if (item->cp == cp && strcmp(item->dtype, first->dtype) == 0) {
                put_chip(out, page, item, hc->items[j], true, true);
            }
        }
        fputs("</div>", out);
    }
}

/* The case × cp grid, fitted to the window: the case column a fifth of it (a name on at most two
 * lines, whole in its tooltip), each cp column a share of the rest by the widest line of its
 * cells; chips wrap inside their cell. */
static void put_grid(FILE *out, const html_page *page) {
    const read_results *run = page->run;
    int64_t cps[64];
    int cp_count = 0;
    for (int64_t i = 0; i < run->item_count; i++) {
        const int64_t cp = run->items[i].cp;
        int at = 0;
        while (at < cp_count && cps[at] < cp) {
            at++;
        }
        if ((at < cp_count && cps[at] == cp) || cp_count == (int)(sizeof cps / sizeof *cps)) {
            continue;
        }
        memmove(&cps[at + 1], &cps[at], (size_t)(cp_count - at) * sizeof *cps);
        cps[at] = cp;
        cp_count++;
    }
    fputs("<section id=\"grid\">\n<h2>Cases &times; cp</h2>\n"
          "<p class=\"legend\">Colour: <span class=\"chip pass\" "
          "style=\"background:hsl(130,70%,82%)\">PASS far below the limit</span> "
          "<span class=\"chip pass\" style=\"background:hsl(40,70%,72%)\">PASS near it</span> "
          "<span class=\"chip fail\">FAIL</span> <span class=\"chip error\">ERROR</span> "
          "<span class=\"chip refused\">REFUSED</span> <span class=\"chip not-run\">NOT RUN</span>"
          "; the number is the worst error / limit of the item (its tooltip names the tensor, "
          "the limit and the rule that decided); <sup>new</sup> a new failure, "
          "<sup>grew</sup> an error grown, <sup>fixed</sup> fixed since the baseline. Where a "
          "dtype has several items at a cp, a line per dtype names each by layout "
          "(c contiguous, z zigzag, r round-robin) and algorithm (U Ulysses, R ring, H hybrid "
          "with its Ulysses &times; ring sizes).</p>\n",
          out);
    /* Each cp column's share of the 80% after the case column: its widest line in characters,
     * counted from 16 (a narrow column still holds two chips and its heading) to 120 (past that
     * the line wraps rather than starve the other columns). */
    int64_t widest[64] = {0};
    double total = 0.0;
    for (int k = 0; k < cp_count; k++) {
        for (int64_t c = 0; c < page->case_count; c++) {
            bool busy;
            const int64_t characters = cell_lines(page, &page->cases[c], cps[k], &busy);
            widest[k] = characters > widest[k] ? characters : widest[k];
        }
        widest[k] = widest[k] < 16 ? 16 : widest[k] > 120 ? 120 : widest[k];
        total += (double)widest[k];
    }
    fputs("<table class=\"grid\">\n<colgroup><col class=\"case-name\">", out);
    for (int k = 0; k < cp_count; k++) {
        fprintf(out, "<col style=\"width:%.1f%%\">", 80.0 * (double)widest[k] / total);
    }
    fputs("</colgroup>\n<thead><tr><th>case</th>", out);
    for (int k = 0; k < cp_count; k++) {
        fprintf(out, "<th>cp %" PRId64 "</th>", cps[k]);
    }
    fputs("</tr></thead>\n<tbody>\n", out);
    for (int64_t c = 0; c < page->case_count; c++) {
        const html_case *hc = &page->cases[c];
        fprintf(out, "<tr><th><a href=\"#case-%" PRId64 "\" title=\"", c);
        html_put_text(out, hc->name);
        fputs("\">", out);
        html_put_text(out, hc->name);
        fputs("</a></th>", out);
        for (int k = 0; k < cp_count; k++) {
            fputs("<td>", out);
            put_cell(out, page, hc, cps[k]);
            fputs("</td>", out);
        }
        fputs("</tr>\n", out);
    }
    fputs("</tbody>\n</table>\n</section>\n", out);
}

/* a > b for worst ratios, NaN (a non-finite error) above everything. */
static bool ratio_above(double a, double b) {
    return isnan(a) ? !isnan(b) : !isnan(b) && a > b;
}

/* The cases with FAIL or ERROR items, one line each: the failing items as chips, then the
 * message of the worst of them, linked to its tensors. */
static void put_failures(FILE *out, const html_page *page) {
    const read_results *run = page->run;
    int64_t failures = 0, cases = 0;
    for (int64_t c = 0; c < page->case_count; c++) {
        int64_t in_case = 0;
        for (int64_t i = 0; i < page->cases[c].item_count; i++) {
            in_case += is_failure(&run->items[page->cases[c].items[i]]);
        }
        failures += in_case;
        cases += in_case > 0;
    }
    if (failures == 0) {
        return;
    }
    fprintf(out,
            "<section id=\"failures\">\n<h2>Failures: %" PRId64 " item%s in %" PRId64
            " case%s</h2>\n<ul class=\"failures\">\n",
            failures, failures == 1 ? "" : "s", cases, cases == 1 ? "" : "s");
    for (int64_t c = 0; c < page->case_count; c++) {
        const html_case *hc = &page->cases[c];
        int64_t worst = -1;
        for (int64_t i = 0; i < hc->item_count; i++) {
            const read_item *item = &run->items[hc->items[i]];
            if (is_failure(item) &&
                (worst < 0 || ratio_above(item->worst_ratio, run->items[worst].worst_ratio))) {
                worst = hc->items[i];
            }
        }
        if (worst < 0) {
            continue;
        }
        fprintf(out, "<li><a href=\"#case-%" PRId64 "\"><b>", c);
        html_put_text(out, hc->name);
        fputs("</b></a> ", out);
        for (int64_t i = 0; i < hc->item_count; i++) {
            const read_item *item = &run->items[hc->items[i]];
            if (is_failure(item)) {
                char variant[48];
                results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
                fprintf(out, "<span class=\"chip %s\">%s cp %" PRId64 "%s%s</span>",
                        outcome_class(item->outcome), item->dtype, item->cp,
                        variant[0] != '\0' ? " " : "", variant);
            }
        }
        const read_item *item = &run->items[worst];
        fprintf(out, "<br>worst, <a href=\"#item-%" PRId64 "\">", worst);
        put_item_name(out, item);
        fputs("</a>: ", out);
        const metrics_row *row = html_worst_tensor(item);
        if (row != NULL) { /* the tensor, its limit and the rule that decided */
            put_worst_tensor(out, row);
            fputs(item->message[0] != '\0' ? "<br>" : "", out);
        }
        html_put_text(out, item->message);
        fputs("</li>\n", out);
    }
    fputs("</ul>\n</section>\n", out);
}

/* The mask features a case cannot detect (discrimination rows not discriminating), over the run:
 * a passing run says nothing about a feature its cases cannot tell apart. */
static void put_undetectable(FILE *out, const html_page *page) {
    const read_results *run = page->run;
    int64_t weak = 0;
    for (int64_t i = 0; i < run->discrimination_count; i++) {
        weak += !run->discrimination[i].discriminating;
    }
    if (weak == 0) {
        return;
    }
    fprintf(out,
            "<section id=\"undetectable\">\n<h2>Mask features a case cannot detect: %" PRId64
            "</h2>\n<p class=\"legend\">With the feature switched off, the float64 reference moves "
            "the case's tensors by less than 10 &times; its tightest limit: an implementation "
            "that drops the feature could still pass this case.</p>\n<ul>\n",
            weak);
    for (int64_t i = 0; i < run->discrimination_count; i++) {
        const discrimination_row *row = &run->discrimination[i];
        if (row->discriminating) {
            continue;
        }
        fputs("<li><b>", out);
        html_put_text(out, row->case_name);
        fputs("</b>: ", out);
        html_put_text(out, row->feature);
        fputs(" off changes the tensors by ", out);
        put_number(out, row->change);
        fputs(" &lt; threshold ", out);
        put_number(out, row->threshold);
        fputs("</li>\n", out);
    }
    fputs("</ul>\n</section>\n", out);
}

/* The case's discrimination rows: how far each mask feature it exercises moves its tensors. */
static void put_discrimination(FILE *out, const read_results *run, const char *case_name) {
    bool header = false;
    for (int64_t i = 0; i < run->discrimination_count; i++) {
        const discrimination_row *row = &run->discrimination[i];
        if (strcmp(row->case_name, case_name) != 0) {
            continue;
        }
        if (!header) {
            fputs("<table class=\"discrimination\">\n<caption>Can this case detect a dropped "
                  "mask feature? Change: the largest relative change of loss, logits or gradients "
                  "of the float64 reference with the feature switched off; it must reach 10 "
                  "&times; the case's tightest limit.</caption>\n<thead><tr><th>feature</th>"
                  "<th>change when off</th><th>threshold</th><th>margin</th><th>verdict</th>"
                  "</tr></thead>\n<tbody>\n",
                  out);
            header = true;
        }
        fprintf(out, "<tr%s><td>", row->discriminating ? "" : " class=\"failed\"");
        html_put_text(out, row->feature);
        fputs("</td><td>", out);
        put_number(out, row->change);
        fputs("</td><td>", out);
        put_number(out, row->threshold);
        fputs("</td><td>", out);
        put_number(out, row->threshold > 0 ? row->change / row->threshold : NAN);
        fprintf(out, " &times;</td><td>%s</td></tr>\n",
                row->discriminating ? "detects" : "CANNOT DETECT");
    }
    if (header) {
        fputs("</tbody>\n</table>\n", out);
    }
}

/* The tensor of the reported run a "grew" entry names, or NULL. */
static const metrics_row *changed_tensor(const read_results *run, const diff_entry *entry) {
    for (int64_t i = 0; i < run->item_count; i++) {
        const read_item *item = &run->items[i];
        char variant[48];
        results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
        if (item->cp != entry->cp || strcmp(item->dtype, entry->dtype) != 0 ||
            strcmp(variant, entry->variant) != 0 ||
            strcmp(item->case_name, entry->case_name) != 0) {
            continue;
        }
        for (int64_t t = 0; t < item->tensor_count; t++) {
            if (item->tensors[t].rank == entry->rank &&
                strcmp(item->tensors[t].tensor, entry->tensor) == 0) {
                return &item->tensors[t];
            }
        }
    }
    return NULL;
}

/* What changed since the baseline (results_diff.h). */
static void put_changes(FILE *out, const html_page *page) {
    const results_diff *diff = page->input->changes;
    if (diff == NULL) {
        return;
    }
    fputs("<section id=\"changes\">\n<h2>Changes since ", out);
    html_put_text(out, page->input->changes_from->path);
    fputs(" (", out);
    html_put_text(out, page->input->changes_from->provenance.start_time);
    fprintf(out,
            ")</h2>\n<p>%" PRId64 " regression%s: %" PRId64 " new failures, %" PRId64
            " errors grown more than %g&times;; %" PRId64 " fixed, %" PRId64
            " still failing, %" PRId64 " changed, %" PRId64 " only in the baseline, %" PRId64
            " only in this run.</p>\n",
            diff->regressions, diff->regressions == 1 ? "" : "s", diff->kinds[DIFF_NEW_FAILURE],
            diff->kinds[DIFF_GREW], diff->factor, diff->kinds[DIFF_FIXED],
            diff->kinds[DIFF_STILL_FAILING], diff->kinds[DIFF_CHANGED], diff->kinds[DIFF_ONLY_OLD],
            diff->kinds[DIFF_ONLY_NEW]);
    if (diff->count == 0) {
        fputs("<p>Nothing changed.</p>\n</section>\n", out);
        return;
    }
    /* A long list is folded: the grid marks the same items. */
    fprintf(out, "<details%s><summary>%" PRId64 " changed items</summary>\n",
            diff->count <= CHANGES_SHOWN_OPEN ? " open" : "", diff->count);
    fputs("<table class=\"changes\">\n<thead><tr><th>change</th><th>case</th><th>dtype</th>"
          "<th>cp</th><th>detail</th></tr></thead>\n<tbody>\n",
          out);
    for (int64_t e = 0; e < diff->count; e++) {
        const diff_entry *entry = &diff->entries[e];
        fprintf(out, "<tr%s><td>%s</td><td>", entry->regression ? " class=\"failed\"" : "",
                diff_kind_names[entry->kind]);
        html_put_text(out, entry->case_name);
        fprintf(out, "</td><td>%s</td><td>%" PRId64 "%s%s</td><td>", entry->dtype, entry->cp,
                entry->variant[0] != '\0' ? " " : "", entry->variant);
        if (entry->kind == DIFF_GREW) {
            html_put_text(out, entry->tensor);
            fprintf(out, " rank %d: error ", entry->rank);
            put_number(out, entry->old_error);
            fputs(" &rarr; ", out);
            put_number(out, entry->new_error);
            const metrics_row *row = changed_tensor(page->run, entry);
            if (row != NULL) { /* the limit of the rule that decides it now */
                const deciding_limit decided = html_tensor_deciding(row);
                fputs(", limit ", out);
                put_number(out, decided.limit);
                fprintf(out, " (%s)", decided.rule);
            } else {
                fputs(", limit ", out);
                put_number(out, entry->limit);
            }
        } else {
            html_put_text(out, entry->old_outcome[0] != '\0' ? entry->old_outcome : "absent");
            fputs(" &rarr; ", out);
            html_put_text(out, entry->new_outcome[0] != '\0' ? entry->new_outcome : "absent");
            if (diff_entry_layout_unstated(entry)) {
                fputs(" (layout ", out);
                html_put_text(out, entry->old_layout);
                fputs(" &rarr; ", out);
                html_put_text(out, entry->new_layout);
                fputs(")", out);
            }
            if (entry->message[0] != '\0') {
                fputs(": ", out);
                html_put_text(out, entry->message);
            }
        }
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody>\n</table>\n</details>\n</section>\n", out);
}

static void put_canvas(FILE *out, int64_t chart, const char *title, const char *caption) {
    fprintf(out,
            "<figure class=\"plot\"><figcaption><b>%s</b> %s</figcaption>"
            "<div class=\"plot-area\"><canvas id=\"chart-%" PRId64 "\"></canvas></div>",
            title, caption, chart);
}

static void put_trend(FILE *out, const html_page *page) {
    const int64_t chart = chart_index(page, HTML_CHART_TREND, -1);
    if (chart < 0) {
        return;
    }
    fputs("<section id=\"trend\">\n<h2>Trend over runs</h2>\n", out);
    put_canvas(out, chart, "Worst error / limit of each case, run after run",
               "(log scale; above 1 is a failure; a triangle is a non-finite error)");
    fputs("</figure>\n<ol class=\"runs\">\n", out);
    for (int64_t r = 0; r < page->input->run_count; r++) {
        const read_results *run = page->input->runs[r];
        const outcome_counts counts = count_outcomes(run);
        fputs("<li>", out);
        html_put_text(out, run->provenance.start_time);
        fputs(" <code>", out);
        html_put_text(out, run->path);
        fputs("</code> commit ", out);
        html_put_text(out, run->provenance.git_commit);
        fprintf(out, ": %s", verdict(&counts));
        if (strcmp(run->provenance.fault, "none") != 0) {
            fputs(" (fault ", out);
            html_put_text(out, run->provenance.fault);
            fputs(" injected)", out);
        }
        fputs("</li>\n", out);
    }
    fputs("</ol>\n</section>\n", out);
}

/* "S = 64, B = 2: row 0 left padding 3, documents 30 + 31; ..." */
static void put_layout(FILE *out, const read_case *layout) {
    if (layout == NULL) {
        return;
    }
    fprintf(out, "<p class=\"layout\">S = %" PRId64 ", B = %" PRId64 ":", layout->seq_len,
            layout->batch_size);
    int64_t document = 0;
    for (int64_t b = 0; b < layout->batch_size; b++) {
        const int64_t *row = &layout->rows[3 * b];
        if (b >= LAYOUT_ROWS_SHOWN) {
            document += row[1];
            continue;
        }
        fprintf(out, "%s row %" PRId64 ":", b > 0 ? ";" : "", b);
        if (row[0] > 0) {
            fprintf(out, " left padding %" PRId64 ",", row[0]);
        }
        fputs(row[1] == 1 ? " document" : " documents", out);
        for (int64_t d = 0; d < row[1] && document < layout->document_count; d++, document++) {
            fprintf(out, "%s%" PRId64, d > 0 ? " + " : " ", layout->document_lengths[document]);
        }
        if (row[2] > 0) {
            fprintf(out, ", right padding %" PRId64, row[2]);
        }
    }
    if (layout->batch_size > LAYOUT_ROWS_SHOWN) {
        fprintf(out, "; %" PRId64 " more rows", layout->batch_size - LAYOUT_ROWS_SHOWN);
    }
    fputs(".</p>\n", out);
}

/* The items of a case: outcome, worst tensor with the limit and rule that decided, message. */
static void put_item_table(FILE *out, const html_page *page, const html_case *c) {
    fputs("<table class=\"items\">\n<thead><tr><th>dtype</th><th>cp</th><th>outcome</th>"
          "<th>worst tensor</th><th>limit (rule)</th><th>error / limit</th><th>message</th>"
          "</tr></thead>\n<tbody>\n",
          out);
    for (int64_t i = 0; i < c->item_count; i++) {
        const int64_t index = c->items[i];
        const read_item *item = &page->run->items[index];
        char variant[48];
        results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
        fprintf(out, "<tr id=\"item-%" PRId64 "\" class=\"%s\"><td>", index,
                is_failure(item) ? "failed" : "");
        html_put_text(out, item->dtype);
        fprintf(out, "</td><td>%" PRId64 "%s", item->cp, variant[0] != '\0' ? " " : "");
        html_put_text(out, variant);
        fprintf(out, "</td><td><span class=\"chip %s\">", outcome_class(item->outcome));
        html_put_text(out, item->outcome);
        fputs("</span></td><td>", out);
        const metrics_row *worst = html_worst_tensor(item);
        html_put_text(out, item->worst_tensor);
        if (worst != NULL && strcmp(worst->tensor, item->worst_tensor) == 0) {
            fprintf(out, " <small>rank %d</small>", (int)worst->rank);
        }
        fputs("</td><td>", out);
        if (worst != NULL) {
            const deciding_limit decided = html_tensor_deciding(worst);
            put_number(out, decided.limit);
            fprintf(out, " (%s)", decided.rule);
        }
        fputs("</td><td>", out);
        if (item->tensor_count > 0) {
            put_number(out, item->worst_ratio);
        }
        fputs("</td><td class=\"message\">", out);
        html_put_text(out, item->message);
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody>\n</table>\n", out);
}

/* Every compared tensor of an item: a folded <details> (open when the item failed) whose table
 * the page's script draws from the JSON block when it is opened (html_report.js). */
static void put_tensor_details(FILE *out, const read_item *item, int64_t index) {
    if (item->tensor_count == 0) {
        return;
    }
    int64_t failed = 0;
    for (int64_t t = 0; t < item->tensor_count; t++) {
        failed += !item->tensors[t].passed;
    }
    fprintf(out,
            "<details class=\"tensors\" id=\"tensors-%" PRId64 "\" data-item=\"%" PRId64
            "\"%s><summary>",
            index, index, is_failure(item) ? " open" : "");
    put_item_name(out, item);
    fputs(": ", out);
    html_put_text(out, item->outcome);
    fprintf(out, ", %" PRId64 " of %" PRId64 " tensors out of tolerance", failed,
            item->tensor_count);
    char variant[48];
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    if (variant[0] == '\0' && item->token_layout[0] != '\0') { /* how the ranks' logits rows cut
                                                                 the sequence, unless named */
        fputs("; layout ", out);
        html_put_text(out, item->token_layout);
    }
    fputs("</summary></details>\n", out);
}

static void put_case(FILE *out, const html_page *page, int64_t case_index) {
    const html_case *c = &page->cases[case_index];
    bool failed = false;
    for (int64_t i = 0; i < c->item_count; i++) {
        failed = failed || is_failure(&page->run->items[c->items[i]]);
    }
    fprintf(out, "<section class=\"case%s\" id=\"case-%" PRId64 "\">\n<h3>",
            failed ? " failed" : "", case_index);
    html_put_text(out, c->name);
    fputs(" <small>", out);
    html_put_text(out, c->suite);
    fputs("</small></h3>\n", out);
    put_layout(out, c->layout);
    put_item_table(out, page, c);
    put_discrimination(out, page->run, c->name);
    fputs("<div class=\"plots\">\n", out);
    const int64_t limits = chart_index(page, HTML_CHART_LIMITS, case_index);
    if (limits >= 0) {
        put_canvas(out, limits, "Error against limit",
                   "(each point a tensor on a rank, log-log; above the line fails)");
        fputs("<p class=\"note\" data-note-for=\"chart-", out);
        fprintf(out, "%" PRId64 "\"></p></figure>\n", limits);
    } else {
        fputs("<p class=\"note\">No tensor was compared in this case.</p>\n", out);
    }
    const int64_t profile = chart_index(page, HTML_CHART_PROFILE, case_index);
    if (profile >= 0) {
        put_canvas(out, profile, "Logits error along the sequence",
                   "(per position, over batch rows and vocabulary; log scale)");
        fprintf(out,
                "<label>item <select id=\"select-chart-%" PRId64 "\"></select></label>"
                "<p class=\"note\" data-note-for=\"chart-%" PRId64 "\"></p></figure>\n",
                profile, profile);
    } else if (limits >= 0) {
        fputs("<p class=\"note no-profile\">No logits error profile: this results file does not "
              "keep the error along the sequence (written by an older cpparity), or no item "
              "compared logits.</p>\n",
              out);
    }
    const int64_t layers = chart_index(page, HTML_CHART_LAYERS, case_index);
    if (layers >= 0) {
        put_canvas(out, layers, "Gradient error / limit per layer",
                   "(the worst tensor of each layer over ranks; log scale; above 1 fails)");
        fputs("</figure>\n", out);
    }
    fputs("</div>\n", out);
    for (int64_t i = 0; i < c->item_count; i++) {
        put_tensor_details(out, &page->run->items[c->items[i]], c->items[i]);
    }
    fputs("</section>\n", out);
}

static void put_page(FILE *out, const void *context) {
    const html_page *page = context;
    const outcome_counts counts = count_outcomes(page->run);
    put_head(out, page, &counts);
    fputs("<body>\n", out);
    put_header(out, page, &counts);
    fputs("<main>\n", out);
    put_grid(out, page);
    put_changes(out, page);
    put_trend(out, page);
    put_failures(out, page);
    put_undetectable(out, page);
    fputs("<section id=\"cases\">\n<h2>Cases</h2>\n<p class=\"legend\">Pass rule "
          "(docs/tolerances.md): error &le; ratio &times; naive + floor, where naive is the error "
          "of a straightforward unsharded implementation of the same dtype, itself at most the "
          "ceiling; for cp &gt; 1 also error &le; ratio &times; error at cp 1 + floor (the "
          "CP-only limit). A tensor's limit is that of the rule that decided it, the tighter "
          "one: naive or cp 1. Origin: where each number came from (default, suite, case). An "
          "item's tensors are listed when it is opened (open when it failed).</p>\n",
          out);
    for (int64_t c = 0; c < page->case_count; c++) {
        put_case(out, page, c);
    }
    fputs("</section>\n</main>\n<footer>\n<p>Written by <code>cpparity report</code>; plots drawn "
          "by Chart.js, inlined from <code>",
          out);
    html_put_text(out, page->input->chart_library_source);
    fprintf(out,
            "</code>.</p>\n<p id=\"render-status\">Plots: %" PRId64 " expected.</p>\n"
            "<ul id=\"render-errors\"></ul>\n</footer>\n",
            page->chart_count);
    fputs("<script type=\"application/json\" id=\"report-data\">\n{", out);
    html_put_chart_data(out, page);
    fputs(",\n", out);
    html_put_tensor_data(out, page);
    fputs("}\n</script>\n<script>\n", out);
    fputs(page->input->chart_library, out);
    fputs("\n</script>\n<script>\n", out);
    fputs(html_report_script, out);
    fputs("\n</script>\n</body>\n</html>\n", out);
}

cpparity_status html_report_write(const output_file *file, const html_report_input *input,
                                  cpparity_error *error) {
    if (input->run_count < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "a report needs a results file");
    }
    html_page page;
    cpparity_status status = page_build(&page, input, error);
    if (status == CPPARITY_OK) {
        status = output_file_write_text(file, put_page, &page, error);
    }
    page_free(&page);
    return status;
}
