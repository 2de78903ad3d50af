/*
 * test_reference_mask.c — the reference mask against hand-written masks (so that a misreading of
 * masks.md is caught) and against the definitional brute force on random layouts (so that block
 * classification never changes a pair).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "reference/mask.h"
#include "tests/support/test_layouts.h"

static const cpparity_attention_layer full = {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW};

static cpparity_attention_layer sliding(int64_t window) {
    return (cpparity_attention_layer){CPPARITY_LAYER_SLIDING, window, 0, CPPARITY_CHUNK_ORIGIN_ROW};
}

static cpparity_attention_layer chunked(int64_t size, cpparity_chunk_origin origin) {
    return (cpparity_attention_layer){CPPARITY_LAYER_CHUNKED, 0, size, origin};
}

/* Checks one row's mask, built with every block size from 1 to S, against expected ("1" = may
 * attend), written row by row of queries. */
static void expect_row_mask(const test_row_layout *layout, int64_t seq_len,
                            cpparity_attention_layer layer, const char *const *expected) {
    int8_t attention_mask[64];
    int64_t position_ids[64];
    cr_assert(test_row_fill(layout, seq_len, attention_mask, position_ids));
    for (int64_t block = 1; block <= seq_len; block++) {
        reference_mask mask;
        cpparity_error error;
        cr_assert_eq(reference_mask_init(&mask, 1, seq_len, attention_mask, position_ids, layer,
                                         block, &error),
                     CPPARITY_OK, "%s", error.message);
        for (int64_t q = 0; q < seq_len; q++) {
            for (int64_t k = 0; k < seq_len; k++) {
                bool want = expected[q][k] == '1';
                cr_assert_eq(reference_mask_allowed(&mask, 0, q, k), want,
                             "predicate at q=%lld k=%lld: expected %d", (long long)q, (long long)k,
                             want);
                int64_t qb = q / block * block, kb = k / block * block;
                reference_block_class block_class = reference_mask_classify_block(
                    &mask, 0, qb, qb + block < seq_len ? qb + block : seq_len, kb,
                    kb + block < seq_len ? kb + block : seq_len);
                bool got =
                    block_class == REFERENCE_BLOCK_ALL || (block_class == REFERENCE_BLOCK_MIXED &&
                                                           reference_mask_allowed(&mask, 0, q, k));
                cr_assert_eq(got, want, "block %lld at q=%lld k=%lld: expected %d",
                             (long long)block, (long long)q, (long long)k, want);
            }
        }
        reference_mask_free(&mask);
    }
}

Test(mask, sliding_window_3_on_5__allows_exactly_3_keys_including_diagonal) {
    const test_row_layout layout = {0, 1, {5}, 0, {0}};
    const char *const expected[] = {
        "10000", "11000", "11100", "01110", "00111",
    };
    expect_row_mask(&layout, 5, sliding(3), expected);
}

Test(mask, chunk_3_with_2_left_padding__grid_starts_after_padding) {
    /* tokens 0,1 are padding; real tokens 2..8 fall into chunks {2,3,4} {5,6,7} {8} */
    const test_row_layout layout = {2, 1, {7}, 0, {0}};
    const char *const expected[] = {
        "000000000", "000000000", "001000000", "001100000", "001110000",
        "000001000", "000001100", "000001110", "000000001",
    };
    expect_row_mask(&layout, 9, chunked(3, CPPARITY_CHUNK_ORIGIN_ROW), expected);
}

Test(mask, chunk_2_on_packed_row__grid_is_the_row_not_the_documents) {
    /* documents [0..2] and [3..6]; row grid {0,1} {2,3} {4,5} {6}, intersected with documents */
    const test_row_layout layout = {0, 2, {3, 4}, 0, {0}};
    const char *const expected[] = {
        "1000000", "1100000", "0010000", "0001000", "0000100", "0000110", "0000001",
    };
    expect_row_mask(&layout, 7, chunked(2, CPPARITY_CHUNK_ORIGIN_ROW), expected);
}

Test(mask, chunk_2_with_document_origin__grid_restarts_at_each_document) {
    /* documents [0..2] and [3..6]; document grid {0,1} {2} and {3,4} {5,6} */
    const test_row_layout layout = {0, 2, {3, 4}, 0, {0}};
    const char *const expected[] = {
        "1000000", "1100000", "0010000", "0001000", "0001100", "0000010", "0000011",
    };
    expect_row_mask(&layout, 7, chunked(2, CPPARITY_CHUNK_ORIGIN_DOCUMENT), expected);
}

Test(mask, chunk_7_with_position_origin__chunks_counted_in_position_ids) {
    /* documents at positions 0..1 and 3..8 (the second starts mid-stream, at position 3): chunks
     * of 7 positions split the second at position 7 (token 6), where the document grid (from
     * token 2) and the row grid (from token 0, splitting at token 7) do not */
    const test_row_layout layout = {0, 2, {2, 6}, 0, {0, 3}};
    const char *const position[] = {
        "10000000", "11000000", "00100000", "00110000",
        "00111000", "00111100", "00000010", "00000011",
    };
    expect_row_mask(&layout, 8, chunked(7, CPPARITY_CHUNK_ORIGIN_POSITION), position);
    const char *const document[] = {
        "10000000", "11000000", "00100000", "00110000",
        "00111000", "00111100", "00111110", "00111111",
    };
    expect_row_mask(&layout, 8, chunked(7, CPPARITY_CHUNK_ORIGIN_DOCUMENT), document);
    const char *const row[] = {
        "10000000", "11000000", "00100000", "00110000",
        "00111000", "00111100", "00111110", "00000001",
    };
    expect_row_mask(&layout, 8, chunked(7, CPPARITY_CHUNK_ORIGIN_ROW), row);
}

Test(mask, packed_row_with_padding_both_sides__documents_and_keys_masked) {
    /* 1 left pad, documents of 3, 1 and 2 tokens, 2 right pads */
    const test_row_layout layout = {1, 3, {3, 1, 2}, 2, {0}};
    const char *const expected[] = {
        "000000000", "010000000", "011000000", "011100000", "000010000",
        "000001000", "000001100", "000000000", "000000000",
    };
    expect_row_mask(&layout, 9, full, expected);
}

Test(mask, documents__position_jumps_and_repeats_also_start_a_new_document) {
    int8_t attention_mask[6] = {1, 1, 1, 1, 1, 1};
    int64_t position_ids[6] = {0, 1, 5, 6, 6, 7}; /* jump at 2, repeat at 4 */
    const char *const expected[] = {
        "100000", "110000", "001000", "001100", "000010", "000011",
    };
    reference_mask mask;
    cpparity_error error;
    cr_assert_eq(reference_mask_init(&mask, 1, 6, attention_mask, position_ids, full, 2, &error),
                 CPPARITY_OK);
    for (int64_t q = 0; q < 6; q++) {
        for (int64_t k = 0; k < 6; k++) {
            cr_expect_eq(reference_mask_allowed(&mask, 0, q, k), expected[q][k] == '1',
                         "q=%lld k=%lld", (long long)q, (long long)k);
        }
    }
    reference_mask_free(&mask);
}

/* One randomised configuration: layouts of B rows, a layer, a block size. */
static void check_against_brute_force(uint64_t seed, int64_t batch, int64_t seq_len,
                                      cpparity_attention_layer layer, int64_t block) {
    test_random random = {seed, 0};
    int8_t *attention_mask = malloc((size_t)(batch * seq_len));
    int64_t *position_ids = malloc((size_t)(batch * seq_len) * sizeof *position_ids);
    bool *dense = malloc((size_t)(batch * seq_len * seq_len) * sizeof *dense);
    for (int64_t b = 0; b < batch; b++) {
        test_row_layout layout = test_row_random(&random, seq_len);
        cr_assert(test_row_fill(&layout, seq_len, attention_mask + b * seq_len,
                                position_ids + b * seq_len));
    }
    test_dense_mask(dense, batch, seq_len, attention_mask, position_ids, layer);
    reference_mask mask;
    cpparity_error error;
    cr_assert_eq(reference_mask_init(&mask, batch, seq_len, attention_mask, position_ids, layer,
                                     block, &error),
                 CPPARITY_OK, "%s", error.message);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t q0 = 0; q0 < seq_len; q0 += block) {
            int64_t q1 = q0 + block < seq_len ? q0 + block : seq_len;
            for (int64_t k0 = 0; k0 < seq_len; k0 += block) {
                int64_t k1 = k0 + block < seq_len ? k0 + block : seq_len;
                reference_block_class block_class =
                    reference_mask_classify_block(&mask, b, q0, q1, k0, k1);
                for (int64_t q = q0; q < q1; q++) {
                    for (int64_t k = k0; k < k1; k++) {
                        bool want = dense[(b * seq_len + q) * seq_len + k];
                        bool predicate = reference_mask_allowed(&mask, b, q, k);
                        cr_assert_eq(predicate, want,
                                     "seed %llu type %d W=%lld C=%lld origin %d: predicate "
                                     "b=%lld q=%lld k=%lld",
                                     (unsigned long long)seed, (int)layer.type,
                                     (long long)layer.window, (long long)layer.chunk_size,
                                     (int)layer.chunk_origin, (long long)b, (long long)q,
                                     (long long)k);
                        cr_assert(block_class != REFERENCE_BLOCK_ALL || want,
                                  "seed %llu block %lld: block [%lld,%lld)x[%lld,%lld) "
                                  "classified all but q=%lld k=%lld is masked",
                                  (unsigned long long)seed, (long long)block, (long long)q0,
                                  (long long)q1, (long long)k0, (long long)k1, (long long)q,
                                  (long long)k);
                        cr_assert(block_class != REFERENCE_BLOCK_NONE || !want,
                                  "seed %llu block %lld: block [%lld,%lld)x[%lld,%lld) "
                                  "classified none but q=%lld k=%lld is allowed",
                                  (unsigned long long)seed, (long long)block, (long long)q0,
                                  (long long)q1, (long long)k0, (long long)k1, (long long)q,
                                  (long long)k);
                    }
                }
            }
        }
    }
    reference_mask_free(&mask);
    free(dense);
    free(position_ids);
    free(attention_mask);
}

Test(mask, random_layouts__block_classification_equals_brute_force) {
    const int64_t lengths[] = {1, 2, 7, 16, 37};
    const int64_t blocks[] = {1, 2, 3, 4, 8, 64};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof lengths / sizeof *lengths; s++) {
        const int64_t seq_len = lengths[s];
        /* W in {1, 2, odd, S-1, S, > S}; C in {1, 2, a non-divisor of S, S, > S} */
        const int64_t windows[] = {1, 2, 3, 5, seq_len > 1 ? seq_len - 1 : 1, seq_len, seq_len + 3};
        const int64_t chunks[] = {1, 2, 3, 5, seq_len, seq_len + 1};
        cpparity_attention_layer layers[2 + 7 + 3 * 6];
        int count = 0;
        layers[count++] = full;
        for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
            layers[count++] = sliding(windows[w]);
        }
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
            layers[count++] = chunked(chunks[c], CPPARITY_CHUNK_ORIGIN_ROW);
            layers[count++] = chunked(chunks[c], CPPARITY_CHUNK_ORIGIN_DOCUMENT);
            layers[count++] = chunked(chunks[c], CPPARITY_CHUNK_ORIGIN_POSITION);
        }
        for (int l = 0; l < count; l++) {
            for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
                for (int repeat = 0; repeat < 3; repeat++) {
                    check_against_brute_force(seed++, 4, seq_len, layers[l], blocks[b]);
                }
            }
        }
    }
}

Test(mask, left_padding__query_rows_of_padding_see_no_key) {
    const test_row_layout layout = {3, 1, {5}, 0, {0}};
    int8_t attention_mask[8];
    int64_t position_ids[8];
    cr_assert(test_row_fill(&layout, 8, attention_mask, position_ids));
    const cpparity_attention_layer layers[] = {full, sliding(2),
                                               chunked(3, CPPARITY_CHUNK_ORIGIN_ROW)};
    for (size_t l = 0; l < 3; l++) {
        reference_mask mask;
        cr_assert_eq(
            reference_mask_init(&mask, 1, 8, attention_mask, position_ids, layers[l], 4, NULL),
            CPPARITY_OK);
        for (int64_t q = 0; q < 3; q++) {
            for (int64_t k = 0; k < 8; k++) {
                cr_expect_not(reference_mask_allowed(&mask, 0, q, k), "layer %zu q=%lld k=%lld", l,
                              (long long)q, (long long)k);
            }
        }
        cr_expect_eq(mask.left_padding[0], 3);
        reference_mask_free(&mask);
    }
}

Test(mask, invalid_window_chunk_or_mask_value__refused_with_the_field_named) {
    int8_t attention_mask[4] = {1, 1, 1, 1};
    int64_t position_ids[4] = {0, 1, 2, 3};
    reference_mask mask;
    cpparity_error error;
    cr_expect_eq(
        reference_mask_init(&mask, 1, 4, attention_mask, position_ids, sliding(0), 2, &error),
        CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "sliding_window") != NULL, "%s", error.message);
    cr_expect_eq(reference_mask_init(&mask, 1, 4, attention_mask, position_ids,
                                     chunked(0, CPPARITY_CHUNK_ORIGIN_ROW), 2, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "attention_chunk_size") != NULL, "%s", error.message);
    attention_mask[2] = 2;
    cr_expect_eq(reference_mask_init(&mask, 1, 4, attention_mask, position_ids, full, 2, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "attention_mask[0][2]") != NULL, "%s", error.message);
    reference_mask_free(&mask);
}

/* Cost follows the allowed pairs: pairs inside visited blocks exceed the allowed ones by at most
 * the blocks that straddle a boundary of the mask. */
Test(mask, sliding_and_chunked_masks__visit_pairs_in_proportion_to_allowed) {
    enum { S = 2048, BLOCK = 64 };
    int8_t *attention_mask = malloc(S);
    int64_t *position_ids = malloc(S * sizeof *position_ids);
    const test_row_layout layout = {0, 1, {S}, 0, {0}};
    cr_assert(test_row_fill(&layout, S, attention_mask, position_ids));
    struct {
        cpparity_attention_layer layer;
        int64_t allowed;
    } cases[] = {
        {full, (int64_t)S * (S + 1) / 2},
        {sliding(256), 256LL * S - 256LL * 255 / 2},
        {chunked(512, CPPARITY_CHUNK_ORIGIN_ROW), (S / 512) * 512LL * 513 / 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        reference_mask mask;
        reference_mask_counts counts;
        cr_assert_eq(reference_mask_init(&mask, 1, S, attention_mask, position_ids, cases[c].layer,
                                         BLOCK, NULL),
                     CPPARITY_OK);
        cr_assert_eq(reference_mask_count(&mask, &counts, NULL), CPPARITY_OK);
        cr_expect_eq(counts.pairs_allowed, cases[c].allowed, "case %zu: %lld allowed", c,
                     (long long)counts.pairs_allowed);
        /* one diagonal block per query block, plus one more for the window's far edge */
        int64_t boundary = 2LL * BLOCK * S;
        cr_expect_leq(counts.pairs_visited, cases[c].allowed + boundary,
                      "case %zu visits %lld pairs for %lld allowed", c,
                      (long long)counts.pairs_visited, (long long)cases[c].allowed);
        cr_expect_leq(counts.pairs_evaluated, boundary, "case %zu evaluates %lld pairs", c,
                      (long long)counts.pairs_evaluated);
        reference_mask_free(&mask);
    }
    free(position_ids);
    free(attention_mask);
}
