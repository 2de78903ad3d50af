/*
 * naive_product_tile.h — internal to naive_products.c: one work item of naive_product (a tile of
 * TILE_ROWS × TILE_COLUMNS output elements), included once per instruction set with
 *   NAIVE_TILE                   the function's name
 *   NAIVE_MICRO                  the name of its micro-tile helper
 *   NAIVE_MULTIPLY_ADD(c, x, b)  c (8 lanes) += x (a scalar) · b (8 lanes), each lane its own sum
 *   NAIVE_TILE_TARGET            the functions' target attribute (may be empty)
 * Every output element is one lane of one accumulator, the products added in increasing
 * contraction index: the arithmetic of naive_products.h, whatever the instruction set.
 */

/* acc rows [m, m + count) (count 4 or 1) × columns [j, j + WIDTH) of the tile (row stride
 * TILE_COLUMNS) += left rows × panel columns over depth. */
NAIVE_TILE_TARGET static inline __attribute__((always_inline)) void
NAIVE_MICRO(float *acc, const product_work *w, int64_t m, int64_t count, int64_t k0,
            const float *panel, int64_t j, int64_t depth) {
    vector8 c[4][2];
    for (int64_t i = 0; i < count; i++) {
        LOAD(c[i][0], acc + i * TILE_COLUMNS + j);
        LOAD(c[i][1], acc + i * TILE_COLUMNS + j + LANES);
    }
    const naive_matrix *l = &w->left;
    const float *a0 = l->data + m * l->row_stride + k0 * l->column_stride;
    if (count == 4) {
        const float *a1 = a0 + l->row_stride, *a2 = a1 + l->row_stride, *a3 = a2 + l->row_stride;
        for (int64_t k = 0; k < depth; k++) {
            vector8 b0, b1;
            LOAD(b0, panel + k * TILE_COLUMNS + j);
            LOAD(b1, panel + k * TILE_COLUMNS + j + LANES);
            const int64_t at = k * l->column_stride;
            const float x0 = a0[at], x1 = a1[at], x2 = a2[at], x3 = a3[at];
            NAIVE_MULTIPLY_ADD(c[0][0], x0, b0);
            NAIVE_MULTIPLY_ADD(c[0][1], x0, b1);
            NAIVE_MULTIPLY_ADD(c[1][0], x1, b0);
            NAIVE_MULTIPLY_ADD(c[1][1], x1, b1);
            NAIVE_MULTIPLY_ADD(c[2][0], x2, b0);
            NAIVE_MULTIPLY_ADD(c[2][1], x2, b1);
            NAIVE_MULTIPLY_ADD(c[3][0], x3, b0);
            NAIVE_MULTIPLY_ADD(c[3][1], x3, b1);
        }
    } else {
        for (int64_t k = 0; k < depth; k++) {
            vector8 b0, b1;
            LOAD(b0, panel + k * TILE_COLUMNS + j);
            LOAD(b1, panel + k * TILE_COLUMNS + j + LANES);
            const float x0 = a0[k * l->column_stride];
            NAIVE_MULTIPLY_ADD(c[0][0], x0, b0);
            NAIVE_MULTIPLY_ADD(c[0][1], x0, b1);
        }
    }
    for (int64_t i = 0; i < count; i++) {
        STORE(acc + i * TILE_COLUMNS + j, c[i][0]);
        STORE(acc + i * TILE_COLUMNS + j + LANES, c[i][1]);
    }
}

NAIVE_TILE_TARGET static void NAIVE_TILE(void *context, int64_t item, void *scratch) {
    const product_work *w = context;
    const int64_t r0 = item / w->column_tiles * TILE_ROWS;
    const int64_t c0 = item % w->column_tiles * TILE_COLUMNS;
    const int64_t rows = minimum(TILE_ROWS, w->rows - r0);
    const int64_t columns = minimum(TILE_COLUMNS, w->columns - c0);
    float *acc = scratch;                                       /* TILE_ROWS × TILE_COLUMNS */
    float *panel = (float *)scratch + TILE_ROWS * TILE_COLUMNS; /* DEPTH_BLOCK × TILE_COLUMNS */
    memset(acc, 0, (size_t)(TILE_ROWS * TILE_COLUMNS) * sizeof *acc);
    for (int64_t i = 0; w->resume && i < rows; i++) { /* the sum so far */
        memcpy(acc + i * TILE_COLUMNS, w->result + (r0 + i) * w->result_stride + c0,
               (size_t)columns * sizeof *acc);
    }
    for (int64_t k0 = 0; k0 < w->depth; k0 += DEPTH_BLOCK) {
        const int64_t depth = minimum(DEPTH_BLOCK, w->depth - k0);
        pack(panel, w, k0, depth, c0);
        for (int64_t m = 0; m < rows;) {
            const int64_t count = rows - m >= 4 ? 4 : 1;
            for (int64_t j = 0; j < columns; j += WIDTH) {
                NAIVE_MICRO(acc + m * TILE_COLUMNS, w, r0 + m, count, k0, panel, j, depth);
            }
            m += count;
        }
    }
    for (int64_t i = 0; i < rows; i++) {
        float *out = w->result + (r0 + i) * w->result_stride + c0;
        const float *sum = acc + i * TILE_COLUMNS;
        for (int64_t j = 0; j < columns; j++) {
            out[j] = w->add && !w->resume ? out[j] + sum[j] : sum[j];
        }
    }
}
