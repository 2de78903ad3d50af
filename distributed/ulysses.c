/* ulysses.c — packing, all-to-all and unpacking around attention (see ulysses.h). */
#include "ulysses.h"

#include <string.h>

cpparity_status ulysses_heads_to_sequence(cpparity_comm *comm, float *out, const float *in,
                                          int64_t batch, int64_t local_len, int64_t heads,
                                          int64_t head_dim, float *scratch, cpparity_error *error) {
    const int64_t cp = comm->size, local_heads = heads / cp;
    const int64_t block = batch * local_len * local_heads * head_dim; /* elements per rank */
    const size_t row_bytes = (size_t)(local_heads * head_dim) * sizeof(float);
    float *send = scratch, *receive = scratch + cp * block;
    /* block j = heads of rank j for my tokens, [B, L, H/cp, Dh] */
    for (int64_t j = 0; j < cp; j++) {
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t t = 0; t < local_len; t++) {
                memcpy(send + j * block + (b * local_len + t) * local_heads * head_dim,
                       in + ((b * local_len + t) * heads + j * local_heads) * head_dim, row_bytes);
            }
        }
    }
    cpparity_status status =
        cpparity_all_to_all(comm, send, receive, block, CPPARITY_FLOAT32, NULL, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    /* block i = my heads for the tokens of rank i: positions [i·L, (i+1)·L) */
    const int64_t seq_len = local_len * cp;
    for (int64_t i = 0; i < cp; i++) {
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t t = 0; t < local_len; t++) {
                memcpy(out + (b * seq_len + i * local_len + t) * local_heads * head_dim,
                       receive + i * block + (b * local_len + t) * local_heads * head_dim,
                       row_bytes);
            }
        }
    }
    return CPPARITY_OK;
}

cpparity_status ulysses_sequence_to_heads(cpparity_comm *comm, float *out, const float *in,
                                          int64_t batch, int64_t local_len, int64_t heads,
                                          int64_t head_dim, float *scratch, cpparity_error *error) {
    const int64_t cp = comm->size, local_heads = heads / cp, seq_len = local_len * cp;
    const int64_t block = batch * local_len * local_heads * head_dim;
    const size_t row_bytes = (size_t)(local_heads * head_dim) * sizeof(float);
    float *send = scratch, *receive = scratch + cp * block;
    /* block j = my heads for the tokens of rank j */
    for (int64_t j = 0; j < cp; j++) {
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t t = 0; t < local_len; t++) {
                memcpy(send + j * block + (b * local_len + t) * local_heads * head_dim,
                       in + (b * seq_len + j * local_len + t) * local_heads * head_dim, row_bytes);
            }
        }
    }
    cpparity_status status =
        cpparity_all_to_all(comm, send, receive, block, CPPARITY_FLOAT32, NULL, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    /* block i = heads of rank i for my tokens */
    for (int64_t i = 0; i < cp; i++) {
        for (int64_t b = 0; b < batch; b++) {
            for (int64_t t = 0; t < local_len; t++) {
                memcpy(out + ((b * local_len + t) * heads + i * local_heads) * head_dim,
                       receive + i * block + (b * local_len + t) * local_heads * head_dim,
                       row_bytes);
            }
        }
    }
    return CPPARITY_OK;
}

void ulysses_repeat_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads, int64_t cp,
                       int64_t head_dim) {
    const int64_t repeats = cp / kv_heads;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t j = 0; j < cp; j++) {
            memcpy(out + (t * cp + j) * head_dim, in + (t * kv_heads + j / repeats) * head_dim,
                   (size_t)head_dim * sizeof(float));
        }
    }
}

void ulysses_sum_repeated_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                             int64_t cp, int64_t head_dim) {
    const int64_t repeats = cp / kv_heads;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t g = 0; g < kv_heads; g++) {
            float *sum = out + (t * kv_heads + g) * head_dim;
            memset(sum, 0, (size_t)head_dim * sizeof(float));
            for (int64_t j = g * repeats; j < (g + 1) * repeats; j++) {
                const float *part = in + (t * cp + j) * head_dim;
                for (int64_t d = 0; d < head_dim; d++) {
                    sum[d] += part[d];
                }
            }
        }
    }
}
