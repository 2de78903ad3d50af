/*
 * naive_attention.h — attention computed the plainest way in float32, row by row over the allowed
 * keys of the reference's mask: the naive same-dtype baseline's attention (docs/tolerances.md),
 * used by the naive model and by attention-level cases. Shares nothing with the kernels under
 * test.
 *
 * Layouts (row-major): q, out, dq, dout (B, S, H, Dh); k, v, dk, dv (B, S, Hkv, Dh); lse (B, H, S).
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_ATTENTION_H

#include <stdint.h>

#include "reference/mask.h"

/* The dimensions attention runs on. */
typedef struct naive_attention_shape {
    int64_t batch, seq_len, heads, kv_heads, head_dim;
} naive_attention_shape;

/* out and lse from q, k, v; a query with no allowed key gets out = 0, lse = −∞. keys (S) and
 * scores (S) are scratch. */
void naive_float_attention_forward(float *out, float *lse, const float *q, const float *k,
                                   const float *v, const reference_mask *mask,
                                   naive_attention_shape s, float scale, int64_t *keys,
                                   float *scores);

/* dq, dk, dv += the gradients of Σ dout ⊙ out, probabilities recomputed from lse. keys (S) is
 * scratch. */
void naive_float_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const reference_mask *mask,
                                    naive_attention_shape s, float scale, int64_t *keys);

#endif
