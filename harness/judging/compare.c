/*
 * compare.c — the metrics of compare.h (max absolute error, relative L2 error, worst element,
 * non-finite count) for one tensor against the float64 reference, and the pass rule of
 * docs/tolerances.md: err_cp <= ratio × err_baseline + floor, err_baseline <= ceiling,
 * and never a pass with a non-finite value or a NaN error.
 *
 * Norms are sums of squares in double, in index order. An element where x or r is non-finite is
 * counted in `nonfinite` whether or not the include mask compares it, and never enters the norms,
 * so relative_l2 stays a number computed from the finite compared elements. `compared` counts the
 * elements the mask includes (compared + excluded == count), finite or not.
 */
#include "harness/judging/compare.h"

#include <math.h>
#include <stdio.h>

void compare_begin(compare_accumulator *accumulator, int64_t count) {
    *accumulator = (compare_accumulator){0};
    compare_metrics *metrics = &accumulator->metrics;
    metrics->count = count > 0 ? count : 0;
    metrics->first_nonfinite = -1;
    metrics->worst_index = -1;
}

void compare_add(compare_accumulator *accumulator, int64_t index, double x, double r,
                 bool included) {
    compare_metrics *metrics = &accumulator->metrics;
    if (!included) {
        metrics->excluded++;
    } else {
        metrics->compared++;
    }
    if (!isfinite(x) || !isfinite(r)) {
        if (metrics->nonfinite == 0 || index < metrics->first_nonfinite) {
            metrics->first_nonfinite = index;
        }
        metrics->nonfinite++;
        return;
    }
    if (!included) {
        return;
    }
    double difference = x - r;
    double error = fabs(difference);
    accumulator->error_sum += difference * difference;
    accumulator->reference_sum += r * r;
    if (metrics->worst_index < 0 || error > metrics->max_abs ||
        (error == metrics->max_abs && index < metrics->worst_index)) {
        metrics->max_abs = error;
        metrics->worst_index = index;
        metrics->worst_value = x;
        metrics->worst_reference = r;
    }
}

void compare_merge(compare_accumulator *into, const compare_accumulator *from) {
    compare_metrics *a = &into->metrics;
    const compare_metrics *b = &from->metrics;
    a->compared += b->compared;
    a->excluded += b->excluded;
    if (b->nonfinite > 0 && (a->nonfinite == 0 || b->first_nonfinite < a->first_nonfinite)) {
        a->first_nonfinite = b->first_nonfinite;
    }
    a->nonfinite += b->nonfinite;
    if (b->worst_index >= 0 && (a->worst_index < 0 || b->max_abs > a->max_abs ||
                                (b->max_abs == a->max_abs && b->worst_index < a->worst_index))) {
        a->max_abs = b->max_abs;
        a->worst_index = b->worst_index;
        a->worst_value = b->worst_value;
        a->worst_reference = b->worst_reference;
    }
    into->error_sum += from->error_sum;
    into->reference_sum += from->reference_sum;
}

void compare_finish(const compare_accumulator *accumulator, compare_metrics *metrics) {
    *metrics = accumulator->metrics;
    metrics->error_norm = sqrt(accumulator->error_sum);
    metrics->reference_norm = sqrt(accumulator->reference_sum);
    if (metrics->compared == 0) {
        metrics->relative_l2 = 0.0;
    } else if (metrics->reference_norm == 0.0) {
        metrics->relative_l2 = metrics->error_norm;
        metrics->absolute = true;
    } else {
        metrics->relative_l2 = metrics->error_norm / metrics->reference_norm;
    }
}

void compare_float32(compare_metrics *metrics, const float *x, const double *r, int64_t count,
                     const uint8_t *include) {
    compare_accumulator accumulator;
    compare_begin(&accumulator, count);
    for (int64_t i = 0; i < count; i++) {
        compare_add(&accumulator, i, (double)x[i], r[i], include == NULL || include[i] != 0);
    }
    compare_finish(&accumulator, metrics);
}

void compare_float64(compare_metrics *metrics, const double *x, const double *r, int64_t count,
                     const uint8_t *include) {
    compare_accumulator accumulator;
    compare_begin(&accumulator, count);
    for (int64_t i = 0; i < count; i++) {
        compare_add(&accumulator, i, x[i], r[i], include == NULL || include[i] != 0);
    }
    compare_finish(&accumulator, metrics);
}

void compare_coordinates(int64_t index, int rank, const int64_t *shape, int64_t *coordinates) {
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] <= 0) {
            coordinates[d] = 0;
            continue;
        }
        coordinates[d] = index % shape[d];
        index /= shape[d];
    }
}

compare_decision compare_decide(const compare_metrics *metrics, double naive_error,
                                double cp1_error, const cpparity_tolerance *tolerance) {
    compare_decision decision = {0};
    const double error = metrics->relative_l2;
    decision.limit = tolerance->ratio * naive_error + tolerance->floor;
    decision.cp1_limit = isnan(cp1_error) ? NAN : tolerance->ratio * cp1_error + tolerance->floor;
    if (metrics->nonfinite > 0) {
        snprintf(decision.reason, sizeof decision.reason,
                 "%lld non-finite value%s (first at index %lld)", (long long)metrics->nonfinite,
                 metrics->nonfinite == 1 ? "" : "s", (long long)metrics->first_nonfinite);
        return decision;
    }
    if (isnan(error)) {
        snprintf(decision.reason, sizeof decision.reason, "error is NaN");
        return decision;
    }
    if (!(naive_error <= tolerance->ceiling)) {
        snprintf(decision.reason, sizeof decision.reason,
                 "the naive baseline's own error %.2e is over its ceiling %.2e: the baseline is "
                 "out of bounds",
                 naive_error, tolerance->ceiling);
        return decision;
    }
    if (!(error <= decision.limit)) {
        snprintf(decision.reason, sizeof decision.reason,
                 "error %.2e > limit %.2e = %g x naive %.2e + floor %.2e", error, decision.limit,
                 tolerance->ratio, naive_error, tolerance->floor);
        return decision;
    }
    if (!isnan(cp1_error) && !(error <= decision.cp1_limit)) {
        snprintf(decision.reason, sizeof decision.reason,
                 "CP only: error %.2e > %.2e = %g x cp 1 error %.2e + floor %.2e", error,
                 decision.cp1_limit, tolerance->ratio, cp1_error, tolerance->floor);
        return decision;
    }
    decision.passed = true;
    snprintf(decision.reason, sizeof decision.reason, "error %.2e <= limit %.2e%s", error,
             decision.limit, isnan(cp1_error) ? "" : " and the cp 1 limit");
    return decision;
}
