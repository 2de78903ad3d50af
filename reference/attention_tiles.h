/*
 * attention_tiles.h — internal to reference/: the tiles the reference attention's forward and
 * backward share. Queries and keys of a batch row are cut into tiles of mask->block_size tokens
 * (the last one shorter); a (query tile, key tile) pair is classified by the reference's own
 * mask (reference_mask_classify_block, exact: "all" only if every pair is allowed) and skipped
 * when none of its pairs is allowed. The tile edge comes from the mask, never from the thread
 * count, so the arithmetic is the same for every number of threads.
 */
#ifndef CPPARITY_REFERENCE_ATTENTION_TILES_H
#define CPPARITY_REFERENCE_ATTENTION_TILES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "reference/attention.h"
#include "reference/mask.h"
#include "reference/tile_products.h"

typedef struct attention_tiles {
    reference_attention_shape shape;
    const reference_mask *mask;
    int64_t edge;         /* tokens per tile: mask->block_size */
    int64_t count;        /* tiles per batch row: ceil(S / edge) */
    int64_t group;        /* query heads per key/value head: H / Hkv */
    int64_t query_stride; /* H · Dh, between consecutive tokens of a query-shaped tensor */
    int64_t key_stride;   /* Hkv · Dh, between consecutive tokens of a key-shaped tensor */
    int64_t first_tile;   /* the tiles whose outputs are computed: [first_tile, end_tile) of */
    int64_t end_tile;     /* the flattened b · count + tile, all B · count unless restricted */
    /* A window (reference_attention_window, attention.h): the tiles [row_first_tile,
     * row_end_tile) of every batch row are computed (0 and count unless windowed; a window and
     * a restriction to flattened rows never come together), and the tensors hold only some
     * tokens of each row: query-shaped ones [query_first, query_first + query_rows), key-shaped
     * ones [key_first, key_first + key_rows) (0 and S unless windowed). */
    int64_t row_first_tile, row_end_tile;
    int64_t query_first, query_rows;
    int64_t key_first, key_rows;
    /* The tiles the loops visit: key tiles [key_tile_first, key_tile_end) and query tiles
     * [query_tile_first, query_tile_end) of a row (every tile unless windowed; outside them every
     * pair with a computed tile is empty, which the window's check makes sure of). */
    int64_t key_tile_first, key_tile_end;
    int64_t query_tile_first, query_tile_end;
    /* Every mixed key-major block found beforehand (mixed_blocks.h), or NULL: found pair by
     * pair. */
    const struct mixed_blocks *mixed;
} attention_tiles;

/* Most bytes of keys and values a whole-call item copies side by side: every key and value of its
 * (batch row, key/value head), once, rather than tile by tile for each pair. */
#define ATTENTION_ROW_COPY_BYTES ((size_t)64 << 20)

/* Whether a call computing every tile of `shape` on `threads` threads runs its items by (batch
 * row, key/value head), each holding a copy of its keys and values (2·S·Dh doubles): when such
 * items share out evenly over the threads and the copy fits ATTENTION_ROW_COPY_BYTES. */
bool attention_items_by_row(reference_attention_shape shape, int64_t threads);

/* A whole call finds its mixed blocks once for every head (mixed_blocks.h) when there are at most
 * this many per query tile on average (a window's or a chunk's edges make one or two). */
#define ATTENTION_MIXED_PER_TILE 4

/* Checks shape against mask (CPPARITY_ERROR_INPUT naming what differs) and fills tiles, every
 * tile's outputs to be computed. */
cpparity_status attention_tiles_init(attention_tiles *tiles, const reference_mask *mask,
                                     reference_attention_shape shape, cpparity_error *error);

/* Computes the outputs of the flattened rows [first_row, end_row) of B·S only (a rank's row
 * blocks when the reference is spread): CPPARITY_ERROR_INPUT unless both are on tile edges. */
cpparity_status attention_tiles_restrict(attention_tiles *tiles, int64_t first_row, int64_t end_row,
                                         cpparity_error *error);

/* Computes the outputs of the window's tokens [window.first, window.end) of every batch row, its
 * tensors holding the window's tokens only (attention.h). `keys` says which outputs: those of
 * keys (dk, dv) rather than queries (out, lse, dq). CPPARITY_ERROR_INPUT unless the tokens are on
 * tile edges (or S) and the tensors' windows hold every token an allowed pair of a computed tile
 * reaches (reference_attention_keys_needed, reference_attention_queries_needed). */
cpparity_status attention_tiles_window(attention_tiles *tiles, const reference_attention_window *w,
                                       bool keys, cpparity_error *error);

/* Whether tiles computes every tile's outputs. */
bool attention_tiles_whole(const attention_tiles *tiles);

/* Whether tiles computes every tile's outputs from tensors holding every token (not a window). */
bool attention_tiles_everything(const attention_tiles *tiles);

/* How many tiles have their outputs computed, and the i-th of them in increasing flattened order
 * (i in [0, attention_tiles_computed)): its batch row and tile. */
int64_t attention_tiles_computed(const attention_tiles *tiles);
void attention_tile_computed(const attention_tiles *tiles, int64_t i, int64_t *b, int64_t *tile);

/* Batch row and tile of flattened tile f (b · count + tile). */
void attention_tile_of(const attention_tiles *tiles, int64_t f, int64_t *b, int64_t *tile);

/* Tokens [*begin, *end) of tile `index`. */
void attention_tile_tokens(const attention_tiles *tiles, int64_t index, int64_t *begin,
                           int64_t *end);

/* How a block's matrices (scores, probabilities, predicate) are laid out. */
typedef enum attention_layout {
    ATTENTION_QUERY_MAJOR, /* (queries, keys): one row per query */
    ATTENTION_KEY_MAJOR,   /* (keys, queries): one row per key */
} attention_layout;

/* The part of a (query tile, key tile) pair that the work is done on: the smallest ranges of
 * queries and keys holding every allowed pair of the tile pair. Queries and keys outside them are
 * masked for the whole tile pair and never enter any product, so their values, finite or not,
 * cannot change a bit of the result. */
typedef struct attention_block {
    int64_t q_begin, q_end; /* queries [q_begin, q_end), absolute in the row */
    int64_t k_begin, k_end; /* keys [k_begin, k_end), absolute in the row */
    const uint8_t *allowed; /* predicate, laid out as the block's matrices, row stride `stride`;
                               NULL when every pair of the block is allowed */
    int64_t stride;         /* row stride of allowed */
    /* the block's bands (attention_block_bands) when they were found with it, else NULL */
    const tile_band *key_bands, *query_bands;
} attention_block;

/* Finds the block of (query_tile, key_tile) in batch row b: false when the pair holds no allowed
 * pair (skip it). Only a mixed pair has its predicate evaluated, into predicate_memory (edge ×
 * edge bytes) in `layout`, which block->allowed then points into; or, key-major with
 * tiles->mixed set, block->allowed and the bands point into what was found beforehand. */
bool attention_block_find(const attention_tiles *tiles, int64_t b, int64_t query_tile,
                          int64_t key_tile, attention_layout layout, uint8_t *predicate_memory,
                          attention_block *block);

/* The bands (tile_products.h) of a key-major block, in block coordinates: key_bands[g] holds the
 * queries allowed to any of the keys [g·TILE_PRODUCT_ROWS, (g + 1)·TILE_PRODUCT_ROWS) of the
 * block, query_bands[g] the keys allowed to any of those queries (ceil(keys / TILE_PRODUCT_ROWS)
 * and ceil(queries / TILE_PRODUCT_ROWS) entries). Every pair outside its group's band is masked;
 * a block whose pairs are all allowed gets whole bands. */
void attention_block_bands_into(const attention_block *block, tile_band *key_bands,
                                tile_band *query_bands);

/* The same, pointing *key_bands and *query_bands at the block's own when it has them, else
 * computing them into key_memory and query_memory. */
void attention_block_bands(const attention_block *block, tile_band *key_memory,
                           tile_band *query_memory, const tile_band **key_bands,
                           const tile_band **query_bands);

/* Offset of token t, head h in a query-shaped (B,S,H,Dh) tensor, batch row b (in a window: of
 * the tensor holding the window's query tokens). */
int64_t attention_query_offset(const attention_tiles *tiles, int64_t b, int64_t t, int64_t h);

/* Offset of token t, head g in a key-shaped (B,S,Hkv,Dh) tensor, batch row b (in a window: of
 * the tensor holding the window's key tokens). */
int64_t attention_key_offset(const attention_tiles *tiles, int64_t b, int64_t t, int64_t g);

/* transposed (Dh, rows) = the `rows` rows of Dh values at first_row, `stride` apart. Each work
 * item transposes its own tile once, so that every product of the tiles is a dgemm of the forms
 * A·B or Aᵀ·B (row-major), which OpenBLAS runs on its small-matrix kernels at tile sizes. */
void attention_transpose(double *transposed, const double *first_row, int64_t rows, int64_t stride,
                         int64_t head_dim);

/* copy (rows, Dh) = the `rows` rows of Dh values at first_row, `stride` apart, side by side. */
void attention_copy_rows(double *copy, const double *first_row, int64_t rows, int64_t stride,
                         int64_t head_dim);

/* Copies every key and value of (batch row b, key/value head g) side by side, into key_rows and
 * value_rows (S, Dh each), and marks in finite[t] (count bytes) whether tile t of the copied keys
 * (or, with check_values, values) is all finite. */
void attention_copy_key_rows(const attention_tiles *tiles, const double *k, const double *v,
                             int64_t b, int64_t g, double *key_rows, double *value_rows,
                             bool check_values, uint8_t *finite);

/* Whether `rows` rows of Dh values, `stride` apart, are all finite. Masked pairs are multiplied
 * by an exact 0 in the BLAS products of mixed blocks, which is exact only for finite operands;
 * a mixed block with a non-finite operand takes the loop that skips masked pairs instead. */
bool attention_rows_finite(const double *first_row, int64_t rows, int64_t stride, int64_t head_dim);

#endif
