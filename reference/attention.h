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

/* Long context (docs/architecture.md, "Attention-level items by query blocks"): one block of
 * tokens at a time, the tensors holding only the tokens that block's allowed pairs reach. A window
 * is the same for every batch row: query-shaped tensors (q, out, dout, dq) hold the tokens
 * [query_first, query_end) of each row, [B, query_end − query_first, H, Dh]; key-shaped ones (k,
 * v, dk, dv) [key_first, key_end), [B, key_end − key_first, Hkv, Dh]; the outputs of the tokens
 * [first, end) of each row are computed (queries' out, lse, D and dq; or keys' dk and dv). first
 * and end lie on the mask's tile edges (end may be S); the tensors' windows must hold every token
 * that an allowed pair of those tokens reaches (the two functions below say which), else
 * CPPARITY_ERROR_INPUT. lse and D are (B,H,S) whole: S·H values, small. Every output element is
 * the same bits as the whole call's: the same tiles, the same order. */
typedef struct reference_attention_window {
    int64_t query_first, query_end; /* the tokens query-shaped tensors hold */
    int64_t key_first, key_end;     /* the tokens key-shaped tensors hold */
    int64_t first, end;             /* the tokens whose outputs are computed */
} reference_attention_window;

/* The tokens [*key_first, *key_end) of keys that an allowed pair of the queries [first, end) of
 * any batch row reaches, on tile edges (clamped to S); an empty range (*key_first == *key_end)
 * when none. first and end on tile edges, else CPPARITY_ERROR_INPUT. */
cpparity_status reference_attention_keys_needed(const reference_mask *mask, int64_t first,
                                                int64_t end, int64_t *key_first, int64_t *key_end,
                                                cpparity_error *error);

/* The same for the queries that an allowed pair of the keys [first, end) reaches. */
cpparity_status reference_attention_queries_needed(const reference_mask *mask, int64_t first,
                                                   int64_t end, int64_t *query_first,
                                                   int64_t *query_end, cpparity_error *error);

/* out and lse of the queries [window.first, window.end); q and out hold the window's query
 * tokens, k and v its key tokens. */
cpparity_status reference_attention_forward_window(double *out, double *lse, const double *q,
                                                   const double *k, const double *v,
                                                   const reference_mask *mask,
                                                   reference_attention_shape shape, double scale,
                                                   reference_attention_window window,
                                                   cpparity_error *error);

/* The backward of the queries [window.first, window.end): their D = Σ dout ⊙ out into delta
 * (B,H,S; the other entries left as they were) and dq += their gradient. */
cpparity_status reference_attention_backward_queries_window(
    double *dq, double *delta, const double *dout, const double *q, const double *k,
    const double *v, const double *out, const double *lse, const reference_mask *mask,
    reference_attention_shape shape, double scale, reference_attention_window window,
    cpparity_error *error);

/* The backward of the keys [window.first, window.end): dk, dv += their gradients, from the lse
 * and D of every query the window holds (both (B,H,S)). */
cpparity_status reference_attention_backward_keys_window(
    double *dk, double *dv, const double *dout, const double *q, const double *k, const double *v,
    const double *lse, const double *delta, const reference_mask *mask,
    reference_attention_shape shape, double scale, reference_attention_window window,
    cpparity_error *error);

#endif
