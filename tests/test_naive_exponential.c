/*
 * test_naive_exponential.c — the naive baseline's exponential
 * (harness/judging/naive_exponential.h): faithful (within one unit in the last place of the exact
 * value) wherever the result is a normal float, the edges (±∞, NaN, 0, the overflow and underflow
 * bounds) as said, and an element's bits the same wherever it sits in the array, whether the
 * array is computed in place, and whether its shift is one for the array or its own.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness/judging/naive_exponential.h"

static float from_bits(uint32_t bits) {
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* |y − exp(x)| in units of the float spacing at exp(x) (exp in double, exact enough here). */
static double ulps(float y, float x) {
    const double exact = exp((double)x);
    int exponent = 0;
    frexp(exact, &exponent);
    return fabs((double)y - exact) / ldexp(1.0, exponent - 24);
}

Test(naive_exponential, every_97th_float_with_a_normal_result__within_one_ulp) {
    enum { CHUNK = 4096 };
    static float in[CHUNK], out[CHUNK];
    /* x from the smallest with a normal exp (ln FLT_MIN) to the largest with a finite one, every
     * 97th float of both signs: 23 million values; the whole range of 2.2 billion floats was
     * measured once at 0.990 units */
    const float low = -87.33654f, high = 88.72283f;
    double worst = 0.0;
    float worst_x = 0.0f;
    for (int side = 0; side < 2; side++) {
        uint32_t bits = side == 0 ? 0x80000000u : 0u, end = 0;
        const float edge = side == 0 ? low : high;
        memcpy(&end, &edge, sizeof end);
        while (bits <= end) {
            int count = 0;
            for (; count < CHUNK && bits <= end; count++, bits += 97) {
                in[count] = from_bits(bits);
            }
            naive_exponential(out, in, count, 0.0f);
            for (int i = 0; i < count; i++) {
                const double error = ulps(out[i], in[i]);
                if (!(error <= worst)) {
                    worst = error;
                    worst_x = in[i];
                }
            }
        }
    }
    /* the bound the header states: faithful rounding */
    cr_assert(worst < 1.0, "exp(%a) is %.3f units in the last place away", (double)worst_x, worst);
}

Test(naive_exponential, edges__as_said) {
    const float in[] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 88.8f, -104.0f, -100.0f, 1.0f};
    float out[sizeof in / sizeof *in];
    naive_exponential(out, in, sizeof in / sizeof *in, 0.0f);
    cr_assert(out[0] == 0.0f && !signbit(out[0]), "exp(-inf) = %a", (double)out[0]);
    cr_assert(isinf(out[1]) && out[1] > 0.0f, "exp(+inf) = %a", (double)out[1]);
    cr_assert(isnan(out[2]), "exp(NaN) = %a", (double)out[2]);
    cr_assert(out[3] == 1.0f && out[4] == 1.0f, "exp(±0) = %a, %a", (double)out[3], (double)out[4]);
    cr_assert(isinf(out[5]), "exp(88.8) = %a, above FLT_MAX", (double)out[5]);
    cr_assert(out[6] == 0.0f, "exp(-104) = %a, below half the smallest subnormal", (double)out[6]);
    /* a subnormal result: within one unit of the subnormal spacing 2^-149 */
    cr_assert(fabs((double)out[7] - exp(-100.0)) <= ldexp(1.0, -149), "exp(-100) = %a",
              (double)out[7]);
    cr_assert(ulps(out[8], 1.0f) < 1.0, "exp(1) = %a", (double)out[8]);
    /* the shift is subtracted first: exp(x − shift) */
    const float shifted[] = {3.0f, -INFINITY};
    float got[2];
    naive_exponential(got, shifted, 2, 3.0f);
    cr_assert(got[0] == 1.0f && got[1] == 0.0f, "exp(3 - 3) = %a, exp(-inf - 3) = %a",
              (double)got[0], (double)got[1]);
}

Test(naive_exponential, an_element_s_bits__the_same_at_any_offset_length_and_in_place) {
    enum { COUNT = 41 };
    float in[COUNT], alone[COUNT];
    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)((i * 7919) % 2001 - 1000) / 37.0f;
        naive_exponential(&alone[i], &in[i], 1, 0.25f);
    }
    for (int offset = 0; offset < 9; offset++) {
        for (int length = 1; offset + length <= COUNT; length++) {
            float out[COUNT], copy[COUNT];
            naive_exponential(out, in + offset, length, 0.25f);
            memcpy(copy, in + offset, (size_t)length * sizeof *copy);
            naive_exponential(copy, copy, length, 0.25f);
            for (int i = 0; i < length; i++) {
                cr_assert(memcmp(&out[i], &alone[offset + i], sizeof out[i]) == 0 &&
                              memcmp(&copy[i], &alone[offset + i], sizeof copy[i]) == 0,
                          "element %d of %d at offset %d: %a, in place %a, alone %a", i, length,
                          offset, (double)out[i], (double)copy[i], (double)alone[offset + i]);
            }
        }
    }
}

Test(naive_exponential, with_a_shift_per_element__each_element_s_bits_as_with_its_shift_alone) {
    enum { COUNT = 41 };
    float in[COUNT], shifts[COUNT], alone[COUNT];
    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)((i * 7919) % 2001 - 1000) / 37.0f;
        /* finite shifts, and the −∞ and +∞ whose differences overflow, underflow or are NaN */
        shifts[i] = i % 13 == 5 ? -INFINITY : i % 17 == 3 ? INFINITY : (float)(i % 11) - 5.5f;
        naive_exponential(&alone[i], &in[i], 1, shifts[i]);
    }
    for (int offset = 0; offset < 9; offset++) {
        for (int length = 1; offset + length <= COUNT; length++) {
            float out[COUNT], copy[COUNT];
            naive_exponential_shifts(out, in + offset, shifts + offset, length);
            memcpy(copy, in + offset, (size_t)length * sizeof *copy);
            naive_exponential_shifts(copy, copy, shifts + offset, length);
            for (int i = 0; i < length; i++) {
                cr_assert(memcmp(&out[i], &alone[offset + i], sizeof out[i]) == 0 &&
                              memcmp(&copy[i], &alone[offset + i], sizeof copy[i]) == 0,
                          "element %d of %d at offset %d: %a, in place %a, alone %a", i, length,
                          offset, (double)out[i], (double)copy[i], (double)alone[offset + i]);
            }
        }
    }
}
