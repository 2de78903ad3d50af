/*
 * naive_exponential_lanes.h — internal to naive_exponential.c: the array loop of exp, eight float32
 * lanes at a time, included once per instruction set with
 *   NAIVE_EXP_EIGHT    the name of the eight-value function
 *   NAIVE_EXP_ARRAY    the name of the array function
 *   NAIVE_EXP_SHIFTS   the name of the array function with a shift per element
 *   NAIVE_EXP_TARGET   the functions' target attribute (may be empty)
 * Only +, −, × and comparisons of float32 lanes (never fused: the file is built with
 * -ffp-contract=off), so every instruction set gives the same bits.
 */

/* out[0..8) = exp(in[0..8) − shift[0..8)) */
NAIVE_EXP_TARGET static inline __attribute__((always_inline)) void
NAIVE_EXP_EIGHT(float *out, const float *in, const float *shift) {
    vector8 x, y, by;
    memcpy(&x, in, sizeof x);
    memcpy(&by, shift, sizeof by);
    x = x - by;
    const int32x8 not_a_number = x != x;
    const int32x8 over = x > OVERFLOW_BOUND, under = x < UNDERFLOW_BOUND;
    /* the arithmetic below on a bounded, never-NaN argument; the edges are set at the end */
    vector8 bounded = SELECT(not_a_number, (vector8){0}, x);
    bounded = SELECT(over, (vector8){0} + OVERFLOW_BOUND, bounded);
    bounded = SELECT(under, (vector8){0} + UNDERFLOW_BOUND, bounded);
    /* n = round(x / ln 2) (to nearest, by the float's own rounding), r = x − n·ln 2 */
    const vector8 n = (bounded * LOG2_E + ROUNDING) - ROUNDING;
    vector8 r = bounded - n * LN2_HIGH;
    r = r - n * LN2_LOW;
    /* exp(r) = 1 + r + r²·P(r) */
    vector8 p = (vector8){0} + P0;
    p = p * r + P1;
    p = p * r + P2;
    p = p * r + P3;
    p = p * r + P4;
    p = p * r + P5;
    p = p * (r * r) + r;
    p = p + 1.0f;
    /* × 2ⁿ as 2^(n/2) · 2^(n − n/2): both factors normal for n in [−150, 128] */
    const int32x8 whole = __builtin_convertvector(n, int32x8);
    const int32x8 half = whole / 2, rest = whole - half;
    y = (p * (vector8)((half + 127) << 23)) * (vector8)((rest + 127) << 23);
    y = SELECT(over, (vector8){0} + __builtin_inff(), y);
    y = SELECT(under, (vector8){0}, y);
    y = SELECT(not_a_number, x, y);
    memcpy(out, &y, sizeof y);
}

NAIVE_EXP_TARGET static void NAIVE_EXP_ARRAY(float *out, const float *in, int64_t count,
                                             float shift) {
    const float shifts[LANES] = {shift, shift, shift, shift, shift, shift, shift, shift};
    int64_t i = 0;
    for (; i + LANES <= count; i += LANES) {
        NAIVE_EXP_EIGHT(out + i, in + i, shifts);
    }
    if (i < count) { /* the last lanes, padded with zeros */
        float padded[LANES] = {0};
        memcpy(padded, in + i, (size_t)(count - i) * sizeof *padded);
        NAIVE_EXP_EIGHT(padded, padded, shifts);
        memcpy(out + i, padded, (size_t)(count - i) * sizeof *padded);
    }
}

NAIVE_EXP_TARGET static void NAIVE_EXP_SHIFTS(float *out, const float *in, const float *shifts,
                                              int64_t count) {
    int64_t i = 0;
    for (; i + LANES <= count; i += LANES) {
        NAIVE_EXP_EIGHT(out + i, in + i, shifts + i);
    }
    if (i < count) { /* the last lanes, padded with zeros */
        float padded[LANES] = {0}, shift[LANES] = {0};
        memcpy(padded, in + i, (size_t)(count - i) * sizeof *padded);
        memcpy(shift, shifts + i, (size_t)(count - i) * sizeof *shift);
        NAIVE_EXP_EIGHT(padded, padded, shift);
        memcpy(out + i, padded, (size_t)(count - i) * sizeof *padded);
    }
}
