/*
 * naive_attention.h — attention computed the plainest way in float32, whole rows over the allowed
 * keys of the reference's mask: the naive same-dtype baseline's attention (docs/tolerances.md),
 * used by the naive model and by attention-level cases. Shares nothing with the kernels under
 * test.
 *
 * Layouts (row-major): q, out, dq, dout (B, S, H, Dh); k, v, dk, dv (B, S, Hkv, Dh); lse (B, H, S).
 *
 * The order of every sum (fixed, whatever the thread count), each a float32 accumulator starting
 * at 0 (naive_products.h: fused multiply-adds where the CPU has them):
 *   score = Σ_d q[d]·k[d] in increasing d, then scaled; the plain softmax of a whole row takes its
 *   maximum over the allowed keys, exp(score − maximum) and their sum in increasing key order,
 *   p = exp / sum; out[d] = Σ_keys p·v[d] in increasing key order (a masked key adds p = 0).
 *   Backward recomputes p = exp(scale·score − lse) and, with dp = Σ_d dout[d]·v[d] and
 *   δ = Σ_d dout[d]·out[d] (increasing d), ds' = scale·(p·(dp − δ)); dq[d] += Σ_keys ds'·k[d] in
 *   increasing key order; for each query head of a key's group in increasing order, dv[d] +=
 *   Σ_queries p·dout[d] and dk[d] += Σ_queries ds'·q[d] in increasing query order. exp is
 *   naive_exponential.h's; a p that is 0 (a masked pair, or an exponential that underflows)
 *   gives ds' = 0.
 * No tiling of the softmax, no online softmax: the reference's algorithm in float32. Where the
 * work goes (it does not change a sum): forward and dq by blocks of 64 query rows of one head,
 * dk and dv by blocks of 64 keys of one key/value head, one block per work item on the
 * reference's threads. A block's scores are a table with one token of the other side per row and
 * the block's 64 tokens across it, products of naive_products.h against the block transposed
 * once; so each row of the softmax is one vector lane, and the products that follow read the
 * table where it lies. The forward keeps a block's whole table (64 × the keys its mask blocks
 * reach); the backward takes the other side 256 tokens at a time, each sum over them resumed
 * (naive_product_left_in_place), so memory per thread is one 64 × S float table and a few
 * small ones (naive_attention_memory).
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "reference/mask.h"

/* The dimensions attention runs on. */
typedef struct naive_attention_shape {
    int64_t batch, seq_len, heads, kv_heads, head_dim;
} naive_attention_shape;

/* out and lse from q, k, v; a query with no allowed key gets out = 0, lse = −∞. false when out
 * of memory (per thread a 64 × S table: naive_attention_memory). */
bool naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale);

/* dq, dk, dv += the gradients of Σ dout ⊙ out, probabilities recomputed from lse. false when out
 * of memory (as the forward). */
bool naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale);

/* Long context: the same sums one block of tokens at a time (reference/attention.h's windows, the
 * same layouts): query-shaped tensors hold the tokens [query_first, query_end) of every batch
 * row, key-shaped ones [key_first, key_end), and the outputs of the tokens [first, end) (on
 * 64-token edges, or S) are computed; lse and δ are (B, H, S) whole. Each element is the same
 * bits as the whole call's. CPPARITY_ERROR_INPUT when the tensors lack a token the computed
 * tokens' mask blocks reach; CPPARITY_ERROR_RUNTIME when out of memory. */
typedef struct naive_attention_window {
    int64_t query_first, query_end; /* the tokens q, dout, out, dq hold */
    int64_t key_first, key_end;     /* the tokens k, v, dk, dv hold */
    int64_t first, end;             /* the tokens whose outputs are computed */
} naive_attention_window;

/* out and lse of the queries [first, end). */
cpparity_status naive_float_attention_forward_window(float *out, float *lse, const float *q,
                                                     const float *k, const float *v,
                                                     const reference_mask *mask,
                                                     naive_attention_shape s, float scale,
                                                     naive_attention_window window,
                                                     cpparity_error *error);

/* The queries [first, end): their δ = Σ dout ⊙ out into delta (B, H, S) and dq += their
 * gradient, from the forward's out and lse. */
cpparity_status naive_float_attention_backward_queries_window(
    float *dq, float *delta, const float *dout, const float *q, const float *k, const float *v,
    const float *out, const float *lse, const reference_mask *mask, naive_attention_shape s,
    float scale, naive_attention_window window, cpparity_error *error);

/* The keys [first, end): dk, dv += their gradients, from the lse and δ of the queries. */
cpparity_status naive_float_attention_backward_keys_window(
    float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
    const float *lse, const float *delta, const reference_mask *mask, naive_attention_shape s,
    float scale, naive_attention_window window, cpparity_error *error);

/* Spread over ranks (naive_model.h): the whole call's sums for the tokens of the flattened rows
 * [first_row, end_row) of a (B, S) batch, on 64-token edges within each batch row (row blocks are:
 * common/row_blocks.h). The tensors are whole-shaped; only the rows' outputs are written: the
 * forward's out and lse of those queries; the backward's dq of those queries and dk, dv of those
 * keys, reading every query (q, dout, out, lse) that attends them. Each element is the same bits
 * as the whole call's. CPPARITY_ERROR_INPUT for rows off those edges, CPPARITY_ERROR_RUNTIME when
 * out of memory. */
cpparity_status naive_float_attention_forward_rows(float *out, float *lse, const float *q,
                                                   const float *k, const float *v,
                                                   const reference_mask *mask,
                                                   naive_attention_shape s, float scale,
                                                   int64_t first_row, int64_t end_row,
                                                   cpparity_error *error);
cpparity_status
naive_float_attention_backward_rows(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale, int64_t first_row,
                                    int64_t end_row, cpparity_error *error);

/* What either call allocates for a batch of seq_len on `threads` threads (the memory estimate's
 * term): the spans and each thread's scratch; −1 when that does not fit int64. */
int64_t naive_attention_memory(int64_t batch, int64_t seq_len, int64_t head_dim, int64_t threads);

#endif
