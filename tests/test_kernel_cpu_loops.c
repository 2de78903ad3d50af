/*
 * test_kernel_cpu_loops.c — the cpu-f32 kernel's tile loops
 * (distributed/kernels/kernel_cpu_loops.h) one by one, on both instruction sets this CPU can run
 * (the plain loops always; the fused ones where it has AVX2 and FMA): each output element against
 * the same sum written as a scalar loop with the path's own arithmetic (bit for bit), rows skipped
 * by their flags, and the exponential against libm.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_cpu_loops.h"

/* The loops of both paths: [0] plain, [1] this CPU's choice (the same as [0] without FMA). */
static tile_loops path(int which) {
    return tile_loops_for_this_cpu(which == 0);
}

/* Whether path `which` fuses its multiply-adds (its loops are not the plain ones). */
static bool fused(int which) {
    return path(which).row_dot != path(0).row_dot;
}

/* s + x · b with the path's arithmetic: one rounding where fused, two elsewhere. */
static float multiply_add(int which, float s, float x, float b) {
    return fused(which) ? fmaf(x, b, s) : s + x * b;
}

static float value(uint64_t *state) { /* uniform in [-1, 1), a small LCG */
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

Test(kernel_cpu_loops, rows_times_tile__each_lane_is_its_own_sum_whatever_row_is_beside_it) {
    enum { N = 45 };
    uint64_t state = 1;
    float rows[3][N], tile_rows[MAX_TILE][N], transposed[N * MAX_TILE];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < N; i++) {
            rows[r][i] = value(&state);
        }
    }
    for (int j = 0; j < MAX_TILE; j++) {
        for (int i = 0; i < N; i++) {
            tile_rows[j][i] = value(&state);
        }
    }
    transpose_tile(transposed, &tile_rows[0][0], N, 29, N); /* 29 rows: columns 29.. are 0 */
    for (int which = 0; which < 2; which++) {
        const tile_loops loops = path(which);
        float first[MAX_TILE], second[MAX_TILE], again[MAX_TILE], other[MAX_TILE];
        loops.rows_times_tile(first, second, rows[0], rows[1], transposed, N);
        loops.rows_times_tile(again, other, rows[2], rows[0], transposed, N);
        for (int j = 0; j < MAX_TILE; j++) {
            float expected = 0.0f, expected_second = 0.0f;
            for (int i = 0; j < 29 && i < N; i++) {
                expected = multiply_add(which, expected, rows[0][i], tile_rows[j][i]);
                expected_second = multiply_add(which, expected_second, rows[1][i], tile_rows[j][i]);
            }
            cr_expect_eq(memcmp(&first[j], &expected, sizeof expected), 0,
                         "path %d lane %d: %a, the sum in order gives %a", which, j, first[j],
                         expected);
            cr_expect_eq(memcmp(&second[j], &expected_second, sizeof expected), 0,
                         "path %d lane %d of the second row", which, j);
            cr_expect_eq(memcmp(&other[j], &first[j], sizeof expected), 0,
                         "path %d lane %d: row 0 beside another row", which, j);
        }
        /* δ with a lane's arithmetic: dout · out where out is key row j has dp_j's bits */
        const float dot = loops.row_dot(rows[0], tile_rows[5], N);
        cr_expect_eq(memcmp(&dot, &first[5], sizeof dot), 0, "path %d: row_dot %a, lane %a", which,
                     dot, first[5]);
    }
}

Test(kernel_cpu_loops, add_weighted_rows__adds_used_rows_in_order_and_skips_the_others) {
    const int64_t lengths[] = {5, 32, 40, 72}; /* a remainder alone, chunks, chunks and more */
    uint64_t state = 7;
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        const int64_t n = lengths[l], count = 11, stride = 3;
        float *rows = malloc((size_t)(count * n) * sizeof(float));
        float weights0[11 * 3], weights1[11 * 3];
        unsigned char use0[11 * 3], use1[11 * 3];
        for (int64_t r = 0; r < count; r++) {
            weights0[r * stride] = value(&state);
            weights1[r * stride] = value(&state);
            use0[r * stride] = r % 3 != 1;
            use1[r * stride] = r % 4 != 2;
            for (int64_t i = 0; i < n; i++) { /* a row neither output uses holds NaN and Inf */
                rows[r * n + i] = !use0[r * stride] && !use1[r * stride] ? (i % 2 ? NAN : INFINITY)
                                                                         : value(&state);
            }
        }
        /* row 1, which only y1 takes (with a positive weight), holds Inf in every fifth element:
         * y1 is +Inf there, y0 must not see it (0 · Inf would make it NaN) */
        weights1[1 * stride] = 0.5f;
        for (int64_t i = 0; i < n; i += 5) {
            rows[1 * n + i] = INFINITY;
        }
        for (int which = 0; which < 2; which++) {
            for (int pair = 0; pair < 2; pair++) {
                float y0[72], y1[72], start0[72], start1[72];
                for (int64_t i = 0; i < n; i++) {
                    start0[i] = y0[i] = value(&state);
                    start1[i] = y1[i] = value(&state);
                }
                path(which).add_weighted_rows(y0, pair ? y1 : NULL, n, weights0, use0, weights1,
                                              use1, stride, count, rows, n);
                for (int64_t i = 0; i < n; i++) {
                    float expected0 = start0[i], expected1 = start1[i];
                    for (int64_t r = 0; r < count; r++) {
                        if (use0[r * stride]) {
                            expected0 = multiply_add(which, expected0, weights0[r * stride],
                                                     rows[r * n + i]);
                        }
                        if (use1[r * stride]) {
                            expected1 = multiply_add(which, expected1, weights1[r * stride],
                                                     rows[r * n + i]);
                        }
                    }
                    cr_expect_eq(memcmp(&y0[i], &expected0, sizeof(float)), 0,
                                 "path %d n %lld pair %d: y0[%lld] %a, expected %a", which,
                                 (long long)n, pair, (long long)i, y0[i], expected0);
                    const float second = pair ? expected1 : start1[i];
                    cr_expect_eq(memcmp(&y1[i], &second, sizeof(float)), 0,
                                 "path %d n %lld pair %d: y1[%lld] %a, expected %a", which,
                                 (long long)n, pair, (long long)i, y1[i], second);
                }
            }
        }
        free(rows);
    }
}

/* Units in the last place between x and the float32 nearest to e^x (float32 spacing at e^x). */
static double ulps_from_exp(float x, float got) {
    const double exact = exp((double)x);
    const float rounded = (float)exact;
    const double spacing = (double)nextafterf(rounded, INFINITY) - (double)rounded;
    return fabs((double)got - exact) / spacing;
}

/* Cephes' expf is within about 1 ulp; 2 ulp is what CUDA's expf promises, and a wrong
 * coefficient or range reduction costs thousands. */
#define EXP_ULPS 2.0

Test(kernel_cpu_loops, exponentials__within_two_ulp_and_libm_outside_the_range) {
    for (int which = 0; which < 2; which++) {
        const tile_loops loops = path(which);
        double worst = 0.0;
        float worst_at = 0.0f;
        for (int64_t start = 0; start < 200000; start += MAX_TILE) {
            float values[MAX_TILE], inputs[MAX_TILE];
            for (int j = 0; j < MAX_TILE; j++) { /* [-87, 88] in 200000 steps */
                inputs[j] = values[j] = -87.0f + 175.0f * (float)(start + j) / 200000.0f;
            }
            loops.exponentials(values);
            for (int j = 0; j < MAX_TILE; j++) {
                const double ulps = ulps_from_exp(inputs[j], values[j]);
                if (ulps > worst) {
                    worst = ulps;
                    worst_at = inputs[j];
                }
            }
        }
        cr_expect_leq(worst, EXP_ULPS, "path %d: %.2f ulp at x = %a", which, worst, worst_at);
        /* one row mixing every case: 0 (exactly 1), small, outside the range, ±∞, NaN */
        const float specials[] = {0.0f,   -0.0f, 1e-7f,      -1e-7f,    -87.5f,   -100.0f,
                                  -104.f, 88.5f, 89.0f,      -INFINITY, INFINITY, NAN,
                                  1.0f,   -1.0f, 0.6931472f, -20.0f};
        float values[MAX_TILE];
        for (int j = 0; j < MAX_TILE; j++) {
            values[j] = specials[j % 16];
        }
        loops.exponentials(values);
        for (int j = 0; j < MAX_TILE; j++) {
            const float x = specials[j % 16];
            if (x == 0.0f) {
                cr_expect_eq(values[j], 1.0f, "path %d: e^0 is %a", which, values[j]);
            } else if (isnan(x)) {
                cr_expect(isnan(values[j]), "path %d: e^NaN is %a", which, values[j]);
            } else if (!(x >= -87.0f && x <= 88.0f)) {
                const float libm = expf(x);
                cr_expect_eq(memcmp(&values[j], &libm, sizeof libm), 0,
                             "path %d: e^%a is %a, libm's %a", which, x, values[j], libm);
            } else {
                cr_expect_leq(ulps_from_exp(x, values[j]), EXP_ULPS, "path %d: e^%a is %a", which,
                              x, values[j]);
            }
        }
    }
}

Test(kernel_cpu_loops, transpose_and_pack__place_every_element) {
    enum { ROWS = 7, N = 37, STRIDE = 50 };
    float source[ROWS * STRIDE], transposed[N * MAX_TILE], packed[ROWS * N];
    for (int i = 0; i < ROWS * STRIDE; i++) {
        source[i] = (float)i;
    }
    memset(transposed, 0xff, sizeof transposed); /* NaN: a column left unwritten shows */
    transpose_tile(transposed, source, STRIDE, ROWS, N);
    pack_rows(packed, source, STRIDE, ROWS, N);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < MAX_TILE; j++) {
            const float expected = j < ROWS ? source[j * STRIDE + i] : 0.0f;
            cr_expect_eq(transposed[i * MAX_TILE + j], expected, "transposed (%d, %d)", i, j);
        }
        for (int j = 0; j < ROWS; j++) {
            cr_expect_eq(packed[j * N + i], source[j * STRIDE + i], "packed (%d, %d)", j, i);
        }
    }
}
