/*
 * model_f32_head.c — the float32 model's LM head and loss without holding its slice's logits
 * (B·L × V: 8 GiB at 16k tokens and Llama 3's vocabulary) as real frameworks chunk the loss: the
 * logits of MODEL_F32_HEAD_ROWS tokens at a time, made from the saved final norm's output for the
 * loss, made again for the backward and whenever the harness reads rows (model_f32.h). Every chunk
 * is the same sgemm on the same rows, so the rows read are the ones the loss used.
 */
#include <stdlib.h>
#include <string.h>

#include "distributed/cp/shard.h"
#include "distributed/models/layers_f32.h"
#include "distributed/models/model_f32.h"

void f32_head_logits(const f32_model *model, int64_t row, int64_t rows, float *out) {
    const cpparity_model_config *c = &model->config;
    const int64_t D = c->hidden_size, V = c->vocab_size, L = model->shard.local_len;
    f32_linear_forward(out, model->activations + model->final_normed + row * D,
                       model->parameters + model->parameter.lm_head, rows, D, V);
    f32_model_store(model, out, rows * V);
    if (model->fault == CPPARITY_FAULT_AUTOPAD_TRUNCATE) { /* truncated tokens: no logits */
        for (int64_t n = row; n < row + rows; n++) {
            if (shard_position(&model->shard, model->shard.rank, n % L) >=
                shard_truncated_length(&model->shard)) {
                memset(out + (n - row) * V, 0, (size_t)V * sizeof(float));
            }
        }
    }
}

cpparity_status f32_head_forward(f32_model *model, const cpparity_batch *local,
                                 cpparity_error *error) {
    const int64_t N = model->batch * model->shard.local_len, V = model->config.vocab_size;
    const int64_t chunk = f32_head_chunk_rows(model);
    float *logits = malloc((size_t)(chunk * V + 1) * sizeof *logits);
    if (logits == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (a chunk of logits)", model->comm->rank);
    }
    model->loss_sum = 0.0f;
    model->labels_local = 0;
    for (int64_t row = 0; row < N; row += chunk) {
        const int64_t rows = row + chunk < N ? chunk : N - row;
        int64_t labeled = 0;
        f32_head_logits(model, row, rows, logits);
        model->loss_sum += f32_cross_entropy_sum(logits, local->labels + row, rows, V, &labeled);
        model->labels_local += labeled;
    }
    free(logits);
    return CPPARITY_OK;
}

void f32_head_backward(f32_model *model, const cpparity_batch *local, float weight, float *dnormed,
                       float *logits, float *dlogits) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len, V = c->vocab_size;
    const int64_t D = c->hidden_size, chunk = f32_head_chunk_rows(model);
    const float *w = model->parameters;
    for (int64_t row = 0; row < N; row += chunk) {
        const int64_t rows = row + chunk < N ? chunk : N - row;
        f32_head_logits(model, row, rows, logits);
        f32_cross_entropy_backward(dlogits, logits, local->labels + row, rows, V, weight);
        f32_linear_backward(dnormed + row * D, model->gradients + model->parameter.lm_head, dlogits,
                            model->activations + model->final_normed + row * D,
                            w + model->parameter.lm_head, rows, D, V, 0);
    }
}

int64_t f32_head_chunk_rows(const f32_model *model) {
    const int64_t N = model->batch * model->shard.local_len;
    return N < MODEL_F32_HEAD_ROWS ? N : MODEL_F32_HEAD_ROWS;
}
