/*
 * naive_product_tile.h — internal to naive_products.c: one work item of naive_product (a tile of
 * TILE_ROWS × TILE_COLUMNS output elements), included once per instruction set with
 *   NAIVE_TILE                   the function's name
 *   NAIVE_MICRO                  the name of its micro-tile helper
 *   NAIVE_MULTIPLY_ADD(c, x, b)  c (8 lanes) += x (a scalar) · b (8 lanes), each lane its own sum
 *   NAIVE_TILE_TARGET            the functions' target attribute (may be empty)
 * Every output element is one lane of one accumulator, the products added in increasing
 * contraction index: the arithmetic of naive_products.h, whatever the instruction set and
 * whichever micro-tile (6, 4 or 1 rows) the element falls in.
 */

/* out rows [0, count) (count 6, 4 or 1, row stride out_stride) × columns [j, j + WIDTH) = in's
 * same elements (row stride in_stride; 0 when in is NULL) + the left rows × panel columns over
 * depth, left row i's contraction index k at left[k·left_depth_stride + i·left_row_stride]
 * (packed: depth × count, k-major, so strides count and 1). The accumulators are named one by one
 * (MICRO_*): an array indexed by a loop would be kept in memory by the compiler. */
#define MICRO_LOAD(i)                                                                              \
    vector8 c##i##0 = {0}, c##i##1 = {0};                                                          \
    if (in != NULL) {                                                                              \
        LOAD(c##i##0, in + (i)*in_stride + j);                                                     \
        LOAD(c##i##1, in + (i)*in_stride + j + LANES);                                             \
    }
#define MICRO_STEP(i)                                                                              \
    NAIVE_MULTIPLY_ADD(c##i##0, left[k * left_depth_stride + (i)*left_row_stride], b0);            \
    NAIVE_MULTIPLY_ADD(c##i##1, left[k * left_depth_stride + (i)*left_row_stride], b1)
#define MICRO_STORE(i)                                                                             \
    STORE(out + (i)*out_stride + j, c##i##0);                                                      \
    STORE(out + (i)*out_stride + j + LANES, c##i##1)
#define MICRO_PANEL                                                                                \
    vector8 b0, b1;                                                                                \
    LOAD(b0, panel + k * TILE_COLUMNS + j);                                                        \
    LOAD(b1, panel + k * TILE_COLUMNS + j + LANES)

NAIVE_TILE_TARGET static inline __attribute__((always_inline)) void
NAIVE_MICRO(const float *in, int64_t in_stride, float *out, int64_t out_stride, int64_t count,
            const float *left, int64_t left_row_stride, int64_t left_depth_stride,
            const float *panel, int64_t j, int64_t depth) {
    if (count == 6) {
        MICRO_LOAD(0);
        MICRO_LOAD(1);
        MICRO_LOAD(2);
        MICRO_LOAD(3);
        MICRO_LOAD(4);
        MICRO_LOAD(5);
        for (int64_t k = 0; k < depth; k++) {
            MICRO_PANEL;
            MICRO_STEP(0);
            MICRO_STEP(1);
            MICRO_STEP(2);
            MICRO_STEP(3);
            MICRO_STEP(4);
            MICRO_STEP(5);
        }
        MICRO_STORE(0);
        MICRO_STORE(1);
        MICRO_STORE(2);
        MICRO_STORE(3);
        MICRO_STORE(4);
        MICRO_STORE(5);
    } else if (count == 4) {
        MICRO_LOAD(0);
        MICRO_LOAD(1);
        MICRO_LOAD(2);
        MICRO_LOAD(3);
        for (int64_t k = 0; k < depth; k++) {
            MICRO_PANEL;
            MICRO_STEP(0);
            MICRO_STEP(1);
            MICRO_STEP(2);
            MICRO_STEP(3);
        }
        MICRO_STORE(0);
        MICRO_STORE(1);
        MICRO_STORE(2);
        MICRO_STORE(3);
    } else {
        MICRO_LOAD(0);
        for (int64_t k = 0; k < depth; k++) {
            MICRO_PANEL;
            MICRO_STEP(0);
        }
        MICRO_STORE(0);
    }
}
#undef MICRO_LOAD
#undef MICRO_STEP
#undef MICRO_STORE
#undef MICRO_PANEL

/* A tile: its accumulators start at 0 (or, resumed, at the result's values) and end in the
 * result. Micro-tiles wholly inside the tile's columns read their start from the result and write
 * their end there directly, through the scratch only between depth blocks; the columns past the
 * last whole micro-tile, and every column of an `add`, go through the scratch. The right
 * operand's panel is packed once per depth block for all the tile's rows, the left operand
 * LEFT_ROWS rows at a time (or read where it lies: left_in_place). */
NAIVE_TILE_TARGET static void NAIVE_TILE(void *context, int64_t item, void *scratch) {
    const product_work *w = context;
    const int64_t r0 = item / w->column_tiles * TILE_ROWS;
    const int64_t c0 = item % w->column_tiles * TILE_COLUMNS;
    const int64_t rows = minimum(TILE_ROWS, w->rows - r0);
    const int64_t columns = minimum(TILE_COLUMNS, w->columns - c0);
    const int64_t whole = (w->add && !w->resume) || w->depth == 0 ? 0 : columns / WIDTH * WIDTH;
    const tile_scratch t = tile_scratch_of(scratch);
    float *result = w->result + r0 * w->result_stride + c0;
    for (int64_t i = 0; whole < columns && i < rows; i++) { /* the scratch's columns start */
        float *acc = t.acc + i * TILE_COLUMNS;
        memset(acc + whole, 0, (size_t)(TILE_COLUMNS - whole) * sizeof *acc);
        if (w->resume) {
            memcpy(acc + whole, result + i * w->result_stride + whole,
                   (size_t)(columns - whole) * sizeof *acc);
        }
    }
    for (int64_t k0 = 0; k0 < w->depth; k0 += DEPTH_BLOCK) {
        const int64_t depth = minimum(DEPTH_BLOCK, w->depth - k0);
        const bool first = k0 == 0, last = k0 + depth == w->depth;
        pack_right(t.panel, w, k0, depth, c0);
        for (int64_t p0 = 0; p0 < rows; p0 += LEFT_ROWS) {
            const int64_t packed = minimum(LEFT_ROWS, rows - p0);
            if (!w->left_in_place) {
                pack_left(t.left, w, r0 + p0, packed, k0, depth);
            }
            /* a panel strip of WIDTH columns stays in the first-level cache while every row
             * group of the packed rows passes over it */
            for (int64_t j = 0; j < columns; j += WIDTH) {
                const bool direct = j < whole;
                for (int64_t m = 0; m < packed;) {
                    const int64_t count = micro_rows(packed - m);
                    float *acc = t.acc + (p0 + m) * TILE_COLUMNS;
                    float *row = result + (p0 + m) * w->result_stride;
                    const float *in = !direct || !first ? acc : w->resume ? row : NULL;
                    const int64_t in_stride = in == row ? w->result_stride : TILE_COLUMNS;
                    float *out = direct && last ? row : acc;
                    const int64_t out_stride = direct && last ? w->result_stride : TILE_COLUMNS;
                    if (w->left_in_place) {
                        const naive_matrix *l = &w->left;
                        NAIVE_MICRO(in, in_stride, out, out_stride, count,
                                    l->data + (r0 + p0 + m) * l->row_stride + k0 * l->column_stride,
                                    l->row_stride, l->column_stride, t.panel, j, depth);
                    } else { /* the packed rows: constant strides once inlined */
                        NAIVE_MICRO(in, in_stride, out, out_stride, count, t.left + m * depth, 1,
                                    count, t.panel, j, depth);
                    }
                    m += count;
                }
            }
        }
    }
    for (int64_t i = 0; i < rows; i++) { /* the columns that went through the scratch */
        float *out = result + i * w->result_stride;
        const float *sum = t.acc + i * TILE_COLUMNS;
        for (int64_t j = whole; j < columns; j++) {
            out[j] = w->add && !w->resume ? out[j] + sum[j] : sum[j];
        }
    }
}
