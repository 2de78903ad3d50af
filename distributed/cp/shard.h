/*
 * shard.h — which tokens a rank holds. Rank r of a cp-sized group holds the contiguous slice
 * [r·L, (r+1)·L) of every batch row, L = ceil(S / cp). When cp does not divide S the sequence is
 * padded automatically to cp·L tokens; the added tokens are padding (attention_mask 0, labels
 * −100, position 0) and never reach a comparison.
 */
#ifndef CPPARITY_DISTRIBUTED_SHARD_H
#define CPPARITY_DISTRIBUTED_SHARD_H

#include <stdint.h>

#include "common/batch.h"
#include "common/error.h"
#include "common/fault.h"

/* The token id of automatic padding (never compared: its labels are ignored). */
#define SHARD_PAD_TOKEN 0

typedef struct shard_layout {
    int64_t seq_len;        /* S of the case */
    int64_t padded_seq_len; /* cp · local_len >= S */
    int64_t local_len;      /* L, tokens per rank */
    int64_t cp;             /* ranks in the group */
    int64_t rank;           /* this rank */
    int64_t offset;         /* first global position held: rank · L */
} shard_layout;

/* The layout of rank `rank` in a group of cp for sequences of seq_len (cp >= 1, seq_len >= 1). */
shard_layout shard_layout_make(int64_t seq_len, int64_t cp, int64_t rank);

/* Builds this rank's slice (B × L tokens, allocated into local) of the full batch (B × S),
 * padding positions beyond S. Labels are taken from the full batch, shifted before sharding. */
cpparity_status shard_slice_batch(cpparity_batch *local, const cpparity_batch *full,
                                  const shard_layout *layout, cpparity_error *error);

/* Plants a fault of the slice (fault.h) into local, built by shard_slice_batch:
 * label-shift-in-shard (the last token of the slice loses its label: its target lies on the
 * next rank), autopad-truncate (tokens past cp · floor(S / cp) become padding without labels,
 * and the token before them loses its target), autopad-unmasked (automatic padding becomes a
 * real token labelled SHARD_PAD_TOKEN). Nothing for the other faults. */
void shard_inject(cpparity_batch *local, const shard_layout *layout, cpparity_fault fault);

/* First global position autopad-truncate drops: cp · floor(S / cp). */
int64_t shard_truncated_length(const shard_layout *layout);

#endif
