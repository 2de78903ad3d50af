/*
 * naive_exponential.h — the exponential of the naive baseline (naive_model.h, naive_attention.h):
 * exp(x − shift) of float32 values in float32, eight at a time, the same bits for an element
 * wherever it sits in the array and whichever instruction set computes it.
 *
 * The method is the textbook one (Cody and Waite's range reduction, then a polynomial): n =
 * round(x / ln 2), r = x − n·ln 2 in two parts, exp(r) by a degree-7 polynomial (Cephes' expf
 * coefficients), times 2ⁿ in two exact steps (so that results below 2⁻¹²⁶ round once, to
 * subnormals). Only additions, subtractions and multiplications, never fused (the file is built
 * with -ffp-contract=off), so a vector lane computes what the scalar formula computes. Error: at
 * most 2 units in the last place against the exact exponential where the result is a normal float
 * (tests/test_naive_exponential.c measures it); exp(−∞) = 0, exp(+∞) = +∞, NaN stays NaN, exp(0) =
 * 1, x − shift above 88.72 gives +∞ and below −103.98 gives 0.
 *
 * Why not libm's expf: the baseline calls it for every logit of every token (twice) and for every
 * allowed pair of every attention layer (three times); one element at a time it was a fifth of
 * the baseline's time at long sequences.
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_EXPONENTIAL_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_EXPONENTIAL_H

#include <stdint.h>

/* out[i] = exp(in[i] − shift) for i in [0, count); out may be in. */
void naive_exponential(float *out, const float *in, int64_t count, float shift);

/* out[i] = exp(in[i] − shifts[i]) for i in [0, count), each element the bits naive_exponential
 * gives it with that shift; out may be in. */
void naive_exponential_shifts(float *out, const float *in, const float *shifts, int64_t count);

#endif
