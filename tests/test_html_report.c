/*
 * test_html_report.c — the HTML report (reports/html_report.h): its escaping of text into HTML
 * and into JSON inside a script block (reports/html_escape.h), what the page holds, and the
 * check of the inlined plotting library (reports/html_chart_library.h).
 *
 * The page tests build a run by hand, as results_file_read would return it: case "alpha" with a
 * PASS item at cp 1 and a FAIL item at cp 2 (tensors loss, logits on ranks 0 and 1, gradients of
 * layers 0 and 1 and of lm_head; logits error profiles; a layout with left padding and two
 * documents), and case "beta" with a NOT RUN and a REFUSED item. The FAIL message carries a
 * script injection. The page is written through an output_file and searched as text; the items'
 * tensors are searched in its JSON block, from which the page's script draws their tables.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results_model/results_diff.h"
#include "reports/html_chart_library.h"
#include "reports/html_escape.h"
#include "reports/html_report.h"
#include "tests/support/test_files.h"

#define INJECTION "</script><script>alert('owned')</script><!--"
#define FAIL_REASON "error 3.00e-02 > limit 1.00e-03 = 2 x naive 4.5e-04 + floor 1e-04"
#define NOT_RUN_REASON "cp 4 needs a rank count divisible by 4 (e.g. --ranks 4)"
#define REFUSAL "refused: num_attention_heads (3) must be a multiple of cp (2)"
#define LIBRARY "/* stand-in for Chart.js: LIBRARY-MARKER-7d1 */"

/* ---- escaping ---------------------------------------------------------------------------- */

/* What put(stream, text) writes, as a string (the caller frees it). */
static char *capture(void (*put)(FILE *, const char *), const char *text) {
    char *buffer = NULL;
    size_t size = 0;
    FILE *stream = open_memstream(&buffer, &size);
    cr_assert_not_null(stream);
    put(stream, text);
    fclose(stream);
    return buffer;
}

static void expect_html(const char *text, const char *expected) {
    char *written = capture(html_put_text, text);
    cr_expect_str_eq(written, expected, "html of '%s'", text);
    free(written);
}

static void expect_json(const char *text, const char *expected) {
    char *written = capture(json_put_string, text);
    cr_expect_str_eq(written, expected, "json of '%s'", text);
    free(written);
}

Test(html_escape, html_special_characters__become_entities) {
    expect_html("<script>alert(\"x\") & 'y'</script>",
                "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;");
    expect_html("plain text, tab\tand newline\n", "plain text, tab\tand newline\n");
}

Test(html_escape, html_non_ascii_and_bad_bytes__references_and_u_fffd) {
    expect_html("caf\xc3\xa9 \xf0\x9f\x98\x80", "caf&#xE9; &#x1F600;");
    expect_html("bad \xff byte", "bad &#xFFFD; byte");
    expect_html("overlong \xc0\xaf", "overlong &#xFFFD;&#xFFFD;");
    expect_html("surrogate \xed\xa0\x80", "surrogate &#xFFFD;&#xFFFD;&#xFFFD;");
    expect_html("cut \xe2\x82", "cut &#xFFFD;&#xFFFD;");
    expect_html("control \x01 and \x7f", "control &#xFFFD; and &#xFFFD;");
}

Test(html_escape, json_script_end_or_comment_start__never_raw) {
    expect_json(INJECTION, "\"\\u003c/script\\u003e\\u003cscript\\u003ealert('owned')"
                           "\\u003c/script\\u003e\\u003c!--\"");
    expect_json("a & b", "\"a \\u0026 b\"");
}

Test(html_escape, json_quotes_backslashes_controls_non_ascii__escaped) {
    expect_json("say \"hi\" \\ now\n\tok", "\"say \\\"hi\\\" \\\\ now\\n\\tok\"");
    expect_json("caf\xc3\xa9", "\"caf\\u00e9\"");
    expect_json("\xf0\x9f\x98\x80", "\"\\ud83d\\ude00\"");                /* a surrogate pair */
    expect_json("line\xe2\x80\xa8separator", "\"line\\u2028separator\""); /* ends JS lines */
    expect_json("bad \xff \x01", "\"bad \\ufffd \\ufffd\"");
}

Test(html_escape, json_numbers__non_finite_as_null) {
    char *buffer = NULL;
    size_t size = 0;
    FILE *stream = open_memstream(&buffer, &size);
    json_put_number(stream, NAN);
    fputc(' ', stream);
    json_put_number(stream, INFINITY);
    fputc(' ', stream);
    json_put_number(stream, 1.25e-7);
    fclose(stream);
    cr_expect_str_eq(buffer, "null null 1.25e-07");
    free(buffer);
}

/* ---- the page ------------------------------------------------------------------------------- */

static metrics_row make_row(const char *tensor, const char *kind, int rank, double error,
                            double limit, bool passed) {
    metrics_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.tensor, sizeof row.tensor, "%s", tensor);
    snprintf(row.kind, sizeof row.kind, "%s", kind);
    row.rank = rank;
    row.relative_l2 = error;
    row.limit = limit;
    row.cp1_limit = NAN;
    row.ratio = 2.0;
    row.floor = 1e-4;
    row.ceiling = 1e-2;
    row.baseline_error = 4.5e-4;
    snprintf(row.ratio_origin, sizeof row.ratio_origin, "case");
    snprintf(row.floor_origin, sizeof row.floor_origin, "suite");
    snprintf(row.ceiling_origin, sizeof row.ceiling_origin, "default");
    row.passed = passed;
    snprintf(row.reason, sizeof row.reason, "%s", passed ? "error within the limit" : FAIL_REASON);
    return row;
}

typedef struct fixture {
    read_results run;
    read_item items[4];
    metrics_row pass_rows[2];
    metrics_row fail_rows[7];
    read_profile profiles[2];
    double errors[2][4];
    read_case layout;
    int64_t rows[3];
    int64_t document_lengths[2];
} fixture;

static const char *const fail_tensors[] = {"loss",
                                           "logits",
                                           "logits",
                                           "grads/model.layers.0.self_attn.q_proj.weight",
                                           "grads/model.layers.1.mlp.up_proj.weight",
                                           "grads/lm_head.weight",
                                           "grads/model.norm.weight"};

static void make_item(read_item *item, const char *case_name, int64_t case_index, const char *dtype,
                      int64_t cp, const char *outcome, const char *message) {
    memset(item, 0, sizeof *item);
    snprintf(item->case_name, sizeof item->case_name, "%s", case_name);
    snprintf(item->suite, sizeof item->suite, "cases/test.yaml");
    snprintf(item->dtype, sizeof item->dtype, "%s", dtype);
    snprintf(item->outcome, sizeof item->outcome, "%s", outcome);
    snprintf(item->message, sizeof item->message, "%s", message);
    item->cp = cp;
    item->case_index = case_index;
    item->padded_seq_len = 8;
}

/* The run described at the top; with_layouts false leaves out profiles and case layouts, as in
 * a file written before they were kept. */
static void make_run(fixture *f, bool with_layouts) {
    memset(f, 0, sizeof *f);
    read_results *run = &f->run;
    snprintf(run->path, sizeof run->path, "results/run.h5");
    run->format_version = 2;
    run_provenance *p = &run->provenance;
    snprintf(p->version, sizeof p->version, "0.1.0");
    snprintf(p->git_commit, sizeof p->git_commit, "abc1234");
    snprintf(p->host, sizeof p->host, "node-<7>");
    snprintf(p->command_line, sizeof p->command_line, "cpparity run cases/test.yaml");
    snprintf(p->fault, sizeof p->fault, "none");
    snprintf(p->start_time, sizeof p->start_time, "2026-12-01T00:00:00Z");
    p->ranks = 2;

    make_item(&f->items[0], "alpha", 0, "f32", 1, "PASS", "");
    f->pass_rows[0] = make_row("loss", "loss", 0, 1e-6, 1e-3, true);
    f->pass_rows[1] = make_row("logits", "logits", 0, 2e-6, 1e-3, true);
    f->items[0].tensors = f->pass_rows;
    f->items[0].tensor_count = 2;
    f->items[0].worst_ratio = 2e-3;

    make_item(&f->items[1], "alpha", 0, "f32", 2, "FAIL", INJECTION);
    for (int t = 0; t < 7; t++) {
        const char *kind = t == 0 ? "loss" : t < 3 ? "logits" : "grads";
        const bool passed = t != 2; /* logits on rank 1 fails */
        f->fail_rows[t] =
            make_row(fail_tensors[t], kind, t == 2 ? 1 : 0, passed ? 1e-5 : 3e-2, 1e-3, passed);
    }
    f->items[1].tensors = f->fail_rows;
    f->items[1].tensor_count = 7;
    f->items[1].worst_ratio = 30.0;
    snprintf(f->items[1].worst_tensor, sizeof f->items[1].worst_tensor, "logits");

    make_item(&f->items[2], "beta", 1, "f32", 4, "NOT RUN", NOT_RUN_REASON);
    make_item(&f->items[3], "beta", 1, "f32", 2, "REFUSED", REFUSAL);
    run->items = f->items;
    run->item_count = 4;
    if (!with_layouts) {
        for (int i = 0; i < 4; i++) {
            f->items[i].case_index = -1;
        }
        return;
    }
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 4; k++) {
            f->errors[r][k] = r == 0 ? 1e-6 : 2e-2; /* a step at the rank boundary */
        }
        f->profiles[r] =
            (read_profile){.rank = r, .position_offset = 4 * r, .length = 4, .error = f->errors[r]};
    }
    f->errors[0][0] = NAN; /* left padding: nothing compared */
    f->items[1].profiles = f->profiles;
    f->items[1].profile_count = 2;
    /* alpha: S = 8, B = 1: left padding 1, documents 3 and 4 (the second starts at 4). */
    f->rows[0] = 1, f->rows[1] = 2, f->rows[2] = 0;
    f->document_lengths[0] = 3, f->document_lengths[1] = 4;
    snprintf(f->layout.name, sizeof f->layout.name, "alpha");
    f->layout.seq_len = 8;
    f->layout.batch_size = 1;
    f->layout.rows = f->rows;
    f->layout.document_lengths = f->document_lengths;
    f->layout.document_count = 2;
    run->cases = &f->layout;
    run->case_count = 1; /* beta's index 1 is past it: no layout, as for a damaged file */
}

/* Writes the report of runs (oldest first) and returns its text (the caller frees it). */
static char *write_report(const read_results *const *runs, int64_t run_count,
                          const results_diff *changes, const read_results *changes_from) {
    char folder[256], path[320];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/report.html", folder);
    const html_report_input input = {.runs = runs,
                                     .run_count = run_count,
                                     .changes = changes,
                                     .changes_from = changes_from,
                                     .chart_library = LIBRARY,
                                     .chart_library_source = "/usr/share/test/chart.min.js"};
    output_file file;
    cpparity_error error;
    cr_assert_eq(output_file_begin(&file, path, "-o", &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(html_report_write(&file, &input, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(output_file_commit(&file, &error), CPPARITY_OK, "%s", error.message);
    FILE *stream = fopen(path, "rb");
    cr_assert_not_null(stream);
    fseek(stream, 0, SEEK_END);
    const long size = ftell(stream);
    rewind(stream);
    char *text = calloc((size_t)size + 1, 1);
    cr_assert_eq(fread(text, 1, (size_t)size, stream), (size_t)size);
    fclose(stream);
    unlink(path);
    rmdir(folder);
    return text;
}

static int count(const char *text, const char *needle) {
    int found = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) {
        found++;
    }
    return found;
}

/* The JSON block's text, NUL-terminated in a copy (the caller frees it). */
static char *json_block(const char *page) {
    const char *start = strstr(page, "<script type=\"application/json\" id=\"report-data\">");
    cr_assert_not_null(start);
    start = strchr(start, '>') + 1;
    const char *end = strstr(start, "</script>");
    cr_assert_not_null(end);
    return strndup(start, (size_t)(end - start));
}

Test(html_report, every_case_and_tensor__in_the_data_with_rule_and_origin) {
    fixture f;
    make_run(&f, true);
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    char *json = json_block(page);
    cr_expect(strstr(page, "<title>cpparity FAILED") != NULL);
    cr_expect(strstr(page, ">alpha</a>") != NULL, "alpha in the grid");
    cr_expect(strstr(page, ">beta</a>") != NULL, "beta in the grid");
    /* The tensors are data the page's script draws, never rows written as HTML. */
    cr_expect(strstr(page, "<table class=\"tensors\"") == NULL);
    cr_expect(strstr(page, "<details class=\"tensors\" id=\"tensors-0\" data-item=\"0\">") != NULL);
    cr_expect(strstr(page, "<details class=\"tensors\" id=\"tensors-1\" data-item=\"1\" open>") !=
                  NULL,
              "the failed item's tensors are open");
    /* Every tensor name once, in first-seen order. */
    cr_expect(strstr(json, "\"names\":[\"loss\",\"logits\","
                           "\"grads/model.layers.0.self_attn.q_proj.weight\","
                           "\"grads/model.layers.1.mlp.up_proj.weight\",\"grads/lm_head.weight\","
                           "\"grads/model.norm.weight\"]") != NULL);
    /* Rule and origins: ratio 2 (case), floor 1e-04 (suite), ceiling 0.01 (default). */
    cr_expect(strstr(json, "\"tolerances\":[[2,0.0001,0.01,\"case\",\"suite\",\"default\"]]") !=
              NULL);
    /* The failing logits row on rank 1: error 0.03 over the naive limit 0.001, ratio 30, not
     * passed (flags 0); its reason is a template of its error and limit. */
    cr_expect_eq(count(json, "[1,1,0.03,0.001,0,30,0.001,null,0.00045,0,1,0]"), 1);
    cr_expect(strstr(json, "\"reasons\":[\"error within the limit\",\"error {e} \\u003e limit {l} "
                           "= 2 x naive 4.5e-04 + floor 1e-04\"]") != NULL);
    /* The error-against-limit plot takes its points from the items' rows. */
    cr_expect(strstr(json, "\"series\":[{\"name\":\"f32 cp 1 (PASS)\",\"item\":0},"
                           "{\"name\":\"f32 cp 2 (FAIL)\",\"item\":1}]") != NULL);
    cr_expect(strstr(json, "\"items\":[[[0,0,1e-6,0.001,0,0.001,0.001,null,0.00045,0,0,1],"
                           "[1,0,2e-6,0.001,0,0.002,0.001,null,0.00045,0,0,1]],") != NULL);
    cr_expect(strstr(json, ",\nnull,\nnull]") != NULL, "beta's items compared nothing");
    /* Provenance, escaped. */
    cr_expect(strstr(page, "node-&lt;7&gt;") != NULL);
    cr_expect(strstr(page, "abc1234") != NULL);
    cr_expect(strstr(page, "FAULT INJECTED") == NULL, "no fault was planted");
    /* The library is inlined whole. */
    cr_expect_eq(count(page, LIBRARY), 1);
    free(json);
    free(page);
}

/* Point 3 of issue 33: each tensor carries the limit of the rule that decided it and the rule's
 * name, in the data, the grid's tooltip and the failures. */
Test(html_report, tensors__deciding_limit_and_rule_in_the_data) {
    fixture f;
    make_run(&f, true);
    /* loss at cp 2: the CP-only limit 5e-4 is tighter than the naive 1e-3, so cp 1 decides */
    f.fail_rows[0].cp1_limit = 5e-4;
    /* lm_head on rank 1 as on rank 0 (gradients are identical on every rank): a repeated row */
    f.fail_rows[6] = make_row("grads/lm_head.weight", "grads", 1, 1e-5, 1e-3, true);
    /* a reason holding a brace is kept literally */
    snprintf(f.fail_rows[4].reason, sizeof f.fail_rows[4].reason, "odd {e} reason");
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    char *json = json_block(page);
    cr_expect(strstr(json, "\"rules\":[\"naive\",\"cp 1\"]") != NULL, "%s", json);
    /* [name, rank, error, deciding limit, rule, ratio, naive limit, CP-only limit, naive error,
     *  tolerance, reason, flags] */
    cr_expect(strstr(json, "\"items\":[[[0,0,1e-6,0.001,0,") != NULL, "item 0: naive decides");
    cr_expect(strstr(json, "[[0,0,1e-5,0.0005,1,0.02,0.001,0.0005,0.00045,0,0,1],") != NULL,
              "item 1's loss: deciding limit 0.0005, rule 1 (cp 1)");
    cr_expect(strstr(json, "[4,0,1e-5,0.001,0,0.01,0.001,null,0.00045,0,0,1],1]") != NULL,
              "lm_head on rank 1 repeats the row of rank 0");
    cr_expect(strstr(json, ",[\"odd {e} reason\"]") != NULL, "a literal reason");
    /* The grid's tooltip and the failures name the worst tensor, its limit and rule. */
    cr_expect(strstr(page, "title=\"f32 cp 2: FAIL; worst logits rank 1: error 0.03 &gt; limit "
                           "0.001 (naive), error / limit 30; ") != NULL);
    cr_expect(strstr(page, "</a>: logits rank 1: error 0.03 &gt; limit 0.001 (naive), error / "
                           "limit 30<br>") != NULL);
    cr_expect(strstr(page, "<td>0.001 (naive)</td><td>30</td>") != NULL, "the items table");
    free(json);
    free(page);
}

Test(html_report, discrimination__per_case_table_and_undetectable_features_listed) {
    fixture f;
    make_run(&f, true);
    discrimination_row rows[2];
    memset(rows, 0, sizeof rows);
    snprintf(rows[0].case_name, sizeof rows[0].case_name, "alpha");
    snprintf(rows[0].feature, sizeof rows[0].feature, "documents");
    rows[0].change = 0.5, rows[0].threshold = 1e-3, rows[0].discriminating = 1;
    snprintf(rows[1].case_name, sizeof rows[1].case_name, "alpha");
    snprintf(rows[1].feature, sizeof rows[1].feature, "padding");
    rows[1].change = 2e-5, rows[1].threshold = 1e-3, rows[1].discriminating = 0;
    f.run.discrimination = rows;
    f.run.discrimination_count = 2;
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    cr_expect_eq(count(page, "<table class=\"discrimination\">"), 1, "alpha's table only");
    cr_expect(strstr(page, "<tr><td>documents</td><td>0.5</td><td>0.001</td><td>500 &times;</td>"
                           "<td>detects</td></tr>") != NULL);
    cr_expect(strstr(page, "<tr class=\"failed\"><td>padding</td><td>2e-05</td><td>0.001</td>"
                           "<td>0.02 &times;</td><td>CANNOT DETECT</td></tr>") != NULL);
    cr_expect(strstr(page, "<h2>Mask features a case cannot detect: 1</h2>") != NULL);
    cr_expect(strstr(page, "<li><b>alpha</b>: padding off changes the tensors by 2e-05 &lt; "
                           "threshold 0.001</li>") != NULL);
    free(page);
    /* every feature detected: the table, no warning section */
    rows[1].discriminating = 1;
    page = write_report(runs, 1, NULL, NULL);
    cr_expect(strstr(page, "id=\"undetectable\"") == NULL);
    cr_expect_eq(count(page, "<td>detects</td>"), 2);
    free(page);
}

Test(html_report, failing_refused_not_run_items__reasons_shown_escaped) {
    fixture f;
    make_run(&f, true);
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    cr_expect(strstr(page, "error {e} \\u003e limit {l} = 2 x naive 4.5e-04 + floor 1e-04") != NULL,
              "the failing tensor's reason, in the data");
    cr_expect(strstr(page, NOT_RUN_REASON) != NULL, "why an item did not run");
    cr_expect(strstr(page, REFUSAL) != NULL, "the refusal");
    cr_expect(strstr(page, "<h2>Failures: 1 item in 1 case</h2>") != NULL);
    cr_expect(strstr(page, "<span class=\"chip not-run\">NOT RUN</span>") != NULL);
    cr_expect(strstr(page, "<span class=\"chip refused\">REFUSED</span>") != NULL);
    /* The injected message is text, never markup, in every place it is shown. */
    cr_expect(strstr(page, "alert('owned')") == NULL, "the raw payload never appears");
    cr_expect(strstr(page, "&lt;/script&gt;&lt;script&gt;alert(&#39;owned&#39;)") != NULL);
    free(page);
}

Test(html_report, json_block__cannot_end_its_script_and_lists_every_canvas) {
    fixture f;
    make_run(&f, true);
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    char *json = json_block(page);
    cr_expect(strstr(json, "</") == NULL && strstr(json, "<!--") == NULL);
    for (const char *c = json; *c != '\0'; c++) {
        cr_assert((unsigned char)*c < 0x80, "non-ASCII byte in the JSON");
    }
    /* alpha: limits, profile, layers; beta compared nothing. */
    cr_expect_eq(count(page, "<canvas id=\"chart-"), 3);
    cr_expect_eq(count(json, "\"canvas\":\"chart-"), 3);
    cr_expect(strstr(page, "data-charts-expected=\"3\"") != NULL);
    cr_expect(strstr(json, "\"kind\":\"limits\",\"case\":\"alpha\"") != NULL);
    cr_expect(strstr(json, "\"kind\":\"layers\",\"case\":\"alpha\",\"labels\":[\"layer 0\","
                           "\"layer 1\",\"lm_head.weight\",\"model.norm.weight\"]") != NULL);
    /* The profile: both ranks, NaN as a gap, the padding and the second document's start. */
    cr_expect(strstr(json, "\"rank\":1,\"offset\":4,\"length\":4,\"bin\":1,\"limit\":0.001,"
                           "\"error\":[0.02,0.02,0.02,0.02]") != NULL);
    cr_expect(strstr(json, "\"error\":[null,1e-6,1e-6,1e-6]") != NULL);
    cr_expect(strstr(json, "\"padding\":[[0,1]],\"documents\":[4],\"seq_len\":8") != NULL);
    cr_expect(strstr(page, "No logits error profile") == NULL);
    free(json);
    free(page);
}

Test(html_report, file_without_profiles__no_sequence_plot_and_a_note) {
    fixture f;
    make_run(&f, false);
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    cr_expect(strstr(page, "\"kind\":\"profile\"") == NULL);
    cr_expect(strstr(page, "No logits error profile") != NULL);
    cr_expect_eq(count(page, "<canvas id=\"chart-"), 2, "limits and layers remain");
    cr_expect(strstr(page, "<p class=\"layout\">") == NULL, "no layout to describe");
    free(page);
}

Test(html_report, several_runs__trend_and_changes_since_the_baseline) {
    fixture old_run, new_run;
    make_run(&old_run, true);
    make_run(&new_run, true);
    /* The baseline passed everywhere; the new run is the fixture (alpha cp 2 fails). */
    snprintf(old_run.items[1].outcome, sizeof old_run.items[1].outcome, "PASS");
    old_run.items[1].worst_ratio = 0.01;
    old_run.fail_rows[2] = make_row("logits", "logits", 1, 1e-5, 1e-3, true);
    snprintf(old_run.run.provenance.start_time, sizeof old_run.run.provenance.start_time,
             "2026-11-30T00:00:00Z");
    snprintf(old_run.run.path, sizeof old_run.run.path, "results/old.h5");
    results_diff diff;
    cpparity_error error;
    cr_assert_eq(results_diff_compute(&old_run.run, &new_run.run, 2.0, &diff, &error), CPPARITY_OK,
                 "%s", error.message);
    const read_results *runs[] = {&old_run.run, &new_run.run};
    char *page = write_report(runs, 2, &diff, &old_run.run);
    char *json = json_block(page);
    cr_expect(strstr(json, "\"kind\":\"trend\",\"labels\":[\"2026-11-30T00:00:00Z\","
                           "\"2026-12-01T00:00:00Z (this run)\"]") != NULL);
    /* alpha's worst ratio: 0.01 then 30; beta never compared anything (NOT RUN, REFUSED). */
    cr_expect(strstr(json, "{\"name\":\"alpha\",\"values\":[0.01,30]}") != NULL);
    cr_expect(strstr(json, "\"name\":\"beta\"") == NULL, "a case never compared has no line");
    cr_expect(strstr(page, "<h2>Changes since results/old.h5") != NULL);
    cr_expect(strstr(page, "<sup>new</sup>") != NULL, "the new failure is marked in the grid");
    cr_expect_eq(count(page, "<canvas id=\"chart-"), 4);
    free(json);
    free(page);
    results_diff_free(&diff);
}

/* The report of f's run with profile as the one profile of its item 1 (a padded sequence of the
 * profile's length). */
static char *one_profile_report(fixture *f, read_profile *profile) {
    f->items[1].profiles = profile;
    f->items[1].profile_count = 1;
    f->items[1].padded_seq_len = profile->length;
    const read_results *runs[] = {&f->run};
    return write_report(runs, 1, NULL, NULL);
}

/* The number of values of the JSON array that starts in text (its values hold no comma). */
static int array_length(const char *text) {
    const char *end = strchr(text, ']');
    int values = 1;
    for (const char *c = text; end != NULL && c < end; c++) {
        values += *c == ',';
    }
    return values;
}

Test(html_report, long_profiles__binned_keeping_their_spikes) {
    fixture f;
    make_run(&f, true);
    /* One rank of 9000 positions: more than the 4096 points drawn, so bins of 3 positions. */
    enum { LENGTH = 9000 };
    static double errors[LENGTH];
    for (int k = 0; k < LENGTH; k++) {
        errors[k] = k < 3 ? NAN : 1e-6; /* a masked start, then a flat error */
    }
    errors[4321] = 0.5; /* one position far off: its bin must show it */
    read_profile profile = {.rank = 0, .position_offset = 0, .length = LENGTH, .error = errors};
    char *page = one_profile_report(&f, &profile);
    char *json = json_block(page);
    cr_expect(strstr(json, "\"padded\":9000,\"bin\":3,") != NULL);
    const char *values = strstr(json, "\"error\":[null,1e-6,");
    cr_assert_not_null(values, "the first bin is all NaN, a gap; the next ones 1e-6");
    const char *end = strchr(values, ']');
    cr_expect_eq(array_length(values), LENGTH / 3);
    cr_expect(strstr(values, ",0.5,") != NULL && strstr(values, ",0.5,") < end,
              "the spike survives binning");
    free(json);
    free(page);
}

Test(html_report, one_run_with_a_fault__no_trend_and_the_fault_announced) {
    fixture f;
    make_run(&f, true);
    snprintf(f.run.provenance.fault, sizeof f.run.provenance.fault, "window-off-by-one");
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    cr_expect(strstr(page, "\"kind\":\"trend\"") == NULL);
    cr_expect(strstr(page, "FAULT INJECTED: <b>window-off-by-one</b>") != NULL);
    free(page);
}

/* ---- the plotting library ------------------------------------------------------------------ */

static void write_file(const char *path, const char *text) {
    FILE *stream = fopen(path, "wb");
    cr_assert_not_null(stream);
    fputs(text, stream);
    fclose(stream);
}

/* Each position's own limit (limits@rank<r>) is drawn beside the error: per bin, the limit of
 * the position whose error the bin shows, so a spike is held to its own limit, not to a
 * neighbour's. A profile from an older file, without limits, draws none. */
Test(html_report, per_position_limits__each_bin_the_limit_of_the_error_it_shows) {
    fixture f;
    make_run(&f, true);
    enum { LENGTH = 9000 }; /* bins of 3 positions, as above */
    static double errors[LENGTH], limits[LENGTH];
    for (int k = 0; k < LENGTH; k++) {
        errors[k] = k < 3 ? NAN : 1e-6;
        limits[k] = k < 3 ? NAN : 2e-6;
    }
    errors[4321] = 0.5;
    limits[4321] = 3e-6; /* the spike's own limit */
    limits[4320] = 7e-6; /* its bin's neighbour's, larger: not the one drawn */
    read_profile profile = {
        .rank = 0, .position_offset = 0, .length = LENGTH, .error = errors, .limit = limits};
    char *page = one_profile_report(&f, &profile);
    char *json = json_block(page);
    const char *values = strstr(json, "\"limits\":[null,2e-6,");
    cr_assert_not_null(values, "the first bin has no limit (nothing compared), then 2e-6");
    const char *end = strchr(values, ']');
    cr_expect_eq(array_length(values), LENGTH / 3, "one limit per bin");
    const char *spike = strstr(values, ",3e-6,");
    cr_expect(spike != NULL && spike < end, "the spike's bin shows the spike's own limit");
    cr_expect(strstr(values, "7e-6") == NULL || strstr(values, "7e-6") > end,
              "not its neighbour's");
    free(json);
    free(page);
    profile.limit = NULL;
    page = one_profile_report(&f, &profile);
    json = json_block(page);
    cr_expect(strstr(json, "\"limits\":[") == NULL, "no limits drawn for an older file's profile");
    free(json);
    free(page);
}

Test(html_chart_library, library_read__refused_when_missing_or_not_inlinable) {
    char folder[256], path[320];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/chart.min.js", folder);
    char *text = NULL;
    cpparity_error error;
    write_file(path, LIBRARY);
    cr_expect_eq(html_chart_library_read(path, &text, &error), CPPARITY_OK);
    cr_expect_str_eq(text, LIBRARY);
    free(text);
    write_file(path, "var x = '</SCRIPT>';");
    cr_expect_eq(html_chart_library_read(path, &text, &error), CPPARITY_ERROR_RUNTIME);
    cr_expect(strstr(error.message, "</script") != NULL, "%s", error.message);
    cr_expect_null(text);
    unlink(path);
    cr_expect_eq(html_chart_library_read(path, &text, &error), CPPARITY_ERROR_RUNTIME);
    cr_expect(strstr(error.message, "install Debian's libjs-chart.js") != NULL, "%s",
              error.message);
    rmdir(folder);
}

Test(html_chart_library, environment__names_the_file) {
    cr_assert_eq(setenv("CPPARITY_CHART_JS", "/elsewhere/chart.js", 1), 0);
    cr_expect_str_eq(html_chart_library_path(), "/elsewhere/chart.js");
    unsetenv("CPPARITY_CHART_JS");
}

Test(html_report, zigzag_profiles__each_rank_drawn_at_the_positions_it_holds) {
    fixture f;
    make_run(&f, true);
    /* cp 2, zigzag over 8 positions: rank 0 holds chunks 0 and 3, rows {0, 1, 6, 7}; rank 1
     * chunks 1 and 2, {2, 3, 4, 5}, consecutive (position_offset 2, no positions). */
    static int64_t rank0[4] = {0, 1, 6, 7};
    f.profiles[0].position_offset = -1;
    f.profiles[0].positions = rank0;
    f.profiles[1].position_offset = 2;
    f.errors[0][2] = 3e-3; /* rank 0's row 2, position 6: the second chunk's first entry */
    snprintf(f.items[1].token_layout, sizeof f.items[1].token_layout, "zigzag");
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    char *json = json_block(page);
    /* rank 0's two chunks are two runs of the same rank at their own offsets, in row order */
    cr_expect(strstr(json, "\"layout\":\"zigzag\",\"ranks\":[{\"rank\":0,\"offset\":0,"
                           "\"length\":2,\"bin\":1,") != NULL);
    cr_expect(strstr(json, "{\"rank\":0,\"offset\":6,\"length\":2,\"bin\":1,\"limit\":0.001,"
                           "\"error\":[0.003,1e-6]}") != NULL,
              "the second chunk at position 6 with its own errors");
    cr_expect(strstr(json, "{\"rank\":1,\"offset\":2,\"length\":4,") != NULL);
    cr_expect(strstr(json, "\"name\":\"f32 cp 2 zigzag (FAIL)\"") != NULL,
              "the item's label names its layout");
    cr_expect(strstr(page, "tensors out of tolerance; layout zigzag</summary>") != NULL);
    free(json);
    free(page);
}

Test(html_report, finely_interleaved_ranks__drawn_over_global_bins) {
    fixture f;
    make_run(&f, true);
    /* round-robin with chunks of 1 over 1200 positions at cp 2: 600 runs per rank, more than
     * are drawn one by one, so each rank is one series over the whole sequence, null where it
     * holds nothing. */
    enum { HALF = 600 };
    static int64_t positions[2][HALF];
    static double errors[2][HALF];
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < HALF; k++) {
            positions[r][k] = 2 * k + r;
            errors[r][k] = r == 0 ? 1e-6 : 2e-2;
        }
        f.profiles[r] = (read_profile){.rank = r,
                                       .position_offset = -1,
                                       .length = HALF,
                                       .error = errors[r],
                                       .positions = positions[r]};
    }
    f.items[1].padded_seq_len = 2 * HALF;
    snprintf(f.items[1].token_layout, sizeof f.items[1].token_layout, "round-robin");
    const read_results *runs[] = {&f.run};
    char *page = write_report(runs, 1, NULL, NULL);
    char *json = json_block(page);
    /* 2 ranks × 1200 positions over 4096 points: bins of 1, every other one null */
    cr_expect(strstr(json, "{\"rank\":0,\"offset\":0,\"length\":1200,\"bin\":1,\"limit\":0.001,"
                           "\"error\":[1e-6,null,1e-6,null,") != NULL);
    cr_expect(strstr(json, "{\"rank\":1,\"offset\":0,\"length\":1200,\"bin\":1,\"limit\":0.001,"
                           "\"error\":[null,0.02,null,0.02,") != NULL);
    cr_expect_eq(count(json, "{\"rank\":"), 2, "one series per rank, not one per run");
    free(json);
    free(page);
}
