/* attention_tiles.c — the reference attention's tiles (see attention_tiles.h). */
#include "attention_tiles.h"

#include <cblas.h>
#include <math.h>

cpparity_status attention_tiles_init(attention_tiles *tiles, const reference_mask *mask,
                                     reference_attention_shape shape, cpparity_error *error) {
    if (shape.batch != mask->batch || shape.seq_len != mask->seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention shape B=%lld S=%lld does not match the mask's "
                                  "B=%lld S=%lld",
                                  (long long)shape.batch, (long long)shape.seq_len,
                                  (long long)mask->batch, (long long)mask->seq_len);
    }
    if (shape.heads < 1 || shape.kv_heads < 1 || shape.head_dim < 1 ||
        shape.heads % shape.kv_heads != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention heads: H=%lld must be a positive multiple of "
                                  "Hkv=%lld, and head_dim=%lld >= 1",
                                  (long long)shape.heads, (long long)shape.kv_heads,
                                  (long long)shape.head_dim);
    }
    tiles->shape = shape;
    tiles->mask = mask;
    tiles->edge = mask->block_size;
    tiles->count = (shape.seq_len + mask->block_size - 1) / mask->block_size;
    tiles->group = shape.heads / shape.kv_heads;
    tiles->query_stride = shape.heads * shape.head_dim;
    tiles->key_stride = shape.kv_heads * shape.head_dim;
    tiles->first_tile = 0;
    tiles->end_tile = shape.batch * tiles->count;
    return CPPARITY_OK;
}

/* The flattened tile starting at flattened row `row`, or −1 when row is not on a tile edge. */
static int64_t tile_at_row(const attention_tiles *tiles, int64_t row) {
    const int64_t S = tiles->shape.seq_len, b = row / S, t = row % S;
    return t % tiles->edge == 0 ? b * tiles->count + t / tiles->edge : -1;
}

cpparity_status attention_tiles_restrict(attention_tiles *tiles, int64_t first_row, int64_t end_row,
                                         cpparity_error *error) {
    const int64_t rows = tiles->shape.batch * tiles->shape.seq_len;
    const int64_t first = first_row >= 0 && first_row <= rows ? tile_at_row(tiles, first_row) : -1;
    const int64_t end = end_row >= first_row && end_row <= rows ? tile_at_row(tiles, end_row) : -1;
    if (first < 0 || end < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention rows [%lld, %lld) of %lld are not on tile edges (%lld "
                                  "tokens)",
                                  (long long)first_row, (long long)end_row, (long long)rows,
                                  (long long)tiles->edge);
    }
    tiles->first_tile = first;
    tiles->end_tile = end;
    return CPPARITY_OK;
}

bool attention_tiles_whole(const attention_tiles *tiles) {
    return tiles->first_tile == 0 && tiles->end_tile == tiles->shape.batch * tiles->count;
}

void attention_tile_of(const attention_tiles *tiles, int64_t f, int64_t *b, int64_t *tile) {
    *b = f / tiles->count;
    *tile = f % tiles->count;
}

void attention_tile_tokens(const attention_tiles *tiles, int64_t index, int64_t *begin,
                           int64_t *end) {
    *begin = index * tiles->edge;
    *end =
        *begin + tiles->edge < tiles->shape.seq_len ? *begin + tiles->edge : tiles->shape.seq_len;
}

bool attention_block_find(const attention_tiles *tiles, int64_t b, int64_t query_tile,
                          int64_t key_tile, attention_layout layout, uint8_t *predicate_memory,
                          attention_block *block) {
    int64_t q_begin, q_end, k_begin, k_end;
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    attention_tile_tokens(tiles, key_tile, &k_begin, &k_end);
    const reference_block_class kind =
        reference_mask_classify_block(tiles->mask, b, q_begin, q_end, k_begin, k_end);
    if (kind == REFERENCE_BLOCK_NONE) {
        return false;
    }
    const int64_t queries = q_end - q_begin, keys = k_end - k_begin;
    const int64_t query_step = layout == ATTENTION_QUERY_MAJOR ? keys : 1;
    const int64_t key_step = layout == ATTENTION_QUERY_MAJOR ? 1 : queries;
    *block = (attention_block){q_begin, q_end, k_begin, k_end, NULL, 0};
    if (kind == REFERENCE_BLOCK_ALL) {
        return true;
    }
    reference_mask_fill_block(tiles->mask, b, q_begin, q_end, k_begin, k_end, query_step, key_step,
                              predicate_memory);
    int64_t live_q_begin = q_end, live_q_end = q_begin, live_k_begin = k_end, live_k_end = k_begin;
    for (int64_t i = 0; i < queries; i++) {
        for (int64_t j = 0; j < keys; j++) {
            if (predicate_memory[i * query_step + j * key_step]) {
                live_q_begin = q_begin + i < live_q_begin ? q_begin + i : live_q_begin;
                live_q_end = q_begin + i + 1;
                live_k_begin = k_begin + j < live_k_begin ? k_begin + j : live_k_begin;
                live_k_end = k_begin + j + 1 > live_k_end ? k_begin + j + 1 : live_k_end;
            }
        }
    }
    if (live_q_end <= live_q_begin) {
        return false; /* classified mixed, yet no pair is allowed */
    }
    block->q_begin = live_q_begin;
    block->q_end = live_q_end;
    block->k_begin = live_k_begin;
    block->k_end = live_k_end;
    block->allowed = predicate_memory + (live_q_begin - q_begin) * query_step +
                     (live_k_begin - k_begin) * key_step;
    block->stride = layout == ATTENTION_QUERY_MAJOR ? keys : queries;
    return true;
}

int64_t attention_query_offset(const attention_tiles *tiles, int64_t b, int64_t t, int64_t h) {
    return (b * tiles->shape.seq_len + t) * tiles->query_stride + h * tiles->shape.head_dim;
}

int64_t attention_key_offset(const attention_tiles *tiles, int64_t b, int64_t t, int64_t g) {
    return (b * tiles->shape.seq_len + t) * tiles->key_stride + g * tiles->shape.head_dim;
}

void attention_transpose(double *transposed, const double *first_row, int64_t rows, int64_t stride,
                         int64_t head_dim) {
    /* a copy (alpha = 1 is exact), through OpenBLAS's blocked transpose */
    cblas_domatcopy(CblasRowMajor, CblasTrans, (int)rows, (int)head_dim, 1.0, first_row,
                    (int)stride, transposed, (int)rows);
}

bool attention_rows_finite(const double *first_row, int64_t rows, int64_t stride,
                           int64_t head_dim) {
    for (int64_t r = 0; r < rows; r++) {
        const double *row = first_row + r * stride;
        for (int64_t d = 0; d < head_dim; d++) {
            if (!isfinite(row[d])) {
                return false;
            }
        }
    }
    return true;
}
