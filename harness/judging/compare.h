/*
 * compare.h — comparing a tensor of the implementation under test with the float64 reference,
 * and the pass rule of docs/tolerances.md.
 *
 * Metrics per tensor (per rank): max absolute error, relative L2 error ‖x − r‖/‖r‖, the worst
 * element (by absolute error) as a flat index, and the count of non-finite values where the
 * reference is finite. Elements can be excluded from the error (logits of fully masked rows,
 * automatic padding) but are still checked for non-finite values: a NaN at padding poisons
 * gradients through 0·NaN.
 */
#ifndef CPPARITY_HARNESS_JUDGING_COMPARE_H
#define CPPARITY_HARNESS_JUDGING_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"
#include "results_model/results.h"

/* The metrics of one tensor built element by element, in any order (a tensor streamed one row
 * block at a time): the worst element and the first non-finite one are the same whatever the
 * order (ties go to the smaller index); the norms are sums in the order the elements come. */
typedef struct compare_accumulator {
    compare_metrics metrics; /* filled by compare_finish */
    double error_sum;        /* Σ (x − r)² over finite compared elements */
    double reference_sum;    /* Σ r² over finite compared elements */
} compare_accumulator;

/* Starts the metrics of a tensor of count elements. */
void compare_begin(compare_accumulator *accumulator, int64_t count);

/* Element `index` (flat, of the tensor), x against r; included: compared, else only checked for
 * non-finite values. */
void compare_add(compare_accumulator *accumulator, int64_t index, double x, double r,
                 bool included);

/* Adds what `from` holds (other elements of the same tensor, e.g. another rank's) onto `into`:
 * counts and sums add, the worst and the first non-finite element are the same as one
 * accumulator given every element would hold (ties to the smaller index). */
void compare_merge(compare_accumulator *into, const compare_accumulator *from);

/* The finished metrics (norms, relative L2) into *metrics. */
void compare_finish(const compare_accumulator *accumulator, compare_metrics *metrics);

/* Compares x (float32) with r (float64), count elements. include: NULL = every element, else
 * include[i] != 0 marks compared elements. Sums are in float64 in index order. */
void compare_float32(compare_metrics *metrics, const float *x, const double *r, int64_t count,
                     const uint8_t *include);

/* The same for an x already widened to float64 (e.g. a loss accumulated in double). */
void compare_float64(compare_metrics *metrics, const double *x, const double *r, int64_t count,
                     const uint8_t *include);

/* Row-major coordinates of a flat index in a tensor of `rank` dimensions. */
void compare_coordinates(int64_t index, int rank, const int64_t *shape, int64_t *coordinates);

/* The pass rule of docs/tolerances.md for one tensor, at error e = metrics->relative_l2:
 *   - no non-finite value where the reference is finite, and e is not NaN;
 *   - e <= ratio × naive_error + floor (naive_error: the naive same-dtype baseline's error on the
 *     same elements), the limit;
 *   - for a cp > 1 item (cp1_error not NaN): also e <= ratio × cp1_error + floor, the CP-only
 *     check against the implementation's own error at cp = 1.
 * The ceiling bounds the baseline, not e: a naive_error over it (or NaN) fails the tensor with a
 * reason saying the baseline itself is out of bounds. The reason names the rule that failed. */
compare_decision compare_decide(const compare_metrics *metrics, double naive_error,
                                double cp1_error, const cpparity_tolerance *tolerance);

#endif
