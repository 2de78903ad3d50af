/*
 * naive_attention.c — a small, clear attention kernel plugin for cpparity: float32 on the CPU,
 * every mask of cpparity/kernel.h, GQA, deterministic, ABI 3 (whole-sequence and block calls). It
 * is written for reading, not speed: each query row scans its keys, evaluating the mask predicate
 * for each (on global token indices in a block call); backward recomputes the probabilities from
 * the saved log-sum-exp and walks the keys in tiles of TILE.
 *
 * Build (see README.md): a shared library exporting cpparity_kernel_plugin. Then
 *     cpparity run cases/ci.yaml --kernel ./libnaive_attention.so
 *
 * PLUGIN_BUG builds deliberately wrong variants for cpparity's own tests:
 *     1  the sliding window lets one key too many in (k >= q - W instead of k > q - W)
 *     2  backward skips the last tile of keys of every row
 *     3  forward leaves the output of fully masked query rows unwritten
 *     4  a tile-edge window slip: keys are classified in tiles of 32 against queries in tiles of
 *        64, and a key tile counts as wholly inside the window one key too early (>= for >);
 *        wrong only when the window's edge falls on a key tile boundary (W ≡ −1 mod 32)
 *     5  a static workspace (the forward's accumulator) while declaring concurrent calls
 *     6  forward leaves the last partial tile of 16 query rows unwritten (a NaN tail)
 *     7  backward alone lets one key too many into the sliding window (forward right)
 *     8  block calls evaluate the mask on row numbers instead of the rows' tokens (whole-sequence
 *        calls, where the two are one, right)
 *     9  block calls leave the output of a query row with no allowed key in the block unwritten
 *        (its lse −∞ written; whole-sequence calls right)
 * and PLUGIN_LACKS_SLIDING a right kernel that does not claim sliding windows (capabilities
 * without CPPARITY_KERNEL_SUPPORTS_SLIDING): its other layers are judged, its sliding ones "not
 * claimed"; PLUGIN_ABI2 the same right kernel as an ABI 2 plugin (no block calls: its ring items
 * are not claimed); PLUGIN_ABI2_RECOMPILED the same right kernel as a plugin written for ABI 2
 * (whole-sequence calls only, .abi_version = CPPARITY_KERNEL_ABI_VERSION, .struct_size = sizeof)
 * recompiled against today's kernel.h: an ABI 3 descriptor whose block calls are left NULL, which
 * loads and runs as before (its ring and hybrid items are not claimed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cpparity/kernel.h>

#ifndef PLUGIN_BUG
#define PLUGIN_BUG 0
#endif
#if defined(PLUGIN_ABI2) || defined(PLUGIN_ABI2_RECOMPILED)
#define PLUGIN_BLOCK_CALLS 0 /* whole-sequence calls only */
#else
#define PLUGIN_BLOCK_CALLS 1
#endif
#if defined(PLUGIN_ABI2) || defined(PLUGIN_ABI2_RECOMPILED)
#define PLUGIN_CHUNKED_POSITION 0 /* written before chunk_origin 2 existed */
#else
#define PLUGIN_CHUNKED_POSITION 1
#endif
#define TILE 16 /* keys per backward tile */

/* Floor division (toward −∞): the chunk grid counts from the row's first real token, so indices
 * before it are negative. */
static int64_t floor_divide(int64_t a, int64_t b) {
    const int64_t quotient = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

/* Whether key k is outside the sliding window of query q. */
static int outside_window(const cpparity_mask_description *m, int64_t q, int64_t k, int backward) {
    (void)backward;
#if PLUGIN_BUG == 1
    return k < q - m->window;
#elif PLUGIN_BUG == 4
    /* a key tile wholly inside the window of every query of the query tile skips the test */
    const int64_t query_last = q / 64 * 64 + 63, key_first = k / 32 * 32;
    return key_first >= query_last - m->window ? 0 : k <= q - m->window;
#elif PLUGIN_BUG == 7
    return backward ? k < q - m->window : k <= q - m->window;
#else
    return k <= q - m->window;
#endif
}

/* May query q of row b attend key k? (cpparity/kernel.h, "Semantics") backward says which pass
 * asks (the same answer, but for PLUGIN_BUG 7). */
static int allowed(const cpparity_mask_description *m, int64_t b, int64_t q, int64_t k,
                   int backward) {
    const int64_t S = m->seq_len;
    if (k > q || !m->key_valid[b * S + k] || m->document[b * S + q] != m->document[b * S + k]) {
        return 0;
    }
    if (m->layer_type == 1 && outside_window(m, q, k, backward)) {
        return 0;
    }
#if PLUGIN_CHUNKED_POSITION
    if (m->layer_type == 2 && m->chunk_origin == 2) { /* chunks counted in position_ids */
        return floor_divide(m->position[b * S + k], m->chunk_size) ==
               floor_divide(m->position[b * S + q], m->chunk_size);
    }
#endif
    if (m->layer_type == 2) {
        const int64_t origin =
            m->chunk_origin == 1 ? m->document_start[b * S + q] : m->left_padding[b];
        if (floor_divide(k - origin, m->chunk_size) != floor_divide(q - origin, m->chunk_size)) {
            return 0;
        }
    }
    return 1;
}

/* The rows of a call: a whole-sequence call's (index NULL: row i is token i, and a query row
 * scans keys up to itself), or a block call's (ABI 3: tokens query_index[i], key_index[j], every
 * key row scanned). */
typedef struct call_rows {
    int64_t queries, keys;
    const int64_t *query_index, *key_index;
} call_rows;

static int64_t token(const int64_t *index, int64_t row) {
#if PLUGIN_BUG == 8
    (void)index;
    return row; /* the mask evaluated on the block's row numbers, not its tokens */
#else
    return index != NULL ? index[row] : row;
#endif
}

/* The key rows query row t scans: 0 … t in a whole call (later keys are in the future). */
static int64_t keys_scanned(const call_rows *rows, int64_t t) {
    return rows->key_index == NULL && rows->query_index == NULL ? t + 1 : rows->keys;
}

/* Element offset of row s, head h in a [B, rows, heads, Dh] tensor. */
static int64_t at(const cpparity_attention_dims *d, int64_t rows, int64_t heads, int64_t b,
                  int64_t s, int64_t h) {
    return ((b * rows + s) * heads + h) * d->head_dim;
}

static float dot(const float *x, const float *y, int64_t n) {
    double sum = 0.0; /* float64 accumulation: a clear kernel, not a fast one */
    for (int64_t i = 0; i < n; i++) {
        sum += (double)x[i] * y[i];
    }
    return (float)sum;
}

static int forward_rows(float *out, float *lse, const float *q, const float *k, const float *v,
                        const cpparity_mask_description *m, const cpparity_attention_dims *d,
                        const call_rows *rows, float scale) {
    const int64_t H = d->heads, Hkv = d->kv_heads, Dh = d->head_dim;
    const int64_t Sq = rows->queries, Sk = rows->keys;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t kv = h / (H / Hkv);
            for (int64_t t = 0; t < Sq; t++) {
#if PLUGIN_BUG == 6
                if (Sq % 16 != 0 && t >= Sq - Sq % 16) {
                    continue; /* the last partial tile of query rows is never written */
                }
#endif
                const int64_t qt = token(rows->query_index, t);
                const float *query = q + at(d, Sq, H, b, t, h);
                float *o = out + at(d, Sq, H, b, t, h);
                float maximum = -INFINITY;
                for (int64_t s = 0; s < keys_scanned(rows, t); s++) {
                    if (allowed(m, b, qt, token(rows->key_index, s), 0)) {
                        const float score = scale * dot(query, k + at(d, Sk, Hkv, b, s, kv), Dh);
                        maximum = score > maximum ? score : maximum;
                    }
                }
                if (maximum == -INFINITY) { /* no allowed key: out = 0, lse = −∞ */
#if PLUGIN_BUG == 9
                    if (rows->query_index == NULL) /* only a whole-sequence call writes the 0s */
#endif
#if PLUGIN_BUG != 3
                        memset(o, 0, (size_t)Dh * sizeof *o);
#endif
                    lse[(b * H + h) * Sq + t] = -INFINITY;
                    continue;
                }
                double sum = 0.0;
#if PLUGIN_BUG == 5
                static double accumulated[1024]; /* shared by every thread that calls */
                memset(accumulated, 0, sizeof accumulated);
#else
                double accumulated[1024] = {0};
#endif
                for (int64_t s = 0; s < keys_scanned(rows, t); s++) {
                    if (allowed(m, b, qt, token(rows->key_index, s), 0)) {
                        const double p =
                            exp(scale * dot(query, k + at(d, Sk, Hkv, b, s, kv), Dh) - maximum);
                        sum += p;
                        const float *value = v + at(d, Sk, Hkv, b, s, kv);
                        for (int64_t i = 0; i < Dh; i++) {
                            accumulated[i] += p * value[i];
                        }
                    }
                }
                for (int64_t i = 0; i < Dh; i++) {
                    o[i] = (float)(accumulated[i] / sum);
                }
                lse[(b * H + h) * Sq + t] = (float)(maximum + log(sum));
            }
        }
    }
    return 0;
}

static void backward_rows(float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *out, const float *lse,
                          const cpparity_mask_description *m, const cpparity_attention_dims *d,
                          const call_rows *rows, float scale) {
    const int64_t H = d->heads, Hkv = d->kv_heads, Dh = d->head_dim;
    const int64_t Sq = rows->queries, Sk = rows->keys;
    memset(dq, 0, (size_t)(d->batch * Sq * H * Dh) * sizeof *dq);
    memset(dk, 0, (size_t)(d->batch * Sk * Hkv * Dh) * sizeof *dk);
    memset(dv, 0, (size_t)(d->batch * Sk * Hkv * Dh) * sizeof *dv);
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t kv = h / (H / Hkv);
            for (int64_t t = 0; t < Sq; t++) {
                const float row_lse = lse[(b * H + h) * Sq + t];
                if (row_lse == -INFINITY) {
                    continue; /* a fully masked row has no gradient */
                }
                const int64_t qt = token(rows->query_index, t);
                const float *query = q + at(d, Sq, H, b, t, h), *g = dout + at(d, Sq, H, b, t, h);
                const float delta = dot(g, out + at(d, Sq, H, b, t, h), Dh); /* Σ dout ⊙ out */
                const int64_t scanned = keys_scanned(rows, t);
                int64_t tiles = (scanned + TILE - 1) / TILE; /* key rows 0 … scanned − 1 */
#if PLUGIN_BUG == 2
                tiles = tiles > 1 ? tiles - 1 : tiles;
#endif
                for (int64_t tile = 0; tile < tiles; tile++) {
                    const int64_t end = (tile + 1) * TILE < scanned ? (tile + 1) * TILE : scanned;
                    for (int64_t s = tile * TILE; s < end; s++) {
                        if (!allowed(m, b, qt, token(rows->key_index, s), 1)) {
                            continue;
                        }
                        const float *key = k + at(d, Sk, Hkv, b, s, kv);
                        const float *value = v + at(d, Sk, Hkv, b, s, kv);
                        const float p = expf(scale * dot(query, key, Dh) - row_lse);
                        const float dp = dot(g, value, Dh);
                        const float ds = p * (dp - delta) * scale;
                        float *dq_row = dq + at(d, Sq, H, b, t, h);
                        float *dk_row = dk + at(d, Sk, Hkv, b, s, kv);
                        float *dv_row = dv + at(d, Sk, Hkv, b, s, kv);
                        for (int64_t i = 0; i < Dh; i++) {
                            dq_row[i] += ds * key[i];
                            dk_row[i] += ds * query[i];
                            dv_row[i] += p * g[i];
                        }
                    }
                }
            }
        }
    }
}

static int forward(void *context, void *out, float *lse, const void *q, const void *k,
                   const void *v, const cpparity_mask_description *m,
                   const cpparity_attention_dims *d, float scale, void *stream, char *error,
                   size_t capacity) {
    (void)context, (void)stream, (void)error, (void)capacity;
    const call_rows rows = {d->seq_len, d->seq_len, NULL, NULL};
    return forward_rows(out, lse, q, k, v, m, d, &rows, scale);
}

static int backward(void *context, void *dq, void *dk, void *dv, const void *dout, const void *q,
                    const void *k, const void *v, const void *out, const float *lse,
                    const cpparity_mask_description *m, const cpparity_attention_dims *d,
                    float scale, void *stream, char *error, size_t capacity) {
    (void)context, (void)stream, (void)error, (void)capacity;
    const call_rows rows = {d->seq_len, d->seq_len, NULL, NULL};
    backward_rows(dq, dk, dv, dout, q, k, v, out, lse, m, d, &rows, scale);
    return 0;
}

#if PLUGIN_BLOCK_CALLS
/* ABI 3: a block of query rows against a block of key rows, named by global token index. */
static int forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                         const void *v, const cpparity_mask_description *m,
                         const cpparity_attention_dims *d, const cpparity_attention_block *block,
                         float scale, void *stream, char *error, size_t capacity) {
    (void)context, (void)stream, (void)error, (void)capacity;
    const call_rows rows = {block->query_len, block->key_len, block->query_index, block->key_index};
    return forward_rows(out, lse, q, k, v, m, d, &rows, scale);
}

static int backward_block(void *context, void *dq, void *dk, void *dv, const void *dout,
                          const void *q, const void *k, const void *v, const void *out,
                          const float *lse, const cpparity_mask_description *m,
                          const cpparity_attention_dims *d, const cpparity_attention_block *block,
                          float scale, void *stream, char *error, size_t capacity) {
    (void)context, (void)stream, (void)error, (void)capacity;
    const call_rows rows = {block->query_len, block->key_len, block->query_index, block->key_index};
    backward_rows(dq, dk, dv, dout, q, k, v, out, lse, m, d, &rows, scale);
    return 0;
}
#endif

/* Head dims up to 1024 (the forward's accumulator); cpparity checks before every call. */
static int supports(void *context, const cpparity_mask_description *m,
                    const cpparity_attention_dims *d, char *why, size_t capacity) {
    (void)context, (void)m;
    if (d->head_dim > 1024) {
        snprintf(why, capacity, "head dim %lld is over this kernel's 1024", (long long)d->head_dim);
        return 0;
    }
    return 1;
}

#ifdef PLUGIN_ABI2
#define PLUGIN_ABI 2u
#else
#define PLUGIN_ABI CPPARITY_KERNEL_ABI_VERSION
#endif

static const cpparity_attention_kernel kernel = {
    .abi_version = PLUGIN_ABI,
    .struct_size = sizeof(cpparity_attention_kernel),
#if PLUGIN_BUG == 0
    .name = "naive-attention",
#else
    .name = "naive-attention-bug",
#endif
    .version = "1.0",
    .device = CPPARITY_KERNEL_DEVICE_CPU,
    .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
    .deterministic = 1,
    .context = NULL,
    .forward = forward,
    .backward = backward,
#ifdef PLUGIN_LACKS_SLIDING
    .capabilities = (CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION) &
                    ~CPPARITY_KERNEL_SUPPORTS_SLIDING,
#elif PLUGIN_CHUNKED_POSITION
    /* SUPPORTS_ALL is ABI 3's first set: a capability added since is named (kernel.h) */
    .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,
#else
    .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL,
#endif
    .head_dim_count = 0,
    .head_dims = NULL,
    .supports = supports,
    .workspace_bytes = NULL, /* optional: it allocates nothing (a row lives on the stack) */
#if PLUGIN_BLOCK_CALLS /* optional: without them (left out, NULL) ring items are not claimed */
    .forward_block = forward_block, /* ABI 3: ring attention's calls */
    .backward_block = backward_block,
#endif
};

static const cpparity_attention_kernel *const kernels[] = {&kernel};

const cpparity_attention_kernel *const *cpparity_kernel_plugin(uint32_t abi_version,
                                                               int32_t *count) {
    if (abi_version != PLUGIN_ABI) {
        *count = 0;
        return NULL;
    }
    *count = 1;
    return kernels;
}
