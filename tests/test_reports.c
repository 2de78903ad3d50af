/*
 * test_reports.c — the JUnit XML (reports/junit.c) and Markdown (reports/markdown.c) writers,
 * and the console table's limit column.
 *
 * A hand-built run of one tiny case with one item of every outcome: cp 1 f32 PASS, cp 2 f32
 * FAIL (three records: loss passes; logits on rank 1 and a gradient on rank 0 fail), cp 4 f32
 * NOT RUN, cp 2 bf16 REFUSED, cp 1 bf16 ERROR. The FAIL message holds every XML special
 * character and a '|'. The written text is searched for the expected elements, counts, escapes,
 * failing tensor names and numbers. Existing destinations are refused and left alone. A cp 2
 * item judged against cp 1, failed or passed under the tighter CP-only limit, shows that limit
 * and the rule "cp 1" in the console table (reports/console.c), Markdown and JUnit.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/console.h"
#include "reports/failing_tensors.h"
#include "reports/junit.h"
#include "reports/markdown.h"
#include "tests/support/test_files.h"

static int64_t tiny_document_lengths[1] = {8};
static cpparity_row_layout tiny_row = {.left_padding = 0,
                                       .document_count = 1,
                                       .document_lengths = tiny_document_lengths,
                                       .right_padding = 0};

#define FAIL_MESSAGE "logits <rank 1> & \"grads\" 'x' | error 3e-05 > limit"

static void make_case(cpparity_case *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "tiny-case");
    c->model.vocab_size = 11;
    c->model.num_hidden_layers = 1;
    c->seq_len = 8;
    c->batch_size = 1;
    c->rows = &tiny_row;
}

static tensor_record make_record(const char *name, int rank, double error, double limit,
                                 bool passed) {
    tensor_record record;
    memset(&record, 0, sizeof record);
    snprintf(record.name, sizeof record.name, "%s", name);
    record.rank = rank;
    record.metrics.count = 1;
    record.metrics.relative_l2 = error;
    record.metrics.worst_index = -1;
    record.baseline_error = 1e-7;
    record.cp1_error = NAN; /* a cp = 1 record; the CP-only part has its own test below */
    record.tolerance = (cpparity_tolerance){.ratio = 2.0,
                                            .floor = 1e-6,
                                            .ceiling = 1e-4,
                                            .ratio_origin = CPPARITY_ORIGIN_CASE,
                                            .floor_origin = CPPARITY_ORIGIN_SUITE,
                                            .ceiling_origin = CPPARITY_ORIGIN_DEFAULT};
    record.decision.passed = passed;
    record.decision.limit = limit;
    snprintf(record.decision.reason, sizeof record.decision.reason, "%s",
             passed ? "within limit" : "error above limit");
    return record;
}

/* The run described at the top; c must outlive it. */
static void make_results(run_results *results, const cpparity_case *c) {
    memset(results, 0, sizeof *results);
    snprintf(results->provenance.version, sizeof results->provenance.version, "0.1.0");
    snprintf(results->provenance.host, sizeof results->provenance.host, "testhost");
    snprintf(results->provenance.start_time, sizeof results->provenance.start_time,
             "2024-05-01T12:00:00Z");
    results->provenance.ranks = 2;
    results->item_count = 5;
    results->items = calloc(5, sizeof *results->items);
    cr_assert_not_null(results->items);
    const struct {
        int64_t cp;
        cpparity_dtype dtype;
        run_outcome outcome;
        const char *message;
    } items[5] = {
        {1, CPPARITY_DTYPE_F32, RUN_PASS, ""},
        {2, CPPARITY_DTYPE_F32, RUN_FAIL, FAIL_MESSAGE},
        {4, CPPARITY_DTYPE_F32, RUN_NOT_RUN, "cp 4 does not divide 2 ranks"},
        {2, CPPARITY_DTYPE_BF16, RUN_REFUSED, "bf16 is not supported by this kernel"},
        {1, CPPARITY_DTYPE_BF16, RUN_ERROR, "rank 1 died"},
    };
    for (int i = 0; i < 5; i++) {
        run_item *item = &results->items[i];
        item->source = c;
        snprintf(item->suite_path, sizeof item->suite_path, "cases/tiny.yaml");
        item->cp = items[i].cp;
        item->dtype = items[i].dtype;
        item->is_baseline = items[i].cp == 1;
        item->outcome = items[i].outcome;
        snprintf(item->message, sizeof item->message, "%s", items[i].message);
        item->worst_tensor = -1;
        item->seconds = 0.5;
        item->reference_seconds = 0.25;
    }
    run_item *pass = &results->items[0];
    pass->tensor_count = pass->tensors_expected = 1;
    pass->tensors = calloc(1, sizeof *pass->tensors);
    cr_assert_not_null(pass->tensors);
    pass->tensors[0] = make_record("loss", 0, 2e-8, 1e-4, true);
    pass->worst_tensor = 0;
    pass->worst_ratio = 2e-4;

    run_item *fail = &results->items[1];
    fail->tensor_count = fail->tensors_expected = 3;
    fail->tensors = calloc(3, sizeof *fail->tensors);
    cr_assert_not_null(fail->tensors);
    fail->tensors[0] = make_record("loss", 0, 1e-7, 1.2e-6, true);
    fail->tensors[1] = make_record("logits", 1, 3e-5, 1.2e-6, false);
    fail->tensors[1].shape_rank = 3;
    fail->tensors[1].metrics.worst_index = 29;
    fail->tensors[1].worst[0] = 0;
    fail->tensors[1].worst[1] = 6;
    fail->tensors[1].worst[2] = 7;
    fail->tensors[2] = make_record("grads/layers.0.q_proj", 0, 4e-6, 2.5e-6, false);
    fail->tensors[2].shape_rank = 2;
    fail->tensors[2].metrics.worst_index = 5;
    fail->tensors[2].worst[0] = 1;
    fail->tensors[2].worst[1] = 3;
    fail->worst_tensor = 1;
    fail->worst_ratio = 25.0;

    results->passed = 1;
    results->failed = 1;
    results->not_run = 1;
    results->refused = 1;
    results->errors = 1;
}

/* The whole file at path, NUL-terminated (caller frees). */
static char *read_all(const char *path) {
    FILE *stream = fopen(path, "r");
    cr_assert_not_null(stream, "%s missing", path);
    fseek(stream, 0, SEEK_END);
    const long length = ftell(stream);
    fseek(stream, 0, SEEK_SET);
    char *text = malloc((size_t)length + 1);
    cr_assert_not_null(text);
    cr_assert_eq(fread(text, 1, (size_t)length, stream), (size_t)length);
    text[length] = '\0';
    fclose(stream);
    return text;
}

static int count_occurrences(const char *text, const char *needle) {
    int count = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) {
        count++;
    }
    return count;
}

#define EXPECT_CONTAINS(text, needle)                                                              \
    cr_expect(strstr((text), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (text))

/* A writer under test: junit_write or markdown_write. */
typedef cpparity_status (*writer)(const run_results *, const char *, cpparity_error *);

/* Writes the standard run with write into a fresh folder and returns the text (caller frees);
 * checks that only the file is left in the folder, then removes both. */
static char *write_text(writer write, const char *file_name) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    char folder[64], path[160];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/%s", folder, file_name);
    cpparity_error error = {0};
    cr_assert_eq(write(&results, path, &error), CPPARITY_OK, "%s", error.message);
    cr_expect_eq(test_count_entries(folder), 1, "no temporary file may be left behind");
    char *text = read_all(path);
    unlink(path);
    rmdir(folder);
    run_results_free(&results);
    return text;
}

Test(junit, suite__counts_and_one_testcase_per_item) {
    char *text = write_text(junit_write, "report.xml");
    cr_expect(strncmp(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 38) == 0);
    EXPECT_CONTAINS(text, "<testsuite name=\"cpparity\" tests=\"5\" failures=\"1\" errors=\"1\" "
                          "skipped=\"1\" time=\"3.750\"");
    cr_expect_eq(count_occurrences(text, "<testsuite "), 1);
    cr_expect_eq(count_occurrences(text, "<testcase "), 5);
    cr_expect_eq(count_occurrences(text, "</testcase>"), 5);
    cr_expect_eq(count_occurrences(text, "<failure "), 1);
    cr_expect_eq(count_occurrences(text, "<error "), 1);
    cr_expect_eq(count_occurrences(text, "<skipped "), 1);
    EXPECT_CONTAINS(text,
                    "<testcase classname=\"tiny.tiny-case\" name=\"cp2-f32\" time=\"0.750\">");
    EXPECT_CONTAINS(text, "name=\"cp2-bf16\"");
    EXPECT_CONTAINS(text, "<skipped message=\"cp 4 does not divide 2 ranks\"/>");
    EXPECT_CONTAINS(text, "<system-out>refused as expected: bf16 is not supported by this kernel"
                          "</system-out>");
    EXPECT_CONTAINS(text, "<error message=\"rank 1 died\" type=\"error\">rank 1 died</error>");
    EXPECT_CONTAINS(text, "</testsuite>\n");
    free(text);
}

Test(junit, failure__message_escaped_and_failing_tensors_listed_worst_first) {
    char *text = write_text(junit_write, "report.xml");
    EXPECT_CONTAINS(text, "<failure message=\"logits &lt;rank 1&gt; &amp; &quot;grads&quot; "
                          "&apos;x&apos; | error 3e-05 &gt; limit\" type=\"parity\">");
    cr_expect_null(strstr(text, "<rank 1>"), "raw special characters must not appear");
    cr_expect_null(strstr(text, "\"grads\""));
    const char *logits = strstr(text, "logits rank 1: error 3e-05, limit 1.2e-06 (naive)");
    const char *grad =
        strstr(text, "grads/layers.0.q_proj rank 0: error 4e-06, limit 2.5e-06 (naive)");
    cr_expect_not_null(logits, "%s", text);
    cr_expect_not_null(grad, "%s", text);
    cr_expect(logits < grad, "the worst failing tensor comes first");
    EXPECT_CONTAINS(text, "worst element [0, 6, 7]");
    EXPECT_CONTAINS(text, "worst element [1, 3]");
    EXPECT_CONTAINS(text, "ratio 2 (case) x naive 1e-07 + floor 1e-06 (suite)");
    EXPECT_CONTAINS(text, "reason: error above limit");
    const char *failure = strstr(text, "<failure "), *end = strstr(text, "</failure>");
    cr_assert(failure != NULL && end != NULL);
    const char *loss = strstr(failure, "loss rank 0");
    cr_expect(loss == NULL || loss > end, "passing tensors are not listed");
    free(text);
}

Test(junit, existing_destination__refused_and_left_untouched) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    char folder[64], path[160];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/report.xml", folder);
    FILE *stream = fopen(path, "w");
    cr_assert_not_null(stream);
    fputs("precious", stream);
    fclose(stream);
    cpparity_error error = {0};
    cr_expect_eq(junit_write(&results, path, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--junit") != NULL, "%s", error.message);
    cr_expect_eq(markdown_write(&results, path, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--markdown") != NULL, "%s", error.message);
    char *text = read_all(path);
    cr_expect_str_eq(text, "precious");
    free(text);
    cr_expect_eq(test_count_entries(folder), 1);
    unlink(path);
    rmdir(folder);
    run_results_free(&results);
}

Test(markdown, summary__header_and_one_row_per_item) {
    char *text = write_text(markdown_write, "summary.md");
    EXPECT_CONTAINS(text, "## cpparity: FAILED — 1 passed, 1 failed, 1 refused, 1 not run, 1 "
                          "errors\n");
    EXPECT_CONTAINS(text, "| case | cp | dtype | outcome | worst tensor | error | limit | rule | "
                          "ratio |\n"
                          "|---|---:|---|---|---|---:|---:|---|---:|\n");
    EXPECT_CONTAINS(text, "| tiny-case | 1 | f32 | PASS | loss @ rank 0 | 2e-08 | 0.0001 | naive | "
                          "0.0002 |\n");
    EXPECT_CONTAINS(text, "| tiny-case | 2 | f32 | **FAIL** | logits @ rank 1 | 3e-05 | 1.2e-06 | "
                          "naive | 25 |\n");
    EXPECT_CONTAINS(text, "| tiny-case | 4 | f32 | NOT RUN | - | - | - | - | - |\n");
    EXPECT_CONTAINS(text, "| tiny-case | 2 | bf16 | REFUSED | - | - | - | - | - |\n");
    EXPECT_CONTAINS(text, "| tiny-case | 1 | bf16 | **ERROR** | - | - | - | - | - |\n");
    EXPECT_CONTAINS(text, "- tiny-case, cp 4, f32: cp 4 does not divide 2 ranks\n");
    free(text);
}

Test(markdown, failing_item__section_lists_failing_tensors_with_escaped_pipes) {
    char *text = write_text(markdown_write, "summary.md");
    EXPECT_CONTAINS(text, "### FAIL: tiny-case, cp 2, f32\n");
    EXPECT_CONTAINS(text, "logits &lt;rank 1> & \"grads\" 'x' \\| error 3e-05 > limit");
    cr_expect_null(strstr(text, "'x' | error"), "a '|' in a message must be escaped");
    EXPECT_CONTAINS(text, "| logits | 1 | 3e-05 | 1.2e-06 | naive | ratio 2 (case) × naive 1e-07 "
                          "+ floor 1e-06 (suite) | [0, 6, 7] | error above limit |\n");
    EXPECT_CONTAINS(text, "| grads/layers.0.q_proj | 0 | 4e-06 | 2.5e-06 | naive |");
    EXPECT_CONTAINS(text, "| [1, 3] |");
    cr_expect(strstr(text, "| logits | 1 |") < strstr(text, "| grads/layers.0.q_proj | 0 |"),
              "the worst failing tensor comes first");
    cr_expect_null(strstr(text, "| loss | 0 |"), "passing tensors are not listed");
    EXPECT_CONTAINS(text, "### ERROR: tiny-case, cp 1, bf16\n\nrank 1 died\n");
    free(text);
}

Test(failing_tensors, limit_origin__naive_rule_then_the_cp_only_rule) {
    tensor_record record = make_record("logits", 1, 3e-5, 1.2e-6, false);
    char text[256];
    failing_tensors_limit_origin(&record, "x", text, sizeof text);
    cr_assert_str_eq(text, "ratio 2 (case) x naive 1e-07 + floor 1e-06 (suite)");
    record.cp1_error = 8e-7;
    failing_tensors_limit_origin(&record, "x", text, sizeof text);
    cr_assert_str_eq(text, "ratio 2 (case) x naive 1e-07 + floor 1e-06 (suite); CP only: x cp 1 "
                           "8e-07");
}

/* --- the limit that decided (results_deciding_limit): the CP-only rule's where it is tighter ---
 */

/* A cp 2 item whose one tensor broke the CP-only limit but not the naive one (the issue's
 * numbers: error 2.40e-06, naive limit 2.75e-06, cp 1 limit 2.03e-06), or, with passed, one whose
 * error is under both. c must outlive it. */
static void make_cp_only_results(run_results *results, const cpparity_case *c, bool passed) {
    memset(results, 0, sizeof *results);
    results->item_count = 1;
    results->items = calloc(1, sizeof *results->items);
    cr_assert_not_null(results->items);
    run_item *item = &results->items[0];
    item->source = c;
    snprintf(item->suite_path, sizeof item->suite_path, "cases/tiny.yaml");
    item->cp = 2;
    item->dtype = CPPARITY_DTYPE_F32;
    item->outcome = passed ? RUN_PASS : RUN_FAIL;
    item->tensor_count = item->tensors_expected = 1;
    item->tensors = calloc(1, sizeof *item->tensors);
    cr_assert_not_null(item->tensors);
    tensor_record *record = &item->tensors[0];
    *record = make_record("logits", 1, passed ? 1.5e-6 : 2.40e-6, 2.75e-6, passed);
    record->cp1_error = 5.15e-7;
    record->decision.cp1_limit = 2.03e-6; /* 2 x 5.15e-7 + 1e-6 */
    snprintf(record->decision.reason, sizeof record->decision.reason, "%s",
             passed ? "within both limits"
                    : "CP only: error 2.40e-06 > 2.03e-06 = 2 x cp 1 error 5.15e-07 + floor "
                      "1.00e-06");
    item->worst_tensor = 0;
    item->worst_ratio = tensor_record_deciding_limit(record).ratio;
    snprintf(item->message, sizeof item->message, "%s", passed ? "" : "1 tensor failed");
    results->failed = passed ? 0 : 1;
    results->passed = passed ? 1 : 0;
}

/* What write (junit_write or markdown_write) writes of results (caller frees). */
static char *written(writer write, const run_results *results, const char *file_name) {
    char folder[64], path[160];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/%s", folder, file_name);
    cpparity_error error = {0};
    cr_assert_eq(write(results, path, &error), CPPARITY_OK, "%s", error.message);
    char *text = read_all(path);
    unlink(path);
    rmdir(folder);
    return text;
}

Test(deciding_limit, rules__tighter_limit_decides_and_ratio_is_the_larger) {
    deciding_limit d = results_deciding_limit(2.4e-6, 2.75e-6, 2.03e-6);
    cr_expect_eq(d.limit, 2.03e-6);
    cr_expect_str_eq(d.rule, "cp 1");
    cr_expect_eq(d.ratio, 2.4e-6 / 2.03e-6);
    d = results_deciding_limit(2.4e-6, 2.75e-6, NAN); /* cp = 1, or no baseline */
    cr_expect_eq(d.limit, 2.75e-6);
    cr_expect_str_eq(d.rule, "naive");
    d = results_deciding_limit(1e-6, 2e-6, 3e-6); /* the naive limit is the tighter */
    cr_expect_str_eq(d.rule, "naive");
    cr_expect_eq(d.ratio, 0.5);
    d = results_deciding_limit(1e-6, 0.0, 3e-6); /* a zero limit decides: nothing is tighter */
    cr_expect_str_eq(d.rule, "naive");
    cr_expect(isinf(d.ratio));
    cr_expect(isnan(results_deciding_limit(NAN, 2e-6, 3e-6).ratio));
}

/* The console's table header and line of the CP-only item (make_cp_only_results; caller frees). */
static char *console_text(bool passed) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_cp_only_results(&results, &source, passed);
    char *text = NULL;
    size_t size = 0;
    FILE *stream = open_memstream(&text, &size);
    cr_assert_not_null(stream);
    console_table_header(stream);
    console_item(stream, &results.items[0]);
    fclose(stream);
    run_results_free(&results);
    return text;
}

Test(console, cp_only_failure__limit_column_is_the_cp_only_limit) {
    char *text = console_text(false);
    /* the error broke 2.03e-06, the CP-only limit: never "see below" against the naive 2.75e-06 */
    EXPECT_CONTAINS(text, " 2.40e-06  2.03e-06 cp 1   FAIL\n");
    cr_expect_null(strstr(text, "see below"), "%s", text);
    cr_expect_null(strstr(text, "2.75e-06  "), "%s", text);
    free(text);
}

Test(console, cp_only_tighter_on_a_pass__limit_column_is_the_cp_only_limit) {
    char *text = console_text(true);
    EXPECT_CONTAINS(text, "    error     limit rule   result\n");
    EXPECT_CONTAINS(text, " 1.50e-06  2.03e-06 cp 1   PASS\n");
    free(text);
}

Test(markdown, cp_only_failure__limit_and_rule_are_the_cp_only_ones) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_cp_only_results(&results, &source, false);
    char *text = written(markdown_write, &results, "summary.md");
    EXPECT_CONTAINS(text, "| tiny-case | 2 | f32 | **FAIL** | logits @ rank 1 | 2.4e-06 | 2.03e-06 "
                          "| cp 1 | 1.18 |\n");
    EXPECT_CONTAINS(text, "| logits | 1 | 2.4e-06 | 2.03e-06 | cp 1 | CP only: ratio 2 (case) × cp "
                          "1 5.15e-07 + floor 1e-06 (suite); naive: × 1e-07 |");
    free(text);
    run_results_free(&results);
}

Test(junit, cp_only_failure__limit_and_rule_are_the_cp_only_ones) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_cp_only_results(&results, &source, false);
    char *text = written(junit_write, &results, "report.xml");
    EXPECT_CONTAINS(text, "logits rank 1: error 2.4e-06, limit 2.03e-06 (cp 1) = CP only: ratio 2 "
                          "(case) x cp 1 5.15e-07 + floor 1e-06 (suite); naive: x 1e-07");
    free(text);
    run_results_free(&results);
}

Test(junit, cp_only_tighter_on_a_pass__worst_tensor_names_the_cp_only_limit) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_cp_only_results(&results, &source, true);
    char *text = written(junit_write, &results, "report.xml");
    EXPECT_CONTAINS(text, "worst tensor logits rank 1: error 1.5e-06, limit 2.03e-06 (cp 1)");
    free(text);
    run_results_free(&results);
}
