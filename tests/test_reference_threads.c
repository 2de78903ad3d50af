/*
 * test_reference_threads.c — the float64 reference attention gives the same bits for 1, 2 and
 * 16 threads: every output element is reduced by one work item in a fixed order, and the tiles
 * never depend on the thread count (reference/threads.h). The same for the whole reference model,
 * whose linear layers run as fixed blocks on the same threads. Bitwise, so no tolerance.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "reference/attention.h"
#include "reference/model.h"
#include "reference/threads.h"
#include "tests/support/attention_fixture.h"
#include "tests/support/test_models.h"

typedef struct attention_outputs {
    double *out, *lse, *dq, *dk, *dv;
} attention_outputs;

static const int thread_counts[] = {1, 2, 16};

static attention_outputs run_with_threads(const attention_fixture *fixture, int threads) {
    const reference_attention_shape s = fixture->shape;
    const int64_t queries = fixture_query_elements(fixture), keys = fixture_key_elements(fixture);
    attention_outputs o = {
        malloc((size_t)queries * sizeof(double)),
        malloc((size_t)(s.batch * s.heads * s.seq_len) * sizeof(double)),
        calloc((size_t)queries, sizeof(double)),
        calloc((size_t)keys, sizeof(double)),
        calloc((size_t)keys, sizeof(double)),
    };
    reference_set_threads(threads);
    cpparity_error error;
    cr_assert_eq(reference_attention_forward(o.out, o.lse, fixture->q, fixture->k, fixture->v,
                                             &fixture->mask, s, fixture->scale, &error),
                 CPPARITY_OK, "seed %llu: %s", (unsigned long long)fixture->seed, error.message);
    cr_assert_eq(reference_attention_backward(o.dq, o.dk, o.dv, fixture->dout, fixture->q,
                                              fixture->k, fixture->v, o.out, o.lse, &fixture->mask,
                                              s, fixture->scale, &error),
                 CPPARITY_OK, "seed %llu: %s", (unsigned long long)fixture->seed, error.message);
    reference_set_threads(1);
    return o;
}

static void outputs_free(attention_outputs *o) {
    free(o->out);
    free(o->lse);
    free(o->dq);
    free(o->dk);
    free(o->dv);
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

static void expect_same_bits_for_every_thread_count(const attention_fixture *fixture,
                                                    const char *what) {
    const reference_attention_shape s = fixture->shape;
    const int64_t queries = fixture_query_elements(fixture), keys = fixture_key_elements(fixture);
    attention_outputs one = run_with_threads(fixture, 1);
    for (size_t t = 1; t < sizeof thread_counts / sizeof *thread_counts; t++) {
        attention_outputs many = run_with_threads(fixture, thread_counts[t]);
        const struct {
            const char *name;
            const double *expected, *actual;
            int64_t count;
        } tensors[] = {{"out", one.out, many.out, queries},
                       {"lse", one.lse, many.lse, s.batch * s.heads * s.seq_len},
                       {"dq", one.dq, many.dq, queries},
                       {"dk", one.dk, many.dk, keys},
                       {"dv", one.dv, many.dv, keys}};
        for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) {
            const int64_t at =
                first_difference(tensors[i].expected, tensors[i].actual, tensors[i].count);
            cr_expect(at < 0,
                      "seed %llu, %s (type %d W=%lld C=%lld, S=%lld H=%lld Hkv=%lld, tile %lld): "
                      "%s[%lld] is %a with 1 thread, %a with %d",
                      (unsigned long long)fixture->seed, what, (int)fixture->layer.type,
                      (long long)fixture->layer.window, (long long)fixture->layer.chunk_size,
                      (long long)s.seq_len, (long long)s.heads, (long long)s.kv_heads,
                      (long long)fixture->mask.block_size, tensors[i].name, (long long)at,
                      at < 0 ? 0.0 : tensors[i].expected[at], at < 0 ? 0.0 : tensors[i].actual[at],
                      thread_counts[t]);
        }
        outputs_free(&many);
    }
    outputs_free(&one);
}

/* every mask type; S = 67 with 8-token tiles, padding and packed documents (attention_fixture.h) */
static const cpparity_attention_layer *const every_mask = attention_fixture_every_mask;
static const test_row_layout *const padded_and_packed = attention_fixture_padded_and_packed_67;

Test(reference_threads, prime_length_padding_and_packed_documents__same_bits_for_1_2_16_threads) {
    const reference_attention_shape shape = {2, 67, 6, 2, 8};
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], padded_and_packed, 8, 700 + m);
        expect_same_bits_for_every_thread_count(&fixture, "padded and packed");
        attention_fixture_free(&fixture);
    }
}

Test(reference_threads, non_finite_padding_values__same_bits_for_1_2_16_threads) {
    const reference_attention_shape shape = {2, 67, 6, 2, 8};
    const int64_t kv_stride = shape.kv_heads * shape.head_dim;
    const int64_t q_stride = shape.heads * shape.head_dim;
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], padded_and_packed, 8, 720 + m);
        /* padding holds garbage: keys and values the masked-pair path must skip exactly */
        for (int64_t token = 0; token < shape.batch * shape.seq_len; token++) {
            if (fixture.attention_mask[token] == 0) {
                for (int64_t i = 0; i < kv_stride; i++) {
                    fixture.k[token * kv_stride + i] = NAN;
                    fixture.v[token * kv_stride + i] = INFINITY;
                }
                for (int64_t i = 0; i < q_stride; i++) {
                    fixture.dout[token * q_stride + i] = -INFINITY;
                }
            }
        }
        expect_same_bits_for_every_thread_count(&fixture, "non-finite padding");
        attention_fixture_free(&fixture);
    }
}

Test(reference_threads, length_smaller_than_one_tile__same_bits_for_1_2_16_threads) {
    const reference_attention_shape shape = {3, 5, 3, 1, 4};
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], NULL, REFERENCE_MASK_DEFAULT_BLOCK,
                               740 + m);
        expect_same_bits_for_every_thread_count(&fixture, "S < tile");
        attention_fixture_free(&fixture);
    }
}

Test(reference_threads, default_tiles_and_random_layouts__same_bits_for_1_2_16_threads) {
    const reference_attention_shape shape = {2, 263, 4, 2, 16};
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], NULL, REFERENCE_MASK_DEFAULT_BLOCK,
                               760 + m);
        expect_same_bits_for_every_thread_count(&fixture, "random layouts");
        attention_fixture_free(&fixture);
    }
}

Test(reference_threads, setting__clamped_to_at_least_one) {
    reference_set_threads(0);
    cr_expect_eq(reference_threads(), 1);
    reference_set_threads(-5);
    cr_expect_eq(reference_threads(), 1);
    reference_set_threads(REFERENCE_MAX_THREADS + 1);
    cr_expect_eq(reference_threads(), REFERENCE_MAX_THREADS);
    reference_set_threads(1);
    cr_expect_eq(reference_threads(), 1);
}

/* The whole model, forward and backward, at one thread count: loss and every gradient. */
static double *model_gradients(const cpparity_model_config *config, const cpparity_batch *batch,
                               int threads, double *loss) {
    reference_model model;
    cpparity_error error;
    cr_assert_eq(reference_model_init(&model, config, batch->batch, batch->seq_len, &error),
                 CPPARITY_OK, "%s", error.message);
    fixture_fill_parameters(model.parameters, &model.parameter_table, 780);
    reference_set_threads(threads);
    cr_assert_eq(reference_model_forward(&model, batch, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(reference_model_backward(&model, batch, &error), CPPARITY_OK, "%s", error.message);
    reference_set_threads(1);
    const size_t bytes = (size_t)model.parameter_table.total * sizeof(double);
    double *gradients = malloc(bytes);
    memcpy(gradients, model.gradients, bytes);
    *loss = model.loss;
    reference_model_free(&model);
    return gradients;
}

Test(reference_threads, model_with_several_linear_blocks__same_bits_for_1_2_16_threads) {
    /* N = 300 tokens, V = 600, F = 520 and D = 272 all exceed one 256-wide linear block */
    cpparity_model_config config = test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED);
    config.vocab_size = 600;
    config.hidden_size = 272;
    config.intermediate_size = 520;
    config.head_dim = 16;
    config.sliding_window = 37;
    config.attention_chunk_size = 64;
    int64_t lengths_a[] = {70, 1, 66}, lengths_b[] = {150};
    const cpparity_row_layout rows[] = {{5, 3, lengths_a, 8, false, NULL},
                                        {0, 1, lengths_b, 0, false, NULL}};
    cpparity_batch batch;
    cpparity_error error;
    cr_assert_eq(fixture_batch_build(&batch, rows, 2, 150, config.vocab_size, 780, &error),
                 CPPARITY_OK, "%s", error.message);
    reference_model sizes;
    cr_assert_eq(reference_model_init(&sizes, &config, 2, 150, &error), CPPARITY_OK, "%s",
                 error.message);
    const int64_t count = sizes.parameter_table.total;
    reference_model_free(&sizes);
    double one_loss;
    double *one = model_gradients(&config, &batch, 1, &one_loss);
    for (size_t t = 1; t < sizeof thread_counts / sizeof *thread_counts; t++) {
        double loss;
        double *many = model_gradients(&config, &batch, thread_counts[t], &loss);
        cr_expect(memcmp(&loss, &one_loss, sizeof loss) == 0,
                  "seed 780: loss %a with 1 thread, %a with %d", one_loss, loss, thread_counts[t]);
        const int64_t at = first_difference(one, many, count);
        cr_expect(at < 0, "seed 780: gradient[%lld] is %a with 1 thread, %a with %d", (long long)at,
                  at < 0 ? 0.0 : one[at], at < 0 ? 0.0 : many[at], thread_counts[t]);
        free(many);
    }
    free(one);
    cpparity_batch_free(&batch);
}
