/*
 * attention_backward.c — float64 reference attention backward (see attention.h), tile by tile.
 *
 * ADDS into dq, dk, dv. With p = exp(s − lse) over allowed pairs only (0 elsewhere), s = scale·q·k:
 *   D_i    = Σ_d dout_id · out_id
 *   dp_ij  = dout_i · v_j                 ds_ij = scale · p_ij (dp_ij − D_i)
 *   dq_i  += Σ_j ds_ij k_j                dk_j += Σ_i ds_ij q_i             dv_j += Σ_i p_ij dout_i
 * Every (query tile, key tile, query head) pair's p and ds are computed by one function
 * (pair_gradients), key-major (keys, queries), from sᵀ = K·Qᵀ and dpᵀ = V·doutᵀ; every output
 * element is one chain of fused multiply-adds starting from its value (tile_products.h), its
 * terms in a fixed order:
 *   dq of (b, h, query tile): the key tiles in increasing order, each tile's keys in order;
 *   dk, dv of (b, g, key tile): the query heads of g, then the query tiles, then their queries,
 *   in increasing order.
 * Pass 0 (items: batch row, query tile) finds the queries with exactly one allowed key (see
 * pair_gradients). Then either
 *   - one fused pass, items (b, key/value head g): for each query head of g and query tile, its D,
 *     then every pair of key tiles once, adding to dq, dk and dv alike; or
 *   - two passes: 1. items (b, h, query tile): D, then dq; 2. items (b, g, key tile): dk and dv,
 *     recomputing the pairs' p and ds.
 * Both make the same chains in the same order from the same p and ds, so they give the same bits;
 * the fused pass is taken when a call computes every tile and its items keep the threads busy,
 * the two passes otherwise (a rank's rows, a window, fewer (b, g) than threads). Masked pairs
 * contribute exactly nothing: their p and ds are set to 0 whatever s held, the products run over
 * the bands holding the allowed pairs (attention_tiles.h), and a mixed block with a non-finite
 * operand skips masked pairs instead of multiplying them by 0.
 */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tiles.h"
#include "exponential.h"
#include "mixed_blocks.h"
#include "parallel.h"
#include "threads.h"

typedef struct backward_context {
    attention_tiles tiles;
    double *dq;               /* (B,S,H,Dh) */
    double *dk;               /* (B,S,Hkv,Dh) */
    double *dv;               /* (B,S,Hkv,Dh) */
    double *delta;            /* (B,H,S) D, written by pass 1 (NULL when it does not run) */
    const double *delta_read; /* (B,H,S) D, read by passes 1 and 2 */
    uint8_t *lone;            /* (B,S) 1: the query has exactly one allowed key (pass 0) */
    const double *dout;       /* (B,S,H,Dh) */
    const double *q;          /* (B,S,H,Dh) */
    const double *k;          /* (B,S,Hkv,Dh) */
    const double *v;          /* (B,S,Hkv,Dh) */
    const double *out;        /* (B,S,H,Dh) */
    const double *lse;        /* (B,H,S) */
    double scale;
    int64_t lone_first_tile, lone_end_tile; /* pass 0's query tiles of every batch row */
} backward_context;

/* One thread's scratch, carved out of the runner's allocation. The tiles of one query tile (of
 * one head) and of one key tile (of one key/value head), copied once for every pair they meet. */
typedef struct backward_scratch {
    double *probabilities;        /* (edge, edge) q·k, then p, of one block, key-major */
    double *score_grads;          /* (edge, edge) dp, then ds, of one block, key-major */
    double *queries_transposed;   /* (Dh, edge) the query tile */
    double *grads_transposed;     /* (Dh, edge) the dout tile */
    double *query_rows;           /* (edge, Dh) the query tile */
    double *grad_rows;            /* (edge, Dh) the dout tile */
    const double *key_rows;       /* (edge, Dh) the key tile: key_buffer, or in key_row */
    const double *value_rows;     /* (edge, Dh) the value tile: value_buffer, or in value_row */
    double *key_buffer;           /* (edge, Dh) */
    double *value_buffer;         /* (edge, Dh) */
    double *key_row;              /* (S, Dh) the fused pass: every key of its (b, g), or NULL */
    double *value_row;            /* (S, Dh) the same for the values */
    tile_band *key_bands;         /* (edge / TILE_PRODUCT_ROWS + 1) of a block */
    tile_band *query_bands;       /* (edge / TILE_PRODUCT_ROWS + 1) of a block */
    uint8_t *allowed;             /* (edge, edge) predicate of a mixed block */
    uint8_t *keys_finite_of_tile; /* (count) the fused pass: whether key tile t is all finite */
    bool queries_finite, grads_finite, keys_finite; /* whether the tiles held are all finite */
    int64_t query_b, query_h; /* whose query tile the query copies hold (−1: none) */
    int64_t query_tile, query_begin, query_end;
    int64_t key_b, key_g, key_tile; /* whose key tile the key copies hold (−1: none) */
    int64_t key_begin, key_end;
} backward_scratch;

/* A thread's scratch; with whole_row, room for every key and value of a batch row and one
 * key/value head (the fused pass copies them once). */
static size_t backward_scratch_bytes(const attention_tiles *tiles, bool whole_row) {
    const size_t edge = (size_t)tiles->edge, head_dim = (size_t)tiles->shape.head_dim;
    const size_t groups = edge / TILE_PRODUCT_ROWS + 1;
    const size_t row = whole_row ? 2 * (size_t)tiles->shape.seq_len * head_dim : 0;
    return (2 * edge * edge + 6 * edge * head_dim + row) * sizeof(double) +
           2 * groups * sizeof(tile_band) + edge * edge + (whole_row ? (size_t)tiles->count : 0);
}

static backward_scratch backward_scratch_carve(const attention_tiles *tiles, void *memory,
                                               bool whole_row) {
    const int64_t edge = tiles->edge, head_dim = tiles->shape.head_dim;
    const int64_t groups = edge / TILE_PRODUCT_ROWS + 1;
    backward_scratch scratch;
    scratch.probabilities = memory;
    scratch.score_grads = scratch.probabilities + edge * edge;
    scratch.queries_transposed = scratch.score_grads + edge * edge;
    scratch.grads_transposed = scratch.queries_transposed + head_dim * edge;
    scratch.query_rows = scratch.grads_transposed + head_dim * edge;
    scratch.grad_rows = scratch.query_rows + edge * head_dim;
    scratch.key_buffer = scratch.grad_rows + edge * head_dim;
    scratch.value_buffer = scratch.key_buffer + edge * head_dim;
    scratch.key_row = whole_row ? scratch.value_buffer + edge * head_dim : NULL;
    scratch.value_row = whole_row ? scratch.key_row + tiles->shape.seq_len * head_dim : NULL;
    double *end = scratch.value_buffer + edge * head_dim +
                  (whole_row ? 2 * tiles->shape.seq_len * head_dim : 0);
    scratch.key_rows = scratch.key_buffer;
    scratch.value_rows = scratch.value_buffer;
    scratch.key_bands = (tile_band *)end;
    scratch.query_bands = scratch.key_bands + groups;
    scratch.allowed = (uint8_t *)(scratch.query_bands + groups);
    scratch.keys_finite_of_tile = whole_row ? scratch.allowed + edge * edge : NULL;
    scratch.queries_finite = scratch.grads_finite = scratch.keys_finite = false;
    scratch.query_b = scratch.query_h = scratch.query_tile = -1;
    scratch.key_b = scratch.key_g = scratch.key_tile = -1;
    scratch.query_begin = scratch.query_end = scratch.key_begin = scratch.key_end = 0;
    return scratch;
}

/* Copies the query and dout tile of (b, h, query_tile) into s, unless they are there. */
static void load_query_tile(const backward_context *c, backward_scratch *s, int64_t b, int64_t h,
                            int64_t query_tile) {
    if (s->query_b == b && s->query_h == h && s->query_tile == query_tile) {
        return;
    }
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim;
    attention_tile_tokens(tiles, query_tile, &s->query_begin, &s->query_end);
    const int64_t rows = s->query_end - s->query_begin;
    const int64_t offset = attention_query_offset(tiles, b, s->query_begin, h);
    /* the rows from the tensors once, then their transposes from the copies, in cache */
    attention_copy_rows(s->query_rows, c->q + offset, rows, tiles->query_stride, head_dim);
    attention_copy_rows(s->grad_rows, c->dout + offset, rows, tiles->query_stride, head_dim);
    attention_transpose(s->queries_transposed, s->query_rows, rows, head_dim, head_dim);
    attention_transpose(s->grads_transposed, s->grad_rows, rows, head_dim, head_dim);
    s->queries_finite = attention_rows_finite(s->query_rows, rows, head_dim, head_dim);
    s->grads_finite = attention_rows_finite(s->grad_rows, rows, head_dim, head_dim);
    s->query_b = b;
    s->query_h = h;
    s->query_tile = query_tile;
}

/* Copies the key and value tile of (b, g, key_tile) into s, unless they are there. */
static void load_key_tile(const backward_context *c, backward_scratch *s, int64_t b, int64_t g,
                          int64_t key_tile) {
    if (s->key_b == b && s->key_g == g && s->key_tile == key_tile) {
        return;
    }
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim;
    attention_tile_tokens(tiles, key_tile, &s->key_begin, &s->key_end);
    if (s->key_row != NULL) { /* the fused pass copied them all */
        s->key_rows = s->key_row + s->key_begin * head_dim;
        s->value_rows = s->value_row + s->key_begin * head_dim;
        s->keys_finite = s->keys_finite_of_tile[key_tile];
    } else {
        const int64_t offset = attention_key_offset(tiles, b, s->key_begin, g);
        attention_copy_rows(s->key_buffer, c->k + offset, s->key_end - s->key_begin,
                            tiles->key_stride, head_dim);
        attention_copy_rows(s->value_buffer, c->v + offset, s->key_end - s->key_begin,
                            tiles->key_stride, head_dim);
        s->keys_finite =
            attention_rows_finite(s->key_buffer, s->key_end - s->key_begin, head_dim, head_dim);
    }
    s->key_b = b;
    s->key_g = g;
    s->key_tile = key_tile;
}

/* A (query tile, key tile) pair of one batch row and one query head, and its block. */
typedef struct tile_pair {
    int64_t b, h, g;              /* batch row, query head, its key/value head */
    int64_t query_tile, key_tile; /* tile indices */
    attention_block block;        /* where the allowed pairs are */
    int64_t queries, keys;        /* queries and keys of the block */
    int64_t first_query;          /* of the block in the query tile */
    int64_t first_key;            /* of the block in the key tile */
    const tile_band *key_bands;   /* the block's bands (attention_tiles.h) */
    const tile_band *query_bands;
} tile_pair;

/* p = exp(scale·s − lse) and ds = scale·p (dp − D) in place over key row j of a block (queries
 * values; s and dp computed over its band only), lse, D, lone and allowed given per query; 0 at
 * masked pairs and outside the band. lone is NULL when no query of the block is lone, allowed
 * NULL when every pair is allowed. A lone query (one allowed key) gets p = 1 and ds = 0 exactly:
 * the softmax of one score is the constant 1, which s recomputed in another order than the
 * forward's would miss by an ulp. */
static inline __attribute__((always_inline)) void
row_gradients(double *probability, double *score_grad, int64_t queries, tile_band band,
              double scale, const double *lse, const double *delta, const uint8_t *lone,
              const uint8_t *allowed) {
    const int64_t first = band.first < band.end ? band.first : queries;
    const int64_t end = band.first < band.end ? band.end : queries;
    memset(probability, 0, (size_t)first * sizeof *probability);
    memset(score_grad, 0, (size_t)first * sizeof *score_grad);
    memset(probability + end, 0, (size_t)(queries - end) * sizeof *probability);
    memset(score_grad + end, 0, (size_t)(queries - end) * sizeof *score_grad);
    for (int64_t x = first; x < end; x++) {
        probability[x] = scale * probability[x] - lse[x];
    }
    exponential_in_place(probability + first, end - first);
    if (lone == NULL && allowed == NULL) {
        for (int64_t x = first; x < end; x++) {
            score_grad[x] = scale * (probability[x] * (score_grad[x] - delta[x]));
        }
        return;
    }
    for (int64_t x = first; x < end; x++) {
        double p = probability[x], ds = scale * (p * (score_grad[x] - delta[x]));
        if (lone != NULL && lone[x]) {
            p = 1.0;
            ds = 0.0;
        }
        if (allowed != NULL && !allowed[x]) {
            p = 0.0; /* whatever s and dp held */
            ds = 0.0;
        }
        probability[x] = p;
        score_grad[x] = ds;
    }
}

/* Finds the pair's block and, when it holds an allowed pair, its p and ds (key-major) from the
 * tiles in s, which must hold the pair's query and key tiles. */
static inline __attribute__((always_inline)) bool
pair_gradients_body(const backward_context *c, tile_pair *pair, backward_scratch *s) {
    const attention_tiles *tiles = &c->tiles;
    if (!attention_block_find(tiles, pair->b, pair->query_tile, pair->key_tile, ATTENTION_KEY_MAJOR,
                              s->allowed, &pair->block)) {
        return false;
    }
    const int64_t head_dim = tiles->shape.head_dim;
    const int64_t queries = pair->block.q_end - pair->block.q_begin;
    const int64_t keys = pair->block.k_end - pair->block.k_begin;
    const int64_t tile_rows = s->query_end - s->query_begin;
    pair->queries = queries;
    pair->keys = keys;
    pair->first_query = pair->block.q_begin - s->query_begin;
    pair->first_key = pair->block.k_begin - s->key_begin;
    attention_block_bands(&pair->block, s->key_bands, s->query_bands, &pair->key_bands,
                          &pair->query_bands);
    const tile_factor key_factor = {s->key_rows + pair->first_key * head_dim, head_dim, 1};
    const tile_factor value_factor = {s->value_rows + pair->first_key * head_dim, head_dim, 1};
    tile_product_set(keys, queries, head_dim, key_factor, s->queries_transposed + pair->first_query,
                     tile_rows, s->probabilities, queries, pair->key_bands, TILE_BANDS_COLUMNS);
    tile_product_set(keys, queries, head_dim, value_factor, s->grads_transposed + pair->first_query,
                     tile_rows, s->score_grads, queries, pair->key_bands, TILE_BANDS_COLUMNS);
    const int64_t row_index =
        (pair->b * tiles->shape.heads + pair->h) * tiles->shape.seq_len + pair->block.q_begin;
    const uint8_t *lone = c->lone + pair->b * tiles->shape.seq_len + pair->block.q_begin;
    if (memchr(lone, 1, (size_t)queries) == NULL) {
        lone = NULL;
    }
    for (int64_t j = 0; j < keys; j++) {
        row_gradients(s->probabilities + j * queries, s->score_grads + j * queries, queries,
                      pair->key_bands[j / TILE_PRODUCT_ROWS], c->scale, c->lse + row_index,
                      c->delta_read + row_index, lone,
                      pair->block.allowed != NULL ? pair->block.allowed + j * pair->block.stride
                                                  : NULL);
    }
    return true;
}

/* The same compiled for AVX2 (its elementwise loops four lanes wide, the same arithmetic lane by
 * lane, so the same bits), taken where the CPU has it. */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static bool
pair_gradients_avx2(const backward_context *c, tile_pair *pair, backward_scratch *s) {
    return pair_gradients_body(c, pair, s);
}
#endif

static bool pair_gradients(const backward_context *c, tile_pair *pair, backward_scratch *s) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        return pair_gradients_avx2(c, pair, s);
    }
#endif
    return pair_gradients_body(c, pair, s);
}

/* sum (rows, Dh; row stride sum_stride) += weights · operand, the weights (rows, count) read
 * through `weights`, operand (count, Dh) side by side, over the bands; on a mixed block whose
 * operand is not all finite (tile_finite: its whole tile is), masked pairs (allowed(r, x) == 0,
 * read through allowed_row and allowed_inner) are skipped instead of multiplied by 0. */
static void add_product(const tile_pair *pair, int64_t rows, int64_t count, tile_factor weights,
                        const double *operand, bool tile_finite, int64_t head_dim, double *sum,
                        int64_t sum_stride, const tile_band *bands, int64_t allowed_row,
                        int64_t allowed_inner) {
    if (pair->block.allowed == NULL || tile_finite ||
        attention_rows_finite(operand, count, head_dim, head_dim)) {
        tile_product(rows, head_dim, count, weights, operand, head_dim, sum, sum_stride, bands,
                     TILE_BANDS_INNER);
        return;
    }
    tile_product_allowed(rows, head_dim, count, weights, operand, head_dim, sum, sum_stride,
                         pair->block.allowed, allowed_row, allowed_inner);
}

/* dq of the pair's queries += ds · k. */
static void add_query_grads(const backward_context *c, const tile_pair *pair,
                            const backward_scratch *s) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim;
    add_product(pair, pair->queries, pair->keys, (tile_factor){s->score_grads, 1, pair->queries},
                s->key_rows + pair->first_key * head_dim, s->keys_finite, head_dim,
                c->dq + attention_query_offset(tiles, pair->b, pair->block.q_begin, pair->h),
                tiles->query_stride, pair->query_bands, 1, pair->block.stride);
}

/* dk and dv of the pair's keys += dsᵀ · q and pᵀ · dout. */
static void add_key_grads(const backward_context *c, const tile_pair *pair,
                          const backward_scratch *s) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim;
    const int64_t offset = attention_key_offset(tiles, pair->b, pair->block.k_begin, pair->g);
    add_product(pair, pair->keys, pair->queries, (tile_factor){s->score_grads, pair->queries, 1},
                s->query_rows + pair->first_query * head_dim, s->queries_finite, head_dim,
                c->dk + offset, tiles->key_stride, pair->key_bands, pair->block.stride, 1);
    add_product(pair, pair->keys, pair->queries, (tile_factor){s->probabilities, pair->queries, 1},
                s->grad_rows + pair->first_query * head_dim, s->grads_finite, head_dim,
                c->dv + offset, tiles->key_stride, pair->key_bands, pair->block.stride, 1);
}

/* D of the queries of (b, h, query tile), into c->delta: each query's sum in d order, four
 * queries side by side. */
static void tile_deltas(const backward_context *c, int64_t b, int64_t h, int64_t query_tile) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim;
    const int64_t row_index = (b * tiles->shape.heads + h) * tiles->shape.seq_len;
    int64_t q_begin, q_end;
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    for (int64_t t = q_begin; t < q_end; t += 4) {
        const int64_t count = q_end - t < 4 ? q_end - t : 4;
        const double *dout[4], *out[4];
        double delta[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t i = 0; i < 4; i++) { /* a short last group repeats its first query */
            const int64_t offset = attention_query_offset(tiles, b, t + (i < count ? i : 0), h);
            dout[i] = c->dout + offset;
            out[i] = c->out + offset;
        }
        for (int64_t d = 0; d < head_dim; d++) {
            for (int64_t i = 0; i < 4; i++) {
                delta[i] += dout[i][d] * out[i][d];
            }
        }
        for (int64_t i = 0; i < count; i++) {
            c->delta[row_index + t + i] = delta[i];
        }
    }
}

/* Pass 0: the lone queries of one (b, query tile), counting allowed keys over its key tiles. */
static void lone_item(void *context, int64_t item, void *memory) {
    backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t per_row = c->lone_end_tile - c->lone_first_tile;
    const int64_t query_tile = c->lone_first_tile + item % per_row, b = item / per_row;
    int64_t *allowed_keys = memory; /* (edge) */
    uint8_t *predicate = (uint8_t *)(allowed_keys + tiles->edge);
    int64_t q_begin, q_end;
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    for (int64_t i = 0; i < q_end - q_begin; i++) {
        allowed_keys[i] = 0;
    }
    for (int64_t key_tile = 0; key_tile <= query_tile; key_tile++) {
        attention_block block;
        if (!attention_block_find(tiles, b, query_tile, key_tile, ATTENTION_QUERY_MAJOR, predicate,
                                  &block)) {
            continue;
        }
        for (int64_t q = block.q_begin; q < block.q_end; q++) {
            for (int64_t k = block.k_begin; k < block.k_end; k++) {
                allowed_keys[q - q_begin] +=
                    block.allowed == NULL ||
                    block.allowed[(q - block.q_begin) * block.stride + k - block.k_begin];
            }
        }
    }
    for (int64_t q = q_begin; q < q_end; q++) {
        c->lone[b * tiles->shape.seq_len + q] = allowed_keys[q - q_begin] == 1;
    }
}

/* D of the queries of one (b, query tile), every head: what pass 1 computes for its own tiles,
 * the same sums, for a call restricted to some rows (attention_tiles_restrict), whose pass 2
 * reads D of queries outside them. */
static void delta_item(void *context, int64_t item, void *memory) {
    (void)memory;
    const backward_context *c = context;
    int64_t b = 0, query_tile = 0;
    attention_tile_of(&c->tiles, item, &b, &query_tile);
    for (int64_t h = 0; h < c->tiles.shape.heads; h++) {
        tile_deltas(c, b, h, query_tile);
    }
}

/* The key tiles a query tile's pairs may reach, in increasing order: [key_tile_first, *end). */
static int64_t key_tiles_end(const attention_tiles *tiles, int64_t query_tile) {
    /* causal: no key tile after the query tile holds an allowed pair (nor, in a window, one
     * outside the tiles its queries reach) */
    return query_tile + 1 < tiles->key_tile_end ? query_tile + 1 : tiles->key_tile_end;
}

/* Pass 1: D and dq of one (b, h, query tile). */
static void query_item(void *context, int64_t item, void *memory) {
    const backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    backward_scratch s = backward_scratch_carve(tiles, memory, false);
    tile_pair pair = {0};
    const int64_t computed = attention_tiles_computed(tiles);
    attention_tile_computed(tiles, computed - 1 - item % computed, &pair.b,
                            &pair.query_tile); /* the longest first */
    pair.h = item / computed % tiles->shape.heads;
    pair.g = pair.h / tiles->group;
    tile_deltas(c, pair.b, pair.h, pair.query_tile);
    load_query_tile(c, &s, pair.b, pair.h, pair.query_tile);
    for (pair.key_tile = tiles->key_tile_first;
         pair.key_tile < key_tiles_end(tiles, pair.query_tile); pair.key_tile++) {
        load_key_tile(c, &s, pair.b, pair.g, pair.key_tile);
        if (pair_gradients(c, &pair, &s)) {
            add_query_grads(c, &pair, &s);
        }
    }
}

/* Pass 2: dk and dv of one (b, key/value head g, key tile). */
static void key_item(void *context, int64_t item, void *memory) {
    const backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    backward_scratch s = backward_scratch_carve(tiles, memory, false);
    tile_pair pair = {0};
    const int64_t computed = attention_tiles_computed(tiles);
    /* under a causal mask the first key tiles have the most work */
    attention_tile_computed(tiles, item % computed, &pair.b, &pair.key_tile);
    pair.g = item / computed % tiles->shape.kv_heads;
    load_key_tile(c, &s, pair.b, pair.g, pair.key_tile);
    for (pair.h = pair.g * tiles->group; pair.h < (pair.g + 1) * tiles->group; pair.h++) {
        /* causal: no query tile before the key tile holds an allowed pair (nor, in a window, one
         * outside the tiles its keys reach) */
        for (pair.query_tile = pair.key_tile > tiles->query_tile_first ? pair.key_tile
                                                                       : tiles->query_tile_first;
             pair.query_tile < tiles->query_tile_end; pair.query_tile++) {
            load_query_tile(c, &s, pair.b, pair.h, pair.query_tile);
            if (pair_gradients(c, &pair, &s)) {
                add_key_grads(c, &pair, &s);
            }
        }
    }
}

/* The fused pass: D, dq, dk and dv of one (b, key/value head g), every tile computed. Its loops
 * make dq's chains over the key tiles, and dk's and dv's over the query heads then the query
 * tiles, in the order of passes 1 and 2. */
static void fused_item(void *context, int64_t item, void *memory) {
    const backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    backward_scratch s = backward_scratch_carve(tiles, memory, true);
    tile_pair pair = {0};
    pair.b = item / tiles->shape.kv_heads;
    pair.g = item % tiles->shape.kv_heads;
    attention_copy_key_rows(tiles, c->k, c->v, pair.b, pair.g, s.key_row, s.value_row, false,
                            s.keys_finite_of_tile);
    for (pair.h = pair.g * tiles->group; pair.h < (pair.g + 1) * tiles->group; pair.h++) {
        for (pair.query_tile = 0; pair.query_tile < tiles->count; pair.query_tile++) {
            tile_deltas(c, pair.b, pair.h, pair.query_tile);
            load_query_tile(c, &s, pair.b, pair.h, pair.query_tile);
            for (pair.key_tile = 0; pair.key_tile < key_tiles_end(tiles, pair.query_tile);
                 pair.key_tile++) {
                load_key_tile(c, &s, pair.b, pair.g, pair.key_tile);
                if (pair_gradients(c, &pair, &s)) {
                    add_query_grads(c, &pair, &s);
                    add_key_grads(c, &pair, &s);
                }
            }
        }
    }
}

cpparity_status reference_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                                             const double *q, const double *k, const double *v,
                                             const double *out, const double *lse,
                                             const reference_mask *mask,
                                             reference_attention_shape shape, double scale,
                                             cpparity_error *error) {
    return reference_attention_backward_rows(dq, dk, dv, dout, q, k, v, out, lse, mask, shape,
                                             scale, 0, shape.batch * shape.seq_len, error);
}

/* Which passes a backward call runs. */
typedef enum backward_passes {
    BACKWARD_WHOLE,   /* D of every query, dq, dk and dv of the computed tiles */
    BACKWARD_QUERIES, /* a window's queries: their D (into the caller's delta) and dq */
    BACKWARD_KEYS,    /* a window's keys: their dk and dv, from the caller's D */
} backward_passes;

/* Runs the passes on context, whose tiles are set; context->delta is the caller's unless
 * passes is BACKWARD_WHOLE. */
static cpparity_status backward_run(backward_context *context, backward_passes passes,
                                    cpparity_error *error) {
    const reference_attention_shape shape = context->tiles.shape;
    const int64_t computed = attention_tiles_computed(&context->tiles);
    double *own_delta = NULL;
    if (passes == BACKWARD_WHOLE) {
        own_delta = malloc((size_t)(shape.batch * shape.heads * shape.seq_len) * sizeof(double));
        context->delta = own_delta;
    }
    context->lone = malloc((size_t)(shape.batch * shape.seq_len));
    if (passes != BACKWARD_KEYS) {
        context->delta_read = context->delta;
    }
    if (context->delta_read == NULL || context->lone == NULL) {
        free(own_delta);
        free(context->lone);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (reference attention backward, B·H·S = %lld)",
                                  (long long)(shape.batch * shape.heads * shape.seq_len));
    }
    /* pass 0 over the queries the other passes read */
    context->lone_first_tile = passes == BACKWARD_QUERIES ? context->tiles.row_first_tile
                               : passes == BACKWARD_KEYS  ? context->tiles.query_tile_first
                                                          : 0;
    context->lone_end_tile = passes == BACKWARD_QUERIES ? context->tiles.row_end_tile
                             : passes == BACKWARD_KEYS  ? context->tiles.query_tile_end
                                                        : context->tiles.count;
    const size_t edge = (size_t)context->tiles.edge;
    const reference_parallel_work lone = {
        .items = shape.batch * (context->lone_end_tile - context->lone_first_tile),
        .scratch_bytes = edge * sizeof(int64_t) + edge * edge,
        .run_item = lone_item,
        .context = context,
    };
    const size_t scratch_bytes = backward_scratch_bytes(&context->tiles, false);
    const bool whole = attention_tiles_whole(&context->tiles);
    const reference_parallel_work deltas = {
        .items = passes == BACKWARD_WHOLE && !whole ? shape.batch * context->tiles.count : 0,
        .scratch_bytes = 0,
        .run_item = delta_item,
        .context = context,
    };
    /* the fused pass where it computes every tile and its (b, g) items share out evenly */
    const int64_t fused_items = shape.batch * shape.kv_heads;
    const bool fused = passes == BACKWARD_WHOLE && attention_tiles_everything(&context->tiles) &&
                       attention_items_by_row(shape, reference_threads());
    const reference_parallel_work fused_pass = {
        .items = fused ? fused_items : 0,
        .scratch_bytes = backward_scratch_bytes(&context->tiles, true),
        .run_item = fused_item,
        .context = context,
    };
    const reference_parallel_work queries = {
        .items = passes == BACKWARD_KEYS || fused ? 0 : shape.heads * computed,
        .scratch_bytes = scratch_bytes,
        .run_item = query_item,
        .context = context,
    };
    const reference_parallel_work keys = {
        .items = passes == BACKWARD_QUERIES || fused ? 0 : shape.kv_heads * computed,
        .scratch_bytes = scratch_bytes,
        .run_item = key_item,
        .context = context,
    };
    /* a whole call finds its mixed blocks once for every head */
    mixed_blocks mixed = {0};
    bool found = false;
    cpparity_status status = passes == BACKWARD_WHOLE && attention_tiles_everything(&context->tiles)
                                 ? mixed_blocks_find(&mixed, &context->tiles, &found, error)
                                 : CPPARITY_OK;
    context->tiles.mixed = found ? &mixed : NULL;
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&lone, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&deltas, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&fused_pass, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&queries, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&keys, "the reference attention backward", error);
    }
    context->tiles.mixed = NULL;
    mixed_blocks_free(&mixed);
    free(own_delta);
    free(context->lone);
    return status;
}

cpparity_status
reference_attention_backward_rows(double *dq, double *dk, double *dv, const double *dout,
                                  const double *q, const double *k, const double *v,
                                  const double *out, const double *lse, const reference_mask *mask,
                                  reference_attention_shape shape, double scale, int64_t first_row,
                                  int64_t end_row, cpparity_error *error) {
    backward_context context = {.dq = dq,
                                .dk = dk,
                                .dv = dv,
                                .dout = dout,
                                .q = q,
                                .k = k,
                                .v = v,
                                .out = out,
                                .lse = lse,
                                .scale = scale};
    cpparity_status status = attention_tiles_init(&context.tiles, mask, shape, error);
    if (status == CPPARITY_OK) {
        status = attention_tiles_restrict(&context.tiles, first_row, end_row, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    return backward_run(&context, BACKWARD_WHOLE, error);
}

/* One side of a window (BACKWARD_QUERIES or BACKWARD_KEYS) on context, its tiles set here. */
static cpparity_status backward_window(backward_context *context, const reference_mask *mask,
                                       reference_attention_shape shape,
                                       const reference_attention_window *window,
                                       backward_passes passes, cpparity_error *error) {
    cpparity_status status = attention_tiles_init(&context->tiles, mask, shape, error);
    if (status == CPPARITY_OK) {
        status = attention_tiles_window(&context->tiles, window, passes == BACKWARD_KEYS, error);
    }
    return status == CPPARITY_OK ? backward_run(context, passes, error) : status;
}

cpparity_status reference_attention_backward_queries_window(
    double *dq, double *delta, const double *dout, const double *q, const double *k,
    const double *v, const double *out, const double *lse, const reference_mask *mask,
    reference_attention_shape shape, double scale, reference_attention_window window,
    cpparity_error *error) {
    backward_context context = {.dq = dq,
                                .delta = delta,
                                .dout = dout,
                                .q = q,
                                .k = k,
                                .v = v,
                                .out = out,
                                .lse = lse,
                                .scale = scale};
    return backward_window(&context, mask, shape, &window, BACKWARD_QUERIES, error);
}

cpparity_status reference_attention_backward_keys_window(
    double *dk, double *dv, const double *dout, const double *q, const double *k, const double *v,
    const double *lse, const double *delta, const reference_mask *mask,
    reference_attention_shape shape, double scale, reference_attention_window window,
    cpparity_error *error) {
    backward_context context = {.dk = dk,
                                .dv = dv,
                                .delta_read = delta,
                                .dout = dout,
                                .q = q,
                                .k = k,
                                .v = v,
                                .lse = lse,
                                .scale = scale};
    return backward_window(&context, mask, shape, &window, BACKWARD_KEYS, error);
}
