/*
 * exponential.c — exponential() over an array, four values at a time (see exponential.h).
 *
 * On x86-64 CPUs with AVX2 and FMA, GCC/Clang vector extensions: every lane performs
 * exponential()'s operations in its order (an FMA where it has fma(), which is correctly rounded
 * in both), so the results are those of the scalar function, bit for bit
 * (tests/test_reference_exponential.c). Four arguments whose results are normal numbers
 * (|x| <= 700) take one power of two, which scales them exactly as exponential()'s two factors
 * do; any other group of four goes lane by lane through exponential() itself. Elsewhere the
 * scalar function runs value by value. (Not target_clones: clang 14 names its dispatcher so
 * that calls from other files do not link.)
 */
#include "exponential.h"

#if defined(__x86_64__)
typedef double exponential_lanes __attribute__((vector_size(32)));
typedef int64_t exponential_lane_bits __attribute__((vector_size(32)));
typedef double exponential_unaligned __attribute__((vector_size(32), aligned(8)));

#define FMA(a, b, c) __builtin_ia32_vfmaddpd256((a), (b), (c))
#define SPLAT(value) ((exponential_lanes){(value), (value), (value), (value)})

/* exponential() of four values at `values`, in place. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
exponential_four(double *values) {
    const exponential_lanes x = *(const exponential_unaligned *)values;
    const exponential_lane_bits inside = (x >= SPLAT(-700.0)) & (x <= SPLAT(700.0));
    if (__builtin_ia32_movmskpd256((exponential_lanes)inside) != 0xF) {
        for (int i = 0; i < 4; i++) { /* NaN, ±∞, or a result that is not normal */
            values[i] = exponential(values[i]);
        }
        return;
    }
    const exponential_lanes n =
        FMA(x, SPLAT(EXPONENTIAL_INVERSE_LN2), SPLAT(EXPONENTIAL_ROUNDER)) - EXPONENTIAL_ROUNDER;
    const exponential_lanes high = FMA(-n, SPLAT(EXPONENTIAL_LN2_HIGH), x);
    const exponential_lanes low = n * EXPONENTIAL_LN2_LOW;
    const exponential_lanes r = high - low, t = r * r, t2 = t * t;
    const exponential_lanes q_low = FMA(t, FMA(SPLAT(EXPONENTIAL_Q3), r, SPLAT(EXPONENTIAL_Q2)),
                                        FMA(SPLAT(EXPONENTIAL_Q1), r, SPLAT(EXPONENTIAL_Q0)));
    const exponential_lanes q_middle = FMA(t, FMA(SPLAT(EXPONENTIAL_Q7), r, SPLAT(EXPONENTIAL_Q6)),
                                           FMA(SPLAT(EXPONENTIAL_Q5), r, SPLAT(EXPONENTIAL_Q4)));
    const exponential_lanes q =
        FMA(t2, FMA(t2, FMA(SPLAT(EXPONENTIAL_Q9), r, SPLAT(EXPONENTIAL_Q8)), q_middle), q_low);
    const exponential_lanes y = 1.0 + (high - (low - FMA(t * r, q, t * 0.5)));
    /* 2^n, n in [−1010, 1010]: a normal number, and so is the result */
    const exponential_lanes power =
        (exponential_lanes)(((exponential_lane_bits)(n + EXPONENTIAL_ROUNDER) + 1023) << 52);
    *(exponential_unaligned *)values = y * power;
}

__attribute__((target("avx2,fma"))) static void exponential_loop_lanes(double *values,
                                                                       int64_t count) {
    int64_t i = 0;
    for (; i + 4 <= count; i += 4) {
        exponential_four(values + i);
    }
    for (; i < count; i++) {
        values[i] = exponential(values[i]);
    }
}
#endif

void exponential_in_place(double *values, int64_t count) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        exponential_loop_lanes(values, count);
        return;
    }
#endif
    for (int64_t i = 0; i < count; i++) {
        values[i] = exponential(values[i]);
    }
}
