/*
 * naive_products.c — float32 products with every output element one accumulator summed in
 * increasing contraction index (see naive_products.h).
 *
 * Work items are tiles of TILE_ROWS × TILE_COLUMNS output elements, each accumulated in the
 * item's scratch over depth blocks of DEPTH_BLOCK in increasing order; the right operand's block
 * is first copied into a panel (DEPTH_BLOCK × TILE_COLUMNS, zero past the last column) so that
 * sixteen consecutive columns load as two 8-lane vectors. Each lane holds one output element's
 * accumulator, so vectors never change the order of a sum. The tile geometry is fixed, so which
 * code path an element takes does not depend on the thread count.
 */
#include "harness/judging/naive_products.h"

#include <string.h>

#include "reference/parallel.h"

enum {
    TILE_ROWS = 64,     /* output rows per item */
    TILE_COLUMNS = 256, /* output columns per item */
    DEPTH_BLOCK = 256,  /* contraction indices per panel */
    LANES = 8,          /* floats per vector */
    WIDTH = 2 * LANES,  /* columns of one micro-tile */
};

typedef float vector8 __attribute__((vector_size(LANES * sizeof(float))));

typedef struct product_work {
    float *result;
    int64_t result_stride;
    naive_matrix left, right;
    int64_t rows, columns, depth;
    bool add;
    bool resume; /* each accumulator starts from the result's value, stored back (no add) */
    int64_t column_tiles;
} product_work;

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The right operand's rows [k0, k0 + depth) × columns [c0, c0 + TILE_COLUMNS) into panel
 * (depth × TILE_COLUMNS), zero past the last column up to the last micro-tile's edge. */
static void pack(float *panel, const product_work *w, int64_t k0, int64_t depth, int64_t c0) {
    const naive_matrix *r = &w->right;
    const int64_t columns = minimum(TILE_COLUMNS, w->columns - c0);
    const int64_t read = (columns + WIDTH - 1) / WIDTH * WIDTH; /* the micro-tiles read this far */
    for (int64_t k = 0; k < depth && columns < read; k++) {
        memset(panel + k * TILE_COLUMNS + columns, 0, (size_t)(read - columns) * sizeof *panel);
    }
    if (r->column_stride == 1) {
        for (int64_t k = 0; k < depth; k++) {
            memcpy(panel + k * TILE_COLUMNS, r->data + (k0 + k) * r->row_stride + c0,
                   (size_t)columns * sizeof *panel);
        }
        return;
    }
    for (int64_t j = 0; j < columns; j++) {
        const float *source = r->data + (c0 + j) * r->column_stride + k0 * r->row_stride;
        for (int64_t k = 0; k < depth; k++) {
            panel[k * TILE_COLUMNS + j] = source[k * r->row_stride];
        }
    }
}

/* Unaligned vector loads and stores (macros: a function returning a vector would change the ABI
 * between the generic and the AVX2 copy). */
#define LOAD(vector, from) memcpy(&(vector), (from), sizeof(vector))
#define STORE(to, vector) memcpy((to), &(vector), sizeof(vector))

/* The tile function, once per instruction set (naive_product_tile.h): plain C vectors with a
 * multiply then an add (this file is built with -ffp-contract=off: never fused behind one's
 * back), and AVX2 with explicit fused multiply-adds. */
#define NAIVE_TILE tile_generic
#define NAIVE_MICRO micro_tile_generic
#define NAIVE_TILE_TARGET
#define NAIVE_MULTIPLY_ADD(c, x, b) ((c) += (x) * (b))
#include "harness/judging/naive_product_tile.h"
#undef NAIVE_TILE
#undef NAIVE_MICRO
#undef NAIVE_TILE_TARGET
#undef NAIVE_MULTIPLY_ADD

#if defined(__x86_64__) && defined(__GNUC__)
#define NAIVE_TILE tile_avx2
#define NAIVE_MICRO micro_tile_avx2
#define NAIVE_TILE_TARGET __attribute__((target("avx2,fma")))
#define NAIVE_MULTIPLY_ADD(c, x, b) ((c) = __builtin_ia32_vfmaddps256((vector8){0} + (x), (b), (c)))
#include "harness/judging/naive_product_tile.h"
#undef NAIVE_TILE
#undef NAIVE_MICRO
#undef NAIVE_TILE_TARGET
#undef NAIVE_MULTIPLY_ADD
#endif

/* The tile function for this CPU, chosen once. */
static reference_item_function tile_function(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return tile_avx2;
    }
#endif
    return tile_generic;
}

bool naive_products_fused(void) {
    return tile_function() != tile_generic;
}

/* The product on the reference's threads, resumed or not. */
static bool product_run(float *result, int64_t result_stride, naive_matrix left, naive_matrix right,
                        int64_t rows, int64_t columns, int64_t depth, bool add, bool resume) {
    if (rows <= 0 || columns <= 0) {
        return true;
    }
    product_work work = {
        result,  result_stride, left, right,  rows,
        columns, depth,         add,  resume, (columns + TILE_COLUMNS - 1) / TILE_COLUMNS};
    const reference_parallel_work parallel = {
        (rows + TILE_ROWS - 1) / TILE_ROWS * work.column_tiles, naive_product_scratch_bytes(),
        tile_function(), &work};
    return reference_parallel_run(&parallel, "a product of the naive baseline", NULL) ==
           CPPARITY_OK;
}

bool naive_product(float *result, int64_t result_stride, naive_matrix left, naive_matrix right,
                   int64_t rows, int64_t columns, int64_t depth, bool add) {
    return product_run(result, result_stride, left, right, rows, columns, depth, add, false);
}

bool naive_product_resume(float *result, int64_t result_stride, naive_matrix left,
                          naive_matrix right, int64_t rows, int64_t columns, int64_t depth) {
    return product_run(result, result_stride, left, right, rows, columns, depth, false, true);
}

void naive_product_finish(float *result, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        result[i] = 0.0f + result[i];
    }
}

size_t naive_product_scratch_bytes(void) {
    return (size_t)(TILE_ROWS + DEPTH_BLOCK) * TILE_COLUMNS * sizeof(float);
}

void naive_product_on_this_thread(float *result, int64_t result_stride, naive_matrix left,
                                  naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                  bool add, void *scratch) {
    if (rows <= 0 || columns <= 0) {
        return;
    }
    const product_work work = {
        result,  result_stride, left, right, rows,
        columns, depth,         add,  false, (columns + TILE_COLUMNS - 1) / TILE_COLUMNS};
    const reference_item_function tile = tile_function();
    const int64_t items = (rows + TILE_ROWS - 1) / TILE_ROWS * work.column_tiles;
    for (int64_t item = 0; item < items; item++) {
        tile((void *)&work, item, scratch);
    }
}

bool naive_linear_forward(float *out, const float *in, const float *weight, int64_t rows,
                          int64_t in_features, int64_t out_features) {
    return naive_product(out, out_features, (naive_matrix){in, in_features, 1},
                         (naive_matrix){weight, 1, in_features}, rows, out_features, in_features,
                         false);
}

bool naive_linear_input_gradient(float *din, const float *dout, const float *weight, int64_t rows,
                                 int64_t in_features, int64_t out_features) {
    return naive_product(din, in_features, (naive_matrix){dout, out_features, 1},
                         (naive_matrix){weight, in_features, 1}, rows, in_features, out_features,
                         true);
}

bool naive_linear_weight_gradient(float *dweight, const float *dout, const float *in, int64_t rows,
                                  int64_t in_features, int64_t out_features) {
    return naive_product(dweight, in_features, (naive_matrix){dout, 1, out_features},
                         (naive_matrix){in, in_features, 1}, out_features, in_features, rows, true);
}

bool naive_linear_weight_gradient_resume(float *dweight, const float *dout, const float *in,
                                         int64_t rows, int64_t in_features, int64_t out_features) {
    return naive_product_resume(dweight, in_features, (naive_matrix){dout, 1, out_features},
                                (naive_matrix){in, in_features, 1}, out_features, in_features,
                                rows);
}
