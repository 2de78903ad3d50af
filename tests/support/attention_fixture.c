/* attention_fixture.c — small attention problems and the naive dense attention. */
#include "attention_fixture.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

const cpparity_attention_layer attention_fixture_every_mask[ATTENTION_FIXTURE_MASKS] = {
    {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 13, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 6, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
};

const test_row_layout attention_fixture_padded_and_packed_67[2] = {
    {3, 3, {20, 1, 30}, 13, {0}},
    {0, 2, {40, 25}, 2, {0}},
};

int64_t fixture_query_elements(const attention_fixture *fixture) {
    const reference_attention_shape s = fixture->shape;
    return s.batch * s.seq_len * s.heads * s.head_dim;
}

int64_t fixture_key_elements(const attention_fixture *fixture) {
    const reference_attention_shape s = fixture->shape;
    return s.batch * s.seq_len * s.kv_heads * s.head_dim;
}

void attention_fixture_init(attention_fixture *fixture, reference_attention_shape shape,
                            cpparity_attention_layer layer, const test_row_layout *rows,
                            int64_t block_size, uint64_t seed) {
    const int64_t tokens = shape.batch * shape.seq_len;
    test_random random = {seed, 0};
    fixture->shape = shape;
    fixture->layer = layer;
    fixture->seed = seed;
    fixture->scale = 1.0 / sqrt((double)shape.head_dim);
    fixture->attention_mask = malloc((size_t)tokens);
    fixture->position_ids = malloc((size_t)tokens * sizeof(int64_t));
    fixture->dense = malloc((size_t)(tokens * shape.seq_len) * sizeof(bool));
    for (int64_t b = 0; b < shape.batch; b++) {
        test_row_layout layout = rows != NULL ? rows[b] : test_row_random(&random, shape.seq_len);
        cr_assert(test_row_fill(&layout, shape.seq_len, fixture->attention_mask + b * shape.seq_len,
                                fixture->position_ids + b * shape.seq_len),
                  "row %lld layout does not add up to S=%lld", (long long)b,
                  (long long)shape.seq_len);
    }
    test_dense_mask(fixture->dense, shape.batch, shape.seq_len, fixture->attention_mask,
                    fixture->position_ids, layer);
    fixture->q = malloc((size_t)fixture_query_elements(fixture) * sizeof(double));
    fixture->dout = malloc((size_t)fixture_query_elements(fixture) * sizeof(double));
    fixture->k = malloc((size_t)fixture_key_elements(fixture) * sizeof(double));
    fixture->v = malloc((size_t)fixture_key_elements(fixture) * sizeof(double));
    /* amplitude 2 gives scores of order 1: softmax far from both uniform and one-hot */
    test_random_fill(&random, fixture->q, fixture_query_elements(fixture), 2.0);
    test_random_fill(&random, fixture->k, fixture_key_elements(fixture), 2.0);
    test_random_fill(&random, fixture->v, fixture_key_elements(fixture), 1.0);
    test_random_fill(&random, fixture->dout, fixture_query_elements(fixture), 1.0);
    cpparity_error error;
    cr_assert_eq(reference_mask_init(&fixture->mask, shape.batch, shape.seq_len,
                                     fixture->attention_mask, fixture->position_ids, layer,
                                     block_size, &error),
                 CPPARITY_OK, "%s", error.message);
}

void attention_fixture_free(attention_fixture *fixture) {
    reference_mask_free(&fixture->mask);
    free(fixture->attention_mask);
    free(fixture->position_ids);
    free(fixture->dense);
    free(fixture->q);
    free(fixture->k);
    free(fixture->v);
    free(fixture->dout);
}

void naive_attention_forward(double *out, double *lse, const attention_fixture *fixture,
                             const double *q, const double *k, const double *v) {
    const reference_attention_shape s = fixture->shape;
    double *weights = malloc((size_t)s.seq_len * sizeof *weights);
    for (int64_t b = 0; b < s.batch; b++) {
        for (int64_t h = 0; h < s.heads; h++) {
            const int64_t g = h / (s.heads / s.kv_heads);
            for (int64_t i = 0; i < s.seq_len; i++) {
                const double *query = q + ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
                double *output = out + ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
                const bool *row = fixture->dense + (b * s.seq_len + i) * s.seq_len;
                double largest = -INFINITY;
                for (int64_t j = 0; j < s.seq_len; j++) {
                    const double *key = k + ((b * s.seq_len + j) * s.kv_heads + g) * s.head_dim;
                    double dot = 0.0;
                    for (int64_t d = 0; d < s.head_dim; d++) {
                        dot += query[d] * key[d];
                    }
                    weights[j] = dot * fixture->scale;
                    if (row[j] && weights[j] > largest) {
                        largest = weights[j];
                    }
                }
                double total = 0.0;
                for (int64_t j = 0; j < s.seq_len; j++) {
                    weights[j] = row[j] ? exp(weights[j] - largest) : 0.0;
                    total += weights[j];
                }
                for (int64_t d = 0; d < s.head_dim; d++) {
                    double sum = 0.0;
                    for (int64_t j = 0; j < s.seq_len; j++) {
                        if (row[j]) {
                            sum += weights[j] *
                                   v[((b * s.seq_len + j) * s.kv_heads + g) * s.head_dim + d];
                        }
                    }
                    output[d] = total > 0.0 ? sum / total : 0.0;
                }
                lse[(b * s.heads + h) * s.seq_len + i] =
                    total > 0.0 ? largest + log(total) : -INFINITY;
            }
        }
    }
    free(weights);
}
