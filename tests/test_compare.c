/*
 * test_compare.c — tensor comparison and the pass rule (harness/compare.c) on hand-built inputs:
 * the metrics (max absolute error, relative L2, worst element, non-finite count) with and without
 * an include mask, the edge cases (empty, all excluded, zero reference), flat index to
 * coordinates, and compare_decide at, under and over its limits with the reasons it gives.
 *
 * Most inputs are small integers or dyadic fractions, so the expected metrics are exact in
 * floating point and are asserted with ==.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness/judging/compare.h"

/* The worked example: x − r = {0, 0, 1.5, −2}, so max |x − r| = 2 at index 3;
 * ‖x − r‖ = sqrt(1.5² + 2²) = sqrt(6.25) = 2.5 and ‖r‖ = sqrt(3² + 4²) = 5, so relative L2 =
 * 2.5 / 5 = 0.5. Every step is exact in binary floating point. */
static const float example_x[4] = {3.0f, 4.0f, 1.5f, -2.0f};
static const double example_r[4] = {3.0, 4.0, 0.0, 0.0};

static void assert_example_metrics(const compare_metrics *m) {
    cr_assert_eq(m->compared, 4);
    cr_assert_eq(m->nonfinite, 0);
    cr_assert_eq(m->first_nonfinite, -1);
    cr_assert_eq(m->max_abs, 2.0);
    cr_assert_eq(m->error_norm, 2.5);
    cr_assert_eq(m->reference_norm, 5.0);
    cr_assert_eq(m->relative_l2, 0.5);
    cr_assert_not(m->absolute);
    cr_assert_eq(m->worst_index, 3);
    cr_assert_eq(m->worst_value, -2.0);
    cr_assert_eq(m->worst_reference, 0.0);
}

static cpparity_tolerance make_tolerance(double ratio, double floor, double ceiling) {
    cpparity_tolerance tolerance = {0};
    tolerance.ratio = ratio;
    tolerance.floor = floor;
    tolerance.ceiling = ceiling;
    return tolerance;
}

/* Metrics carrying only an error, as compare_decide reads them. */
static compare_metrics metrics_with_error(double error) {
    compare_metrics m = {0};
    m.count = 1;
    m.compared = 1;
    m.first_nonfinite = -1;
    m.relative_l2 = error;
    return m;
}

static void assert_reason_contains(const compare_decision *d, const char *fragment) {
    cr_assert(strstr(d->reason, fragment) != NULL, "expected '%s' in reason: %s", fragment,
              d->reason);
}

/* A tolerance no finite error comes near: 1e300 for ratio, floor and ceiling, so any failure is
 * due to something other than the size of the error. */
#define HUGE_TOLERANCE 1e300

Test(compare, exact_equality__zero_errors) {
    const float x[5] = {1.0f, -2.0f, 0.25f, 1e-30f, 3e30f};
    const double r[5] = {1.0, -2.0, 0.25, (double)1e-30f, (double)3e30f};
    compare_metrics m;
    compare_float32(&m, x, r, 5, NULL);
    cr_assert_eq(m.count, 5);
    cr_assert_eq(m.compared, 5);
    cr_assert_eq(m.excluded, 0);
    cr_assert_eq(m.nonfinite, 0);
    cr_assert_eq(m.max_abs, 0.0);
    cr_assert_eq(m.error_norm, 0.0);
    cr_assert_eq(m.relative_l2, 0.0);
    cr_assert_not(m.absolute);
    cr_assert_eq(m.worst_index, 0, "with no error the first compared element is the worst");
}

Test(compare, hand_computed_example__max_abs_and_relative_l2) {
    compare_metrics m;
    compare_float32(&m, example_x, example_r, 4, NULL);
    cr_assert_eq(m.count, 4);
    cr_assert_eq(m.excluded, 0);
    assert_example_metrics(&m);
}

Test(compare, worst_element__first_of_equal_errors_with_its_values) {
    /* |x − r| = {0.5, 1, 0.25, 1}: the largest, 1, first occurs at index 1 */
    const float x[4] = {0.5f, 7.0f, -0.25f, 9.0f};
    const double r[4] = {0.0, 8.0, 0.0, 8.0};
    compare_metrics m;
    compare_float32(&m, x, r, 4, NULL);
    cr_assert_eq(m.worst_index, 1);
    cr_assert_eq(m.worst_value, 7.0);
    cr_assert_eq(m.worst_reference, 8.0);
    cr_assert_eq(m.max_abs, 1.0);
}

/* A tensor streamed one block at a time may come in any order (a rank's rows by position): the
 * worst element and the first non-finite one are the same as in index order. */
Test(compare, elements_in_reverse_order__same_worst_and_first_nonfinite) {
    const double x[] = {1.0, 3.0, NAN, 2.0, 3.0, INFINITY}, r[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    compare_accumulator forward, backward;
    compare_begin(&forward, 6);
    compare_begin(&backward, 6);
    for (int64_t i = 0; i < 6; i++) {
        compare_add(&forward, i, x[i], r[i], true);
        compare_add(&backward, 5 - i, x[5 - i], r[5 - i], true);
    }
    compare_metrics a, b;
    compare_finish(&forward, &a);
    compare_finish(&backward, &b);
    cr_assert_eq(a.worst_index, 1, "the first of the two errors of 3");
    cr_assert_eq(b.worst_index, 1, "the same element in reverse order");
    cr_assert_eq(a.first_nonfinite, 2);
    cr_assert_eq(b.first_nonfinite, 2, "the lowest index, not the first seen");
    cr_assert_eq(a.nonfinite, 2);
    cr_assert_eq(b.nonfinite, 2);
    cr_assert(a.relative_l2 == b.relative_l2, "1 + 9 + 4 + 9 in either order: exact");
}

/* Two ranks' accumulators of one tensor merged: the same metrics as one accumulator given every
 * element, whichever half holds the worst or the first non-finite element. */
Test(compare, two_halves_merged__same_metrics_as_one_accumulator) {
    const double x[] = {1.0, 3.0, NAN, 2.0, 3.0, INFINITY, 0.5, 4.0};
    const double r[] = {0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0};
    compare_accumulator whole, first, second;
    compare_begin(&whole, 8);
    compare_begin(&first, 8);
    compare_begin(&second, 8);
    for (int64_t i = 0; i < 8; i++) {
        compare_add(&whole, i, x[i], r[i], i != 6);
        compare_add(i < 4 ? &first : &second, i, x[i], r[i], i != 6);
    }
    compare_merge(&second, &first); /* in either order: the later half first */
    compare_metrics a, b;
    compare_finish(&whole, &a);
    compare_finish(&second, &b);
    cr_assert_eq(b.worst_index, a.worst_index,
                 "the first error of 3 (index 1), in the half merged in");
    cr_assert_eq(b.worst_index, 1);
    cr_assert_eq(b.first_nonfinite, 2, "the lowest index, from the half merged in");
    cr_assert_eq(b.nonfinite, 2);
    cr_assert_eq(b.compared, a.compared);
    cr_assert_eq(b.excluded, 1);
    /* the squared errors 1, 9, 1 | 9, 9 add in another grouping: all integers, exact either way */
    cr_assert(b.relative_l2 == a.relative_l2, "%a against %a", b.relative_l2, a.relative_l2);
}

Test(compare, include_mask__excluded_elements_do_not_enter_the_error) {
    /* the example plus an element with error 100 that the mask excludes */
    const float x[5] = {3.0f, 4.0f, 100.0f, 1.5f, -2.0f};
    const double r[5] = {3.0, 4.0, 0.0, 0.0, 0.0};
    const uint8_t include[5] = {1, 1, 0, 1, 1};
    compare_metrics m;
    compare_float32(&m, x, r, 5, include);
    cr_assert_eq(m.count, 5);
    cr_assert_eq(m.excluded, 1);
    cr_assert_eq(m.compared, 4);
    cr_assert_eq(m.max_abs, 2.0);
    cr_assert_eq(m.error_norm, 2.5);
    cr_assert_eq(m.reference_norm, 5.0);
    cr_assert_eq(m.relative_l2, 0.5);
    cr_assert_eq(m.worst_index, 4);
}

Test(compare, nan_at_included_position__counted_and_kept_out_of_the_norms) {
    const float x[4] = {3.0f, NAN, 4.0f, 1.0f};
    const double r[4] = {3.0, 1.0, 4.0, 1.0};
    compare_metrics m;
    compare_float32(&m, x, r, 4, NULL);
    cr_assert_eq(m.nonfinite, 1);
    cr_assert_eq(m.first_nonfinite, 1);
    cr_assert_eq(m.compared, 4);
    cr_assert_eq(m.max_abs, 0.0);
    cr_assert(isfinite(m.error_norm));
    cr_assert_eq(m.relative_l2, 0.0, "computed from the finite elements, not NaN");
    cr_assert_neq(m.worst_index, 1);
}

Test(compare, nan_at_excluded_position__counted_as_nonfinite) {
    const float x[4] = {3.0f, 4.0f, NAN, 0.0f};
    const double r[4] = {3.0, 4.0, 0.0, 0.0};
    const uint8_t include[4] = {1, 1, 0, 1};
    compare_metrics m;
    compare_float32(&m, x, r, 4, include);
    cr_assert_eq(m.nonfinite, 1);
    cr_assert_eq(m.first_nonfinite, 2);
    cr_assert_eq(m.excluded, 1);
    cr_assert_eq(m.compared, 3);
    cr_assert_eq(m.relative_l2, 0.0);
}

Test(compare, inf_at_included_and_excluded_positions__counted_first_is_lowest_index) {
    const float x[6] = {1.0f, 2.0f, INFINITY, 4.0f, 5.0f, -INFINITY};
    const double r[6] = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
    const uint8_t include[6] = {1, 1, 0, 1, 1, 1};
    compare_metrics m;
    compare_float32(&m, x, r, 6, include);
    cr_assert_eq(m.nonfinite, 2);
    cr_assert_eq(m.first_nonfinite, 2);
    cr_assert_eq(m.max_abs, 0.0);
    cr_assert(isfinite(m.relative_l2));
}

Test(compare, nonfinite_reference__counted_too) {
    const double x[3] = {1.0, 2.0, 3.0};
    const double r[3] = {1.0, NAN, 3.0};
    compare_metrics m;
    compare_float64(&m, x, r, 3, NULL);
    cr_assert_eq(m.nonfinite, 1);
    cr_assert_eq(m.first_nonfinite, 1);
    cr_assert(isfinite(m.relative_l2));
}

Test(compare, nonfinite__fails_even_with_huge_tolerance) {
    float x[20];
    double r[20];
    uint8_t include[20];
    for (int i = 0; i < 20; i++) {
        x[i] = (float)i;
        r[i] = (double)i;
        include[i] = i < 18; /* 18 and 19 are padding */
    }
    x[17] = NAN;
    x[19] = INFINITY;
    compare_metrics m;
    compare_float32(&m, x, r, 20, include);
    cr_assert_eq(m.nonfinite, 2);
    cr_assert_eq(m.first_nonfinite, 17);
    cpparity_tolerance tolerance = make_tolerance(HUGE_TOLERANCE, HUGE_TOLERANCE, HUGE_TOLERANCE);
    compare_decision cp = compare_decide(&m, 0.0, 0.0, &tolerance);
    cr_assert_not(cp.passed);
    assert_reason_contains(&cp, "2 non-finite values (first at index 17)");
    compare_decision cp1 = compare_decide(&m, 0.0, NAN, &tolerance);
    cr_assert_not(cp1.passed);
    assert_reason_contains(&cp1, "2 non-finite values (first at index 17)");
}

Test(compare, empty_tensor__nothing_compared) {
    compare_metrics m;
    compare_float32(&m, NULL, NULL, 0, NULL);
    cr_assert_eq(m.count, 0);
    cr_assert_eq(m.compared, 0);
    cr_assert_eq(m.excluded, 0);
    cr_assert_eq(m.nonfinite, 0);
    cr_assert_eq(m.first_nonfinite, -1);
    cr_assert_eq(m.max_abs, 0.0);
    cr_assert_eq(m.error_norm, 0.0);
    cr_assert_eq(m.reference_norm, 0.0);
    cr_assert_eq(m.relative_l2, 0.0);
    cr_assert_not(m.absolute);
    cr_assert_eq(m.worst_index, -1);
}

Test(compare, all_excluded__nothing_compared) {
    const float x[3] = {10.0f, 20.0f, 30.0f};
    const double r[3] = {1.0, 2.0, 3.0};
    const uint8_t include[3] = {0, 0, 0};
    compare_metrics m;
    compare_float32(&m, x, r, 3, include);
    cr_assert_eq(m.count, 3);
    cr_assert_eq(m.compared, 0);
    cr_assert_eq(m.excluded, 3);
    cr_assert_eq(m.max_abs, 0.0);
    cr_assert_eq(m.error_norm, 0.0);
    cr_assert_eq(m.reference_norm, 0.0);
    cr_assert_eq(m.relative_l2, 0.0);
    cr_assert_not(m.absolute);
    cr_assert_eq(m.worst_index, -1);
}

Test(compare, zero_reference__relative_l2_is_absolute_norm) {
    /* ‖x − r‖ = sqrt(3² + 4²) = 5 against a zero reference */
    const float x[3] = {3.0f, 0.0f, -4.0f};
    const double r[3] = {0.0, 0.0, 0.0};
    compare_metrics m;
    compare_float32(&m, x, r, 3, NULL);
    cr_assert_eq(m.reference_norm, 0.0);
    cr_assert_eq(m.error_norm, 5.0);
    cr_assert_eq(m.relative_l2, 5.0);
    cr_assert(m.absolute);
    cr_assert_eq(m.max_abs, 4.0);
    cr_assert_eq(m.worst_index, 2);
}

Test(compare, float64__same_metrics_as_float32_on_representable_values) {
    const double x[4] = {3.0, 4.0, 1.5, -2.0};
    compare_metrics m;
    compare_float64(&m, x, example_r, 4, NULL);
    assert_example_metrics(&m);
}

Test(compare, float64__keeps_differences_below_float32_precision) {
    /* 1 + 2⁻⁴⁰ is exact in double but rounds to 1 in float32 */
    const double x[1] = {1.0 + ldexp(1.0, -40)};
    const double r[1] = {1.0};
    compare_metrics m;
    compare_float64(&m, x, r, 1, NULL);
    cr_assert_eq(m.max_abs, ldexp(1.0, -40));
    cr_assert_eq(m.relative_l2, ldexp(1.0, -40));
}

Test(compare, coordinates__one_dimension) {
    const int64_t shape[1] = {10};
    int64_t coordinates[1] = {-1};
    compare_coordinates(7, 1, shape, coordinates);
    cr_assert_eq(coordinates[0], 7);
}

Test(compare, coordinates__three_dimensions_row_major) {
    const int64_t shape[3] = {2, 3, 4};
    int64_t c[3];
    compare_coordinates(13, 3, shape, c); /* 13 = 1·12 + 0·4 + 1 */
    cr_assert(c[0] == 1 && c[1] == 0 && c[2] == 1, "got (%lld, %lld, %lld)", (long long)c[0],
              (long long)c[1], (long long)c[2]);
    compare_coordinates(23, 3, shape, c); /* the last element */
    cr_assert(c[0] == 1 && c[1] == 2 && c[2] == 3);
    for (int64_t index = 0; index < 24; index++) {
        compare_coordinates(index, 3, shape, c);
        cr_assert_eq((c[0] * 3 + c[1]) * 4 + c[2], index, "index %lld", (long long)index);
    }
}

/* The decision tests use float32's default values: ratio 2 (tolerances.md: outputs get 2× the
 * naive baseline's error), floor 1e-6 (float32 summation-order noise, tolerance.c), ceiling 1e-4
 * (the float32 baseline against float64, tolerance.c). */
#define RATIO 2.0
#define FLOOR 1e-6
#define CEILING 1e-4

Test(compare, decide__under_the_naive_limit_passes) {
    cpparity_tolerance tolerance = make_tolerance(RATIO, FLOOR, CEILING);
    /* limit = 2 × 6e-7 + 1e-6 = 2.2e-6, well above 1.2e-7; cp = 1 (no cp 1 error) */
    compare_metrics m = metrics_with_error(1.2e-7);
    compare_decision d = compare_decide(&m, 6e-7, NAN, &tolerance);
    cr_assert(d.passed, "%s", d.reason);
    cr_assert_float_eq(d.limit, 2.2e-6, 1e-20, "limit %g", d.limit); /* 1e-20: rounding only */
    cr_assert(isnan(d.cp1_limit), "no CP-only limit at cp 1");
    assert_reason_contains(&d, "error 1.20e-07 <= limit 2.20e-06");
}

Test(compare, decide__exactly_at_limit_passes_just_over_fails) {
    /* dyadic values so the limit is exact: ratio 2 × naive 2⁻²⁰ + floor 2⁻¹⁹ = 2⁻¹⁸ */
    cpparity_tolerance tolerance = make_tolerance(2.0, ldexp(1.0, -19), CEILING);
    double naive = ldexp(1.0, -20);
    compare_metrics at = metrics_with_error(ldexp(1.0, -18));
    compare_decision d = compare_decide(&at, naive, NAN, &tolerance);
    cr_assert_eq(d.limit, ldexp(1.0, -18));
    cr_assert(d.passed, "%s", d.reason);
    compare_metrics over = metrics_with_error(nextafter(ldexp(1.0, -18), 1.0));
    d = compare_decide(&over, naive, NAN, &tolerance);
    cr_assert_not(d.passed, "%s", d.reason);
}

Test(compare, decide__over_the_naive_limit_fails_with_the_numbers) {
    cpparity_tolerance tolerance = make_tolerance(RATIO, FLOOR, CEILING);
    compare_metrics m = metrics_with_error(3.1e-5); /* over 2.2e-6, though under the ceiling */
    compare_decision d = compare_decide(&m, 6e-7, NAN, &tolerance);
    cr_assert_not(d.passed);
    assert_reason_contains(&d, "error 3.10e-05 > limit 2.20e-06 = 2 x naive 6.00e-07 + floor "
                               "1.00e-06");
}

Test(compare, decide_cp__within_naive_but_over_the_cp1_limit_fails_as_cp_only) {
    cpparity_tolerance tolerance = make_tolerance(RATIO, FLOOR, CEILING);
    /* naive limit 2 × 5e-6 + 1e-6 = 1.1e-5 holds 8e-6; the cp 1 run erred 1e-6 only, so its
     * limit 2 × 1e-6 + 1e-6 = 3e-6 does not: a deviation that only CP adds */
    compare_metrics m = metrics_with_error(8e-6);
    compare_decision d = compare_decide(&m, 5e-6, 1e-6, &tolerance);
    cr_assert_not(d.passed);
    cr_assert_float_eq(d.cp1_limit, 3e-6, 1e-20, "cp1 limit %g", d.cp1_limit); /* rounding */
    assert_reason_contains(&d, "CP only: error 8.00e-06 > 3.00e-06 = 2 x cp 1 error 1.00e-06");
    d = compare_decide(&m, 5e-6, 4e-6, &tolerance); /* cp 1 limit 9e-6: both rules hold */
    cr_assert(d.passed, "%s", d.reason);
    assert_reason_contains(&d, "and the cp 1 limit");
}

Test(compare, decide__naive_over_its_ceiling_fails_whatever_the_error) {
    /* the baseline itself errs 2e-4 > ceiling 1e-4: the harness is at fault, nothing passes;
     * the huge ratio and floor must not rescue it */
    cpparity_tolerance tolerance = make_tolerance(HUGE_TOLERANCE, HUGE_TOLERANCE, CEILING);
    compare_metrics m = metrics_with_error(0.0);
    compare_decision d = compare_decide(&m, 2e-4, NAN, &tolerance);
    cr_assert_not(d.passed);
    assert_reason_contains(&d, "naive baseline's own error 2.00e-04 is over its ceiling 1.00e-04");
    d = compare_decide(&m, CEILING, NAN, &tolerance); /* exactly the ceiling: the rule is <= */
    cr_assert(d.passed, "%s", d.reason);
}

Test(compare, decide__nan_error_fails) {
    cpparity_tolerance tolerance = make_tolerance(HUGE_TOLERANCE, HUGE_TOLERANCE, HUGE_TOLERANCE);
    compare_metrics m = metrics_with_error(NAN);
    compare_decision d = compare_decide(&m, 1e-6, 1e-6, &tolerance);
    cr_assert_not(d.passed);
    assert_reason_contains(&d, "NaN");
}

Test(compare, decide__nan_naive_error_fails) {
    cpparity_tolerance tolerance = make_tolerance(HUGE_TOLERANCE, HUGE_TOLERANCE, HUGE_TOLERANCE);
    compare_metrics m = metrics_with_error(0.0);
    compare_decision d = compare_decide(&m, NAN, NAN, &tolerance);
    cr_assert_not(d.passed);
    assert_reason_contains(&d, "naive baseline's own error nan");
}

Test(compare, decide__metrics_from_compare_feed_the_rule) {
    /* the worked example has relative L2 0.5; ratio 2 and floor 0.125 are dyadic so the limits
     * below are exact; the ceiling 1 holds the naive errors used */
    compare_metrics m;
    compare_float32(&m, example_x, example_r, 4, NULL);
    cpparity_tolerance tolerance = make_tolerance(2.0, 0.125, 1.0);
    compare_decision d = compare_decide(&m, 0.1875, NAN, &tolerance); /* 2·0.1875+0.125 = 0.5 */
    cr_assert(d.passed, "%s", d.reason);
    d = compare_decide(&m, 0.125, NAN, &tolerance); /* 2·0.125+0.125 = 0.375 < 0.5 */
    cr_assert_not(d.passed, "%s", d.reason);
}
