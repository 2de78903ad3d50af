/*
 * attention_forward.c — float64 reference attention forward (see attention.h).
 *
 * Per query row: scores over the allowed keys, m = their maximum, p_k = exp(s_k − m),
 * out = Σ p_k v_k / Σ p_k, lse = m + log Σ p_k. Two plain passes in key order, no online
 * rescaling, so the result is the textbook softmax evaluated in float64.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "attention_rows.h"

/* One query row of head h: writes out_row (Dh) and returns its log-sum-exp. */
static double forward_row(attention_rows *rows, double *out_row, const double *query,
                          const double *v, int64_t b, int64_t q, int64_t g, double scale) {
    const reference_attention_shape shape = rows->shape;
    const int64_t head_dim = shape.head_dim;
    const int64_t value_stride = shape.kv_heads * head_dim;
    const double *values = v + b * shape.seq_len * value_stride + g * head_dim;

    memset(out_row, 0, (size_t)head_dim * sizeof *out_row);
    const double largest = attention_rows_scores(rows, b, q, query, scale);
    if (largest == -INFINITY) {
        return -INFINITY; /* fully masked row: out stays exactly 0 */
    }
    double sum = 0.0;
    const int64_t end = attention_rows_end_entry(rows, q);
    for (int64_t entry = attention_rows_first_entry(rows, q); entry < end; entry++) {
        int64_t k_begin, k_end;
        attention_rows_entry_keys(rows, entry, &k_begin, &k_end);
        for (int64_t k = k_begin; k < k_end; k++) {
            if (!rows->allowed[k]) {
                continue;
            }
            const double weight = exp(rows->scores[k] - largest);
            sum += weight;
            const double *value = values + k * value_stride;
            for (int64_t d = 0; d < head_dim; d++) {
                out_row[d] += weight * value[d];
            }
        }
    }
    for (int64_t d = 0; d < head_dim; d++) {
        out_row[d] /= sum;
    }
    return largest + log(sum);
}

cpparity_status reference_attention_forward(double *out, double *lse, const double *q,
                                            const double *k, const double *v,
                                            const reference_mask *mask,
                                            reference_attention_shape shape, double scale,
                                            cpparity_error *error) {
    attention_rows rows;
    cpparity_status status = attention_rows_init(&rows, mask, shape, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t group = shape.heads / shape.kv_heads;
    const int64_t query_stride = shape.heads * shape.head_dim;
    for (int64_t b = 0; b < shape.batch && status == CPPARITY_OK; b++) {
        status = attention_rows_select_batch(&rows, b, error);
        for (int64_t g = 0; g < shape.kv_heads && status == CPPARITY_OK; g++) {
            attention_rows_transpose_head(&rows, rows.keys_transposed, k, b, g);
            for (int64_t h = g * group; h < (g + 1) * group; h++) {
                for (int64_t t = 0; t < shape.seq_len; t++) {
                    const int64_t offset =
                        (b * shape.seq_len + t) * query_stride + h * shape.head_dim;
                    lse[(b * shape.heads + h) * shape.seq_len + t] =
                        forward_row(&rows, out + offset, q + offset, v, b, t, g, scale);
                }
            }
        }
    }
    attention_rows_free(&rows);
    return status;
}
