/*
 * test_reference_tile_products.c — the reference attention's tile products
 * (reference/tile_products.h): every element of C is the chain of fused multiply-adds over its
 * terms in increasing order, bit for bit, on the AVX2 + FMA lanes and on the portable loops alike,
 * whatever the shape (groups of rows and blocks of columns with their remainders), the bands and
 * the orientation of A; terms outside a band and masked terms are left out. Bitwise, so no
 * tolerance.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/tile_products.h"
#include "tests/support/test_layouts.h"

/* One product's operands, filled with random values: A both ways, B, C. */
typedef struct operands {
    int64_t rows, columns, inner;
    double *a;         /* (rows, inner) row-major; A read through a tile_factor of either way */
    double *a_columns; /* the same values (inner, rows): A transposed in memory */
    double *b;         /* (inner, columns + 3): a row stride wider than the row */
    double *c;         /* (rows, columns + 5) */
    int64_t b_stride, c_stride;
} operands;

static operands operands_new(int64_t rows, int64_t columns, int64_t inner, uint64_t seed) {
    test_random random = {seed, 0};
    operands o = {rows, columns, inner, NULL, NULL, NULL, NULL, columns + 3, columns + 5};
    o.a = malloc((size_t)(rows * inner) * sizeof(double));
    o.a_columns = malloc((size_t)(rows * inner) * sizeof(double));
    o.b = malloc((size_t)(inner * o.b_stride) * sizeof(double));
    o.c = malloc((size_t)(rows * o.c_stride) * sizeof(double));
    cr_assert(o.a && o.a_columns && o.b && o.c);
    test_random_fill(&random, o.a, rows * inner, 1.0);
    test_random_fill(&random, o.b, inner * o.b_stride, 1.0);
    test_random_fill(&random, o.c, rows * o.c_stride, 1.0);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t x = 0; x < inner; x++) {
            o.a_columns[x * rows + r] = o.a[r * inner + x];
        }
    }
    return o;
}

static void operands_free(operands *o) {
    free(o->a);
    free(o->a_columns);
    free(o->b);
    free(o->c);
}

/* What element (r, column) must be: the chain from `start` over terms [first, end). */
static double chain(const operands *o, int64_t r, int64_t column, double start, int64_t first,
                    int64_t end) {
    double sum = start;
    for (int64_t x = first; x < end; x++) {
        sum = fma(o->a[r * o->inner + x], o->b[x * o->b_stride + column], sum);
    }
    return sum;
}

/* Runs the product on a copy of C, A read row-major or from its transposed copy. */
static double *run(const operands *o, bool transposed, const tile_band *bands, tile_band_use use,
                   bool set) {
    double *c = malloc((size_t)(o->rows * o->c_stride) * sizeof(double));
    cr_assert(c != NULL);
    memcpy(c, o->c, (size_t)(o->rows * o->c_stride) * sizeof(double));
    const tile_factor a =
        transposed ? (tile_factor){o->a_columns, 1, o->rows} : (tile_factor){o->a, o->inner, 1};
    if (set) {
        tile_product_set(o->rows, o->columns, o->inner, a, o->b, o->b_stride, c, o->c_stride, bands,
                         use);
    } else {
        tile_product(o->rows, o->columns, o->inner, a, o->b, o->b_stride, c, o->c_stride, bands,
                     use);
    }
    return c;
}

/* Checks c against the chains, bands applied; the padding columns past `columns` untouched. */
static void expect_chains(const operands *o, const double *c, const tile_band *bands,
                          tile_band_use use, bool set, const char *what) {
    for (int64_t r = 0; r < o->rows; r++) {
        const tile_band band =
            bands != NULL ? bands[r / TILE_PRODUCT_ROWS]
                          : (tile_band){0, use == TILE_BANDS_INNER ? o->inner : o->columns};
        for (int64_t column = 0; column < o->c_stride; column++) {
            const double before = o->c[r * o->c_stride + column];
            double expected = before;
            const bool computed =
                column < o->columns && (use == TILE_BANDS_INNER || bands == NULL ||
                                        (column >= band.first && column < band.end));
            if (computed) {
                const int64_t first = use == TILE_BANDS_INNER && bands != NULL ? band.first : 0;
                const int64_t end = use == TILE_BANDS_INNER && bands != NULL ? band.end : o->inner;
                expected =
                    chain(o, r, column, set ? 0.0 : before, first, end > first ? end : first);
            }
            const double actual = c[r * o->c_stride + column];
            cr_assert(memcmp(&expected, &actual, sizeof actual) == 0,
                      "%s: %lld x %lld x %lld, C[%lld][%lld] = %a, the chain gives %a", what,
                      (long long)o->rows, (long long)o->columns, (long long)o->inner, (long long)r,
                      (long long)column, actual, expected);
        }
    }
}

/* Shapes that reach whole groups of 6 rows and blocks of 8 columns, and every remainder. */
static const int64_t shapes[][3] = {{64, 64, 64}, {1, 1, 1},     {5, 3, 7},  {6, 8, 1},
                                    {13, 29, 17}, {64, 12, 100}, {7, 4, 64}, {63, 65, 9}};

Test(tile_products, every_shape__each_element_is_its_fma_chain_on_both_paths) {
    for (int path = 0; path < 2; path++) {
        tile_products_force_portable(path == 1);
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            operands o = operands_new(shapes[i][0], shapes[i][1], shapes[i][2], 4100 + i);
            for (int transposed = 0; transposed < 2; transposed++) {
                for (int set = 0; set < 2; set++) {
                    double *c = run(&o, transposed, NULL, TILE_BANDS_INNER, set);
                    expect_chains(&o, c, NULL, TILE_BANDS_INNER, set,
                                  path ? "portable loops" : "lanes where the CPU has them");
                    free(c);
                }
            }
            operands_free(&o);
        }
    }
    tile_products_force_portable(false);
}

Test(tile_products, bands__columns_outside_untouched_and_terms_outside_left_out) {
    for (int path = 0; path < 2; path++) {
        tile_products_force_portable(path == 1);
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            operands o = operands_new(shapes[i][0], shapes[i][1], shapes[i][2], 4200 + i);
            const int64_t groups = (o.rows + TILE_PRODUCT_ROWS - 1) / TILE_PRODUCT_ROWS;
            tile_band *bands = malloc((size_t)groups * sizeof *bands);
            cr_assert(bands != NULL);
            for (int use = 0; use < 2; use++) {
                const int64_t width = use == TILE_BANDS_INNER ? o.inner : o.columns;
                test_random random = {4300 + i, (uint64_t)use};
                for (int64_t g = 0; g < groups; g++) { /* some empty, some whole, some inside */
                    const int64_t first = test_random_between(&random, 0, width);
                    const int64_t end =
                        g % 4 == 3 ? first : test_random_between(&random, first, width);
                    bands[g] = g % 5 == 2 ? (tile_band){0, width} : (tile_band){first, end};
                }
                for (int set = 0; set < 2; set++) {
                    double *c = run(&o, path == 0, bands, (tile_band_use)use, set);
                    expect_chains(&o, c, bands, (tile_band_use)use, set, "banded");
                    free(c);
                }
            }
            free(bands);
            operands_free(&o);
        }
    }
    tile_products_force_portable(false);
}

Test(tile_products, allowed_terms_only__masked_non_finite_rows_reach_nothing) {
    operands o = operands_new(13, 20, 17, 4400);
    uint8_t *allowed = malloc((size_t)(o.rows * o.inner));
    cr_assert(allowed != NULL);
    for (int64_t r = 0; r < o.rows; r++) {
        for (int64_t x = 0; x < o.inner; x++) {
            allowed[r * o.inner + x] = (uint8_t)(x <= r + 2 && x != 5);
        }
    }
    for (int64_t column = 0; column < o.b_stride; column++) {
        o.b[5 * o.b_stride + column] = NAN;                  /* term 5 is masked for every row */
        o.b[(o.inner - 1) * o.b_stride + column] = INFINITY; /* allowed only to the last rows */
    }
    double *c = malloc((size_t)(o.rows * o.c_stride) * sizeof(double));
    cr_assert(c != NULL);
    memcpy(c, o.c, (size_t)(o.rows * o.c_stride) * sizeof(double));
    tile_product_allowed(o.rows, o.columns, o.inner, (tile_factor){o.a, o.inner, 1}, o.b,
                         o.b_stride, c, o.c_stride, allowed, o.inner, 1);
    for (int64_t r = 0; r < o.rows; r++) {
        for (int64_t column = 0; column < o.columns; column++) {
            double expected = o.c[r * o.c_stride + column];
            for (int64_t x = 0; x < o.inner; x++) {
                if (allowed[r * o.inner + x]) {
                    expected = fma(o.a[r * o.inner + x], o.b[x * o.b_stride + column], expected);
                }
            }
            const double actual = c[r * o.c_stride + column];
            cr_assert(memcmp(&expected, &actual, sizeof actual) == 0,
                      "allowed terms: C[%lld][%lld] = %a, the chain of its allowed terms %a",
                      (long long)r, (long long)column, actual, expected);
            cr_assert(r + 2 >= o.inner - 1 || isfinite(actual),
                      "row %lld, whose non-finite terms are all masked, got %a", (long long)r,
                      actual);
        }
    }
    free(c);
    free(allowed);
    operands_free(&o);
}
