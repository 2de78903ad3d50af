/*
 * ring_merge.h — the log-sum-exp merge of ring attention, for CPU and CUDA alike
 * (__host__ __device__): a query row's output over the key blocks seen so far (out, lse) and a
 * new block's output over its own keys (out_b, lse_b) combine into the output over both,
 *     lse' = log(e^lse + e^lse_b),    out' = out · e^(lse − lse') + out_b · e^(lse_b − lse'),
 * in float32, computed from the larger lse so nothing overflows. A side with lse = −∞ (no allowed
 * key yet, or none in the block) weighs 0; both −∞ leave out 0 and lse −∞.
 *
 * The self-test's ring-merge faults (common/fault.h) live here, where the merge is computed:
 * ring-merge-max keeps only the running maximum as the new lse (each side weighed against it,
 * the sum never normalised), ring-merge-step-lse adds the block's output without its weight.
 */
#ifndef CPPARITY_DISTRIBUTED_RING_MERGE_H
#define CPPARITY_DISTRIBUTED_RING_MERGE_H

#include <math.h>
#include <stdint.h>

#include "common/fault.h"
#include "distributed/device/device_inline.h"

/* Merges one row of head_dim values (out_b, lse_b) into (out, *lse). */
static inline CPPARITY_HOST_DEVICE void ring_merge_row(float *out, float *lse, const float *out_b,
                                                       float lse_b, int64_t head_dim,
                                                       cpparity_fault fault) {
    const float lse_a = *lse;
    const float larger = lse_a > lse_b ? lse_a : lse_b;
    if (larger == -INFINITY) {
        return; /* neither side has an allowed key: out stays 0, lse −∞ */
    }
    const float a = lse_a == -INFINITY ? 0.0f : expf(lse_a - larger);
    const float b = lse_b == -INFINITY ? 0.0f : expf(lse_b - larger);
    const float merged = fault == CPPARITY_FAULT_RING_MERGE_MAX ? larger : larger + logf(a + b);
    const float weight_a = lse_a == -INFINITY ? 0.0f : expf(lse_a - merged);
    const float weight_b = fault == CPPARITY_FAULT_RING_MERGE_STEP_LSE ? 1.0f
                           : lse_b == -INFINITY                        ? 0.0f
                                                                       : expf(lse_b - merged);
    for (int64_t i = 0; i < head_dim; i++) {
        out[i] = out[i] * weight_a + out_b[i] * weight_b;
    }
    *lse = merged;
}

#endif
