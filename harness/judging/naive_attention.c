/* naive_attention.c — attention row by row in float32 (see naive_attention.h). */
#include "harness/judging/naive_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/parallel.h"

enum { QUERY_ROWS = 64 }; /* query positions per forward work item */

/* The allowed keys of one query row as ranges [begin, end) in increasing order. */
typedef struct key_ranges {
    int64_t count;   /* ranges */
    int64_t keys;    /* keys in all of them */
    int64_t *bounds; /* (2·count) begin, end of each */
} key_ranges;

/* The keys query q of row b may attend, from the mask's block classification (an empty block
 * skipped, a full one taken whole, a mixed one key by key). */
static void allowed_keys(const reference_mask *mask, int64_t b, int64_t q, key_ranges *ranges) {
    ranges->count = 0;
    ranges->keys = 0;
    const int64_t edge = mask->block_size;
    for (int64_t k0 = 0; k0 <= q; k0 += edge) {
        const int64_t k1 = k0 + edge < q + 1 ? k0 + edge : q + 1;
        const reference_block_class kind = reference_mask_classify_block(mask, b, q, q + 1, k0, k1);
        for (int64_t k = k0; k < k1 && kind != REFERENCE_BLOCK_NONE; k++) {
            if (kind == REFERENCE_BLOCK_MIXED && !reference_mask_allowed(mask, b, q, k)) {
                continue;
            }
            int64_t *last = ranges->count > 0 ? ranges->bounds + 2 * (ranges->count - 1) : NULL;
            if (last != NULL && last[1] == k) {
                last[1] = k + 1;
            } else {
                ranges->bounds[2 * ranges->count] = k;
                ranges->bounds[2 * ranges->count + 1] = k + 1;
                ranges->count++;
            }
            ranges->keys++;
        }
    }
}

/* scores[j] = Σ_d x[d]·kt[d][key_j] for the allowed keys in order (kt: Dh rows of S keys, one
 * key/value head of one batch row); each score summed over d in increasing order, keys side by
 * side. */
static void dot_keys(float *scores, const float *x, const float *kt, int64_t seq_len,
                     int64_t head_dim, const key_ranges *ranges) {
    memset(scores, 0, (size_t)ranges->keys * sizeof *scores);
    for (int64_t d = 0; d < head_dim; d++) {
        const float xd = x[d];
        const float *row = kt + d * seq_len;
        float *at = scores;
        for (int64_t r = 0; r < ranges->count; r++) {
            const int64_t begin = ranges->bounds[2 * r], end = ranges->bounds[2 * r + 1];
            for (int64_t key = begin; key < end; key++) {
                at[key - begin] += xd * row[key];
            }
            at += end - begin;
        }
    }
}

/* The key of position j among the allowed keys. */
static int64_t key_at(const key_ranges *ranges, int64_t *range, int64_t *offset) {
    while (*offset >= ranges->bounds[2 * *range + 1] - ranges->bounds[2 * *range]) {
        *offset -= ranges->bounds[2 * *range + 1] - ranges->bounds[2 * *range];
        (*range)++;
    }
    return ranges->bounds[2 * *range] + *offset;
}

/* k (B,S,Hkv,Dh) → kt (B,Hkv,Dh,S). */
static void transpose_keys(float *kt, const float *k, naive_attention_shape s) {
    for (int64_t b = 0; b < s.batch; b++) {
        for (int64_t t = 0; t < s.seq_len; t++) {
            for (int64_t kv = 0; kv < s.kv_heads; kv++) {
                const float *from = k + ((b * s.seq_len + t) * s.kv_heads + kv) * s.head_dim;
                float *to = kt + (b * s.kv_heads + kv) * s.head_dim * s.seq_len + t;
                for (int64_t d = 0; d < s.head_dim; d++) {
                    to[d * s.seq_len] = from[d];
                }
            }
        }
    }
}

/* Per thread: a row's key ranges (2·S), scores (S) and, backward, dp (S). */
static size_t scratch_bytes(int64_t seq_len) {
    return (size_t)seq_len * (2 * sizeof(int64_t) + 2 * sizeof(float)) + 64;
}

typedef struct attention_work {
    naive_attention_shape s;
    const reference_mask *mask;
    float scale;
    const float *q, *k, *v, *kt, *vt, *dout;
    float *out, *lse;                   /* forward: written */
    const float *saved_out, *saved_lse; /* backward: the forward's */
    float *dq, *dk, *dv;                /* backward */
    int64_t query_blocks;               /* forward: ceil(S / QUERY_ROWS) */
} attention_work;

static key_ranges scratch_ranges(void *scratch, float **scores, float **second, int64_t seq_len) {
    key_ranges ranges = {0, 0, scratch};
    *scores = (float *)(ranges.bounds + 2 * seq_len);
    *second = *scores + seq_len;
    return ranges;
}

/* item: batch row, block of QUERY_ROWS query positions, every head */
static void forward_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const int64_t b = item / w->query_blocks, first = item % w->query_blocks * QUERY_ROWS;
    const int64_t last = first + QUERY_ROWS < s.seq_len ? first + QUERY_ROWS : s.seq_len;
    const int64_t group = s.heads / s.kv_heads, Dh = s.head_dim;
    float *scores = NULL, *unused = NULL;
    key_ranges ranges = scratch_ranges(scratch, &scores, &unused, s.seq_len);
    for (int64_t t = first; t < last; t++) {
        allowed_keys(w->mask, b, t, &ranges);
        for (int64_t h = 0; h < s.heads; h++) {
            const float *query = w->q + ((b * s.seq_len + t) * s.heads + h) * Dh;
            float *row = w->out + ((b * s.seq_len + t) * s.heads + h) * Dh;
            const int64_t kv = h / group;
            memset(row, 0, (size_t)Dh * sizeof *row);
            if (ranges.keys == 0) {
                w->lse[(b * s.heads + h) * s.seq_len + t] = -INFINITY;
                continue;
            }
            dot_keys(scores, query, w->kt + (b * s.kv_heads + kv) * Dh * s.seq_len, s.seq_len, Dh,
                     &ranges);
            float maximum = -INFINITY;
            for (int64_t j = 0; j < ranges.keys; j++) {
                scores[j] = w->scale * scores[j];
                maximum = scores[j] > maximum ? scores[j] : maximum;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < ranges.keys; j++) {
                scores[j] = expf(scores[j] - maximum);
                sum += scores[j];
            }
            int64_t range = 0, offset = 0;
            for (int64_t j = 0; j < ranges.keys; j++, offset++) {
                const float p = scores[j] / sum;
                const int64_t key = key_at(&ranges, &range, &offset);
                const float *value = w->v + ((b * s.seq_len + key) * s.kv_heads + kv) * Dh;
                for (int64_t d = 0; d < Dh; d++) {
                    row[d] += p * value[d];
                }
            }
            w->lse[(b * s.heads + h) * s.seq_len + t] = maximum + logf(sum);
        }
    }
}

bool naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale) {
    if (s.batch * s.seq_len == 0) {
        return true;
    }
    float *kt = malloc((size_t)(s.batch * s.seq_len * s.kv_heads * s.head_dim) * sizeof *kt);
    if (kt == NULL) {
        return false;
    }
    transpose_keys(kt, k, s);
    attention_work work = {.s = s,
                           .mask = mask,
                           .scale = scale,
                           .q = q,
                           .k = k,
                           .v = v,
                           .kt = kt,
                           .out = out,
                           .lse = lse,
                           .query_blocks = (s.seq_len + QUERY_ROWS - 1) / QUERY_ROWS};
    const reference_parallel_work parallel = {s.batch * work.query_blocks, scratch_bytes(s.seq_len),
                                              forward_item, &work};
    const bool done = reference_parallel_run(&parallel, "the naive attention", NULL) == CPPARITY_OK;
    free(kt);
    return done;
}

/* item: batch row, key/value head: its query heads' dq and its own dk, dv */
static void backward_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const int64_t b = item / s.kv_heads, kv = item % s.kv_heads;
    const int64_t group = s.heads / s.kv_heads, Dh = s.head_dim;
    float *dots = NULL, *dps = NULL;
    key_ranges ranges = scratch_ranges(scratch, &dots, &dps, s.seq_len);
    const float *kt = w->kt + (b * s.kv_heads + kv) * Dh * s.seq_len;
    const float *vt = w->vt + (b * s.kv_heads + kv) * Dh * s.seq_len;
    for (int64_t t = 0; t < s.seq_len; t++) {
        allowed_keys(w->mask, b, t, &ranges);
        for (int64_t h = kv * group; h < (kv + 1) * group && ranges.keys > 0; h++) {
            const int64_t row = ((b * s.seq_len + t) * s.heads + h) * Dh;
            const float row_lse = w->saved_lse[(b * s.heads + h) * s.seq_len + t];
            float delta = 0.0f;
            for (int64_t d = 0; d < Dh; d++) {
                delta += w->dout[row + d] * w->saved_out[row + d];
            }
            dot_keys(dots, w->q + row, kt, s.seq_len, Dh, &ranges);
            dot_keys(dps, w->dout + row, vt, s.seq_len, Dh, &ranges);
            int64_t range = 0, offset = 0;
            for (int64_t j = 0; j < ranges.keys; j++, offset++) {
                const int64_t key =
                    ((b * s.seq_len + key_at(&ranges, &range, &offset)) * s.kv_heads + kv) * Dh;
                const float p = expf(w->scale * dots[j] - row_lse);
                const float ds = p * (dps[j] - delta);
                for (int64_t d = 0; d < Dh; d++) {
                    w->dq[row + d] += w->scale * ds * w->k[key + d];
                    w->dk[key + d] += w->scale * ds * w->q[row + d];
                    w->dv[key + d] += p * w->dout[row + d];
                }
            }
        }
    }
}

bool naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale) {
    if (s.batch * s.seq_len == 0) {
        return true;
    }
    const size_t keys = (size_t)(s.batch * s.seq_len * s.kv_heads * s.head_dim);
    float *kt = malloc(keys * sizeof *kt), *vt = malloc(keys * sizeof *vt);
    bool done = kt != NULL && vt != NULL;
    if (done) {
        transpose_keys(kt, k, s);
        transpose_keys(vt, v, s);
        attention_work work = {.s = s,
                               .mask = mask,
                               .scale = scale,
                               .q = q,
                               .k = k,
                               .v = v,
                               .kt = kt,
                               .vt = vt,
                               .dout = dout,
                               .saved_out = out,
                               .saved_lse = lse,
                               .dq = dq,
                               .dk = dk,
                               .dv = dv};
        const reference_parallel_work parallel = {s.batch * s.kv_heads, scratch_bytes(s.seq_len),
                                                  backward_item, &work};
        done = reference_parallel_run(&parallel, "the naive attention's backward", NULL) ==
               CPPARITY_OK;
    }
    free(kt);
    free(vt);
    return done;
}
