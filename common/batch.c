/* batch.c — allocating and releasing a batch of inputs (see batch.h). */
#include "common/batch.h"

#include <stdlib.h>
#include <string.h>

void cpparity_batch_free(cpparity_batch *batch) {
    free(batch->input_ids);
    free(batch->labels);
    free(batch->attention_mask);
    free(batch->position_ids);
    memset(batch, 0, sizeof *batch);
}

cpparity_status cpparity_batch_allocate(cpparity_batch *batch, int64_t batch_size, int64_t seq_len,
                                        cpparity_error *error) {
    memset(batch, 0, sizeof *batch);
    if (batch_size < 0 || seq_len < 0 || (seq_len > 0 && batch_size > INT64_MAX / seq_len)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "batch of %lld x %lld tokens: size out of range",
                                  (long long)batch_size, (long long)seq_len);
    }
    const size_t tokens = (size_t)(batch_size * seq_len);
    batch->batch = batch_size;
    batch->seq_len = seq_len;
    batch->input_ids = calloc(tokens > 0 ? tokens : 1, sizeof *batch->input_ids);
    batch->labels = calloc(tokens > 0 ? tokens : 1, sizeof *batch->labels);
    batch->attention_mask = calloc(tokens > 0 ? tokens : 1, sizeof *batch->attention_mask);
    batch->position_ids = calloc(tokens > 0 ? tokens : 1, sizeof *batch->position_ids);
    if (!batch->input_ids || !batch->labels || !batch->attention_mask || !batch->position_ids) {
        cpparity_batch_free(batch);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (batch of %lld x %lld tokens)",
                                  (long long)batch_size, (long long)seq_len);
    }
    return CPPARITY_OK;
}
