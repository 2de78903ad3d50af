/*
 * swiglu.c — SwiGLU activation and the residual add in float64 (see model_layers.h).
 *   out = silu(g) ⊙ u,  silu(g) = g·σ(g),  silu'(g) = σ(g)·(1 + g·(1 − σ(g)))
 */
#include <math.h>

#include "model_layers.h"

static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}

void swiglu_forward(double *out, const double *gate, const double *up, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        out[i] = gate[i] * sigmoid(gate[i]) * up[i];
    }
}

void swiglu_backward(double *dgate, double *dup, const double *dout, const double *gate,
                     const double *up, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const double s = sigmoid(gate[i]);
        dgate[i] += dout[i] * up[i] * s * (1.0 + gate[i] * (1.0 - s));
        dup[i] += dout[i] * gate[i] * s;
    }
}

void residual_forward(double *out, const double *a, const double *b, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        out[i] = a[i] + b[i];
    }
}
