/*
 * test_reference_attention_forward.c — the reference forward against a naive dense O(S²)
 * attention over the definitional mask, for every layer type and head grouping.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "reference/attention.h"
#include "tests/support/attention_fixture.h"

/* Both sides are float64 with sums of at most S·Dh terms of order 1 in different orders; 1e-12
 * absolute is ~1e4 ulps of headroom at these sizes, far below any masking error (order 0.1). */
#define FORWARD_TOLERANCE 1e-12

static const reference_attention_shape heads_mha = {3, 23, 4, 4, 8};
static const reference_attention_shape heads_gqa = {3, 23, 6, 2, 8};
static const reference_attention_shape heads_mqa = {3, 23, 4, 1, 16};

static cpparity_attention_layer layers[] = {
    {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 1, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 2, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 40, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 1, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
};

static void expect_matches_naive(reference_attention_shape shape, cpparity_attention_layer layer,
                                 int64_t block, uint64_t seed) {
    attention_fixture fixture;
    attention_fixture_init(&fixture, shape, layer, NULL, block, seed);
    const int64_t elements = fixture_query_elements(&fixture);
    const int64_t rows = shape.batch * shape.heads * shape.seq_len;
    double *out = malloc((size_t)elements * sizeof *out);
    double *expected_out = malloc((size_t)elements * sizeof *out);
    double *lse = malloc((size_t)rows * sizeof *lse);
    double *expected_lse = malloc((size_t)rows * sizeof *lse);
    cpparity_error error;
    cr_assert_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, &error),
                 CPPARITY_OK, "%s", error.message);
    naive_attention_forward(expected_out, expected_lse, &fixture, fixture.q, fixture.k, fixture.v);
    for (int64_t i = 0; i < elements; i++) {
        cr_assert(fabs(out[i] - expected_out[i]) <= FORWARD_TOLERANCE,
                  "seed %llu type %d W=%lld C=%lld Hkv=%lld block %lld: out[%lld] = %.17g, "
                  "naive %.17g",
                  (unsigned long long)seed, (int)layer.type, (long long)layer.window,
                  (long long)layer.chunk_size, (long long)shape.kv_heads, (long long)block,
                  (long long)i, out[i], expected_out[i]);
    }
    for (int64_t i = 0; i < rows; i++) {
        if (isinf(expected_lse[i])) {
            cr_assert(isinf(lse[i]) && lse[i] < 0, "seed %llu: lse[%lld] = %g, expected -inf",
                      (unsigned long long)seed, (long long)i, lse[i]);
        } else {
            cr_assert(fabs(lse[i] - expected_lse[i]) <= FORWARD_TOLERANCE,
                      "seed %llu: lse[%lld] = %.17g, naive %.17g", (unsigned long long)seed,
                      (long long)i, lse[i], expected_lse[i]);
        }
    }
    free(out);
    free(expected_out);
    free(lse);
    free(expected_lse);
    attention_fixture_free(&fixture);
}

Test(attention_forward, every_layer_type_and_head_grouping__matches_naive_dense) {
    const reference_attention_shape shapes[] = {heads_mha, heads_gqa, heads_mqa};
    const int64_t blocks[] = {1, 4, 64};
    uint64_t seed = 100;
    for (size_t s = 0; s < 3; s++) {
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            for (size_t b = 0; b < 3; b++) {
                expect_matches_naive(shapes[s], layers[l], blocks[b], seed++);
            }
        }
    }
}

Test(attention_forward, left_padding__fully_masked_rows_give_zero_and_minus_infinity) {
    const reference_attention_shape shape = {2, 10, 2, 1, 4};
    const test_row_layout rows[] = {{3, 2, {4, 3}, 0, {0}}, {10, 0, {0}, 0, {0}}};
    attention_fixture fixture;
    attention_fixture_init(&fixture, shape, layers[0], rows, 4, 7);
    double out[2 * 10 * 2 * 4], lse[2 * 2 * 10];
    cr_assert_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, NULL),
                 CPPARITY_OK);
    for (int64_t b = 0; b < 2; b++) {
        const int64_t masked_rows = b == 0 ? 3 : 10;
        for (int64_t h = 0; h < 2; h++) {
            for (int64_t t = 0; t < 10; t++) {
                double row_lse = lse[(b * 2 + h) * 10 + t];
                if (t < masked_rows) {
                    cr_expect(isinf(row_lse) && row_lse < 0, "b=%lld h=%lld t=%lld lse %g",
                              (long long)b, (long long)h, (long long)t, row_lse);
                    for (int64_t d = 0; d < 4; d++) {
                        cr_expect_eq(out[((b * 10 + t) * 2 + h) * 4 + d], 0.0,
                                     "b=%lld t=%lld: output of a fully masked row must be 0",
                                     (long long)b, (long long)t);
                    }
                } else {
                    cr_expect(isfinite(row_lse), "b=%lld t=%lld lse %g", (long long)b, (long long)t,
                              row_lse);
                }
            }
        }
    }
    attention_fixture_free(&fixture);
}

Test(attention_forward, masked_keys_holding_nan__contribute_nothing) {
    const reference_attention_shape shape = {1, 12, 2, 2, 4};
    const test_row_layout rows[] = {{2, 2, {5, 3}, 2, {0}}};
    const cpparity_attention_layer window = {CPPARITY_LAYER_SLIDING, 3, 0,
                                             CPPARITY_CHUNK_ORIGIN_ROW};
    attention_fixture fixture;
    attention_fixture_init(&fixture, shape, window, rows, 4, 11);
    double clean_out[12 * 2 * 4], clean_lse[2 * 12], out[12 * 2 * 4], lse[2 * 12];
    cr_assert_eq(reference_attention_forward(clean_out, clean_lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, NULL),
                 CPPARITY_OK);
    /* poison keys and values of padding positions 0, 1, 10, 11 */
    const int64_t padding[] = {0, 1, 10, 11};
    for (size_t p = 0; p < 4; p++) {
        for (int64_t i = 0; i < 2 * 4; i++) {
            fixture.k[padding[p] * 8 + i] = NAN;
            fixture.v[padding[p] * 8 + i] = NAN;
        }
    }
    cr_assert_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, NULL),
                 CPPARITY_OK);
    for (int64_t i = 0; i < 12 * 2 * 4; i++) {
        cr_expect_eq(out[i], clean_out[i], "out[%lld] changed by a masked key", (long long)i);
    }
    attention_fixture_free(&fixture);
}

Test(attention_forward, heads_not_a_multiple_of_kv_heads__refused) {
    const reference_attention_shape shape = {1, 4, 3, 2, 4};
    const test_row_layout rows[] = {{0, 1, {4}, 0, {0}}};
    const reference_attention_shape valid = {1, 4, 2, 2, 4};
    attention_fixture fixture;
    attention_fixture_init(&fixture, valid, layers[0], rows, 4, 3);
    double out[4 * 3 * 4], lse[3 * 4];
    cpparity_error error;
    cr_expect_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, &error),
                 CPPARITY_ERROR_INPUT);
    const reference_attention_shape wrong_length = {1, 5, 2, 2, 4};
    cr_expect_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, wrong_length, fixture.scale, &error),
                 CPPARITY_ERROR_INPUT);
    attention_fixture_free(&fixture);
}
