/* rope.c — rotary position embeddings, "half" layout, in float64 (see model_layers.h). */
#include <math.h>

#include "model_layers.h"

void rope_tables(double *cos_table, double *sin_table, const int64_t *position_ids, int64_t rows,
                 int64_t head_dim, double theta) {
    const int64_t half = head_dim / 2;
    for (int64_t n = 0; n < rows; n++) {
        for (int64_t i = 0; i < half; i++) {
            const double inverse_frequency = pow(theta, -(double)(2 * i) / (double)head_dim);
            const double angle = (double)position_ids[n] * inverse_frequency;
            cos_table[n * half + i] = cos(angle);
            sin_table[n * half + i] = sin(angle);
        }
    }
}

/* Rotates every head of every row by +angle (direction 1) or −angle (direction −1). */
static void rotate(double *x, const double *cos_table, const double *sin_table, int64_t rows,
                   int64_t heads, int64_t head_dim, double direction) {
    const int64_t half = head_dim / 2;
    for (int64_t n = 0; n < rows; n++) {
        const double *c = cos_table + n * half;
        const double *s = sin_table + n * half;
        for (int64_t h = 0; h < heads; h++) {
            double *head = x + (n * heads + h) * head_dim;
            for (int64_t i = 0; i < half; i++) {
                const double a = head[i], b = head[i + half];
                const double sine = direction * s[i];
                head[i] = a * c[i] - b * sine;
                head[i + half] = b * c[i] + a * sine;
            }
        }
    }
}

void rope_forward(double *x, const double *cos_table, const double *sin_table, int64_t rows,
                  int64_t heads, int64_t head_dim) {
    rotate(x, cos_table, sin_table, rows, heads, head_dim, 1.0);
}

void rope_backward(double *dx, const double *cos_table, const double *sin_table, int64_t rows,
                   int64_t heads, int64_t head_dim) {
    rotate(dx, cos_table, sin_table, rows, heads, head_dim, -1.0);
}
