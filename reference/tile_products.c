/*
 * tile_products.c — C += A·B over tiles, each element one chain of fused multiply-adds (see
 * tile_products.h).
 *
 * On x86-64 CPUs with AVX2 and FMA, groups of 6 rows × 8 columns are held in twelve vector
 * registers across the whole inner loop: per term two loads of a B row, six broadcasts of A and
 * twelve four-lane FMAs. Elsewhere, and for the columns left over, the same chains are made one
 * element at a time with fma(). An FMA is correctly rounded wherever it is computed, so the two
 * give the same bits (tests/test_reference_tile_products.c).
 */
#include "tile_products.h"

#include <math.h>
#include <stddef.h>

static bool force_portable = false;

void tile_products_force_portable(bool portable) {
    force_portable = portable;
}

/* The group of rows starting at row `first` of C: its terms and columns. */
static void group_ranges(const tile_band *bands, tile_band_use use, int64_t group, int64_t columns,
                         int64_t inner, int64_t *column_first, int64_t *column_end,
                         int64_t *inner_first, int64_t *inner_end) {
    *column_first = 0;
    *column_end = columns;
    *inner_first = 0;
    *inner_end = inner;
    if (bands == NULL) {
        return;
    }
    const tile_band band = bands[group];
    if (use == TILE_BANDS_COLUMNS) {
        *column_first = band.first;
        *column_end = band.end;
    } else {
        *inner_first = band.first;
        *inner_end = band.end;
    }
}

/* One element's chain over the terms [x_first, x_end). */
static inline __attribute__((always_inline)) double element_chain(double sum, const double *a,
                                                                  int64_t inner_step,
                                                                  const double *b, int64_t b_stride,
                                                                  int64_t x_first, int64_t x_end) {
    for (int64_t x = x_first; x < x_end; x++) {
        sum = fma(a[x * inner_step], b[x * b_stride], sum);
    }
    return sum;
}

/* The columns [column_first, column_end) of `rows` rows, element by element. */
static inline __attribute__((always_inline)) void
elements(int64_t rows, int64_t column_first, int64_t column_end, int64_t x_first, int64_t x_end,
         tile_factor a, const double *b, int64_t b_stride, double *c, int64_t c_stride,
         bool accumulate) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t column = column_first; column < column_end; column++) {
            double *element = c + r * c_stride + column;
            *element = element_chain(accumulate ? *element : 0.0, a.data + r * a.row_step,
                                     a.inner_step, b + column, b_stride, x_first, x_end);
        }
    }
}

static void product_portable(int64_t rows, int64_t columns, int64_t inner, tile_factor a,
                             const double *b, int64_t b_stride, double *c, int64_t c_stride,
                             const tile_band *bands, tile_band_use use, bool accumulate) {
    for (int64_t first = 0, group = 0; first < rows; first += TILE_PRODUCT_ROWS, group++) {
        const int64_t count = rows - first < TILE_PRODUCT_ROWS ? rows - first : TILE_PRODUCT_ROWS;
        int64_t column_first, column_end, x_first, x_end;
        group_ranges(bands, use, group, columns, inner, &column_first, &column_end, &x_first,
                     &x_end);
        const tile_factor group_a = {a.data + first * a.row_step, a.row_step, a.inner_step};
        elements(count, column_first, column_end, x_first, x_end, group_a, b, b_stride,
                 c + first * c_stride, c_stride, accumulate);
    }
}

#if defined(__x86_64__)
typedef double lanes __attribute__((vector_size(32)));
typedef double unaligned_lanes __attribute__((vector_size(32), aligned(8)));

#define LOAD(address) ((lanes)(*(const unaligned_lanes *)(address)))
#define STORE(address, value) (*(unaligned_lanes *)(address) = (value))
#define FMA(x, y, z) __builtin_ia32_vfmaddpd256((x), (y), (z))

/* `rows` (at most 6, a constant once inlined) rows × `width` (4 or 8) columns at c, held in
 * registers over the terms [x_first, x_end). */
#define LANE_BLOCK(width)                                                                          \
    static inline __attribute__((always_inline, target("avx2,fma"))) void block_##width(           \
        int rows, int64_t x_first, int64_t x_end, tile_factor a, const double *b,                  \
        int64_t b_stride, double *c, int64_t c_stride, bool accumulate) {                          \
        lanes low[TILE_PRODUCT_ROWS], high[TILE_PRODUCT_ROWS];                                     \
        const lanes zero = {0.0, 0.0, 0.0, 0.0};                                                   \
        _Pragma("GCC unroll 6") for (int r = 0; r < rows; r++) {                                   \
            low[r] = accumulate ? LOAD(c + r * c_stride) : zero;                                   \
            high[r] = (width) == 8 && accumulate ? LOAD(c + r * c_stride + 4) : zero;              \
        }                                                                                          \
        for (int64_t x = x_first; x < x_end; x++) {                                                \
            const lanes b_low = LOAD(b + x * b_stride);                                            \
            const lanes b_high = (width) == 8 ? LOAD(b + x * b_stride + 4) : b_low;                \
            const double *column = a.data + x * a.inner_step;                                      \
            _Pragma("GCC unroll 6") for (int r = 0; r < rows; r++) {                               \
                const double value = column[r * a.row_step];                                       \
                const lanes splat = {value, value, value, value};                                  \
                low[r] = FMA(splat, b_low, low[r]);                                                \
                if ((width) == 8) {                                                                \
                    high[r] = FMA(splat, b_high, high[r]);                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 6") for (int r = 0; r < rows; r++) {                                   \
            STORE(c + r * c_stride, low[r]);                                                       \
            if ((width) == 8) {                                                                    \
                STORE(c + r * c_stride + 4, high[r]);                                              \
            }                                                                                      \
        }                                                                                          \
    }
LANE_BLOCK(8)
LANE_BLOCK(4)

/* One group of `rows` rows, its columns in blocks of 8, then 4, then one by one. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
group_lanes(int rows, int64_t column_first, int64_t column_end, int64_t x_first, int64_t x_end,
            tile_factor a, const double *b, int64_t b_stride, double *c, int64_t c_stride,
            bool accumulate) {
    int64_t column = column_first;
    for (; column + 8 <= column_end; column += 8) {
        block_8(rows, x_first, x_end, a, b + column, b_stride, c + column, c_stride, accumulate);
    }
    if (column + 4 <= column_end) {
        block_4(rows, x_first, x_end, a, b + column, b_stride, c + column, c_stride, accumulate);
        column += 4;
    }
    elements(rows, column, column_end, x_first, x_end, a, b, b_stride, c, c_stride, accumulate);
}

/* One group of `count` rows, a constant in each case. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
group_rows(int64_t count, int64_t column_first, int64_t column_end, int64_t x_first, int64_t x_end,
           tile_factor a, const double *b, int64_t b_stride, double *c, int64_t c_stride,
           bool accumulate) {
/* one case of the switch below: group_lanes compiled for `rows` rows */
#define GROUP_ROWS_CASE(rows)                                                                      \
    case rows:                                                                                     \
        group_lanes(rows, column_first, column_end, x_first, x_end, a, b, b_stride, c, c_stride,   \
                    accumulate);                                                                   \
        break;
    switch (count) {
        GROUP_ROWS_CASE(6)
        GROUP_ROWS_CASE(5)
        GROUP_ROWS_CASE(4)
        GROUP_ROWS_CASE(3)
        GROUP_ROWS_CASE(2)
    default:
        group_lanes(1, column_first, column_end, x_first, x_end, a, b, b_stride, c, c_stride,
                    accumulate);
        break;
    }
#undef GROUP_ROWS_CASE
}

__attribute__((target("avx2,fma"))) static void
product_lanes(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
              int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
              tile_band_use use, bool accumulate) {
    for (int64_t first = 0, group = 0; first < rows; first += TILE_PRODUCT_ROWS, group++) {
        const int64_t count = rows - first < TILE_PRODUCT_ROWS ? rows - first : TILE_PRODUCT_ROWS;
        int64_t column_first, column_end, x_first, x_end;
        group_ranges(bands, use, group, columns, inner, &column_first, &column_end, &x_first,
                     &x_end);
        if (column_first >= column_end || (x_first >= x_end && accumulate)) {
            continue; /* (a product into zeros with no term still writes its zeros) */
        }
        const tile_factor group_a = {a.data + first * a.row_step, a.row_step, a.inner_step};
        group_rows(count, column_first, column_end, x_first, x_end, group_a, b, b_stride,
                   c + first * c_stride, c_stride, accumulate);
    }
}

static bool lanes_usable(void) {
    return !force_portable && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

static void product(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
                    int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
                    tile_band_use use, bool accumulate) {
#if defined(__x86_64__)
    if (lanes_usable()) {
        product_lanes(rows, columns, inner, a, b, b_stride, c, c_stride, bands, use, accumulate);
        return;
    }
#endif
    product_portable(rows, columns, inner, a, b, b_stride, c, c_stride, bands, use, accumulate);
}

void tile_product(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
                  int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
                  tile_band_use use) {
    product(rows, columns, inner, a, b, b_stride, c, c_stride, bands, use, true);
}

void tile_product_set(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
                      int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
                      tile_band_use use) {
    product(rows, columns, inner, a, b, b_stride, c, c_stride, bands, use, false);
}

void tile_product_allowed(int64_t rows, int64_t columns, int64_t inner, tile_factor a,
                          const double *b, int64_t b_stride, double *c, int64_t c_stride,
                          const uint8_t *allowed, int64_t allowed_row, int64_t allowed_inner) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t column = 0; column < columns; column++) {
            double sum = c[r * c_stride + column];
            for (int64_t x = 0; x < inner; x++) {
                if (allowed[r * allowed_row + x * allowed_inner]) {
                    sum = fma(a.data[r * a.row_step + x * a.inner_step], b[x * b_stride + column],
                              sum);
                }
            }
            c[r * c_stride + column] = sum;
        }
    }
}
