/*
 * test_shard.c — sharding bookkeeping: contiguous slices, automatic padding when cp does not
 * divide S (padding tokens masked, labels ignored), labels shifted before sharding.
 */
#include <criterion/criterion.h>

#include "distributed/cp/shard.h"
#include "fixtures/batch_fixture.h"

Test(shard, s17_cp4__padded_to_20_with_slices_of_5) {
    for (int64_t rank = 0; rank < 4; rank++) {
        const shard_layout layout = shard_layout_make(17, 4, rank, CPPARITY_LAYOUT_CONTIGUOUS);
        cr_expect_eq(layout.local_len, 5);
        cr_expect_eq(layout.padded_seq_len, 20);
        cr_expect_eq(layout.offset, 5 * rank);
    }
    const shard_layout exact = shard_layout_make(16, 4, 3, CPPARITY_LAYOUT_CONTIGUOUS);
    cr_expect_eq(exact.local_len, 4);
    cr_expect_eq(exact.padded_seq_len, 16, "no padding when cp divides S");
}

Test(shard, last_rank__holds_real_tokens_then_masked_padding) {
    int64_t lengths[] = {9, 8};
    const cpparity_row_layout rows[] = {{0, 2, lengths, 0, false, NULL}};
    cpparity_batch full, local;
    cr_assert_eq(fixture_batch_build(&full, rows, 1, 17, 50, 7, NULL), CPPARITY_OK);
    const shard_layout layout =
        shard_layout_make(17, 4, 3, CPPARITY_LAYOUT_CONTIGUOUS); /* positions 15..19 */
    cr_assert_eq(shard_slice_batch(&local, &full, &layout, NULL), CPPARITY_OK);
    cr_expect_eq(local.seq_len, 5);
    for (int64_t t = 0; t < 2; t++) { /* positions 15, 16 are real */
        cr_expect_eq(local.input_ids[t], full.input_ids[15 + t]);
        cr_expect_eq(local.attention_mask[t], 1);
        cr_expect_eq(local.position_ids[t], full.position_ids[15 + t]);
        cr_expect_eq(local.labels[t], full.labels[15 + t]);
    }
    for (int64_t t = 2; t < 5; t++) { /* positions 17..19 were added */
        cr_expect_eq(local.attention_mask[t], 0, "added token %lld must be padding", (long long)t);
        cr_expect_eq(local.labels[t], CPPARITY_IGNORE_INDEX);
        cr_expect_eq(local.position_ids[t], 0);
    }
    cpparity_batch_free(&full);
    cpparity_batch_free(&local);
}

Test(shard, label_crossing_a_shard_boundary__is_kept) {
    int64_t lengths[] = {16};
    const cpparity_row_layout rows[] = {{0, 1, lengths, 0, false, NULL}};
    cpparity_batch full, local;
    cr_assert_eq(fixture_batch_build(&full, rows, 1, 16, 50, 3, NULL), CPPARITY_OK);
    const shard_layout layout =
        shard_layout_make(16, 2, 0, CPPARITY_LAYOUT_CONTIGUOUS); /* positions 0..7 */
    cr_assert_eq(shard_slice_batch(&local, &full, &layout, NULL), CPPARITY_OK);
    /* the last token of rank 0 predicts the first token of rank 1 */
    cr_expect_eq(local.labels[7], full.input_ids[8]);
    cpparity_batch_free(&full);
    cpparity_batch_free(&local);
}
