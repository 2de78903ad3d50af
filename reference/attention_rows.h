/*
 * attention_rows.h — internal to reference/: the per-query-row steps that the reference
 * attention's forward and backward share (scores over the allowed keys of one row, and the
 * transposed key/value heads those scores are computed from). Not part of the public API.
 */
#ifndef CPPARITY_REFERENCE_ATTENTION_ROWS_H
#define CPPARITY_REFERENCE_ATTENTION_ROWS_H

#include <stdint.h>

#include "common/error.h"
#include "reference/attention.h"
#include "reference/mask.h"

/* Everything one (batch row, kv head) needs, allocated once per call. */
typedef struct attention_rows {
    reference_attention_shape shape;
    const reference_mask *mask;
    reference_block_list blocks; /* non-empty key blocks of the current batch row */
    double *keys_transposed;     /* (Dh, S) key head of the current (b, kv head) */
    double *values_transposed;   /* (Dh, S) value head of the current (b, kv head) */
    double *scores;              /* (S) scale · q·k of the current query row */
    uint8_t *allowed;            /* (S) 1 where the current query row may attend */
} attention_rows;

/* Allocates the scratch for shape (after checking it against mask). */
cpparity_status attention_rows_init(attention_rows *rows, const reference_mask *mask,
                                    reference_attention_shape shape, cpparity_error *error);
void attention_rows_free(attention_rows *rows);

/* Switches to batch row b: rebuilds the block list. */
cpparity_status attention_rows_select_batch(attention_rows *rows, int64_t b, cpparity_error *error);

/* Copies head g of source (B,S,Hkv,Dh) for the selected batch row b into destination (Dh, S). */
void attention_rows_transpose_head(const attention_rows *rows, double *destination,
                                   const double *source, int64_t b, int64_t g);

/* For query q of the selected row b (keys of the current kv head already transposed):
 * scores[k] = scale · query·key_k and allowed[k] for every key k of the query block's non-empty
 * key blocks; entries outside those blocks are left untouched and must not be read. Returns the
 * largest allowed score, or −∞ when no key is allowed. */
double attention_rows_scores(attention_rows *rows, int64_t b, int64_t q, const double *query,
                             double scale);

/* The non-empty key blocks of q's query block are entries [first, end); entry e covers keys
 * [k_begin, k_end). These are the ranges attention_rows_scores filled. */
int64_t attention_rows_first_entry(const attention_rows *rows, int64_t q);
int64_t attention_rows_end_entry(const attention_rows *rows, int64_t q);
void attention_rows_entry_keys(const attention_rows *rows, int64_t entry, int64_t *k_begin,
                               int64_t *k_end);

#endif
