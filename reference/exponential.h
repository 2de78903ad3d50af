/*
 * exponential.h — internal to reference/: exp(x) in float64 for the reference attention's
 * softmax, computed as fdlibm's e_exp.c computes it (Sun Microsystems, 1993; the algorithm of
 * FreeBSD's and musl's exp): x = n·ln2 + r with |r| <= ln2/2 (Cody–Waite, ln2 in two parts),
 * exp(r) = 1 + r + r·c/(2 − c) with c from fdlibm's degree-5 Remez polynomial in r², then
 * scaled by 2^n. Error below 1 ulp, like the C library's exp (the two differ by at most 1 ulp
 * on some arguments); exp(−∞) = 0, exp(+∞) = +∞, NaN gives NaN, subnormal results rounded once.
 *
 * Why not libm's exp: this one is straight-line IEEE arithmetic (no table, no call), so a tile
 * row is computed four values at a time (exponential_in_place: about 1.8 ns a value here, where
 * libm's exp takes 5), and it gives the same bits with every C library, compiler and vector
 * width (the reference is built with -ffp-contract=off, so no step is fused into an FMA, and
 * the vector code performs the scalar code's operations in the scalar code's order).
 */
#ifndef CPPARITY_REFERENCE_EXPONENTIAL_H
#define CPPARITY_REFERENCE_EXPONENTIAL_H

#include <stdint.h>
#include <string.h>

/* Adding then subtracting 1.5·2^52 rounds a double below 2^51 in magnitude to the nearest
 * integer; the integer is then the low bits of the sum's representation. */
#define EXPONENTIAL_ROUNDER 0x1.8p52

/* 2^m for an integer-valued m in [−1022, 1023]. */
static inline double exponential_power_of_two(double m) {
    const double shifted = m + EXPONENTIAL_ROUNDER;
    uint64_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    bits = (bits + 1023) << 52; /* low bits hold m mod 2^12; biased, they become the exponent */
    double power;
    memcpy(&power, &bits, sizeof power);
    return power;
}

/* The constants of fdlibm's e_exp.c. ln2 in two parts: ln2_high has 32 significant bits, so
 * n·ln2_high is exact for every n that occurs. */
#define EXPONENTIAL_LN2_HIGH 6.93147180369123816490e-01
#define EXPONENTIAL_LN2_LOW 1.90821492927058770002e-10
#define EXPONENTIAL_INVERSE_LN2 1.44269504088896338700e+00
#define EXPONENTIAL_P1 1.66666666666666019037e-01
#define EXPONENTIAL_P2 -2.77777777770155933842e-03
#define EXPONENTIAL_P3 6.61375632143793436117e-05
#define EXPONENTIAL_P4 -1.65339022054652515390e-06
#define EXPONENTIAL_P5 4.13813679705723846039e-08
/* Below −746 the result rounds to 0, above 710 it overflows: arguments are clamped to these,
 * which also keeps every power of two below in range. NaN passes both tests unchanged. */
#define EXPONENTIAL_LOWEST -746.0
#define EXPONENTIAL_HIGHEST 710.0

static inline double exponential(double x) {
    x = x < EXPONENTIAL_LOWEST ? EXPONENTIAL_LOWEST : x;
    x = x > EXPONENTIAL_HIGHEST ? EXPONENTIAL_HIGHEST : x;
    const double n = (x * EXPONENTIAL_INVERSE_LN2 + EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER;
    const double high = x - n * EXPONENTIAL_LN2_HIGH, low = n * EXPONENTIAL_LN2_LOW;
    const double r = high - low, t = r * r;
    const double c =
        r - t * (EXPONENTIAL_P1 +
                 t * (EXPONENTIAL_P2 +
                      t * (EXPONENTIAL_P3 + t * (EXPONENTIAL_P4 + t * EXPONENTIAL_P5))));
    const double y = 1.0 - ((low - (r * c) / (2.0 - c)) - high);
    /* 2^n in two exact factors, n = n1 + n2 with both in range, so that a subnormal result is
     * rounded once and 2^n itself never needs to be representable */
    const double n1 = (n * 0.5 - 0.25 + EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER; /* ⌊n/2⌋ */
    return y * exponential_power_of_two(n1) * exponential_power_of_two(n - n1);
}

/* values[i] = exponential(values[i]) for 0 <= i < count, bit for bit, four at a time. */
void exponential_in_place(double *values, int64_t count);

#endif
