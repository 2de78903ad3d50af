/*
 * mask_description.h — the compact mask the implementation rebuilds over the whole padded
 * sequence after gathering every rank's attention_mask and position_ids (once per step):
 * document ids and starts, positions, key validity and left padding per row, never an S×S
 * array.
 */
#ifndef CPPARITY_DISTRIBUTED_MASK_DESCRIPTION_H
#define CPPARITY_DISTRIBUTED_MASK_DESCRIPTION_H

#include <stdint.h>

#include "common/attention_layer.h"
#include "common/error.h"
#include "common/fault.h"
#include "distributed/kernels/kernel.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

typedef struct mask_storage {
    int64_t batch;           /* B */
    int64_t seq_len;         /* S (padded) */
    int64_t *document;       /* [B, S] */
    int64_t *document_start; /* [B, S] */
    int64_t *position;       /* [B, S] position_ids (chunks counted in positions) */
    int8_t *key_valid;       /* [B, S] */
    int64_t *left_padding;   /* [B] */
} mask_storage;

/* Builds the per-token facts from the gathered attention_mask and position_ids ([B, S]). */
cpparity_status mask_storage_build(mask_storage *storage, int64_t batch, int64_t seq_len,
                                   const int8_t *attention_mask, const int64_t *position_ids,
                                   cpparity_error *error);

/* The same with a fault of the mask planted (fault.h: mask-dropped, chunk-no-left-pad,
 * chunk-position-restart, docs-local, padding-side, pad-leak) inside the building loops, which
 * every run executes;
 * shard_length is L (docs-local splits documents at every multiple of it). The other faults
 * build the true mask. */
cpparity_status mask_storage_build_planted(mask_storage *storage, int64_t batch, int64_t seq_len,
                                           const int8_t *attention_mask,
                                           const int64_t *position_ids, cpparity_fault fault,
                                           int64_t shard_length, cpparity_error *error);

/* The description of one layer over storage (pointers into storage). */
cpparity_mask_description mask_storage_describe(const mask_storage *storage,
                                                cpparity_attention_layer layer);

/* Releases the storage; safe on a zeroed one. */
void mask_storage_free(mask_storage *storage);

#ifdef __cplusplus
}
#endif

#endif
