/*
 * test_bfloat16.c — bfloat16 rounding (distributed/device/bfloat16.h), the per-element logic the
 * CPU model and CUDA code share: round to nearest with ties to even, exact widening, NaN and the
 * infinities kept, overflow to infinity — bit patterns checked exactly, and every one of the
 * 2^16 bfloat16 values surviving a round trip.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "distributed/device/bfloat16.h"

static float from_bits(uint32_t bits) {
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

Test(bfloat16, round_to_nearest_ties_to_even__exact_bit_patterns) {
    const struct {
        uint32_t in;  /* float32 bits */
        uint16_t out; /* expected bfloat16 bits */
        const char *why;
    } cases[] = {
        {0x3f800000u, 0x3f80u, "1.0 is exact"},
        {0x3f808000u, 0x3f80u, "halfway, even below: stays"},
        {0x3f818000u, 0x3f82u, "halfway, odd below: rounds up to even"},
        {0x3f808001u, 0x3f81u, "just past halfway: up"},
        {0x3f807fffu, 0x3f80u, "just below halfway: down"},
        {0xbf808001u, 0xbf81u, "negative: magnitude rounds the same way"},
        {0x7f7fffffu, 0x7f80u, "largest float32 overflows to +infinity"},
        {0x7f800000u, 0x7f80u, "+infinity stays"},
        {0xff800000u, 0xff80u, "-infinity stays"},
        {0x00000001u, 0x0000u, "smallest subnormal rounds to zero"},
        {0x80000000u, 0x8000u, "-0 keeps its sign"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(bf16_from_float(from_bits(cases[i].in)), cases[i].out,
                     "0x%08x: got 0x%04x, expected 0x%04x (%s)", cases[i].in,
                     bf16_from_float(from_bits(cases[i].in)), cases[i].out, cases[i].why);
    }
}

Test(bfloat16, nan__stays_quiet_nan_with_its_sign) {
    const uint16_t positive = bf16_from_float(from_bits(0x7f800001u)); /* signalling, low bit */
    const uint16_t negative = bf16_from_float(from_bits(0xffc00000u));
    cr_assert(isnan(bf16_to_float(positive)), "0x%04x", positive);
    cr_assert(isnan(bf16_to_float(negative)), "0x%04x", negative);
    cr_assert_eq(positive & 0x8000u, 0u);
    cr_assert_eq(negative & 0x8000u, 0x8000u);
    cr_assert_neq(positive & 0x0040u, 0u, "quiet bit set");
}

Test(bfloat16, every_bfloat16_value__round_trips_exactly) {
    for (uint32_t bits = 0; bits <= 0xffffu; bits++) {
        const float value = bf16_to_float((uint16_t)bits);
        if (isnan(value)) {
            cr_assert(isnan(bf16_round(value)));
            continue;
        }
        cr_assert_eq(bf16_from_float(value), bits, "0x%04x changed by a round trip", bits);
    }
}

Test(bfloat16, round__nearest_of_the_two_neighbours) {
    /* deterministic sweep of float32 values: the result is one of the two bfloat16 neighbours
     * and no farther than the other one */
    uint32_t state = 12345u;
    for (int i = 0; i < 100000; i++) {
        state = state * 1664525u + 1013904223u;
        const float x = from_bits((state & 0x7f7fffffu) | (state & 0x80000000u));
        const float rounded = bf16_round(x);
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        const float down = from_bits(bits & 0xffff0000u);
        const float up = from_bits((bits & 0xffff0000u) + 0x10000u);
        cr_assert(rounded == down || rounded == up, "x %a rounded to %a", (double)x,
                  (double)rounded);
        /* past the largest finite bfloat16 the upper neighbour is infinity, which IEEE rounding
         * treats as the next power of two (2^128) when measuring distance */
        const double next = isinf(up) ? copysign(ldexp(1.0, 128), (double)x) : (double)up;
        const double rounded_value = isinf(rounded) ? next : (double)rounded;
        const double distance = fabs(rounded_value - (double)x);
        const double other = fabs((rounded == down ? next : (double)down) - (double)x);
        cr_assert_leq(distance, other, "x %a: %a is not the nearest", (double)x, (double)rounded);
    }
}
