/*
 * test_mask_predicate.c — the implementation's per-thread mask logic (distributed/
 * mask_predicate.h, also compiled into CUDA kernels) against the definitional dense mask, and
 * the online softmax merge against a direct softmax.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"
#include "distributed/kernels/online_softmax.h"
#include "tests/support/test_layouts.h"

static void check_layer(uint64_t seed, int64_t batch, int64_t seq_len,
                        cpparity_attention_layer layer) {
    test_random random = {seed, 0};
    int8_t *attention_mask = malloc((size_t)(batch * seq_len));
    int64_t *position_ids = malloc((size_t)(batch * seq_len) * sizeof(int64_t));
    bool *dense = malloc((size_t)(batch * seq_len * seq_len) * sizeof(bool));
    for (int64_t b = 0; b < batch; b++) {
        test_row_layout row = test_row_random(&random, seq_len);
        cr_assert(
            test_row_fill(&row, seq_len, attention_mask + b * seq_len, position_ids + b * seq_len));
    }
    test_dense_mask(dense, batch, seq_len, attention_mask, position_ids, layer);
    mask_storage storage;
    cr_assert_eq(mask_storage_build(&storage, batch, seq_len, attention_mask, position_ids, NULL),
                 CPPARITY_OK);
    const cpparity_mask_description mask = mask_storage_describe(&storage, layer);
    const int64_t tiles[] = {1, 3, 4, 32};
    for (int64_t b = 0; b < batch; b++) {
        for (size_t s = 0; s < sizeof tiles / sizeof *tiles; s++) {
            const int64_t tile = tiles[s];
            for (int64_t q0 = 0; q0 < seq_len; q0 += tile) {
                const int64_t q1 = q0 + tile < seq_len ? q0 + tile : seq_len;
                for (int64_t k0 = 0; k0 < seq_len; k0 += tile) {
                    const int64_t k1 = k0 + tile < seq_len ? k0 + tile : seq_len;
                    const int kind = mask_classify_tile(&mask, b, q0, q1, k0, k1);
                    for (int64_t q = q0; q < q1; q++) {
                        for (int64_t k = k0; k < k1; k++) {
                            const bool want = dense[(b * seq_len + q) * seq_len + k];
                            cr_assert_eq(mask_allowed(&mask, b, q, k), want,
                                         "seed %llu type %d W=%lld C=%lld origin %d: b=%lld "
                                         "q=%lld k=%lld",
                                         (unsigned long long)seed, (int)layer.type,
                                         (long long)layer.window, (long long)layer.chunk_size,
                                         (int)layer.chunk_origin, (long long)b, (long long)q,
                                         (long long)k);
                            cr_assert(kind != MASK_TILE_FULL || want,
                                      "seed %llu: tile [%lld,%lld)x[%lld,%lld) full but q=%lld "
                                      "k=%lld masked",
                                      (unsigned long long)seed, (long long)q0, (long long)q1,
                                      (long long)k0, (long long)k1, (long long)q, (long long)k);
                            cr_assert(kind != MASK_TILE_EMPTY || !want,
                                      "seed %llu: tile [%lld,%lld)x[%lld,%lld) empty but q=%lld "
                                      "k=%lld allowed",
                                      (unsigned long long)seed, (long long)q0, (long long)q1,
                                      (long long)k0, (long long)k1, (long long)q, (long long)k);
                        }
                    }
                }
            }
        }
    }
    mask_storage_free(&storage);
    free(dense);
    free(position_ids);
    free(attention_mask);
}

Test(mask_predicate, random_layouts_every_layer_type__equals_the_definition) {
    uint64_t seed = 900;
    const int64_t lengths[] = {1, 5, 16, 29};
    for (size_t s = 0; s < sizeof lengths / sizeof *lengths; s++) {
        const int64_t S = lengths[s];
        const cpparity_attention_layer layers[] = {
            {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_SLIDING, 1, 0, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_SLIDING, 2, 0, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_SLIDING, S + 2, 0, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_CHUNKED, 0, 1, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_CHUNKED, 0, 3, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_CHUNKED, 0, S + 1, CPPARITY_CHUNK_ORIGIN_ROW},
            {CPPARITY_LAYER_CHUNKED, 0, 3, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
            {CPPARITY_LAYER_CHUNKED, 0, 2, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
        };
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            for (int repeat = 0; repeat < 4; repeat++) {
                check_layer(seed++, 3, S, layers[l]);
            }
        }
    }
}

Test(mask_predicate, floor_division__rounds_toward_minus_infinity) {
    cr_expect_eq(mask_floor_div(-1, 3), -1);
    cr_expect_eq(mask_floor_div(-3, 3), -1);
    cr_expect_eq(mask_floor_div(-4, 3), -2);
    cr_expect_eq(mask_floor_div(5, 3), 1);
    cr_expect_eq(mask_floor_div(0, 3), 0);
}

Test(online_softmax, merging_tiles__equals_one_softmax_over_all_scores) {
    const float scores[7] = {0.5f, -1.0f, 3.0f, 2.5f, -INFINITY, 0.0f, 1.0f};
    float maximum = -INFINITY, sum = 0.0f;
    for (int i = 0; i < 7; i++) {
        maximum = scores[i] > maximum ? scores[i] : maximum;
    }
    for (int i = 0; i < 7; i++) {
        sum += expf(scores[i] - maximum);
    }
    /* tiles {0,1} {2,3,4} {5,6}, each summarised then merged */
    const int bounds[4] = {0, 2, 5, 7};
    online_softmax state = {-INFINITY, 0.0f};
    for (int t = 0; t < 3; t++) {
        online_softmax tile = {-INFINITY, 0.0f};
        for (int i = bounds[t]; i < bounds[t + 1]; i++) {
            tile.maximum = scores[i] > tile.maximum ? scores[i] : tile.maximum;
        }
        for (int i = bounds[t]; i < bounds[t + 1]; i++) {
            tile.sum += expf(scores[i] - tile.maximum);
        }
        float tile_factor;
        online_softmax_merge(&state, tile, &tile_factor);
    }
    cr_expect_eq(state.maximum, maximum);
    /* a handful of float32 roundings apart: 4 ulps of a sum near 2 */
    cr_expect(fabsf(state.sum - sum) <= 4 * 2.4e-7f, "merged sum %.9g, direct %.9g", state.sum,
              sum);
    cr_expect(fabsf(online_softmax_lse(state) - (maximum + logf(sum))) <= 1e-6f);
}

Test(online_softmax, empty_tiles__leave_an_empty_state_with_minus_infinity_lse) {
    online_softmax state = {-INFINITY, 0.0f};
    float tile_factor = 1.0f;
    const float factor =
        online_softmax_merge(&state, (online_softmax){-INFINITY, 0.0f}, &tile_factor);
    cr_expect_eq(factor, 0.0f);
    cr_expect_eq(tile_factor, 0.0f);
    cr_expect(isinf(online_softmax_lse(state)) && online_softmax_lse(state) < 0);
}
