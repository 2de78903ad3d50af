/* naive_attention.c — attention in float32 by blocks of rows (see naive_attention.h). */
#include "harness/judging/naive_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "harness/judging/naive_exponential.h"
#include "harness/judging/naive_products.h"
#include "reference/parallel.h"

enum {
    BLOCK = 64,  /* query rows (forward, dq) or keys (dk, dv) per work item; mask block edge */
    CHUNK = 256, /* tokens of the other side a step takes at once, while its tables are in cache */
};

/* Eight float32 lanes; every operation on them below is a plain IEEE operation per lane (this
 * file is built with -ffp-contract=off), so a lane computes what the scalar formula computes. */
enum { LANES = 8 };
/* The functions with lane loops, compiled for AVX2 too and chosen by the CPU at load time: the
 * same bits either way, since this file fuses no multiply and add and AVX2 alone has no FMA (the
 * products' fused steps are naive_products.c's, chosen there). */
#if defined(__x86_64__) && defined(__GNUC__)
#define LANE_FUNCTION __attribute__((target_clones("avx2", "default")))
#else
#define LANE_FUNCTION
#endif
typedef float vector8 __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t int32x8 __attribute__((vector_size(LANES * sizeof(int32_t))));
typedef uint8_t uint8x8 __attribute__((vector_size(LANES)));

/* mask ? a : b, lane by lane (mask lanes all ones or all zeros) */
#define SELECT(mask, a, b) ((vector8)(((mask) & (int32x8)(a)) | (~(mask) & (int32x8)(b))))
#define LOAD(vector, from) memcpy(&(vector), (from), sizeof(vector))
#define STORE(to, vector) memcpy((to), &(vector), sizeof(vector))
/* ds' of pairs from their p, dp and their query's δ: scale·(p·(dp − δ)), and 0 where p is 0 (a
 * masked pair, whose p is exp(−∞), or an exponential that underflows); the query side and the
 * key side both take it from here */
#define SCORE_GRADIENT(p, dp, delta, scale)                                                        \
    SELECT((p) == 0.0f, (vector8){0}, (scale) * ((p) * ((dp) - (delta))))
/* lanes [v, v + LANES) of a table row: those below count, of a block of this kind (for a mixed
 * block, where allowed[lane] is set) */
#define ALLOWED_LANES(lanes, kind, allowed, count, v)                                              \
    do {                                                                                           \
        const int32x8 index_ = (int32x8){0, 1, 2, 3, 4, 5, 6, 7} + (int32_t)(v);                   \
        (lanes) = index_ < (int32_t)(count);                                                       \
        if ((kind) == REFERENCE_BLOCK_NONE) {                                                      \
            (lanes) = (int32x8){0};                                                                \
        } else if ((kind) == REFERENCE_BLOCK_MIXED) {                                              \
            uint8x8 bytes_;                                                                        \
            LOAD(bytes_, (allowed) + (v));                                                         \
            (lanes) = (lanes) & (__builtin_convertvector(bytes_, int32x8) != 0);                   \
        }                                                                                          \
    } while (0)

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

/* The spans of query blocks [query_first, query_end) (their keys) and of key blocks [key_first,
 * key_end) (their queries), each over every block of the other side: a block outside its range
 * has a span over the other range only, which nothing reads. */
static bool spans_init(spans *x, const reference_mask *mask, naive_attention_shape s,
                       int64_t query_first, int64_t query_end, int64_t key_first, int64_t key_end) {
    x->blocks = (s.seq_len + BLOCK - 1) / BLOCK;
    const size_t count = (size_t)(s.batch * x->blocks);
    x->keys = calloc(count + 1, sizeof *x->keys);
    x->queries = calloc(count + 1, sizeof *x->queries);
    if (x->keys == NULL || x->queries == NULL) {
        spans_free(x);
        return false;
    }
    const bool whole_queries = query_first == 0 && query_end == x->blocks;
    for (int64_t b = 0; b < s.batch; b++) {
        span *keys = x->keys + b * x->blocks, *queries = x->queries + b * x->blocks;
        /* query blocks: those asked for, and every one when key blocks are asked for */
        const bool every_query = whole_queries || key_first < key_end;
        for (int64_t i = every_query ? 0 : query_first; i < (every_query ? x->blocks : query_end);
             i++) {
            const bool query_asked = i >= query_first && i < query_end;
            const int64_t q0 = i * BLOCK, q1 = minimum(q0 + BLOCK, s.seq_len);
            for (int64_t j = query_asked ? 0 : key_first; j < (query_asked ? x->blocks : key_end);
                 j++) {
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
    int64_t query_first, query_rows; /* the tokens q, dout, out, dq hold: whole, or a window's */
    int64_t key_first, key_rows;     /* the tokens k, v, dk, dv hold */
    int64_t first_block, end_block;  /* the blocks whose outputs are computed (of queries for the
                                        forward and dq, of keys for dk and dv) */
    int64_t table_width;             /* the forward's widest span: its score table's rows */
    int64_t batch_first, batches;    /* the batch rows computed: [batch_first, + batches) (0, 0:
                                        every one) */
    float *delta_out;                /* a window's dq pass: δ of its queries (B,H,S), or NULL */
    const float *delta_in;           /* a window's dk pass: δ of every query it reads (B,H,S);
                                        NULL: from dout and saved_out */
    float scale;
    const float *q, *k, *v, *dout;
    float *out, *lse;                   /* forward: written */
    const float *saved_out, *saved_lse; /* backward: the forward's */
    float *dq, *dk, *dv;                /* backward */
} attention_work;

/* Per thread, each 64-byte aligned: the forward's score table (table_width × BLOCK), two chunk
 * tables (CHUNK × BLOCK), two blocks of BLOCK tokens transposed (head_dim × BLOCK), two blocks of
 * sums (BLOCK × head_dim), per-lane values, a BLOCK × BLOCK mask and a product's scratch. Every
 * table holds one token of the other side per row and the block's BLOCK tokens across it, so
 * the block's rows are lanes of a vector. */
typedef struct scratch_tables {
    float *table, *first, *second, *transposed, *transposed_second, *sums, *sums_second;
    float *lanes; /* LANE_VALUES × BLOCK, then CHUNK */
    uint8_t *allowed;
    void *product;
} scratch_tables;

enum {
    LANE_VALUES = 3
}; /* per-lane values of a block: the forward's maximum, shift and sum;
      dq's shift, δ and whether the row has no allowed key */

static size_t aligned(size_t bytes) {
    return (bytes + 63) / 64 * 64;
}

static size_t scratch_bytes(int64_t table_width, int64_t head_dim) {
    return aligned((size_t)(BLOCK * table_width) * sizeof(float)) +
           2 * aligned((size_t)(CHUNK * BLOCK) * sizeof(float)) +
           4 * aligned((size_t)(BLOCK * head_dim) * sizeof(float)) +
           aligned((size_t)(LANE_VALUES * BLOCK + CHUNK) * sizeof(float)) + aligned(BLOCK * BLOCK) +
           naive_product_scratch_bytes();
}

int64_t naive_attention_memory(int64_t batch, int64_t seq_len, int64_t head_dim, int64_t threads) {
    /* each thread's scratch as reference_parallel_run allocates it (64 bytes of alignment) */
    int64_t table = 0, block = 0, every_thread = 0, spans_bytes = 0, total = 0;
    const bool fits =
        seq_len >= 0 && head_dim >= 0 &&
        cpparity_multiply_checked(BLOCK * (int64_t)sizeof(float), seq_len, &table) &&
        table <= INT64_MAX / 4 &&
        cpparity_multiply_checked(BLOCK * (int64_t)sizeof(float), head_dim, &block) &&
        block <= INT64_MAX / 16 && table + 4 * block <= INT64_MAX / 2 &&
        cpparity_multiply_checked((int64_t)sizeof(span), 2 * ((seq_len + BLOCK - 1) / BLOCK),
                                  &spans_bytes) &&
        cpparity_multiply_checked(spans_bytes, batch, &spans_bytes);
    if (!fits) {
        return -1;
    }
    const int64_t per_thread = (int64_t)scratch_bytes(seq_len, head_dim) + 64;
    return cpparity_multiply_checked(per_thread, threads, &every_thread) &&
                   cpparity_add_checked(every_thread, spans_bytes, &total)
               ? total
               : -1;
}

static scratch_tables tables_of(void *scratch, int64_t table_width, int64_t head_dim) {
    char *at = scratch;
    scratch_tables t;
    float **floats[] = {&t.table, &t.first,       &t.second, &t.transposed, &t.transposed_second,
                        &t.sums,  &t.sums_second, &t.lanes};
    const size_t sizes[] = {(size_t)(BLOCK * table_width),
                            CHUNK * BLOCK,
                            CHUNK * BLOCK,
                            (size_t)(BLOCK * head_dim),
                            (size_t)(BLOCK * head_dim),
                            (size_t)(BLOCK * head_dim),
                            (size_t)(BLOCK * head_dim),
                            LANE_VALUES * BLOCK + CHUNK};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        *floats[i] = (float *)at;
        at += aligned(sizes[i] * sizeof(float));
    }
    t.allowed = (uint8_t *)at;
    at += aligned(BLOCK * BLOCK);
    t.product = at;
    return t;
}

/* Offsets of token t of batch row b: head h of a query-shaped tensor (q, dout, out, dq), head kv
 * of a key-shaped one (k, v, dk, dv), in the tokens they hold. */
static int64_t query_at(const attention_work *w, int64_t b, int64_t t, int64_t h) {
    return ((b * w->query_rows + t - w->query_first) * w->s.heads + h) * w->s.head_dim;
}

static int64_t key_at(const attention_work *w, int64_t b, int64_t t, int64_t kv) {
    return ((b * w->key_rows + t - w->key_first) * w->s.kv_heads + kv) * w->s.head_dim;
}

/* Operands of one batch row and head: rows of q / dout / out (head h), of k / v (head kv). */
static naive_matrix query_rows(const attention_work *w, const float *x, int64_t b, int64_t t,
                               int64_t h) {
    return (naive_matrix){x + query_at(w, b, t, h), w->s.heads * w->s.head_dim, 1};
}

static naive_matrix key_rows(const attention_work *w, const float *x, int64_t b, int64_t t,
                             int64_t kv) {
    return (naive_matrix){x + key_at(w, b, t, kv), w->s.kv_heads * w->s.head_dim, 1};
}

/* A table's rows read as a product's left operand: element (lane, token) of rows × BLOCK. */
static naive_matrix lanes_of(const float *table) {
    return (naive_matrix){table, 1, BLOCK};
}

/* transposed (head_dim × BLOCK) ← rows [0, count) of x (row stride `stride`), zero in the lanes
 * past count. */
static void transpose_block(float *transposed, const float *x, int64_t stride, int64_t count,
                            int64_t head_dim) {
    for (int64_t d = 0; d < head_dim; d++) {
        float *lane = transposed + d * BLOCK;
        for (int64_t r = 0; r < count; r++) {
            lane[r] = x[r * stride + d];
        }
        for (int64_t r = count; r < BLOCK; r++) {
            lane[r] = 0.0f;
        }
    }
}

/* scores (count × BLOCK) ← Σ_d other·block in increasing d: for `count` rows of the other side
 * (rows of q or k, row stride as given) against the block's tokens transposed. */
static void lane_scores(float *scores, naive_matrix other, const float *transposed, int64_t count,
                        int64_t head_dim, void *product) {
    naive_product_left_in_place(scores, BLOCK, other, (naive_matrix){transposed, BLOCK, 1}, count,
                                BLOCK, head_dim, false, product);
}

/* For a query block [q0, q1) and the keys [k0, k1) of scores (keys × BLOCK lanes, one query per
 * lane): scale · score where the pair is allowed, −∞ elsewhere and in the lanes past the block;
 * maximum[lane] (unless NULL) takes the larger of itself and each allowed score, in increasing
 * key order. */
LANE_FUNCTION static void mask_query_lanes(const attention_work *w, const scratch_tables *t,
                                           float *scores, int64_t b, int64_t q0, int64_t q1,
                                           int64_t k0, int64_t k1, float *maximum) {
    for (int64_t m0 = k0; m0 < k1; m0 += BLOCK) {
        const int64_t m1 = minimum(m0 + BLOCK, k1);
        const reference_block_class kind =
            block_mask(w->mask, b, q0, q1, m0, m1, 1, BLOCK, t->allowed);
        for (int64_t k = m0; k < m1; k++) {
            float *row = scores + (k - k0) * BLOCK;
            const uint8_t *allowed = t->allowed + (k - m0) * BLOCK;
            for (int64_t v = 0; v < BLOCK; v += LANES) {
                int32x8 lanes;
                ALLOWED_LANES(lanes, kind, allowed, q1 - q0, v);
                vector8 values, most;
                LOAD(values, row + v);
                values = SELECT(lanes, w->scale * values, (vector8){0} - INFINITY);
                STORE(row + v, values);
                if (maximum != NULL) {
                    LOAD(most, maximum + v);
                    most = SELECT(values > most, values, most);
                    STORE(maximum + v, most);
                }
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
    const int64_t blocks = w->end_block - w->first_block;
    query_block x;
    x.b = w->batch_first + item / (s.heads * blocks);
    x.h = item / blocks % s.heads;
    x.kv = x.h / (s.heads / s.kv_heads);
    x.q0 = (w->first_block + item % blocks) * BLOCK;
    x.q1 = minimum(x.q0 + BLOCK, s.seq_len);
    x.rows = x.q1 - x.q0;
    x.keys = w->spans->keys[x.b * w->spans->blocks + w->first_block + item % blocks];
    x.width = x.keys.end - x.keys.begin;
    return x;
}

/* item: batch row, query head, block of BLOCK query rows */
LANE_FUNCTION static void forward_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const query_block x = query_block_of(w, item);
    const int64_t b = x.b, h = x.h, kv = x.kv, q0 = x.q0, q1 = x.q1, rows = x.rows;
    const span keys = x.keys;
    const int64_t width = x.width;
    float *lse = w->lse + (b * s.heads + h) * s.seq_len;
    if (width == 0) {
        for (int64_t r = 0; r < rows; r++) {
            memset(w->out + query_at(w, b, q0 + r, h), 0, (size_t)s.head_dim * sizeof(float));
            lse[q0 + r] = -INFINITY;
        }
        return;
    }
    const scratch_tables t = tables_of(scratch, w->table_width, s.head_dim);
    float *maximum = t.lanes, *shift = t.lanes + BLOCK, *sum = t.lanes + 2 * BLOCK;
    transpose_block(t.transposed, w->q + query_at(w, b, q0, h), s.heads * s.head_dim, rows,
                    s.head_dim);
    for (int64_t r = 0; r < BLOCK; r++) {
        maximum[r] = -INFINITY;
    }
    /* scores by chunks of keys, each masked and scaled while in cache; the maximum over the
     * allowed keys in increasing key order */
    for (int64_t c0 = keys.begin; c0 < keys.end; c0 += CHUNK) {
        const int64_t c1 = minimum(c0 + CHUNK, keys.end);
        float *scores = t.table + (c0 - keys.begin) * BLOCK;
        lane_scores(scores, key_rows(w, w->k, b, c0, kv), t.transposed, c1 - c0, s.head_dim,
                    t.product);
        mask_query_lanes(w, &t, scores, b, q0, q1, c0, c1, maximum);
    }
    /* the plain softmax of each row: exp(score − maximum) and their sum in increasing key
     * order, then p = exp / sum (0 for a row with no allowed key) */
    for (int64_t r = 0; r < BLOCK; r++) {
        shift[r] = maximum[r] == -INFINITY ? 0.0f : maximum[r];
        sum[r] = 0.0f;
    }
    for (int64_t k = 0; k < width; k++) {
        float *p = t.table + k * BLOCK;
        naive_exponential_shifts(p, p, shift, BLOCK);
        for (int64_t v = 0; v < BLOCK; v += LANES) {
            vector8 values, total;
            LOAD(values, p + v);
            LOAD(total, sum + v);
            total = total + values;
            STORE(sum + v, total);
        }
    }
    for (int64_t k = 0; k < width; k++) {
        float *p = t.table + k * BLOCK;
        for (int64_t v = 0; v < BLOCK; v += LANES) {
            vector8 values, total, most;
            LOAD(values, p + v);
            LOAD(total, sum + v);
            LOAD(most, maximum + v);
            values = SELECT(most == -INFINITY, (vector8){0}, values / total);
            STORE(p + v, values);
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        lse[q0 + r] = maximum[r] == -INFINITY ? -INFINITY : maximum[r] + logf(sum[r]);
    }
    /* out = Σ_keys p·v in increasing key order (a masked key adds p = 0) */
    naive_product_left_in_place(w->out + query_at(w, b, q0, h), s.heads * s.head_dim,
                                lanes_of(t.table), key_rows(w, w->v, b, keys.begin, kv), rows,
                                s.head_dim, width, false, t.product);
}

/* x (rows × head_dim, row stride `stride`) += sums (rows × head_dim): each sum added once. */
static void add_sums(float *x, int64_t stride, const float *sums, int64_t rows, int64_t head_dim) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t d = 0; d < head_dim; d++) {
            x[r * stride + d] = x[r * stride + d] + sums[r * head_dim + d];
        }
    }
}

/* item: batch row, query head, block of BLOCK query rows: their dq */
LANE_FUNCTION static void query_gradient_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const query_block x = query_block_of(w, item);
    const int64_t b = x.b, h = x.h, kv = x.kv, q0 = x.q0, q1 = x.q1, rows = x.rows;
    const span keys = x.keys;
    const int64_t width = x.width;
    const scratch_tables t = tables_of(scratch, w->table_width, s.head_dim);
    float *shift = t.lanes, *delta = t.lanes + BLOCK, *dead = t.lanes + 2 * BLOCK;
    for (int64_t r = 0; r < BLOCK; r++) {
        const int64_t at = query_at(w, b, q0 + r, h);
        const float row_lse =
            r < rows ? w->saved_lse[(b * s.heads + h) * s.seq_len + q0 + r] : -INFINITY;
        delta[r] = r < rows ? row_delta(w->dout + at, w->saved_out + at, s.head_dim) : 0.0f;
        if (w->delta_out != NULL && r < rows) {
            w->delta_out[(b * s.heads + h) * s.seq_len + q0 + r] = delta[r];
        }
        /* a row with no allowed key (lse −∞) gets p = 0 and ds' = 0 */
        dead[r] = row_lse == -INFINITY ? 1.0f : 0.0f;
        shift[r] = row_lse == -INFINITY ? 0.0f : row_lse;
    }
    if (width == 0) {
        return;
    }
    transpose_block(t.transposed, w->q + query_at(w, b, q0, h), s.heads * s.head_dim, rows,
                    s.head_dim);
    transpose_block(t.transposed_second, w->dout + query_at(w, b, q0, h), s.heads * s.head_dim,
                    rows, s.head_dim);
    memset(t.sums, 0, (size_t)(rows * s.head_dim) * sizeof *t.sums);
    for (int64_t c0 = keys.begin; c0 < keys.end; c0 += CHUNK) {
        const int64_t c1 = minimum(c0 + CHUNK, keys.end), count = c1 - c0;
        lane_scores(t.first, key_rows(w, w->k, b, c0, kv), t.transposed, count, s.head_dim,
                    t.product);
        mask_query_lanes(w, &t, t.first, b, q0, q1, c0, c1, NULL);
        /* dp = Σ_d dout·v in increasing d */
        lane_scores(t.second, key_rows(w, w->v, b, c0, kv), t.transposed_second, count, s.head_dim,
                    t.product);
        /* p = exp(scale·score − lse), then ds' = scale·(p·(dp − δ)) */
        for (int64_t k = 0; k < count; k++) {
            float *p = t.first + k * BLOCK, *dp = t.second + k * BLOCK;
            naive_exponential_shifts(p, p, shift, BLOCK);
            for (int64_t v = 0; v < BLOCK; v += LANES) {
                vector8 values, gradient, d, off;
                LOAD(values, p + v);
                LOAD(gradient, dp + v);
                LOAD(d, delta + v);
                LOAD(off, dead + v);
                gradient = SELECT(off != 0.0f, (vector8){0},
                                  SCORE_GRADIENT(values, gradient, d, w->scale));
                STORE(dp + v, gradient);
            }
        }
        /* dq's sum Σ_keys ds'·k in increasing key order, resumed chunk after chunk */
        naive_product_left_in_place(t.sums, s.head_dim, lanes_of(t.second),
                                    key_rows(w, w->k, b, c0, kv), rows, s.head_dim, count, true,
                                    t.product);
    }
    add_sums(w->dq + query_at(w, b, q0, h), s.heads * s.head_dim, t.sums, rows, s.head_dim);
}

/* item: batch row, key/value head, block of BLOCK keys: their dk and dv, the query heads of the
 * group one after the other */
LANE_FUNCTION static void key_gradient_item(void *context, int64_t item, void *scratch) {
    const attention_work *w = context;
    const naive_attention_shape s = w->s;
    const int64_t blocks = w->end_block - w->first_block, group = s.heads / s.kv_heads;
    const int64_t b = w->batch_first + item / (s.kv_heads * blocks),
                  kv = item / blocks % s.kv_heads;
    const int64_t j = w->first_block + item % blocks;
    const int64_t k0 = j * BLOCK, k1 = minimum(k0 + BLOCK, s.seq_len), keys = k1 - k0;
    const span queries = w->spans->queries[b * w->spans->blocks + j];
    if (queries.end == queries.begin) {
        return;
    }
    const scratch_tables t = tables_of(scratch, w->table_width, s.head_dim);
    float *delta = t.lanes + LANE_VALUES * BLOCK;
    transpose_block(t.transposed, w->k + key_at(w, b, k0, kv), s.kv_heads * s.head_dim, keys,
                    s.head_dim);
    transpose_block(t.transposed_second, w->v + key_at(w, b, k0, kv), s.kv_heads * s.head_dim, keys,
                    s.head_dim);
    for (int64_t h = kv * group; h < (kv + 1) * group; h++) {
        const float *lse = w->saved_lse + (b * s.heads + h) * s.seq_len;
        memset(t.sums, 0, (size_t)(keys * s.head_dim) * sizeof *t.sums);
        memset(t.sums_second, 0, (size_t)(keys * s.head_dim) * sizeof *t.sums_second);
        for (int64_t c0 = queries.begin; c0 < queries.end; c0 += CHUNK) {
            const int64_t c1 = minimum(c0 + CHUNK, queries.end), count = c1 - c0;
            /* scores (queries × BLOCK keys): Σ_d q·k in increasing d, the forward's sums; dp */
            lane_scores(t.first, query_rows(w, w->q, b, c0, h), t.transposed, count, s.head_dim,
                        t.product);
            lane_scores(t.second, query_rows(w, w->dout, b, c0, h), t.transposed_second, count,
                        s.head_dim, t.product);
            for (int64_t q = c0; q < c1; q++) {
                const int64_t at = query_at(w, b, q, h);
                delta[q - c0] = w->delta_in != NULL
                                    ? w->delta_in[(b * s.heads + h) * s.seq_len + q]
                                    : row_delta(w->dout + at, w->saved_out + at, s.head_dim);
            }
            for (int64_t m0 = c0; m0 < c1; m0 += BLOCK) {
                const int64_t m1 = minimum(m0 + BLOCK, c1);
                const reference_block_class kind =
                    block_mask(w->mask, b, m0, m1, k0, k1, BLOCK, 1, t.allowed);
                for (int64_t q = m0; q < m1; q++) {
                    float *p = t.first + (q - c0) * BLOCK, *dp = t.second + (q - c0) * BLOCK;
                    const uint8_t *allowed = t.allowed + (q - m0) * BLOCK;
                    /* p = exp(score − lse) of the query's own lse, as the query side computes
                     * it: the exponent's argument first, then the exponentials at once */
                    const reference_block_class row_kind =
                        lse[q] == -INFINITY ? REFERENCE_BLOCK_NONE : kind;
                    for (int64_t v = 0; v < BLOCK; v += LANES) {
                        int32x8 lanes;
                        ALLOWED_LANES(lanes, row_kind, allowed, keys, v);
                        vector8 values;
                        LOAD(values, p + v);
                        values = SELECT(lanes, w->scale * values - lse[q], (vector8){0} - INFINITY);
                        STORE(p + v, values);
                    }
                    naive_exponential(p, p, BLOCK, 0.0f);
                    for (int64_t v = 0; v < BLOCK; v += LANES) {
                        vector8 values, gradient;
                        LOAD(values, p + v);
                        LOAD(gradient, dp + v);
                        gradient = SCORE_GRADIENT(values, gradient, delta[q - c0], w->scale);
                        STORE(dp + v, gradient);
                    }
                }
            }
            /* dv's Σ_queries p·dout and dk's Σ_queries (scale·ds)·q in increasing query order,
             * resumed chunk after chunk */
            naive_product_left_in_place(t.sums, s.head_dim, lanes_of(t.first),
                                        query_rows(w, w->dout, b, c0, h), keys, s.head_dim, count,
                                        true, t.product);
            naive_product_left_in_place(t.sums_second, s.head_dim, lanes_of(t.second),
                                        query_rows(w, w->q, b, c0, h), keys, s.head_dim, count,
                                        true, t.product);
        }
        /* each head's sums added once */
        add_sums(w->dv + key_at(w, b, k0, kv), s.kv_heads * s.head_dim, t.sums, keys, s.head_dim);
        add_sums(w->dk + key_at(w, b, k0, kv), s.kv_heads * s.head_dim, t.sums_second, keys,
                 s.head_dim);
    }
}

/* Which outputs a call computes. */
typedef enum naive_passes {
    NAIVE_FORWARD,          /* out and lse of the computed query blocks */
    NAIVE_BACKWARD,         /* dq of every query, then dk and dv of every key */
    NAIVE_BACKWARD_QUERIES, /* a window's queries: their δ and dq */
    NAIVE_BACKWARD_KEYS,    /* a window's keys: their dk and dv */
} naive_passes;

/* Sets up work for the window (whole: the whole sequence) and runs the passes. */
static cpparity_status naive_run(attention_work *work, naive_attention_window window,
                                 naive_passes passes, cpparity_error *error) {
    const naive_attention_shape s = work->s;
    if (s.batch * s.seq_len == 0) {
        return CPPARITY_OK;
    }
    const bool keys_side = passes == NAIVE_BACKWARD_KEYS;
    const bool edges = window.first >= 0 && window.first <= window.end && window.end <= s.seq_len &&
                       window.first % BLOCK == 0 &&
                       (window.end % BLOCK == 0 || window.end == s.seq_len);
    if (!edges || window.query_first < 0 || window.query_first > window.query_end ||
        window.query_end > s.seq_len || window.key_first < 0 || window.key_first > window.key_end ||
        window.key_end > s.seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "naive attention window: tokens [%lld, %lld), queries [%lld, "
                                  "%lld), keys [%lld, %lld) of %lld: not ranges of the sequence, "
                                  "or the tokens not on %d-token edges",
                                  (long long)window.first, (long long)window.end,
                                  (long long)window.query_first, (long long)window.query_end,
                                  (long long)window.key_first, (long long)window.key_end,
                                  (long long)s.seq_len, BLOCK);
    }
    work->query_first = window.query_first;
    work->query_rows = window.query_end - window.query_first;
    work->key_first = window.key_first;
    work->key_rows = window.key_end - window.key_first;
    work->first_block = window.first / BLOCK;
    work->end_block = (window.end + BLOCK - 1) / BLOCK;
    if (work->batches == 0) {
        work->batch_first = 0;
        work->batches = s.batch;
    }
    const bool whole = passes == NAIVE_BACKWARD;
    spans x;
    if (!spans_init(&x, work->mask, s, whole || !keys_side ? work->first_block : 0,
                    whole || !keys_side ? work->end_block : 0,
                    whole || keys_side ? work->first_block : 0,
                    whole || keys_side ? work->end_block : 0)) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the naive attention's spans)");
    }
    /* every span read lies in the tokens the tensors hold, and sizes the tables */
    work->table_width = 1;
    cpparity_status status = CPPARITY_OK;
    for (int64_t b = 0; b < s.batch && status == CPPARITY_OK; b++) {
        for (int64_t i = work->first_block; i < work->end_block && status == CPPARITY_OK; i++) {
            for (int side = 0; side < 2; side++) {
                const bool key_span = side == 0; /* of a query block: its keys */
                if ((key_span && keys_side && !whole) || (!key_span && !keys_side && !whole)) {
                    continue;
                }
                const span reach =
                    key_span ? x.keys[b * x.blocks + i] : x.queries[b * x.blocks + i];
                const int64_t first = key_span ? window.key_first : window.query_first;
                const int64_t end = key_span ? window.key_end : window.query_end;
                if (reach.begin < reach.end && (reach.begin < first || reach.end > end)) {
                    status = cpparity_error_set(
                        error, CPPARITY_ERROR_INPUT,
                        "naive attention window: the %s of tokens [%lld, %lld) reach %s [%lld, "
                        "%lld), but the tensors hold [%lld, %lld)",
                        key_span ? "queries" : "keys", (long long)(i * BLOCK),
                        (long long)minimum((i + 1) * BLOCK, s.seq_len),
                        key_span ? "keys" : "queries", (long long)reach.begin, (long long)reach.end,
                        (long long)first, (long long)end);
                    break;
                }
                work->table_width = reach.end - reach.begin > work->table_width
                                        ? reach.end - reach.begin
                                        : work->table_width;
            }
        }
    }
    work->spans = &x;
    if (passes != NAIVE_FORWARD) { /* only the forward keeps a whole row's scores */
        work->table_width = 0;
    }
    const int64_t computed = work->end_block - work->first_block, batches = work->batches;
    const size_t table = scratch_bytes(work->table_width, s.head_dim);
    const reference_parallel_work forward = {
        passes == NAIVE_FORWARD ? batches * s.heads * computed : 0, table, forward_item, work};
    const reference_parallel_work queries = {
        passes == NAIVE_BACKWARD || passes == NAIVE_BACKWARD_QUERIES ? batches * s.heads * computed
                                                                     : 0,
        table, query_gradient_item, work};
    const reference_parallel_work keys = {passes == NAIVE_BACKWARD || passes == NAIVE_BACKWARD_KEYS
                                              ? batches * s.kv_heads * computed
                                              : 0,
                                          table, key_gradient_item, work};
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&forward, "the naive attention", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&queries, "the naive attention's backward", error);
    }
    if (status == CPPARITY_OK) {
        status = reference_parallel_run(&keys, "the naive attention's backward", error);
    }
    spans_free(&x);
    return status;
}

static naive_attention_window whole_window(naive_attention_shape s) {
    return (naive_attention_window){0, s.seq_len, 0, s.seq_len, 0, s.seq_len};
}

/* The work of a forward (out and lse). */
static attention_work forward_work(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale) {
    const attention_work work = {
        .s = s, .mask = mask, .scale = scale, .q = q, .k = k, .v = v, .out = out, .lse = lse};
    return work;
}

/* The work of a backward (dq, dk and dv from the forward's out and lse; NULL for those a pass
 * does not compute or read). */
static attention_work backward_work(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale) {
    const attention_work work = {.s = s,
                                 .mask = mask,
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
    return work;
}

bool naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale) {
    attention_work work = backward_work(dq, dk, dv, dout, q, k, v, out, lse, mask, s, scale);
    cpparity_error error;
    return naive_run(&work, whole_window(s), NAIVE_BACKWARD, &error) == CPPARITY_OK;
}

cpparity_status naive_float_attention_forward_window(float *out, float *lse, const float *q,
                                                     const float *k, const float *v,
                                                     const reference_mask *mask,
                                                     naive_attention_shape s, float scale,
                                                     naive_attention_window window,
                                                     cpparity_error *error) {
    attention_work work = forward_work(out, lse, q, k, v, mask, s, scale);
    return naive_run(&work, window, NAIVE_FORWARD, error);
}

bool naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale) {
    cpparity_error error;
    return naive_float_attention_forward_window(out, lse, q, k, v, mask, s, scale, whole_window(s),
                                                &error) == CPPARITY_OK;
}

cpparity_status naive_float_attention_backward_queries_window(
    float *dq, float *delta, const float *dout, const float *q, const float *k, const float *v,
    const float *out, const float *lse, const reference_mask *mask, naive_attention_shape s,
    float scale, naive_attention_window window, cpparity_error *error) {
    attention_work work = backward_work(dq, NULL, NULL, dout, q, k, v, out, lse, mask, s, scale);
    work.delta_out = delta;
    return naive_run(&work, window, NAIVE_BACKWARD_QUERIES, error);
}

cpparity_status naive_float_attention_backward_keys_window(
    float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
    const float *lse, const float *delta, const reference_mask *mask, naive_attention_shape s,
    float scale, naive_attention_window window, cpparity_error *error) {
    attention_work work = backward_work(NULL, dk, dv, dout, q, k, v, NULL, lse, mask, s, scale);
    work.delta_in = delta;
    return naive_run(&work, window, NAIVE_BACKWARD_KEYS, error);
}

/* The passes over the flattened rows [first_row, end_row) of whole-shaped tensors: one window per
 * batch row they touch, that row alone computed. */
static cpparity_status naive_run_rows(attention_work *work, int64_t first_row, int64_t end_row,
                                      naive_passes passes, cpparity_error *error) {
    const naive_attention_shape s = work->s;
    if (first_row < 0 || first_row > end_row || end_row > s.batch * s.seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "naive attention rows [%lld, %lld) of %lld", (long long)first_row,
                                  (long long)end_row, (long long)(s.batch * s.seq_len));
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t b = first_row / (s.seq_len > 0 ? s.seq_len : 1);
         status == CPPARITY_OK && b < s.batch && b * s.seq_len < end_row; b++) {
        const int64_t first = first_row > b * s.seq_len ? first_row - b * s.seq_len : 0;
        const int64_t end = minimum(end_row - b * s.seq_len, s.seq_len);
        if (first >= end) {
            continue;
        }
        work->batch_first = b;
        work->batches = 1;
        const naive_attention_window window = {0, s.seq_len, 0, s.seq_len, first, end};
        status = naive_run(work, window, passes, error);
    }
    return status;
}

cpparity_status naive_float_attention_forward_rows(float *out, float *lse, const float *q,
                                                   const float *k, const float *v,
                                                   const reference_mask *mask,
                                                   naive_attention_shape s, float scale,
                                                   int64_t first_row, int64_t end_row,
                                                   cpparity_error *error) {
    attention_work work = forward_work(out, lse, q, k, v, mask, s, scale);
    return naive_run_rows(&work, first_row, end_row, NAIVE_FORWARD, error);
}

cpparity_status
naive_float_attention_backward_rows(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale, int64_t first_row,
                                    int64_t end_row, cpparity_error *error) {
    attention_work work = backward_work(dq, dk, dv, dout, q, k, v, out, lse, mask, s, scale);
    return naive_run_rows(&work, first_row, end_row, NAIVE_BACKWARD, error);
}
