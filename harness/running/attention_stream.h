/*
 * attention_stream.h — an attention-level item by query blocks, spread over the job's ranks: the
 * form of attention_item.h for lengths one process cannot hold whole (docs/architecture.md,
 * "Attention-level items by query blocks").
 *
 * The sequence is cut into blocks of `block` tokens (of every batch row at once: a block call
 * holds all B rows); rank r of the team owns the consecutive blocks [⌊r·n/R⌋, ⌊(r+1)·n/R⌋) of
 * the n. Per layer, each rank:
 *   1. for each of its blocks of queries: draws q and dout of the block and k and v of the keys
 *      its allowed pairs reach (reference_attention_keys_needed) from the seed, the same values
 *      the whole item draws; computes the float64 reference's out, lse, D and dq, and the naive
 *      baseline's (its own and given the reference's out and lse), by windows
 *      (reference/attention.h, naive_attention.h); calls the kernel's forward_block and
 *      backward_block (on its own out and lse, and on the reference's rounded: backward alone)
 *      over exactly those keys, so each query row gets every allowed key in one call; compares
 *      out, lse, dq and backward-alone dq, and adds the kernel's dk and dv shares (float64) onto
 *      its keys' sums;
 *   2. hands every query's lse and D to every rank (B·H·S values), and the kernel's dk and dv
 *      sums of keys another rank owns down to that rank, the last rank first (a chain of shifts);
 *   3. for each of its blocks of keys: draws k and v of the block and q and dout of the queries
 *      that reach it (reference_attention_queries_needed); computes the reference's and the
 *      baseline's dk and dv; compares the kernel's summed dk and dv (rounded to float32) and
 *      backward-alone dk and dv.
 * The metrics of every tensor (compare_accumulator) go to the team's rank 0 and are merged in
 * rank order; the records, their names and shapes are the whole item's
 * (attention/layers.L.out, .lse, .dq, .dk, .dv, .backward_alone.dq, .dk, .dv), judged by the same
 * rule. What one rank holds is O(block + reach) tokens of q, k, v (reach: the window, chunk or,
 * for a causal layer, the prefix), B·H·S values of lse and D, and the dk and dv sums of the keys
 * its queries reach. The kernel needs block calls (ABI 3): without them the item is NOT RUN,
 * saying so. The whole-sequence calls, the second call of a kernel declared deterministic and
 * the concurrent calls are not made (each would hold the whole sequence); the item's message
 * says so.
 */
#ifndef CPPARITY_HARNESS_RUNNING_ATTENTION_STREAM_H
#define CPPARITY_HARNESS_RUNNING_ATTENTION_STREAM_H

#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "distributed/comm/comm.h"
#include "distributed/kernels/kernel.h"
#include "results_model/results.h"

/* The query block when the run does not name one (--query-block): tokens per block. */
#define ATTENTION_STREAM_BLOCK 4096
/* Blocks are whole multiples of this (the row block, common/row_blocks.h). */
#define ATTENTION_STREAM_BLOCK_UNIT 256

/* Runs and judges item (begun with run_item_begin) for case c by query blocks of `block` tokens,
 * on every rank of team (a collective: every rank calls it). Team rank 0 ends with the item;
 * the others' item is zeroed. A kernel's failure, or running out of memory, is the item's ERROR
 * (naming the rank, the layer and the block); returns an error only when the communicator
 * fails. */
cpparity_status attention_stream_run(cpparity_comm *team, run_item *item, const cpparity_case *c,
                                     uint64_t seed, const cpparity_attention_kernel *kernel,
                                     int64_t block, cpparity_error *error);

/* The bytes one process holds at its peak running c by query blocks of `block` tokens on `ranks`
 * ranks (every rank's share is at most this), the kernel's workspace excluded; −1 when a size
 * does not fit int64. */
int64_t attention_stream_memory(const cpparity_case *c, int64_t block, int64_t ranks);

#endif
