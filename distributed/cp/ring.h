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
 * Where the tensors live is the caller's: the ring moves and combines them only through
 * ring_operations (host memory when none are given: the CPU model; the CUDA model's keep them in
 * device memory on its stream), so the steps, the rows that meet, the order of the merges and
 * sums and the shifts are this file's alone, on every device.
 *
 * The self-test's ring faults (common/fault.h) are planted here: ring-last-step (the last step
 * skipped), ring-causal-skip (a pair of runs skipped when the first key reaches the first query
 * rather than past the last: the diagonal block of a zigzag or contiguous shard), ring-dkv-
 * direction (dK and dV sent home the wrong way round the ring).
 */
#ifndef CPPARITY_DISTRIBUTED_RING_H
#define CPPARITY_DISTRIBUTED_RING_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/fault.h"
#include "distributed/comm/comm.h"
#include "distributed/kernels/kernel.h"

/* How the ring's tensors are allocated, moved and combined, for memory other than the host's.
 * Every index array an operation is given (rows, a block's tokens) is host memory; an operation
 * on device memory copies what it needs. Each returns CPPARITY_OK or fills error; the kernel
 * calls return kernel.h's codes (0 done, else message filled). */
typedef struct ring_operations {
    void *context;                                  /* passed to every operation */
    void *(*allocate)(void *context, size_t bytes); /* NULL when out of memory */
    void (*release)(void *context, void *memory);   /* NULL is ignored */
    cpparity_status (*copy)(void *context, float *to, const float *from, int64_t count,
                            cpparity_error *error);
    cpparity_status (*fill)(void *context, float *to, float value, int64_t count,
                            cpparity_error *error);
    /* to [B, count, width] = rows `rows` of from [B, L, width] */
    cpparity_status (*gather_rows)(void *context, float *to, const float *from, int64_t batch,
                                   int64_t L, int64_t width, const int64_t *rows, int64_t count,
                                   cpparity_error *error);
    /* rows `rows` of to [B, L, width] += from [B, count, width] (rows distinct) */
    cpparity_status (*scatter_add_rows)(void *context, float *to, const float *from, int64_t batch,
                                        int64_t L, int64_t width, const int64_t *rows,
                                        int64_t count, cpparity_error *error);
    /* to [P, count] = columns `rows` of from [P, L] (P = B·H: the lse) */
    cpparity_status (*gather_lse)(void *context, float *to, const float *from, int64_t planes,
                                  int64_t L, const int64_t *rows, int64_t count,
                                  cpparity_error *error);
    /* ring_merge_row of every (b, h, i < count): step output part_out [B, count, H, Dh] and
     * part_lse [B, H, count] into rows `rows` of out [B, L, H, Dh] and lse [B, H, L] */
    cpparity_status (*merge_rows)(void *context, float *out, float *lse, const float *part_out,
                                  const float *part_lse, int64_t batch, int64_t L, int64_t heads,
                                  int64_t head_dim, const int64_t *rows, int64_t count,
                                  cpparity_fault fault, cpparity_error *error);
    /* cpparity_shift of count floats */
    cpparity_status (*shift)(void *context, cpparity_comm *comm, const float *send, float *receive,
                             int64_t count, int offset, cpparity_error *error);
    /* the kernel's forward_block and backward_block (kernel.h), block's tokens in host memory */
    int (*forward_block)(void *context, const cpparity_attention_kernel *kernel, float *out,
                         float *lse, const float *q, const float *k, const float *v,
                         const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                         const cpparity_attention_block *block, float scale, char *message,
                         size_t size);
    int (*backward_block)(void *context, const cpparity_attention_kernel *kernel, float *dq,
                          float *dk, float *dv, const float *dout, const float *q, const float *k,
                          const float *v, const float *out, const float *lse,
                          const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims,
                          const cpparity_attention_block *block, float scale, char *message,
                          size_t size);
} ring_operations;

/* The operations on host memory (the CPU kernels through kernel_call.h). */
extern const ring_operations ring_host_operations;

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
    const ring_operations *operations;        /* NULL: host memory (ring_host_operations) */
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
