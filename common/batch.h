/*
 * batch.h — one batch of model inputs, as masks.md and model.md define them. Every array is
 * (B, S) row-major. A definition shared by the reference and the implementation under test.
 */
#ifndef CPPARITY_COMMON_BATCH_H
#define CPPARITY_COMMON_BATCH_H

#include <stdint.h>

#include "common/error.h"

#define CPPARITY_IGNORE_INDEX (-100)

/* Bytes a batch allocates per token (cpparity_batch_allocate: input_ids, labels and
 * position_ids int64, attention_mask int8), for memory estimates. */
#define CPPARITY_BATCH_TOKEN_BYTES (3 * 8 + 1)

typedef struct cpparity_batch {
    int64_t batch;          /* B */
    int64_t seq_len;        /* S */
    int64_t *input_ids;     /* (B, S) token ids in [0, V) */
    int64_t *labels;        /* (B, S) already shifted; CPPARITY_IGNORE_INDEX = ignored */
    int8_t *attention_mask; /* (B, S) 1 = real token, 0 = padding */
    int64_t *position_ids;  /* (B, S) position inside the document, 0 on padding */
} cpparity_batch;

/* Allocates a zeroed batch of B × S tokens (the caller fills it). CPPARITY_ERROR_RUNTIME when
 * out of memory (nothing is left allocated). */
cpparity_status cpparity_batch_allocate(cpparity_batch *batch, int64_t batch_size, int64_t seq_len,
                                        cpparity_error *error);

/* Releases what cpparity_batch_allocate (or a fixture builder) allocated; safe on a zeroed
 * batch. */
void cpparity_batch_free(cpparity_batch *batch);

#endif
