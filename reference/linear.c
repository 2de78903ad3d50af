/*
 * linear.c — out = in · weightᵀ in float64, forward and backward (see model_layers.h), through
 * OpenBLAS dgemm on the reference's threads.
 *
 * Each output is cut into fixed blocks of LINEAR_BLOCK × LINEAR_BLOCK elements (never depending on
 * the thread count); one work item computes one block with one dgemm over the whole contraction,
 * so every element is reduced by one item in one fixed order and the results are bitwise the same
 * for every number of threads.
 *   forward   out   (N, O)  = in (N, I) · weightᵀ        blocks of rows × output features
 *   backward  din   (N, I) += dout (N, O) · weight (O, I) blocks of rows × input features
 *             dweight (O, I) += doutᵀ · in              blocks of output × input features
 */
#include "model_layers.h"

#include <cblas.h>

#include "parallel.h"

/* Edge of the output blocks: large enough that OpenBLAS's packing of the weight is amortised
 * over many rows, small enough to give every thread work at model sizes. */
enum { LINEAR_BLOCK = 256 };

typedef enum linear_product {
    LINEAR_FORWARD,        /* out = in · weightᵀ */
    LINEAR_INPUT_GRADIENT, /* din += dout · weight */
    LINEAR_WEIGHT_GRADIENT /* dweight += doutᵀ · in */
} linear_product;

typedef struct linear_work {
    linear_product product;
    double *result;                      /* out, din or dweight */
    const double *left;                  /* in, dout or dout */
    const double *right;                 /* weight, weight or in */
    int64_t rows;                        /* N */
    int64_t in_features;                 /* I */
    int64_t out_features;                /* O */
    int64_t result_rows, result_columns; /* of result */
    int64_t column_blocks;               /* ceil(result_columns / LINEAR_BLOCK) */
} linear_work;

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static void linear_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const linear_work *w = context;
    const int64_t row = item / w->column_blocks * LINEAR_BLOCK;
    const int64_t column = item % w->column_blocks * LINEAR_BLOCK;
    const int m = (int)minimum(LINEAR_BLOCK, w->result_rows - row);
    const int n = (int)minimum(LINEAR_BLOCK, w->result_columns - column);
    const int in = (int)w->in_features, out = (int)w->out_features, rows = (int)w->rows;
    double *result = w->result + row * w->result_columns + column;
    switch (w->product) {
    case LINEAR_FORWARD:
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, in, 1.0,
                    w->left + row * w->in_features, in, w->right + column * w->in_features, in, 0.0,
                    result, out);
        break;
    case LINEAR_INPUT_GRADIENT:
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, out, 1.0,
                    w->left + row * w->out_features, out, w->right + column, in, 1.0, result, in);
        break;
    case LINEAR_WEIGHT_GRADIENT:
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, rows, 1.0, w->left + row, out,
                    w->right + column, in, 1.0, result, in);
        break;
    }
}

static void linear_run(linear_work *work) {
    work->column_blocks = (work->result_columns + LINEAR_BLOCK - 1) / LINEAR_BLOCK;
    const int64_t row_blocks = (work->result_rows + LINEAR_BLOCK - 1) / LINEAR_BLOCK;
    const reference_parallel_work parallel = {
        .items = row_blocks * work->column_blocks,
        .scratch_bytes = 0,
        .run_item = linear_item,
        .context = work,
    };
    /* without scratch the runner allocates nothing and cannot fail */
    (void)reference_parallel_run(&parallel, "a linear layer", NULL);
}

void linear_forward(double *out, const double *in, const double *weight, int64_t rows,
                    int64_t in_features, int64_t out_features) {
    if (rows == 0 || out_features == 0) {
        return;
    }
    linear_work work = {LINEAR_FORWARD, out,          in,   weight,       rows,
                        in_features,    out_features, rows, out_features, 0};
    linear_run(&work);
}

void linear_backward(double *din, double *dweight, const double *dout, const double *in,
                     const double *weight, int64_t rows, int64_t in_features,
                     int64_t out_features) {
    if (rows == 0 || in_features == 0 || out_features == 0) {
        return;
    }
    linear_work input = {LINEAR_INPUT_GRADIENT, din,          dout, weight,      rows,
                         in_features,           out_features, rows, in_features, 0};
    linear_run(&input);
    linear_work weights = {LINEAR_WEIGHT_GRADIENT, dweight,      dout,        in, rows, in_features,
                           out_features,           out_features, in_features, 0};
    linear_run(&weights);
}
