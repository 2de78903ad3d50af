/* cross_entropy.c — token cross-entropy over shifted labels in float64 (see model_layers.h). */
#include <math.h>

#include "common/batch.h"
#include "model_layers.h"

/* log Σ exp(row) with the maximum subtracted first. */
static double log_sum_exp(const double *row, int64_t vocab) {
    double largest = row[0];
    for (int64_t v = 1; v < vocab; v++) {
        largest = row[v] > largest ? row[v] : largest;
    }
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; v++) {
        sum += exp(row[v] - largest);
    }
    return largest + log(sum);
}

double cross_entropy_sum(const double *logits, const int64_t *labels, int64_t rows, int64_t vocab,
                         int64_t *valid) {
    double total = 0.0;
    *valid = 0;
    for (int64_t n = 0; n < rows; n++) {
        if (labels[n] == CPPARITY_IGNORE_INDEX) {
            continue;
        }
        const double *row = logits + n * vocab;
        total += log_sum_exp(row, vocab) - row[labels[n]];
        *valid += 1;
    }
    return total;
}

void cross_entropy_backward(double *dlogits, const double *logits, const int64_t *labels,
                            int64_t rows, int64_t vocab, double scale) {
    for (int64_t n = 0; n < rows; n++) {
        if (labels[n] == CPPARITY_IGNORE_INDEX) {
            continue;
        }
        const double *row = logits + n * vocab;
        const double lse = log_sum_exp(row, vocab);
        for (int64_t v = 0; v < vocab; v++) {
            dlogits[n * vocab + v] += scale * exp(row[v] - lse);
        }
        dlogits[n * vocab + labels[n]] -= scale;
    }
}
