/*
 * test_reference_model.c — the float64 reference model: central finite differences on every
 * parameter tensor for each layer type, and metamorphic properties that need no second
 * implementation (packing, padding on either side, W or C >= S, tied heads).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "reference/model.h"
#include "reference/model_layers.h"
#include "tests/support/test_models.h"

/* A model with fixture weights and a batch from layouts; both released by the caller. */
static void build(reference_model *model, cpparity_batch *batch,
                  const cpparity_model_config *config, const cpparity_row_layout *rows,
                  int64_t batch_size, int64_t seq_len, uint64_t seed) {
    cpparity_error error;
    cr_assert_eq(reference_model_init(model, config, batch_size, seq_len, &error), CPPARITY_OK,
                 "%s", error.message);
    fixture_fill_parameters(model->parameters, &model->parameter_table, seed);
    cr_assert_eq(
        fixture_batch_build(batch, rows, batch_size, seq_len, config->vocab_size, seed, &error),
        CPPARITY_OK, "%s", error.message);
}

static void run(reference_model *model, const cpparity_batch *batch) {
    cpparity_error error;
    cr_assert_eq(reference_model_forward(model, batch, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(reference_model_backward(model, batch, &error), CPPARITY_OK, "%s", error.message);
}

static double loss_of(reference_model *model, const cpparity_batch *batch) {
    cpparity_error error;
    cr_assert_eq(reference_model_forward(model, batch, &error), CPPARITY_OK, "%s", error.message);
    return model->loss;
}

/* Step 1e-5 on O(1) weights: truncation ~h²·|f'''| ≈ 1e-10 and rounding ~eps·|loss|/h ≈ 1e-10
 * relative to gradients of order 1e-2..1, so 1e-6 (the bound) has two orders of
 * headroom; a wrong term is off by far more. */
#define STEP 1e-5
#define RELATIVE_TOLERANCE 1e-6
#define SAMPLES 7

static void expect_finite_differences(const cpparity_model_config *config, uint64_t seed) {
    int64_t lengths_a[] = {4, 5}, lengths_b[] = {6, 1, 2};
    const cpparity_row_layout rows[] = {{2, 2, lengths_a, 0, false, NULL},
                                        {0, 3, lengths_b, 2, false, NULL}};
    reference_model model;
    cpparity_batch batch;
    build(&model, &batch, config, rows, 2, 11, seed);
    run(&model, &batch);
    for (int64_t e = 0; e < model.parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &model.parameter_table.entries[e];
        double difference = 0.0, norm = 0.0;
        for (int64_t s = 0; s < SAMPLES; s++) {
            /* spread samples over the tensor, deterministic */
            const int64_t index = (s * 7919 + e * 104729) % entry->count;
            double *value = &model.parameters[entry->offset + index];
            const double saved = *value;
            *value = saved + STEP;
            const double plus = loss_of(&model, &batch);
            *value = saved - STEP;
            const double minus = loss_of(&model, &batch);
            *value = saved;
            const double numeric = (plus - minus) / (2.0 * STEP);
            const double analytic = model.gradients[entry->offset + index];
            difference += (numeric - analytic) * (numeric - analytic);
            norm += analytic * analytic;
        }
        cr_expect_gt(norm, 0.0, "seed %llu: %s has zero gradient at every sample",
                     (unsigned long long)seed, entry->name);
        const double relative = sqrt(difference / norm);
        cr_expect_leq(relative, RELATIVE_TOLERANCE,
                      "seed %llu layers %s/%s: %s relative error %.3e over %d samples",
                      (unsigned long long)seed, cpparity_layer_type_name(config->layer_types[0]),
                      cpparity_layer_type_name(config->layer_types[1]), entry->name, relative,
                      SAMPLES);
    }
    reference_model_free(&model);
    cpparity_batch_free(&batch);
}

Test(reference_model, full_attention__gradients_match_central_differences) {
    const cpparity_model_config config = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    expect_finite_differences(&config, 11);
}

Test(reference_model, sliding_attention__gradients_match_central_differences) {
    const cpparity_model_config config =
        test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_SLIDING);
    expect_finite_differences(&config, 12);
}

Test(reference_model, chunked_attention__gradients_match_central_differences) {
    const cpparity_model_config config =
        test_small_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_CHUNKED);
    expect_finite_differences(&config, 13);
}

Test(reference_model, mixed_layers_tied_embeddings__gradients_match_central_differences) {
    cpparity_model_config config = test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED);
    config.tie_word_embeddings = true;
    config.num_key_value_heads = 1;
    config.chunk_origin = CPPARITY_CHUNK_ORIGIN_DOCUMENT;
    expect_finite_differences(&config, 14);
}

Test(reference_model, batch_without_valid_label__is_an_input_error) {
    const cpparity_model_config config = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    int64_t lengths[] = {1, 1, 1};
    const cpparity_row_layout rows[] = {
        {1, 3, lengths, 1, false, NULL}}; /* length-1 documents: no label */
    reference_model model;
    cpparity_batch batch;
    build(&model, &batch, &config, rows, 1, 5, 3);
    cpparity_error error;
    cr_expect_eq(reference_model_forward(&model, &batch, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "no valid label") != NULL, "%s", error.message);
    reference_model_free(&model);
    cpparity_batch_free(&batch);
}

/* Copies tokens [from, from + count) of row source_row of source into row target_row of target
 * at target_start, with their mask and positions (labels are recomputed by the caller). */
static void copy_tokens(cpparity_batch *target, int64_t target_row, int64_t target_start,
                        const cpparity_batch *source, int64_t source_row, int64_t from,
                        int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const int64_t t = target_row * target->seq_len + target_start + i;
        const int64_t s = source_row * source->seq_len + from + i;
        target->input_ids[t] = source->input_ids[s];
        target->attention_mask[t] = source->attention_mask[s];
        target->position_ids[t] = source->position_ids[s];
    }
}

/* Summed float64 losses over the same tokens in another order: a few ulps of ~30. */
#define METAMORPHIC_TOLERANCE 1e-11

Test(reference_model, packed_row__summed_loss_equals_documents_run_as_separate_rows) {
    const cpparity_model_config config =
        test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED);
    int64_t lengths[] = {5, 1, 4, 3};
    const cpparity_row_layout packed_rows[] = {{0, 4, lengths, 0, false, NULL}};
    reference_model packed;
    cpparity_batch packed_batch;
    build(&packed, &packed_batch, &config, packed_rows, 1, 13, 21);
    cr_assert_eq(reference_model_forward(&packed, &packed_batch, NULL), CPPARITY_OK);

    /* each document alone in a row of 13, right-padded */
    reference_model separate;
    cpparity_batch separate_batch;
    cr_assert_eq(reference_model_init(&separate, &config, 4, 13, NULL), CPPARITY_OK);
    memcpy(separate.parameters, packed.parameters,
           (size_t)packed.parameter_table.total * sizeof(double));
    cr_assert_eq(cpparity_batch_allocate(&separate_batch, 4, 13, NULL), CPPARITY_OK);
    int64_t start = 0;
    for (int64_t d = 0; d < 4; d++) {
        copy_tokens(&separate_batch, d, 0, &packed_batch, 0, start, lengths[d]);
        start += lengths[d];
    }
    fixture_batch_shift_labels(&separate_batch);
    cr_assert_eq(reference_model_forward(&separate, &separate_batch, NULL), CPPARITY_OK);
    cr_expect_eq(packed.valid_labels, separate.valid_labels);
    cr_expect(fabs(packed.loss_sum - separate.loss_sum) <= METAMORPHIC_TOLERANCE,
              "packed %.17g, separate %.17g", packed.loss_sum, separate.loss_sum);
    reference_model_free(&packed);
    reference_model_free(&separate);
    cpparity_batch_free(&packed_batch);
    cpparity_batch_free(&separate_batch);
}

/* Runs the same tokens with `left` and `right` padding added around them and compares loss,
 * gradients and the logits of the real tokens with the unpadded run. */
static void expect_padding_changes_nothing(const cpparity_model_config *config, int64_t left,
                                           int64_t right) {
    int64_t lengths[] = {4, 1, 5};
    const cpparity_row_layout plain_rows[] = {{0, 3, lengths, 0, false, NULL}};
    reference_model plain, padded;
    cpparity_batch plain_batch, padded_batch;
    build(&plain, &plain_batch, config, plain_rows, 1, 10, 31);
    run(&plain, &plain_batch);
    const int64_t S = 10 + left + right;
    cr_assert_eq(reference_model_init(&padded, config, 1, S, NULL), CPPARITY_OK);
    memcpy(padded.parameters, plain.parameters,
           (size_t)plain.parameter_table.total * sizeof(double));
    cr_assert_eq(cpparity_batch_allocate(&padded_batch, 1, S, NULL), CPPARITY_OK);
    copy_tokens(&padded_batch, 0, left, &plain_batch, 0, 0, 10);
    fixture_batch_shift_labels(&padded_batch);
    run(&padded, &padded_batch);

    cr_expect(fabs(plain.loss - padded.loss) <= METAMORPHIC_TOLERANCE,
              "left %lld right %lld: loss %.17g vs %.17g", (long long)left, (long long)right,
              plain.loss, padded.loss);
    const int64_t V = config->vocab_size;
    double *plain_logits = test_reference_logits(&plain);
    double *padded_logits = test_reference_logits(&padded);
    for (int64_t i = 0; i < 10 * V; i++) {
        cr_expect(fabs(plain_logits[i] - padded_logits[left * V + i]) <= METAMORPHIC_TOLERANCE,
                  "left %lld right %lld: logit %lld differs", (long long)left, (long long)right,
                  (long long)i);
    }
    free(plain_logits);
    free(padded_logits);
    for (int64_t i = 0; i < plain.parameter_table.total; i++) {
        cr_expect(fabs(plain.gradients[i] - padded.gradients[i]) <= METAMORPHIC_TOLERANCE,
                  "left %lld right %lld: gradient element %lld differs (%.17g vs %.17g)",
                  (long long)left, (long long)right, (long long)i, plain.gradients[i],
                  padded.gradients[i]);
    }
    reference_model_free(&plain);
    reference_model_free(&padded);
    cpparity_batch_free(&plain_batch);
    cpparity_batch_free(&padded_batch);
}

Test(reference_model, right_padding__changes_nothing) {
    const cpparity_model_config config =
        test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED);
    expect_padding_changes_nothing(&config, 0, 3);
}

Test(reference_model, left_padding__changes_nothing_even_for_chunked_layers) {
    const cpparity_model_config config =
        test_small_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_SLIDING);
    expect_padding_changes_nothing(&config, 2, 0);
    expect_padding_changes_nothing(&config, 4, 1);
}

/* Runs config and a variant on the same batch; their loss and gradients must be equal. */
static void expect_same_model(const cpparity_model_config *config,
                              const cpparity_model_config *variant, const char *what) {
    int64_t lengths_a[] = {9}, lengths_b[] = {3, 4};
    const cpparity_row_layout rows[] = {{0, 1, lengths_a, 0, false, NULL},
                                        {1, 2, lengths_b, 1, false, NULL}};
    reference_model first, second;
    cpparity_batch batch;
    build(&first, &batch, config, rows, 2, 9, 41);
    run(&first, &batch);
    cr_assert_eq(reference_model_init(&second, variant, 2, 9, NULL), CPPARITY_OK);
    memcpy(second.parameters, first.parameters,
           (size_t)first.parameter_table.total * sizeof(double));
    run(&second, &batch);
    /* the same arithmetic in the same order: identical bits are expected */
    cr_expect_eq(first.loss, second.loss, "%s: loss %.17g vs %.17g", what, first.loss, second.loss);
    cr_expect(memcmp(first.gradients, second.gradients,
                     (size_t)first.parameter_table.total * sizeof(double)) == 0,
              "%s: gradients differ", what);
    reference_model_free(&first);
    reference_model_free(&second);
    cpparity_batch_free(&batch);
}

Test(reference_model, window_at_least_s__equals_full_attention) {
    const cpparity_model_config full = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    cpparity_model_config window = test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_SLIDING);
    window.sliding_window = 9;
    expect_same_model(&full, &window, "W = S");
    window.sliding_window = 50;
    expect_same_model(&full, &window, "W > S");
}

Test(reference_model, chunk_at_least_s__equals_full_attention) {
    const cpparity_model_config full = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    cpparity_model_config chunk = test_small_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_CHUNKED);
    chunk.attention_chunk_size = 9;
    expect_same_model(&full, &chunk, "C = S");
    chunk.attention_chunk_size = 64;
    expect_same_model(&full, &chunk, "C > S");
}

Test(reference_model, tied_and_untied_heads_with_equal_weights__gradients_agree) {
    cpparity_model_config tied = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING);
    tied.tie_word_embeddings = true;
    cpparity_model_config untied = tied;
    untied.tie_word_embeddings = false;
    int64_t lengths[] = {6, 3};
    const cpparity_row_layout rows[] = {{1, 2, lengths, 0, false, NULL}};
    reference_model tied_model, untied_model;
    cpparity_batch batch;
    build(&tied_model, &batch, &tied, rows, 1, 10, 51);
    run(&tied_model, &batch);
    cr_assert_eq(reference_model_init(&untied_model, &untied, 1, 10, NULL), CPPARITY_OK);
    /* untied = tied's parameters followed by lm_head = embed_tokens */
    memcpy(untied_model.parameters, tied_model.parameters,
           (size_t)tied_model.parameter_table.total * sizeof(double));
    const int64_t VD = tied.vocab_size * tied.hidden_size;
    memcpy(untied_model.parameters + untied_model.parameter.lm_head,
           tied_model.parameters + tied_model.parameter.embed_tokens, (size_t)VD * sizeof(double));
    run(&untied_model, &batch);
    cr_expect_eq(tied_model.loss, untied_model.loss);
    for (int64_t i = 0; i < tied_model.parameter_table.total; i++) {
        double expected = untied_model.gradients[i];
        if (i < VD) { /* embed_tokens comes first in both tables */
            expected += untied_model.gradients[untied_model.parameter.lm_head + i];
        }
        /* the tied sum is accumulated in another order: a few ulps */
        cr_expect(fabs(tied_model.gradients[i] - expected) <= 1e-14,
                  "gradient element %lld: tied %.17g, untied sum %.17g", (long long)i,
                  tied_model.gradients[i], expected);
    }
    reference_model_free(&tied_model);
    reference_model_free(&untied_model);
    cpparity_batch_free(&batch);
}

Test(reference_model, rope__rotates_halves_by_position_times_inverse_frequency) {
    /* Dh = 4, theta = 100: inverse frequencies 1 and 100^(-1/2) = 0.1; position 2 */
    const int64_t position[] = {2};
    double cos_table[2], sin_table[2];
    rope_tables(cos_table, sin_table, position, 1, 4, 100.0);
    double x[4] = {1.0, 2.0, 3.0, 4.0};
    rope_forward(x, cos_table, sin_table, 1, 1, 4);
    const double expected[4] = {
        1.0 * cos(2.0) - 3.0 * sin(2.0),
        2.0 * cos(0.2) - 4.0 * sin(0.2),
        3.0 * cos(2.0) + 1.0 * sin(2.0),
        4.0 * cos(0.2) + 2.0 * sin(0.2),
    };
    for (int i = 0; i < 4; i++) {
        /* pow(100, -0.5) and the products round differently from the literals: a few ulps */
        cr_expect(fabs(x[i] - expected[i]) <= 1e-15, "element %d: %.17g, expected %.17g", i, x[i],
                  expected[i]);
    }
    rope_backward(x, cos_table, sin_table, 1, 1, 4);
    const double original[4] = {1.0, 2.0, 3.0, 4.0};
    for (int i = 0; i < 4; i++) {
        /* backward is the transpose of a rotation, i.e. its inverse: back to x within ulps */
        cr_expect(fabs(x[i] - original[i]) <= 1e-15, "element %d after backward: %.17g", i, x[i]);
    }
}
