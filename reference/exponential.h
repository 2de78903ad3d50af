/*
 * exponential.h — internal to reference/: exp(x) in float64 for the reference attention's
 * softmax. x = n·ln2 + r with |r| <= ln2/2 as fdlibm's e_exp.c reduces it (Cody–Waite, ln2 in two
 * parts, so r is the pair hi − lo), then
 *     exp(r) = 1 + (hi − (lo − (r²/2 + r³·Q(r))))
 * with Q a degree-9 polynomial (a Chebyshev fit of (eʳ − 1 − r − r²/2)/r³ on [−ln2/2, ln2/2],
 * within 8·10⁻¹⁸ of it) evaluated with fused multiply-adds in Estrin's order, and scaled by 2^n.
 * Below 0.84 ulp from the true value (measured against long double expl over 2.6·10⁶ arguments;
 * the C library's exp is within 0.5, so the two differ by at most 1 ulp); exp(−∞) = 0,
 * exp(+∞) = +∞, NaN gives NaN, subnormal results rounded once.
 *
 * Why not libm's exp: this one is straight-line IEEE arithmetic (no table, no call, no division),
 * so a tile row is computed four values at a time (exponential_in_place, about 1.3 ns a value
 * here with AVX2 and FMA, where libm's exp takes 5 to 6), and it gives the same bits with every C
 * library, compiler and vector width: each step is one correctly rounded operation, the fused
 * ones written as fma() (the reference is built with -ffp-contract=off, so no other step is
 * fused), and the vector code performs the scalar code's operations in its order.
 */
#ifndef CPPARITY_REFERENCE_EXPONENTIAL_H
#define CPPARITY_REFERENCE_EXPONENTIAL_H

#include <math.h>
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

/* fdlibm's reduction constants (e_exp.c). ln2 in two parts: ln2_high has 32 significant bits, so
 * n·ln2_high is exact for every n that occurs. */
#define EXPONENTIAL_LN2_HIGH 6.93147180369123816490e-01
#define EXPONENTIAL_LN2_LOW 1.90821492927058770002e-10
#define EXPONENTIAL_INVERSE_LN2 1.44269504088896338700e+00
/* Q(r) ≈ (eʳ − 1 − r − r²/2)/r³ = 1/6 + r/24 + …, the coefficients of r⁰ … r⁹ */
#define EXPONENTIAL_Q0 0.16666666666666669
#define EXPONENTIAL_Q1 0.041666666666666664
#define EXPONENTIAL_Q2 0.008333333333330065
#define EXPONENTIAL_Q3 0.0013888888888886554
#define EXPONENTIAL_Q4 0.00019841269863040545
#define EXPONENTIAL_Q5 2.4801587317135164e-05
#define EXPONENTIAL_Q6 2.7557268480310024e-06
#define EXPONENTIAL_Q7 2.755728298405588e-07
#define EXPONENTIAL_Q8 2.5100375832561234e-08
#define EXPONENTIAL_Q9 2.091122972975856e-09
/* Below −746 the result rounds to 0, above 710 it overflows: arguments are clamped to these,
 * which also keeps every power of two below in range. NaN passes both tests unchanged. */
#define EXPONENTIAL_LOWEST -746.0
#define EXPONENTIAL_HIGHEST 710.0

static inline double exponential(double x) {
    x = x < EXPONENTIAL_LOWEST ? EXPONENTIAL_LOWEST : x;
    x = x > EXPONENTIAL_HIGHEST ? EXPONENTIAL_HIGHEST : x;
    const double n = fma(x, EXPONENTIAL_INVERSE_LN2, EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER;
    const double high = fma(-n, EXPONENTIAL_LN2_HIGH, x), low = n * EXPONENTIAL_LN2_LOW;
    const double r = high - low, t = r * r, t2 = t * t;
    const double q_low =
        fma(t, fma(EXPONENTIAL_Q3, r, EXPONENTIAL_Q2), fma(EXPONENTIAL_Q1, r, EXPONENTIAL_Q0));
    const double q_middle =
        fma(t, fma(EXPONENTIAL_Q7, r, EXPONENTIAL_Q6), fma(EXPONENTIAL_Q5, r, EXPONENTIAL_Q4));
    const double q = fma(t2, fma(t2, fma(EXPONENTIAL_Q9, r, EXPONENTIAL_Q8), q_middle), q_low);
    const double y = 1.0 + (high - (low - fma(t * r, q, t * 0.5)));
    /* 2^n in two exact factors, n = n1 + n2 with both in range, so that a subnormal result is
     * rounded once and 2^n itself never needs to be representable */
    const double n1 = (n * 0.5 - 0.25 + EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER; /* ⌊n/2⌋ */
    return y * exponential_power_of_two(n1) * exponential_power_of_two(n - n1);
}

/* values[i] = exponential(values[i]) for 0 <= i < count, bit for bit, four at a time. */
void exponential_in_place(double *values, int64_t count);

#endif
