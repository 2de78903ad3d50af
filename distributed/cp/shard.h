/*
 * shard.h — which tokens a rank holds. The padded sequence, Sp = cp·L tokens, is dealt out to the
 * cp ranks of a group by the case's layout (common/case.h), the same for every batch row:
 *   contiguous   rank r holds [r·L, (r+1)·L),                          L = ceil(S / cp)
 *   zigzag       2·cp chunks of L/2; rank r holds chunk r then chunk 2·cp−1−r, L = 2·ceil(S / 2cp)
 *   round-robin  rank r holds r, r + cp, r + 2·cp, …,                  L = ceil(S / cp)
 * each rank's rows in increasing position order. Positions past S are automatic padding
 * (attention_mask 0, labels −100, position 0) and never reach a comparison. Written apart from
 * the harness's own account of the layouts (harness/judging/token_layout.h), which checks it.
 */
#ifndef CPPARITY_DISTRIBUTED_SHARD_H
#define CPPARITY_DISTRIBUTED_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"

#include "common/batch.h"
#include "common/error.h"
#include "common/fault.h"

/* The token id of automatic padding (never compared: its labels are ignored). */
#define SHARD_PAD_TOKEN 0

typedef struct shard_layout {
    cpparity_layout kind;   /* contiguous, zigzag or round-robin */
    int64_t seq_len;        /* S of the case */
    int64_t padded_seq_len; /* cp · local_len >= S */
    int64_t local_len;      /* L, tokens per rank */
    int64_t cp;             /* ranks in the group */
    int64_t rank;           /* this rank */
    int64_t offset;         /* first global position held (contiguous: rank · L) */
    cpparity_fault fault;   /* zigzag-chunk-swap (fault.h) deals rank 1's chunks in the wrong
                               order; NONE as made */
} shard_layout;

/* The layout of rank `rank` in a group of cp for sequences of seq_len (cp >= 1, seq_len >= 1). */
shard_layout shard_layout_make(int64_t seq_len, int64_t cp, int64_t rank, cpparity_layout kind);

/* The global position of row t (0 <= t < L) of rank `rank` (any rank of the layout's group). */
int64_t shard_position(const shard_layout *layout, int64_t rank, int64_t t);

/* Moves [B, cp·L, width] floats in rank order (rank i's rows at [i·L, (i+1)·L), as an all-to-all
 * delivers them) to global position order in place (to_positions), or back; scratch holds
 * B·cp·L·width floats. Nothing for the contiguous layout, where the two orders are one. */
void shard_reorder(const shard_layout *layout, float *values, int64_t batch, int64_t width,
                   float *scratch, bool to_positions);

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

/* First global position autopad-truncate drops: cp · floor(S / cp) (a position, whichever rank
 * holds it). */
int64_t shard_truncated_length(const shard_layout *layout);

#endif
