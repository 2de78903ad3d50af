/* ulysses.c — packing, all-to-all and unpacking around attention (see ulysses.h). */
#include "ulysses.h"

#include <stdbool.h>
#include <string.h>

cpparity_status ulysses_heads_to_sequence(cpparity_comm *comm, float *out, const float *in,
                                          int64_t batch, int64_t local_len, int64_t heads,
                                          int64_t head_dim, float *scratch, cpparity_error *error) {
    return ulysses_heads_to_sequence_ordered(comm, out, in, batch, local_len, heads, head_dim,
                                             scratch, CPPARITY_FAULT_NONE, error);
}

cpparity_status ulysses_heads_to_sequence_ordered(cpparity_comm *comm, float *out, const float *in,
                                                  int64_t batch, int64_t local_len, int64_t heads,
                                                  int64_t head_dim, float *scratch,
                                                  cpparity_fault fault, cpparity_error *error) {
    const int64_t cp = comm->size, local_heads = heads / cp;
    const int64_t block = batch * local_len * local_heads * head_dim; /* elements per rank */
    const size_t row_bytes = (size_t)(local_heads * head_dim) * sizeof(float);
    float *send = scratch, *receive = scratch + cp * block;
    /* block j = the heads ulysses_sent_head gives rank j, for my tokens, [B, L, H/cp, Dh]: one
     * copy of the row when they are consecutive (always, but with a2a-head-order planted), else
     * head by head. The mapping is asked every time, so a fault planted in it is on this path. */
    for (int64_t j = 0; j < cp; j++) {
        const int64_t first = ulysses_sent_head(j, 0, heads, cp, fault);
        bool consecutive = true;
        for (int64_t i = 1; i < local_heads; i++) {
            consecutive = consecutive && ulysses_sent_head(j, i, heads, cp, fault) == first + i;
        }
        for (int64_t token = 0; token < batch * local_len; token++) {
            float *to = send + j * block + token * local_heads * head_dim;
            if (consecutive) {
                memcpy(to, in + (token * heads + first) * head_dim, row_bytes);
                continue;
            }
            for (int64_t i = 0; i < local_heads; i++) {
                memcpy(to + i * head_dim,
                       in + (token * heads + ulysses_sent_head(j, i, heads, cp, fault)) * head_dim,
                       (size_t)head_dim * sizeof(float));
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
    ulysses_repeat_kv_mapped(out, in, tokens, kv_heads, cp, head_dim, CPPARITY_FAULT_NONE);
}

int64_t ulysses_sent_head(int64_t to, int64_t slot, int64_t heads, int64_t cp,
                          cpparity_fault fault) {
    return fault == CPPARITY_FAULT_A2A_HEAD_ORDER ? slot * cp + to : to * (heads / cp) + slot;
}

int64_t ulysses_repeated_head(int64_t j, int64_t kv_heads, int64_t cp, cpparity_fault fault) {
    return fault == CPPARITY_FAULT_GQA_KV_MAPPING ? j % kv_heads : j / (cp / kv_heads);
}

int ulysses_sums_repeat(int64_t j, int64_t kv_heads, int64_t cp, cpparity_fault fault) {
    return fault != CPPARITY_FAULT_KV_SUM_BACK || j % (cp / kv_heads) == 0;
}

void ulysses_repeat_kv_mapped(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                              int64_t cp, int64_t head_dim, cpparity_fault fault) {
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t j = 0; j < cp; j++) {
            memcpy(out + (t * cp + j) * head_dim,
                   in + (t * kv_heads + ulysses_repeated_head(j, kv_heads, cp, fault)) * head_dim,
                   (size_t)head_dim * sizeof(float));
        }
    }
}

void ulysses_sum_repeated_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                             int64_t cp, int64_t head_dim) {
    ulysses_sum_repeated_kv_mapped(out, in, tokens, kv_heads, cp, head_dim, CPPARITY_FAULT_NONE);
}

void ulysses_sum_repeated_kv_mapped(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                                    int64_t cp, int64_t head_dim, cpparity_fault fault) {
    memset(out, 0, (size_t)(tokens * kv_heads * head_dim) * sizeof(float));
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t j = 0; j < cp; j++) { /* repeats in order: a fixed summation order */
            const int64_t g = ulysses_repeated_head(j, kv_heads, cp, fault);
            if (!ulysses_sums_repeat(j, kv_heads, cp, fault)) {
                continue; /* kv-sum-back: only the first repeat of each kv head kept */
            }
            float *sum = out + (t * kv_heads + g) * head_dim;
            const float *part = in + (t * cp + j) * head_dim;
            for (int64_t d = 0; d < head_dim; d++) {
                sum[d] += part[d];
            }
        }
    }
}
