/*
 * mask.h — the float64 reference's attention mask, evaluated from the definition in
 * docs/masks.md without ever building an S×S array.
 *
 * A reference_mask holds, per batch row, what the predicate needs per token: key validity
 * (attention_mask), the document id detected from position_ids, the left padding and, for
 * chunked layers, the chunk id. Document and chunk ids never decrease along a row, which lets a
 * block of queries × keys be classified from its corners as all allowed, none allowed or mixed;
 * the predicate is evaluated pair by pair only inside mixed blocks.
 *
 * Ownership: reference_mask_init allocates, reference_mask_free releases. The inputs are copied;
 * the caller may free them after init.
 */
#ifndef CPPARITY_REFERENCE_MASK_H
#define CPPARITY_REFERENCE_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "common/attention_layer.h"
#include "common/error.h"

/* Block edge used when the caller has no reason to choose another. */
#define REFERENCE_MASK_DEFAULT_BLOCK 64

typedef enum reference_block_class {
    REFERENCE_BLOCK_NONE = 0,  /* no pair of the block is allowed */
    REFERENCE_BLOCK_MIXED = 1, /* evaluate the predicate per pair */
    REFERENCE_BLOCK_ALL = 2,   /* every pair of the block is allowed */
} reference_block_class;

typedef struct reference_mask {
    int64_t batch;                  /* B */
    int64_t seq_len;                /* S */
    int64_t block_size;             /* edge of the query and key blocks used for classification */
    cpparity_attention_layer layer; /* type, W, C and chunk origin of this layer */
    int8_t *key_valid;              /* (B, S) attention_mask: 1 = real token, 0 = padding */
    int64_t *valid_prefix;          /* (B, S+1) number of real tokens before index t */
    int64_t *document;              /* (B, S) document id; never decreases along a row */
    int64_t *chunk;                 /* (B, S) chunk id; never decreases; NULL unless chunked */
    int64_t *left_padding;          /* (B) lp[b]: leading padding tokens (S if all padding) */
} reference_mask;

/* The non-empty key blocks of every query block of one batch row, in increasing key order. */
typedef struct reference_block_list {
    int64_t query_blocks; /* ceil(S / block_size) */
    int64_t *offsets;     /* (query_blocks + 1) entries of query block i: [offsets[i], [i+1]) */
    int64_t *key_block;   /* (entries) key block index */
    uint8_t *block_class; /* (entries) REFERENCE_BLOCK_ALL or REFERENCE_BLOCK_MIXED */
} reference_block_list;

/* Counts over a whole mask, per (b, q, k) — not multiplied by heads. */
typedef struct reference_mask_counts {
    int64_t blocks_all;      /* blocks classified all allowed */
    int64_t blocks_mixed;    /* blocks classified mixed */
    int64_t blocks_none;     /* blocks skipped */
    int64_t pairs_visited;   /* pairs inside all and mixed blocks */
    int64_t pairs_evaluated; /* pairs on which the predicate was evaluated (mixed blocks) */
    int64_t pairs_allowed;   /* pairs the predicate allows */
} reference_mask_counts;

/* Builds the mask of one layer for a batch from attention_mask (B, S) with values 0/1 and
 * position_ids (B, S). block_size >= 1. Returns CPPARITY_ERROR_INPUT (with a message naming the
 * field, row and position) for sizes < 1, W < 1, C < 1 or a mask value other than 0/1, and
 * CPPARITY_ERROR_RUNTIME when out of memory; mask is then left empty (safe to free). */
cpparity_status reference_mask_init(reference_mask *mask, int64_t batch, int64_t seq_len,
                                    const int8_t *attention_mask, const int64_t *position_ids,
                                    cpparity_attention_layer layer, int64_t block_size,
                                    cpparity_error *error);

/* Releases what init allocated; safe on a zeroed or already freed mask. */
void reference_mask_free(reference_mask *mask);

/* The predicate of masks.md for batch row b, query q and key k (0 <= b < B, 0 <= q, k < S). */
bool reference_mask_allowed(const reference_mask *mask, int64_t b, int64_t q, int64_t k);

/* Classifies queries [q_begin, q_end) × keys [k_begin, k_end) of row b (non-empty ranges). */
reference_block_class reference_mask_classify_block(const reference_mask *mask, int64_t b,
                                                    int64_t q_begin, int64_t q_end, int64_t k_begin,
                                                    int64_t k_end);

/* allowed[(q − q_begin)·query_step + (k − k_begin)·key_step] = the predicate of (b, q, k) for
 * queries [q_begin, q_end) × keys [k_begin, k_end) of row b (non-empty ranges): query-major with
 * query_step = k_end − k_begin, key_step = 1; key-major with query_step = 1, key_step =
 * q_end − q_begin. */
void reference_mask_fill_block(const reference_mask *mask, int64_t b, int64_t q_begin,
                               int64_t q_end, int64_t k_begin, int64_t k_end, int64_t query_step,
                               int64_t key_step, uint8_t *allowed);

/* Fills list with the non-empty key blocks of every query block of row b. The list is owned by
 * the caller and released with reference_block_list_free. CPPARITY_ERROR_RUNTIME when out of
 * memory. */
cpparity_status reference_mask_block_list(const reference_mask *mask, int64_t b,
                                          reference_block_list *list, cpparity_error *error);

/* Releases a block list; safe on a zeroed list. */
void reference_block_list_free(reference_block_list *list);

/* Counts blocks and pairs of the whole mask (cost accounting for benchmarks and tests). */
cpparity_status reference_mask_count(const reference_mask *mask, reference_mask_counts *counts,
                                     cpparity_error *error);

#endif
