/*
 * naive_model.h — the baseline of docs/tolerances.md: a straightforward implementation of the
 * model of docs/model.md in the implementation's own dtype, unsharded, computed by the harness.
 * Its error against the float64 reference is what the implementation under test is allowed to
 * err by (err ≤ ratio × err_naive + floor), FlashAttention's rule.
 *
 * "Straightforward" means the reference's algorithm, in float32: every layer a plain sum in index
 * order (naive_products.h: one float32 accumulator per output element, products added in
 * increasing contraction index; a layer weight's gradient is one accumulator over every token in
 * token order, the LM head's is added to one row block of common/row_blocks.h at a time, in the
 * blocks' order), attention row by row (the
 * scores of a query row over its allowed keys, a two-pass softmax: maximum, then exponentials and
 * their sum; naive_attention.h), no tiling of the softmax, no online softmax, no context
 * parallelism. Its exponentials are naive_exponential.h's (faithfully rounded float32, eight
 * lanes at a time). Cache-friendly loops on the reference's threads, never the implementation's
 * code or BLAS.
 *
 * The logits (B, S, V) are never held whole (docs/architecture.md, "Long context: row blocks"):
 * the loss and its gradient go one row block at a time, and each block is compared with the
 * float64 reference's logits of the same block as it is made. What is kept is, per token, the
 * squared error of its logits row and the reference row's squared norm: the baseline's error on
 * any set of tokens (a rank's slice) follows from them. Rotary tables are computed in float64 and
 * stored in float32, as the implementation under test does: a float32 angle would only loosen the
 * baseline at long sequences. For bf16 every stored value is rounded to bfloat16 at the storage
 * points listed in docs/model.md; gradients stay float32.
 *
 * It shares no code with the implementation under test (distributed/): a bug there cannot hide
 * in the baseline. The mask comes from the reference's definition (reference/mask.h).
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_MODEL_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_MODEL_H

#include <stdint.h>

#include "common/batch.h"
#include "common/case.h"
#include "common/error.h"
#include "common/model_config.h"
#include "common/tensor_table.h"
#include "reference/team.h"

/* The float64 reference's logits, one row block (common/row_blocks.h, row_blocks_of(B, S)) at a
 * time: block(context, i, out) writes block i's rows, (rows of the block, V). */
typedef struct naive_reference_logits {
    void (*block)(const void *context, int64_t block, double *out);
    const void *context;
} naive_reference_logits;

typedef struct naive_outputs {
    cpparity_dtype dtype; /* storage dtype it was computed in */
    float loss;           /* the loss */
    float *gradients;     /* every parameter gradient, laid out as the parameter table, owned */
    double *logits_error; /* [B, S] per token Σ_v (x − r)², x the baseline's logit, r the
                             reference's, over pairs where both are finite; owned */
    double *logits_norm;  /* [B, S] per token Σ_v r² over the same pairs; owned */
    uint8_t *logits_nonfinite; /* [B, S] 1 where x or r is not finite for some v; owned */
    double seconds;            /* what computing it took */
} naive_outputs;

/* Runs forward and backward of config on batch (B × S) with the weights values (table->total
 * float64 values, laid out by table = cpparity_model_parameter_table(config)), rounded to dtype,
 * and measures its logits against reference's, row block by row block.
 * CPPARITY_ERROR_INPUT for a batch without any valid label or an invalid configuration,
 * CPPARITY_ERROR_RUNTIME when out of memory; outputs is then empty. */
cpparity_status naive_model_run(const cpparity_model_config *config, const cpparity_batch *batch,
                                const cpparity_tensor_table *table, const double *values,
                                cpparity_dtype dtype, const naive_reference_logits *reference,
                                naive_outputs *outputs, cpparity_error *error);

/* The same run spread over the ranks of team (reference/team.h; NULL or size 1: this process
 * alone), as the float64 reference is (docs/architecture.md, "Long context: row blocks"): every
 * rank of the team calls it on the same batch and weights, in the same order, and holds the
 * activations of its row blocks only (row_blocks_first); keys and values are gathered for each
 * layer's attention, and every sum over tokens (a weight's gradient, the loss) is continued rank
 * after rank in rank order (naive_team.h), so that the outputs are the same bits for every rank
 * count. reference->block is called on each rank for its own blocks only. Every rank ends with
 * the whole outputs. */
cpparity_status
naive_model_run_spread(const cpparity_model_config *config, const cpparity_batch *batch,
                       const cpparity_tensor_table *table, const double *values,
                       cpparity_dtype dtype, const naive_reference_logits *reference,
                       const reference_team *team, naive_outputs *outputs, cpparity_error *error);

/* What naive_model_run holds at most for config on batch × seq_len tokens, into *peak: its
 * float32 weights 4P, the saved values 4N·A (A as in reference/memory.h), the reference masks, a
 * projection 4ND, the activation gradients 4N(3D + 3F + 2H·Dh + 2Hkv·Dh), a row block's logits
 * and the reference's (256·V·(4 + 8)), its attention's scratch (naive_attention_memory) or its
 * products' (the larger), its buffer list and its outputs; and into *kept the outputs it returns
 * (the per-token errors 17N, gradients 4P). Not the batch nor the float64 weights it is given.
 * CPPARITY_ERROR_INPUT naming the size when one does not fit int64. */
cpparity_status naive_model_memory(const cpparity_model_config *config, int64_t batch,
                                   int64_t seq_len, int64_t *peak, int64_t *kept,
                                   cpparity_error *error);

/* The same for rank `rank` of `ranks` computing it spread (naive_model_run_spread, as
 * reference_cache.c runs it): its share of the tokens' values, every query's lse, the whole-shaped
 * attention tensors a layer gathers (or the embedding's gathered stream), the reference's final
 * norm rows of its blocks, and the whole outputs every rank ends with. ranks = 1 is
 * naive_model_memory. */
cpparity_status naive_model_memory_spread(const cpparity_model_config *config, int64_t batch,
                                          int64_t seq_len, int64_t ranks, int64_t rank,
                                          int64_t *peak, int64_t *kept, cpparity_error *error);

/* Releases what naive_model_run allocated; safe on a zeroed struct. */
void naive_outputs_free(naive_outputs *outputs);

#endif
