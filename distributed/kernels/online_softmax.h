/*
 * online_softmax.h — the running (maximum, sum) of a softmax over key tiles, merged as tiles
 * arrive (FlashAttention's online softmax), for CPU and CUDA alike (__host__ __device__).
 *
 * State (m, l): the largest score seen and Σ exp(s − m). Merging a tile whose largest score is
 * m_tile rescales what was accumulated by exp(m − m_new). An empty state has m = −∞, l = 0.
 */
#ifndef CPPARITY_DISTRIBUTED_ONLINE_SOFTMAX_H
#define CPPARITY_DISTRIBUTED_ONLINE_SOFTMAX_H

#include <math.h>

#include "distributed/device/device_inline.h"

typedef struct online_softmax {
    float maximum; /* largest score so far, −∞ when empty */
    float sum;     /* Σ exp(score − maximum) */
} online_softmax;

/* Factor that rescales what was accumulated under the old maximum when new_maximum takes over
 * (0 when nothing was accumulated). */
static inline CPPARITY_HOST_DEVICE float online_softmax_rescale(float old_maximum,
                                                                float new_maximum) {
    return old_maximum == -INFINITY ? 0.0f : expf(old_maximum - new_maximum);
}

/* Merges state b into a (either may be empty). Returns the factor a's accumulator must be
 * multiplied by; b's accumulator must be multiplied by the second factor written to b_factor. */
static inline CPPARITY_HOST_DEVICE float online_softmax_merge(online_softmax *a, online_softmax b,
                                                              float *b_factor) {
    const float maximum = a->maximum > b.maximum ? a->maximum : b.maximum;
    if (maximum == -INFINITY) {
        *b_factor = 0.0f;
        return 0.0f;
    }
    const float a_factor = online_softmax_rescale(a->maximum, maximum);
    *b_factor = online_softmax_rescale(b.maximum, maximum);
    a->sum = a->sum * a_factor + b.sum * *b_factor;
    a->maximum = maximum;
    return a_factor;
}

/* Natural log-sum-exp of the state; −∞ when empty. */
static inline CPPARITY_HOST_DEVICE float online_softmax_lse(online_softmax state) {
    return state.maximum == -INFINITY ? -INFINITY : state.maximum + logf(state.sum);
}

#endif
