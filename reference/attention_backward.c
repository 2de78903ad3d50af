/*
 * attention_backward.c — float64 reference attention backward (see attention.h), tile by tile.
 *
 * ADDS into dq, dk, dv. With p = exp(s − lse) over allowed pairs only (0 elsewhere):
 *   D_i    = Σ_d dout_id · out_id
 *   dp_ij  = dout_i · v_j                 ds_ij = p_ij (dp_ij − D_i)
 *   dq_i  += scale Σ_j ds_ij k_j          dk_j += scale Σ_i ds_ij q_i       dv_j += Σ_i p_ij dout_i
 * Pass 0 (items: batch row, query tile) finds the queries with exactly one allowed key (see
 * row_gradients). Then two passes, so that every output element is reduced by one work item in
 * a fixed order:
 *   1. items (b, query head h, query tile): D of the tile's queries, then dq over the key tiles
 *      in increasing order;
 *   2. items (b, key/value head g, key tile): dk and dv over the query heads of g, then the query
 *      tiles, in increasing order.
 * Each item transposes its own tile once; pass 1 then works on key-major (keys, queries) blocks,
 * pass 2 on query-major (queries, keys) blocks, so that every product is a row-major dgemm A·B
 * or Aᵀ·B. The two passes recompute p and ds of a block from dgemms of different orientation, so
 * they may differ in the last bit; each is a fixed function of the inputs. Masked pairs contribute
 * exactly nothing: their p and ds are set to 0 whatever s held, the products run over the block
 * holding the allowed pairs (attention_tiles.h), and a mixed block with a non-finite operand skips
 * masked pairs instead of multiplying them by 0.
 */
#include "attention.h"

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tiles.h"
#include "exponential.h"
#include "parallel.h"

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

/* One thread's scratch, carved out of the runner's allocation. */
typedef struct backward_scratch {
    double *probabilities;    /* (edge, edge) scores, then p, of one block */
    double *score_grads;      /* (edge, edge) dp, then ds, of one block */
    double *first;            /* (edge, Dh) pass 1: Σ ds·k; pass 2: Σ ds·q */
    double *second;           /* (edge, Dh) pass 2: Σ p·dout */
    double *transposed;       /* (Dh, edge) pass 1: the query tile; pass 2: the key tile */
    double *transposed_grads; /* (Dh, edge) pass 1: the dout tile; pass 2: the value tile */
    uint8_t *allowed;         /* (edge, edge) predicate of a mixed block */
} backward_scratch;

static size_t backward_scratch_bytes(const attention_tiles *tiles) {
    const size_t edge = (size_t)tiles->edge, head_dim = (size_t)tiles->shape.head_dim;
    return (2 * edge * edge + 4 * edge * head_dim) * sizeof(double) + edge * edge;
}

static backward_scratch backward_scratch_carve(const attention_tiles *tiles, void *memory) {
    const int64_t edge = tiles->edge, head_dim = tiles->shape.head_dim;
    backward_scratch scratch;
    scratch.probabilities = memory;
    scratch.score_grads = scratch.probabilities + edge * edge;
    scratch.first = scratch.score_grads + edge * edge;
    scratch.second = scratch.first + edge * head_dim;
    scratch.transposed = scratch.second + edge * head_dim;
    scratch.transposed_grads = scratch.transposed + head_dim * edge;
    scratch.allowed = (uint8_t *)(scratch.transposed_grads + head_dim * edge);
    return scratch;
}

/* A (query tile, key tile) pair of one batch row and one query head, and its block. */
typedef struct tile_pair {
    int64_t b, h, g;              /* batch row, query head, its key/value head */
    int64_t query_tile, key_tile; /* tile indices */
    attention_block block;        /* where the allowed pairs are */
    int64_t queries, keys;        /* queries and keys of the block */
    int64_t query_offset;         /* of the block's first query in q and dout */
    int64_t key_offset;           /* of the block's first key in k and v */
} tile_pair;

/* Finds the pair's block in `layout` (false: nothing allowed, skip it). */
static bool tile_pair_begin(const attention_tiles *tiles, tile_pair *pair, attention_layout layout,
                            backward_scratch *s) {
    if (!attention_block_find(tiles, pair->b, pair->query_tile, pair->key_tile, layout, s->allowed,
                              &pair->block)) {
        return false;
    }
    pair->queries = pair->block.q_end - pair->block.q_begin;
    pair->keys = pair->block.k_end - pair->block.k_begin;
    pair->query_offset = attention_query_offset(tiles, pair->b, pair->block.q_begin, pair->h);
    pair->key_offset = attention_key_offset(tiles, pair->b, pair->block.k_begin, pair->g);
    return true;
}

/* p = exp(s − lse) and ds = p (dp − D) in place over one row of a block's matrices, lse, D and
 * lone given per column (step 1) or one for the row (step 0); then 0 at masked pairs. A lone query
 * (one allowed key) gets p = 1 and ds = 0 exactly: the softmax of one score is the constant 1,
 * which s recomputed in another orientation than the forward's would miss by an ulp. */
static void row_gradients(double *probability, double *score_grad, int64_t count, const double *lse,
                          const double *delta, const uint8_t *lone, int64_t step,
                          const uint8_t *allowed) {
    for (int64_t x = 0; x < count; x++) {
        probability[x] -= lse[x * step];
    }
    exponential_in_place(probability, count);
    for (int64_t x = 0; x < count; x++) {
        score_grad[x] = probability[x] * (score_grad[x] - delta[x * step]);
    }
    for (int64_t x = 0; x < count; x++) {
        if (lone[x * step]) {
            probability[x] = 1.0;
            score_grad[x] = 0.0;
        }
    }
    if (allowed != NULL) {
        for (int64_t x = 0; x < count; x++) {
            probability[x] = allowed[x] ? probability[x] : 0.0; /* whatever s and dp held */
            score_grad[x] = allowed[x] ? score_grad[x] : 0.0;
        }
    }
}

/* Pass 1's p and ds of a block, key-major (keys, queries), from sᵀ = scale·K·Qᵀ and dpᵀ = V·doutᵀ
 * with the item's transposed query and dout tiles (first: the block's first column in them). */
static void key_major_gradients(const backward_context *c, const tile_pair *pair,
                                backward_scratch *s, int64_t first, int64_t tile_rows) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, queries = pair->queries;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)pair->keys, (int)queries,
                (int)head_dim, c->scale, c->k + pair->key_offset, (int)tiles->key_stride,
                s->transposed + first, (int)tile_rows, 0.0, s->probabilities, (int)queries);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)pair->keys, (int)queries,
                (int)head_dim, 1.0, c->v + pair->key_offset, (int)tiles->key_stride,
                s->transposed_grads + first, (int)tile_rows, 0.0, s->score_grads, (int)queries);
    const int64_t row_index =
        (pair->b * tiles->shape.heads + pair->h) * tiles->shape.seq_len + pair->block.q_begin;
    for (int64_t j = 0; j < pair->keys; j++) {
        row_gradients(s->probabilities + j * queries, s->score_grads + j * queries, queries,
                      c->lse + row_index, c->delta_read + row_index,
                      c->lone + pair->b * tiles->shape.seq_len + pair->block.q_begin, 1,
                      pair->block.allowed != NULL ? pair->block.allowed + j * pair->block.stride
                                                  : NULL);
    }
}

/* Pass 2's p and ds of a block, query-major (queries, keys), from s = scale·Q·Kᵀ and
 * dp = dout·Vᵀ with the item's transposed key and value tiles (first: the block's first column
 * in them). */
static void query_major_gradients(const backward_context *c, const tile_pair *pair,
                                  backward_scratch *s, int64_t first, int64_t tile_keys) {
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, keys = pair->keys;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)pair->queries, (int)keys,
                (int)head_dim, c->scale, c->q + pair->query_offset, (int)tiles->query_stride,
                s->transposed + first, (int)tile_keys, 0.0, s->probabilities, (int)keys);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)pair->queries, (int)keys,
                (int)head_dim, 1.0, c->dout + pair->query_offset, (int)tiles->query_stride,
                s->transposed_grads + first, (int)tile_keys, 0.0, s->score_grads, (int)keys);
    const int64_t row_index =
        (pair->b * tiles->shape.heads + pair->h) * tiles->shape.seq_len + pair->block.q_begin;
    for (int64_t i = 0; i < pair->queries; i++) {
        row_gradients(s->probabilities + i * keys, s->score_grads + i * keys, keys,
                      c->lse + row_index + i, c->delta_read + row_index + i,
                      c->lone + pair->b * tiles->shape.seq_len + pair->block.q_begin + i, 0,
                      pair->block.allowed != NULL ? pair->block.allowed + i * pair->block.stride
                                                  : NULL);
    }
}

/* sum (rows, Dh) += weightsᵀ · operand, weights (count, rows) with row stride `rows`, operand
 * (count, Dh) with row stride `stride`. On a mixed block whose operand is not all finite, the
 * masked pairs (allowed[x·allowed_stride + y] == 0 for weight (x, y)) are skipped instead of
 * multiplied by 0. */
static void add_product(const tile_pair *pair, int64_t rows, int64_t count, const double *weights,
                        const double *operand, int64_t stride, int64_t head_dim, double *sum) {
    if (pair->block.allowed == NULL || attention_rows_finite(operand, count, stride, head_dim)) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)head_dim, (int)count,
                    1.0, weights, (int)rows, operand, (int)stride, 1.0, sum, (int)head_dim);
        return;
    }
    for (int64_t y = 0; y < rows; y++) {
        for (int64_t x = 0; x < count; x++) {
            if (pair->block.allowed[x * pair->block.stride + y]) {
                const double weight = weights[x * rows + y];
                for (int64_t d = 0; d < head_dim; d++) {
                    sum[y * head_dim + d] += weight * operand[x * stride + d];
                }
            }
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
    backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, heads = tiles->shape.heads;
    int64_t b = 0, query_tile = 0, q_begin = 0, q_end = 0;
    attention_tile_of(tiles, item, &b, &query_tile);
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    for (int64_t h = 0; h < heads; h++) {
        const int64_t row_index = (b * heads + h) * tiles->shape.seq_len;
        for (int64_t t = q_begin; t < q_end; t++) {
            const int64_t offset = attention_query_offset(tiles, b, t, h);
            double delta = 0.0;
            for (int64_t d = 0; d < head_dim; d++) {
                delta += c->dout[offset + d] * c->out[offset + d];
            }
            c->delta[row_index + t] = delta;
        }
    }
}

/* Pass 1: D and dq of one (b, h, query tile). */
static void query_item(void *context, int64_t item, void *memory) {
    backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, heads = tiles->shape.heads;
    backward_scratch s = backward_scratch_carve(tiles, memory);
    tile_pair pair = {0};
    const int64_t computed = attention_tiles_computed(tiles);
    attention_tile_computed(tiles, computed - 1 - item % computed, &pair.b,
                            &pair.query_tile); /* the longest first */
    pair.h = item / computed % heads;
    pair.g = pair.h / tiles->group;
    int64_t q_begin, q_end;
    attention_tile_tokens(tiles, pair.query_tile, &q_begin, &q_end);
    const int64_t tile_rows = q_end - q_begin;
    const int64_t row_index = (pair.b * heads + pair.h) * tiles->shape.seq_len;
    for (int64_t t = q_begin; t < q_end; t++) {
        const int64_t offset = attention_query_offset(tiles, pair.b, t, pair.h);
        double delta = 0.0;
        for (int64_t d = 0; d < head_dim; d++) {
            delta += c->dout[offset + d] * c->out[offset + d];
        }
        c->delta[row_index + t] = delta;
    }
    const int64_t tile_offset = attention_query_offset(tiles, pair.b, q_begin, pair.h);
    attention_transpose(s.transposed, c->q + tile_offset, tile_rows, tiles->query_stride, head_dim);
    attention_transpose(s.transposed_grads, c->dout + tile_offset, tile_rows, tiles->query_stride,
                        head_dim);
    memset(s.first, 0, (size_t)(tile_rows * head_dim) * sizeof *s.first);
    /* causal: no key tile after the query tile holds an allowed pair (nor, in a window, one
     * outside the tiles its queries reach) */
    for (pair.key_tile = tiles->key_tile_first;
         pair.key_tile <= pair.query_tile && pair.key_tile < tiles->key_tile_end; pair.key_tile++) {
        if (!tile_pair_begin(tiles, &pair, ATTENTION_KEY_MAJOR, &s)) {
            continue;
        }
        const int64_t first = pair.block.q_begin - q_begin;
        key_major_gradients(c, &pair, &s, first, tile_rows);
        add_product(&pair, pair.queries, pair.keys, s.score_grads, c->k + pair.key_offset,
                    tiles->key_stride, head_dim, s.first + first * head_dim);
    }
    for (int64_t t = q_begin; t < q_end; t++) {
        double *dq_row = c->dq + attention_query_offset(tiles, pair.b, t, pair.h);
        for (int64_t d = 0; d < head_dim; d++) {
            dq_row[d] += c->scale * s.first[(t - q_begin) * head_dim + d];
        }
    }
}

/* Pass 2: dk and dv of one (b, key/value head g, key tile). */
static void key_item(void *context, int64_t item, void *memory) {
    backward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, kv_heads = tiles->shape.kv_heads;
    backward_scratch s = backward_scratch_carve(tiles, memory);
    tile_pair pair = {0};
    const int64_t computed = attention_tiles_computed(tiles);
    /* under a causal mask the first key tiles have the most work */
    attention_tile_computed(tiles, item % computed, &pair.b, &pair.key_tile);
    pair.g = item / computed % kv_heads;
    int64_t k_begin, k_end;
    attention_tile_tokens(tiles, pair.key_tile, &k_begin, &k_end);
    const int64_t tile_keys = k_end - k_begin;
    const int64_t tile_offset = attention_key_offset(tiles, pair.b, k_begin, pair.g);
    attention_transpose(s.transposed, c->k + tile_offset, tile_keys, tiles->key_stride, head_dim);
    attention_transpose(s.transposed_grads, c->v + tile_offset, tile_keys, tiles->key_stride,
                        head_dim);
    memset(s.first, 0, (size_t)(tile_keys * head_dim) * sizeof *s.first);
    memset(s.second, 0, (size_t)(tile_keys * head_dim) * sizeof *s.second);
    for (pair.h = pair.g * tiles->group; pair.h < (pair.g + 1) * tiles->group; pair.h++) {
        /* causal: no query tile before the key tile holds an allowed pair (nor, in a window, one
         * outside the tiles its keys reach) */
        for (pair.query_tile = pair.key_tile > tiles->query_tile_first ? pair.key_tile
                                                                       : tiles->query_tile_first;
             pair.query_tile < tiles->query_tile_end; pair.query_tile++) {
            if (!tile_pair_begin(tiles, &pair, ATTENTION_QUERY_MAJOR, &s)) {
                continue;
            }
            const int64_t first = pair.block.k_begin - k_begin;
            query_major_gradients(c, &pair, &s, first, tile_keys);
            add_product(&pair, pair.keys, pair.queries, s.probabilities,
                        c->dout + pair.query_offset, tiles->query_stride, head_dim,
                        s.second + first * head_dim);
            add_product(&pair, pair.keys, pair.queries, s.score_grads, c->q + pair.query_offset,
                        tiles->query_stride, head_dim, s.first + first * head_dim);
        }
    }
    for (int64_t t = k_begin; t < k_end; t++) {
        const int64_t offset = attention_key_offset(tiles, pair.b, t, pair.g);
        for (int64_t d = 0; d < head_dim; d++) {
            c->dk[offset + d] += c->scale * s.first[(t - k_begin) * head_dim + d];
            c->dv[offset + d] += s.second[(t - k_begin) * head_dim + d];
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
    const size_t scratch_bytes = backward_scratch_bytes(&context->tiles);
    const bool whole = attention_tiles_whole(&context->tiles);
    const reference_parallel_work deltas = {
        .items = passes == BACKWARD_WHOLE && !whole ? shape.batch * context->tiles.count : 0,
        .scratch_bytes = 0,
        .run_item = delta_item,
        .context = context,
    };
    const reference_parallel_work queries = {
        .items = passes == BACKWARD_KEYS ? 0 : shape.heads * computed,
        .scratch_bytes = scratch_bytes,
        .run_item = query_item,
        .context = context,
    };
    const reference_parallel_work keys = {
        .items = passes == BACKWARD_QUERIES ? 0 : shape.kv_heads * computed,
        .scratch_bytes = scratch_bytes,
        .run_item = key_item,
        .context = context,
    };
    cpparity_status status =
        reference_parallel_run(&lone, "the reference attention backward", error);
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&deltas, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&queries, "the reference attention backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&keys, "the reference attention backward", error);
    }
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
