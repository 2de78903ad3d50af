/*
 * attention_backward.c — float64 reference attention backward (see attention.h).
 *
 * ADDS into dq, dk, dv. Per query row, with p_k = exp(s_k − lse) over allowed keys only:
 *   D      = Σ_d dout_d · out_d
 *   dp_k   = dout · v_k
 *   ds_k   = p_k (dp_k − D)
 *   dq    += scale Σ_k ds_k k_k,   dk_k += scale ds_k q,   dv_k += p_k dout
 * Fully masked rows (lse = −∞) contribute nothing; masked pairs are skipped.
 */
#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_rows.h"

/* Pointers into one batch row of the (B,S,Hkv,Dh) tensors for kv head g. */
typedef struct kv_head {
    const double *keys;  /* (S, Dh) rows of this kv head, row stride `stride` */
    double *key_grads;   /* (S, Dh) same layout as keys */
    double *value_grads; /* (S, Dh) same layout as keys */
    int64_t stride;      /* kv_heads · Dh */
} kv_head;

static void backward_row(attention_rows *rows, const kv_head *head, double *dq_row,
                         const double *dout_row, const double *query, const double *out_row,
                         double row_lse, double *dp, int64_t b, int64_t q, double scale) {
    const int64_t head_dim = rows->shape.head_dim, seq_len = rows->shape.seq_len;
    if (row_lse == -INFINITY) {
        return; /* fully masked row: no key, no gradient */
    }
    attention_rows_scores(rows, b, q, query, scale);
    double delta = 0.0;
    for (int64_t d = 0; d < head_dim; d++) {
        delta += dout_row[d] * out_row[d];
    }
    const int64_t end = attention_rows_end_entry(rows, q);
    for (int64_t entry = attention_rows_first_entry(rows, q); entry < end; entry++) {
        int64_t k_begin, k_end;
        attention_rows_entry_keys(rows, entry, &k_begin, &k_end);
        for (int64_t k = k_begin; k < k_end; k++) {
            dp[k] = 0.0;
        }
        for (int64_t d = 0; d < head_dim; d++) {
            const double dout_d = dout_row[d];
            const double *values_d = rows->values_transposed + d * seq_len;
            for (int64_t k = k_begin; k < k_end; k++) {
                dp[k] += dout_d * values_d[k];
            }
        }
        for (int64_t k = k_begin; k < k_end; k++) {
            if (!rows->allowed[k]) {
                continue;
            }
            const double probability = exp(rows->scores[k] - row_lse);
            const double score_grad = probability * (dp[k] - delta);
            const double *key = head->keys + k * head->stride;
            double *key_grad = head->key_grads + k * head->stride;
            double *value_grad = head->value_grads + k * head->stride;
            for (int64_t d = 0; d < head_dim; d++) {
                dq_row[d] += scale * score_grad * key[d];
                key_grad[d] += scale * score_grad * query[d];
                value_grad[d] += probability * dout_row[d];
            }
        }
    }
}

cpparity_status reference_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                                             const double *q, const double *k, const double *v,
                                             const double *out, const double *lse,
                                             const reference_mask *mask,
                                             reference_attention_shape shape, double scale,
                                             cpparity_error *error) {
    attention_rows rows;
    cpparity_status status = attention_rows_init(&rows, mask, shape, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    double *dp = malloc((size_t)shape.seq_len * sizeof *dp);
    if (dp == NULL) {
        attention_rows_free(&rows);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (reference attention backward)");
    }
    const int64_t group = shape.heads / shape.kv_heads;
    const int64_t query_stride = shape.heads * shape.head_dim;
    const int64_t kv_stride = shape.kv_heads * shape.head_dim;
    for (int64_t b = 0; b < shape.batch && status == CPPARITY_OK; b++) {
        status = attention_rows_select_batch(&rows, b, error);
        for (int64_t g = 0; g < shape.kv_heads && status == CPPARITY_OK; g++) {
            attention_rows_transpose_head(&rows, rows.keys_transposed, k, b, g);
            attention_rows_transpose_head(&rows, rows.values_transposed, v, b, g);
            const int64_t head_offset = b * shape.seq_len * kv_stride + g * shape.head_dim;
            const kv_head head = {k + head_offset, dk + head_offset, dv + head_offset, kv_stride};
            for (int64_t h = g * group; h < (g + 1) * group; h++) {
                for (int64_t t = 0; t < shape.seq_len; t++) {
                    const int64_t offset =
                        (b * shape.seq_len + t) * query_stride + h * shape.head_dim;
                    backward_row(&rows, &head, dq + offset, dout + offset, q + offset, out + offset,
                                 lse[(b * shape.heads + h) * shape.seq_len + t], dp, b, t, scale);
                }
            }
        }
    }
    free(dp);
    attention_rows_free(&rows);
    return status;
}
