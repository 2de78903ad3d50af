/*
 * kernel_cpu_lanes.h — internal to kernel_cpu_loops.h: the tile loops of the cpu-f32 kernel in
 * vector registers of eight floats, included for each instruction set whose registers hold eight
 * (today AVX2 with FMA; the plain loops are in kernel_cpu_loops.h) with these macros defined:
 *
 *   KERNEL_ROWS_TIMES_TILE               two rows against a transposed tile (scores, dp)
 *   KERNEL_ADD_WEIGHTED_ROWS             weighted rows added to one or two outputs
 *   KERNEL_ROW_DOT                       a dot product with a lane's arithmetic (δ)
 *   KERNEL_EXPONENTIALS                  e^x of a tile row's values
 *   KERNEL_LANES_MULTIPLY_ADD(a, b, c)   a · b + c, lane by lane (8 lanes each)
 *   KERNEL_MULTIPLY_ADD(c, x, b)         c (8 lanes) += x (a scalar) · b (8 lanes)
 *   KERNEL_SCALAR_MULTIPLY_ADD(s, x, b)  s + x · b for scalars, the same arithmetic as a lane
 *   KERNEL_LANE_TARGET                   the functions' target attribute (may be empty)
 *
 * and undefines them at its end, ready for the next instruction set.
 *
 * Every sum is one lane (or one scalar) adding its terms in a fixed order, so an element's bits
 * depend only on the instruction set chosen for this CPU, never on the rows it is computed
 * beside or the thread count.
 */

/* products0[j] = Σ_i row0[i] · transposed[i·MAX_TILE + j] for the MAX_TILE columns j, and
 * products1 likewise from row1: two rows of a tile's scores (or dp) against a transposed key (or
 * value) tile, which is read once for both. Each column of each row is one vector lane summing
 * in increasing i, so a row's products have the same bits whichever row it is paired with. */
KERNEL_LANE_TARGET static void KERNEL_ROWS_TIMES_TILE(float *restrict products0,
                                                      float *restrict products1, const float *row0,
                                                      const float *row1,
                                                      const float *restrict transposed, int64_t n) {
    vector8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    vector8 u0 = {0}, u1 = {0}, u2 = {0}, u3 = {0};
    for (int64_t i = 0; i < n; i++) {
        const float *column = transposed + i * MAX_TILE;
        vector8 t0, t1, t2, t3;
        LOAD(t0, column);
        LOAD(t1, column + LANES);
        LOAD(t2, column + 2 * LANES);
        LOAD(t3, column + 3 * LANES);
        const float x = row0[i], y = row1[i];
        KERNEL_MULTIPLY_ADD(s0, x, t0);
        KERNEL_MULTIPLY_ADD(s1, x, t1);
        KERNEL_MULTIPLY_ADD(s2, x, t2);
        KERNEL_MULTIPLY_ADD(s3, x, t3);
        KERNEL_MULTIPLY_ADD(u0, y, t0);
        KERNEL_MULTIPLY_ADD(u1, y, t1);
        KERNEL_MULTIPLY_ADD(u2, y, t2);
        KERNEL_MULTIPLY_ADD(u3, y, t3);
    }
    STORE(products0, s0);
    STORE(products0 + LANES, s1);
    STORE(products0 + 2 * LANES, s2);
    STORE(products0 + 3 * LANES, s3);
    STORE(products1, u0);
    STORE(products1 + LANES, u1);
    STORE(products1 + 2 * LANES, u2);
    STORE(products1 + 3 * LANES, u3);
}

/* accumulators c0..c3 += w · the row chunk x0..x3 (inside KERNEL_ADD_WEIGHTED_ROWS) */
#define KERNEL_ADD_ROW_CHUNK(c, w)                                                                 \
    do {                                                                                           \
        const float weight = (w);                                                                  \
        KERNEL_MULTIPLY_ADD(c##0, weight, x0);                                                     \
        KERNEL_MULTIPLY_ADD(c##1, weight, x1);                                                     \
        KERNEL_MULTIPLY_ADD(c##2, weight, x2);                                                     \
        KERNEL_MULTIPLY_ADD(c##3, weight, x3);                                                     \
    } while (0)

/* For both outputs (y1 may be NULL: y0 alone), for i < n:
 *   y0[i] += w0[r·stride] · rows[r·row_stride + i] for each row r < count whose u0[r·stride] is
 *   set, in increasing r; y1 likewise with w1 and u1.
 * Each output gets the bits of one scaled add per used row, in that order, whichever output it is
 * paired with; a skipped row adds nothing, not 0 · its values, which may be Inf or NaN. The
 * elements go by chunks of 32 held in vector registers while the rows go by, each row's chunk
 * loaded once for both outputs. */
KERNEL_LANE_TARGET static void
KERNEL_ADD_WEIGHTED_ROWS(float *restrict y0, float *restrict y1, int64_t n, const float *w0,
                         const unsigned char *u0, const float *w1, const unsigned char *u1,
                         int64_t stride, int64_t count, const float *rows, int64_t row_stride) {
    if (y1 == NULL) { /* count <= MAX_TILE and stride <= MAX_TILE: inside no_rows */
        u1 = no_rows;
        w1 = w0;
    }
    int64_t i = 0;
    for (; i + 4 * LANES <= n; i += 4 * LANES) {
        vector8 a0, a1, a2, a3, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        LOAD(a0, y0 + i);
        LOAD(a1, y0 + i + LANES);
        LOAD(a2, y0 + i + 2 * LANES);
        LOAD(a3, y0 + i + 3 * LANES);
        if (y1 != NULL) {
            LOAD(b0, y1 + i);
            LOAD(b1, y1 + i + LANES);
            LOAD(b2, y1 + i + 2 * LANES);
            LOAD(b3, y1 + i + 3 * LANES);
        }
        for (int64_t r = 0; r < count; r++) {
            const bool first = u0[r * stride], second = u1[r * stride];
            if (!first && !second) {
                continue;
            }
            const float *x = rows + r * row_stride + i;
            vector8 x0, x1, x2, x3;
            LOAD(x0, x);
            LOAD(x1, x + LANES);
            LOAD(x2, x + 2 * LANES);
            LOAD(x3, x + 3 * LANES);
            if (first) {
                KERNEL_ADD_ROW_CHUNK(a, w0[r * stride]);
            }
            if (second) {
                KERNEL_ADD_ROW_CHUNK(b, w1[r * stride]);
            }
        }
        STORE(y0 + i, a0);
        STORE(y0 + i + LANES, a1);
        STORE(y0 + i + 2 * LANES, a2);
        STORE(y0 + i + 3 * LANES, a3);
        if (y1 != NULL) {
            STORE(y1 + i, b0);
            STORE(y1 + i + LANES, b1);
            STORE(y1 + i + 2 * LANES, b2);
            STORE(y1 + i + 3 * LANES, b3);
        }
    }
    for (; i < n; i++) {
        float sum0 = y0[i], sum1 = y1 != NULL ? y1[i] : 0.0f;
        for (int64_t r = 0; r < count; r++) {
            if (u0[r * stride]) {
                sum0 = KERNEL_SCALAR_MULTIPLY_ADD(sum0, w0[r * stride], rows[r * row_stride + i]);
            }
            if (u1[r * stride]) {
                sum1 = KERNEL_SCALAR_MULTIPLY_ADD(sum1, w1[r * stride], rows[r * row_stride + i]);
            }
        }
        y0[i] = sum0;
        if (y1 != NULL) {
            y1[i] = sum1;
        }
    }
}

/* Σ_i a[i] · b[i] from 0, one term at a time in increasing i: a lane's arithmetic in
 * KERNEL_ROWS_TIMES_TILE. The backward's δ = dout · out takes it, so that for a query whose one
 * allowed key is j (out = v_j exactly) δ has the bits of dp_j and ds = p · (dp_j − δ) is exactly
 * 0, as it is mathematically (windows of 1, a document's first token). */
KERNEL_LANE_TARGET static float KERNEL_ROW_DOT(const float *a, const float *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        sum = KERNEL_SCALAR_MULTIPLY_ADD(sum, a[i], b[i]);
    }
    return sum;
}

/* values[j] = e^values[j] for the MAX_TILE values of a tile row, in place: e^x = 2^n · e^r with
 * n = round(x · log2 e) and r = x − n · ln 2 (ln 2 in two parts, so the first product is exact),
 * e^r from a degree-7 polynomial (Cephes' expf), within 2 ulp of e^x. Lanes outside [−87, 88]
 * (where 2^n would leave the normal range), and NaN, take libm's expf instead. e^0 is exactly 1.
 * The kernel's own exponential, one per allowed pair: libm's expf one value at a time cost as
 * much as the products at small head dimensions. */
KERNEL_LANE_TARGET static void KERNEL_EXPONENTIALS(float *values) {
    const vector8 log2e = KERNEL_SPLAT(EXP_LOG2E), shifter = KERNEL_SPLAT(EXP_SHIFTER);
    const vector8 ln2_high = KERNEL_SPLAT(EXP_LN2_HIGH), ln2_low = KERNEL_SPLAT(EXP_LN2_LOW);
    const vector8 lowest = KERNEL_SPLAT(EXP_LOWEST), highest = KERNEL_SPLAT(EXP_HIGHEST);
    const vector8 one = KERNEL_SPLAT(1.0f);
    const vector8 c0 = KERNEL_SPLAT(EXP_C0), c1 = KERNEL_SPLAT(EXP_C1), c2 = KERNEL_SPLAT(EXP_C2);
    const vector8 c3 = KERNEL_SPLAT(EXP_C3), c4 = KERNEL_SPLAT(EXP_C4), c5 = KERNEL_SPLAT(EXP_C5);
    float original[MAX_TILE];
    memcpy(original, values, sizeof original);
    bool outside = false;
    for (int64_t v = 0; v < MAX_TILE; v += LANES) {
        vector8 x;
        LOAD(x, values + v);
        const int32x8 inside = (x >= lowest) & (x <= highest);
        x = KERNEL_SELECT(inside, x, KERNEL_SPLAT(0.0f));
        const vector8 n =
            (x * log2e + shifter) - shifter; /* round to nearest: |x · log2 e| < 2^22 */
        vector8 r = KERNEL_LANES_MULTIPLY_ADD(n, ln2_high, x);
        r = KERNEL_LANES_MULTIPLY_ADD(n, ln2_low, r);
        vector8 p = KERNEL_LANES_MULTIPLY_ADD(c0, r, c1);
        p = KERNEL_LANES_MULTIPLY_ADD(p, r, c2);
        p = KERNEL_LANES_MULTIPLY_ADD(p, r, c3);
        p = KERNEL_LANES_MULTIPLY_ADD(p, r, c4);
        p = KERNEL_LANES_MULTIPLY_ADD(p, r, c5);
        p = KERNEL_LANES_MULTIPLY_ADD(p, r * r, r + one);
        const int32x8 exponent = (__builtin_convertvector(n, int32x8) + 127) << 23;
        const vector8 result = p * (vector8)exponent;
        STORE(values + v, result);
        for (int lane = 0; lane < LANES; lane++) {
            outside = outside || inside[lane] == 0;
        }
    }
    if (outside) { /* rare: a pair far below the row's maximum, −∞, +∞, NaN */
        exponentials_outside(values, original);
    }
}

#undef KERNEL_ADD_ROW_CHUNK
#undef KERNEL_ROWS_TIMES_TILE
#undef KERNEL_ADD_WEIGHTED_ROWS
#undef KERNEL_ROW_DOT
#undef KERNEL_EXPONENTIALS
#undef KERNEL_LANES_MULTIPLY_ADD
#undef KERNEL_MULTIPLY_ADD
#undef KERNEL_SCALAR_MULTIPLY_ADD
#undef KERNEL_LANE_TARGET
