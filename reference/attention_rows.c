/*
 * attention_rows.c — per-query-row scores over allowed keys, shared by the reference attention's
 * forward and backward (see attention_rows.h).
 */
#include "attention_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

cpparity_status attention_rows_init(attention_rows *rows, const reference_mask *mask,
                                    reference_attention_shape shape, cpparity_error *error) {
    memset(rows, 0, sizeof *rows);
    if (shape.batch != mask->batch || shape.seq_len != mask->seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention shape B=%lld S=%lld does not match the mask's "
                                  "B=%lld S=%lld",
                                  (long long)shape.batch, (long long)shape.seq_len,
                                  (long long)mask->batch, (long long)mask->seq_len);
    }
    if (shape.heads < 1 || shape.kv_heads < 1 || shape.head_dim < 1 ||
        shape.heads % shape.kv_heads != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention heads: H=%lld must be a positive multiple of "
                                  "Hkv=%lld, and head_dim=%lld >= 1",
                                  (long long)shape.heads, (long long)shape.kv_heads,
                                  (long long)shape.head_dim);
    }
    rows->shape = shape;
    rows->mask = mask;
    size_t seq_len = (size_t)shape.seq_len, head_dim = (size_t)shape.head_dim;
    rows->keys_transposed = malloc(head_dim * seq_len * sizeof(double));
    rows->values_transposed = malloc(head_dim * seq_len * sizeof(double));
    rows->scores = malloc(seq_len * sizeof(double));
    rows->allowed = malloc(seq_len);
    if (!rows->keys_transposed || !rows->values_transposed || !rows->scores || !rows->allowed) {
        attention_rows_free(rows);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (reference attention scratch, S=%lld Dh=%lld)",
                                  (long long)shape.seq_len, (long long)shape.head_dim);
    }
    return CPPARITY_OK;
}

void attention_rows_free(attention_rows *rows) {
    reference_block_list_free(&rows->blocks);
    free(rows->keys_transposed);
    free(rows->values_transposed);
    free(rows->scores);
    free(rows->allowed);
    memset(rows, 0, sizeof *rows);
}

cpparity_status attention_rows_select_batch(attention_rows *rows, int64_t b,
                                            cpparity_error *error) {
    reference_block_list_free(&rows->blocks);
    return reference_mask_block_list(rows->mask, b, &rows->blocks, error);
}

void attention_rows_transpose_head(const attention_rows *rows, double *destination,
                                   const double *source, int64_t b, int64_t g) {
    const int64_t seq_len = rows->shape.seq_len, head_dim = rows->shape.head_dim;
    const int64_t token_stride = rows->shape.kv_heads * head_dim;
    const double *head = source + b * seq_len * token_stride + g * head_dim;
    for (int64_t t = 0; t < seq_len; t++) {
        for (int64_t d = 0; d < head_dim; d++) {
            destination[d * seq_len + t] = head[t * token_stride + d];
        }
    }
}

int64_t attention_rows_first_entry(const attention_rows *rows, int64_t q) {
    return rows->blocks.offsets[q / rows->mask->block_size];
}

int64_t attention_rows_end_entry(const attention_rows *rows, int64_t q) {
    return rows->blocks.offsets[q / rows->mask->block_size + 1];
}

void attention_rows_entry_keys(const attention_rows *rows, int64_t entry, int64_t *k_begin,
                               int64_t *k_end) {
    const int64_t size = rows->mask->block_size;
    *k_begin = rows->blocks.key_block[entry] * size;
    *k_end = *k_begin + size < rows->shape.seq_len ? *k_begin + size : rows->shape.seq_len;
}

double attention_rows_scores(attention_rows *rows, int64_t b, int64_t q, const double *query,
                             double scale) {
    const int64_t seq_len = rows->shape.seq_len, head_dim = rows->shape.head_dim;
    double *scores = rows->scores;
    double largest = -INFINITY;
    const int64_t end = attention_rows_end_entry(rows, q);
    for (int64_t entry = attention_rows_first_entry(rows, q); entry < end; entry++) {
        int64_t k_begin, k_end;
        attention_rows_entry_keys(rows, entry, &k_begin, &k_end);
        /* Each score is summed over d in order; the loop over keys is the inner one so that
         * it vectorises without reassociating any sum. */
        for (int64_t k = k_begin; k < k_end; k++) {
            scores[k] = 0.0;
        }
        for (int64_t d = 0; d < head_dim; d++) {
            const double query_d = query[d];
            const double *keys_d = rows->keys_transposed + d * seq_len;
            for (int64_t k = k_begin; k < k_end; k++) {
                scores[k] += query_d * keys_d[k];
            }
        }
        const int all_allowed = rows->blocks.block_class[entry] == REFERENCE_BLOCK_ALL;
        for (int64_t k = k_begin; k < k_end; k++) {
            scores[k] *= scale;
            rows->allowed[k] =
                all_allowed ? 1 : (uint8_t)reference_mask_allowed(rows->mask, b, q, k);
            if (rows->allowed[k] && scores[k] > largest) {
                largest = scores[k];
            }
        }
    }
    return largest;
}
