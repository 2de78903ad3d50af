/*
 * kernel_cpu.c — the built-in CPU float32 attention kernel ("cpu-f32"), behind kernel.h (see
 * kernel_cpu.h).
 *
 * Tiled like FlashAttention: for each tile of queries, key tiles are classified by
 * mask_classify_tile (empty tiles skipped, the predicate evaluated only in partial tiles), and
 * each query row merges tile after tile into an online softmax (online_softmax.h). Arithmetic is
 * float32, as in the implementation under test; results are deterministic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/block_rows.h"
#include "distributed/kernels/mask_predicate.h"
#include "distributed/kernels/online_softmax.h"

enum { MAX_TILE = 32 }; /* the largest tile (scores of one key tile live on the stack) */

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

/* Σ a[i]·b[i]: eight partial sums (i mod 8, each in increasing i) added pairwise, then the
 * remainder past the last multiple of eight in increasing i. Independent sums let the compiler
 * keep them in vector lanes; the order is fixed, so results stay deterministic. */
static float dot(const float *restrict a, const float *restrict b, int64_t n) {
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            s[j] += a[i + j] * b[i + j];
        }
    }
    float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    return sum;
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

/* y[i] += a · x[i] for i < n, element by element (as scale_add). */
static void add_scaled(float *restrict y, float a, const float *restrict x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            y[i + j] += a * x[i + j];
        }
    }
    for (; i < n; i++) {
        y[i] += a * x[i];
    }
}

/* The tile size of this copy (kernel_cpu.h): the options' tile, MAX_TILE without options. */
static int64_t tile_of(const void *context) {
    const kernel_cpu_options *options = context;
    return options != NULL && options->tile >= 1 && options->tile <= MAX_TILE ? options->tile
                                                                              : MAX_TILE;
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

/* Forward over the call's rows (a whole-sequence call, or a block call). For each query tile the
 * key tiles come outermost, so a key tile is classified once and read from cache by every head
 * and row of the query tile; each (row, head) still merges its key tiles in increasing order. */
static int forward_rows(void *context, float *out, float *lse, const float *q, const float *k,
                        const float *v, const cpparity_mask_description *mask,
                        const cpparity_attention_dims *d, const call_rows *rows, float scale,
                        char *error, size_t capacity) {
    const cpparity_fault fault = fault_of(context);
    const int64_t tile = tile_of(context);
    const int64_t Sq = rows->query_len, Sk = rows->key_len;
    const int64_t Dh = d->head_dim, group = d->heads / d->kv_heads, H = d->heads;
    /* per (head, row of the tile): its accumulator and online-softmax state; one tile's sums */
    float *accumulators = malloc((size_t)((H * tile + 1) * Dh) * sizeof(float));
    online_softmax *states = malloc((size_t)(H * tile) * sizeof *states);
    if (accumulators == NULL || states == NULL) {
        free(accumulators);
        free(states);
        snprintf(error, capacity, "cpu-f32 kernel: out of memory");
        return 1;
    }
    float *tile_accumulator = accumulators + H * tile * Dh;
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
                for (int64_t h = 0; h < H; h++) {
                    const int64_t g = kv_head(h, group, d->kv_heads, fault);
                    for (int64_t t = q0; t < q1; t++) {
                        const int64_t query_token = token_of(rows->query_index, t);
                        const float *query = q + at(d, Sq, H, b, t, h);
                        float scores[MAX_TILE];
                        online_softmax tile_state = {-INFINITY, 0.0f};
                        for (int64_t key = k0; key < k1; key++) {
                            const bool pair_allowed = tile_class == MASK_TILE_FULL ||
                                                      allowed(mask, context, b, query_token,
                                                              token_of(rows->key_index, key));
                            scores[key - k0] =
                                pair_allowed
                                    ? scale * dot(query, k + at(d, Sk, d->kv_heads, b, key, g), Dh)
                                    : -INFINITY;
                            if (scores[key - k0] > tile_state.maximum) {
                                tile_state.maximum = scores[key - k0];
                            }
                        }
                        if (tile_state.maximum == -INFINITY) {
                            continue; /* no allowed key for this row in this tile */
                        }
                        memset(tile_accumulator, 0, (size_t)Dh * sizeof(float));
                        for (int64_t key = k0; key < k1; key++) {
                            if (scores[key - k0] == -INFINITY) {
                                continue;
                            }
                            const float p = expf(scores[key - k0] - tile_state.maximum);
                            tile_state.sum += p;
                            add_scaled(tile_accumulator, p, v + at(d, Sk, d->kv_heads, b, key, g),
                                       Dh);
                        }
                        online_softmax *state = &states[h * tile + (t - q0)];
                        float tile_factor;
                        const float factor = online_softmax_merge(state, tile_state, &tile_factor);
                        /* softmax-merge: what was accumulated keeps its old scale */
                        const float kept = fault == CPPARITY_FAULT_SOFTMAX_MERGE ? 1.0f : factor;
                        scale_add(accumulators + (h * tile + (t - q0)) * Dh, kept, tile_accumulator,
                                  tile_factor, Dh);
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

/* Backward over the call's rows: dq, dk and dv overwritten. Key tiles outermost in each query tile
 * (as the forward); every dq row still adds its keys in increasing order, and every dk, dv row its
 * (head, query) pairs in the same order as a loop over heads, then queries, would. */
static void backward_rows(void *context, float *dq, float *dk, float *dv, const float *dout,
                          const float *q, const float *k, const float *v, const float *out,
                          const float *lse, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *d, const call_rows *rows, float scale) {
    const cpparity_fault fault = fault_of(context);
    const int64_t tile = tile_of(context);
    const int64_t Sq = rows->query_len, Sk = rows->key_len;
    const int64_t Dh = d->head_dim, group = d->heads / d->kv_heads;
    memset(dq, 0, (size_t)(d->batch * Sq * d->heads * Dh) * sizeof(float));
    memset(dk, 0, (size_t)(d->batch * Sk * d->kv_heads * Dh) * sizeof(float));
    memset(dv, 0, (size_t)(d->batch * Sk * d->kv_heads * Dh) * sizeof(float));
    /* backward-only: dk without the softmax scale */
    const float dk_scale = fault == CPPARITY_FAULT_BACKWARD_ONLY ? 1.0f : scale;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t q0 = 0; q0 < Sq; q0 += tile) {
            const int64_t q1 = q0 + tile < Sq ? q0 + tile : Sq;
            const int64_t key_end = key_rows_scanned(rows, q1);
            for (int64_t k0 = 0; k0 < key_end; k0 += tile) {
                const int64_t k1 = key_tile_end(k0, Sk, tile, fault);
                const int tile_class = classify_rows(mask, context, rows, b, q0, q1, k0, k1);
                if (tile_class == MASK_TILE_EMPTY) {
                    continue;
                }
                for (int64_t h = 0; h < d->heads; h++) {
                    const int64_t g = kv_head(h, group, d->kv_heads, fault);
                    for (int64_t t = q0; t < q1; t++) {
                        const float row_lse = lse[(b * d->heads + h) * Sq + t];
                        if (row_lse == -INFINITY) {
                            continue; /* fully masked row: no gradient in or out */
                        }
                        const int64_t query_token = token_of(rows->query_index, t);
                        const int64_t offset = at(d, Sq, d->heads, b, t, h);
                        const float *query = q + offset, *grad_out = dout + offset;
                        const float delta = dot(grad_out, out + offset, Dh);
                        for (int64_t key = k0; key < k1; key++) {
                            if (tile_class != MASK_TILE_FULL &&
                                !allowed(mask, context, b, query_token,
                                         token_of(rows->key_index, key))) {
                                continue;
                            }
                            const int64_t kv = at(d, Sk, d->kv_heads, b, key, g);
                            const float p = expf(scale * dot(query, k + kv, Dh) - row_lse);
                            const float ds = p * (dot(grad_out, v + kv, Dh) - delta);
                            add_scaled(dq + offset, scale * ds, k + kv, Dh);
                            add_scaled(dk + kv, dk_scale * ds, query, Dh);
                            add_scaled(dv + kv, p, grad_out, Dh);
                        }
                    }
                }
            }
        }
    }
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
    backward_rows(context, dq, dk, dv, dout, q, k, v, out, lse, mask, d, &rows, scale);
    return 0;
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
    backward_rows(context, dq, dk, dv, dout, q, k, v, out, lse, mask, d, &rows, scale);
    return 0;
}

/* What a call allocates: forward's accumulator and online-softmax state of every (head, row) of a
 * query tile, and one tile's sums (Dh floats). */
static int64_t cpu_workspace_bytes(void *context, const cpparity_attention_dims *d) {
    const int64_t tile = tile_of(context);
    int64_t per_row = 0, rows = 0, bytes = 0;
    const bool fits =
        cpparity_multiply_checked(d->head_dim, (int64_t)sizeof(float), &per_row) &&
        cpparity_multiply_checked(d->heads, tile, &rows) &&
        cpparity_multiply_checked(per_row + (int64_t)sizeof(online_softmax), rows, &bytes);
    return fits && bytes <= INT64_MAX - per_row ? bytes + per_row : -1;
}

/* The small-tile copy: short sequences span many tiles (merges, classification, partial tiles). */
static const kernel_cpu_options small_tile_options = {CPPARITY_FAULT_NONE, 0, 8};

static const cpparity_attention_kernel cpu_f32_kernel = {
    .abi_version = CPPARITY_KERNEL_ABI_VERSION,
    .struct_size = sizeof(cpparity_attention_kernel),
    .name = "cpu-f32",
    .version = "1",
    .device = CPPARITY_KERNEL_DEVICE_CPU,
    .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
    .deterministic = 1,
    .context = NULL,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,
    .head_dim_count = 0,
    .head_dims = NULL,
    .supports = NULL,
    .workspace_bytes = cpu_workspace_bytes,
    .forward_block = cpu_forward_block,
    .backward_block = cpu_backward_block,
};

static const cpparity_attention_kernel cpu_f32_small_tile_kernel = {
    .abi_version = CPPARITY_KERNEL_ABI_VERSION,
    .struct_size = sizeof(cpparity_attention_kernel),
    .name = "cpu-f32-tile8",
    .version = "1",
    .device = CPPARITY_KERNEL_DEVICE_CPU,
    .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
    .deterministic = 1,
    .context = (void *)&small_tile_options,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,
    .head_dim_count = 0,
    .head_dims = NULL,
    .supports = NULL,
    .workspace_bytes = cpu_workspace_bytes,
    .forward_block = cpu_forward_block,
    .backward_block = cpu_backward_block,
};

const cpparity_attention_kernel *cpparity_cpu_f32_kernel(void) {
    return &cpu_f32_kernel;
}

const cpparity_attention_kernel *cpparity_cpu_f32_small_tile_kernel(void) {
    return &cpu_f32_small_tile_kernel;
}

bool kernel_cpu_with_options(cpparity_attention_kernel *copy,
                             const cpparity_attention_kernel *kernel, kernel_cpu_options *options) {
    if (kernel == NULL || kernel->forward != cpu_forward || kernel->backward != cpu_backward ||
        kernel->forward_block != cpu_forward_block ||
        kernel->backward_block != cpu_backward_block) {
        return false;
    }
    options->tile = tile_of(kernel->context); /* the copy keeps the kernel's tile size */
    *copy = *kernel;
    copy->context = (void *)options;
    return true;
}
