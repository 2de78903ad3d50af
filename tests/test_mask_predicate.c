/*
 * test_mask_predicate.c — the implementation's per-thread mask logic (distributed/
 * mask_predicate.h, also compiled into CUDA kernels) against the definitional dense mask, the
 * classification of block calls' tiles (block_rows.h, the CUDA kernels' and the CPU kernel's),
 * and the online softmax merge against a direct softmax.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "distributed/kernels/block_rows.h"
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
            {CPPARITY_LAYER_CHUNKED, 0, 3, CPPARITY_CHUNK_ORIGIN_POSITION},
            {CPPARITY_LAYER_CHUNKED, 0, 2, CPPARITY_CHUNK_ORIGIN_POSITION},
            {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_POSITION},
        };
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            for (int repeat = 0; repeat < 4; repeat++) {
                check_layer(seed++, 3, S, layers[l]);
            }
        }
    }
}

/* Rows of a block call: the tokens of `chunks` chunks of [0, S) in a random order (each chunk's
 * tokens in order, so most tiles run over consecutive tokens), and now and then a pair of tokens
 * swapped (a tile that does not). Returns how many. */
static int64_t random_block(test_random *random, int64_t S, int64_t *index) {
    const int64_t chunks = test_random_between(random, 1, 4);
    int64_t order[4] = {0, 1, 2, 3};
    for (int64_t i = chunks - 1; i > 0; i--) {
        const int64_t j = test_random_between(random, 0, i);
        const int64_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
    int64_t count = 0;
    for (int64_t c = 0; c < chunks; c++) {
        for (int64_t t = order[c] * S / chunks; t < (order[c] + 1) * S / chunks; t++) {
            index[count++] = t;
        }
    }
    if (count > 1 && test_random_between(random, 0, 2) == 0) {
        const int64_t i = test_random_between(random, 0, count - 1),
                      j = test_random_between(random, 0, count - 1);
        const int64_t swap = index[i];
        index[i] = index[j];
        index[j] = swap;
    }
    return count;
}

Test(block_rows, random_blocks_every_layer_type__classes_never_skip_an_allowed_pair) {
    const int64_t S = 29, batch = 2;
    test_random random = {4100, 0};
    const cpparity_attention_layer layers[] = {
        {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 4, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 5, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 3, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
        {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_POSITION},
    };
    int8_t attention_mask[2 * 29];
    int64_t position_ids[2 * 29], query_index[29], key_index[29];
    bool dense[2 * 29 * 29];
    int64_t shapes[3] = {0, 0, 0}; /* tiles seen of each shape: each must occur */
    for (int repeat = 0; repeat < 40; repeat++) {
        for (int64_t b = 0; b < batch; b++) {
            test_row_layout row = test_row_random(&random, S);
            cr_assert(test_row_fill(&row, S, attention_mask + b * S, position_ids + b * S));
        }
        const cpparity_attention_layer layer = layers[repeat % 4];
        test_dense_mask(dense, batch, S, attention_mask, position_ids, layer);
        mask_storage storage;
        cr_assert_eq(mask_storage_build(&storage, batch, S, attention_mask, position_ids, NULL),
                     CPPARITY_OK);
        const cpparity_mask_description mask = mask_storage_describe(&storage, layer);
        const int64_t queries = random_block(&random, S, query_index);
        const int64_t keys = random_block(&random, S, key_index);
        const int64_t tile = test_random_between(&random, 1, 8);
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t i0 = 0; i0 < queries; i0 += tile) {
                const int64_t i1 = i0 + tile < queries ? i0 + tile : queries;
                for (int64_t j0 = 0; j0 < keys; j0 += tile) {
                    const int64_t j1 = j0 + tile < keys ? j0 + tile : keys;
                    int64_t q0 = 0, k0 = 0;
                    const int shape =
                        block_rows_shape(query_index, key_index, i0, i1, j0, j1, &q0, &k0);
                    shapes[shape]++;
                    const int kind =
                        block_classify_rows(&mask, query_index, key_index, b, i0, i1, j0, j1);
                    for (int64_t i = i0; i < i1; i++) {
                        for (int64_t j = j0; j < j1; j++) {
                            const int64_t q = query_index[i], k = key_index[j];
                            const bool want = dense[(b * S + q) * S + k];
                            cr_assert(shape != BLOCK_ROWS_CONSECUTIVE ||
                                          (q == q0 + (i - i0) && k == k0 + (j - j0)),
                                      "repeat %d: rows taken as consecutive are not", repeat);
                            cr_assert(kind != MASK_TILE_EMPTY || !want,
                                      "repeat %d type %d: tile rows [%lld,%lld)x[%lld,%lld) "
                                      "EMPTY but q=%lld k=%lld allowed",
                                      repeat, (int)layer.type, (long long)i0, (long long)i1,
                                      (long long)j0, (long long)j1, (long long)q, (long long)k);
                            cr_assert(kind != MASK_TILE_FULL || want,
                                      "repeat %d type %d: tile FULL but q=%lld k=%lld masked",
                                      repeat, (int)layer.type, (long long)q, (long long)k);
                        }
                    }
                }
            }
        }
        mask_storage_free(&storage);
    }
    cr_assert(shapes[BLOCK_ROWS_CONSECUTIVE] > 0 && shapes[BLOCK_ROWS_KEYS_AFTER] > 0 &&
                  shapes[BLOCK_ROWS_SCATTERED] > 0,
              "tiles seen: %lld consecutive, %lld keys after, %lld scattered", (long long)shapes[0],
              (long long)shapes[1], (long long)shapes[2]);
}

Test(block_rows, whole_sequence_call__is_the_identity_and_stops_at_the_diagonal) {
    int64_t q0 = -1, k0 = -1;
    cr_assert_eq(block_rows_shape(NULL, NULL, 8, 16, 4, 12, &q0, &k0), BLOCK_ROWS_CONSECUTIVE);
    cr_assert(q0 == 8 && k0 == 4);
    cr_assert_eq(block_key_rows_scanned(NULL, NULL, 40, 16), 16);
    cr_assert_eq(block_first_query_row(NULL, NULL, 20, 8), 16);
    const int64_t index[3] = {5, 6, 7};
    cr_assert_eq(block_key_rows_scanned(index, index, 3, 2), 3); /* a block: every key row */
    cr_assert_eq(block_first_query_row(index, index, 2, 1), 0);
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
