/*
 * attention_blocks.h — the block calls (kernel ABI 3) of an attention-level item: the whole
 * sequence cut into blocks, every query block called against every key block, the partial results
 * merged as a ring merges them, so that they can be judged against the float64 reference like the
 * whole-sequence call.
 *
 * The sequence [0, S) is cut into four chunks, chunk i = [i·S/4, (i+1)·S/4). The query blocks are
 * chunks {3, 0} (in that order: a block's rows may come in any order) and {1, 2}, a zigzag rank's
 * two chunks at cp 2; the key blocks are chunks {0, 2}, {1} and {3}. So queries meet keys from
 * other chunks, windows and documents cross block edges, and under a causal mask the pair
 * ({1, 2}, {3}) has no allowed pair at all. Every one of the six pairs is called, empty or not
 * (a block with fewer than one row is not).
 *
 * Forward: each pair's out and lse are merged by log-sum-exp in float64 (the blocks' lse weigh
 * their out), then rounded to float32. A query row with no allowed key in a block must come back
 * with out exactly 0 and lse −∞ (kernel.h); rows that do not are counted. Backward: each pair's
 * backward_block receives the merged out and lse given (the caller passes the reference's, rounded
 * to float32, so the backward is judged alone) and its dq, dk, dv are summed in float64.
 */
#ifndef CPPARITY_HARNESS_RUNNING_ATTENTION_BLOCKS_H
#define CPPARITY_HARNESS_RUNNING_ATTENTION_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "distributed/kernels/kernel.h"

/* The blocks and pairs above. */
#define ATTENTION_BLOCK_CHUNKS 4
#define ATTENTION_QUERY_BLOCKS 2
#define ATTENTION_KEY_BLOCKS 3

/* Fills tokens with the global tokens of query block (keys: key block) `block` of a sequence of
 * seq_len, in call order; returns how many. tokens holds seq_len. */
int64_t attention_query_block(int64_t seq_len, int block, int64_t *tokens);
int64_t attention_key_block(int64_t seq_len, int block, int64_t *tokens);

/* What the block calls read: the whole-sequence tensors, and the out and lse the backward calls
 * are given (over every key). */
typedef struct attention_block_inputs {
    const float *q, *dout;  /* [B, S, H, Dh] */
    const float *k, *v;     /* [B, S, Hkv, Dh] */
    const float *given_out; /* [B, S, H, Dh] */
    const float *given_lse; /* [B, H, S] */
} attention_block_inputs;

/* What they give, in the whole-sequence shapes; the caller owns the buffers. */
typedef struct attention_block_outputs {
    float *out, *lse;             /* merged forward: [B, S, H, Dh], [B, H, S] */
    float *dq, *dk, *dv;          /* summed backward: [B, S, H, Dh], [B, S, Hkv, Dh] ×2 */
    int64_t empty_wrong;          /* block rows with lse −∞ and an out element other than 0 */
    int64_t first_empty_wrong[4]; /* the first: batch row, position, head, dim (−1: none) */
} attention_block_outputs;

/* Every pair's forward_block, then every pair's backward_block (kernel_has_block_calls must
 * hold), through kernel_call.h (poisoned outputs, guard regions). 0, or non-zero with message
 * naming the pair and the kernel's failure (or out of memory). */
int attention_blocks_call(const cpparity_attention_kernel *kernel,
                          const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale,
                          const attention_block_inputs *inputs, attention_block_outputs *outputs,
                          char *message, size_t size);

#endif
