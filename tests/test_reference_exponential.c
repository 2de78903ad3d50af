/*
 * test_reference_exponential.c — the reference attention's exp (reference/exponential.h): the
 * four-at-a-time array version gives the scalar version's bits, both stay within 1 ulp of the C
 * library's exp, and the edges (±∞, NaN, underflow to subnormals and 0, overflow) come out as
 * exp's.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exponential.h"
#include "tests/support/test_layouts.h"

/* This exp (below 0.84 ulp from the true value, reference/exponential.h) and glibc's (below 0.5)
 * can differ by one ulp where the true value lies near a rounding boundary, never by more. */
#define ULP_TOLERANCE 1.0

/* |a − b| in units of the last place of b (b finite and non-zero). */
static double ulps(double a, double b) {
    return fabs(a - b) / (nextafter(fabs(b), INFINITY) - fabs(b));
}

Test(exponential, random_arguments__array_equals_scalar_bitwise_and_within_one_ulp_of_libm) {
    enum { COUNT = 200003 }; /* not a multiple of 4: the scalar tail runs too */
    test_random random = {900, 0};
    double *values = malloc(COUNT * sizeof *values), *arguments = malloc(COUNT * sizeof *values);
    for (int64_t i = 0; i < COUNT; i++) {
        /* softmax arguments (s − m <= 0, mostly within −40) and the whole finite range */
        const double u = test_random_signed(&random);
        arguments[i] = i % 3 == 0 ? 750.0 * u : (i % 3 == 1 ? -40.0 * fabs(u) : 1e-3 * u);
        values[i] = arguments[i];
    }
    exponential_in_place(values, COUNT);
    double worst = 0.0;
    for (int64_t i = 0; i < COUNT; i++) {
        const double scalar = exponential(arguments[i]), reference = exp(arguments[i]);
        cr_assert(memcmp(&scalar, &values[i], sizeof scalar) == 0,
                  "seed 900: exp(%a): array %a, scalar %a", arguments[i], values[i], scalar);
        if (reference != 0.0 && isfinite(reference)) {
            const double error = ulps(scalar, reference);
            worst = error > worst ? error : worst;
            cr_assert_leq(error, ULP_TOLERANCE, "seed 900: exp(%a) = %a, libm %a", arguments[i],
                          scalar, reference);
        } else {
            cr_assert_eq(scalar, reference, "seed 900: exp(%a) = %a, libm %a", arguments[i], scalar,
                         reference);
        }
    }
    cr_log_info("largest difference from libm: %.2f ulp", worst);
    free(values);
    free(arguments);
}

Test(exponential, edges__as_the_c_library) {
    const double edges[] = {-INFINITY, INFINITY, -0.0,    0.0,      -745.2, -745.1, -708.5,
                            -708.3,    709.7,    709.8,   710.0,    -746.0, -1e300, 1e300,
                            1e-300,    -1e-300,  0x1p-30, -0x1p-30, -0.5,   0.5,    -1.0};
    const int64_t count = sizeof edges / sizeof *edges;
    double values[sizeof edges / sizeof *edges];
    memcpy(values, edges, sizeof edges);
    exponential_in_place(values, count);
    for (int64_t i = 0; i < count; i++) {
        const double expected = exp(edges[i]);
        cr_expect(values[i] == expected || ulps(values[i], expected) <= ULP_TOLERANCE,
                  "exp(%a): %a, libm %a", edges[i], values[i], expected);
    }
    double not_a_number[5] = {NAN, 1.0, NAN, -NAN, NAN};
    exponential_in_place(not_a_number, 5);
    cr_expect(isnan(not_a_number[0]) && isnan(not_a_number[2]) && isnan(not_a_number[3]) &&
                  isnan(not_a_number[4]),
              "NaN must stay NaN");
    cr_expect(isnan(exponential(NAN)), "NaN must stay NaN (scalar)");
}

/* Measured worst 0.8325 ulp over 2.6·10⁶ arguments (reference/exponential.h); 0.9 leaves room for
 * arguments not drawn there and still fails a polynomial whose r⁵ coefficient is off in its tenth
 * digit or an evaluation that loses the reduction's low part. long double expl is 2^11 times finer
 * than an ulp of double, so it stands for the true value. */
#define TRUE_VALUE_TOLERANCE 0.9

Test(exponential, softmax_arguments__within_0_9_ulp_of_the_true_value) {
    enum { COUNT = 300001 };
    test_random random = {901, 0};
    double *values = malloc(COUNT * sizeof *values), *arguments = malloc(COUNT * sizeof *values);
    cr_assert(values != NULL && arguments != NULL);
    for (int64_t i = 0; i < COUNT; i++) {
        const double u = fabs(test_random_signed(&random));
        /* the reduced argument's whole range, softmax arguments, and near the fast path's edge */
        arguments[i] = i % 3 == 0 ? 0.36 * (2.0 * u - 1.0) : (i % 3 == 1 ? -40.0 * u : -700.5 + u);
        values[i] = arguments[i];
    }
    exponential_in_place(values, COUNT);
    double worst = 0.0;
    for (int64_t i = 0; i < COUNT; i++) {
        const long double truth = expl((long double)arguments[i]);
        const double nearest = (double)truth;
        const double ulp = nextafter(nearest, INFINITY) - nearest;
        const double error = (double)(fabsl((long double)values[i] - truth) / ulp);
        worst = error > worst ? error : worst;
        cr_assert_leq(error, TRUE_VALUE_TOLERANCE, "seed 901: exp(%a) = %a, %.3f ulp from %La",
                      arguments[i], values[i], error, truth);
    }
    cr_log_info("largest error: %.3f ulp", worst);
    free(values);
    free(arguments);
}
