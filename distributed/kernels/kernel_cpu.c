/*
 * kernel_cpu.c — the built-in CPU float32 attention kernel ("cpu-f32"), behind kernel.h (see
 * kernel_cpu.h).
 *
 * Tiled like FlashAttention: for each tile of queries, key tiles are classified by
 * mask_classify_tile (empty tiles skipped, the predicate evaluated only in partial tiles), and
 * each query row merges tile after tile into an online softmax (online_softmax.h). Arithmetic is
 * float32, as in the implementation under test; results are deterministic.
 *
 * A (query tile, key tile, head) is a few small products over tiles copied side by side into
 * cache (a head's rows lie a multiple of 4 KiB apart in the tensors, so read in place they would
 * evict each other): scores and dp two query rows at a time against the transposed key or value
 * tile, one vector lane per key; then out, dq, dk and dv as weighted sums of rows, 32 elements
 * at a time in vector registers, two outputs sharing each row's load (kernel_cpu_lanes.h).
 * Masked pairs are skipped, never multiplied by 0, so a masked Inf or NaN reaches no output
 * (tests/support/masked_values_contract.h). Every output element still adds its terms one by one
 * in the order of the per-pair loop, so a row's results do not depend on the rows beside it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/block_rows.h"
#include "distributed/kernels/kernel_cpu_loops.h"
#include "distributed/kernels/mask_predicate.h"
#include "distributed/kernels/online_softmax.h"

/* The rows of one call: a block call's (kernel.h, ABI 3), or a whole-sequence call's (the
 * identity: every index NULL). */
typedef struct call_rows {
    int64_t query_len;          /* Sq */
    int64_t key_len;            /* Sk */
    const int64_t *query_index; /* [Sq] token of each query row, NULL: row i is token i */
    const int64_t *key_index;   /* [Sk] token of each key row, NULL: row j is token j */
} call_rows;

/* The token of row `row` under index (NULL: the identity). */
static int64_t token_of(const int64_t *index, int64_t row) {
    return block_token(index, row);
}

/* Offsets of row t, head h in a [B, rows, heads, Dh] tensor. */
static int64_t at(const cpparity_attention_dims *d, int64_t rows, int64_t heads, int64_t b,
                  int64_t t, int64_t h) {
    return ((b * rows + t) * heads + h) * d->head_dim;
}

/* y[i] = y[i] · keep + x[i] · factor for i < n, element by element (in runs of eight, a trip
 * count the compiler vectorizes at -O2). */
static void scale_add(float *restrict y, float keep, const float *restrict x, float factor,
                      int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            y[i + j] = y[i + j] * keep + x[i + j] * factor;
        }
    }
    for (; i < n; i++) {
        y[i] = y[i] * keep + x[i] * factor;
    }
}

/* The tile size of this copy (kernel_cpu.h): the options' tile, MAX_TILE without options. */
static int64_t tile_of(const void *context) {
    const kernel_cpu_options *options = context;
    return options != NULL && options->tile >= 1 && options->tile <= MAX_TILE ? options->tile
                                                                              : MAX_TILE;
}

/* Whether the options ask for the plain tile loops (kernel_cpu.h). */
static bool plain_loops_of(const void *context) {
    const kernel_cpu_options *options = context;
    return options != NULL && options->plain_loops;
}

/* The fault planted through the context (kernel_cpu.h), none without options. */
static cpparity_fault fault_of(const void *context) {
    const kernel_cpu_options *options = context;
    return options != NULL ? options->fault : CPPARITY_FAULT_NONE;
}

/* The kv head query head h reads: h / group (gqa-kv-mapping: h mod kv_heads). */
static int64_t kv_head(int64_t h, int64_t group, int64_t kv_heads, cpparity_fault fault) {
    return fault == CPPARITY_FAULT_GQA_KV_MAPPING ? h % kv_heads : h / group;
}

/* End of the key tile starting at row k0: min(k0 + tile, Sk); k0 (an empty tile) for a short
 * last tile under kernel-tiling. */
static int64_t key_tile_end(int64_t k0, int64_t seq_len, int64_t tile, cpparity_fault fault) {
    const int64_t k1 = k0 + tile < seq_len ? k0 + tile : seq_len;
    return fault == CPPARITY_FAULT_KERNEL_TILING && k1 - k0 < tile ? k0 : k1;
}

/* The shard-local faults' predicate: mask_allowed with the window compared on each token's index
 * inside its shard (window-local), or with a chunk grid restarting at each shard's first token
 * after left padding (chunk-local). */
static bool allowed_shard_local(const cpparity_mask_description *mask,
                                const kernel_cpu_options *options, int64_t b, int64_t q,
                                int64_t k) {
    const cpparity_fault fault = fault_of(options); /* fault site: window-local, chunk-local */
    if (fault == CPPARITY_FAULT_NONE) {
        return mask_allowed(mask, b, q, k);
    }
    const int64_t L = options->shard_length;
    cpparity_mask_description plain = *mask;
    if (fault == CPPARITY_FAULT_WINDOW_LOCAL && mask->layer_type == 1) {
        plain.layer_type = 0;
        return mask_allowed(&plain, b, q, k) && q % L - k % L < mask->window;
    }
    if (fault == CPPARITY_FAULT_CHUNK_LOCAL && mask->layer_type == 2 && mask->chunk_origin == 0) {
        plain.layer_type = 0;
        const int64_t lp = mask->left_padding[b];
        const int64_t q_origin = q / L * L > lp ? q / L * L : lp;
        const int64_t k_origin = k / L * L > lp ? k / L * L : lp;
        return mask_allowed(&plain, b, q, k) && q / L == k / L &&
               mask_floor_div(q - q_origin, mask->chunk_size) ==
                   mask_floor_div(k - k_origin, mask->chunk_size);
    }
    return mask_allowed(mask, b, q, k);
}

/* May query q attend key k (in a PARTIAL tile)? The shard-local faults deviate inside
 * allowed_shard_local, which every call goes through. */
static bool allowed(const cpparity_mask_description *mask, const void *context, int64_t b,
                    int64_t q, int64_t k) {
    return allowed_shard_local(mask, context, b, q, k);
}

/* The tile's class; under the shard-local faults every causal tile is PARTIAL (their predicate
 * is not the one the classification assumes). */
static int classify(const cpparity_mask_description *mask, const void *context, int64_t b,
                    int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
    const cpparity_fault fault = fault_of(context);
    if (fault == CPPARITY_FAULT_WINDOW_LOCAL || fault == CPPARITY_FAULT_CHUNK_LOCAL) {
        return k0 >= q1 || k1 <= k0 ? MASK_TILE_EMPTY : MASK_TILE_PARTIAL;
    }
    if (k1 <= k0) {
        return MASK_TILE_EMPTY; /* a tile kernel-tiling dropped */
    }
    return mask_classify_tile_scanning(mask, b, q0, q1, k0, k1,
                                       fault != CPPARITY_FAULT_TILE_CLASSIFICATION);
}

/* The class of the tile of query rows [i0, i1) × key rows [j0, j1) (block_rows.h): the
 * classification of its token ranges when both run over consecutive tokens (every whole-sequence
 * call, most of a block call's), else EMPTY when every key comes after every query and PARTIAL
 * otherwise (the predicate decides each pair). */
static int classify_rows(const cpparity_mask_description *mask, const void *context,
                         const call_rows *rows, int64_t b, int64_t i0, int64_t i1, int64_t j0,
                         int64_t j1) {
    if (j1 <= j0) {
        return MASK_TILE_EMPTY; /* a tile kernel-tiling dropped */
    }
    int64_t q0 = 0, k0 = 0;
    const int shape =
        block_rows_shape(rows->query_index, rows->key_index, i0, i1, j0, j1, &q0, &k0);
    return shape == BLOCK_ROWS_CONSECUTIVE
               ? classify(mask, context, b, q0, q0 + (i1 - i0), k0, k0 + (j1 - j0))
           : shape == BLOCK_ROWS_KEYS_AFTER ? MASK_TILE_EMPTY
                                            : MASK_TILE_PARTIAL;
}

/* The key rows a query tile ending at row i1 scans (block_rows.h). */
static int64_t key_rows_scanned(const call_rows *rows, int64_t i1) {
    return block_key_rows_scanned(rows->query_index, rows->key_index, rows->key_len, i1);
}

static int check_dims(const cpparity_attention_dims *d, const cpparity_mask_description *mask,
                      char *error, size_t capacity) {
    if (d->heads < 1 || d->kv_heads < 1 || d->head_dim < 1 || d->heads % d->kv_heads != 0 ||
        d->batch != mask->batch || d->seq_len != mask->seq_len) {
        snprintf(error, capacity,
                 "cpu-f32 kernel: inconsistent sizes (B=%lld S=%lld H=%lld Hkv=%lld Dh=%lld, mask "
                 "B=%lld S=%lld)",
                 (long long)d->batch, (long long)d->seq_len, (long long)d->heads,
                 (long long)d->kv_heads, (long long)d->head_dim, (long long)mask->batch,
                 (long long)mask->seq_len);
        return 1;
    }
    return 0;
}

/* Checks a block's rows (every index inside [0, S)). */
static int check_rows(const call_rows *rows, const cpparity_attention_dims *d, char *error,
                      size_t capacity) {
    if (rows->query_len < 0 || rows->key_len < 0) {
        snprintf(error, capacity, "cpu-f32 kernel: a block of %lld x %lld rows",
                 (long long)rows->query_len, (long long)rows->key_len);
        return 1;
    }
    for (int side = 0; side < 2; side++) {
        const int64_t *index = side == 0 ? rows->query_index : rows->key_index;
        const int64_t count = side == 0 ? rows->query_len : rows->key_len;
        for (int64_t i = 0; index != NULL && i < count; i++) {
            if (index[i] < 0 || index[i] >= d->seq_len) {
                snprintf(error, capacity,
                         "cpu-f32 kernel: block %s row %lld is token %lld, outside [0, %lld)",
                         side == 0 ? "query" : "key", (long long)i, (long long)index[i],
                         (long long)d->seq_len);
                return 1;
            }
        }
    }
    return 0;
}

/* Both calls' checks: sizes, rows, no stream. */
static int check_call(const cpparity_attention_dims *d, const cpparity_mask_description *mask,
                      const call_rows *rows, void *stream, char *error, size_t capacity) {
    if (stream != NULL) {
        snprintf(error, capacity, "cpu-f32 kernel: a stream was given to a CPU kernel");
        return 1;
    }
    return check_dims(d, mask, error, capacity) || check_rows(rows, d, error, capacity);
}

/* One query row of a forward tile: its scores (q · k, unscaled, from the rows-times-tile loop)
 * become its probabilities relative to the tile's maximum, in place, with use[j] set for the keys
 * it takes (allowed, score above −∞); returns the row's tile state (maximum −∞: no key taken,
 * every use 0). scores and use hold MAX_TILE entries. */
static online_softmax tile_row(const tile_loops *loops, const cpparity_mask_description *mask,
                               const void *context, const call_rows *rows, int64_t b, int64_t t,
                               int64_t k0, int64_t k1, int tile_class, float scale, float *scores,
                               unsigned char *use) {
    const int64_t query_token = token_of(rows->query_index, t);
    online_softmax state = {-INFINITY, 0.0f};
    for (int64_t j = 0; j < k1 - k0; j++) {
        const bool pair_allowed =
            tile_class == MASK_TILE_FULL ||
            allowed(mask, context, b, query_token, token_of(rows->key_index, k0 + j));
        scores[j] = pair_allowed ? scale * scores[j] : -INFINITY;
        if (scores[j] > state.maximum) {
            state.maximum = scores[j];
        }
    }
    for (int64_t j = 0; j < MAX_TILE; j++) {
        use[j] = j < k1 - k0 && state.maximum != -INFINITY && scores[j] != -INFINITY;
        scores[j] = use[j] ? scores[j] - state.maximum : 0.0f;
    }
    if (state.maximum == -INFINITY) {
        return state;
    }
    loops->exponentials(scores);
    for (int64_t j = 0; j < k1 - k0; j++) {
        scores[j] = use[j] ? scores[j] : 0.0f;
        state.sum += scores[j];
    }
    return state;
}

/* Forward over the call's rows (a whole-sequence call, or a block call). For each query tile the
 * key tiles come outermost, so a key tile is classified once and read from cache by every head
 * and row of the query tile; each (row, head) still merges its key tiles in increasing order. A
 * head's key tile is transposed once, so that a query row's scores over the tile are one pass
 * over it (row_times_tile), and its values are added by add_weighted_rows. */
static int forward_rows(void *context, float *out, float *lse, const float *q, const float *k,
                        const float *v, const cpparity_mask_description *mask,
                        const cpparity_attention_dims *d, const call_rows *rows, float scale,
                        char *error, size_t capacity) {
    const cpparity_fault fault = fault_of(context);
    const int64_t tile = tile_of(context);
    const tile_loops loops = tile_loops_for_this_cpu(plain_loops_of(context));
    const int64_t Sq = rows->query_len, Sk = rows->key_len;
    const int64_t Dh = d->head_dim, group = d->heads / d->kv_heads, H = d->heads;
    const int64_t key_stride = d->kv_heads * Dh;
    /* per (head, row of the tile): its accumulator and online-softmax state; one tile's sums; the
     * transposed key tile and the value tile */
    float *accumulators = malloc((size_t)((H * tile + 2 + 2 * MAX_TILE) * Dh) * sizeof(float));
    online_softmax *states = malloc((size_t)(H * tile) * sizeof *states);
    if (accumulators == NULL || states == NULL) {
        free(accumulators);
        free(states);
        snprintf(error, capacity, "cpu-f32 kernel: out of memory");
        return 1;
    }
    float *tile_accumulator = accumulators + H * tile * Dh;
    float *transposed_keys = tile_accumulator + 2 * Dh; /* two rows' tile sums */
    float *packed_values = transposed_keys + MAX_TILE * Dh;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t q0 = 0; q0 < Sq; q0 += tile) {
            const int64_t q1 = q0 + tile < Sq ? q0 + tile : Sq;
            const int64_t key_end = key_rows_scanned(rows, q1);
            memset(accumulators, 0, (size_t)(H * tile * Dh) * sizeof(float));
            for (int64_t i = 0; i < H * tile; i++) {
                states[i] = (online_softmax){-INFINITY, 0.0f};
            }
            for (int64_t k0 = 0; k0 < key_end; k0 += tile) {
                const int64_t k1 = key_tile_end(k0, Sk, tile, fault);
                const int tile_class = classify_rows(mask, context, rows, b, q0, q1, k0, k1);
                if (tile_class == MASK_TILE_EMPTY) {
                    continue;
                }
                int64_t transposed_head = -1;
                for (int64_t h = 0; h < H; h++) {
                    const int64_t g = kv_head(h, group, d->kv_heads, fault);
                    if (g != transposed_head) {
                        const int64_t kv = at(d, Sk, d->kv_heads, b, k0, g);
                        transpose_tile(transposed_keys, k + kv, key_stride, k1 - k0, Dh);
                        pack_rows(packed_values, v + kv, key_stride, k1 - k0, Dh);
                        transposed_head = g;
                    }
                    for (int64_t t = q0; t < q1; t += 2) { /* two rows at a time */
                        const int64_t pair = t + 1 < q1 ? 2 : 1;
                        float scores[2][MAX_TILE];
                        unsigned char use[2][MAX_TILE];
                        online_softmax tile_states[2];
                        const float *query = q + at(d, Sq, H, b, t, h);
                        loops.rows_times_tile(scores[0], scores[1], query,
                                              pair == 2 ? query + H * Dh : query, transposed_keys,
                                              Dh);
                        bool any = false;
                        for (int64_t r = 0; r < pair; r++) {
                            tile_states[r] = tile_row(&loops, mask, context, rows, b, t + r, k0, k1,
                                                      tile_class, scale, scores[r], use[r]);
                            any = any || tile_states[r].maximum != -INFINITY;
                        }
                        if (!any) {
                            continue; /* no allowed key for these rows in this tile */
                        }
                        float *row_accumulators[2] = {tile_accumulator, tile_accumulator + Dh};
                        memset(tile_accumulator, 0, (size_t)(2 * Dh) * sizeof(float));
                        loops.add_weighted_rows(
                            row_accumulators[0], pair == 2 ? row_accumulators[1] : NULL, Dh,
                            scores[0], use[0], scores[1], use[1], 1, k1 - k0, packed_values, Dh);
                        for (int64_t r = 0; r < pair; r++) {
                            if (tile_states[r].maximum == -INFINITY) {
                                continue; /* no allowed key for this row in this tile */
                            }
                            online_softmax *state = &states[h * tile + (t + r - q0)];
                            float tile_factor;
                            const float factor =
                                online_softmax_merge(state, tile_states[r], &tile_factor);
                            /* softmax-merge: what was accumulated keeps its old scale */
                            const float kept =
                                fault == CPPARITY_FAULT_SOFTMAX_MERGE ? 1.0f : factor;
                            scale_add(accumulators + (h * tile + (t + r - q0)) * Dh, kept,
                                      row_accumulators[r], tile_factor, Dh);
                        }
                    }
                }
            }
            for (int64_t h = 0; h < H; h++) {
                for (int64_t t = q0; t < q1; t++) {
                    const online_softmax state = states[h * tile + (t - q0)];
                    const float *accumulator = accumulators + (h * tile + (t - q0)) * Dh;
                    float *output = out + at(d, Sq, H, b, t, h);
                    /* fully-masked-nan: no guard, 0 / 0 */
                    const bool guarded = fault != CPPARITY_FAULT_FULLY_MASKED_NAN;
                    for (int64_t i = 0; i < Dh; i++) {
                        output[i] =
                            state.sum > 0.0f || !guarded ? accumulator[i] / state.sum : 0.0f;
                    }
                    const int64_t lse_at = fault == CPPARITY_FAULT_LSE_LAYOUT
                                               ? (b * Sq + t) * H + h
                                               : (b * H + h) * Sq + t;
                    lse[lse_at] = online_softmax_lse(state);
                }
            }
        }
    }
    free(accumulators);
    free(states);
    return 0;
}

/* One (query tile, key tile, head) of the backward: its pairs' p and ds' weights, in tables of
 * MAX_TILE × MAX_TILE (row: query, column: key), and which pairs count. */
typedef struct pair_tables {
    float probabilities[MAX_TILE][MAX_TILE]; /* p, the weights of dv */
    float query_weights[MAX_TILE][MAX_TILE]; /* scale · ds, the weights of dq */
    float key_weights[MAX_TILE][MAX_TILE];   /* dk's scale · ds */
    unsigned char use[MAX_TILE][MAX_TILE];   /* the pair is allowed and its row not fully masked */
} pair_tables;

/* One query row of a backward tile, row `row` of the tables: from its scores (q · k, unscaled) and
 * dp (dout · v) over the key tile, each pair's p = exp(scale · score − lse), ds = p · (dp − δ) and
 * the weights of dq, dk and dv, with use set for the allowed pairs (none in a fully masked row:
 * no gradient in or out). */
static void gradient_row(const tile_loops *loops, const cpparity_mask_description *mask,
                         const void *context, const call_rows *rows, int64_t b, int64_t t,
                         int64_t k0, int64_t k1, int tile_class, float row_lse, float delta,
                         float scale, float dk_scale, const float *scores, const float *dp,
                         pair_tables *tables, int64_t row) {
    unsigned char *use = tables->use[row];
    if (row_lse == -INFINITY) {
        memset(use, 0, MAX_TILE);
        return;
    }
    const int64_t query_token = token_of(rows->query_index, t);
    float *p = tables->probabilities[row];
    for (int64_t j = 0; j < MAX_TILE; j++) {
        use[j] = j < k1 - k0 &&
                 (tile_class == MASK_TILE_FULL ||
                  allowed(mask, context, b, query_token, token_of(rows->key_index, k0 + j)));
        p[j] = use[j] ? scale * scores[j] - row_lse : 0.0f;
    }
    loops->exponentials(p);
    for (int64_t j = 0; j < k1 - k0; j++) {
        p[j] = use[j] ? p[j] : 0.0f;
        const float ds = p[j] * (dp[j] - delta);
        tables->query_weights[row][j] = scale * ds;
        tables->key_weights[row][j] = dk_scale * ds;
    }
}

/* What backward_rows allocates: the pair tables; the transposed key and value tiles, the key
 * tile, and one head's query and dout tiles (five tiles of MAX_TILE rows); the δ (dout · out) of
 * every (head, row) of a query tile. */
static int64_t backward_scratch_floats(int64_t heads, int64_t tile, int64_t head_dim) {
    return (int64_t)(sizeof(pair_tables) / sizeof(float)) + 5 * MAX_TILE * head_dim + heads * tile;
}

/* Backward over the call's rows: dq, dk and dv overwritten. Key tiles outermost in each query tile
 * (as the forward); every dq row still adds its keys in increasing order, and every dk, dv row its
 * (head, query) pairs in the same order as a loop over heads, then queries, would. A head's key
 * and value tiles are transposed once for the rows' scores and dp (row_times_tile); the three
 * gradients then take the tile's pairs row by row (add_weighted_rows). */
static int backward_rows(void *context, float *dq, float *dk, float *dv, const float *dout,
                         const float *q, const float *k, const float *v, const float *out,
                         const float *lse, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *d, const call_rows *rows, float scale,
                         char *error, size_t capacity) {
    const cpparity_fault fault = fault_of(context);
    const int64_t tile = tile_of(context);
    const tile_loops loops = tile_loops_for_this_cpu(plain_loops_of(context));
    const int64_t Sq = rows->query_len, Sk = rows->key_len;
    const int64_t Dh = d->head_dim, group = d->heads / d->kv_heads, H = d->heads;
    const int64_t query_stride = H * Dh, key_stride = d->kv_heads * Dh;
    pair_tables *tables = malloc((size_t)backward_scratch_floats(H, tile, Dh) * sizeof(float));
    if (tables == NULL) {
        snprintf(error, capacity, "cpu-f32 kernel: out of memory");
        return 1;
    }
    float *transposed_keys = (float *)(tables + 1);
    float *transposed_values = transposed_keys + MAX_TILE * Dh;
    float *packed_keys = transposed_values + MAX_TILE * Dh;
    float *packed_queries = packed_keys + MAX_TILE * Dh;
    float *packed_gradients = packed_queries + MAX_TILE * Dh; /* dout */
    float *deltas = packed_gradients + MAX_TILE * Dh;
    memset(dq, 0, (size_t)(d->batch * Sq * H * Dh) * sizeof(float));
    memset(dk, 0, (size_t)(d->batch * Sk * d->kv_heads * Dh) * sizeof(float));
    memset(dv, 0, (size_t)(d->batch * Sk * d->kv_heads * Dh) * sizeof(float));
    /* backward-only: dk without the softmax scale */
    const float dk_scale = fault == CPPARITY_FAULT_BACKWARD_ONLY ? 1.0f : scale;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t q0 = 0; q0 < Sq; q0 += tile) {
            const int64_t q1 = q0 + tile < Sq ? q0 + tile : Sq;
            const int64_t key_end = key_rows_scanned(rows, q1);
            for (int64_t h = 0; h < H; h++) {
                for (int64_t t = q0; t < q1; t++) {
                    const int64_t offset = at(d, Sq, H, b, t, h);
                    deltas[h * tile + (t - q0)] = loops.row_dot(dout + offset, out + offset, Dh);
                }
            }
            for (int64_t k0 = 0; k0 < key_end; k0 += tile) {
                const int64_t k1 = key_tile_end(k0, Sk, tile, fault);
                const int tile_class = classify_rows(mask, context, rows, b, q0, q1, k0, k1);
                if (tile_class == MASK_TILE_EMPTY) {
                    continue;
                }
                int64_t transposed_head = -1;
                for (int64_t h = 0; h < H; h++) {
                    const int64_t g = kv_head(h, group, d->kv_heads, fault);
                    const int64_t kv = at(d, Sk, d->kv_heads, b, k0, g);
                    if (g != transposed_head) {
                        transpose_tile(transposed_keys, k + kv, key_stride, k1 - k0, Dh);
                        transpose_tile(transposed_values, v + kv, key_stride, k1 - k0, Dh);
                        pack_rows(packed_keys, k + kv, key_stride, k1 - k0, Dh);
                        transposed_head = g;
                    }
                    const int64_t first_query = at(d, Sq, H, b, q0, h);
                    pack_rows(packed_queries, q + first_query, query_stride, q1 - q0, Dh);
                    pack_rows(packed_gradients, dout + first_query, query_stride, q1 - q0, Dh);
                    for (int64_t t = q0; t < q1; t += 2) { /* two rows at a time */
                        const int64_t pair = t + 1 < q1 ? 2 : 1;
                        const int64_t row = t - q0, second = pair == 2 ? row + 1 : row;
                        float scores[2][MAX_TILE], dp[2][MAX_TILE];
                        loops.rows_times_tile(scores[0], scores[1], packed_queries + row * Dh,
                                              packed_queries + second * Dh, transposed_keys, Dh);
                        loops.rows_times_tile(dp[0], dp[1], packed_gradients + row * Dh,
                                              packed_gradients + second * Dh, transposed_values,
                                              Dh);
                        for (int64_t r = 0; r < pair; r++) {
                            gradient_row(&loops, mask, context, rows, b, t + r, k0, k1, tile_class,
                                         lse[(b * H + h) * Sq + t + r], deltas[h * tile + row + r],
                                         scale, dk_scale, scores[r], dp[r], tables, row + r);
                        }
                        float *dq_row = dq + at(d, Sq, H, b, t, h);
                        loops.add_weighted_rows(dq_row, pair == 2 ? dq_row + H * Dh : NULL, Dh,
                                                tables->query_weights[row], tables->use[row],
                                                tables->query_weights[second], tables->use[second],
                                                1, k1 - k0, packed_keys, Dh);
                    }
                    for (int64_t j = 0; j < k1 - k0; j += 2) { /* two keys at a time */
                        const int64_t other = j + 1 < k1 - k0 ? j + 1 : j;
                        float *dk_row = dk + kv + j * key_stride,
                              *dv_row = dv + kv + j * key_stride;
                        loops.add_weighted_rows(dk_row, other != j ? dk_row + key_stride : NULL, Dh,
                                                &tables->key_weights[0][j], &tables->use[0][j],
                                                &tables->key_weights[0][other],
                                                &tables->use[0][other], MAX_TILE, q1 - q0,
                                                packed_queries, Dh);
                        loops.add_weighted_rows(dv_row, other != j ? dv_row + key_stride : NULL, Dh,
                                                &tables->probabilities[0][j], &tables->use[0][j],
                                                &tables->probabilities[0][other],
                                                &tables->use[0][other], MAX_TILE, q1 - q0,
                                                packed_gradients, Dh);
                    }
                }
            }
        }
    }
    free(tables);
    return 0;
}

static int cpu_forward(void *context, void *out, float *lse, const void *q, const void *k,
                       const void *v, const cpparity_mask_description *mask,
                       const cpparity_attention_dims *d, float scale, void *stream, char *error,
                       size_t capacity) {
    const call_rows rows = {d->seq_len, d->seq_len, NULL, NULL};
    if (check_call(d, mask, &rows, stream, error, capacity)) {
        return 1;
    }
    return forward_rows(context, out, lse, q, k, v, mask, d, &rows, scale, error, capacity);
}

static int cpu_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                        const void *q, const void *k, const void *v, const void *out,
                        const float *lse, const cpparity_mask_description *mask,
                        const cpparity_attention_dims *d, float scale, void *stream, char *error,
                        size_t capacity) {
    const call_rows rows = {d->seq_len, d->seq_len, NULL, NULL};
    if (check_call(d, mask, &rows, stream, error, capacity)) {
        return 1;
    }
    return backward_rows(context, dq, dk, dv, dout, q, k, v, out, lse, mask, d, &rows, scale, error,
                         capacity);
}

static int cpu_forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                             const void *v, const cpparity_mask_description *mask,
                             const cpparity_attention_dims *d,
                             const cpparity_attention_block *block, float scale, void *stream,
                             char *error, size_t capacity) {
    const call_rows rows = {block->query_len, block->key_len, block->query_index, block->key_index};
    if (check_call(d, mask, &rows, stream, error, capacity)) {
        return 1;
    }
    return forward_rows(context, out, lse, q, k, v, mask, d, &rows, scale, error, capacity);
}

static int cpu_backward_block(void *context, void *dq, void *dk, void *dv, const void *dout,
                              const void *q, const void *k, const void *v, const void *out,
                              const float *lse, const cpparity_mask_description *mask,
                              const cpparity_attention_dims *d,
                              const cpparity_attention_block *block, float scale, void *stream,
                              char *error, size_t capacity) {
    const call_rows rows = {block->query_len, block->key_len, block->query_index, block->key_index};
    if (check_call(d, mask, &rows, stream, error, capacity)) {
        return 1;
    }
    return backward_rows(context, dq, dk, dv, dout, q, k, v, out, lse, mask, d, &rows, scale, error,
                         capacity);
}

/* What a call allocates, the larger of the two passes: the forward's accumulator and
 * online-softmax state of every (head, row) of a query tile, two rows' tile sums (Dh floats each),
 * the transposed key tile and the value tile; the backward's scratch (backward_scratch_floats). */
static int64_t cpu_workspace_bytes(void *context, const cpparity_attention_dims *d) {
    const int64_t tile = tile_of(context);
    int64_t per_row = 0, rows = 0, bytes = 0, backward = 0;
    const bool fits =
        d->head_dim <= INT64_MAX / 4 / (2 * MAX_TILE + 2) &&
        cpparity_multiply_checked(d->head_dim, (int64_t)sizeof(float), &per_row) &&
        cpparity_multiply_checked(d->heads, tile, &rows) &&
        cpparity_multiply_checked(per_row + (int64_t)sizeof(online_softmax), rows, &bytes) &&
        bytes <= INT64_MAX - (2 * MAX_TILE + 2) * per_row &&
        cpparity_multiply_checked(backward_scratch_floats(d->heads, tile, d->head_dim),
                                  (int64_t)sizeof(float), &backward);
    if (!fits) {
        return -1;
    }
    const int64_t forward = bytes + (2 * MAX_TILE + 2) * per_row;
    return forward > backward ? forward : backward;
}

/* The small-tile copy: short sequences span many tiles (merges, classification, partial tiles). */
static const kernel_cpu_options small_tile_options = {CPPARITY_FAULT_NONE, 0, 8, false};

/* The plain-loops copy: the tile loops CPUs without AVX2 and FMA run, on any CPU. */
static const kernel_cpu_options plain_loops_options = {CPPARITY_FAULT_NONE, 0, MAX_TILE, true};

/* One built-in kernel: this file's calls, named kernel_name, with options as its context. */
#define CPU_F32_KERNEL(kernel_name, options)                                                       \
    {                                                                                              \
        .abi_version = CPPARITY_KERNEL_ABI_VERSION,                                                \
        .struct_size = sizeof(cpparity_attention_kernel), .name = (kernel_name), .version = "2",   \
        .device = CPPARITY_KERNEL_DEVICE_CPU, .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,              \
        .deterministic = 1, .context = (void *)(options), .forward = cpu_forward,                  \
        .backward = cpu_backward,                                                                  \
        .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,  \
        .head_dim_count = 0, .head_dims = NULL, .supports = NULL,                                  \
        .workspace_bytes = cpu_workspace_bytes, .forward_block = cpu_forward_block,                \
        .backward_block = cpu_backward_block,                                                      \
    }

static const cpparity_attention_kernel cpu_f32_kernel = CPU_F32_KERNEL("cpu-f32", NULL);
static const cpparity_attention_kernel cpu_f32_small_tile_kernel =
    CPU_F32_KERNEL("cpu-f32-tile8", &small_tile_options);
static const cpparity_attention_kernel cpu_f32_plain_loops_kernel =
    CPU_F32_KERNEL("cpu-f32-plain", &plain_loops_options);

const cpparity_attention_kernel *cpparity_cpu_f32_kernel(void) {
    return &cpu_f32_kernel;
}

const cpparity_attention_kernel *cpparity_cpu_f32_small_tile_kernel(void) {
    return &cpu_f32_small_tile_kernel;
}

const cpparity_attention_kernel *cpparity_cpu_f32_plain_loops_kernel(void) {
    return &cpu_f32_plain_loops_kernel;
}

bool kernel_cpu_with_options(cpparity_attention_kernel *copy,
                             const cpparity_attention_kernel *kernel, kernel_cpu_options *options) {
    if (kernel == NULL || kernel->forward != cpu_forward || kernel->backward != cpu_backward ||
        kernel->forward_block != cpu_forward_block ||
        kernel->backward_block != cpu_backward_block) {
        return false;
    }
    options->tile = tile_of(kernel->context); /* the copy keeps the kernel's tile size */
    options->plain_loops = options->plain_loops || plain_loops_of(kernel->context);
    *copy = *kernel;
    copy->context = (void *)options;
    return true;
}
