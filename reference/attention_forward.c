/*
 * attention_forward.c — float64 reference attention forward (see attention.h), tile by tile.
 *
 * One work item is (batch row b, query head h, query tile). It transposes its query tile once,
 * then walks the key tiles in increasing order, skipping those the mask classifies as empty,
 * with the online softmax of each query:
 *   s      = scale · q·k                       (dgemm over the block, key-major: sᵀ = K·Qᵀ)
 *   m'     = max(m, max over allowed s)        c = exp(m − m')   (only when m' > m)
 *   l      = l·c + Σ_allowed exp(s − m')       acc = acc·c + Σ_allowed exp(s − m')·v  (dgemm)
 * and at the end out = acc / l, lse = m + log l; a query with no allowed key keeps out = 0 and
 * lse = −∞. The mask's predicate is evaluated only on mixed tiles, where a masked pair gets an
 * exact 0 (never its score). Each output row belongs to one item and is reduced in key order, so
 * the result does not depend on the number of threads.
 */
#include "attention.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention_tiles.h"
#include "exponential.h"
#include "parallel.h"

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
    double *scores;       /* (edge, edge) key-major scores, then probabilities, of one block */
    double *values;       /* (edge, Dh) acc: Σ p·v of each query of the tile so far */
    double *queries;      /* (Dh, edge) the query tile, transposed */
    double *largest;      /* (edge) m of each query */
    double *sum;          /* (edge) l of each query */
    double *tile_largest; /* (edge) per query of a block: its largest allowed score */
    double *tile_sum;     /* (edge) per query of a block: Σ of its probabilities */
    int64_t *tile_count;  /* (edge) per query of a block: its allowed keys */
    uint8_t *allowed;     /* (edge, edge) predicate of a mixed block */
} forward_scratch;

static size_t forward_scratch_bytes(const attention_tiles *tiles) {
    const size_t edge = (size_t)tiles->edge, head_dim = (size_t)tiles->shape.head_dim;
    return (edge * edge + 2 * edge * head_dim + 5 * edge) * sizeof(double) + edge * edge;
}

static forward_scratch forward_scratch_carve(const attention_tiles *tiles, void *memory) {
    const int64_t edge = tiles->edge, head_dim = tiles->shape.head_dim;
    forward_scratch scratch;
    scratch.scores = memory;
    scratch.values = scratch.scores + edge * edge;
    scratch.queries = scratch.values + edge * head_dim;
    scratch.largest = scratch.queries + head_dim * edge;
    scratch.sum = scratch.largest + edge;
    scratch.tile_largest = scratch.sum + edge;
    scratch.tile_sum = scratch.tile_largest + edge;
    scratch.tile_count = (int64_t *)(scratch.tile_sum + edge);
    scratch.allowed = (uint8_t *)(scratch.tile_count + edge);
    return scratch;
}

/* The online-softmax step of one block: turns its key-major scores (keys, queries) into
 * probabilities exp(s − m') (exact 0 at masked pairs) and updates m, l and acc of its queries
 * (largest, sum and values point at the block's first query). */
static void softmax_block(forward_scratch *s, const attention_block *block, double *largest,
                          double *sum, double *values, int64_t head_dim) {
    const int64_t queries = block->q_end - block->q_begin, keys = block->k_end - block->k_begin;
    double *scores = s->scores;
    for (int64_t i = 0; i < queries; i++) {
        s->tile_largest[i] = -INFINITY;
        s->tile_count[i] = block->allowed == NULL ? keys : 0;
    }
    for (int64_t j = 0; j < keys; j++) {
        const double *row = scores + j * queries;
        if (block->allowed == NULL) {
            for (int64_t i = 0; i < queries; i++) {
                s->tile_largest[i] = row[i] > s->tile_largest[i] ? row[i] : s->tile_largest[i];
            }
            continue;
        }
        const uint8_t *allowed = block->allowed + j * block->stride;
        for (int64_t i = 0; i < queries; i++) {
            if (allowed[i]) {
                s->tile_count[i]++;
                s->tile_largest[i] = row[i] > s->tile_largest[i] ? row[i] : s->tile_largest[i];
            }
        }
    }
    for (int64_t i = 0; i < queries; i++) {
        if (s->tile_count[i] == 0) {
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
    for (int64_t j = 0; j < keys; j++) {
        double *row = scores + j * queries;
        for (int64_t i = 0; i < queries; i++) {
            row[i] -= largest[i];
        }
    }
    exponential_in_place(scores, keys * queries);
    if (block->allowed != NULL) {
        for (int64_t j = 0; j < keys; j++) {
            const uint8_t *allowed = block->allowed + j * block->stride;
            double *row = scores + j * queries;
            for (int64_t i = 0; i < queries; i++) {
                row[i] = allowed[i] ? row[i] : 0.0; /* a masked score is never read */
            }
        }
    }
    for (int64_t i = 0; i < queries; i++) {
        s->tile_sum[i] = 0.0;
    }
    for (int64_t j = 0; j < keys; j++) { /* each query's sum in key order */
        const double *row = scores + j * queries;
        for (int64_t i = 0; i < queries; i++) {
            s->tile_sum[i] += row[i];
        }
    }
    for (int64_t i = 0; i < queries; i++) {
        sum[i] += s->tile_sum[i];
    }
}

/* values (queries, Dh) += pᵀ·v over a mixed block whose values are not all finite, skipping the
 * masked pairs instead of multiplying them by 0. */
static void add_values_skipping_masked(const attention_tiles *tiles, const attention_block *block,
                                       const double *probabilities, const double *value,
                                       double *values) {
    const int64_t queries = block->q_end - block->q_begin, keys = block->k_end - block->k_begin;
    const int64_t head_dim = tiles->shape.head_dim;
    for (int64_t i = 0; i < queries; i++) {
        for (int64_t j = 0; j < keys; j++) {
            if (block->allowed[j * block->stride + i]) {
                const double probability = probabilities[j * queries + i];
                const double *value_row = value + j * tiles->key_stride;
                for (int64_t d = 0; d < head_dim; d++) {
                    values[i * head_dim + d] += probability * value_row[d];
                }
            }
        }
    }
}

static void forward_item(void *context, int64_t item, void *memory) {
    const forward_context *c = context;
    const attention_tiles *tiles = &c->tiles;
    const int64_t head_dim = tiles->shape.head_dim, heads = tiles->shape.heads;
    /* the last query tiles first: under a causal mask they have the most key tiles */
    const int64_t computed = attention_tiles_computed(tiles);
    int64_t b = 0, query_tile = 0;
    attention_tile_computed(tiles, computed - 1 - item % computed, &b, &query_tile);
    const int64_t h = item / computed % heads;
    const int64_t g = h / tiles->group;
    forward_scratch s = forward_scratch_carve(tiles, memory);
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
        const double *key = c->k + attention_key_offset(tiles, b, block.k_begin, g);
        const double *value = c->v + attention_key_offset(tiles, b, block.k_begin, g);
        double *values = s.values + first * head_dim;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)keys, (int)queries,
                    (int)head_dim, c->scale, key, (int)tiles->key_stride, s.queries + first,
                    (int)rows, 0.0, s.scores, (int)queries);
        softmax_block(&s, &block, s.largest + first, s.sum + first, values, head_dim);
        if (block.allowed == NULL ||
            attention_rows_finite(value, keys, tiles->key_stride, head_dim)) {
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)queries, (int)head_dim,
                        (int)keys, 1.0, s.scores, (int)queries, value, (int)tiles->key_stride, 1.0,
                        values, (int)head_dim);
        } else {
            add_values_skipping_masked(tiles, &block, s.scores, value, values);
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

static cpparity_status forward_run(forward_context *context, cpparity_error *error) {
    const reference_parallel_work work = {
        .items = context->tiles.shape.heads * attention_tiles_computed(&context->tiles),
        .scratch_bytes = forward_scratch_bytes(&context->tiles),
        .run_item = forward_item,
        .context = context,
    };
    return reference_parallel_run(&work, "the reference attention forward", error);
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
