/* layers_f32.c — float32 layers of the implementation under test (see layers_f32.h). */
#include "layers_f32.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/batch.h"

void f32_linear_forward(float *out, const float *in, const float *weight, int64_t rows,
                        int64_t in_features, int64_t out_features) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out_features,
                (int)in_features, 1.0f, in, (int)in_features, weight, (int)in_features, 0.0f, out,
                (int)out_features);
}

void f32_linear_backward(float *din, float *dweight, const float *dout, const float *in,
                         const float *weight, int64_t rows, int64_t in_features,
                         int64_t out_features, int accumulate) {
    /* din [N, I] = dout [N, O] · weight [O, I] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)in_features,
                (int)out_features, 1.0f, dout, (int)out_features, weight, (int)in_features,
                accumulate ? 1.0f : 0.0f, din, (int)in_features);
    /* dweight [O, I] += doutᵀ [O, N] · in [N, I] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out_features, (int)in_features,
                (int)rows, 1.0f, dout, (int)out_features, in, (int)in_features, 1.0f, dweight,
                (int)in_features);
}

void f32_rmsnorm_forward(float *out, float *rstd, const float *in, const float *weight,
                         int64_t rows, int64_t dim, double eps) {
    for (int64_t n = 0; n < rows; n++) {
        const float *x = in + n * dim;
        float squares = 0.0f;
        for (int64_t i = 0; i < dim; i++) {
            squares += x[i] * x[i];
        }
        const float scale = 1.0f / sqrtf(squares / (float)dim + (float)eps);
        rstd[n] = scale;
        for (int64_t i = 0; i < dim; i++) {
            out[n * dim + i] = x[i] * scale * weight[i];
        }
    }
}

void f32_rmsnorm_backward(float *din, float *dweight, const float *dout, const float *in,
                          const float *weight, const float *rstd, int64_t rows, int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        const float *x = in + n * dim, *g = dout + n * dim;
        const float scale = rstd[n];
        float dot = 0.0f;
        for (int64_t i = 0; i < dim; i++) {
            dot += g[i] * weight[i] * x[i];
        }
        const float correction = dot * scale * scale * scale / (float)dim;
        for (int64_t i = 0; i < dim; i++) {
            din[n * dim + i] += g[i] * weight[i] * scale - x[i] * correction;
            dweight[i] += g[i] * x[i] * scale;
        }
    }
}

void f32_rope_apply(float *x, const int64_t *position_ids, int64_t rows, int64_t heads,
                    int64_t head_dim, double theta, int direction) {
    const int64_t half = head_dim / 2;
    for (int64_t n = 0; n < rows; n++) {
        for (int64_t i = 0; i < half; i++) {
            /* angles in double: float32 positions times frequencies lose digits at large t */
            const double frequency = 1.0 / pow(theta, (double)(2 * i) / (double)head_dim);
            const double angle = (double)position_ids[n] * frequency;
            const float c = (float)cos(angle), s = (float)direction * (float)sin(angle);
            for (int64_t h = 0; h < heads; h++) {
                float *pair = x + (n * heads + h) * head_dim;
                const float first = pair[i], second = pair[i + half];
                pair[i] = first * c - second * s;
                pair[i + half] = second * c + first * s;
            }
        }
    }
}

void f32_swiglu_forward(float *out, const float *gate, const float *up, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const float sigma = 1.0f / (1.0f + expf(-gate[i]));
        out[i] = gate[i] * sigma * up[i];
    }
}

void f32_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        const float sigma = 1.0f / (1.0f + expf(-gate[i]));
        const float silu = gate[i] * sigma;
        dup[i] = dout[i] * silu;
        dgate[i] = dout[i] * up[i] * (sigma + silu * (1.0f - sigma));
    }
}

void f32_embedding_forward(float *out, const int64_t *ids, const float *weight, int64_t rows,
                           int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        memcpy(out + n * dim, weight + ids[n] * dim, (size_t)dim * sizeof(float));
    }
}

void f32_embedding_backward(float *dweight, const float *dout, const int64_t *ids, int64_t rows,
                            int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        for (int64_t i = 0; i < dim; i++) {
            dweight[ids[n] * dim + i] += dout[n * dim + i];
        }
    }
}

/* log Σ exp over one row of logits, shifted by its maximum. */
static float row_log_sum_exp(const float *row, int64_t vocab) {
    float maximum = row[0];
    for (int64_t v = 1; v < vocab; v++) {
        maximum = row[v] > maximum ? row[v] : maximum;
    }
    float sum = 0.0f;
    for (int64_t v = 0; v < vocab; v++) {
        sum += expf(row[v] - maximum);
    }
    return maximum + logf(sum);
}

float f32_cross_entropy_sum(const float *logits, const int64_t *labels, int64_t rows, int64_t vocab,
                            int64_t *labeled) {
    float total = 0.0f;
    *labeled = 0;
    for (int64_t n = 0; n < rows; n++) {
        if (labels[n] == CPPARITY_IGNORE_INDEX) {
            continue;
        }
        total += row_log_sum_exp(logits + n * vocab, vocab) - logits[n * vocab + labels[n]];
        *labeled += 1;
    }
    return total;
}

void f32_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *labels,
                                int64_t rows, int64_t vocab, float scale) {
    for (int64_t n = 0; n < rows; n++) {
        float *grad = dlogits + n * vocab;
        if (labels[n] == CPPARITY_IGNORE_INDEX) {
            memset(grad, 0, (size_t)vocab * sizeof(float));
            continue;
        }
        const float *row = logits + n * vocab;
        const float lse = row_log_sum_exp(row, vocab);
        for (int64_t v = 0; v < vocab; v++) {
            grad[v] = expf(row[v] - lse) * scale;
        }
        grad[labels[n]] -= scale;
    }
}
