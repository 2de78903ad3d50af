/*
 * model_layers.h — the float64 reference model's layers, one function per layer and direction
 * (docs/model.md). Shapes are given as (rows, features) with rows = B·S tokens.
 *
 * Every *_backward ADDS into the gradients of its inputs and weights (d-prefixed arguments);
 * the caller zeroes them first. Nothing here allocates, fails or prints.
 */
#ifndef CPPARITY_REFERENCE_MODEL_LAYERS_H
#define CPPARITY_REFERENCE_MODEL_LAYERS_H

#include <stdint.h>

/* out (N, D) = embedding rows of ids (N); weight (V, D). */
void embedding_forward(double *out, const int64_t *ids, const double *weight, int64_t rows,
                       int64_t dim);
void embedding_backward(double *dweight, const double *dout, const int64_t *ids, int64_t rows,
                        int64_t dim);

/* out (N, O) = in (N, I) · weightᵀ, weight (O, I) as torch.nn.Linear stores it. */
void linear_forward(double *out, const double *in, const double *weight, int64_t rows,
                    int64_t in_features, int64_t out_features);
void linear_backward(double *din, double *dweight, const double *dout, const double *in,
                     const double *weight, int64_t rows, int64_t in_features, int64_t out_features);

/* out (N, D) = weight ⊙ in / sqrt(mean(in²) + eps); rstd (N) saves 1/sqrt(mean(in²) + eps). */
void rmsnorm_forward(double *out, double *rstd, const double *in, const double *weight,
                     int64_t rows, int64_t dim, double eps);
void rmsnorm_backward(double *din, double *dweight, const double *dout, const double *in,
                      const double *weight, const double *rstd, int64_t rows, int64_t dim);

/* cos, sin (N, Dh/2): angle = position · theta^(−2i/Dh) for i < Dh/2. */
void rope_tables(double *cos_table, double *sin_table, const int64_t *position_ids, int64_t rows,
                 int64_t head_dim, double theta);
/* x (N, heads, Dh) rotated in place: [a, b] → [a·cos − b·sin, b·cos + a·sin] ("half" layout). */
void rope_forward(double *x, const double *cos_table, const double *sin_table, int64_t rows,
                  int64_t heads, int64_t head_dim);
/* dx (N, heads, Dh) in place: the transpose of the rotation (rotation by −angle). */
void rope_backward(double *dx, const double *cos_table, const double *sin_table, int64_t rows,
                   int64_t heads, int64_t head_dim);

/* out (N, F) = silu(gate) ⊙ up. */
void swiglu_forward(double *out, const double *gate, const double *up, int64_t count);
void swiglu_backward(double *dgate, double *dup, const double *dout, const double *gate,
                     const double *up, int64_t count);

/* out (N, D) = a + b (residual connection). */
void residual_forward(double *out, const double *a, const double *b, int64_t count);

/* Sum over rows with labels[n] != −100 of logsumexp(logits[n]) − logits[n][labels[n]];
 * *valid receives the number of such rows. logits (N, V). */
double cross_entropy_sum(const double *logits, const int64_t *labels, int64_t rows, int64_t vocab,
                         int64_t *valid);
/* dlogits (N, V) += (softmax(logits) − onehot(label)) · scale on rows with a label. */
void cross_entropy_backward(double *dlogits, const double *logits, const int64_t *labels,
                            int64_t rows, int64_t vocab, double scale);

#endif
