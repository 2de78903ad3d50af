/* attention_tiles.c — the reference attention's tiles (see attention_tiles.h). */
#include "attention_tiles.h"

#include "mixed_blocks.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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
    tiles->row_first_tile = 0;
    tiles->row_end_tile = tiles->count;
    tiles->query_first = 0;
    tiles->query_rows = shape.seq_len;
    tiles->key_first = 0;
    tiles->key_rows = shape.seq_len;
    tiles->key_tile_first = 0;
    tiles->key_tile_end = tiles->count;
    tiles->query_tile_first = 0;
    tiles->query_tile_end = tiles->count;
    tiles->mixed = NULL;
    return CPPARITY_OK;
}

/* Whether [first, end) of a row of S tokens lies on tile edges (end may be S). */
static bool on_tile_edges(const reference_mask *mask, int64_t first, int64_t end) {
    const int64_t edge = mask->block_size, S = mask->seq_len;
    return first >= 0 && first <= end && end <= S && first % edge == 0 &&
           (end % edge == 0 || end == S);
}

static bool tile_pair_reaches(const reference_mask *mask, int64_t b, int64_t query_tile,
                              int64_t key_tile) {
    const int64_t edge = mask->block_size, S = mask->seq_len;
    const int64_t q_begin = query_tile * edge, k_begin = key_tile * edge;
    const int64_t q_end = q_begin + edge < S ? q_begin + edge : S;
    const int64_t k_end = k_begin + edge < S ? k_begin + edge : S;
    /* causal: the loops never visit a key tile after the query tile */
    return key_tile <= query_tile && reference_mask_classify_block(mask, b, q_begin, q_end, k_begin,
                                                                   k_end) != REFERENCE_BLOCK_NONE;
}

/* The tiles of the other side that the tiles [first_tile, end_tile) reach in any batch row:
 * [*low, *high) of tiles (empty: *low == *high == 0). keys: the given tiles are queries and the
 * others keys; else the reverse. */
static void tiles_reached(const reference_mask *mask, int64_t first_tile, int64_t end_tile,
                          bool keys, int64_t *low, int64_t *high) {
    const int64_t count = (mask->seq_len + mask->block_size - 1) / mask->block_size;
    int64_t lowest = count, highest = -1;
    for (int64_t b = 0; b < mask->batch && first_tile < end_tile; b++) {
        /* the other side's tiles in increasing order, then decreasing, until one is reached */
        for (int pass = 0; pass < 2; pass++) {
            const int64_t start =
                keys ? (pass == 0 ? 0 : end_tile - 1) : (pass == 0 ? first_tile : count - 1);
            const int64_t stop =
                keys ? (pass == 0 ? end_tile : -1) : (pass == 0 ? count : first_tile - 1);
            const int64_t step = pass == 0 ? 1 : -1;
            for (int64_t other = start; other != stop; other += step) {
                if (pass == 0 ? other >= lowest : other <= highest) {
                    break; /* an earlier batch row reached further already */
                }
                bool reached = false;
                for (int64_t own = first_tile; own < end_tile && !reached; own++) {
                    reached = keys ? tile_pair_reaches(mask, b, own, other)
                                   : tile_pair_reaches(mask, b, other, own);
                }
                if (reached) {
                    if (pass == 0) {
                        lowest = other;
                    } else {
                        highest = other;
                    }
                    break;
                }
            }
        }
    }
    *low = highest >= lowest ? lowest : 0;
    *high = highest >= lowest ? highest + 1 : 0;
}

/* What reference_attention_keys_needed and _queries_needed share: tokens on tile edges in, the
 * other side's tokens out. */
static cpparity_status tokens_needed(const reference_mask *mask, int64_t first, int64_t end,
                                     bool keys, int64_t *other_first, int64_t *other_end,
                                     cpparity_error *error) {
    if (!on_tile_edges(mask, first, end)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention tokens [%lld, %lld) of %lld are not on tile edges "
                                  "(%lld tokens)",
                                  (long long)first, (long long)end, (long long)mask->seq_len,
                                  (long long)mask->block_size);
    }
    const int64_t edge = mask->block_size;
    int64_t low = 0, high = 0;
    tiles_reached(mask, first / edge, (end + edge - 1) / edge, keys, &low, &high);
    *other_first = low * edge;
    *other_end = high * edge < mask->seq_len ? high * edge : mask->seq_len;
    if (high == 0) {
        *other_first = *other_end = 0;
    }
    return CPPARITY_OK;
}

cpparity_status reference_attention_keys_needed(const reference_mask *mask, int64_t first,
                                                int64_t end, int64_t *key_first, int64_t *key_end,
                                                cpparity_error *error) {
    return tokens_needed(mask, first, end, true, key_first, key_end, error);
}

cpparity_status reference_attention_queries_needed(const reference_mask *mask, int64_t first,
                                                   int64_t end, int64_t *query_first,
                                                   int64_t *query_end, cpparity_error *error) {
    return tokens_needed(mask, first, end, false, query_first, query_end, error);
}

cpparity_status attention_tiles_window(attention_tiles *tiles, const reference_attention_window *w,
                                       bool keys, cpparity_error *error) {
    const reference_mask *mask = tiles->mask;
    const int64_t S = tiles->shape.seq_len, edge = tiles->edge;
    if (!on_tile_edges(mask, w->first, w->end) || w->query_first < 0 ||
        w->query_first > w->query_end || w->query_end > S || w->key_first < 0 ||
        w->key_first > w->key_end || w->key_end > S) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention window: tokens [%lld, %lld), queries [%lld, %lld), "
                                  "keys [%lld, %lld) of %lld: not ranges of the sequence, or the "
                                  "tokens not on tile edges (%lld tokens)",
                                  (long long)w->first, (long long)w->end, (long long)w->query_first,
                                  (long long)w->query_end, (long long)w->key_first,
                                  (long long)w->key_end, (long long)S, (long long)edge);
    }
    int64_t reach_first = 0, reach_end = 0;
    cpparity_status status =
        tokens_needed(mask, w->first, w->end, !keys, &reach_first, &reach_end, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    /* the computed tokens' own side, and what they reach on the other */
    const int64_t own_first = keys ? w->key_first : w->query_first;
    const int64_t own_end = keys ? w->key_end : w->query_end;
    const int64_t other_first = keys ? w->query_first : w->key_first;
    const int64_t other_end = keys ? w->query_end : w->key_end;
    if ((w->first < w->end && (w->first < own_first || w->end > own_end)) ||
        (reach_first < reach_end && (reach_first < other_first || reach_end > other_end))) {
        return cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "attention window: the %s [%lld, %lld) need %s [%lld, %lld) and themselves, but the "
            "tensors hold %s [%lld, %lld) and %s [%lld, %lld)",
            keys ? "keys" : "queries", (long long)w->first, (long long)w->end,
            keys ? "queries" : "keys", (long long)reach_first, (long long)reach_end,
            keys ? "keys" : "queries", (long long)own_first, (long long)own_end,
            keys ? "queries" : "keys", (long long)other_first, (long long)other_end);
    }
    tiles->row_first_tile = w->first / edge;
    tiles->row_end_tile = (w->end + edge - 1) / edge;
    tiles->query_first = w->query_first;
    tiles->query_rows = w->query_end - w->query_first;
    tiles->key_first = w->key_first;
    tiles->key_rows = w->key_end - w->key_first;
    const int64_t reached_first_tile = reach_first / edge;
    const int64_t reached_end_tile = reach_first < reach_end ? (reach_end + edge - 1) / edge : 0;
    if (keys) {
        tiles->query_tile_first = reached_first_tile;
        tiles->query_tile_end = reached_end_tile;
    } else {
        tiles->key_tile_first = reached_first_tile;
        tiles->key_tile_end = reached_end_tile;
    }
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

bool attention_items_by_row(reference_attention_shape shape, int64_t threads) {
    const int64_t items = shape.batch * shape.kv_heads;
    const double copy = 2.0 * (double)shape.seq_len * (double)shape.head_dim * sizeof(double);
    return (items % threads == 0 || items >= 4 * threads) &&
           copy <= (double)ATTENTION_ROW_COPY_BYTES;
}

bool attention_tiles_whole(const attention_tiles *tiles) {
    return tiles->first_tile == 0 && tiles->end_tile == tiles->shape.batch * tiles->count &&
           tiles->row_first_tile == 0 && tiles->row_end_tile == tiles->count;
}

bool attention_tiles_everything(const attention_tiles *tiles) {
    const int64_t S = tiles->shape.seq_len;
    return attention_tiles_whole(tiles) && tiles->query_first == 0 && tiles->query_rows == S &&
           tiles->key_first == 0 && tiles->key_rows == S;
}

int64_t attention_tiles_computed(const attention_tiles *tiles) {
    if (tiles->row_first_tile == 0 && tiles->row_end_tile == tiles->count) {
        return tiles->end_tile - tiles->first_tile;
    }
    return tiles->shape.batch * (tiles->row_end_tile - tiles->row_first_tile);
}

void attention_tile_computed(const attention_tiles *tiles, int64_t i, int64_t *b, int64_t *tile) {
    if (tiles->row_first_tile == 0 && tiles->row_end_tile == tiles->count) {
        attention_tile_of(tiles, tiles->first_tile + i, b, tile);
        return;
    }
    const int64_t per_row = tiles->row_end_tile - tiles->row_first_tile;
    *b = i / per_row;
    *tile = tiles->row_first_tile + i % per_row;
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
    *block = (attention_block){q_begin, q_end, k_begin, k_end, NULL, 0, NULL, NULL};
    if (kind == REFERENCE_BLOCK_ALL) {
        return true;
    }
    if (tiles->mixed != NULL && layout == ATTENTION_KEY_MAJOR) {
        const mixed_block *found = mixed_blocks_lookup(tiles->mixed, b, query_tile, key_tile);
        if (found != NULL) {
            *block = found->block;
            return found->present;
        }
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
    return (b * tiles->query_rows + t - tiles->query_first) * tiles->query_stride +
           h * tiles->shape.head_dim;
}

int64_t attention_key_offset(const attention_tiles *tiles, int64_t b, int64_t t, int64_t g) {
    return (b * tiles->key_rows + t - tiles->key_first) * tiles->key_stride +
           g * tiles->shape.head_dim;
}

void attention_transpose(double *transposed, const double *first_row, int64_t rows, int64_t stride,
                         int64_t head_dim) {
    /* a copy (alpha = 1 is exact), through OpenBLAS's blocked transpose */
    cblas_domatcopy(CblasRowMajor, CblasTrans, (int)rows, (int)head_dim, 1.0, first_row,
                    (int)stride, transposed, (int)rows);
}

void attention_copy_rows(double *copy, const double *first_row, int64_t rows, int64_t stride,
                         int64_t head_dim) {
    for (int64_t r = 0; r < rows; r++) {
        memcpy(copy + r * head_dim, first_row + r * stride, (size_t)head_dim * sizeof *copy);
    }
}

static void band_include(tile_band *band, int64_t index) {
    band->first = index < band->first ? index : band->first;
    band->end = index + 1 > band->end ? index + 1 : band->end;
}

void attention_block_bands(const attention_block *block, tile_band *key_memory,
                           tile_band *query_memory, const tile_band **key_bands,
                           const tile_band **query_bands) {
    if (block->key_bands != NULL) {
        *key_bands = block->key_bands;
        *query_bands = block->query_bands;
        return;
    }
    attention_block_bands_into(block, key_memory, query_memory);
    *key_bands = key_memory;
    *query_bands = query_memory;
}

void attention_block_bands_into(const attention_block *block, tile_band *key_bands,
                                tile_band *query_bands) {
    const int64_t queries = block->q_end - block->q_begin, keys = block->k_end - block->k_begin;
    const int64_t key_groups = (keys + TILE_PRODUCT_ROWS - 1) / TILE_PRODUCT_ROWS;
    const int64_t query_groups = (queries + TILE_PRODUCT_ROWS - 1) / TILE_PRODUCT_ROWS;
    const tile_band whole_keys = {0, keys}, whole_queries = {0, queries}, empty = {INT64_MAX, 0};
    for (int64_t g = 0; g < key_groups; g++) {
        key_bands[g] = block->allowed == NULL ? whole_queries : empty;
    }
    for (int64_t g = 0; g < query_groups; g++) {
        query_bands[g] = block->allowed == NULL ? whole_keys : empty;
    }
    if (block->allowed == NULL) {
        return;
    }
    for (int64_t j = 0; j < keys; j++) {
        const uint8_t *row = block->allowed + j * block->stride;
        for (int64_t i = 0; i < queries; i++) {
            if (row[i]) {
                band_include(&key_bands[j / TILE_PRODUCT_ROWS], i);
                band_include(&query_bands[i / TILE_PRODUCT_ROWS], j);
            }
        }
    }
}

void attention_copy_key_rows(const attention_tiles *tiles, const double *k, const double *v,
                             int64_t b, int64_t g, double *key_rows, double *value_rows,
                             bool check_values, uint8_t *finite) {
    const int64_t head_dim = tiles->shape.head_dim, seq_len = tiles->shape.seq_len;
    attention_copy_rows(key_rows, k + attention_key_offset(tiles, b, 0, g), seq_len,
                        tiles->key_stride, head_dim);
    attention_copy_rows(value_rows, v + attention_key_offset(tiles, b, 0, g), seq_len,
                        tiles->key_stride, head_dim);
    const double *checked = check_values ? value_rows : key_rows;
    for (int64_t t = 0; t < tiles->count; t++) {
        int64_t begin, end;
        attention_tile_tokens(tiles, t, &begin, &end);
        finite[t] =
            attention_rows_finite(checked + begin * head_dim, end - begin, head_dim, head_dim);
    }
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
