/* attention_blocks.c — an attention-level item's block calls (see attention_blocks.h). */
#include "harness/running/attention_blocks.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_call.h"

/* The chunks of each block, in call order (attention_blocks.h); −1 ends a list. */
static const int query_chunks[ATTENTION_QUERY_BLOCKS][ATTENTION_BLOCK_CHUNKS] = {{3, 0, -1},
                                                                                 {1, 2, -1}};
static const int key_chunks[ATTENTION_KEY_BLOCKS][ATTENTION_BLOCK_CHUNKS] = {
    {0, 2, -1}, {1, -1}, {3, -1}};

static int64_t block_tokens(int64_t seq_len, const int *chunks, int64_t *tokens) {
    int64_t count = 0;
    for (int i = 0; i < ATTENTION_BLOCK_CHUNKS && chunks[i] >= 0; i++) {
        const int64_t begin = chunks[i] * seq_len / ATTENTION_BLOCK_CHUNKS,
                      end = (chunks[i] + 1) * seq_len / ATTENTION_BLOCK_CHUNKS;
        for (int64_t t = begin; t < end; t++) {
            tokens[count++] = t;
        }
    }
    return count;
}

int64_t attention_query_block(int64_t seq_len, int block, int64_t *tokens) {
    return block_tokens(seq_len, query_chunks[block], tokens);
}

int64_t attention_key_block(int64_t seq_len, int block, int64_t *tokens) {
    return block_tokens(seq_len, key_chunks[block], tokens);
}

/* Rows `tokens` (count of them) of [B, S, width] into [B, count, width]. */
static void gather(float *to, const float *from, int64_t batch, int64_t S, int64_t width,
                   const int64_t *tokens, int64_t count) {
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < count; i++) {
            memcpy(to + (b * count + i) * width, from + (b * S + tokens[i]) * width,
                   (size_t)width * sizeof(float));
        }
    }
}

/* Adds [B, count, width] into rows `tokens` of the float64 [B, S, width]. */
static void scatter_add(double *to, const float *from, int64_t batch, int64_t S, int64_t width,
                        const int64_t *tokens, int64_t count) {
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < count; i++) {
            double *row = to + (b * S + tokens[i]) * width;
            const float *add = from + (b * count + i) * width;
            for (int64_t e = 0; e < width; e++) {
                row[e] += add[e];
            }
        }
    }
}

/* Scratch of one item's block calls, freed together. */
typedef struct block_scratch {
    int64_t *query_tokens, *key_tokens;     /* [S] */
    float *q, *dout, *given_out, *out, *dq; /* [B, S, H, Dh] at most */
    float *given_lse, *lse;                 /* [B, H, S] at most */
    float *k, *v, *dk, *dv;                 /* [B, S, Hkv, Dh] at most */
    double *merged_out, *merged_lse;        /* [B, S, H, Dh], [B, H, S] */
    double *sum_dq, *sum_dk, *sum_dv;       /* whole shapes */
} block_scratch;

static void scratch_free(block_scratch *s) {
    void *all[] = {
        s->query_tokens, s->key_tokens, s->q,          s->dout,   s->given_out, s->out,
        s->dq,           s->given_lse,  s->lse,        s->k,      s->v,         s->dk,
        s->dv,           s->merged_out, s->merged_lse, s->sum_dq, s->sum_dk,    s->sum_dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
}

static bool scratch_allocate(block_scratch *s, int64_t S, int64_t query, int64_t key,
                             int64_t rows) {
    memset(s, 0, sizeof *s);
#define TAKE(field, count) (s->field = calloc((size_t)(count) + 1, sizeof *s->field)) != NULL
    return TAKE(query_tokens, S) && TAKE(key_tokens, S) && TAKE(q, query) && TAKE(dout, query) &&
           TAKE(given_out, query) && TAKE(out, query) && TAKE(dq, query) && TAKE(given_lse, rows) &&
           TAKE(lse, rows) && TAKE(k, key) && TAKE(v, key) && TAKE(dk, key) && TAKE(dv, key) &&
           TAKE(merged_out, query) && TAKE(merged_lse, rows) && TAKE(sum_dq, query) &&
           TAKE(sum_dk, key) && TAKE(sum_dv, key);
#undef TAKE
}

/* Merges one block's out [B, nq, H, Dh] and lse [B, H, nq] into the running float64 merge, and
 * counts the rows with lse −∞ whose out is not 0. */
static void merge_block(block_scratch *s, const cpparity_attention_dims *d, int64_t nq,
                        attention_block_outputs *outputs) {
    const int64_t B = d->batch, S = d->seq_len, H = d->heads, Dh = d->head_dim;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            for (int64_t i = 0; i < nq; i++) {
                const int64_t t = s->query_tokens[i];
                const float block_lse = s->lse[(b * H + h) * nq + i];
                const float *block_out = s->out + ((b * nq + i) * H + h) * Dh;
                double *lse = &s->merged_lse[(b * H + h) * S + t];
                double *out = s->merged_out + ((b * S + t) * H + h) * Dh;
                if (isinf(block_lse) && block_lse < 0) {
                    int64_t nonzero = -1; /* the first element other than 0 */
                    for (int64_t e = Dh - 1; e >= 0; e--) {
                        nonzero = block_out[e] != 0.0f ? e : nonzero;
                    }
                    if (nonzero >= 0 && outputs->empty_wrong++ == 0) {
                        const int64_t first[4] = {b, t, h, nonzero};
                        memcpy(outputs->first_empty_wrong, first, sizeof first);
                    }
                    continue;
                }
                /* (a row with no block merged yet, lse −∞ and out 0, takes the block's as is) */
                const double high = *lse > block_lse ? *lse : (double)block_lse;
                const double merged = high + log(exp(*lse - high) + exp((double)block_lse - high));
                const double keep = exp(*lse - merged), add = exp((double)block_lse - merged);
                for (int64_t e = 0; e < Dh; e++) {
                    out[e] = out[e] * keep + block_out[e] * add;
                }
                *lse = merged;
            }
        }
    }
}

int attention_blocks_call(const cpparity_attention_kernel *kernel,
                          const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale,
                          const attention_block_inputs *in, attention_block_outputs *outputs,
                          char *message, size_t size) {
    const int64_t B = dims->batch, S = dims->seq_len, H = dims->heads, Hkv = dims->kv_heads,
                  Dh = dims->head_dim;
    const int64_t query = B * S * H * Dh, key = B * S * Hkv * Dh, rows = B * H * S;
    outputs->empty_wrong = 0;
    for (int i = 0; i < 4; i++) {
        outputs->first_empty_wrong[i] = -1;
    }
    block_scratch s;
    if (!scratch_allocate(&s, S, query, key, rows)) {
        scratch_free(&s);
        snprintf(message, size, "out of memory for the block calls");
        return 1;
    }
    for (int64_t r = 0; r < rows; r++) {
        s.merged_lse[r] = -INFINITY;
    }
    int failed = 0;
    char why[512] = "";
    for (int backward = 0; backward < 2 && !failed; backward++) {
        for (int qb = 0; qb < ATTENTION_QUERY_BLOCKS && !failed; qb++) {
            const int64_t nq = attention_query_block(S, qb, s.query_tokens);
            for (int kb = 0; kb < ATTENTION_KEY_BLOCKS && !failed && nq > 0; kb++) {
                const int64_t nk = attention_key_block(S, kb, s.key_tokens);
                if (nk == 0) {
                    continue;
                }
                const cpparity_attention_block block = {nq, nk, s.query_tokens, s.key_tokens};
                gather(s.q, in->q, B, S, H * Dh, s.query_tokens, nq);
                gather(s.k, in->k, B, S, Hkv * Dh, s.key_tokens, nk);
                gather(s.v, in->v, B, S, Hkv * Dh, s.key_tokens, nk);
                if (!backward) {
                    failed = kernel_call_forward_block(kernel, s.out, s.lse, s.q, s.k, s.v, mask,
                                                       dims, &block, scale, why, sizeof why);
                    if (!failed) {
                        merge_block(&s, dims, nq, outputs);
                    }
                } else {
                    gather(s.dout, in->dout, B, S, H * Dh, s.query_tokens, nq);
                    gather(s.given_out, in->given_out, B, S, H * Dh, s.query_tokens, nq);
                    for (int64_t bh = 0; bh < B * H; bh++) {
                        for (int64_t i = 0; i < nq; i++) {
                            s.given_lse[bh * nq + i] = in->given_lse[bh * S + s.query_tokens[i]];
                        }
                    }
                    failed = kernel_call_backward_block(kernel, s.dq, s.dk, s.dv, s.dout, s.q, s.k,
                                                        s.v, s.given_out, s.given_lse, mask, dims,
                                                        &block, scale, why, sizeof why);
                    if (!failed) {
                        scatter_add(s.sum_dq, s.dq, B, S, H * Dh, s.query_tokens, nq);
                        scatter_add(s.sum_dk, s.dk, B, S, Hkv * Dh, s.key_tokens, nk);
                        scatter_add(s.sum_dv, s.dv, B, S, Hkv * Dh, s.key_tokens, nk);
                    }
                }
                if (failed) {
                    snprintf(message, size,
                             "%s of query block %d (%lld rows) against key block %d (%lld rows): "
                             "%.400s",
                             backward ? "backward_block" : "forward_block", qb, (long long)nq, kb,
                             (long long)nk, why);
                }
            }
        }
    }
    if (!failed) {
        for (int64_t i = 0; i < query; i++) {
            outputs->out[i] = (float)s.merged_out[i];
            outputs->dq[i] = (float)s.sum_dq[i];
        }
        for (int64_t r = 0; r < rows; r++) {
            outputs->lse[r] = (float)s.merged_lse[r];
        }
        for (int64_t i = 0; i < key; i++) {
            outputs->dk[i] = (float)s.sum_dk[i];
            outputs->dv[i] = (float)s.sum_dv[i];
        }
    }
    scratch_free(&s);
    return failed;
}
