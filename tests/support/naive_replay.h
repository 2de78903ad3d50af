/*
 * naive_replay.h — what the naive baseline's bit-for-bit tests share (test_naive_products.c,
 * test_naive_attention.c): deterministic float inputs, one step of the documented sum order of
 * harness/judging/naive_products.h, and the baseline's exponential of one value.
 */
#ifndef CPPARITY_TESTS_SUPPORT_NAIVE_REPLAY_H
#define CPPARITY_TESTS_SUPPORT_NAIVE_REPLAY_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness/judging/naive_exponential.h"
#include "harness/judging/naive_products.h"

/* count values in [−1, 1], varied, the same for the same seed; the caller frees them. */
static inline float *naive_replay_filled(int64_t count, int seed) {
    float *values = malloc((size_t)count * sizeof *values);
    for (int64_t i = 0; values != NULL && i < count; i++) {
        values[i] = (float)((i * 7919 + seed * 104729) % 2001 - 1000) / 1000.0f;
    }
    return values;
}

/* exp(x − shift) as the baseline computes it (harness/judging/naive_exponential.h), alone. */
static inline float naive_replay_exp(float x, float shift) {
    float y;
    naive_exponential(&y, &x, 1, shift);
    return y;
}

/* The documented order: acc = 0; acc += a·b for k = 0, 1, ... (fused when the products are). */
static inline float naive_replay_step(float acc, float a, float b) {
    return naive_products_fused() ? fmaf(a, b, acc) : acc + a * b;
}

#endif
