/* linear.c — out = in · weightᵀ in float64, forward and backward (see model_layers.h). */
#include "model_layers.h"

void linear_forward(double *out, const double *in, const double *weight, int64_t rows,
                    int64_t in_features, int64_t out_features) {
    for (int64_t n = 0; n < rows; n++) {
        const double *x = in + n * in_features;
        for (int64_t o = 0; o < out_features; o++) {
            const double *w = weight + o * in_features;
            double sum = 0.0;
            for (int64_t i = 0; i < in_features; i++) {
                sum += x[i] * w[i];
            }
            out[n * out_features + o] = sum;
        }
    }
}

void linear_backward(double *din, double *dweight, const double *dout, const double *in,
                     const double *weight, int64_t rows, int64_t in_features,
                     int64_t out_features) {
    for (int64_t n = 0; n < rows; n++) {
        const double *x = in + n * in_features;
        double *dx = din + n * in_features;
        for (int64_t o = 0; o < out_features; o++) {
            const double g = dout[n * out_features + o];
            const double *w = weight + o * in_features;
            double *dw = dweight + o * in_features;
            for (int64_t i = 0; i < in_features; i++) {
                dx[i] += g * w[i];
                dw[i] += g * x[i];
            }
        }
    }
}
