/*
 * row_blocks.h — a batch of B sequences of S tokens cut into row blocks, and the rank that owns
 * each: the one way cpparity meets a sequence too long to hold whole (docs/architecture.md, "Long
 * context: row blocks").
 *
 * Block i (0 <= i < count) holds tokens [begin, end) of batch row b, with b = i / per_row,
 * j = i % per_row, begin = j·edge, end = min(begin + edge, S). Blocks are numbered in the
 * flattened (b, t) order of a row-major [B, S, ...] tensor, so consecutive blocks cover
 * consecutive flattened rows b·S + t. The edge is a constant of the product (CPPARITY_ROW_BLOCK):
 * no thread count, rank count or memory limit moves where a block starts. That is what keeps
 * every sum the float64 reference makes over tokens in one order, and what lets a consumer of a
 * tensor too wide to hold (the logits, S × V) take it one block at a time.
 *
 * Spread over R ranks, rank r owns blocks [first(r), first(r + 1)) with first(r) =
 * floor(r·count / R): consecutive flattened rows again, O(S/R) of them. R = 1 is one process.
 *
 * Pure integer arithmetic on values; nothing is allocated, nothing fails.
 */
#ifndef CPPARITY_COMMON_ROW_BLOCKS_H
#define CPPARITY_COMMON_ROW_BLOCKS_H

#include <stdint.h>

/* Tokens per row block: a multiple of the reference's attention tile (64) and its linear-layer
 * tile (256), so neither ever straddles two blocks. */
#define CPPARITY_ROW_BLOCK 256

typedef struct row_blocks {
    int64_t batch;   /* B >= 0 */
    int64_t seq_len; /* S >= 0 */
    int64_t edge;    /* tokens per block, >= 1 (CPPARITY_ROW_BLOCK but in tests) */
    int64_t per_row; /* blocks per batch row: ceil(S / edge) */
    int64_t count;   /* B · per_row */
} row_blocks;

typedef struct row_block {
    int64_t index;     /* i */
    int64_t batch_row; /* b */
    int64_t begin;     /* first token t of the block in its row */
    int64_t end;       /* one past its last token */
    int64_t flat;      /* b·S + begin: its first row in a flattened [B·S, ...] tensor */
} row_block;

/* The blocks of B × S tokens with the product's edge. */
row_blocks row_blocks_of(int64_t batch, int64_t seq_len);

/* The same with another edge (>= 1): tests, to put many blocks in a short sequence. */
row_blocks row_blocks_with_edge(int64_t batch, int64_t seq_len, int64_t edge);

/* Block i of blocks (0 <= i < count). */
row_block row_blocks_at(const row_blocks *blocks, int64_t index);

/* The most tokens a block holds: min(edge, S) (0 for S = 0). What a consumer of one block at a
 * time allocates. */
int64_t row_blocks_widest(const row_blocks *blocks);

/* The tokens of block i: end − begin. */
int64_t row_blocks_size(const row_blocks *blocks, int64_t index);

/* The block holding token t of batch row b (0 <= b < B, 0 <= t < S). */
int64_t row_blocks_containing(const row_blocks *blocks, int64_t batch_row, int64_t token);

/* The first block rank owns when the blocks are spread over ranks (0 <= rank <= ranks; rank ==
 * ranks gives count, the end of the last rank's blocks). */
int64_t row_blocks_first(const row_blocks *blocks, int64_t ranks, int64_t rank);

/* The rank that owns block i when the blocks are spread over ranks. */
int64_t row_blocks_owner(const row_blocks *blocks, int64_t ranks, int64_t index);

/* The flattened rows [first_row, end_row) that blocks [first, end) cover (consecutive, as every
 * rank's blocks are). */
void row_blocks_rows(const row_blocks *blocks, int64_t first, int64_t end, int64_t *first_row,
                     int64_t *end_row);

#endif
