/*
 * naive_products.c — float32 products with every output element one accumulator summed in
 * increasing contraction index (see naive_products.h).
 *
 * Work items are tiles of TILE_ROWS × TILE_COLUMNS output elements, each accumulated in the
 * item's scratch over depth blocks of DEPTH_BLOCK in increasing order; the right operand's block
 * is first copied into a panel (DEPTH_BLOCK × TILE_COLUMNS, zero past the last column) so that
 * sixteen consecutive columns load as two 8-lane vectors, and the left operand's rows into
 * groups of six (k-major), so that a micro-tile of 6 × 16 elements (twelve vector accumulators)
 * reads both operands from contiguous memory; the tile's row groups pass over a 16-column strip
 * of the panel while it is in the first-level cache. Each lane holds one output element's
 * accumulator, so vectors never change the order of a sum. The tile geometry is fixed, so which
 * code path an element takes does not depend on the thread count.
 */
#include "harness/judging/naive_products.h"

#include <string.h>

#include "reference/parallel.h"

enum {
    TILE_ROWS = 256,      /* output rows per item */
    TILE_COLUMNS = 128,   /* output columns per item */
    DEPTH_BLOCK = 256,    /* contraction indices per panel */
    LEFT_ROWS = 64,       /* left operand rows packed at a time */
    LANES = 8,            /* floats per vector */
    WIDTH = 2 * LANES,    /* columns of one micro-tile */
    MICRO_ROWS = 6,       /* rows of a micro-tile (then 4 or 1 at the packed rows' end) */
    TRANSPOSE_BLOCK = 16, /* the square a transposed right operand is copied by */
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
    bool left_in_place; /* the left operand read where it lies, not packed */
} product_work;

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* A work item's scratch: the tile's accumulators (TILE_ROWS × TILE_COLUMNS), the right operand's
 * panel (DEPTH_BLOCK × TILE_COLUMNS) and LEFT_ROWS of the left operand's rows packed by row groups
 * (LEFT_ROWS × DEPTH_BLOCK). */
typedef struct tile_scratch {
    float *acc, *panel, *left;
} tile_scratch;

static tile_scratch tile_scratch_of(void *scratch) {
    float *at = scratch;
    return (tile_scratch){at, at + TILE_ROWS * TILE_COLUMNS,
                          at + (TILE_ROWS + DEPTH_BLOCK) * TILE_COLUMNS};
}

/* The rows of the next micro-tile when `remaining` rows of the tile are left. */
static int64_t micro_rows(int64_t remaining) {
    return remaining >= MICRO_ROWS ? MICRO_ROWS : remaining >= 4 ? 4 : 1;
}

/* The right operand's rows [k0, k0 + depth) × columns [c0, c0 + TILE_COLUMNS) into panel
 * (depth × TILE_COLUMNS), zero past the last column up to the last micro-tile's edge. A
 * transposed operand is copied by squares of TRANSPOSE_BLOCK, so that both its reads and the
 * panel's writes stay within a few cache lines. */
static void pack_right(float *panel, const product_work *w, int64_t k0, int64_t depth, int64_t c0) {
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
    for (int64_t j0 = 0; j0 < columns; j0 += TRANSPOSE_BLOCK) {
        const int64_t j1 = minimum(j0 + TRANSPOSE_BLOCK, columns);
        for (int64_t kb = 0; kb < depth; kb += TRANSPOSE_BLOCK) {
            const int64_t kb1 = minimum(kb + TRANSPOSE_BLOCK, depth);
            for (int64_t j = j0; j < j1; j++) {
                const float *source = r->data + (c0 + j) * r->column_stride + k0 * r->row_stride;
                for (int64_t k = kb; k < kb1; k++) {
                    panel[k * TILE_COLUMNS + j] = source[k * r->row_stride];
                }
            }
        }
    }
}

/* The left operand's rows [r0, r0 + rows) × contraction [k0, k0 + depth) into left, row group
 * after row group (micro_rows), each group's depth × count values k-major: the group at tile row
 * m starts at left + m·depth. */
static void pack_left(float *left, const product_work *w, int64_t r0, int64_t rows, int64_t k0,
                      int64_t depth) {
    const naive_matrix *l = &w->left;
    for (int64_t m = 0; m < rows;) {
        const int64_t count = micro_rows(rows - m);
        float *group = left + m * depth;
        const float *source = l->data + (r0 + m) * l->row_stride + k0 * l->column_stride;
        for (int64_t k = 0; k < depth; k++) {
            for (int64_t i = 0; i < count; i++) {
                group[k * count + i] = source[i * l->row_stride + k * l->column_stride];
            }
        }
        m += count;
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
/* x in all eight lanes (one vbroadcastss from memory) */
__attribute__((target("avx2,fma"))) static inline vector8 broadcast(float x) {
    return (vector8){x, x, x, x, x, x, x, x};
}
#define NAIVE_TILE tile_avx2
#define NAIVE_MICRO micro_tile_avx2
#define NAIVE_TILE_TARGET __attribute__((target("avx2,fma")))
#define NAIVE_MULTIPLY_ADD(c, x, b) ((c) = __builtin_ia32_vfmaddps256(broadcast(x), (b), (c)))
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
        columns, depth,         add,  resume, (columns + TILE_COLUMNS - 1) / TILE_COLUMNS,
        false};
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
    return ((size_t)(TILE_ROWS + DEPTH_BLOCK) * TILE_COLUMNS + (size_t)LEFT_ROWS * DEPTH_BLOCK) *
           sizeof(float);
}

/* The product's tiles one after the other on the calling thread. */
static void product_on_this_thread(float *result, int64_t result_stride, naive_matrix left,
                                   naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                   bool add, bool resume, bool left_in_place, void *scratch) {
    if (rows <= 0 || columns <= 0) {
        return;
    }
    const product_work work = {
        result,       result_stride, left, right,  rows,
        columns,      depth,         add,  resume, (columns + TILE_COLUMNS - 1) / TILE_COLUMNS,
        left_in_place};
    const reference_item_function tile = tile_function();
    const int64_t items = (rows + TILE_ROWS - 1) / TILE_ROWS * work.column_tiles;
    for (int64_t item = 0; item < items; item++) {
        tile((void *)&work, item, scratch);
    }
}

void naive_product_on_this_thread(float *result, int64_t result_stride, naive_matrix left,
                                  naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                  bool add, void *scratch) {
    product_on_this_thread(result, result_stride, left, right, rows, columns, depth, add, false,
                           false, scratch);
}

void naive_product_left_in_place(float *result, int64_t result_stride, naive_matrix left,
                                 naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                 bool resume, void *scratch) {
    product_on_this_thread(result, result_stride, left, right, rows, columns, depth, false, resume,
                           true, scratch);
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
