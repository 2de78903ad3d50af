/*
 * test_reference_spread.c — the float64 reference spread over 2, 3 and 4 ranks (reference/team.h,
 * over --comm local's ranks) gives the same bits as one process: loss, every parameter's gradient,
 * every layer's attention lse and the final norm's output, which the logits are made from. Each
 * rank holds only its row blocks; keys and values cross ranks, and every sum over tokens is handed
 * from rank to rank in block order. Bitwise, so no tolerance.
 *
 * The batches have several row blocks per rank count (S up to 900, two batch rows, so that a
 * rank's blocks span batch rows and the last block is short), padding on both sides, packed
 * documents, a sliding window and chunked attention, and a vocabulary of several LM head chunks.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/comm/comm_local.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "harness/running/reference_team_comm.h"
#include "reference/model.h"
#include "tests/support/test_models.h"

/* What the reference computed, copied out of the model. */
typedef struct reference_result {
    double loss;
    double *gradients;    /* (parameters) */
    double *lse;          /* (layers, B, H, S) */
    double *final_normed; /* (B·S, D) */
    int64_t gradient_count, lse_count, normed_count;
} reference_result;

typedef struct spread_case {
    const char *name;
    cpparity_model_config config;
    const cpparity_batch *batch;
    int64_t batch_size, seq_len;
    uint64_t seed;
    reference_result results[5]; /* by rank: each rank's copy of what it ended with */
} spread_case;

static void result_free(reference_result *r) {
    free(r->gradients);
    free(r->lse);
    free(r->final_normed);
    memset(r, 0, sizeof *r);
}

/* Runs the reference on team (NULL: one process) and copies its outputs into result. */
static cpparity_status compute(const spread_case *c, const reference_team *team,
                               reference_result *result, cpparity_error *error) {
    reference_model model;
    cpparity_status status =
        reference_model_init_spread(&model, &c->config, c->batch_size, c->seq_len, team, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    fixture_fill_parameters(model.parameters, &model.parameter_table, c->seed);
    status = reference_model_forward(&model, c->batch, error);
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, c->batch, error);
    }
    const int64_t layers = c->config.num_hidden_layers, H = c->config.num_attention_heads;
    const int64_t tokens = c->batch_size * c->seq_len, D = c->config.hidden_size;
    result->gradient_count = model.parameter_table.total;
    result->lse_count = layers * tokens * H;
    result->normed_count = tokens * D;
    result->gradients = malloc((size_t)result->gradient_count * sizeof(double));
    result->lse = malloc((size_t)result->lse_count * sizeof(double));
    result->final_normed = malloc((size_t)result->normed_count * sizeof(double));
    if (status == CPPARITY_OK) {
        status = reference_model_final_normed_whole(&model, result->final_normed, error);
    }
    if (status == CPPARITY_OK) {
        result->loss = model.loss;
        memcpy(result->gradients, model.gradients, (size_t)result->gradient_count * sizeof(double));
        for (int64_t l = 0; l < layers; l++) {
            memcpy(result->lse + l * tokens * H, model.activations + model.layer[l].lse,
                   (size_t)(tokens * H) * sizeof(double));
        }
    }
    reference_model_free(&model);
    return status;
}

static cpparity_status rank_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_case *c = argument;
    const reference_team team = reference_team_of_comm(comm);
    return compute(c, &team, &c->results[comm->rank], error);
}

/* The first index where a and b differ in their bits, or −1. */
static int64_t first_difference(const double *a, const double *b, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
            return i;
        }
    }
    return -1;
}

static void expect_same(const spread_case *c, const reference_result *one,
                        const reference_result *spread, int ranks, int rank) {
    cr_expect(memcmp(&one->loss, &spread->loss, sizeof one->loss) == 0,
              "%s: loss %a in one process, %a on rank %d of %d", c->name, one->loss, spread->loss,
              rank, ranks);
    const struct {
        const char *what;
        const double *a, *b;
        int64_t count;
    } tensors[] = {
        {"gradient", one->gradients, spread->gradients, one->gradient_count},
        {"attention lse", one->lse, spread->lse, one->lse_count},
        {"final norm output", one->final_normed, spread->final_normed, one->normed_count},
    };
    for (size_t t = 0; t < sizeof tensors / sizeof *tensors; t++) {
        const int64_t at = first_difference(tensors[t].a, tensors[t].b, tensors[t].count);
        cr_expect(at < 0, "%s: %s[%lld] is %a in one process, %a on rank %d of %d", c->name,
                  tensors[t].what, (long long)at, at < 0 ? 0.0 : tensors[t].a[at],
                  at < 0 ? 0.0 : tensors[t].b[at], rank, ranks);
    }
}

static void check_case(spread_case *c) {
    reference_result one = {0};
    cpparity_error error;
    cr_assert_eq(compute(c, NULL, &one, &error), CPPARITY_OK, "%s: %s", c->name, error.message);
    cr_assert(isfinite(one.loss), "%s: the loss is finite", c->name);
    for (int ranks = 2; ranks <= 4; ranks++) {
        cpparity_status statuses[4];
        cpparity_error errors[4];
        cr_assert_eq(comm_local_run(ranks, 60.0, rank_body, c, statuses, errors, &error),
                     CPPARITY_OK, "%s", error.message);
        for (int r = 0; r < ranks; r++) {
            cr_assert_eq(statuses[r], CPPARITY_OK, "%s, rank %d of %d: %s", c->name, r, ranks,
                         errors[r].message);
            expect_same(c, &one, &c->results[r], ranks, r);
            result_free(&c->results[r]);
        }
    }
    result_free(&one);
}

/* A model with several LM head chunks (V > 2·512) and linear row bands (F > 256). */
static cpparity_model_config spread_model(cpparity_layer_type first, cpparity_layer_type second) {
    cpparity_model_config config = test_small_model(first, second);
    config.vocab_size = 1100;
    config.hidden_size = 24;
    config.intermediate_size = 300;
    config.head_dim = 8;
    config.sliding_window = 100;
    config.attention_chunk_size = 192;
    return config;
}

Test(reference_spread, padded_and_packed_rows_same_bits_on_1_2_3_4_ranks) {
    int64_t lengths_a[] = {300, 1, 250}, lengths_b[] = {900}, lengths_c[] = {400, 380};
    const cpparity_row_layout rows[] = {{7, 3, lengths_a, 342, false, NULL},
                                        {0, 1, lengths_b, 0, false, NULL}};
    cpparity_batch batch;
    cpparity_error error;
    spread_case c = {.name = "causal + sliding, two padded and packed rows of 900",
                     .config = spread_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING),
                     .batch = &batch,
                     .batch_size = 2,
                     .seq_len = 900,
                     .seed = 4242};
    cr_assert_eq(fixture_batch_build(&batch, rows, 2, 900, c.config.vocab_size, c.seed, &error),
                 CPPARITY_OK, "%s", error.message);
    check_case(&c);
    cpparity_batch_free(&batch);

    /* one row, chunked attention, tied embeddings (the LM head's gradient is the embedding's:
     * the two sums meet on the last rank), S not a multiple of the row block */
    const cpparity_row_layout packed[] = {{0, 2, lengths_c, 20, true, NULL}};
    spread_case tied = {.name = "chunked + causal, tied embeddings, one row of 800",
                        .config = spread_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_FULL),
                        .batch = &batch,
                        .batch_size = 1,
                        .seq_len = 800,
                        .seed = 99};
    tied.config.tie_word_embeddings = true;
    cr_assert_eq(
        fixture_batch_build(&batch, packed, 1, 800, tied.config.vocab_size, tied.seed, &error),
        CPPARITY_OK, "%s", error.message);
    check_case(&tied);
    cpparity_batch_free(&batch);
}

Test(reference_spread, more_ranks_than_row_blocks) {
    /* S = 300: two row blocks; ranks without any block still take part in every exchange */
    int64_t lengths[] = {300};
    const cpparity_row_layout rows[] = {{0, 1, lengths, 0, false, NULL}};
    cpparity_batch batch;
    cpparity_error error;
    spread_case c = {.name = "two row blocks on up to four ranks",
                     .config = spread_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL),
                     .batch = &batch,
                     .batch_size = 1,
                     .seq_len = 300,
                     .seed = 7};
    cr_assert_eq(fixture_batch_build(&batch, rows, 1, 300, c.config.vocab_size, c.seed, &error),
                 CPPARITY_OK, "%s", error.message);
    check_case(&c);
    cpparity_batch_free(&batch);
}
