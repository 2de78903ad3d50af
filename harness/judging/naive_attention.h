/*
 * naive_attention.h — attention computed the plainest way in float32, row by row over the allowed
 * keys of the reference's mask: the naive same-dtype baseline's attention (docs/tolerances.md),
 * used by the naive model and by attention-level cases. Shares nothing with the kernels under
 * test.
 *
 * Layouts (row-major): q, out, dq, dout (B, S, H, Dh); k, v, dk, dv (B, S, Hkv, Dh); lse (B, H, S).
 *
 * The order of every sum (fixed, whatever the thread count): a score is Σ_d q[d]·k[d] in
 * increasing d; the softmax takes the row's maximum, then exp(score − maximum) and their sum in
 * increasing key order; out[d] = Σ_keys p·v[d] in increasing key order. Backward recomputes
 * p = exp(scale·score − lse) and, with dp = Σ_d dout[d]·v[d] and δ = Σ_d dout[d]·out[d] (increasing
 * d), adds dq[d] over keys in increasing order, and dk[d], dv[d] over query positions in
 * increasing order, then the query heads of the key's group in increasing order. No tiling of
 * the softmax, no online softmax: the reference's algorithm in float32. Work is spread over the
 * reference's threads (forward: query rows; backward: one batch row and key/value head per item),
 * the scores of a row computed sixteen keys side by side (each key its own sum).
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "reference/mask.h"

/* The dimensions attention runs on. */
typedef struct naive_attention_shape {
    int64_t batch, seq_len, heads, kv_heads, head_dim;
} naive_attention_shape;

/* out and lse from q, k, v; a query with no allowed key gets out = 0, lse = −∞. false when out
 * of memory (its scratch: a transposed copy of k, and per thread a row's scores and keys). */
bool naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale);

/* dq, dk, dv += the gradients of Σ dout ⊙ out, probabilities recomputed from lse. false when out
 * of memory (transposed copies of k and v, and per thread a row's scores and keys). */
bool naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale);

#endif
