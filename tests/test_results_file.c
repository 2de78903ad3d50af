/*
 * test_results_file.c — the HDF5 results file (results_model/results_file.c).
 *
 * A hand-built run of one tiny case (one row of two documents) with three items: cp 1 PASS
 * (one record), cp 2 FAIL (three records: loss passes, logits on rank 1 fails with its values
 * and reference stored, a gradient fails on a non-finite value), cp 4 NOT RUN; and two
 * discrimination records. The file is read back with the HDF5 C API: attributes, the metrics
 * table, the stored tensors and their filters, the discrimination table. Existing destinations
 * are refused and left alone, and no temporary file is left after success or failure.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results_model/results_file.h"
#include "results_model/results.h"
#include "harness/judging/tolerance.h"
#include "tests/support/test_files.h"

static int64_t tiny_document_lengths[2] = {5, 3};
static cpparity_row_layout tiny_row = {.left_padding = 0,
                                       .document_count = 2,
                                       .document_lengths = tiny_document_lengths,
                                       .right_padding = 0};

/* The tiny case every test uses (model: 2 layers, full then sliding; V = 11, D = 8). */
static void make_case(cpparity_case *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "tiny-case");
    snprintf(c->description, sizeof c->description, "two documents in one row");
    c->line = 3;
    c->model = (cpparity_model_config){.vocab_size = 11,
                                       .hidden_size = 8,
                                       .num_hidden_layers = 2,
                                       .num_attention_heads = 2,
                                       .num_key_value_heads = 1,
                                       .head_dim = 4,
                                       .intermediate_size = 16,
                                       .rms_norm_eps = 1e-6,
                                       .rope_theta = 10000.0,
                                       .layer_types = {CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING},
                                       .sliding_window = 3,
                                       .attention_chunk_size = 4,
                                       .chunk_origin = CPPARITY_CHUNK_ORIGIN_ROW,
                                       .tie_word_embeddings = false};
    c->seq_len = 8;
    c->batch_size = 1;
    c->rows = &tiny_row;
    c->cp_sizes[0] = 1;
    c->cp_sizes[1] = 2;
    c->cp_sizes[2] = 4;
    c->cp_count = 3;
    c->dtypes[0] = CPPARITY_DTYPE_F32;
    c->dtype_count = 1;
    c->seed = 42;
    for (int d = 0; d < CPPARITY_DTYPE_COUNT; d++) {
        for (int k = 0; k < CPPARITY_KIND_COUNT; k++) {
            c->tolerances[d][k] =
                cpparity_tolerance_default((cpparity_dtype)d, (cpparity_tensor_kind)k);
        }
    }
}

/* A record named name on rank with the given error, limit and verdict. */
static tensor_record make_record(const char *name, cpparity_tensor_kind kind, int rank,
                                 double error, double limit, bool passed) {
    tensor_record record;
    memset(&record, 0, sizeof record);
    snprintf(record.name, sizeof record.name, "%s", name);
    record.kind = kind;
    record.rank = rank;
    record.metrics.count = 1;
    record.metrics.compared = 1;
    record.metrics.first_nonfinite = -1;
    record.metrics.relative_l2 = error;
    record.metrics.error_norm = error;
    record.metrics.reference_norm = 1.0;
    record.metrics.worst_index = 0;
    record.baseline_error = 1e-7;
    record.tolerance = (cpparity_tolerance){.ratio = 2.0,
                                            .floor = 1e-6,
                                            .ceiling = 1e-4,
                                            .ratio_origin = CPPARITY_ORIGIN_DEFAULT,
                                            .floor_origin = CPPARITY_ORIGIN_SUITE,
                                            .ceiling_origin = CPPARITY_ORIGIN_CASE};
    record.decision.passed = passed;
    record.decision.limit = limit;
    snprintf(record.decision.reason, sizeof record.decision.reason, "%s",
             passed ? "within limit" : "error above limit");
    return record;
}

#define LOGITS_COUNT (1 * 4 * 11)

/* Fills results with the run described at the top; c must outlive it. */
static void make_results(run_results *results, const cpparity_case *c) {
    memset(results, 0, sizeof *results);
    run_provenance *p = &results->provenance;
    snprintf(p->version, sizeof p->version, "0.1.0");
    snprintf(p->git_commit, sizeof p->git_commit, "abcdef123456");
    snprintf(p->compiler, sizeof p->compiler, "GCC 12.2.0");
    snprintf(p->libraries, sizeof p->libraries, "HDF5 1.10.8");
    snprintf(p->host, sizeof p->host, "testhost");
    snprintf(p->command_line, sizeof p->command_line, "cpparity run cases/tiny.yaml");
    snprintf(p->comm, sizeof p->comm, "local");
    snprintf(p->device, sizeof p->device, "cpu");
    snprintf(p->kernel, sizeof p->kernel, "cpu-reference 1");
    p->ranks = 2;
    p->seed = 7;
    p->seed_overridden = true;
    snprintf(p->store, sizeof p->store, "failures");
    snprintf(p->start_time, sizeof p->start_time, "2024-05-01T12:00:00Z");
    snprintf(p->end_time, sizeof p->end_time, "2024-05-01T12:00:05Z");

    results->item_count = 3;
    results->items = calloc(3, sizeof *results->items);
    cr_assert_not_null(results->items);
    for (int i = 0; i < 3; i++) {
        run_item *item = &results->items[i];
        item->source = c;
        snprintf(item->suite_path, sizeof item->suite_path, "cases/tiny.yaml");
        item->dtype = CPPARITY_DTYPE_F32;
        item->padded_seq_len = 8;
        item->worst_tensor = -1;
        item->seconds = 0.5;
        item->reference_seconds = 0.25;
    }
    run_item *pass = &results->items[0];
    pass->cp = 1;
    pass->is_baseline = true;
    pass->outcome = RUN_PASS;
    pass->tensors_expected = 1;
    pass->tensor_count = 1;
    pass->tensors = calloc(1, sizeof *pass->tensors);
    cr_assert_not_null(pass->tensors);
    pass->tensors[0] = make_record("loss", CPPARITY_KIND_LOSS, 0, 1e-7, 1e-4, true);
    pass->gradients_identical = true;
    pass->worst_tensor = 0;
    pass->worst_ratio = 1e-3;

    run_item *fail = &results->items[1];
    fail->cp = 2;
    fail->outcome = RUN_FAIL;
    snprintf(fail->message, sizeof fail->message, "logits rank 1: error 3e-05 > limit 1.2e-06");
    fail->tensors_expected = 3;
    fail->tensor_count = 3;
    fail->tensors = calloc(3, sizeof *fail->tensors);
    cr_assert_not_null(fail->tensors);
    fail->tensors[0] = make_record("loss", CPPARITY_KIND_LOSS, 0, 1e-7, 1.2e-6, true);
    tensor_record *logits = &fail->tensors[1];
    *logits = make_record("logits", CPPARITY_KIND_LOGITS, 1, 3e-5, 1.2e-6, false);
    logits->shape_rank = 3;
    logits->shape[0] = 1;
    logits->shape[1] = 4;
    logits->shape[2] = 11;
    logits->position_offset = 4;
    logits->metrics.count = LOGITS_COUNT;
    logits->metrics.compared = LOGITS_COUNT;
    logits->metrics.worst_index = 2 * 11 + 7;
    logits->worst[0] = 0;
    logits->worst[1] = 6;
    logits->worst[2] = 7;
    logits->values = malloc(LOGITS_COUNT * sizeof *logits->values);
    logits->reference = malloc(LOGITS_COUNT * sizeof *logits->reference);
    cr_assert(logits->values != NULL && logits->reference != NULL);
    for (int i = 0; i < LOGITS_COUNT; i++) {
        logits->values[i] = 0.25f * (float)i;
        logits->reference[i] = 0.25 * i + 1e-3;
    }
    tensor_record *grad = &fail->tensors[2];
    *grad = make_record("grads/embed_tokens", CPPARITY_KIND_GRADS, 0, NAN, 3.3e-6, false);
    grad->shape_rank = 2;
    grad->shape[0] = 11;
    grad->shape[1] = 8;
    grad->metrics.count = 88;
    grad->metrics.nonfinite = 1;
    grad->metrics.first_nonfinite = 17;
    grad->metrics.worst_index = 17;
    grad->worst[0] = 2;
    grad->worst[1] = 1;
    grad->worst[2] = 99; /* past the rank: must come out as -1 */
    fail->worst_tensor = 1;
    fail->worst_ratio = 25.0;

    run_item *not_run = &results->items[2];
    not_run->cp = 4;
    not_run->outcome = RUN_NOT_RUN;
    snprintf(not_run->message, sizeof not_run->message, "cp 4 does not divide 2 ranks");

    results->passed = 1;
    results->failed = 1;
    results->not_run = 1;

    results->discrimination_count = 2;
    results->discrimination = calloc(2, sizeof *results->discrimination);
    cr_assert_not_null(results->discrimination);
    results->discrimination[0] = (discrimination_record){
        .source = c, .feature = "window", .change = 0.5, .threshold = 1e-5, .discriminating = true};
    results->discrimination[1] = (discrimination_record){.source = c,
                                                         .feature = "chunks",
                                                         .change = 1e-7,
                                                         .threshold = 1e-5,
                                                         .discriminating = false};
}

/* Everything a test needs: the case, the results, a folder and the written file, open. */
typedef struct written {
    cpparity_case source; /* the tiny case */
    run_results results;  /* the run */
    char folder[64];      /* temporary folder */
    char path[128];       /* folder/results.h5 */
    hid_t file;           /* open read-only */
} written;

static void write_and_open(written *w) {
    make_case(&w->source);
    make_results(&w->results, &w->source);
    test_make_folder(w->folder, sizeof w->folder);
    snprintf(w->path, sizeof w->path, "%s/results.h5", w->folder);
    cpparity_error error = {0};
    cr_assert_eq(results_file_write(&w->results, w->path, &error), CPPARITY_OK, "%s",
                 error.message);
    w->file = H5Fopen(w->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert_geq(w->file, 0);
}

static void close_and_remove(written *w) {
    H5Fclose(w->file);
    unlink(w->path);
    rmdir(w->folder);
    run_results_free(&w->results);
}

/* Attribute readers: object is a path below file. */
static int64_t read_int64(hid_t file, const char *object, const char *name) {
    int64_t value = -12345;
    hid_t attribute = H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert_geq(attribute, 0, "attribute %s of %s", name, object);
    cr_assert_geq(H5Aread(attribute, H5T_NATIVE_INT64, &value), 0);
    H5Aclose(attribute);
    return value;
}

static double read_double(hid_t file, const char *object, const char *name) {
    double value = -12345;
    hid_t attribute = H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert_geq(attribute, 0, "attribute %s of %s", name, object);
    cr_assert_geq(H5Aread(attribute, H5T_NATIVE_DOUBLE, &value), 0);
    H5Aclose(attribute);
    return value;
}

/* Reads string attribute name (element `index` of a string array) into text. */
static void read_string(hid_t file, const char *object, const char *name, int index, char *text,
                        size_t size) {
    hid_t attribute = H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert_geq(attribute, 0, "attribute %s of %s", name, object);
    hid_t type = H5Aget_type(attribute);
    hid_t space = H5Aget_space(attribute);
    const size_t width = H5Tget_size(type);
    const hssize_t count = H5Sget_simple_extent_npoints(space);
    cr_assert_lt(index, count);
    char *all = calloc((size_t)count * width + 1, 1);
    cr_assert_not_null(all);
    cr_assert_geq(H5Aread(attribute, type, all), 0);
    snprintf(text, size, "%.*s", (int)width, all + (size_t)index * width);
    free(all);
    H5Sclose(space);
    H5Tclose(type);
    H5Aclose(attribute);
}

static void expect_string(hid_t file, const char *object, const char *name, const char *expected) {
    char text[2048];
    read_string(file, object, name, 0, text, sizeof text);
    cr_expect_str_eq(text, expected, "attribute %s of %s", name, object);
}

#define ITEM_FAIL "/cases/tiny-case/f32/cp_2"

Test(results_file, attributes__root_provenance_summary_case_and_items) {
    written w;
    write_and_open(&w);
    hid_t f = w.file;
    expect_string(f, "/", "format", "cpparity-results");
    cr_expect_eq(read_int64(f, "/", "format_version"), 2); /* docs/results-file.md: version 2 */
    expect_string(f, "/provenance", "host", "testhost");
    expect_string(f, "/provenance", "command_line", "cpparity run cases/tiny.yaml");
    expect_string(f, "/provenance", "kernel", "cpu-reference 1");
    expect_string(f, "/provenance", "end_time", "2024-05-01T12:00:05Z");
    cr_expect_eq(read_int64(f, "/provenance", "ranks"), 2);
    cr_expect_eq(read_int64(f, "/provenance", "seed"), 7);
    cr_expect_eq(read_int64(f, "/provenance", "seed_overridden"), 1);
    cr_expect_eq(read_int64(f, "/summary", "passed"), 1);
    cr_expect_eq(read_int64(f, "/summary", "failed"), 1);
    cr_expect_eq(read_int64(f, "/summary", "refused"), 0);
    cr_expect_eq(read_int64(f, "/summary", "not_run"), 1);
    cr_expect_eq(read_int64(f, "/summary", "errors"), 0);

    const char *c = "/cases/tiny-case";
    expect_string(f, c, "suite", "cases/tiny.yaml");
    expect_string(f, c, "description", "two documents in one row");
    expect_string(f, c, "chunk_origin", "row");
    cr_expect_eq(read_int64(f, c, "seq_len"), 8);
    cr_expect_eq(read_int64(f, c, "batch_size"), 1);
    cr_expect_eq(read_int64(f, c, "seed"), 42);
    cr_expect_eq(read_int64(f, c, "expect_refuse"), 0);
    cr_expect_eq(read_int64(f, c, "vocab_size"), 11);
    cr_expect_eq(read_int64(f, c, "num_key_value_heads"), 1);
    cr_expect_eq(read_int64(f, c, "tie_word_embeddings"), 0);
    cr_expect_eq(read_double(f, c, "rms_norm_eps"), 1e-6);
    cr_expect_eq(read_double(f, c, "rope_theta"), 10000.0);
    char text[64];
    read_string(f, c, "layer_types", 1, text, sizeof text);
    cr_expect_str_eq(text, "sliding_attention");

    expect_string(f, ITEM_FAIL, "outcome", "FAIL");
    expect_string(f, ITEM_FAIL, "worst_tensor", "logits");
    cr_expect_eq(read_int64(f, ITEM_FAIL, "is_baseline"), 0);
    cr_expect_eq(read_int64(f, ITEM_FAIL, "tensors_expected"), 3);
    cr_expect_eq(read_int64(f, ITEM_FAIL, "tensors_compared"), 3);
    cr_expect_eq(read_int64(f, ITEM_FAIL, "gradients_identical"), 0);
    cr_expect_eq(read_double(f, ITEM_FAIL, "worst_ratio"), 25.0);
    cr_expect_eq(read_double(f, ITEM_FAIL, "seconds"), 0.5);
    expect_string(f, "/cases/tiny-case/f32/cp_1", "outcome", "PASS");
    cr_expect_eq(read_int64(f, "/cases/tiny-case/f32/cp_1", "is_baseline"), 1);
    expect_string(f, "/cases/tiny-case/f32/cp_4", "outcome", "NOT RUN");
    expect_string(f, "/cases/tiny-case/f32/cp_4", "message", "cp 4 does not divide 2 ranks");
    expect_string(f, "/cases/tiny-case/f32/cp_4", "worst_tensor", "");
    close_and_remove(&w);
}

/* Reads a whole int64 dataset of expected_count elements. */
static void read_int64_dataset(hid_t file, const char *path, int64_t *values,
                               hssize_t expected_count) {
    hid_t dataset = H5Dopen2(file, path, H5P_DEFAULT);
    cr_assert_geq(dataset, 0, "%s", path);
    hid_t space = H5Dget_space(dataset);
    cr_assert_eq(H5Sget_simple_extent_npoints(space), expected_count, "%s", path);
    cr_assert_geq(H5Dread(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    cr_expect(H5Aexists(dataset, "Description") > 0, "%s has no Description", path);
    H5Sclose(space);
    H5Dclose(dataset);
}

Test(results_file, case_layout__rows_and_document_lengths) {
    written w;
    write_and_open(&w);
    int64_t rows[3], lengths[2];
    read_int64_dataset(w.file, "/cases/tiny-case/rows", rows, 3);
    cr_expect(rows[0] == 0 && rows[1] == 2 && rows[2] == 0);
    read_int64_dataset(w.file, "/cases/tiny-case/document_lengths", lengths, 2);
    cr_expect(lengths[0] == 5 && lengths[1] == 3);
    close_and_remove(&w);
}

/* The subset of a metrics row the test reads back (HDF5 converts by field name). */
typedef struct metrics_subset {
    char tensor[112];
    char kind[8];
    int32_t rank;
    int64_t nonfinite;
    double relative_l2;
    int64_t w0, w1, w2, w3;
    double limit;
    int8_t passed;
    char ratio_origin[8];
    char floor_origin[8];
    char ceiling_origin[8];
    char reason[160];
} metrics_subset;

/* The compound memory type of metrics_subset. */
static hid_t metrics_subset_type(void) {
    hid_t s112 = H5Tcopy(H5T_C_S1), s8 = H5Tcopy(H5T_C_S1), s160 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s112, 112);
    H5Tset_size(s8, 8);
    H5Tset_size(s160, 160);
    hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(metrics_subset));
    H5Tinsert(type, "tensor", HOFFSET(metrics_subset, tensor), s112);
    H5Tinsert(type, "kind", HOFFSET(metrics_subset, kind), s8);
    H5Tinsert(type, "rank", HOFFSET(metrics_subset, rank), H5T_NATIVE_INT32);
    H5Tinsert(type, "nonfinite", HOFFSET(metrics_subset, nonfinite), H5T_NATIVE_INT64);
    H5Tinsert(type, "relative_l2", HOFFSET(metrics_subset, relative_l2), H5T_NATIVE_DOUBLE);
    H5Tinsert(type, "w0", HOFFSET(metrics_subset, w0), H5T_NATIVE_INT64);
    H5Tinsert(type, "w1", HOFFSET(metrics_subset, w1), H5T_NATIVE_INT64);
    H5Tinsert(type, "w2", HOFFSET(metrics_subset, w2), H5T_NATIVE_INT64);
    H5Tinsert(type, "w3", HOFFSET(metrics_subset, w3), H5T_NATIVE_INT64);
    H5Tinsert(type, "limit", HOFFSET(metrics_subset, limit), H5T_NATIVE_DOUBLE);
    H5Tinsert(type, "passed", HOFFSET(metrics_subset, passed), H5T_NATIVE_INT8);
    H5Tinsert(type, "ratio_origin", HOFFSET(metrics_subset, ratio_origin), s8);
    H5Tinsert(type, "floor_origin", HOFFSET(metrics_subset, floor_origin), s8);
    H5Tinsert(type, "ceiling_origin", HOFFSET(metrics_subset, ceiling_origin), s8);
    H5Tinsert(type, "reason", HOFFSET(metrics_subset, reason), s160);
    H5Tclose(s112);
    H5Tclose(s8);
    H5Tclose(s160);
    return type;
}

Test(results_file, metrics__one_row_per_record_with_verdict_limit_and_origins) {
    written w;
    write_and_open(&w);
    hid_t dataset = H5Dopen2(w.file, ITEM_FAIL "/metrics", H5P_DEFAULT);
    cr_assert_geq(dataset, 0);
    hid_t space = H5Dget_space(dataset);
    cr_assert_eq(H5Sget_simple_extent_npoints(space), 3);
    hid_t type = metrics_subset_type();
    metrics_subset rows[3];
    memset(rows, 0, sizeof rows);
    cr_assert_geq(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
    cr_expect_str_eq(rows[0].tensor, "loss");
    cr_expect_str_eq(rows[1].tensor, "logits");
    cr_expect_str_eq(rows[2].tensor, "grads/embed_tokens");
    cr_expect_str_eq(rows[2].kind, "grads");
    cr_expect_eq(rows[1].rank, 1);
    cr_expect(rows[0].passed == 1 && rows[1].passed == 0 && rows[2].passed == 0);
    cr_expect_eq(rows[0].limit, 1.2e-6);
    cr_expect_eq(rows[1].limit, 1.2e-6);
    cr_expect_eq(rows[2].limit, 3.3e-6);
    cr_expect_eq(rows[1].relative_l2, 3e-5);
    cr_expect(isnan(rows[2].relative_l2));
    cr_expect_eq(rows[2].nonfinite, 1);
    cr_expect_str_eq(rows[1].ratio_origin, "default");
    cr_expect_str_eq(rows[1].floor_origin, "suite");
    cr_expect_str_eq(rows[1].ceiling_origin, "case");
    cr_expect_str_eq(rows[1].reason, "error above limit");
    cr_expect(rows[1].w0 == 0 && rows[1].w1 == 6 && rows[1].w2 == 7 && rows[1].w3 == -1);
    cr_expect(rows[2].w0 == 2 && rows[2].w1 == 1 && rows[2].w2 == -1 && rows[2].w3 == -1,
              "coordinates past the tensor's rank are -1");
    cr_expect(rows[0].w0 == -1, "a scalar has no coordinates");
    cr_expect(H5Aexists(dataset, "Description") > 0);
    char text[128];
    read_string(w.file, ITEM_FAIL "/metrics", "error_metric", 0, text, sizeof text);
    cr_expect(strstr(text, "relative L2") != NULL, "%s", text);
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(dataset);

    hid_t empty = H5Dopen2(w.file, "/cases/tiny-case/f32/cp_4/metrics", H5P_DEFAULT);
    cr_assert_geq(empty, 0, "an item without records still has an (empty) metrics table");
    hid_t empty_space = H5Dget_space(empty);
    cr_expect_eq(H5Sget_simple_extent_npoints(empty_space), 0);
    H5Sclose(empty_space);
    H5Dclose(empty);
    close_and_remove(&w);
}

/* True when the dataset's creation properties hold filter. */
static bool has_filter(hid_t dataset, H5Z_filter_t filter) {
    hid_t properties = H5Dget_create_plist(dataset);
    const int count = H5Pget_nfilters(properties);
    bool found = false;
    for (int i = 0; i < count; i++) {
        unsigned flags = 0, values[8];
        size_t value_count = 8;
        char name[64];
        found = found || H5Pget_filter2(properties, (unsigned)i, &flags, &value_count, values,
                                        sizeof name, name, NULL) == filter;
    }
    H5Pclose(properties);
    return found;
}

Test(results_file, tensors__stored_values_and_reference_chunked_compressed_checksummed) {
    written w;
    write_and_open(&w);
    const char *values_path = ITEM_FAIL "/tensors/logits@rank1";
    hid_t dataset = H5Dopen2(w.file, values_path, H5P_DEFAULT);
    cr_assert_geq(dataset, 0, "%s missing", values_path);
    hid_t space = H5Dget_space(dataset);
    hsize_t dims[3] = {0};
    cr_assert_eq(H5Sget_simple_extent_ndims(space), 3);
    H5Sget_simple_extent_dims(space, dims, NULL);
    cr_expect(dims[0] == 1 && dims[1] == 4 && dims[2] == 11);
    hid_t type = H5Dget_type(dataset);
    cr_expect_eq(H5Tget_class(type), H5T_FLOAT);
    cr_expect_eq(H5Tget_size(type), 4, "stored values are float32");
    float values[LOGITS_COUNT];
    cr_assert_geq(H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    for (int i = 0; i < LOGITS_COUNT; i++) {
        cr_expect_eq(values[i], 0.25f * (float)i, "element %d", i);
    }
    cr_expect(has_filter(dataset, H5Z_FILTER_DEFLATE));
    cr_expect(has_filter(dataset, H5Z_FILTER_FLETCHER32));
    cr_expect_eq(read_int64(w.file, values_path, "rank"), 1);
    cr_expect_eq(read_int64(w.file, values_path, "position_offset"), 4);
    expect_string(w.file, values_path, "tensor", "logits");
    cr_expect(H5Aexists(dataset, "Description") > 0);
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(dataset);

    hid_t reference = H5Dopen2(w.file, ITEM_FAIL "/tensors/logits@rank1.reference", H5P_DEFAULT);
    cr_assert_geq(reference, 0);
    hid_t reference_type = H5Dget_type(reference);
    cr_expect_eq(H5Tget_size(reference_type), 8, "the reference is float64");
    double reference_values[LOGITS_COUNT];
    cr_assert_geq(
        H5Dread(reference, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, reference_values), 0);
    cr_expect_eq(reference_values[5], 0.25 * 5 + 1e-3);
    cr_expect(has_filter(reference, H5Z_FILTER_FLETCHER32));
    H5Tclose(reference_type);
    H5Dclose(reference);

    cr_expect_eq(H5Lexists(w.file, ITEM_FAIL "/tensors/loss@rank0", H5P_DEFAULT), 0,
                 "records without stored values get no dataset");
    cr_expect_eq(H5Lexists(w.file, ITEM_FAIL "/tensors/grads:embed_tokens@rank0", H5P_DEFAULT), 0);
    cr_expect_gt(H5Lexists(w.file, "/cases/tiny-case/f32/cp_1/tensors", H5P_DEFAULT), 0,
                 "the tensors group is always present");
    close_and_remove(&w);
}

/* A discrimination row as read back. */
typedef struct discrimination_subset {
    char case_name[128];
    char feature[16];
    double change;
    double threshold;
    int8_t discriminating;
} discrimination_subset;

Test(results_file, discrimination__one_row_per_record) {
    written w;
    write_and_open(&w);
    hid_t dataset = H5Dopen2(w.file, "/discrimination", H5P_DEFAULT);
    cr_assert_geq(dataset, 0);
    hid_t s128 = H5Tcopy(H5T_C_S1), s16 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s128, 128);
    H5Tset_size(s16, 16);
    hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(discrimination_subset));
    H5Tinsert(type, "case", HOFFSET(discrimination_subset, case_name), s128);
    H5Tinsert(type, "feature", HOFFSET(discrimination_subset, feature), s16);
    H5Tinsert(type, "change", HOFFSET(discrimination_subset, change), H5T_NATIVE_DOUBLE);
    H5Tinsert(type, "threshold", HOFFSET(discrimination_subset, threshold), H5T_NATIVE_DOUBLE);
    H5Tinsert(type, "discriminating", HOFFSET(discrimination_subset, discriminating),
              H5T_NATIVE_INT8);
    discrimination_subset rows[2];
    memset(rows, 0, sizeof rows);
    cr_assert_geq(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
    cr_expect_str_eq(rows[0].case_name, "tiny-case");
    cr_expect_str_eq(rows[0].feature, "window");
    cr_expect_eq(rows[0].discriminating, 1);
    cr_expect_str_eq(rows[1].feature, "chunks");
    cr_expect_eq(rows[1].change, 1e-7);
    cr_expect_eq(rows[1].threshold, 1e-5);
    cr_expect_eq(rows[1].discriminating, 0);
    H5Tclose(type);
    H5Tclose(s16);
    H5Tclose(s128);
    H5Dclose(dataset);
    close_and_remove(&w);
}

Test(results_file, no_discrimination_records__no_dataset) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    free(results.discrimination);
    results.discrimination = NULL;
    results.discrimination_count = 0;
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    cr_assert_eq(results_file_write(&results, path, NULL), CPPARITY_OK);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert_geq(file, 0);
    cr_expect_eq(H5Lexists(file, "/discrimination", H5P_DEFAULT), 0);
    H5Fclose(file);
    unlink(path);
    rmdir(folder);
    run_results_free(&results);
}

Test(results_file, success__leaves_only_the_file_in_the_folder) {
    written w;
    write_and_open(&w);
    cr_expect_eq(test_count_entries(w.folder), 1, "no temporary file may be left behind");
    close_and_remove(&w);
}

Test(results_file, existing_destination__refused_as_bad_input_and_left_untouched) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    char folder[64], path[128], text[32] = "";
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    FILE *stream = fopen(path, "w");
    cr_assert_not_null(stream);
    fputs("precious", stream);
    fclose(stream);
    cpparity_error error = {0};
    cr_expect_eq(results_file_write(&results, path, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--out") != NULL, "%s", error.message);
    stream = fopen(path, "r");
    cr_assert_not_null(stream);
    cr_assert_not_null(fgets(text, sizeof text, stream));
    fclose(stream);
    cr_expect_str_eq(text, "precious");
    cr_expect_eq(test_count_entries(folder), 1, "no temporary file may be left behind");
    unlink(path);
    rmdir(folder);
    run_results_free(&results);
}

Test(results_file, failure_while_writing__leaves_nothing_behind) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    results.items[2].cp = 2; /* two items for the same case, dtype and cp: HDF5 refuses */
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    cpparity_error error = {0};
    cr_expect_eq(results_file_write(&results, path, &error), CPPARITY_ERROR_RUNTIME);
    cr_expect(strstr(error.message, "HDF5") != NULL && strstr(error.message, "cp_2") != NULL,
              "the failing object is named: %s", error.message);
    cr_expect_eq(test_count_entries(folder), 0, "neither the file nor a temporary file may remain");
    rmdir(folder);
    run_results_free(&results);
}

Test(results_file, shape_not_matching_count__runtime_error_and_nothing_behind) {
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    results.items[1].tensors[1].shape[2] = 12;
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    cpparity_error error = {0};
    cr_expect_eq(results_file_write(&results, path, &error), CPPARITY_ERROR_RUNTIME);
    cr_expect(strstr(error.message, "logits") != NULL, "%s", error.message);
    cr_expect_eq(test_count_entries(folder), 0);
    rmdir(folder);
    run_results_free(&results);
}

Test(results_file, same_case_name_from_two_suites__second_group_gets_a_suffix) {
    cpparity_case source, other;
    run_results results;
    make_case(&source);
    make_case(&other);
    other.seq_len = 16;
    make_results(&results, &source);
    results.items[2].source = &other;
    snprintf(results.items[2].suite_path, sizeof results.items[2].suite_path, "cases/other.yaml");
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    cr_assert_eq(results_file_write(&results, path, NULL), CPPARITY_OK);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert_geq(file, 0);
    cr_expect_eq(read_int64(file, "/cases/tiny-case~2", "seq_len"), 16);
    expect_string(file, "/cases/tiny-case~2", "name", "tiny-case");
    expect_string(file, "/cases/tiny-case~2", "suite", "cases/other.yaml");
    expect_string(file, "/cases/tiny-case~2/f32/cp_4", "outcome", "NOT RUN");
    H5Fclose(file);
    unlink(path);
    rmdir(folder);
    run_results_free(&results);
}

Test(run_results, outcome_names) {
    cr_expect_str_eq(run_outcome_name(RUN_PASS), "PASS");
    cr_expect_str_eq(run_outcome_name(RUN_FAIL), "FAIL");
    cr_expect_str_eq(run_outcome_name(RUN_REFUSED), "REFUSED");
    cr_expect_str_eq(run_outcome_name(RUN_NOT_RUN), "NOT RUN");
    cr_expect_str_eq(run_outcome_name(RUN_ERROR), "ERROR");
}

Test(run_results, free__zeroed_struct_and_twice_are_safe) {
    run_results empty;
    memset(&empty, 0, sizeof empty);
    run_results_free(&empty);
    cpparity_case source;
    run_results results;
    make_case(&source);
    make_results(&results, &source);
    run_results_free(&results);
    cr_expect_null(results.items);
    cr_expect_eq(results.item_count, 0);
    cr_expect_null(results.discrimination);
    run_results_free(&results);
}
