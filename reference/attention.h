/*
 * attention.h — float64 reference attention, forward and backward, over a reference_mask.
 *
 * Layouts (row-major):  q, out, dq, dout  (B, S, H, Dh)
 *                       k, v, dk, dv      (B, S, Hkv, Dh)
 *                       lse               (B, H, S)
 * Query head j reads key/value head j / (H / Hkv) (grouped-query attention; Hkv == H is
 * multi-head, Hkv == 1 multi-query). scores = scale · q·k over allowed keys only; a query row with
 * no allowed key gets out = 0 and lse = −∞. Masked pairs are skipped, never multiplied by zero,
 * so a masked key contributes exactly nothing, even when its values are not finite.
 *
 * Cost follows the allowed pairs: blocks of queries × keys that the mask classifies as empty are
 * never touched. Scratch is O(S·Dh); nothing of size S×S is allocated.
 *
 * Backward ADDS into dq, dk and dv (as the model's backward accumulates); zero them first.
 * All pointers are caller-owned. Errors: CPPARITY_ERROR_INPUT for inconsistent shapes,
 * CPPARITY_ERROR_RUNTIME when out of memory; outputs are then unspecified.
 */
#ifndef CPPARITY_REFERENCE_ATTENTION_H
#define CPPARITY_REFERENCE_ATTENTION_H

#include <stdint.h>

#include "common/error.h"
#include "reference/mask.h"

typedef struct reference_attention_shape {
    int64_t batch;    /* B; must equal the mask's */
    int64_t seq_len;  /* S; must equal the mask's */
    int64_t heads;    /* H, a multiple of kv_heads */
    int64_t kv_heads; /* Hkv >= 1 */
    int64_t head_dim; /* Dh >= 1 */
} reference_attention_shape;

/* out (B,S,H,Dh) and lse (B,H,S) from q, k, v under mask, with scores scaled by scale. */
cpparity_status reference_attention_forward(double *out, double *lse, const double *q,
                                            const double *k, const double *v,
                                            const reference_mask *mask,
                                            reference_attention_shape shape, double scale,
                                            cpparity_error *error);

/* dq, dk, dv += the gradients of Σ dout ⊙ out, given the forward's own out and lse. */
cpparity_status reference_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                                             const double *q, const double *k, const double *v,
                                             const double *out, const double *lse,
                                             const reference_mask *mask,
                                             reference_attention_shape shape, double scale,
                                             cpparity_error *error);

/* The same, computing only the outputs of the flattened rows [first_row, end_row) of B·S (their
 * out and lse; in the backward their dq, and dk and dv of the same rows as keys): one rank's
 * row blocks when the reference is spread over ranks. Every input is whole and every output
 * tensor whole-shaped; the other rows of the outputs are left as they were. The rows must start
 * and end on the mask's tile edges (row blocks always do): else CPPARITY_ERROR_INPUT. Each
 * output element is the same bits as the whole call's. */
cpparity_status reference_attention_forward_rows(double *out, double *lse, const double *q,
                                                 const double *k, const double *v,
                                                 const reference_mask *mask,
                                                 reference_attention_shape shape, double scale,
                                                 int64_t first_row, int64_t end_row,
                                                 cpparity_error *error);
cpparity_status
reference_attention_backward_rows(double *dq, double *dk, double *dv, const double *dout,
                                  const double *q, const double *k, const double *v,
                                  const double *out, const double *lse, const reference_mask *mask,
                                  reference_attention_shape shape, double scale, int64_t first_row,
                                  int64_t end_row, cpparity_error *error);

#endif
