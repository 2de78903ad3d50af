/* naive_attention.c — attention in float32 by blocks of rows (see naive_attention.h). */
#include "harness/judging/naive_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "harness/judging/naive_products.h"
#include "reference/parallel.h"

enum { BLOCK = 64 }; /* query rows (forward, dq) or keys (dk, dv) per work item; mask block edge */

/* The span of the other side that a block can touch: [begin, end), empty when begin == end. */
typedef struct span {
    int64_t begin, end;
} span;

/* Per batch row and block: the keys a query block attends (keys[b·blocks + i]) and the queries
 * that attend a key block (queries[b·blocks + j]), from the mask's block classification. */
typedef struct spans {
    int64_t blocks; /* ceil(S / BLOCK) */
    span *keys, *queries;
} spans;

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static void spans_free(spans *x) {
    free(x->keys);
    free(x->queries);
}

static bool spans_init(spans *x, const reference_mask *mask, naive_attention_shape s) {
    x->blocks = (s.seq_len + BLOCK - 1) / BLOCK;
    const size_t count = (size_t)(s.batch * x->blocks);
    x->keys = calloc(count, sizeof *x->keys);
    x->queries = calloc(count, sizeof *x->queries);
    if (x->keys == NULL || x->queries == NULL) {
        spans_free(x);
        return false;
    }
    for (int64_t b = 0; b < s.batch; b++) {
        span *keys = x->keys + b * x->blocks, *queries = x->queries + b * x->blocks;
        for (int64_t i = 0; i < x->blocks; i++) {
            const int64_t q0 = i * BLOCK, q1 = minimum(q0 + BLOCK, s.seq_len);
            for (int64_t j = 0; j < x->blocks; j++) {
                const int64_t k0 = j * BLOCK, k1 = minimum(k0 + BLOCK, s.seq_len);
                if (reference_mask_classify_block(mask, b, q0, q1, k0, k1) ==
                    REFERENCE_BLOCK_NONE) {
                    continue;
                }
                if (keys[i].begin == keys[i].end) {
                    keys[i].begin = k0;
                }
                keys[i].end = k1;
                if (queries[j].begin == queries[j].end) {
                    queries[j].begin = q0;
                }
                queries[j].end = q1;
            }
        }
    }
    return true;
}

/* The class of queries [q0, q1) × keys [k0, k1); for a mixed block also allowed[(q − q0)·query_step
 * + (k − k0)·key_step], the predicate of each pair. */
static reference_block_class block_mask(const reference_mask *mask, int64_t b, int64_t q0,
                                        int64_t q1, int64_t k0, int64_t k1, int64_t query_step,
                                        int64_t key_step, uint8_t *allowed) {
    const reference_block_class kind = reference_mask_classify_block(mask, b, q0, q1, k0, k1);
    if (kind == REFERENCE_BLOCK_MIXED) {
        reference_mask_fill_block(mask, b, q0, q1, k0, k1, query_step, key_step, allowed);
    }
    return kind;
}

/* δ = Σ_d dout[d]·out[d] in increasing d. */
static float row_delta(const float *dout, const float *out, int64_t head_dim) {
    float delta = 0.0f;
    for (int64_t d = 0; d < head_dim; d++) {
        delta += dout[d] * out[d];
    }
    return delta;
}

typedef struct attention_work {
    naive_attention_shape s;
    const reference_mask *mask;
    const spans *spans;
    float scale;
    const float *q, *k, *v, *dout;
    float *out, *lse;                   /* forward: written */
    const float *saved_out, *saved_lse; /* backward: the forward's */
    float *dq, *dk, *dv;                /* backward */
} attention_work;

/* Per thread: two BLOCK × S float tables, S row values, a BLOCK × BLOCK mask and a product's
 * scratch, each 64-byte aligned. */
typedef struct scratch_tables {
    float *first, *second, *rows;
    uint8_t *allowed;
    void *product;
} scratch_tables;

static size_t aligned(size_t bytes) {
    return (bytes + 63) / 64 * 64;
}

static size_t scratch_bytes(int64_t seq_len) {
    return 2 * aligned((size_t)(BLOCK * seq_len) * sizeof(float)) +
           aligned((size_t)seq_len * sizeof(float)) + aligned(BLOCK * BLOCK) +
           naive_product_scratch_bytes();
}

int64_t naive_attention_memory(int64_t batch, int64_t seq_len, int64_t threads) {
    /* each thread's scratch as reference_parallel_run allocates it (64 bytes of alignment) */
    int64_t table = 0, every_thread = 0, spans_bytes = 0, total = 0;
    const bool fits =
        seq_len >= 0 &&
        cpparity_multiply_checked(BLOCK * (int64_t)sizeof(float), seq_len, &table) &&
        table <= INT64_MAX / 4 &&
        cpparity_multiply_checked((int64_t)sizeof(span), 2 * ((seq_len + BLOCK - 1) / BLOCK),
                                  &spans_bytes) &&
        cpparity_multiply_checked(spans_bytes, batch, &spans_bytes);
    if (!fits) {
        return -1;
    }
    const int64_t per_thread = (int64_t)scratch_bytes(seq_len) + 64;
    return cpparity_multiply_checked(per_thread, threads, &every_thread) &&
                   cpparity_add_checked(every_thread, spans_bytes, &total)
               ? total
               : -1;
}

static scratch_tables tables_of(void *scratch, int64_t seq_len) {
    char *at = scratch;
    scratch_tables t;
    t.first = (float *)at;
    at += aligned((size_t)(BLOCK * seq_len) * sizeof(float));
    t.second = (float *)at;
    at += aligned((size_t)(BLOCK * seq_len) * sizeof(float));
    t.rows = (float *)at;
    at += aligned((size_t)seq_len * sizeof(float));
    t.allowed = (uint8_t *)at;
    at += aligned(BLOCK * BLOCK);
    t.product = at;
    return t;
}

/* Operands of one batch row and head: rows of q / dout / out (head h), of k / v (head kv). */
static naive_matrix query_rows(const float *x, naive_attention_shape s, int64_t b, int64_t t,
                               int64_t h) {
    return (naive_matrix){x + ((b * s.seq_len + t) * s.heads + h) * s.head_dim,
                          s.heads * s.head_dim, 1};
}

static naive_matrix key_rows(const float *x, naive_attention_shape s, int64_t b, int64_t t,
                             int64_t kv) {
    return (naive_matrix){x + ((b * s.seq_len + t) * s.kv_heads + kv) * s.head_dim,
                          s.kv_heads * s.head_dim, 1};
}

/* The same rows read as columns (the transposed operand of a product). */
static naive_matrix transposed(naive_matrix rows) {
    return (naive_matrix){rows.data, rows.column_stride, rows.row_stride};
}

/* scores (rows × keys, row stride keys) ← scale · Σ_d q·k where allowed, −∞ elsewhere, for
 * query rows [q0, q1) of head h and keys [k0, k1) of its key/value head. */
static void masked_scores(const attention_work *w, const scratch_tables *t, int64_t b, int64_t h,
                          int64_t q0, int64_t q1, span keys) {
    const naive_attention_shape s = w->s;
    const int64_t rows = q1 - q0, width = keys.end - keys.begin, kv = h / (s.heads / s.kv_heads);
    naive_product_on_this_thread(t->first, width, query_rows(w->q, s, b, q0, h),
                                 transposed(key_rows(w->k, s, b, keys.begin, kv)), rows, width,
                                 s.head_dim, false, t->product);
    for (int64_t k0 = keys.begin; k0 < keys.end; k0 += BLOCK) {
        const int64_t k1 = minimum(k0 + BLOCK, keys.end);
        const reference_block_class kind =
            block_mask(w->mask, b, q0, q1, k0, k1, k1 - k0, 1, t->allowed);
        for (int64_t r = 0; r < rows; r++) {
            float *score = t->first + r * width + (k0 - keys.begin);
            const uint8_t *allowed = t->allowed + r * (k1 - k0);
            for (int64_t k = 0; k < k1 - k0; k++) {
                const bool pair =
                    kind == REFERENCE_BLOCK_ALL || (kind == REFERENCE_BLOCK_MIXED && allowed[k]);
                score[k] = pair ? w->scale * score[k] : -INFINITY;
            }
        }
    }
}

/* A work item of the forward and of dq: batch row b, query head h (of key/value head kv), query
 * rows [q0, q0 + rows) and the keys their mask blocks reach (width of them). */
typedef struct query_block {
    int64_t b, h, kv, q0, q1, rows, width;
    span keys;
} query_block;

static query_block query_block_of(const attention_work *w, int64_t item) {
    const naive_attention_shape s = w->s;
    const int64_t blocks = w->spans->blocks;
    query_block x;
    x.b = item / (s.heads * blocks);
    x.h = item / blocks % s.heads;
    x.kv = x.h / (s.heads / s.kv_heads);
    x.q0 = item % blocks * BLOCK;
    x.q1 = minimum(x.q0 + BLOCK, s.seq_len);
    x.rows = x.q1 - x.q0;
    x.keys = w->spans->keys[x.b * blocks + item % blocks];
    x.width = x.keys.end - x.keys.begin;
    return x;
}

/* item: batch row, query head, block of BLOCK query rows */
static void forward_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const query_block x = query_block_of(w, item);
    const int64_t b = x.b, h = x.h, kv = x.kv, q0 = x.q0, q1 = x.q1, rows = x.rows;
    const span keys = x.keys;
    const int64_t width = x.width;
    const scratch_tables t = tables_of(scratch, s.seq_len);
    float *lse = w->lse + (b * s.heads + h) * s.seq_len;
    if (width == 0) {
        for (int64_t r = 0; r < rows; r++) {
            memset(w->out + ((b * s.seq_len + q0 + r) * s.heads + h) * s.head_dim, 0,
                   (size_t)s.head_dim * sizeof(float));
            lse[q0 + r] = -INFINITY;
        }
        return;
    }
    masked_scores(w, &t, b, h, q0, q1, keys);
    /* the plain softmax of each row: its maximum, exp(score − maximum) and their sum in increasing
     * key order, then p = exp / sum (0 for a row with no allowed key) */
    for (int64_t r = 0; r < rows; r++) {
        float *p = t.first + r * width;
        float maximum = -INFINITY;
        for (int64_t k = 0; k < width; k++) {
            maximum = p[k] > maximum ? p[k] : maximum;
        }
        if (maximum == -INFINITY) {
            memset(p, 0, (size_t)width * sizeof *p);
            lse[q0 + r] = -INFINITY;
            continue;
        }
        float sum = 0.0f;
        for (int64_t k = 0; k < width; k++) {
            p[k] = expf(p[k] - maximum);
            sum += p[k];
        }
        for (int64_t k = 0; k < width; k++) {
            p[k] = p[k] / sum;
        }
        lse[q0 + r] = maximum + logf(sum);
    }
    /* out = Σ_keys p·v in increasing key order (a masked key adds p = 0) */
    naive_product_on_this_thread(w->out + ((b * s.seq_len + q0) * s.heads + h) * s.head_dim,
                                 s.heads * s.head_dim, (naive_matrix){t.first, width, 1},
                                 key_rows(w->v, s, b, keys.begin, kv), rows, s.head_dim, width,
                                 false, t.product);
}

bool naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale) {
    if (s.batch * s.seq_len == 0) {
        return true;
    }
    spans x;
    if (!spans_init(&x, mask, s)) {
        return false;
    }
    attention_work work = {.s = s,
                           .mask = mask,
                           .spans = &x,
                           .scale = scale,
                           .q = q,
                           .k = k,
                           .v = v,
                           .out = out,
                           .lse = lse};
    const reference_parallel_work parallel = {s.batch * s.heads * x.blocks,
                                              scratch_bytes(s.seq_len), forward_item, &work};
    const bool done = reference_parallel_run(&parallel, "the naive attention", NULL) == CPPARITY_OK;
    spans_free(&x);
    return done;
}

/* For count pairs of one query row (lse, δ): p = exp(score − lse) into score's place (score
 * already scaled, −∞ where masked) and scale · (p · (dp − δ)) into dp's; a masked pair or a row
 * with no allowed key gives 0 to both. */
static void probabilities_and_score_gradients(float *scores, float *dp, int64_t count,
                                              float row_lse, float delta, float scale) {
    for (int64_t k = 0; k < count; k++) {
        if (scores[k] == -INFINITY || row_lse == -INFINITY) {
            scores[k] = 0.0f;
            dp[k] = 0.0f;
            continue;
        }
        const float p = expf(scores[k] - row_lse);
        scores[k] = p;
        dp[k] = scale * (p * (dp[k] - delta));
    }
}

/* item: batch row, query head, block of BLOCK query rows: their dq */
static void query_gradient_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const query_block x = query_block_of(w, item);
    const int64_t b = x.b, h = x.h, kv = x.kv, q0 = x.q0, q1 = x.q1, rows = x.rows;
    const span keys = x.keys;
    const int64_t width = x.width;
    if (width == 0) {
        return;
    }
    const scratch_tables t = tables_of(scratch, s.seq_len);
    masked_scores(w, &t, b, h, q0, q1, keys);
    naive_product_on_this_thread(t.second, width, query_rows(w->dout, s, b, q0, h),
                                 transposed(key_rows(w->v, s, b, keys.begin, kv)), rows, width,
                                 s.head_dim, false, t.product);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t at = ((b * s.seq_len + q0 + r) * s.heads + h) * s.head_dim;
        probabilities_and_score_gradients(t.first + r * width, t.second + r * width, width,
                                          w->saved_lse[(b * s.heads + h) * s.seq_len + q0 + r],
                                          row_delta(w->dout + at, w->saved_out + at, s.head_dim),
                                          w->scale);
    }
    /* dq += Σ_keys (scale·ds)·k in increasing key order */
    naive_product_on_this_thread(w->dq + ((b * s.seq_len + q0) * s.heads + h) * s.head_dim,
                                 s.heads * s.head_dim, (naive_matrix){t.second, width, 1},
                                 key_rows(w->k, s, b, keys.begin, kv), rows, s.head_dim, width,
                                 true, t.product);
}

/* item: batch row, key/value head, block of BLOCK keys: their dk and dv, the query heads of the
 * group one after the other */
static void key_gradient_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const int64_t blocks = w->spans->blocks, group = s.heads / s.kv_heads;
    const int64_t b = item / (s.kv_heads * blocks), kv = item / blocks % s.kv_heads;
    const int64_t j = item % blocks;
    const int64_t k0 = j * BLOCK, k1 = minimum(k0 + BLOCK, s.seq_len), keys = k1 - k0;
    const span queries = w->spans->queries[b * blocks + j];
    const int64_t width = queries.end - queries.begin;
    if (width == 0) {
        return;
    }
    const scratch_tables t = tables_of(scratch, s.seq_len);
    for (int64_t h = kv * group; h < (kv + 1) * group; h++) {
        /* scores (keys × queries): Σ_d k·q in increasing d, the same sums as the forward's */
        naive_product_on_this_thread(t.first, width, key_rows(w->k, s, b, k0, kv),
                                     transposed(query_rows(w->q, s, b, queries.begin, h)), keys,
                                     width, s.head_dim, false, t.product);
        naive_product_on_this_thread(t.second, width, key_rows(w->v, s, b, k0, kv),
                                     transposed(query_rows(w->dout, s, b, queries.begin, h)), keys,
                                     width, s.head_dim, false, t.product);
        const float *lse = w->saved_lse + (b * s.heads + h) * s.seq_len;
        for (int64_t q = queries.begin; q < queries.end; q++) {
            const int64_t at = ((b * s.seq_len + q) * s.heads + h) * s.head_dim;
            t.rows[q - queries.begin] = row_delta(w->dout + at, w->saved_out + at, s.head_dim);
        }
        for (int64_t q0 = queries.begin; q0 < queries.end; q0 += BLOCK) {
            const int64_t q1 = minimum(q0 + BLOCK, queries.end);
            const reference_block_class kind =
                block_mask(w->mask, b, q0, q1, k0, k1, 1, q1 - q0, t.allowed);
            for (int64_t r = 0; r < keys; r++) {
                float *scores = t.first + r * width + (q0 - queries.begin);
                float *dps = t.second + r * width + (q0 - queries.begin);
                const uint8_t *allowed = t.allowed + r * (q1 - q0);
                for (int64_t q = q0; q < q1; q++) {
                    const bool pair = kind == REFERENCE_BLOCK_ALL ||
                                      (kind == REFERENCE_BLOCK_MIXED && allowed[q - q0]);
                    float score = pair ? w->scale * scores[q - q0] : -INFINITY;
                    float dp = dps[q - q0];
                    probabilities_and_score_gradients(&score, &dp, 1, lse[q],
                                                      t.rows[q - queries.begin], w->scale);
                    scores[q - q0] = score;
                    dps[q - q0] = dp;
                }
            }
        }
        /* dv += Σ_queries p·dout and dk += Σ_queries (scale·ds)·q, in increasing query order,
         * each head's sum added once */
        naive_product_on_this_thread(w->dv + ((b * s.seq_len + k0) * s.kv_heads + kv) * s.head_dim,
                                     s.kv_heads * s.head_dim, (naive_matrix){t.first, width, 1},
                                     query_rows(w->dout, s, b, queries.begin, h), keys, s.head_dim,
                                     width, true, t.product);
        naive_product_on_this_thread(w->dk + ((b * s.seq_len + k0) * s.kv_heads + kv) * s.head_dim,
                                     s.kv_heads * s.head_dim, (naive_matrix){t.second, width, 1},
                                     query_rows(w->q, s, b, queries.begin, h), keys, s.head_dim,
                                     width, true, t.product);
    }
}

bool naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale) {
    if (s.batch * s.seq_len == 0) {
        return true;
    }
    spans x;
    if (!spans_init(&x, mask, s)) {
        return false;
    }
    attention_work work = {.s = s,
                           .mask = mask,
                           .spans = &x,
                           .scale = scale,
                           .q = q,
                           .k = k,
                           .v = v,
                           .dout = dout,
                           .saved_out = out,
                           .saved_lse = lse,
                           .dq = dq,
                           .dk = dk,
                           .dv = dv};
    const reference_parallel_work queries = {s.batch * s.heads * x.blocks, scratch_bytes(s.seq_len),
                                             query_gradient_item, &work};
    const reference_parallel_work keys = {s.batch * s.kv_heads * x.blocks, scratch_bytes(s.seq_len),
                                          key_gradient_item, &work};
    const bool done =
        reference_parallel_run(&queries, "the naive attention's backward", NULL) == CPPARITY_OK &&
        reference_parallel_run(&keys, "the naive attention's backward", NULL) == CPPARITY_OK;
    spans_free(&x);
    return done;
}
