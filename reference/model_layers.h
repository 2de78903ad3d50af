/*
 * model_layers.h — the float64 reference model's layers, one function per layer and direction
 * (docs/model.md). Shapes are given as (rows, features) with rows = B·S tokens.
 *
 * Every *_backward ADDS into the gradients of its inputs and weights (d-prefixed arguments);
 * the caller zeroes them first. Nothing here prints; only the LM head allocates (one row block's
 * or one vocabulary chunk's logits) and can fail, when that memory is not there.
 */
#ifndef CPPARITY_REFERENCE_MODEL_LAYERS_H
#define CPPARITY_REFERENCE_MODEL_LAYERS_H

#include <stdint.h>

#include "common/error.h"
#include "common/row_blocks.h"
#include "reference/team.h"

/* The tokens a layer works on: row blocks [first, end) of a batch's blocks (common/row_blocks.h),
 * held as consecutive rows of the tensors from the first block's first token on (all of a
 * batch's blocks in one process; a rank's own when the reference is spread over ranks). Every
 * product over tokens is cut at these blocks, so its arithmetic does not depend on how many
 * threads or ranks compute it. */
typedef struct reference_rows {
    row_blocks blocks;          /* the batch's blocks */
    int64_t first;              /* the first block held */
    int64_t end;                /* one past the last */
    const reference_team *team; /* the ranks holding the other blocks (team.h), in block order;
                                   NULL when these are all of them */
} reference_rows;

/* Every block of a batch of B × S tokens. */
reference_rows reference_rows_all(int64_t batch, int64_t seq_len);

/* The rows (tokens) rows holds. */
int64_t reference_rows_count(const reference_rows *rows);

/* out (N, D) = embedding rows of ids (N); weight (V, D). */
void embedding_forward(double *out, const int64_t *ids, const double *weight, int64_t rows,
                       int64_t dim);
void embedding_backward(double *dweight, const double *dout, const int64_t *ids, int64_t rows,
                        int64_t dim);

/* out (N, O) = in (N, I) · weightᵀ, weight (O, I) as torch.nn.Linear stores it; N the rows of
 * rows. The weight gradient adds one row block after the other, in the blocks' order (linear.c),
 * and over rows->team's ranks in rank order: its last rank ends with the whole sum. */
void linear_forward(double *out, const double *in, const double *weight, const reference_rows *rows,
                    int64_t in_features, int64_t out_features);
/* CPPARITY_ERROR_RUNTIME when the ranks of rows->team cannot exchange the partial sums. */
cpparity_status linear_backward(double *din, double *dweight, const double *dout, const double *in,
                                const double *weight, const reference_rows *rows,
                                int64_t in_features, int64_t out_features, cpparity_error *error);

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

/* The LM head and the loss, the logits never held whole (lm_head.c): N the rows of rows, normed
 * (N, D) the final norm's output, weight (V, D) the head (the embedding when tied), labels (N).
 *
 * Vocabulary ids per chunk of the backward: the width of every sum over the vocabulary that a
 * gradient takes (a constant, so the arithmetic never depends on the sizes or the ranks). */
#define LM_HEAD_CHUNK 512

/* out (rows, V) = normed (rows, D) · weightᵀ: the logits of one row block, bit for bit those the
 * forward computed for it (rows <= CPPARITY_ROW_BLOCK, normed at the block's first row). */
void lm_head_logits_rows(double *out, const double *normed, const double *weight, int64_t rows,
                         int64_t hidden, int64_t vocab);

/* Per token n of rows: lse[n] = log Σ_v exp(logits[n][v]) and term[n] = lse[n] −
 * logits[n][labels[n]] (0 where labels[n] is −100), one row block's logits at a time.
 * CPPARITY_ERROR_RUNTIME when out of memory (a row block's logits). */
cpparity_status lm_head_forward(double *lse, double *term, const double *normed,
                                const double *weight, const int64_t *labels,
                                const reference_rows *rows, int64_t hidden, int64_t vocab,
                                cpparity_error *error);

/* dnormed (N, D) += dlogits · weight and dweight (V, D) += dlogitsᵀ · normed with dlogits =
 * (softmax(logits) − onehot(label)) · scale on rows with a label (0 elsewhere), recomputed from
 * normed and the forward's lse one vocabulary chunk at a time. CPPARITY_ERROR_RUNTIME when out
 * of memory (a chunk's logits, N × LM_HEAD_CHUNK). */
/* (Spread over rows->team, dweight is summed over its ranks in rank order, vocabulary chunks
 * pipelined: its last rank ends with the whole sum.) */
cpparity_status lm_head_backward(double *dnormed, double *dweight, const double *normed,
                                 const double *weight, const double *lse, const int64_t *labels,
                                 const reference_rows *rows, int64_t hidden, int64_t vocab,
                                 double scale, cpparity_error *error);

#endif
