/*
 * test_row_blocks.c — row blocks of a batch of sequences and their owners (common/row_blocks.h):
 * the blocks tile every batch row in flattened order, each token is in exactly the block
 * row_blocks_containing names, and the ranks own consecutive, balanced, non-overlapping ranges
 * that cover every block, for any rank count, more ranks than blocks included.
 */
#include <criterion/criterion.h>

#include "common/row_blocks.h"

Test(row_blocks, blocks__tile_every_row_in_flattened_order) {
    const int64_t batches[] = {1, 3}, lengths[] = {1, 255, 256, 257, 1000};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        for (size_t j = 0; j < sizeof lengths / sizeof *lengths; j++) {
            const int64_t B = batches[i], S = lengths[j];
            const row_blocks blocks = row_blocks_of(B, S);
            cr_assert_eq(blocks.edge, CPPARITY_ROW_BLOCK);
            cr_assert_eq(blocks.count, B * ((S + 255) / 256), "B %lld S %lld", (long long)B,
                         (long long)S);
            int64_t flat = 0;
            for (int64_t k = 0; k < blocks.count; k++) {
                const row_block block = row_blocks_at(&blocks, k);
                cr_assert_eq(block.flat, flat, "B %lld S %lld block %lld", (long long)B,
                             (long long)S, (long long)k);
                cr_assert(block.end > block.begin && block.end - block.begin <= 256);
                cr_assert_eq(block.begin % 256, 0);
                cr_assert_eq(block.flat, block.batch_row * S + block.begin);
                cr_assert_eq(row_blocks_size(&blocks, k), block.end - block.begin);
                for (int64_t t = block.begin; t < block.end; t++) {
                    cr_assert_eq(row_blocks_containing(&blocks, block.batch_row, t), k);
                }
                flat += block.end - block.begin;
            }
            cr_assert_eq(flat, B * S);
        }
    }
}

Test(row_blocks, owners__consecutive_balanced_ranges_covering_every_block) {
    const row_blocks blocks = row_blocks_with_edge(3, 50, 4); /* 13 blocks a row, 39 in all */
    cr_assert_eq(blocks.count, 39);
    for (int64_t ranks = 1; ranks <= 50; ranks++) {
        cr_assert_eq(row_blocks_first(&blocks, ranks, 0), 0);
        cr_assert_eq(row_blocks_first(&blocks, ranks, ranks), blocks.count);
        for (int64_t r = 0; r < ranks; r++) {
            const int64_t first = row_blocks_first(&blocks, ranks, r);
            const int64_t end = row_blocks_first(&blocks, ranks, r + 1);
            /* floor(r·count/R): every rank gets count/R blocks, rounded either way */
            cr_assert(end - first == blocks.count / ranks ||
                          end - first == blocks.count / ranks + 1,
                      "ranks %lld rank %lld: %lld blocks", (long long)ranks, (long long)r,
                      (long long)(end - first));
            for (int64_t k = first; k < end; k++) {
                cr_assert_eq(row_blocks_owner(&blocks, ranks, k), r, "ranks %lld block %lld",
                             (long long)ranks, (long long)k);
            }
            int64_t first_row = 0, end_row = 0;
            row_blocks_rows(&blocks, first, end, &first_row, &end_row);
            if (end > first) {
                const row_block last = row_blocks_at(&blocks, end - 1);
                cr_assert_eq(first_row, row_blocks_at(&blocks, first).flat);
                cr_assert_eq(end_row, last.flat + last.end - last.begin);
            } else {
                cr_assert_eq(first_row, end_row, "a rank without blocks holds no rows");
            }
        }
    }
}

Test(row_blocks, empty_batch__no_blocks) {
    const row_blocks blocks = row_blocks_of(2, 0);
    cr_assert_eq(blocks.count, 0);
    cr_assert_eq(row_blocks_first(&blocks, 4, 2), 0);
}
