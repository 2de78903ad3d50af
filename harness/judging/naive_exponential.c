/* naive_exponential.c — exp(x − shift) in float32, eight lanes at a time (see
 * naive_exponential.h). */
#include "harness/judging/naive_exponential.h"

#include <stdbool.h>
#include <string.h>

enum { LANES = 8 };

typedef float vector8 __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t int32x8 __attribute__((vector_size(LANES * sizeof(int32_t))));

/* Beyond these exp(x) is +∞ (above FLT_MAX) or 0 (below half the smallest subnormal). */
#define OVERFLOW_BOUND 88.72283935546875f
#define UNDERFLOW_BOUND -103.97208404541015625f
/* Cody and Waite: ln 2 = LN2_HIGH + LN2_LOW, LN2_HIGH with 9 significant bits so that n·LN2_HIGH
 * is exact; ROUNDING = 1.5·2²³ rounds a float to an integer by addition. */
#define LOG2_E 1.44269504088896341f
#define ROUNDING 12582912.0f
#define LN2_HIGH 0.693359375f
#define LN2_LOW -2.12194440e-4f
/* Cephes' expf polynomial: exp(r) ≈ 1 + r + r²·(P5 + P4·r + ... + P0·r⁵), |r| ≤ ln 2 / 2 */
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

/* mask ? a : b, lane by lane (mask lanes all ones or all zeros); a macro, as a function taking
 * vectors would change the ABI between the generic and the AVX2 copy */
#define SELECT(mask, a, b) ((vector8)(((mask) & (int32x8)(a)) | (~(mask) & (int32x8)(b))))

#define NAIVE_EXP_EIGHT exp_eight_generic
#define NAIVE_EXP_ARRAY exp_array_generic
#define NAIVE_EXP_SHIFTS exp_shifts_generic
#define NAIVE_EXP_TARGET
#include "harness/judging/naive_exponential_lanes.h"
#undef NAIVE_EXP_EIGHT
#undef NAIVE_EXP_ARRAY
#undef NAIVE_EXP_SHIFTS
#undef NAIVE_EXP_TARGET

#if defined(__x86_64__) && defined(__GNUC__)
#define NAIVE_EXP_EIGHT exp_eight_avx2
#define NAIVE_EXP_ARRAY exp_array_avx2
#define NAIVE_EXP_SHIFTS exp_shifts_avx2
#define NAIVE_EXP_TARGET __attribute__((target("avx2")))
#include "harness/judging/naive_exponential_lanes.h"
#undef NAIVE_EXP_EIGHT
#undef NAIVE_EXP_ARRAY
#undef NAIVE_EXP_SHIFTS
#undef NAIVE_EXP_TARGET
#endif

/* Whether this CPU takes the AVX2 copies (the same bits either way), decided once. */
static bool use_avx2(void) {
    static int decided = -1; /* -1 not yet, then 0 or 1 */
    int avx2 = __atomic_load_n(&decided, __ATOMIC_ACQUIRE);
    if (avx2 < 0) {
        avx2 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
        __atomic_store_n(&decided, avx2, __ATOMIC_RELEASE);
    }
    return avx2 == 1;
}

void naive_exponential(float *out, const float *in, int64_t count, float shift) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx2()) {
        exp_array_avx2(out, in, count, shift);
        return;
    }
#endif
    exp_array_generic(out, in, count, shift);
}

void naive_exponential_shifts(float *out, const float *in, const float *shifts, int64_t count) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx2()) {
        exp_shifts_avx2(out, in, shifts, count);
        return;
    }
#endif
    exp_shifts_generic(out, in, shifts, count);
}
