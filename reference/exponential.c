/*
 * exponential.c — exponential() over an array, four values at a time (see exponential.h).
 *
 * GCC/Clang vector extensions: every lane performs exponential()'s operations in its order, so
 * the results are those of the scalar function, bit for bit (tests/test_reference_exponential.c).
 * On x86-64 the loop is also built for AVX2, taken where the CPU has it; the arithmetic, and so
 * the bits, are the same in both copies. (Not target_clones: clang 14 names its dispatcher so that
 * calls from other files do not link.)
 */
#include "exponential.h"

typedef double exponential_lanes __attribute__((vector_size(32)));
typedef int64_t exponential_lane_bits __attribute__((vector_size(32)));

/* lanes where mask is set take `taken`, the others keep `kept` */
#define EXPONENTIAL_SELECT(mask, taken, kept)                                                      \
    ((exponential_lanes)(((exponential_lane_bits)(taken) & (mask)) |                               \
                         ((exponential_lane_bits)(kept) & ~(mask))))

/* 2^m lane by lane, as exponential_power_of_two */
#define EXPONENTIAL_POWER_OF_TWO(m)                                                                \
    ((exponential_lanes)(((exponential_lane_bits)((m) + EXPONENTIAL_ROUNDER) + 1023) << 52))

/* exponential() of four values at `values`, in place. Always inlined, so that each copy of the
 * loop below compiles it for its own instruction set. */
static inline __attribute__((always_inline)) void exponential_four(double *values) {
    const exponential_lanes lowest = {EXPONENTIAL_LOWEST, EXPONENTIAL_LOWEST, EXPONENTIAL_LOWEST,
                                      EXPONENTIAL_LOWEST};
    const exponential_lanes highest = {EXPONENTIAL_HIGHEST, EXPONENTIAL_HIGHEST,
                                       EXPONENTIAL_HIGHEST, EXPONENTIAL_HIGHEST};
    exponential_lanes x;
    memcpy(&x, values, sizeof x);
    x = EXPONENTIAL_SELECT(x < lowest, lowest, x);
    x = EXPONENTIAL_SELECT(x > highest, highest, x);
    const exponential_lanes n =
        (x * EXPONENTIAL_INVERSE_LN2 + EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER;
    const exponential_lanes high = x - n * EXPONENTIAL_LN2_HIGH, low = n * EXPONENTIAL_LN2_LOW;
    const exponential_lanes r = high - low, t = r * r;
    const exponential_lanes c =
        r - t * (EXPONENTIAL_P1 +
                 t * (EXPONENTIAL_P2 +
                      t * (EXPONENTIAL_P3 + t * (EXPONENTIAL_P4 + t * EXPONENTIAL_P5))));
    const exponential_lanes y = 1.0 - ((low - (r * c) / (2.0 - c)) - high);
    const exponential_lanes n1 = (n * 0.5 - 0.25 + EXPONENTIAL_ROUNDER) - EXPONENTIAL_ROUNDER;
    x = y * EXPONENTIAL_POWER_OF_TWO(n1) * EXPONENTIAL_POWER_OF_TWO(n - n1);
    memcpy(values, &x, sizeof x);
}

/* The loop of exponential_in_place, inlined into each copy. */
static inline __attribute__((always_inline)) void exponential_loop(double *values, int64_t count) {
    int64_t i = 0;
    for (; i + 4 <= count; i += 4) {
        exponential_four(values + i);
    }
    for (; i < count; i++) {
        values[i] = exponential(values[i]);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void exponential_loop_avx2(double *values, int64_t count) {
    exponential_loop(values, count);
}
#endif

void exponential_in_place(double *values, int64_t count) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        exponential_loop_avx2(values, count);
        return;
    }
#endif
    exponential_loop(values, count);
}
