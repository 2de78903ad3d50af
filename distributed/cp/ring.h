/*
 * ring.h — ring attention across the ranks of a CP group (the CPU model's `ring` algorithm).
 *
 * Each rank keeps its own queries, [B, L, H, Dh] at the global positions its layout gives it
 * (shard.h), and all H heads (for a hybrid, each member of the ring is a rank holding its Ulysses
 * group's tokens and H/U heads after the group's all-to-all). Over cp steps the key/value blocks
 * travel round the ring: at step s rank r holds the block of rank (r − s) mod cp and sends it on to
 * rank r + 1 (cpparity_shift, offset +1). At each step the rows that can meet are found from the
 * compact mask — the block is cut into runs of consecutive positions (one per contiguous shard, two
 * per zigzag shard, one per token round-robin) and mask_classify_tile decides each pair of runs —
 * and one block call of the kernel (ABI 3, global token indices) covers the query rows and key rows
 * of the runs that meet; a step where none meet is skipped. Partial outputs are merged by
 * log-sum-exp in float32 (ring_merge.h), step after step in a fixed order.
 *
 * Backward runs the same steps: dQ accumulates on the rank; dK and dV accumulate in buffers that
 * travel with their key/value block, in the fixed order of the steps, and after the last step go
 * one more step forward round the ring, home to the rank that owns the block. Results are the
 * same bits run after run.
 *
 * The self-test's ring faults (common/fault.h) are planted here: ring-last-step (the last step
 * skipped), ring-causal-skip (a pair of runs skipped when the first key reaches the first query
 * rather than past the last: the diagonal block of a zigzag or contiguous shard), ring-dkv-
 * direction (dK and dV sent home the wrong way round the ring).
 */
#ifndef CPPARITY_DISTRIBUTED_RING_H
#define CPPARITY_DISTRIBUTED_RING_H

#include <stdint.h>

#include "common/error.h"
#include "common/fault.h"
#include "distributed/comm/comm.h"
#include "distributed/kernels/kernel.h"

/* What every ring call of one layer shares. Everything is borrowed. The ring's members are the
 * ranks of comm in rank order; member s holds `rows` rows, the global tokens
 * tokens[s·rows … (s+1)·rows) (a rank's shard under the layout, or for a hybrid the tokens of a
 * whole Ulysses group after its all-to-all). */
typedef struct ring_setup {
    cpparity_comm *comm;                      /* the ring */
    int64_t rows;                             /* L: rows each member holds */
    const int64_t *tokens;                    /* [comm->size × rows] global token of every row */
    const cpparity_attention_kernel *kernel;  /* with block calls (kernel_has_block_calls) */
    int64_t batch, heads, kv_heads, head_dim; /* B, and the H, Hkv, Dh of these tensors */
    cpparity_fault fault;                     /* planted fault, NONE normally */
} ring_setup;

/* out [B, L, H, Dh] and lse [B, H, L] of this member's queries q [B, L, H, Dh] over every key,
 * from its k and v [B, L, Hkv, Dh]; mask over the padded sequence. Every member calls it. */
cpparity_status ring_attention_forward(const ring_setup *ring, float *out, float *lse,
                                       const float *q, const float *k, const float *v,
                                       const cpparity_mask_description *mask, float scale,
                                       cpparity_error *error);

/* dq [B, L, H, Dh], dk and dv [B, L, Hkv, Dh] of this member's rows, from dout and the
 * forward's q, k, v, out and lse. Every member calls it. */
cpparity_status ring_attention_backward(const ring_setup *ring, float *dq, float *dk, float *dv,
                                        const float *dout, const float *q, const float *k,
                                        const float *v, const float *out, const float *lse,
                                        const cpparity_mask_description *mask, float scale,
                                        cpparity_error *error);

/* The steps the ring runs: cp (ring-last-step: cp − 1). */
int64_t ring_step_count(int64_t cp, cpparity_fault fault);

#endif
