/*
 * test_results_diff.c — results files read back (results_model/results_reader.h) and two runs
 * compared (results_model/results_diff.h).
 *
 * Runs are built by hand: cases "a", "b", "c" with one f32 item at cp 2 each, of two tensors
 * (loss and logits on rank 1); written with results_file_write, read back, then diffed.
 */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results_model/results.h"
#include "results_model/results_diff.h"
#include "harness/judging/tolerance.h"
#include "results_model/results_file.h"
#include "results_model/results_reader.h"
#include "tests/support/test_files.h"
#include "tests/support/test_models.h"

static int64_t document_lengths[1] = {8};
static cpparity_row_layout row = {.document_count = 1, .document_lengths = document_lengths};

static void make_case(cpparity_case *c, const char *name) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->model = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    c->seq_len = 8;
    c->batch_size = 1;
    c->rows = &row;
    c->cp_sizes[0] = 2;
    c->cp_count = 1;
    c->dtypes[0] = CPPARITY_DTYPE_F32;
    c->dtype_count = 1;
}

/* One item of case c at cp 2: loss (error loss_error) and logits rank 1 (logits_error), each
 * with limit 1e-3; the outcome follows from the errors. */
static void make_item(run_item *item, const cpparity_case *c, double loss_error,
                      double logits_error) {
    memset(item, 0, sizeof *item);
    item->source = c;
    snprintf(item->suite_path, sizeof item->suite_path, "cases/test.yaml");
    item->cp = 2;
    item->dtype = CPPARITY_DTYPE_F32;
    item->padded_seq_len = 8;
    item->tensors_expected = 2;
    item->tensor_count = 2;
    item->tensors = calloc(2, sizeof *item->tensors);
    cr_assert_not_null(item->tensors);
    const double errors[2] = {loss_error, logits_error};
    const char *names[2] = {"loss", "logits"};
    bool passed = true;
    for (int t = 0; t < 2; t++) {
        tensor_record *record = &item->tensors[t];
        snprintf(record->name, sizeof record->name, "%s", names[t]);
        record->kind = t == 0 ? CPPARITY_KIND_LOSS : CPPARITY_KIND_LOGITS;
        record->rank = t;
        record->metrics.count = 1;
        record->metrics.compared = 1;
        record->metrics.first_nonfinite = -1;
        record->metrics.relative_l2 = errors[t];
        record->metrics.worst_index = 0;
        record->shape_rank = 0;
        record->decision.limit = 1e-3;
        record->decision.cp1_limit = NAN;
        record->decision.passed = errors[t] <= 1e-3;
        passed = passed && record->decision.passed;
    }
    /* logits rank 1: a [1, 4, 11] slice from position 4, with its error along the sequence */
    tensor_record *logits = &item->tensors[1];
    logits->shape_rank = 3;
    logits->shape[0] = 1;
    logits->shape[1] = 4;
    logits->shape[2] = 11;
    logits->metrics.count = 44;
    logits->metrics.compared = 44;
    logits->position_offset = 4;
    logits->position_error = malloc(4 * sizeof(double));
    cr_assert_not_null(logits->position_error);
    const double profile[4] = {1e-7, logits_error, NAN, 0.0};
    memcpy(logits->position_error, profile, sizeof profile);
    item->outcome = passed ? RUN_PASS : RUN_FAIL;
    item->worst_tensor = 1;
    item->worst_ratio = logits_error / 1e-3;
    snprintf(item->message, sizeof item->message, "%s", passed ? "" : "logits failed");
}

typedef struct run_fixture {
    cpparity_case cases[3];
    run_results results;
} run_fixture;

/* A run of the cases named in names (count of them) with the given logits errors. */
static void make_run(run_fixture *run, const char *const *names, const double *logits_errors,
                     int count) {
    memset(run, 0, sizeof *run);
    snprintf(run->results.provenance.git_commit, sizeof run->results.provenance.git_commit,
             "abc123");
    snprintf(run->results.provenance.start_time, sizeof run->results.provenance.start_time,
             "2026-12-01T00:00:00Z");
    run->results.provenance.ranks = 2;
    run->results.item_count = count;
    run->results.items = calloc((size_t)count, sizeof *run->results.items);
    cr_assert_not_null(run->results.items);
    for (int i = 0; i < count; i++) {
        make_case(&run->cases[i], names[i]);
        make_item(&run->results.items[i], &run->cases[i], 1e-5, logits_errors[i]);
    }
}

/* Writes run to folder/name and reads it back. */
static void write_and_read(run_fixture *run, const char *folder, const char *name,
                           read_results *read) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    cpparity_error error;
    cr_assert_eq(results_file_write(&run->results, path, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(results_file_read(path, read, &error), CPPARITY_OK, "%s", error.message);
}

Test(results_reader, round_trip__items_outcomes_and_metrics_read_back) {
    char folder[64];
    test_make_folder(folder, sizeof folder);
    const char *names[] = {"a", "b"};
    const double errors[] = {2e-4, 5e-3};
    run_fixture run;
    make_run(&run, names, errors, 2);
    /* one discrimination record per case: b cannot detect padding being dropped */
    run.results.discrimination = calloc(2, sizeof *run.results.discrimination);
    cr_assert_not_null(run.results.discrimination);
    run.results.discrimination_count = 2;
    run.results.discrimination[0] = (discrimination_record){.source = &run.cases[0],
                                                            .feature = "window",
                                                            .change = 0.25,
                                                            .threshold = 1e-4,
                                                            .discriminating = true};
    run.results.discrimination[1] = (discrimination_record){.source = &run.cases[1],
                                                            .feature = "padding",
                                                            .change = 3e-6,
                                                            .threshold = 1e-4,
                                                            .discriminating = false};
    read_results read;
    write_and_read(&run, folder, "run.h5", &read);
    cr_assert_eq(read.discrimination_count, 2);
    cr_expect_str_eq(read.discrimination[0].case_name, "a");
    cr_expect_str_eq(read.discrimination[0].feature, "window");
    cr_expect_eq(read.discrimination[0].change, 0.25);
    cr_expect_eq(read.discrimination[0].discriminating, 1);
    cr_expect_str_eq(read.discrimination[1].case_name, "b");
    cr_expect_str_eq(read.discrimination[1].feature, "padding");
    cr_expect_eq(read.discrimination[1].threshold, 1e-4);
    cr_expect_eq(read.discrimination[1].discriminating, 0);
    cr_expect_eq(read.format_version, RESULTS_FILE_FORMAT_VERSION);
    cr_expect_str_eq(read.provenance.git_commit, "abc123");
    cr_expect_eq(read.provenance.ranks, 2);
    cr_assert_eq(read.item_count, 2);
    cr_expect_str_eq(read.items[0].case_name, "a");
    cr_expect_str_eq(read.items[0].suite, "cases/test.yaml");
    cr_expect_str_eq(read.items[0].dtype, "f32");
    cr_expect_eq(read.items[0].cp, 2);
    cr_expect_str_eq(read.items[0].outcome, "PASS");
    cr_expect_str_eq(read.items[1].outcome, "FAIL");
    cr_expect_str_eq(read.items[1].message, "logits failed");
    cr_expect_str_eq(read.items[1].worst_tensor, "logits");
    cr_assert_eq(read.items[1].tensor_count, 2);
    cr_expect_str_eq(read.items[1].tensors[1].tensor, "logits");
    cr_expect_eq(read.items[1].tensors[1].rank, 1);
    /* doubles go through the file unchanged: bitwise equality is the contract */
    cr_expect_eq(read.items[1].tensors[1].relative_l2, 5e-3);
    cr_expect_eq(read.items[1].tensors[1].limit, 1e-3);
    /* the logits error along the sequence, and the case's layout for marking it */
    cr_assert_eq(read.items[1].profile_count, 1);
    const read_profile *profile = &read.items[1].profiles[0];
    cr_expect_eq(profile->rank, 1);
    cr_expect_eq(profile->position_offset, 4);
    cr_assert_eq(profile->length, 4);
    cr_expect_eq(profile->error[0], 1e-7);
    cr_expect_eq(profile->error[1], 5e-3);
    cr_expect(isnan(profile->error[2]), "NaN where nothing was compared survives the file");
    cr_expect_eq(profile->error[3], 0.0);
    cr_expect_eq(read.items[1].padded_seq_len, 8);
    cr_assert_eq(read.case_count, 2);
    cr_assert_lt(read.items[1].case_index, 2);
    const read_case *layout = &read.cases[read.items[1].case_index];
    cr_expect_str_eq(layout->name, "b");
    cr_expect_eq(layout->seq_len, 8);
    cr_expect_eq(layout->batch_size, 1);
    cr_expect_eq(layout->rows[1], 1, "one document in the row");
    cr_assert_eq(layout->document_count, 1);
    cr_expect_eq(layout->document_lengths[0], 8);
    read_results_free(&read);
    run_results_free(&run.results);
}

/* Expects path to be refused as bad input with fragment in the message. */
static void expect_unreadable(const char *path, const char *fragment) {
    read_results read;
    cpparity_error error;
    cr_expect_eq(results_file_read(path, &read, &error), CPPARITY_ERROR_INPUT, "%s", path);
    cr_expect(strstr(error.message, path) == error.message &&
                  strstr(error.message, fragment) != NULL,
              "expected '%s' in: %s", fragment, error.message);
    cr_expect_eq(read.item_count, 0);
    read_results_free(&read);
}

Test(results_reader, files_that_are_not_results__bad_input_naming_the_file_and_why) {
    char folder[64], path[256], text[256];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/missing.h5", folder);
    expect_unreadable(path, "cannot read");
    snprintf(path, sizeof path, "%s/text.h5", folder);
    FILE *file = fopen(path, "w");
    fputs("cases: []\n", file);
    fclose(file);
    expect_unreadable(path, "not an HDF5 file");
    /* a truncated results file: its first 2 KiB */
    const char *names[] = {"a"};
    const double errors[] = {2e-4};
    run_fixture run;
    make_run(&run, names, errors, 1);
    read_results read;
    write_and_read(&run, folder, "whole.h5", &read);
    read_results_free(&read);
    snprintf(text, sizeof text, "head -c 2048 %s/whole.h5 > %s/truncated.h5", folder, folder);
    cr_assert_eq(system(text), 0);
    snprintf(path, sizeof path, "%s/truncated.h5", folder);
    expect_unreadable(path, "truncated");
    /* another HDF5 file: no /format */
    snprintf(path, sizeof path, "%s/other.h5", folder);
    hid_t other = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(other);
    expect_unreadable(path, "not a cpparity results file");
    /* a newer format version: the whole file rewritten with version 99 */
    snprintf(path, sizeof path, "%s/whole.h5", folder);
    hid_t whole = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t version = H5Aopen(whole, "format_version", H5P_DEFAULT);
    const int64_t newer = 99;
    H5Awrite(version, H5T_NATIVE_INT64, &newer);
    H5Aclose(version);
    H5Fclose(whole);
    expect_unreadable(path, "version 99; this cpparity reads version");
    run_results_free(&run.results);
}

/* Diffs old against new (their logits errors, for cases named a, b, c...). */
static void diff_runs(const char *const *old_names, const double *old_errors, int old_count,
                      const char *const *new_names, const double *new_errors, int new_count,
                      results_diff *diff) {
    char folder[64];
    test_make_folder(folder, sizeof folder);
    run_fixture old_run, new_run;
    make_run(&old_run, old_names, old_errors, old_count);
    make_run(&new_run, new_names, new_errors, new_count);
    read_results old_read, new_read;
    write_and_read(&old_run, folder, "old.h5", &old_read);
    write_and_read(&new_run, folder, "new.h5", &new_read);
    cpparity_error error;
    cr_assert_eq(results_diff_compute(&old_read, &new_read, 2.0, diff, &error), CPPARITY_OK, "%s",
                 error.message);
    read_results_free(&old_read);
    read_results_free(&new_read);
    run_results_free(&old_run.results);
    run_results_free(&new_run.results);
}

static const diff_entry *find_entry(const results_diff *diff, diff_kind kind, const char *name) {
    for (int64_t e = 0; e < diff->count; e++) {
        if (diff->entries[e].kind == kind && strcmp(diff->entries[e].case_name, name) == 0) {
            return &diff->entries[e];
        }
    }
    return NULL;
}

Test(results_diff, identical_runs__nothing_changed) {
    const char *names[] = {"a", "b", "c"};
    const double errors[] = {2e-4, 5e-3, 1e-4};
    results_diff diff;
    diff_runs(names, errors, 3, names, errors, 3, &diff);
    cr_expect_eq(diff.count, 1, "only b, failing in both");
    cr_expect_not_null(find_entry(&diff, DIFF_STILL_FAILING, "b"));
    cr_expect_eq(diff.regressions, 0);
    cr_expect_eq(diff.items_compared, 3);
    cr_expect_eq(diff.tensors_compared, 4, "two tensors of each passing item");
    results_diff_free(&diff);
}

Test(results_diff, new_failure_fixed_and_grown_errors__classified_and_counted) {
    /* a: 1e-4 -> 5e-3 fails (new failure); b: 5e-3 -> 1e-4 passes (fixed); c: 1e-4 -> 3e-4 grew
     * x3 > x2 (a regression though it passes) */
    const char *names[] = {"a", "b", "c"};
    const double before[] = {1e-4, 5e-3, 1e-4};
    const double after[] = {5e-3, 1e-4, 3e-4};
    results_diff diff;
    diff_runs(names, before, 3, names, after, 3, &diff);
    cr_expect_not_null(find_entry(&diff, DIFF_NEW_FAILURE, "a"));
    cr_expect_not_null(find_entry(&diff, DIFF_FIXED, "b"));
    const diff_entry *grew = find_entry(&diff, DIFF_GREW, "c");
    cr_assert_not_null(grew);
    cr_expect_str_eq(grew->tensor, "logits");
    cr_expect_eq(grew->rank, 1);
    cr_expect_eq(grew->old_error, 1e-4);
    cr_expect_eq(grew->new_error, 3e-4);
    cr_expect_eq(diff.regressions, 2, "the new failure and the grown error");
    results_diff_free(&diff);
}

Test(results_diff, growth_below_the_factor_or_near_zero__is_not_a_regression) {
    /* a: x1.5 (under x2); b: 0 -> 5e-7, under 0.1% of its 1e-3 limit (noise, not growth) */
    const char *names[] = {"a", "b"};
    const double before[] = {1e-4, 0.0};
    const double after[] = {1.5e-4, 5e-7};
    results_diff diff;
    diff_runs(names, before, 2, names, after, 2, &diff);
    cr_expect_eq(diff.count, 0);
    cr_expect_eq(diff.regressions, 0);
    results_diff_free(&diff);
}

Test(results_diff, items_in_one_run_only__listed_never_dropped) {
    const char *old_names[] = {"a", "b"};
    const char *new_names[] = {"b", "c"};
    const double errors[] = {1e-4, 1e-4};
    results_diff diff;
    diff_runs(old_names, errors, 2, new_names, errors, 2, &diff);
    cr_expect_not_null(find_entry(&diff, DIFF_ONLY_OLD, "a"));
    cr_expect_not_null(find_entry(&diff, DIFF_ONLY_NEW, "c"));
    cr_expect_eq(diff.items_compared, 1);
    cr_expect_eq(diff.regressions, 0);
    results_diff_free(&diff);
}

/* Item i's logits rank 1 as a zigzag rank at cp 2 of a padded length 8 holds them: chunks 1 and
 * 2 would be consecutive, so here its rows are positions {2, 3, 4, 5} reordered as
 * {4, 5, 2, 3}, which no offset describes. */
static void make_zigzag(run_fixture *run, int i) {
    run_item *item = &run->results.items[i];
    snprintf(item->token_layout, sizeof item->token_layout, "zigzag");
    tensor_record *logits = &item->tensors[1];
    logits->position_offset = -1;
    logits->positions = malloc(4 * sizeof *logits->positions);
    cr_assert_not_null(logits->positions);
    const int64_t positions[4] = {4, 5, 2, 3};
    memcpy(logits->positions, positions, sizeof positions);
}

Test(results_reader, token_layout_and_positions__read_back_and_checked) {
    char folder[64], path[256];
    test_make_folder(folder, sizeof folder);
    const char *names[] = {"a", "b"};
    const double errors[] = {2e-4, 2e-4};
    run_fixture run;
    make_run(&run, names, errors, 2);
    snprintf(run.results.items[0].token_layout, sizeof run.results.items[0].token_layout,
             "contiguous");
    make_zigzag(&run, 1);
    read_results read;
    write_and_read(&run, folder, "zigzag.h5", &read);
    cr_assert_eq(read.item_count, 2);
    cr_expect_str_eq(read.items[0].token_layout, "contiguous");
    cr_expect_str_eq(read.items[1].token_layout, "zigzag");
    cr_assert_eq(read.items[0].profile_count, 1);
    cr_expect_null(read.items[0].profiles[0].positions, "consecutive rows: offset only");
    cr_expect_eq(read.items[0].profiles[0].position_offset, 4);
    const read_profile *profile = &read.items[1].profiles[0];
    cr_expect_eq(profile->position_offset, -1);
    cr_assert_not_null(profile->positions, "rows not consecutive: their positions are recorded");
    const int64_t expected[4] = {4, 5, 2, 3};
    for (int k = 0; k < 4; k++) {
        cr_expect_eq(profile->positions[k], expected[k], "entry %d", k);
    }
    read_results_free(&read);

    /* a position outside the padded sequence [0, 8) is refused, naming the dataset */
    snprintf(path, sizeof path, "%s/zigzag.h5", folder);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t dataset = H5Dopen2(file, "/cases/b/f32/cp_2/profiles/positions@rank1", H5P_DEFAULT);
    cr_assert_geq(dataset, 0, "profiles/positions@rank1 is written");
    const int64_t outside[4] = {4, 5, 2, 8};
    cr_assert_geq(H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, outside), 0);
    H5Dclose(dataset);
    H5Fclose(file);
    expect_unreadable(path, "positions@rank1[3] = 8 is outside [0, 8)");
    run_results_free(&run.results);
}

Test(results_diff, layout_changed__listed_as_changed_and_not_compared_tensor_by_tensor) {
    char folder[64];
    test_make_folder(folder, sizeof folder);
    const char *names[] = {"a", "b"};
    const double errors[] = {2e-4, 2e-4};
    const double grown[] = {2e-4, 9e-4}; /* b's logits x4.5: grew, were it comparable */
    run_fixture old_run, new_run;
    make_run(&old_run, names, errors, 2);
    make_run(&new_run, names, grown, 2);
    for (int i = 0; i < 2; i++) {
        snprintf(old_run.results.items[i].token_layout, 16, "contiguous");
        snprintf(new_run.results.items[i].token_layout, 16, "contiguous");
    }
    make_zigzag(&new_run, 1);
    read_results old_read, new_read;
    write_and_read(&old_run, folder, "old.h5", &old_read);
    write_and_read(&new_run, folder, "new.h5", &new_read);
    results_diff diff;
    cpparity_error error;
    cr_assert_eq(results_diff_compute(&old_read, &new_read, 2.0, &diff, &error), CPPARITY_OK, "%s",
                 error.message);
    const diff_entry *changed = find_entry(&diff, DIFF_CHANGED, "b");
    cr_assert_not_null(changed, "b's layout changed: one entry");
    cr_expect(diff_entry_layout_changed(changed));
    cr_expect_str_eq(changed->old_layout, "contiguous");
    cr_expect_str_eq(changed->new_layout, "zigzag");
    cr_expect(strstr(changed->message, "layout contiguous -> zigzag") != NULL, "%s",
              changed->message);
    cr_expect_null(find_entry(&diff, DIFF_GREW, "b"), "rank 1's logits are other positions now");
    cr_expect_eq(diff.regressions, 0);
    cr_expect_eq(diff.tensors_compared, 2, "only a's tensors");
    cr_expect_eq(diff.count, 1);
    results_diff_free(&diff);
    read_results_free(&old_read);
    read_results_free(&new_read);
    run_results_free(&old_run.results);
    run_results_free(&new_run.results);
}

Test(results_reader, file_image_in_memory__read_as_the_file_and_garbage_refused) {
    char folder[64], path[256];
    test_make_folder(folder, sizeof folder);
    const char *names[] = {"a", "b"};
    const double errors[] = {2e-4, 5e-3};
    run_fixture run;
    make_run(&run, names, errors, 2);
    read_results from_file, from_image;
    write_and_read(&run, folder, "image.h5", &from_file);
    snprintf(path, sizeof path, "%s/image.h5", folder);
    FILE *file = fopen(path, "rb");
    cr_assert_not_null(file);
    static unsigned char image[1 << 22];
    const size_t size = fread(image, 1, sizeof image, file);
    fclose(file);
    cr_assert(size > 0 && size < sizeof image);
    cpparity_error error;
    cr_assert_eq(results_file_read_image(image, size, "memory.h5", &from_image, &error),
                 CPPARITY_OK, "%s", error.message);
    cr_expect_str_eq(from_image.path, "memory.h5");
    cr_assert_eq(from_image.item_count, from_file.item_count);
    cr_expect_str_eq(from_image.items[1].outcome, "FAIL");
    cr_expect_eq(from_image.items[1].tensors[1].relative_l2, 5e-3);
    read_results_free(&from_image);
    /* not HDF5, and empty: bad input naming the image, nothing read */
    cr_expect_eq(results_file_read_image("cases: []\n", 10, "memory.h5", &from_image, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strncmp(error.message, "memory.h5", 9) == 0, "%s", error.message);
    cr_expect_eq(from_image.item_count, 0);
    read_results_free(&from_image);
    cr_expect_eq(results_file_read_image(image, 0, "memory.h5", &from_image, &error),
                 CPPARITY_ERROR_INPUT);
    read_results_free(&from_image);
    read_results_free(&from_file);
    run_results_free(&run.results);
}
