/*
 * attention_forward.c — float64 reference attention forward (see attention.h), tile by tile.
 *
 * One work item is (batch row b, query head h, query tile). It transposes its query tile once,
 * then walks the key tiles in increasing order, skipping those the mask classifies as empty,
 * with the online softmax of each query:
 *   s      = scale · (q·k)                     (key-major: sᵀ = K·Qᵀ, tile_products.h)
 *   m'     = max(m, max over allowed s)        c = exp(m − m')   (only when m' > m)
 *   l      = l·c + Σ_allowed exp(s − m')       acc = acc·c + Σ_allowed exp(s − m')·v
 * and at the end out = acc / l, lse = m + log l; a query with no allowed key keeps out = 0 and
 * lse = −∞. The mask's predicate is evaluated only on mixed tiles, where a masked pair gets an
 * exact 0 (never its score), and the products run over each group of rows' band only (the keys
 * or queries it has allowed pairs with). Each output row belongs to one item and is reduced in
 * key order, so the result does not depend on the number of threads.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "attention_tiles.h"
#include "exponential.h"
#include "mixed_blocks.h"
#include "parallel.h"
#include "threads.h"

typedef struct forward_context {
    attention_tiles tiles;
    double *out;     /* (B,S,H,Dh) */
    double *lse;     /* (B,H,S) */
    const double *q; /* (B,S,H,Dh) */
    const double *k; /* (B,S,Hkv,Dh) */
    const double *v; /* (B,S,Hkv,Dh) */
    double scale;
} forward_context;

/* One thread's scratch, carved out of the runner's allocation. */
typedef struct forward_scratch {
    double *scores;         /* (edge, edge) key-major scores, then probabilities, of one block */
    double *values;         /* (edge, Dh) acc: Σ p·v of each query of the tile so far */
    double *queries;        /* (Dh, edge) the query tile, transposed */
    double *keys;           /* (edge, Dh) the block's key tile, its rows side by side */
    double *value_rows;     /* (edge, Dh) the block's value tile, its rows side by side */
    double *key_row;        /* (S, Dh) items by (b, g): every key of theirs, side by side */
    double *value_row;      /* (S, Dh) the same for the values (both NULL for other items) */
    uint8_t *values_finite; /* (count) with them: whether value tile t is all finite */
    double *largest;        /* (edge) m of each query */
    double *sum;            /* (edge) l of each query */
    double *tile_largest;   /* (edge) per query of a block: its largest allowed score */
    double *tile_sum;       /* (edge) per query of a block: Σ of its probabilities */
    int64_t *tile_allowed;  /* (edge) per query of a block: 1 if it has an allowed key there */
    tile_band *key_bands;   /* (edge / TILE_PRODUCT_ROWS + 1) of a block */
    tile_band *query_bands; /* (edge / TILE_PRODUCT_ROWS + 1) of a block */
    uint8_t *allowed;       /* (edge, edge) predicate of a mixed block */
} forward_scratch;

/* A thread's scratch; with whole_row, room for every key and value of one (b, g). */
static size_t forward_scratch_bytes(const attention_tiles *tiles, bool whole_row) {
    const size_t edge = (size_t)tiles->edge, head_dim = (size_t)tiles->shape.head_dim;
    const size_t groups = edge / TILE_PRODUCT_ROWS + 1;
    const size_t row = whole_row ? 2 * (size_t)tiles->shape.seq_len * head_dim : 0;
    return (edge * edge + 4 * edge * head_dim + 5 * edge + row) * sizeof(double) +
           2 * groups * sizeof(tile_band) + edge * edge + (whole_row ? (size_t)tiles->count : 0);
}

static forward_scratch forward_scratch_carve(const attention_tiles *tiles, void *memory,
                                             bool whole_row) {
    const int64_t edge = tiles->edge, head_dim = tiles->shape.head_dim;
    const int64_t groups = edge / TILE_PRODUCT_ROWS + 1;
    forward_scratch scratch;
    scratch.scores = memory;
    scratch.values = scratch.scores + edge * edge;
    scratch.queries = scratch.values + edge * head_dim;
    scratch.keys = scratch.queries + head_dim * edge;
    scratch.value_rows = scratch.keys + edge * head_dim;
    scratch.key_row = whole_row ? scratch.value_rows + edge * head_dim : NULL;
    scratch.value_row = whole_row ? scratch.key_row + tiles->shape.seq_len * head_dim : NULL;
    scratch.largest = scratch.value_rows + edge * head_dim +
                      (whole_row ? 2 * tiles->shape.seq_len * head_dim : 0);
    scratch.sum = scratch.largest + edge;
    scratch.tile_largest = scratch.sum + edge;
    scratch.tile_sum = scratch.tile_largest + edge;
    scratch.tile_allowed = (int64_t *)(scratch.tile_sum + edge);
    scratch.key_bands = (tile_band *)(scratch.tile_allowed + edge);
    scratch.query_bands = scratch.key_bands + groups;
    scratch.allowed = (uint8_t *)(scratch.query_bands + groups);
    scratch.values_finite = whole_row ? scratch.allowed + edge * edge : NULL;
    return scratch;
}

/* The online-softmax step of one block: turns its key-major products q·k (keys, queries; each
 * key's band of queries computed) into probabilities exp(scale·q·k − m') (exact 0 at masked
 * pairs and outside the bands) and updates m, l and acc of its queries (largest, sum and values
 * point at the block's first query). */
static inline __attribute__((always_inline)) void
softmax_block(forward_scratch *s, const attention_block *block, const tile_band *key_bands,
              double scale, double *largest, double *sum, double *values, int64_t head_dim) {
    const int64_t queries = block->q_end - block->q_begin, keys = block->k_end - block->k_begin;
    double *scores = s->scores;
    for (int64_t i = 0; i < queries; i++) {
        s->tile_largest[i] = -INFINITY;
        s->tile_sum[i] = 0.0;
        s->tile_allowed[i] = block->allowed == NULL;
    }
    for (int64_t j = 0; j < keys; j++) {
        double *row = scores + j * queries;
        const tile_band band = key_bands[j / TILE_PRODUCT_ROWS];
        for (int64_t i = band.first; i < band.end; i++) {
            row[i] *= scale;
        }
        if (block->allowed == NULL) {
            for (int64_t i = band.first; i < band.end; i++) {
                s->tile_largest[i] = row[i] > s->tile_largest[i] ? row[i] : s->tile_largest[i];
            }
            continue;
        }
        const uint8_t *allowed = block->allowed + j * block->stride;
        for (int64_t i = band.first; i < band.end; i++) {
            if (allowed[i]) {
                s->tile_allowed[i] = 1;
                s->tile_largest[i] = row[i] > s->tile_largest[i] ? row[i] : s->tile_largest[i];
            }
        }
    }
    for (int64_t i = 0; i < queries; i++) {
        if (s->tile_allowed[i] == 0) {
            continue; /* no allowed key for this query in this block: its p are zeroed below */
        }
        if (s->tile_largest[i] == -INFINITY) {
            largest[i] = NAN; /* every allowed score is NaN or −∞: no softmax exists, say so */
        } else if (s->tile_largest[i] > largest[i]) {
            if (largest[i] != -INFINITY) {
                const double correction = exponential(largest[i] - s->tile_largest[i]);
                sum[i] *= correction;
                for (int64_t d = 0; d < head_dim; d++) {
                    values[i * head_dim + d] *= correction;
                }
            }
            largest[i] = s->tile_largest[i];
        }
    }
    for (int64_t j = 0; j < keys; j++) { /* p, and each query's sum in key order */
        double *row = scores + j * queries;
        const tile_band band = key_bands[j / TILE_PRODUCT_ROWS];
        const int64_t first = band.first < band.end ? band.first : queries;
        const int64_t end = band.first < band.end ? band.end : queries;
        memset(row, 0, (size_t)first * sizeof *row);
        memset(row + end, 0, (size_t)(queries - end) * sizeof *row);
        for (int64_t i = first; i < end; i++) {
            row[i] -= largest[i];
        }
        exponential_in_place(row + first, end - first);
        if (block->allowed != NULL) {
            const uint8_t *allowed = block->allowed + j * block->stride;
            for (int64_t i = first; i < end; i++) {
                row[i] = allowed[i] ? row[i] : 0.0; /* a masked score is never read */
            }
        }
        for (int64_t i = first; i < end; i++) {
            s->tile_sum[i] += row[i];
        }
    }
    for (int64_t i = 0; i < queries; i++) {
        sum[i] += s->tile_sum[i];
    }
}

/* out and lse of the queries of (b, h, query_tile): forward_query_tile, below. */
static inline __attribute__((always_inline)) void query_tile_body(const forward_context *c,
                                                                  forward_scratch *scratch,
                                                                  int64_t b, int64_t h,
                                                                  int64_t query_tile) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, heads = tiles->shape.heads;
    const int64_t g = h / tiles->group;
    forward_scratch s = *scratch;
    int64_t q_begin, q_end;
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    const int64_t rows = q_end - q_begin;
    for (int64_t i = 0; i < rows; i++) {
        s.largest[i] = -INFINITY;
        s.sum[i] = 0.0;
    }
    memset(s.values, 0, (size_t)(rows * head_dim) * sizeof *s.values);
    attention_transpose(s.queries, c->q + attention_query_offset(tiles, b, q_begin, h), rows,
                        tiles->query_stride, head_dim);

    /* causal: no key tile after the query tile holds an allowed pair (nor, in a window, one
     * outside the tiles its queries reach) */
    for (int64_t key_tile = tiles->key_tile_first;
         key_tile <= query_tile && key_tile < tiles->key_tile_end; key_tile++) {
        attention_block block;
        if (!attention_block_find(tiles, b, query_tile, key_tile, ATTENTION_KEY_MAJOR, s.allowed,
                                  &block)) {
            continue;
        }
        const int64_t first = block.q_begin - q_begin, queries = block.q_end - block.q_begin;
        const int64_t keys = block.k_end - block.k_begin;
        const double *key_rows = s.keys, *value_rows = s.value_rows;
        bool values_finite = false; /* whether the value tile is all finite, if known */
        if (s.key_row != NULL) {    /* the item copied them all */
            values_finite = s.values_finite[key_tile];
            key_rows = s.key_row + block.k_begin * head_dim;
            value_rows = s.value_row + block.k_begin * head_dim;
        } else {
            attention_copy_rows(s.keys, c->k + attention_key_offset(tiles, b, block.k_begin, g),
                                keys, tiles->key_stride, head_dim);
            attention_copy_rows(s.value_rows,
                                c->v + attention_key_offset(tiles, b, block.k_begin, g), keys,
                                tiles->key_stride, head_dim);
        }
        const tile_band *key_bands = NULL, *query_bands = NULL;
        attention_block_bands(&block, s.key_bands, s.query_bands, &key_bands, &query_bands);
        double *values = s.values + first * head_dim;
        tile_product_set(keys, queries, head_dim, (tile_factor){key_rows, head_dim, 1},
                         s.queries + first, rows, s.scores, queries, key_bands, TILE_BANDS_COLUMNS);
        softmax_block(&s, &block, key_bands, c->scale, s.largest + first, s.sum + first, values,
                      head_dim);
        const tile_factor probabilities = {s.scores, 1, queries};
        if (block.allowed == NULL || values_finite ||
            attention_rows_finite(value_rows, keys, head_dim, head_dim)) {
            tile_product(queries, head_dim, keys, probabilities, value_rows, head_dim, values,
                         head_dim, query_bands, TILE_BANDS_INNER);
        } else { /* a masked value that is not finite: skip masked pairs, never multiply by 0 */
            tile_product_allowed(queries, head_dim, keys, probabilities, value_rows, head_dim,
                                 values, head_dim, block.allowed, 1, block.stride);
        }
    }

    for (int64_t i = 0; i < rows; i++) {
        double *out_row = c->out + attention_query_offset(tiles, b, q_begin + i, h);
        double *row_lse = c->lse + (b * heads + h) * tiles->shape.seq_len + q_begin + i;
        if (s.sum[i] == 0.0) {
            memset(out_row, 0, (size_t)head_dim * sizeof *out_row); /* fully masked row */
            *row_lse = -INFINITY;
            continue;
        }
        for (int64_t d = 0; d < head_dim; d++) {
            out_row[d] = s.values[i * head_dim + d] / s.sum[i];
        }
        *row_lse = s.largest[i] + log(s.sum[i]);
    }
}

/* The same compiled for AVX2 (its elementwise loops four lanes wide, the same arithmetic lane by
 * lane, so the same bits), taken where the CPU has it. */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void query_tile_avx2(const forward_context *c,
                                                            forward_scratch *scratch, int64_t b,
                                                            int64_t h, int64_t query_tile) {
    query_tile_body(c, scratch, b, h, query_tile);
}
#endif

/* out and lse of the queries of (b, h, query_tile). */
static void forward_query_tile(const forward_context *c, forward_scratch *scratch, int64_t b,
                               int64_t h, int64_t query_tile) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        query_tile_avx2(c, scratch, b, h, query_tile);
        return;
    }
#endif
    query_tile_body(c, scratch, b, h, query_tile);
}

/* Items (b, h, query tile), the last query tiles first: under a causal mask they have the most
 * key tiles. */
static void forward_item(void *context, int64_t item, void *memory) {
    const forward_context *c = context;
    const int64_t computed = attention_tiles_computed(&c->tiles);
    int64_t b = 0, query_tile = 0;
    attention_tile_computed(&c->tiles, computed - 1 - item % computed, &b, &query_tile);
    forward_scratch s = forward_scratch_carve(&c->tiles, memory, false);
    forward_query_tile(c, &s, b, item / computed % c->tiles.shape.heads, query_tile);
}

/* Items (b, key/value head g) of a call computing every tile: every query tile of the query
 * heads of g, from one copy of the keys and values of (b, g). The same arithmetic per query. */
static void forward_row_item(void *context, int64_t item, void *memory) {
    const forward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t b = item / tiles->shape.kv_heads, g = item % tiles->shape.kv_heads;
    forward_scratch s = forward_scratch_carve(tiles, memory, true);
    attention_copy_key_rows(tiles, c->k, c->v, b, g, s.key_row, s.value_row, true, s.values_finite);
    for (int64_t h = g * tiles->group; h < (g + 1) * tiles->group; h++) {
        for (int64_t query_tile = 0; query_tile < tiles->count; query_tile++) {
            forward_query_tile(c, &s, b, h, query_tile);
        }
    }
}

static cpparity_status forward_run(forward_context *context, cpparity_error *error) {
    const attention_tiles *tiles = &context->tiles;
    /* items by (b, g) where the call computes every tile and they share out evenly */
    const int64_t row_items = tiles->shape.batch * tiles->shape.kv_heads;
    const bool by_row = attention_tiles_everything(tiles) &&
                        attention_items_by_row(tiles->shape, reference_threads());
    const reference_parallel_work work = {
        .items = by_row ? row_items : tiles->shape.heads * attention_tiles_computed(tiles),
        .scratch_bytes = forward_scratch_bytes(tiles, by_row),
        .run_item = by_row ? forward_row_item : forward_item,
        .context = context,
    };
    /* a whole call finds its mixed blocks once for every head */
    mixed_blocks mixed = {0};
    bool found = false;
    cpparity_status status = attention_tiles_everything(tiles)
                                 ? mixed_blocks_find(&mixed, tiles, &found, error)
                                 : CPPARITY_OK;
    context->tiles.mixed = found ? &mixed : NULL;
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&work, "the reference attention forward", error);
    }
    context->tiles.mixed = NULL;
    mixed_blocks_free(&mixed);
    return status;
}

cpparity_status reference_attention_forward(double *out, double *lse, const double *q,
                                            const double *k, const double *v,
                                            const reference_mask *mask,
                                            reference_attention_shape shape, double scale,
                                            cpparity_error *error) {
    return reference_attention_forward_rows(out, lse, q, k, v, mask, shape, scale, 0,
                                            shape.batch * shape.seq_len, error);
}

cpparity_status reference_attention_forward_rows(double *out, double *lse, const double *q,
                                                 const double *k, const double *v,
                                                 const reference_mask *mask,
                                                 reference_attention_shape shape, double scale,
                                                 int64_t first_row, int64_t end_row,
                                                 cpparity_error *error) {
    forward_context context = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .scale = scale};
    cpparity_status status = attention_tiles_init(&context.tiles, mask, shape, error);
    if (status == CPPARITY_OK) {
        status = attention_tiles_restrict(&context.tiles, first_row, end_row, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    return forward_run(&context, error);
}

cpparity_status reference_attention_forward_window(double *out, double *lse, const double *q,
                                                   const double *k, const double *v,
                                                   const reference_mask *mask,
                                                   reference_attention_shape shape, double scale,
                                                   reference_attention_window window,
                                                   cpparity_error *error) {
    forward_context context = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .scale = scale};
    cpparity_status status = attention_tiles_init(&context.tiles, mask, shape, error);
    if (status == CPPARITY_OK) {
        status = attention_tiles_window(&context.tiles, &window, false, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    return forward_run(&context, error);
}
