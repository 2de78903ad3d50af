/*
 * test_fixtures.c — deterministic inputs: row layouts become the masks, positions and shifted
 * labels masks.md defines; weights are pure functions of (seed, name, index), never 0, with
 * norm weights near 1 but not 1, and exactly the values of the documented formula; the cache of
 * the last weights filled hands out the same bits and never the weights of another table or seed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model_parameters.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_cache.h"
#include "fixtures/parameter_fixture.h"
#include "fixtures/random.h"

Test(fixtures, packed_row_with_padding__positions_restart_and_labels_stay_in_documents) {
    int64_t lengths[] = {3, 1, 2};
    const cpparity_row_layout rows[] = {{2, 3, lengths, 1, false, NULL}};
    cpparity_batch batch;
    cr_assert_eq(fixture_batch_build(&batch, rows, 1, 9, 100, 5, NULL), CPPARITY_OK);
    const int8_t mask[9] = {0, 0, 1, 1, 1, 1, 1, 1, 0};
    const int64_t positions[9] = {0, 0, 0, 1, 2, 0, 0, 1, 0};
    for (int t = 0; t < 9; t++) {
        cr_expect_eq(batch.attention_mask[t], mask[t], "attention_mask[%d]", t);
        cr_expect_eq(batch.position_ids[t], positions[t], "position_ids[%d]", t);
    }
    /* labels: the next token of the same document; -100 at a document's last token, on a
     * length-1 document and on padding */
    const int has_label[9] = {0, 0, 1, 1, 0, 0, 1, 0, 0};
    for (int t = 0; t < 9; t++) {
        if (has_label[t]) {
            cr_expect_eq(batch.labels[t], batch.input_ids[t + 1], "labels[%d]", t);
        } else {
            cr_expect_eq(batch.labels[t], CPPARITY_IGNORE_INDEX, "labels[%d] must be ignored", t);
        }
    }
    cpparity_batch_free(&batch);
}

Test(fixtures, padding_positions_continue__padding_counts_through_the_neighbouring_documents) {
    int64_t lengths[] = {3, 2};
    const cpparity_row_layout rows[] = {{2, 2, lengths, 2, true, NULL}};
    cpparity_batch batch;
    cr_assert_eq(fixture_batch_build(&batch, rows, 1, 9, 100, 5, NULL), CPPARITY_OK);
    /* left padding 0 1, first document continues 2 3 4, second restarts 0 1, right padding 2 3 */
    const int64_t positions[9] = {0, 1, 2, 3, 4, 0, 1, 2, 3};
    for (int t = 0; t < 9; t++) {
        cr_expect_eq(batch.position_ids[t], positions[t], "position_ids[%d]", t);
    }
    cr_expect_eq(batch.labels[1], CPPARITY_IGNORE_INDEX, "padding never has a label");
    cr_expect_eq(batch.labels[6], CPPARITY_IGNORE_INDEX, "the token before padding has none");
    cpparity_batch_free(&batch);
}

Test(fixtures, start_positions__jump_or_continue_and_labels_follow_the_positions) {
    /* documents of 3, 2 and 2 tokens declared to start at positions 5, 100 and 102: the first
     * starts mid-document, the second jumps (a new document), the third continues the second
     * (one document by masks.md's definition, so the label crosses the layout's boundary) */
    int64_t lengths[] = {3, 2, 2}, starts[] = {5, 100, 102};
    const cpparity_row_layout rows[] = {{1, 3, lengths, 0, true, starts}};
    cpparity_batch batch;
    cr_assert_eq(fixture_batch_build(&batch, rows, 1, 8, 100, 5, NULL), CPPARITY_OK);
    const int64_t positions[8] = {0, 5, 6, 7, 100, 101, 102, 103};
    for (int t = 0; t < 8; t++) {
        cr_expect_eq(batch.position_ids[t], positions[t], "position_ids[%d]", t);
    }
    cr_expect_eq(batch.labels[3], CPPARITY_IGNORE_INDEX, "position 7 -> 100 is a jump");
    cr_expect_eq(batch.labels[5], batch.input_ids[6], "position 101 -> 102 continues");
    cr_expect_eq(batch.labels[0], CPPARITY_IGNORE_INDEX, "padding never has a label");
    cpparity_batch_free(&batch);
}

Test(fixtures, input_ids__depend_only_on_seed_and_global_index) {
    int64_t long_row[] = {12}, short_rows[] = {5, 7};
    const cpparity_row_layout one[] = {{0, 1, long_row, 0, false, NULL}};
    const cpparity_row_layout packed[] = {{0, 2, short_rows, 0, false, NULL}};
    cpparity_batch a, b, other_seed;
    cr_assert_eq(fixture_batch_build(&a, one, 1, 12, 1000, 9, NULL), CPPARITY_OK);
    cr_assert_eq(fixture_batch_build(&b, packed, 1, 12, 1000, 9, NULL), CPPARITY_OK);
    cr_assert_eq(fixture_batch_build(&other_seed, one, 1, 12, 1000, 10, NULL), CPPARITY_OK);
    cr_expect(memcmp(a.input_ids, b.input_ids, 12 * sizeof(int64_t)) == 0,
              "token ids must not depend on the document layout");
    cr_expect(memcmp(a.input_ids, other_seed.input_ids, 12 * sizeof(int64_t)) != 0,
              "another seed must give other tokens");
    cpparity_batch_free(&a);
    cpparity_batch_free(&b);
    cpparity_batch_free(&other_seed);
}

Test(fixtures, row_not_adding_up__is_an_input_error) {
    int64_t lengths[] = {4};
    const cpparity_row_layout rows[] = {{1, 1, lengths, 1, false, NULL}};
    cpparity_batch batch;
    cpparity_error error;
    cr_expect_eq(fixture_batch_build(&batch, rows, 1, 7, 100, 1, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "6 tokens") != NULL, "%s", error.message);
}

/* A model of small sizes with `layers` layers. */
static cpparity_model_config small_config(int64_t layers) {
    cpparity_model_config config = {0};
    config.vocab_size = 50;
    config.hidden_size = 16;
    config.num_hidden_layers = layers;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 2;
    config.head_dim = 4;
    config.intermediate_size = 24;
    config.rms_norm_eps = 1e-6;
    config.rope_theta = 10000.0;
    return config;
}

Test(fixtures, weights__nonzero_pure_and_norms_near_but_not_one) {
    const cpparity_model_config config = small_config(2);
    cpparity_tensor_table table = {0};
    cr_assert_eq(cpparity_model_parameter_table(&config, &table, NULL), CPPARITY_OK);
    double *values = malloc((size_t)table.total * sizeof(double));
    fixture_fill_parameters(values, &table, 42);
    for (int64_t e = 0; e < table.count; e++) {
        const cpparity_tensor_entry *entry = &table.entries[e];
        const int norm = entry->rank == 1;
        double sum_of_squares = 0.0;
        for (int64_t i = 0; i < entry->count; i++) {
            const double value = values[entry->offset + i];
            cr_assert_neq(value, 0.0, "%s[%lld] is 0", entry->name, (long long)i);
            if (norm) {
                cr_assert(value != 1.0 && fabs(value - 1.0) <= 0.25, "%s[%lld] = %g", entry->name,
                          (long long)i, value);
            }
            /* any rank can compute any element alone: the value is a pure function */
            cr_assert_eq(fixture_parameter_value(42, entry, i), value);
            sum_of_squares += value * value;
        }
        if (!norm) {
            /* standard deviation 1/sqrt(fan_in) (1 for the embedding); over >= 64 samples the
             * estimate stays within a factor 1.5 of it */
            const double expected = strcmp(entry->name, "model.embed_tokens.weight") == 0
                                        ? 1.0
                                        : 1.0 / sqrt((double)entry->shape[1]);
            const double measured = sqrt(sum_of_squares / (double)entry->count);
            cr_expect(measured > expected / 1.5 && measured < expected * 1.5,
                      "%s: standard deviation %g, expected about %g", entry->name, measured,
                      expected);
        }
    }
    free(values);
    cpparity_tensor_table_free(&table);
}

Test(fixtures, counter_based_values__do_not_depend_on_the_order_they_are_drawn) {
    const uint64_t stream = fixture_stream("q");
    const double late = fixture_uniform(3, stream, 1000);
    for (uint64_t i = 0; i < 1000; i++) {
        (void)fixture_uniform(3, stream, i);
    }
    cr_expect_eq(fixture_uniform(3, stream, 1000), late);
    cr_expect_neq(fixture_uniform(3, stream, 1000), fixture_uniform(3, fixture_stream("k"), 1000));
}

static const cpparity_tensor_entry *entry_named(const cpparity_tensor_table *table,
                                                const char *name) {
    for (int64_t e = 0; e < table->count; e++) {
        if (strcmp(table->entries[e].name, name) == 0) {
            return &table->entries[e];
        }
    }
    cr_assert_fail("no tensor %s", name);
    return NULL;
}

Test(fixtures, weights__are_the_documented_formula_bit_for_bit) {
    /* Worked out apart from this code (Python integers and floats: splitmix64 over FNV-1a of the
     * name, Irwin-Hall of four uniforms times sqrt(0.75) over sqrt(fan_in); norms 1 + u/4), so a
     * rewrite of the generator that changes any weight of any suite fails here. */
    const cpparity_model_config config = small_config(2);
    cpparity_tensor_table table = {0};
    cr_assert_eq(cpparity_model_parameter_table(&config, &table, NULL), CPPARITY_OK);
    cr_expect_eq(fixture_parameter_value(42, entry_named(&table, "model.embed_tokens.weight"), 7),
                 0x1.05b2f7ec4f8b1p+1);
    cr_expect_eq(fixture_parameter_value(
                     42, entry_named(&table, "model.layers.1.self_attn.k_proj.weight"), 5),
                 0x1.323de749edfc7p-2);
    cr_expect_eq(fixture_parameter_value(
                     42, entry_named(&table, "model.layers.0.input_layernorm.weight"), 3),
                 0x1.224b669541e12p+0);
    cpparity_tensor_table_free(&table);
}

/* Fills through the cache and directly; every element must be the same bits. */
static void expect_cached_fill_exact(const cpparity_tensor_table *table, uint64_t seed) {
    double *cached = malloc((size_t)table->total * sizeof(double));
    double *direct = malloc((size_t)table->total * sizeof(double));
    cr_assert(cached != NULL && direct != NULL);
    fixture_fill_parameters_cached(cached, table, seed);
    fixture_fill_parameters(direct, table, seed);
    cr_expect_eq(memcmp(cached, direct, (size_t)table->total * sizeof(double)), 0,
                 "the cache handed out other weights (seed %llu, %lld elements)",
                 (unsigned long long)seed, (long long)table->total);
    free(cached);
    free(direct);
}

Test(fixtures, parameter_cache__same_bits_and_never_another_table_or_seed) {
    cpparity_model_config config = small_config(2);
    cpparity_tensor_table two = {0}, three = {0}, wider = {0};
    cr_assert_eq(cpparity_model_parameter_table(&config, &two, NULL), CPPARITY_OK);
    config.num_hidden_layers = 3;
    cr_assert_eq(cpparity_model_parameter_table(&config, &three, NULL), CPPARITY_OK);
    config.num_hidden_layers = 2;
    config.intermediate_size = 32;
    cr_assert_eq(cpparity_model_parameter_table(&config, &wider, NULL), CPPARITY_OK);
    expect_cached_fill_exact(&two, 1);
    expect_cached_fill_exact(&two, 1);   /* from the cache */
    expect_cached_fill_exact(&two, 2);   /* another seed */
    expect_cached_fill_exact(&three, 2); /* another table, same seed */
    expect_cached_fill_exact(&wider, 2); /* same tensor names, other shapes */
    expect_cached_fill_exact(&two, 2);
    /* a table with the same shapes whose tensor is renamed: its own stream, its own weights */
    cpparity_tensor_table renamed = {0};
    config.intermediate_size = 24;
    cr_assert_eq(cpparity_model_parameter_table(&config, &renamed, NULL), CPPARITY_OK);
    snprintf(renamed.entries[1].name, sizeof renamed.entries[1].name, "renamed.weight");
    expect_cached_fill_exact(&renamed, 2);
    fixture_parameter_cache_clear();
    expect_cached_fill_exact(&two, 2);
    fixture_parameter_cache_clear();
    cpparity_tensor_table_free(&two);
    cpparity_tensor_table_free(&three);
    cpparity_tensor_table_free(&wider);
    cpparity_tensor_table_free(&renamed);
}

Test(fixtures, parameter_cache__tables_above_its_limit_are_filled_directly) {
    cpparity_model_config config = small_config(1);
    config.vocab_size = (PARAMETER_CACHE_MAX_BYTES / (int64_t)sizeof(double)) / 16 + 1;
    cpparity_tensor_table table = {0};
    cr_assert_eq(cpparity_model_parameter_table(&config, &table, NULL), CPPARITY_OK);
    cr_assert_gt(table.total * (int64_t)sizeof(double), PARAMETER_CACHE_MAX_BYTES);
    expect_cached_fill_exact(&table, 5);
    expect_cached_fill_exact(&table, 6);
    fixture_parameter_cache_clear();
    cpparity_tensor_table_free(&table);
}
