/*
 * kernel_cpu_loops.h — internal to the cpu-f32 kernel (kernel_cpu.c) and its tests: the loops of
 * one (query tile, key tile, head), over tiles of at most MAX_TILE rows copied side by side into
 * cache, in vector lanes of eight floats:
 *   transpose_tile, pack_rows          a key or value tile transposed, a tile's rows packed;
 *   rows_times_tile                    two query rows against a transposed tile (scores, dp);
 *   add_weighted_rows                  weighted rows added to one or two outputs (out, dq, dk, dv),
 *                                      rows whose use flag is 0 skipped, never multiplied by 0;
 *   row_dot                            a dot product with a lane's arithmetic (δ);
 *   exponentials                       e^x of a tile row's values.
 * The last four exist once per instruction set: plain C loops over arrays (a multiply then an
 * add; ISO C never fuses them behind one's back), which the compiler vectorizes at the CPU's
 * native width and also compiles for AVX2 alone (no FMA: the same bits); and, on x86-64, vector
 * code with explicit fused multiply-adds (one rounding per step, kernel_cpu_lanes.h), which
 * tile_loops_for_this_cpu chooses where the CPU has AVX2 and FMA. On one CPU every call takes the
 * same path, so results are deterministic; each output element adds its terms one by one in a
 * fixed order, whatever the rows beside it.
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_CPU_LOOPS_H
#define CPPARITY_DISTRIBUTED_KERNEL_CPU_LOOPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

enum {
    MAX_TILE = 32, /* the largest tile (scores of one key tile live on the stack) */
    LANES = 8,     /* float32 lanes of a vector (MAX_TILE is four of them) */
};

/* Eight float32 lanes. Every operation on them is the scalar operation in each lane, so a lane
 * computes what the scalar formula computes and no sum is reassociated. */
typedef float vector8 __attribute__((vector_size(LANES * sizeof(float))));
/* The functions with lane loops, compiled for AVX2 too and chosen by the CPU at load time (eight
 * lanes are one register there, two elsewhere). AVX2 alone has no FMA, so both copies give the
 * same bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define LANE_FUNCTION __attribute__((target_clones("avx2", "default")))
#else
#define LANE_FUNCTION
#endif
typedef int32_t int32x8 __attribute__((vector_size(LANES * sizeof(int32_t))));
/* x in every lane; mask ? a : b lane by lane (mask lanes all ones or all zeros) */
#define KERNEL_SPLAT(x) ((vector8){(x), (x), (x), (x), (x), (x), (x), (x)})
#define KERNEL_SELECT(mask, a, b) ((vector8)(((mask) & (int32x8)(a)) | (~(mask) & (int32x8)(b))))
#define LOAD(vector, from) memcpy(&(vector), (from), sizeof(vector))
#define STORE(to, vector) memcpy((to), &(vector), sizeof(vector))

/* transposed[i·MAX_TILE + j] = rows[j·row_stride + i] for the tile's count rows j and each of
 * their n elements i; the columns j from count to MAX_TILE are 0. Each row is read once, in
 * order; the columns written lie in cache. */
LANE_FUNCTION static void transpose_tile(float *restrict transposed, const float *restrict rows,
                                         int64_t row_stride, int64_t count, int64_t n) {
    for (int64_t j = 0; j < count; j++) {
        const float *row = rows + j * row_stride;
        for (int64_t i = 0; i < n; i++) {
            transposed[i * MAX_TILE + j] = row[i];
        }
    }
    for (int64_t i = 0; count < MAX_TILE && i < n; i++) {
        memset(transposed + i * MAX_TILE + count, 0, (size_t)(MAX_TILE - count) * sizeof(float));
    }
}

/* packed[j·n + i] = rows[j·row_stride + i] for count rows of n elements: a tile's rows side by
 * side, since rows a head apart in the tensor (a multiple of 4 KiB at common sizes) would share
 * the first-level cache's sets while the tile is read again and again. */
static void pack_rows(float *restrict packed, const float *restrict rows, int64_t row_stride,
                      int64_t count, int64_t n) {
    for (int64_t j = 0; j < count; j++) {
        memcpy(packed + j * n, rows + j * row_stride, (size_t)n * sizeof(float));
    }
}

/* The use flags of a second output that takes no row (add_weighted_rows with y1 NULL). */
static const unsigned char no_rows[MAX_TILE * MAX_TILE];

/* The kernel's exponential (exponentials, both instruction sets): e^x = 2^n · e^r with
 * n = round(x · log2 e) by adding and subtracting 1.5 · 2^23, r = x − n · ln 2 with ln 2 in two
 * parts (the first product exact), e^r from Cephes' expf polynomial; libm's expf outside
 * [EXP_LOWEST, EXP_HIGHEST], where 2^n would leave the normal range, and for NaN. */
#define EXP_LOWEST (-87.0f)
#define EXP_HIGHEST 88.0f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_SHIFTER 12582912.0f
#define EXP_LN2_HIGH (-0.693359375f)
#define EXP_LN2_LOW 2.12194440e-4f
#define EXP_C0 1.9875691500e-4f
#define EXP_C1 1.3981999507e-3f
#define EXP_C2 8.3334519073e-3f
#define EXP_C3 4.1665795894e-2f
#define EXP_C4 1.6666665459e-1f
#define EXP_C5 5.0000001201e-1f

/* values[j] = libm's expf(original[j]) where original[j] is outside the polynomial's range. */
static void exponentials_outside(float *values, const float *original) {
    for (int j = 0; j < MAX_TILE; j++) {
        if (!(original[j] >= EXP_LOWEST && original[j] <= EXP_HIGHEST)) {
            values[j] = expf(original[j]);
        }
    }
}

/* The plain loops: every lane a scalar loop over arrays of MAX_TILE (or 32) floats, which the
 * compiler vectorizes at its CPU's native width (SSE2, AVX2 without FMA, NEON, ...) with the
 * accumulators in the first-level cache. They compute what kernel_cpu_lanes.h's vector code
 * computes, with a multiply then an add where it fuses (the contract of each is in that file). */
LANE_FUNCTION static void two_rows_times_tile_generic(float *restrict products0,
                                                      float *restrict products1, const float *row0,
                                                      const float *row1,
                                                      const float *restrict transposed, int64_t n) {
    float sums0[MAX_TILE] = {0}, sums1[MAX_TILE] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float x = row0[i], y = row1[i];
        const float *column = transposed + i * MAX_TILE;
        for (int j = 0; j < MAX_TILE; j++) {
            sums0[j] += x * column[j];
            sums1[j] += y * column[j];
        }
    }
    memcpy(products0, sums0, sizeof sums0);
    memcpy(products1, sums1, sizeof sums1);
}

/* sums[e] += w · x[e] for e < width: a chunk's weighted row (CHUNK wide: a loop of constant trip
 * count, which the compiler vectorizes at -O2) */
#define KERNEL_GENERIC_ADD_ROW(sums, w, x, width)                                                  \
    do {                                                                                           \
        const float weight = (w);                                                                  \
        if ((width) == CHUNK) {                                                                    \
            for (int e = 0; e < CHUNK; e++) {                                                      \
                (sums)[e] += weight * (x)[e];                                                      \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t e = 0; e < (width); e++) {                                                \
                (sums)[e] += weight * (x)[e];                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

LANE_FUNCTION static void add_weighted_rows_twice_generic(float *restrict y0, float *restrict y1,
                                                          int64_t n, const float *w0,
                                                          const unsigned char *u0, const float *w1,
                                                          const unsigned char *u1, int64_t stride,
                                                          int64_t count, const float *rows,
                                                          int64_t row_stride) {
    enum { CHUNK = 32 };
    const float spare[CHUNK] = {0};
    if (y1 == NULL) { /* count <= MAX_TILE and stride <= MAX_TILE: inside no_rows */
        u1 = no_rows;
        w1 = w0;
    }
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int64_t width = n - i < CHUNK ? n - i : CHUNK;
        float sums0[CHUNK], sums1[CHUNK];
        memcpy(sums0, y0 + i, (size_t)width * sizeof(float));
        memcpy(sums1, y1 != NULL ? y1 + i : spare, (size_t)width * sizeof(float));
        for (int64_t r = 0; r < count; r++) {
            const float *x = rows + r * row_stride + i;
            if (u0[r * stride]) {
                KERNEL_GENERIC_ADD_ROW(sums0, w0[r * stride], x, width);
            }
            if (u1[r * stride]) {
                KERNEL_GENERIC_ADD_ROW(sums1, w1[r * stride], x, width);
            }
        }
        memcpy(y0 + i, sums0, (size_t)width * sizeof(float));
        if (y1 != NULL) {
            memcpy(y1 + i, sums1, (size_t)width * sizeof(float));
        }
    }
}
#undef KERNEL_GENERIC_ADD_ROW

LANE_FUNCTION static float row_dot_generic(const float *a, const float *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        sum = sum + a[i] * b[i];
    }
    return sum;
}

LANE_FUNCTION static void exponentials_generic(float *values) {
    float original[MAX_TILE];
    memcpy(original, values, sizeof original);
    bool outside = false;
    for (int j = 0; j < MAX_TILE; j++) { /* branch-free, so that it vectorizes */
        const bool inside = original[j] >= EXP_LOWEST && original[j] <= EXP_HIGHEST;
        outside |= !inside;
        const float x = inside ? original[j] : 0.0f;
        const float n = (x * EXP_LOG2E + EXP_SHIFTER) - EXP_SHIFTER;
        float r = n * EXP_LN2_HIGH + x;
        r = n * EXP_LN2_LOW + r;
        float p = EXP_C0 * r + EXP_C1;
        p = p * r + EXP_C2;
        p = p * r + EXP_C3;
        p = p * r + EXP_C4;
        p = p * r + EXP_C5;
        p = p * (r * r) + (r + 1.0f);
        const int32_t bits = ((int32_t)n + 127) * (1 << 23);
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        values[j] = p * scale;
    }
    if (outside) {
        exponentials_outside(values, original);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The vector loops (kernel_cpu_lanes.h) with fused multiply-adds, for CPUs with AVX2 and FMA.
 * x in all eight lanes: */
__attribute__((target("avx2,fma"))) static inline vector8 broadcast(float x) {
    return (vector8){x, x, x, x, x, x, x, x};
}
#define KERNEL_ROWS_TIMES_TILE two_rows_times_tile_fused
#define KERNEL_ADD_WEIGHTED_ROWS add_weighted_rows_twice_fused
#define KERNEL_ROW_DOT row_dot_fused
#define KERNEL_EXPONENTIALS exponentials_fused
#define KERNEL_LANES_MULTIPLY_ADD(a, b, c) __builtin_ia32_vfmaddps256((a), (b), (c))
#define KERNEL_MULTIPLY_ADD(c, x, b) ((c) = __builtin_ia32_vfmaddps256(broadcast(x), (b), (c)))
#define KERNEL_SCALAR_MULTIPLY_ADD(s, x, b) fmaf((x), (b), (s))
#define KERNEL_LANE_TARGET __attribute__((target("avx2,fma")))
#include "distributed/kernels/kernel_cpu_lanes.h"
#endif

/* The tile loops of one instruction set. */
typedef struct tile_loops {
    void (*rows_times_tile)(float *restrict, float *restrict, const float *, const float *,
                            const float *restrict, int64_t);
    void (*add_weighted_rows)(float *restrict, float *restrict, int64_t, const float *,
                              const unsigned char *, const float *, const unsigned char *, int64_t,
                              int64_t, const float *, int64_t);
    float (*row_dot)(const float *, const float *, int64_t);
    void (*exponentials)(float *);
} tile_loops;

static tile_loops tile_loops_for_this_cpu(bool plain) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!plain && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return (tile_loops){two_rows_times_tile_fused, add_weighted_rows_twice_fused, row_dot_fused,
                            exponentials_fused};
    }
#else
    (void)plain;
#endif
    return (tile_loops){two_rows_times_tile_generic, add_weighted_rows_twice_generic,
                        row_dot_generic, exponentials_generic};
}

#endif
