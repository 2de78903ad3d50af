/*
 * test_case_file.c — the YAML suite loader (harness/case_file.c): a full suite loads with the
 * right values, defaults and tolerances merge with the right origins, and every kind of bad
 * input is refused with the file, the exact 1-based line and column, and an empty suite.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/case.h"
#include "harness/judging/tolerance.h"
#include "harness/suite/case_file.h"
#include "harness/suite/yaml_limits.h"

/* Lines 1-6 of most error tests: a complete model, seq_len 16, one row and cp sizes. */
#define DEFAULTS                                                                                   \
    "defaults:\n"                                                                                  \
    "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,\n"   \
    "          num_key_value_heads: 2, head_dim: 8, intermediate_size: 48}\n"                      \
    "  seq_len: 16\n"                                                                              \
    "  rows: [{documents: [16]}]\n"                                                                \
    "  cp: [1, 2]\n"

/* DEFAULTS and the start of a case named a (lines 1-8); a test's own lines start at line 9. */
#define CASE_A DEFAULTS "cases:\n  - name: a\n"

/* Loads text as "suite.yaml" and asserts success. */
static void load_ok(const char *text, cpparity_suite *suite) {
    cpparity_error error;
    cpparity_status status =
        cpparity_suite_load_text(text, strlen(text), "suite.yaml", suite, &error);
    cr_assert_eq(status, CPPARITY_OK, "unexpected error: %s", error.message);
}

/* Loads text and asserts bad input whose message starts with "suite.yaml:LOCATION: " (location
 * is "LINE:COLUMN") and contains fragment, with the suite left empty. */
static void expect_input_error(const char *text, const char *location, const char *fragment) {
    cpparity_suite suite;
    cpparity_error error;
    cpparity_status status =
        cpparity_suite_load_text(text, strlen(text), "suite.yaml", &suite, &error);
    cr_assert_eq(status, CPPARITY_ERROR_INPUT, "status %d, message: %s", (int)status,
                 error.message);
    cr_assert_eq(error.status, CPPARITY_ERROR_INPUT);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "suite.yaml:%s: ", location);
    cr_assert(strncmp(error.message, prefix, strlen(prefix)) == 0,
              "expected '%s' at the start of: %s", prefix, error.message);
    cr_assert(strstr(error.message, fragment) != NULL, "expected '%s' in: %s", fragment,
              error.message);
    cr_assert_eq(suite.count, 0);
    cr_assert_null(suite.cases);
    cr_assert_str_empty(suite.path);
    cpparity_suite_free(&suite);
}

/* Asserts one resolved tolerance: values and the origin of each field. */
static void expect_tolerance(const cpparity_case *c, cpparity_dtype dtype,
                             cpparity_tensor_kind kind, double ratio,
                             cpparity_tolerance_origin ratio_origin, double floor,
                             cpparity_tolerance_origin floor_origin, double ceiling,
                             cpparity_tolerance_origin ceiling_origin) {
    const cpparity_tolerance *t = &c->tolerances[dtype][kind];
    const char *where = cpparity_tensor_kind_name(kind);
    cr_assert_float_eq(t->ratio, ratio, 1e-12, "%s ratio", where);
    cr_assert_float_eq(t->floor, floor, 1e-18, "%s floor", where);
    cr_assert_float_eq(t->ceiling, ceiling, 1e-12, "%s ceiling", where);
    cr_assert_eq(t->ratio_origin, ratio_origin, "%s ratio origin", where);
    cr_assert_eq(t->floor_origin, floor_origin, "%s floor origin", where);
    cr_assert_eq(t->ceiling_origin, ceiling_origin, "%s ceiling origin", where);
}

static const char full_suite[] =
    "defaults:\n"                                                                        /* 1 */
    "  model:\n"                                                                         /* 2 */
    "    vocab_size: 64\n"                                                               /* 3 */
    "    hidden_size: 32\n"                                                              /* 4 */
    "    num_hidden_layers: 2\n"                                                         /* 5 */
    "    num_attention_heads: 4\n"                                                       /* 6 */
    "    num_key_value_heads: 2\n"                                                       /* 7 */
    "    head_dim: 8\n"                                                                  /* 8 */
    "    intermediate_size: 48\n"                                                        /* 9 */
    "    rms_norm_eps: 1.0e-5\n"                                                         /* 10 */
    "    rope_theta: 500000\n"                                                           /* 11 */
    "  cp: [1, 2]\n"                                                                     /* 12 */
    "  dtypes: [f32]\n"                                                                  /* 13 */
    "  seed: 1234\n"                                                                     /* 14 */
    "  tolerances: {f32: {logits: {floor: 2.0e-6}}}\n"                                   /* 15 */
    "cases:\n"                                                                           /* 16 */
    "  - name: full-left-padding\n"                                                      /* 17 */
    "    description: \"left padding and packed documents\"\n"                           /* 18 */
    "    model: {layer_types: [sliding_attention, full_attention], sliding_window: 3}\n" /* 19 */
    "    seq_len: 16\n"                                                                  /* 20 */
    "    rows:\n"                                                                        /* 21 */
    "      - {left_padding: 3, documents: [13]}\n"                                       /* 22 */
    "      - {documents: [5, 1, 6], right_padding: 4}\n"                                 /* 23 */
    "    cp: [1, 2, 4]\n"                                                                /* 24 */
    "    dtypes: [f32, bf16]\n"                                                          /* 25 */
    "    seed: 7\n"                                                                      /* 26 */
    "    tolerances:\n"                                                                  /* 27 */
    "      f32: {loss: {ratio: 2.5, floor: 1e-7, ceiling: 3}}\n"                         /* 28 */
    "      bf16: {grads: {ratio: 4}}\n"                                                  /* 29 */
    "  - name: chunked_v1.2\n"                                                           /* 30 */
    "    model:\n"                                                                       /* 31 */
    "      num_hidden_layers: 3\n"                                                       /* 32 */
    "      num_key_value_heads: 1\n"                                                     /* 33 */
    "      layer_types: [chunked_attention, full_attention, chunked_attention]\n"        /* 34 */
    "      attention_chunk_size: 4\n"                                                    /* 35 */
    "      chunk_origin: document\n"                                                     /* 36 */
    "      tie_word_embeddings: true\n"                                                  /* 37 */
    "    seq_len: 8\n"                                                                   /* 38 */
    "    rows: [{documents: [8]}, {left_padding: 8}]\n"                                  /* 39 */
    "    expect: {refuse: \"attention_chunk_size\"}\n";                                  /* 40 */

/* ---- valid suites ------------------------------------------------------------------------- */

Test(case_file, full_suite__loads_every_value) {
    cpparity_suite suite;
    load_ok(full_suite, &suite);
    cr_assert_str_eq(suite.path, "suite.yaml");
    cr_assert_eq(suite.count, 2);

    const cpparity_case *c = &suite.cases[0];
    cr_assert_str_eq(c->name, "full-left-padding");
    cr_assert_str_eq(c->description, "left padding and packed documents");
    cr_assert_eq(c->line, 17);
    cr_assert_eq(c->model.vocab_size, 64);
    cr_assert_eq(c->model.hidden_size, 32);
    cr_assert_eq(c->model.num_hidden_layers, 2);
    cr_assert_eq(c->model.num_attention_heads, 4);
    cr_assert_eq(c->model.num_key_value_heads, 2);
    cr_assert_eq(c->model.head_dim, 8);
    cr_assert_eq(c->model.intermediate_size, 48);
    cr_assert_float_eq(c->model.rms_norm_eps, 1e-5, 1e-20);
    cr_assert_float_eq(c->model.rope_theta, 500000.0, 1e-9);
    cr_assert_eq(c->model.layer_types[0], CPPARITY_LAYER_SLIDING);
    cr_assert_eq(c->model.layer_types[1], CPPARITY_LAYER_FULL);
    cr_assert_eq(c->model.sliding_window, 3);
    cr_assert_eq(c->model.chunk_origin, CPPARITY_CHUNK_ORIGIN_ROW);
    cr_assert_not(c->model.tie_word_embeddings);
    cr_assert_eq(c->seq_len, 16);
    cr_assert_eq(c->batch_size, 2);
    cr_assert_eq(c->rows[0].left_padding, 3);
    cr_assert_eq(c->rows[0].document_count, 1);
    cr_assert_eq(c->rows[0].document_lengths[0], 13);
    cr_assert_eq(c->rows[0].right_padding, 0);
    cr_assert_eq(c->rows[1].left_padding, 0);
    cr_assert_eq(c->rows[1].document_count, 3);
    cr_assert_eq(c->rows[1].document_lengths[0], 5);
    cr_assert_eq(c->rows[1].document_lengths[1], 1);
    cr_assert_eq(c->rows[1].document_lengths[2], 6);
    cr_assert_eq(c->rows[1].right_padding, 4);
    cr_assert_eq(c->cp_count, 3);
    cr_assert_eq(c->cp_sizes[0], 1);
    cr_assert_eq(c->cp_sizes[1], 2);
    cr_assert_eq(c->cp_sizes[2], 4);
    cr_assert_eq(c->dtype_count, 2);
    cr_assert_eq(c->dtypes[0], CPPARITY_DTYPE_F32);
    cr_assert_eq(c->dtypes[1], CPPARITY_DTYPE_BF16);
    cr_assert_eq(c->seed, 7);
    cr_assert_not(c->expect_refuse);
    cr_assert_str_empty(c->refusal);

    c = &suite.cases[1];
    cr_assert_str_eq(c->name, "chunked_v1.2");
    cr_assert_eq(c->line, 30);
    cr_assert_str_empty(c->description);
    cr_assert_eq(c->model.num_hidden_layers, 3);
    cr_assert_eq(c->model.num_key_value_heads, 1);
    cr_assert_eq(c->model.layer_types[0], CPPARITY_LAYER_CHUNKED);
    cr_assert_eq(c->model.layer_types[1], CPPARITY_LAYER_FULL);
    cr_assert_eq(c->model.layer_types[2], CPPARITY_LAYER_CHUNKED);
    cr_assert_eq(c->model.attention_chunk_size, 4);
    cr_assert_eq(c->model.chunk_origin, CPPARITY_CHUNK_ORIGIN_DOCUMENT);
    cr_assert(c->model.tie_word_embeddings);
    cr_assert_eq(c->seq_len, 8);
    cr_assert_eq(c->batch_size, 2);
    cr_assert_eq(c->rows[1].left_padding, 8);
    cr_assert_eq(c->rows[1].document_count, 0);
    cr_assert(c->expect_refuse);
    cr_assert_str_eq(c->refusal, "attention_chunk_size");
    cpparity_suite_free(&suite);
}

Test(case_file, defaults__merge_model_by_key_and_replace_other_keys) {
    cpparity_suite suite;
    load_ok(full_suite, &suite);
    const cpparity_case *c = &suite.cases[1];
    /* model keys the case did not set come from defaults */
    cr_assert_eq(c->model.vocab_size, 64);
    cr_assert_eq(c->model.num_attention_heads, 4);
    cr_assert_float_eq(c->model.rms_norm_eps, 1e-5, 1e-20);
    cr_assert_float_eq(c->model.rope_theta, 500000.0, 1e-9);
    /* keys the case did not set at all come from defaults */
    cr_assert_eq(c->cp_count, 2);
    cr_assert_eq(c->cp_sizes[1], 2);
    cr_assert_eq(c->dtype_count, 1);
    cr_assert_eq(c->dtypes[0], CPPARITY_DTYPE_F32);
    cr_assert_eq(c->seed, 1234);
    /* the first case's own cp list replaced the default one entirely */
    cr_assert_eq(suite.cases[0].cp_count, 3);
    cpparity_suite_free(&suite);
}

Test(case_file, defaults_rows__are_copied_into_every_case) {
    cpparity_suite suite;
    load_ok(CASE_A "  - name: b\n    cp: [4]\n", &suite);
    cr_assert_eq(suite.count, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(suite.cases[i].batch_size, 1);
        cr_assert_eq(suite.cases[i].rows[0].document_count, 1);
        cr_assert_eq(suite.cases[i].rows[0].document_lengths[0], 16);
    }
    cr_assert_neq(suite.cases[0].rows, suite.cases[1].rows);
    cr_assert_eq(suite.cases[1].cp_count, 1);
    cr_assert_eq(suite.cases[1].cp_sizes[0], 4);
    cpparity_suite_free(&suite);
}

Test(case_file, optional_keys__take_documented_defaults) {
    cpparity_suite suite;
    load_ok(CASE_A, &suite);
    const cpparity_case *c = &suite.cases[0];
    cr_assert_float_eq(c->model.rms_norm_eps, 1e-6, 1e-20);
    cr_assert_float_eq(c->model.rope_theta, 10000.0, 1e-9);
    cr_assert_eq(c->model.layer_types[0], CPPARITY_LAYER_FULL);
    cr_assert_eq(c->model.layer_types[1], CPPARITY_LAYER_FULL);
    cr_assert_eq(c->model.chunk_origin, CPPARITY_CHUNK_ORIGIN_ROW);
    cr_assert_not(c->model.tie_word_embeddings);
    cr_assert_eq(c->dtype_count, 1);
    cr_assert_eq(c->dtypes[0], CPPARITY_DTYPE_F32);
    cr_assert_eq(c->seed, 0);
    cr_assert_not(c->expect_refuse);
    cr_assert_str_empty(c->description);
    for (int dtype = 0; dtype < CPPARITY_DTYPE_COUNT; dtype++) {
        for (int kind = 0; kind < CPPARITY_KIND_COUNT; kind++) {
            cpparity_tolerance expected =
                cpparity_tolerance_default((cpparity_dtype)dtype, (cpparity_tensor_kind)kind);
            expect_tolerance(c, (cpparity_dtype)dtype, (cpparity_tensor_kind)kind, expected.ratio,
                             CPPARITY_ORIGIN_DEFAULT, expected.floor, CPPARITY_ORIGIN_DEFAULT,
                             expected.ceiling, CPPARITY_ORIGIN_DEFAULT);
        }
    }
    cpparity_suite_free(&suite);
}

Test(case_file, tolerances__record_default_suite_and_case_origins) {
    cpparity_suite suite;
    load_ok(full_suite, &suite);
    const cpparity_case *c = &suite.cases[0];
    cpparity_tolerance f32_logits =
        cpparity_tolerance_default(CPPARITY_DTYPE_F32, CPPARITY_KIND_LOGITS);
    cpparity_tolerance bf16_grads =
        cpparity_tolerance_default(CPPARITY_DTYPE_BF16, CPPARITY_KIND_GRADS);
    /* the case sets every field of f32 loss */
    expect_tolerance(c, CPPARITY_DTYPE_F32, CPPARITY_KIND_LOSS, 2.5, CPPARITY_ORIGIN_CASE, 1e-7,
                     CPPARITY_ORIGIN_CASE, 3.0, CPPARITY_ORIGIN_CASE);
    /* the suite sets the floor of f32 logits; the rest is built in */
    expect_tolerance(c, CPPARITY_DTYPE_F32, CPPARITY_KIND_LOGITS, f32_logits.ratio,
                     CPPARITY_ORIGIN_DEFAULT, 2e-6, CPPARITY_ORIGIN_SUITE, f32_logits.ceiling,
                     CPPARITY_ORIGIN_DEFAULT);
    /* the case sets only the ratio of bf16 grads */
    expect_tolerance(c, CPPARITY_DTYPE_BF16, CPPARITY_KIND_GRADS, 4.0, CPPARITY_ORIGIN_CASE,
                     bf16_grads.floor, CPPARITY_ORIGIN_DEFAULT, bf16_grads.ceiling,
                     CPPARITY_ORIGIN_DEFAULT);
    /* the second case sets none: the suite's floor still applies */
    expect_tolerance(&suite.cases[1], CPPARITY_DTYPE_F32, CPPARITY_KIND_LOGITS, f32_logits.ratio,
                     CPPARITY_ORIGIN_DEFAULT, 2e-6, CPPARITY_ORIGIN_SUITE, f32_logits.ceiling,
                     CPPARITY_ORIGIN_DEFAULT);
    cpparity_suite_free(&suite);
}

Test(case_file, case_tolerance__overrides_suite_field_only) {
    cpparity_suite suite;
    load_ok(DEFAULTS "  tolerances: {bf16: {loss: {floor: 0.02, ceiling: 0.1}}}\n"
                     "cases:\n"
                     "  - name: a\n"
                     "    tolerances: {bf16: {loss: {floor: 0.03}}}\n",
            &suite);
    cpparity_tolerance loss = cpparity_tolerance_default(CPPARITY_DTYPE_BF16, CPPARITY_KIND_LOSS);
    expect_tolerance(&suite.cases[0], CPPARITY_DTYPE_BF16, CPPARITY_KIND_LOSS, loss.ratio,
                     CPPARITY_ORIGIN_DEFAULT, 0.03, CPPARITY_ORIGIN_CASE, 0.1,
                     CPPARITY_ORIGIN_SUITE);
    cpparity_suite_free(&suite);
}

Test(case_file, numbers__accept_integer_and_exponent_forms) {
    cpparity_suite suite;
    load_ok(CASE_A "    model: {rms_norm_eps: 1e-6, rope_theta: 3}\n"
                   "  - name: b\n"
                   "    model: {rms_norm_eps: 1.0e-6, rope_theta: 2.5E+4}\n",
            &suite);
    cr_assert_float_eq(suite.cases[0].model.rms_norm_eps, 1e-6, 1e-20);
    cr_assert_float_eq(suite.cases[0].model.rope_theta, 3.0, 1e-12);
    cr_assert_float_eq(suite.cases[1].model.rms_norm_eps, 1e-6, 1e-20);
    cr_assert_float_eq(suite.cases[1].model.rope_theta, 25000.0, 1e-9);
    cpparity_suite_free(&suite);
}

Test(case_file, suite_find__returns_the_named_case_or_null) {
    cpparity_suite suite;
    load_ok(full_suite, &suite);
    cr_assert_eq(cpparity_suite_find(&suite, "chunked_v1.2"), &suite.cases[1]);
    cr_assert_eq(cpparity_suite_find(&suite, "full-left-padding"), &suite.cases[0]);
    cr_assert_null(cpparity_suite_find(&suite, "chunked"));
    cr_assert_null(cpparity_suite_find(&suite, ""));
    cpparity_suite_free(&suite);
    cr_assert_null(cpparity_suite_find(&suite, "chunked_v1.2"));
}

Test(case_file, suite_free__is_safe_on_a_zeroed_suite_and_twice) {
    cpparity_suite suite;
    memset(&suite, 0, sizeof suite);
    cpparity_suite_free(&suite);
    load_ok(full_suite, &suite);
    cpparity_suite_free(&suite);
    cpparity_suite_free(&suite);
    cr_assert_eq(suite.count, 0);
    cr_assert_null(suite.cases);
}

Test(case_file, suite_load__reads_a_file_and_names_it) {
    char path[] = "/tmp/cpparity-case-file-XXXXXX";
    int descriptor = mkstemp(path);
    cr_assert_geq(descriptor, 0, "mkstemp: %s", strerror(errno));
    size_t length = strlen(full_suite);
    cr_assert_eq(write(descriptor, full_suite, length), (ssize_t)length);
    close(descriptor);
    cpparity_suite suite;
    cpparity_error error;
    cpparity_status status = cpparity_suite_load(path, &suite, &error);
    unlink(path);
    cr_assert_eq(status, CPPARITY_OK, "%s", error.message);
    cr_assert_str_eq(suite.path, path);
    cr_assert_eq(suite.count, 2);
    cpparity_suite_free(&suite);
}

/* ---- errors ------------------------------------------------------------------------------- */

Test(case_file, unreadable_file__is_bad_input_naming_the_path) {
    cpparity_suite suite;
    cpparity_error error;
    const char *path = "/nonexistent-cpparity-dir/suite.yaml";
    cr_assert_eq(cpparity_suite_load(path, &suite, &error), CPPARITY_ERROR_INPUT);
    cr_assert_str_eq(
        error.message,
        "/nonexistent-cpparity-dir/suite.yaml: cannot read: No such file or directory");
    cr_assert_eq(suite.count, 0);
    cr_assert_null(suite.cases);
    cpparity_suite_free(&suite);
}

Test(case_file, yaml_syntax_error__names_line_and_column) {
    expect_input_error("cases:\n"
                       "  - name: a\n"
                       "    seq_len: 16: 3\n",
                       "3:16", "YAML syntax error: mapping values are not allowed");
}

Test(case_file, unclosed_flow_sequence__names_line_and_column) {
    expect_input_error(CASE_A "    cp: [1, 2\n"
                              "    seed: 3\n",
                       "10:9", "YAML syntax error");
}

Test(case_file, empty_text__is_an_error_at_the_start) {
    expect_input_error("", "1:1", "empty file");
}

Test(case_file, second_document__names_line_and_column) {
    expect_input_error(CASE_A "---\n"
                              "cases: []\n",
                       "10:1", "one YAML document");
}

Test(case_file, unknown_top_level_key__names_line_and_column) {
    expect_input_error(CASE_A "extra: 1\n", "9:1",
                       "unknown key 'extra' (expected one of: defaults, cases)");
}

Test(case_file, unknown_defaults_key__names_line_and_column) {
    expect_input_error("defaults:\n"
                       "  seq_len: 16\n"
                       "  colour: red\n"
                       "cases: [{name: a}]\n",
                       "3:3", "defaults: unknown key 'colour'");
}

Test(case_file, unknown_case_key__names_line_and_column) {
    expect_input_error(CASE_A "    sequence_length: 16\n", "9:5",
                       "case 'a': unknown key 'sequence_length'");
}

Test(case_file, unknown_model_key__names_line_and_column) {
    expect_input_error(CASE_A "    model: {hidden_size: 32, num_layers: 2}\n", "9:30",
                       "case 'a': model: unknown key 'num_layers'");
}

Test(case_file, unknown_row_key__names_line_and_column) {
    expect_input_error(CASE_A "    rows: [{documents: [16], padding: 0}]\n", "9:30",
                       "case 'a': rows[0]: unknown key 'padding'");
}

Test(case_file, unknown_tolerance_dtype__names_line_and_column) {
    expect_input_error(CASE_A "    tolerances: {f16: {loss: {ratio: 2}}}\n", "9:18",
                       "tolerances: unknown key 'f16'");
}

Test(case_file, unknown_tolerance_kind__names_line_and_column) {
    expect_input_error(CASE_A "    tolerances: {f32: {logit: {ratio: 2}}}\n", "9:24",
                       "tolerances.f32: unknown key 'logit'");
}

Test(case_file, unknown_tolerance_field__names_line_and_column) {
    expect_input_error(CASE_A "    tolerances: {f32: {loss: {rtol: 2}}}\n", "9:31",
                       "tolerances.f32.loss: unknown key 'rtol'");
}

Test(case_file, unknown_expect_key__names_line_and_column) {
    expect_input_error(CASE_A "    expect: {refuses: heads}\n", "9:14",
                       "expect: unknown key 'refuses'");
}

Test(case_file, duplicate_key__points_at_the_second_key) {
    expect_input_error(CASE_A "    seq_len: 16\n"
                              "    seq_len: 8\n",
                       "10:5", "duplicate key 'seq_len' (first at line 9)");
}

Test(case_file, duplicate_model_key__points_at_the_second_key) {
    expect_input_error(CASE_A "    model:\n"
                              "      head_dim: 8\n"
                              "      head_dim: 16\n",
                       "11:7", "model: duplicate key 'head_dim' (first at line 10)");
}

Test(case_file, string_for_integer__names_line_and_column) {
    expect_input_error(CASE_A "    seq_len: sixteen\n", "9:14",
                       "case 'a': seq_len: expected an integer, got 'sixteen'");
}

Test(case_file, quoted_integer__is_a_wrong_type) {
    expect_input_error(CASE_A "    seq_len: \"16\"\n", "9:14",
                       "seq_len: expected an integer, got the quoted string '16'");
}

Test(case_file, float_for_integer__is_a_wrong_type) {
    expect_input_error(CASE_A "    seed: 1.5\n", "9:11", "seed: expected an integer, got '1.5'");
}

Test(case_file, boolean_for_integer__is_a_wrong_type) {
    expect_input_error(CASE_A "    model: {head_dim: true}\n", "9:23",
                       "model.head_dim: expected an integer, got 'true'");
}

Test(case_file, sequence_for_mapping__is_a_wrong_type) {
    expect_input_error(CASE_A "    model: [1, 2]\n", "9:12",
                       "case 'a': model: expected a mapping, got a sequence");
}

Test(case_file, mapping_for_sequence__is_a_wrong_type) {
    expect_input_error(CASE_A "    cp: {size: 2}\n", "9:9", "cp: expected a sequence of cp sizes");
}

Test(case_file, word_for_boolean__is_a_wrong_type) {
    expect_input_error(CASE_A "    model:\n"
                              "      tie_word_embeddings: yes\n",
                       "10:28", "model.tie_word_embeddings: expected true or false, got 'yes'");
}

Test(case_file, word_for_number__is_a_wrong_type) {
    expect_input_error(CASE_A "    model:\n"
                              "      rms_norm_eps: tiny\n",
                       "10:21", "model.rms_norm_eps: expected a number, got 'tiny'");
}

Test(case_file, integer_overflow__is_refused) {
    expect_input_error(CASE_A "    seed: 99999999999999999999\n", "9:11",
                       "seed: integer out of range");
}

Test(case_file, negative_hidden_size__names_line_and_column) {
    expect_input_error(CASE_A "    model: {hidden_size: -4}\n", "9:26",
                       "model.hidden_size: must be >= 1, got -4");
}

Test(case_file, negative_left_padding__names_line_and_column) {
    expect_input_error(CASE_A "    rows: [{left_padding: -1, documents: [17]}]\n", "9:27",
                       "rows[0].left_padding: must be >= 0, got -1");
}

Test(case_file, zero_document_length__names_line_and_column) {
    expect_input_error(CASE_A "    rows: [{documents: [16, 0]}]\n", "9:29",
                       "rows[0].documents[1]: must be >= 1, got 0");
}

Test(case_file, window_below_one__names_line_and_column) {
    expect_input_error(CASE_A "    model:\n"
                              "      layer_types: [sliding_attention, full_attention]\n"
                              "      sliding_window: 0\n",
                       "11:23", "model.sliding_window: must be >= 1, got 0");
}

Test(case_file, chunk_below_one__names_line_and_column) {
    expect_input_error(CASE_A "    model:\n"
                              "      attention_chunk_size: 0\n",
                       "10:29", "model.attention_chunk_size: must be >= 1, got 0");
}

Test(case_file, missing_window_for_sliding_layer__points_at_model_key) {
    expect_input_error(CASE_A "    model:\n"
                              "      layer_types: [full_attention, sliding_attention]\n",
                       "9:5", "model.sliding_window: missing, required because layer 1");
}

Test(case_file, heads_not_multiple_of_kv_heads__points_at_model_key) {
    expect_input_error(CASE_A "    model:\n"
                              "      num_key_value_heads: 3\n",
                       "9:5",
                       "case 'a': model: num_attention_heads (4) must be a multiple of "
                       "num_key_value_heads (3)");
}

Test(case_file, invalid_model_from_defaults__points_at_case_name) {
    expect_input_error("defaults:\n"
                       "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2,\n"
                       "          num_attention_heads: 6, num_key_value_heads: 4, head_dim: 8,\n"
                       "          intermediate_size: 48}\n"
                       "  seq_len: 4\n"
                       "  rows: [{documents: [4]}]\n"
                       "  cp: [1]\n"
                       "cases:\n"
                       "  - name: first\n",
                       "9:11", "case 'first': model: num_attention_heads (6) must be a multiple");
}

Test(case_file, odd_head_dim__is_refused_by_validation) {
    expect_input_error(CASE_A "    model: {head_dim: 7}\n", "9:5", "head_dim must be even");
}

Test(case_file, layer_types_length__must_equal_num_hidden_layers) {
    expect_input_error(CASE_A "    model:\n"
                              "      layer_types: [full_attention]\n",
                       "10:20", "model.layer_types: lists 1 layer types, num_hidden_layers is 2");
}

Test(case_file, unknown_layer_type__names_line_and_column) {
    expect_input_error(CASE_A "    model:\n"
                              "      layer_types: [full_attention, global_attention]\n",
                       "10:37", "model.layer_types[1]: unknown layer type 'global_attention'");
}

Test(case_file, unknown_chunk_origin__names_line_and_column) {
    expect_input_error(CASE_A "    model: {chunk_origin: grid}\n", "9:27",
                       "model.chunk_origin: expected row, document or position, got 'grid'");
}

Test(case_file, row_not_adding_up__points_at_the_row) {
    expect_input_error(CASE_A "    rows:\n"
                              "      - {documents: [10, 6]}\n"
                              "      - {left_padding: 2, documents: [13]}\n",
                       "11:9",
                       "rows[1]: adds up to 15 tokens (left_padding 2 + documents 13 + "
                       "right_padding 0), seq_len is 16");
}

Test(case_file, default_rows_against_case_seq_len__point_at_the_default_row) {
    expect_input_error(CASE_A "    seq_len: 8\n    cp: [1]\n", "5:10",
                       "case 'a': rows[0]: adds up to 16 tokens");
}

Test(case_file, empty_documents__need_padding_to_fill_the_row) {
    expect_input_error(CASE_A "    rows: [{documents: [], left_padding: 4}]\n", "9:12",
                       "rows[0]: adds up to 4 tokens");
}

Test(case_file, duplicate_case_name__names_both_lines) {
    expect_input_error(CASE_A "  - name: b\n"
                              "  - name: a\n",
                       "10:11",
                       "case 'a': name: duplicate case name (first used by the case at "
                       "line 8)");
}

Test(case_file, bad_case_name__names_line_and_column) {
    expect_input_error(CASE_A "  - name: two words\n", "9:11",
                       "name: 'two words' must be non-empty and use only letters");
}

Test(case_file, missing_seq_len__points_at_the_case) {
    expect_input_error("defaults:\n"
                       "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2,\n"
                       "          num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8,\n"
                       "          intermediate_size: 48}\n"
                       "  rows: [{documents: [4]}]\n"
                       "  cp: [1]\n"
                       "cases:\n"
                       "  - name: a\n",
                       "8:5", "case 'a': seq_len: missing");
}

Test(case_file, missing_model_size__points_at_the_case_name) {
    expect_input_error("defaults:\n"
                       "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2,\n"
                       "          num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8}\n"
                       "  seq_len: 4\n"
                       "  rows: [{documents: [4]}]\n"
                       "  cp: [1]\n"
                       "cases:\n"
                       "  - name: a\n",
                       "8:11", "case 'a': model.intermediate_size: missing");
}

Test(case_file, missing_name__points_at_the_case) {
    expect_input_error(CASE_A "  - seq_len: 16\n", "9:5", "cases[1]: name: missing");
}

Test(case_file, missing_cases__points_at_the_top) {
    expect_input_error(DEFAULTS, "1:1", "cases: missing");
}

Test(case_file, empty_cases_list__names_line_and_column) {
    expect_input_error(DEFAULTS "cases: []\n", "7:8", "cases: must list at least one of cases");
}

Test(case_file, case_that_is_not_a_mapping__names_line_and_column) {
    expect_input_error(CASE_A "  - just-a-name\n", "9:5", "cases[1]: expected a mapping");
}

Test(case_file, cp_size_above_seq_len__names_line_and_column) {
    expect_input_error(CASE_A "    cp: [1, 32]\n", "9:13",
                       "cp[1]: cp size 32 exceeds seq_len (16)");
}

Test(case_file, duplicate_cp_size__names_line_and_column) {
    expect_input_error(CASE_A "    cp: [1, 2, 1]\n", "9:16",
                       "cp[2]: duplicate cp size 1 (also cp[0])");
}

Test(case_file, empty_cp_list__names_line_and_column) {
    expect_input_error(CASE_A "    cp: []\n", "9:9", "cp: must list at least one of cp sizes");
}

Test(case_file, too_many_cp_sizes__points_at_the_first_extra) {
    expect_input_error("defaults:\n"
                       "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2,\n"
                       "          num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8,\n"
                       "          intermediate_size: 48}\n"
                       "  seq_len: 32\n"
                       "  rows: [{documents: [32]}]\n"
                       "  cp: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]\n"
                       "cases: [{name: a}]\n",
                       "7:63", "defaults: cp: at most 16 cp sizes");
}

Test(case_file, unknown_dtype__names_line_and_column) {
    expect_input_error(CASE_A "    dtypes: [f32, f16]\n", "9:19",
                       "dtypes[1]: unknown dtype 'f16' (expected f32 or bf16)");
}

Test(case_file, duplicate_dtype__names_line_and_column) {
    expect_input_error(CASE_A "    dtypes: [bf16, bf16]\n", "9:20",
                       "dtypes[1]: duplicate dtype 'bf16'");
}

Test(case_file, layouts_and_algorithms__default_to_contiguous_ulysses_and_are_read) {
    cpparity_suite suite;
    load_ok(CASE_A "  - name: b\n"
                   "    layouts: [zigzag, round-robin, contiguous]\n"
                   "    cp: [1, 4]\n"
                   "    algorithms: [ring, hybrid:2x2]\n",
            &suite);
    const cpparity_case *a = &suite.cases[0], *b = &suite.cases[1];
    cr_expect_eq(a->layout_count, 1);
    cr_expect_eq(a->layouts[0], CPPARITY_LAYOUT_CONTIGUOUS);
    cr_expect_eq(a->algorithm_count, 1);
    cr_expect_eq(a->algorithms[0].kind, CPPARITY_ALGORITHM_ULYSSES);
    cr_expect_eq(b->layout_count, 3);
    cr_expect_eq(b->layouts[0], CPPARITY_LAYOUT_ZIGZAG);
    cr_expect_eq(b->layouts[1], CPPARITY_LAYOUT_ROUND_ROBIN);
    cr_expect_eq(b->algorithm_count, 2);
    cr_expect_eq(b->algorithms[0].kind, CPPARITY_ALGORITHM_RING);
    cr_expect_eq(b->algorithms[1].kind, CPPARITY_ALGORITHM_HYBRID);
    cr_expect_eq(b->algorithms[1].ulysses_degree, 2);
    cr_expect_eq(b->algorithms[1].ring_degree, 2);
    cpparity_suite_free(&suite);
}

Test(case_file, unknown_or_duplicate_layout_or_algorithm__names_line_and_column) {
    expect_input_error(CASE_A "    layouts: [contiguous, striped]\n", "9:27",
                       "layouts[1]: unknown layout 'striped' (expected contiguous, zigzag or "
                       "round-robin)");
    expect_input_error(CASE_A "    algorithms: [ring, ring]\n", "9:24",
                       "algorithms[1]: duplicate algorithm 'ring'");
    expect_input_error(CASE_A "    algorithms: [ulysses, hybrid]\n", "9:27",
                       "algorithms[1]: unknown algorithm 'hybrid' (expected ulysses, ring or "
                       "hybrid:UxR)");
    expect_input_error(CASE_A "    algorithms: [hybrid:2x1]\n", "9:18",
                       "algorithms[0]: 'hybrid:2x1' is not hybrid:UxR with U and R from 2 up");
    /* DEFAULTS' cp is [1, 2]: hybrid:2x2 needs cp 4 */
    expect_input_error(CASE_A "    algorithms: [hybrid:2x2]\n", "9:18",
                       "algorithms[0]: hybrid:2x2 runs at cp 4, which cp does not list");
}

Test(case_file, layouts_on_an_attention_level_case__are_refused) {
    expect_input_error(CASE_A "    level: attention\n"
                              "    cp: [1]\n"
                              "    layouts: [zigzag]\n",
                       "11:14", "layouts: an attention-level case has no context-parallel group");
}

Test(case_file, tolerance_ratio_below_one__names_line_and_column) {
    expect_input_error(CASE_A "    tolerances: {f32: {loss: {ratio: 0.5}}}\n", "9:38",
                       "tolerances.f32.loss.ratio: must be >= 1, got 0.5");
}

Test(case_file, tolerance_floor_not_positive__names_line_and_column) {
    expect_input_error(CASE_A "    tolerances: {f32: {loss: {floor: 0}}}\n", "9:38",
                       "tolerances.f32.loss.floor: must be > 0, got 0");
}

Test(case_file, empty_refusal_text__names_line_and_column) {
    expect_input_error(CASE_A "    expect: {refuse: \"\"}\n", "9:22",
                       "expect.refuse: must not be empty");
}

Test(case_file, error_in_defaults__is_reported_as_defaults) {
    expect_input_error("defaults:\n"
                       "  seed: -1\n"
                       "cases: [{name: a}]\n",
                       "2:9", "defaults: seed: must be >= 0, got -1");
}

Test(case_file, top_level_sequence__is_a_wrong_type) {
    expect_input_error("- name: a\n", "1:1", "expected a mapping with 'defaults' and 'cases'");
}

Test(case_file, padding_positions__continue_is_read_and_zero_is_the_default) {
    cpparity_suite suite;
    load_ok(CASE_A "    rows:\n"
                   "      - {left_padding: 2, documents: [14], padding_positions: continue}\n"
                   "      - {documents: [16]}\n",
            &suite);
    cr_expect(suite.cases[0].rows[0].padding_continues);
    cr_expect_not(suite.cases[0].rows[1].padding_continues);
    cpparity_suite_free(&suite);
}

Test(case_file, padding_positions_unknown_value__names_line_and_column) {
    expect_input_error(CASE_A "    rows:\n"
                              "      - {documents: [16], padding_positions: arange}\n",
                       "10:46", "rows[0].padding_positions: expected zero or continue");
}

/* --- limits (harness/suite/yaml_limits.h) ------------------------------------------------------
 */

/* text of `cases: ` followed by depth nested flow collections, open then closed. */
static char *nested_text(int depth, const char *open, const char *close, const char *inner) {
    const size_t size =
        strlen("cases: ") + (size_t)depth * (strlen(open) + strlen(close)) + strlen(inner) + 2;
    char *text = malloc(size);
    cr_assert_not_null(text);
    size_t used = (size_t)snprintf(text, size, "cases: ");
    for (int i = 0; i < depth; i++) {
        used += (size_t)snprintf(text + used, size - used, "%s", open);
    }
    used += (size_t)snprintf(text + used, size - used, "%s", inner);
    for (int i = 0; i < depth; i++) {
        used += (size_t)snprintf(text + used, size - used, "%s", close);
    }
    return text;
}

Test(case_file, nesting_deeper_than_the_limit__refused_at_the_first_collection_over_it_at_once) {
    /* 100,000 nested flow sequences took libyaml 30-80 s before the limit; now the load stops
     * at collection 65. Timing is not asserted (machines are noisy): the position is, and it
     * is only reachable by stopping there. */
    char *text = nested_text(100000, "[", "]", "");
    expect_input_error(text, "1:71", "nested more than 64 deep");
    free(text);
    text = nested_text(100000, "{a: ", "}", "1");
    expect_input_error(text, "1:260", "nested more than 64 deep");
    free(text);
}

Test(case_file, nesting_at_the_limit__is_not_refused_for_depth) {
    /* 63 sequences inside `cases:`'s mapping: 64 collections, the most allowed; the loader then
     * refuses the content (a case must be a mapping), not the depth */
    char *text = nested_text(63, "[", "]", "");
    expect_input_error(text, "1:9", "expected a mapping");
    free(text);
    text = nested_text(64, "[", "]", ""); /* one more: over it, at the 64th '[' (column 71) */
    expect_input_error(text, "1:71", "nested more than 64 deep");
    free(text);
}

Test(case_file, aliases_expanding_past_the_node_limit__refused_where_the_expansion_happens) {
    /* 1000 × 1000 × 1000 nodes once expanded, from about 8 KB of text */
    char text[16384];
    size_t used = (size_t)snprintf(text, sizeof text, "x: &a [");
    for (int i = 0; i < 1000; i++) {
        used += (size_t)snprintf(text + used, sizeof text - used, "%s1", i > 0 ? "," : "");
    }
    used += (size_t)snprintf(text + used, sizeof text - used, "]\ny: &b [");
    for (int i = 0; i < 1000; i++) {
        used += (size_t)snprintf(text + used, sizeof text - used, "%s*a", i > 0 ? "," : "");
    }
    used += (size_t)snprintf(text + used, sizeof text - used, "]\nz: [");
    for (int i = 0; i < 1000; i++) {
        used += (size_t)snprintf(text + used, sizeof text - used, "%s*b", i > 0 ? "," : "");
    }
    snprintf(text + used, sizeof text - used, "]\ncases: []\n");
    expect_input_error(text, "3:4", "nodes once aliases are expanded");
}

Test(case_file, alias_inside_the_node_it_names__refused_as_a_cycle) {
    expect_input_error("cases: &c [*c]\n", "1:8", "a cycle");
}

Test(case_file, aliases_within_the_limits__still_work) {
    cpparity_suite suite;
    load_ok(DEFAULTS "cases:\n  - name: a\n    rows: &rows [{documents: [16]}]\n"
                     "  - name: b\n    rows: *rows\n",
            &suite);
    cr_expect_eq(suite.count, 2);
    cr_expect_eq(suite.cases[1].rows[0].document_lengths[0], 16);
    cpparity_suite_free(&suite);
}

Test(case_file, text_over_the_size_limit__refused_before_it_is_read) {
    /* the length alone decides: nothing past the first byte is read, so a short buffer is safe */
    cpparity_suite suite;
    cpparity_error error;
    cr_expect_eq(cpparity_suite_load_text("x", YAML_LIMIT_BYTES + 1, "big.yaml", &suite, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "big.yaml: ") == error.message &&
                  strstr(error.message, "256 MiB") != NULL,
              "%s", error.message);
}

Test(case_file, defaults_rows_copied_into_many_cases__refused_past_the_row_budget_at_once) {
    /* 1000 rows of 2000 one-token documents in the defaults (2 million entries, from 7 KB of
     * aliases), given to 12 cases: the eighth copy passes the 16M budget. Before the budget, 300
     * such cases took 4.7 GB; now the load stops at case c7, naming it. */
    const size_t size = 16384;
    char *text = malloc(size);
    cr_assert_not_null(text);
    size_t used = (size_t)snprintf(text, size,
                                   "defaults:\n  model: {vocab_size: 64, hidden_size: 32, "
                                   "num_hidden_layers: 1, num_attention_heads: 4,\n"
                                   "          num_key_value_heads: 2, head_dim: 8, "
                                   "intermediate_size: 48}\n  seq_len: 2000\n  cp: [1]\n"
                                   "  rows: [&r {documents: [1");
    for (int d = 1; d < 2000; d++) {
        used += (size_t)snprintf(text + used, size - used, ",1");
    }
    used += (size_t)snprintf(text + used, size - used, "]}");
    for (int r = 1; r < 1000; r++) {
        used += (size_t)snprintf(text + used, size - used, ",*r");
    }
    used += (size_t)snprintf(text + used, size - used, "]\ncases:\n");
    for (int c = 0; c < 12; c++) {
        used += (size_t)snprintf(text + used, size - used, "  - {name: c%d}\n", c);
    }
    cpparity_suite suite;
    cpparity_error error;
    cr_expect_eq(cpparity_suite_load_text(text, used, "suite.yaml", &suite, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "case 'c7'") != NULL &&
                  strstr(error.message, "rows and document lengths") != NULL,
              "%s", error.message);
    cr_expect_eq(suite.count, 0);
    free(text);
}

Test(case_file, level__attention_is_read_and_model_is_the_default) {
    cpparity_suite suite;
    load_ok(DEFAULTS "cases:\n  - name: a\n  - name: b\n    level: attention\n    cp: [1]\n"
                     "    model: {head_dim: 9}\n",
            &suite);
    cr_expect_eq(suite.cases[0].level, CPPARITY_LEVEL_MODEL);
    cr_expect_eq(suite.cases[1].level, CPPARITY_LEVEL_ATTENTION);
    cr_expect_eq(suite.cases[1].model.head_dim, 9, "no rotary embedding: an odd head dim is fine");
    cpparity_suite_free(&suite);
}

Test(case_file, level__attention_needs_cp_1_and_model_keeps_head_dim_even) {
    expect_input_error(CASE_A "    level: attention\n", "6:7", "cp must be [1]");
    expect_input_error(CASE_A "    model: {head_dim: 9}\n", "9:5", "head_dim must be even");
    expect_input_error(CASE_A "    level: kernel\n", "9:12", "expected model or attention");
}

/* --- sweeps (cases/README.md, Sweeps) --------------------------------------------------------- */

/* A sweep over tiles 16 and 32 (multiples 2, residues 1): edges 15 16 17 31 32 33 63 64 65, each
 * a case with S = edge + 32, the rows and layers the README gives, the family named. */
Test(case_file, sweep__generates_the_family_at_every_edge) {
    cpparity_suite suite;
    load_ok(
        "defaults:\n"
        "  model: {vocab_size: 64, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,\n"
        "          num_key_value_heads: 2, head_dim: 8, intermediate_size: 48}\n"
        "  seq_len: 16\n"
        "  rows: [{documents: [16]}]\n"
        "  cp: [1]\n"
        "  level: attention\n"
        "cases:\n"
        "  - name: before\n"
        "  - name: edges\n"
        "    seed: 7\n"
        "    sweep: {tiles: [32, 16], multiples: 2, residues: 1}\n"
        "  - name: after\n",
        &suite);
    const int64_t edges[] = {15, 16, 17, 31, 32, 33, 63, 64, 65};
    const int64_t count = (int64_t)(sizeof edges / sizeof *edges);
    cr_assert_eq(suite.count, count + 2);
    cr_assert_str_eq(suite.cases[0].name, "before");
    cr_assert_str_empty(suite.cases[0].family);
    cr_assert_str_eq(suite.cases[count + 1].name, "after");
    for (int64_t i = 0; i < count; i++) {
        const cpparity_case *c = &suite.cases[1 + i];
        char name[64];
        snprintf(name, sizeof name, "edges.%lld", (long long)edges[i]);
        cr_assert_str_eq(c->name, name);
        cr_assert_str_eq(c->family, "edges");
        cr_assert_eq(c->seed, 7);
        cr_assert_eq(c->line, 10);
        const int64_t S = edges[i] + 32;
        cr_assert_eq(c->seq_len, S, "%s: seq_len %lld", name, (long long)c->seq_len);
        cr_assert_eq(c->batch_size, 3);
        cr_assert_eq(c->rows[0].document_count, 1);
        cr_assert_eq(c->rows[0].document_lengths[0], S);
        cr_assert_eq(c->rows[1].document_count, 2);
        cr_assert_eq(c->rows[1].document_lengths[0], edges[i]);
        cr_assert_eq(c->rows[1].document_lengths[1], S - edges[i]);
        cr_assert_eq(c->rows[2].left_padding, edges[i]);
        cr_assert(c->rows[2].padding_continues);
        cr_assert_eq(c->rows[2].document_lengths[0], S - edges[i]);
        cr_assert_eq(c->model.num_hidden_layers, 3);
        cr_assert_eq(c->model.layer_types[0], CPPARITY_LAYER_FULL);
        cr_assert_eq(c->model.layer_types[1], CPPARITY_LAYER_SLIDING);
        cr_assert_eq(c->model.layer_types[2], CPPARITY_LAYER_CHUNKED);
        cr_assert_eq(c->model.sliding_window, edges[i]);
        cr_assert_eq(c->model.attention_chunk_size, edges[i]);
        cr_assert_eq(c->model.num_key_value_heads, 2);
    }
    cpparity_suite_free(&suite);
}

/* vary picks the quantities, gqa_groups multiplies the family and sets the kv heads. */
Test(case_file, sweep__vary_and_groups) {
    cpparity_suite suite;
    load_ok(CASE_A "    sweep: {tiles: [8], residues: 0, vary: [window], gqa_groups: [1, 4]}\n",
            &suite);
    cr_assert_eq(suite.count, 2);
    cr_assert_str_eq(suite.cases[0].name, "a.8.g1");
    cr_assert_str_eq(suite.cases[1].name, "a.8.g4");
    cr_assert_eq(suite.cases[0].model.num_key_value_heads, 4);
    cr_assert_eq(suite.cases[1].model.num_key_value_heads, 1);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(suite.cases[i].batch_size, 1);
        cr_assert_eq(suite.cases[i].seq_len, 16);
        cr_assert_eq(suite.cases[i].model.num_hidden_layers, 1);
        cr_assert_eq(suite.cases[i].model.layer_types[0], CPPARITY_LAYER_SLIDING);
    }
    cpparity_suite_free(&suite);
}

Test(case_file, sweep__refuses_what_it_generates_and_bad_parameters) {
    expect_input_error(CASE_A "    seq_len: 20\n    sweep: {tiles: [16]}\n", "9:14",
                       "case 'a': seq_len: a case with a sweep has its seq_len generated");
    expect_input_error(CASE_A "    model: {sliding_window: 3}\n    sweep: {tiles: [16]}\n", "9:29",
                       "case 'a': model.sliding_window: set by the case's sweep");
    expect_input_error(CASE_A "    sweep: {residues: 1}\n", "9:12", "sweep.tiles: missing");
    expect_input_error(CASE_A "    sweep: {tiles: [16, 0]}\n", "9:25", "sweep.tiles[1]");
    expect_input_error(CASE_A "    sweep: {tiles: [16, 16]}\n", "9:25", "duplicate 16");
    expect_input_error(CASE_A "    sweep: {tiles: [16], gqa_groups: [3]}\n", "9:39",
                       "sweep.gqa_groups[0]: group 3 does not divide num_attention_heads (4)");
    expect_input_error(CASE_A "    sweep: {tiles: [16], vary: [window, window]}\n", "9:41",
                       "duplicate quantity 'window'");
    expect_input_error(CASE_A "    sweep: {tiles: [16], edge: 3}\n", "9:26", "edge");
    expect_input_error(CASE_A "    sweep: {tiles: [1], residues: 0, multiples: 1}\n"
                              "  - name: a.1\n",
                       "10:11", "case 'a.1': name: duplicate case name");
}
