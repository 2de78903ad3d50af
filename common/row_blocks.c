/* row_blocks.c — row blocks of a batch of sequences and their owners (see row_blocks.h). */
#include "common/row_blocks.h"

row_blocks row_blocks_with_edge(int64_t batch, int64_t seq_len, int64_t edge) {
    row_blocks blocks;
    blocks.batch = batch > 0 ? batch : 0;
    blocks.seq_len = seq_len > 0 ? seq_len : 0;
    blocks.edge = edge > 0 ? edge : 1;
    blocks.per_row = (blocks.seq_len + blocks.edge - 1) / blocks.edge;
    blocks.count = blocks.batch * blocks.per_row;
    return blocks;
}

row_blocks row_blocks_of(int64_t batch, int64_t seq_len) {
    return row_blocks_with_edge(batch, seq_len, CPPARITY_ROW_BLOCK);
}

row_block row_blocks_at(const row_blocks *blocks, int64_t index) {
    row_block block;
    block.index = index;
    block.batch_row = index / blocks->per_row;
    block.begin = index % blocks->per_row * blocks->edge;
    block.end =
        block.begin + blocks->edge < blocks->seq_len ? block.begin + blocks->edge : blocks->seq_len;
    block.flat = block.batch_row * blocks->seq_len + block.begin;
    return block;
}

int64_t row_blocks_widest(const row_blocks *blocks) {
    return blocks->edge < blocks->seq_len ? blocks->edge : blocks->seq_len;
}

int64_t row_blocks_size(const row_blocks *blocks, int64_t index) {
    const row_block block = row_blocks_at(blocks, index);
    return block.end - block.begin;
}

int64_t row_blocks_containing(const row_blocks *blocks, int64_t batch_row, int64_t token) {
    return batch_row * blocks->per_row + token / blocks->edge;
}

int64_t row_blocks_first(const row_blocks *blocks, int64_t ranks, int64_t rank) {
    if (ranks < 1 || rank >= ranks) {
        return blocks->count;
    }
    /* floor(rank·count / ranks), with rank·count never formed (no overflow) */
    const int64_t whole = blocks->count / ranks, part = blocks->count % ranks;
    return rank * whole + rank * part / ranks;
}

int64_t row_blocks_owner(const row_blocks *blocks, int64_t ranks, int64_t index) {
    if (ranks <= 1) {
        return 0;
    }
    /* the largest r with first(r) <= index: start from the proportional guess and correct */
    int64_t rank = blocks->count > 0 ? index * ranks / blocks->count : 0;
    rank = rank < ranks - 1 ? rank : ranks - 1;
    while (rank > 0 && row_blocks_first(blocks, ranks, rank) > index) {
        rank--;
    }
    while (rank + 1 < ranks && row_blocks_first(blocks, ranks, rank + 1) <= index) {
        rank++;
    }
    return rank;
}

void row_blocks_rows(const row_blocks *blocks, int64_t first, int64_t end, int64_t *first_row,
                     int64_t *end_row) {
    if (first >= end) {
        const int64_t at = first < blocks->count ? row_blocks_at(blocks, first).flat
                                                 : blocks->batch * blocks->seq_len;
        *first_row = *end_row = at;
        return;
    }
    const row_block last = row_blocks_at(blocks, end - 1);
    *first_row = row_blocks_at(blocks, first).flat;
    *end_row = last.flat + (last.end - last.begin);
}
