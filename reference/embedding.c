/* embedding.c — token embedding lookup, forward and backward (see model_layers.h). */
#include "model_layers.h"

void embedding_forward(double *out, const int64_t *ids, const double *weight, int64_t rows,
                       int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        const double *row = weight + ids[n] * dim;
        for (int64_t d = 0; d < dim; d++) {
            out[n * dim + d] = row[d];
        }
    }
}

void embedding_backward(double *dweight, const double *dout, const int64_t *ids, int64_t rows,
                        int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        double *row = dweight + ids[n] * dim;
        for (int64_t d = 0; d < dim; d++) {
            row[d] += dout[n * dim + d];
        }
    }
}
