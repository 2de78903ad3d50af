/*
 * rmsnorm.c — RMSNorm forward and backward in float64 (see model_layers.h).
 *   y = g ⊙ x · r,  r = 1/sqrt(mean(x²) + eps)
 *   dx = r · (g ⊙ dy) − x · r³ · mean(x ⊙ g ⊙ dy),   dg = Σ_rows dy ⊙ x · r
 */
#include <math.h>

#include "model_layers.h"

void rmsnorm_forward(double *out, double *rstd, const double *in, const double *weight,
                     int64_t rows, int64_t dim, double eps) {
    for (int64_t n = 0; n < rows; n++) {
        const double *x = in + n * dim;
        double sum_of_squares = 0.0;
        for (int64_t d = 0; d < dim; d++) {
            sum_of_squares += x[d] * x[d];
        }
        const double r = 1.0 / sqrt(sum_of_squares / (double)dim + eps);
        rstd[n] = r;
        for (int64_t d = 0; d < dim; d++) {
            out[n * dim + d] = weight[d] * (x[d] * r);
        }
    }
}

void rmsnorm_backward(double *din, double *dweight, const double *dout, const double *in,
                      const double *weight, const double *rstd, int64_t rows, int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        const double *x = in + n * dim;
        const double *dy = dout + n * dim;
        const double r = rstd[n];
        double projection = 0.0;
        for (int64_t d = 0; d < dim; d++) {
            projection += x[d] * weight[d] * dy[d];
        }
        projection /= (double)dim;
        for (int64_t d = 0; d < dim; d++) {
            din[n * dim + d] += r * weight[d] * dy[d] - x[d] * r * r * r * projection;
            dweight[d] += dy[d] * x[d] * r;
        }
    }
}
