/*
 * naive_model.h — the baseline of docs/tolerances.md: a straightforward implementation of the
 * model of docs/model.md in the implementation's own dtype, unsharded, computed by the harness.
 * Its error against the float64 reference is what the implementation under test is allowed to
 * err by (err ≤ ratio × err_naive + floor), FlashAttention's rule.
 *
 * "Straightforward" means the reference's algorithm, in float32: every layer a plain loop with
 * sums in index order, attention row by row (the scores of a query row over its allowed keys, a
 * two-pass softmax: maximum, then exponentials and their sum), no tiling, no online softmax, no
 * context parallelism. Rotary tables are computed in float64 and stored in float32, as the
 * implementation under test does: a float32 angle would only loosen the baseline at long
 * sequences. For bf16 every stored value is rounded to bfloat16 at the storage points listed in
 * docs/model.md; gradients stay float32.
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

typedef struct naive_outputs {
    cpparity_dtype dtype; /* storage dtype it was computed in */
    float loss;           /* the loss */
    float *logits;        /* [B, S, V], owned */
    float *gradients;     /* every parameter gradient, laid out as the parameter table, owned */
    double seconds;       /* what computing it took */
} naive_outputs;

/* Runs forward and backward of config on batch (B × S) with the weights values (table->total
 * float64 values, laid out by table = cpparity_model_parameter_table(config)), rounded to dtype.
 * CPPARITY_ERROR_INPUT for a batch without any valid label or an invalid configuration,
 * CPPARITY_ERROR_RUNTIME when out of memory; outputs is then empty. */
cpparity_status naive_model_run(const cpparity_model_config *config, const cpparity_batch *batch,
                                const cpparity_tensor_table *table, const double *values,
                                cpparity_dtype dtype, naive_outputs *outputs,
                                cpparity_error *error);

/* What naive_model_run holds at most for config on batch × seq_len tokens, into *peak: its
 * float32 weights 4P, the saved values 4N·A (A as in reference/memory.h), the reference masks,
 * a row's scores and keys 12S, a projection 4ND, the activation gradients
 * 4N(3D + 3F + 2H·Dh + 2Hkv·Dh + V), its buffer list and its outputs; and into *kept the outputs
 * it returns (logits 4NV, gradients 4P). Not the batch nor the float64 weights it is given.
 * CPPARITY_ERROR_INPUT naming the size when one does not fit int64. */
cpparity_status naive_model_memory(const cpparity_model_config *config, int64_t batch,
                                   int64_t seq_len, int64_t *peak, int64_t *kept,
                                   cpparity_error *error);

/* Releases what naive_model_run allocated; safe on a zeroed struct. */
void naive_outputs_free(naive_outputs *outputs);

#endif
