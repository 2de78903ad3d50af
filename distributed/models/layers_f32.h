/*
 * layers_f32.h — the float32 layers of the implementation under test, on a rank's local tokens
 * (rows = B·L). Written for this side only: it shares model.md's definition with the reference,
 * not its code. Linear layers use OpenBLAS's cblas_sgemm.
 *
 * Backward functions ADD into the gradients of weights (d-prefixed weight arguments) and
 * OVERWRITE the gradients of their inputs unless documented otherwise.
 */
#ifndef CPPARITY_DISTRIBUTED_LAYERS_F32_H
#define CPPARITY_DISTRIBUTED_LAYERS_F32_H

#include <stdint.h>

/* out [N, O] = in [N, I] · weightᵀ, weight [O, I]. */
void f32_linear_forward(float *out, const float *in, const float *weight, int64_t rows,
                        int64_t in_features, int64_t out_features);
/* din [N, I] (+= when accumulate, else =) dout · weight;  dweight [O, I] += doutᵀ · in. */
void f32_linear_backward(float *din, float *dweight, const float *dout, const float *in,
                         const float *weight, int64_t rows, int64_t in_features,
                         int64_t out_features, int accumulate);

/* out = weight ⊙ in · rstd, rstd [N] = 1/sqrt(mean(in²) + eps). */
void f32_rmsnorm_forward(float *out, float *rstd, const float *in, const float *weight,
                         int64_t rows, int64_t dim, double eps);
/* din += (input gradient); dweight += Σ dout ⊙ in · rstd. */
void f32_rmsnorm_backward(float *din, float *dweight, const float *dout, const float *in,
                          const float *weight, const float *rstd, int64_t rows, int64_t dim);

/* Rotary embedding in place on x [N, heads, Dh] with position_ids [N]; direction −1 applies the
 * inverse rotation (the backward). */
void f32_rope_apply(float *x, const int64_t *position_ids, int64_t rows, int64_t heads,
                    int64_t head_dim, double theta, int direction);

/* out = silu(gate) ⊙ up;  backward writes dgate and dup. */
void f32_swiglu_forward(float *out, const float *gate, const float *up, int64_t count);
void f32_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, int64_t count);

/* out [N, D] = weight rows of ids; backward: dweight rows += dout. */
void f32_embedding_forward(float *out, const int64_t *ids, const float *weight, int64_t rows,
                           int64_t dim);
void f32_embedding_backward(float *dweight, const float *dout, const int64_t *ids, int64_t rows,
                            int64_t dim);

/* Σ over labeled rows of the token cross-entropy; *labeled = their count. */
float f32_cross_entropy_sum(const float *logits, const int64_t *labels, int64_t rows, int64_t vocab,
                            int64_t *labeled);
/* dlogits = (softmax − onehot) · scale on labeled rows, 0 elsewhere. */
void f32_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *labels,
                                int64_t rows, int64_t vocab, float scale);

#endif
