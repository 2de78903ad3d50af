/*
 * linear.c — out = in · weightᵀ in float64, forward and backward (see model_layers.h), through
 * OpenBLAS dgemm on the reference's threads.
 *
 * The rows are the tokens of a reference_rows: row blocks of common/row_blocks.h, each at most
 * LINEAR_BLOCK rows. Every output is cut into fixed tiles (never depending on the thread or rank
 * count) and each tile is computed by one work item in one fixed order, so the results are
 * bitwise the same for every number of threads, and for every number of ranks the rows are
 * spread over:
 *   forward   out   (N, O)  = in (N, I) · weightᵀ     a tile = one row block × LINEAR_BLOCK
 *                                                     output features: one dgemm over all I
 *   backward  din   (N, I) += dout (N, O) · weight   a tile = one row block × LINEAR_BLOCK input
 *                                                     features: one dgemm over all O
 *             dweight (O, I) += doutᵀ · in           a tile = LINEAR_BLOCK × LINEAR_BLOCK
 *                                                     weights: one dgemm per row block, added
 *                                                     onto the tile in row-block order
 * The last is the only sum over tokens: it goes row block by row block in the blocks' order, so
 * it is the same whether the blocks are in one process or handed from rank to rank in that order
 * (team.h: one band of LINEAR_BLOCK weight rows at a time, pipelined over the ranks).
 */
#include "model_layers.h"

#include <cblas.h>

#include "parallel.h"

/* Edge of the output tiles: large enough that OpenBLAS's packing of the weight is amortised
 * over many rows, small enough to give every thread work at model sizes; the row block's edge
 * (CPPARITY_ROW_BLOCK) is the same, so a row block is exactly one tile high. */
enum { LINEAR_BLOCK = 256 };
_Static_assert(CPPARITY_ROW_BLOCK == LINEAR_BLOCK, "a row block is one linear tile high");

typedef enum linear_product {
    LINEAR_FORWARD,        /* out = in · weightᵀ */
    LINEAR_INPUT_GRADIENT, /* din += dout · weight */
    LINEAR_WEIGHT_GRADIENT /* dweight += doutᵀ · in */
} linear_product;

typedef struct linear_work {
    linear_product product;
    double *result;             /* out, din or dweight */
    const double *left;         /* in, dout or dout */
    const double *right;        /* weight, weight or in */
    const reference_rows *rows; /* the tokens */
    int64_t in_features;        /* I */
    int64_t out_features;       /* O */
    int64_t result_columns;     /* of result */
    int64_t result_rows;        /* of result (the weight gradient's O) */
    int64_t column_blocks;      /* ceil(result_columns / LINEAR_BLOCK) */
    int64_t band;               /* weight gradient: the band of LINEAR_BLOCK weight rows whose
                                   tiles the items are */
} linear_work;

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The row of the tensors where block `index` of rows starts, and its size. */
static void block_rows(const reference_rows *rows, int64_t index, int64_t *start, int64_t *size) {
    const row_block block = row_blocks_at(&rows->blocks, index);
    *start = block.flat - row_blocks_at(&rows->blocks, rows->first).flat;
    *size = block.end - block.begin;
}

static void linear_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const linear_work *w = context;
    const int64_t column = item % w->column_blocks * LINEAR_BLOCK;
    const int n = (int)minimum(LINEAR_BLOCK, w->result_columns - column);
    const int in = (int)w->in_features, out = (int)w->out_features;
    if (w->product == LINEAR_WEIGHT_GRADIENT) {
        const int64_t row = w->band * LINEAR_BLOCK;
        const int m = (int)minimum(LINEAR_BLOCK, w->result_rows - row);
        double *result = w->result + row * w->result_columns + column;
        for (int64_t b = w->rows->first; b < w->rows->end; b++) {
            int64_t start = 0, size = 0;
            block_rows(w->rows, b, &start, &size);
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, (int)size, 1.0,
                        w->left + start * w->out_features + row, out,
                        w->right + start * w->in_features + column, in, 1.0, result, in);
        }
        return;
    }
    int64_t start = 0, size = 0;
    block_rows(w->rows, w->rows->first + item / w->column_blocks, &start, &size);
    double *result = w->result + start * w->result_columns + column;
    if (w->product == LINEAR_FORWARD) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)size, n, in, 1.0,
                    w->left + start * w->in_features, in, w->right + column * w->in_features, in,
                    0.0, result, out);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)size, n, out, 1.0,
                    w->left + start * w->out_features, out, w->right + column, in, 1.0, result, in);
    }
}

static void linear_run(linear_work *work) {
    work->column_blocks = (work->result_columns + LINEAR_BLOCK - 1) / LINEAR_BLOCK;
    const reference_parallel_work parallel = {
        .items = work->product == LINEAR_WEIGHT_GRADIENT
                     ? work->column_blocks
                     : (work->rows->end - work->rows->first) * work->column_blocks,
        .scratch_bytes = 0,
        .run_item = linear_item,
        .context = work,
    };
    /* without scratch the runner allocates nothing and cannot fail */
    (void)reference_parallel_run(&parallel, "a linear layer", NULL);
}

/* The weight gradient, one band of weight rows at a time, handed from rank to rank. */
static double *band_values(void *context, int64_t band, int64_t *count) {
    const linear_work *work = context;
    const int64_t row = band * LINEAR_BLOCK;
    *count = minimum(LINEAR_BLOCK, work->result_rows - row) * work->result_columns;
    return work->result + row * work->result_columns;
}

static void band_add(void *context, int64_t band) {
    linear_work *work = context;
    work->band = band;
    linear_run(work);
}

void linear_forward(double *out, const double *in, const double *weight, const reference_rows *rows,
                    int64_t in_features, int64_t out_features) {
    if (rows->first >= rows->end || out_features == 0) {
        return;
    }
    linear_work work = {.product = LINEAR_FORWARD,
                        .result = out,
                        .left = in,
                        .right = weight,
                        .rows = rows,
                        .in_features = in_features,
                        .out_features = out_features,
                        .result_columns = out_features};
    linear_run(&work);
}

cpparity_status linear_backward(double *din, double *dweight, const double *dout, const double *in,
                                const double *weight, const reference_rows *rows,
                                int64_t in_features, int64_t out_features, cpparity_error *error) {
    if (in_features == 0 || out_features == 0) {
        return CPPARITY_OK;
    }
    linear_work input = {.product = LINEAR_INPUT_GRADIENT,
                         .result = din,
                         .left = dout,
                         .right = weight,
                         .rows = rows,
                         .in_features = in_features,
                         .out_features = out_features,
                         .result_columns = in_features};
    if (rows->first < rows->end) {
        linear_run(&input);
    }
    linear_work weights = {.product = LINEAR_WEIGHT_GRADIENT,
                           .result = dweight,
                           .left = dout,
                           .right = in,
                           .rows = rows,
                           .in_features = in_features,
                           .out_features = out_features,
                           .result_columns = in_features,
                           .result_rows = out_features};
    return reference_team_pipeline(rows->team, (out_features + LINEAR_BLOCK - 1) / LINEAR_BLOCK,
                                   band_values, band_add, &weights, error);
}

reference_rows reference_rows_all(int64_t batch, int64_t seq_len) {
    const reference_rows rows = {row_blocks_of(batch, seq_len), 0,
                                 row_blocks_of(batch, seq_len).count, NULL};
    return rows;
}

int64_t reference_rows_count(const reference_rows *rows) {
    int64_t first = 0, end = 0;
    row_blocks_rows(&rows->blocks, rows->first, rows->end, &first, &end);
    return end - first;
}
