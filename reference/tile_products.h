/*
 * tile_products.h — internal to reference/: the matrix products of the reference attention's
 * tiles, C += A·B in float64, written for tiles of a few dozen rows (no packing, no call into a
 * library per product).
 *
 * The arithmetic is fixed element by element: C[r][c] becomes the chain
 *     C[r][c] ← fma(A(r, x), B[x][c], C[r][c])   for x = x_first, x_first + 1, …, x_end − 1
 * each step one correctly rounded fused multiply-add, starting from C's own value. So an
 * element's bits depend on its terms and their order only: not on how rows and columns are
 * blocked, not on the instruction set (AVX2 + FMA lanes or the C library's fma()), not on the
 * thread or rank that computes it. Terms with A(r, x) = 0 and a finite B[x][c] leave C exactly
 * as it was, so leaving them out (the bands below) changes no value.
 *
 * A is read through two steps (element (r, x) at a[r·row_step + x·inner_step]), so either
 * orientation of a stored matrix serves; B and C are row-major with a row stride.
 */
#ifndef CPPARITY_REFERENCE_TILE_PRODUCTS_H
#define CPPARITY_REFERENCE_TILE_PRODUCTS_H

#include <stdbool.h>
#include <stdint.h>

/* Rows of C computed together; bands are given per group of this many rows. */
#define TILE_PRODUCT_ROWS 6

typedef struct tile_factor {
    const double *data; /* A(r, x) = data[r·row_step + x·inner_step] */
    int64_t row_step, inner_step;
} tile_factor;

/* Where the nonzero terms of a group of TILE_PRODUCT_ROWS rows lie: [first, end), empty when
 * first >= end. */
typedef struct tile_band {
    int64_t first, end;
} tile_band;

typedef enum tile_band_use {
    TILE_BANDS_COLUMNS, /* the group's columns: only C[r][first..end) is computed */
    TILE_BANDS_INNER,   /* the group's terms: x runs over [first, end) only */
} tile_band_use;

/* C (rows × columns, row stride c_stride) += A (rows × inner) · B (inner × columns, row stride
 * b_stride). bands: NULL for every column and term, else one per group of TILE_PRODUCT_ROWS rows
 * (ceil(rows / TILE_PRODUCT_ROWS) of them), used as `use` says. */
void tile_product(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
                  int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
                  tile_band_use use);

/* C = A·B: the same chains starting from 0 instead of C's value (C's computed elements are
 * written whatever they held; with TILE_BANDS_COLUMNS the others are left as they were). */
void tile_product_set(int64_t rows, int64_t columns, int64_t inner, tile_factor a, const double *b,
                      int64_t b_stride, double *c, int64_t c_stride, const tile_band *bands,
                      tile_band_use use);

/* The same over the allowed terms only: term x of row r is taken when allowed[r·allowed_row +
 * x·allowed_inner] is nonzero, and left out (never multiplied by 0) otherwise, so that a
 * non-finite B row of a masked term reaches nothing. The taken terms make the same chain, in the
 * same order, as tile_product's. */
void tile_product_allowed(int64_t rows, int64_t columns, int64_t inner, tile_factor a,
                          const double *b, int64_t b_stride, double *c, int64_t c_stride,
                          const uint8_t *allowed, int64_t allowed_row, int64_t allowed_inner);

/* Tests only: true makes tile_product use its portable loops (fma() of the C library) on every
 * CPU, false restores the choice by CPU. Not for use while products run on other threads. */
void tile_products_force_portable(bool portable);

#endif
