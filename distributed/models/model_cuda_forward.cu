/* model_cuda_forward.cu — forward of the CUDA model (see model_cuda.h), model_f32_forward.c's
 * steps in the same order on device buffers. */
#include "distributed/models/model_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/device/cuda_check.h"
#include "distributed/kernels/kernel_call.h"

/* Gathers every rank's attention_mask and position_ids and rebuilds the compact mask over the
 * whole padded sequence on the host (once per step), as model_f32_forward.c does. */
static cpparity_status gather_mask(cuda_model *model, const cpparity_batch *local,
                                   cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, cp = model->shard.cp;
    const int64_t S = model->shard.padded_seq_len;
    int8_t *masks = (int8_t *)malloc((size_t)(cp * B * L));
    int64_t *positions = (int64_t *)malloc((size_t)(cp * B * L) * sizeof(int64_t));
    int8_t *mask_rows = (int8_t *)malloc((size_t)(B * S));
    int64_t *position_rows = (int64_t *)malloc((size_t)(B * S) * sizeof(int64_t));
    cpparity_status status = CPPARITY_OK;
    if (!masks || !positions || !mask_rows || !position_rows) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (mask gather)");
    }
    if (status == CPPARITY_OK) {
        status = cuda_model_all_gather_host(model, local->attention_mask, masks, B * L,
                                            CPPARITY_INT8, error);
    }
    if (status == CPPARITY_OK) {
        status = cuda_model_all_gather_host(model, local->position_ids, positions, B * L,
                                            CPPARITY_INT64, error);
    }
    if (status == CPPARITY_OK) {
        /* gathered [cp, B, L] → rows [B, S]: rank i's token t sits at its position under the
         * layout (shard.h; contiguous: i·L + t) */
        for (int64_t i = 0; i < cp; i++) {
            for (int64_t t = 0; t < L; t++) {
                const int64_t at = shard_position(&model->shard, i, t);
                for (int64_t b = 0; b < B; b++) {
                    mask_rows[b * S + at] = masks[(i * B + b) * L + t];
                    position_rows[b * S + at] = positions[(i * B + b) * L + t];
                }
            }
        }
        mask_storage_free(&model->mask);
        status = mask_storage_build_planted(&model->mask, B, S, mask_rows, position_rows,
                                            model->fault, L, error);
    }
    free(masks);
    free(positions);
    free(mask_rows);
    free(position_rows);
    return status;
}

/* Copies the slice's token ids, labels, positions and token groups to the device. */
static cpparity_status copy_slice(cuda_model *model, const cpparity_batch *local,
                                  cpparity_error *error) {
    const int64_t N = model->batch * model->shard.local_len;
    const size_t bytes = (size_t)N * sizeof(int64_t);
    cudaStream_t stream = model->stream;
    const cuda_token_groups *groups = &model->groups;
    const int64_t *host = model->host_groups; /* ids [N], starts [N + 1], order [N] */
    CUDA_CHECK(
        cudaMemcpyAsync(model->input_ids, local->input_ids, bytes, cudaMemcpyHostToDevice, stream),
        error, "copying the token ids");
    CUDA_CHECK(cudaMemcpyAsync(model->labels, local->labels, bytes, cudaMemcpyHostToDevice, stream),
               error, "copying the labels");
    /* rotary positions: the position ids (positions-local: the index inside the shard) */
    const int64_t *rope_positions =
        model->host_rope_positions != NULL ? model->host_rope_positions : local->position_ids;
    CUDA_CHECK(
        cudaMemcpyAsync(model->positions, rope_positions, bytes, cudaMemcpyHostToDevice, stream),
        error, "copying the position ids");
    CUDA_CHECK(cudaMemcpyAsync(groups->ids, host, (size_t)groups->count * sizeof(int64_t),
                               cudaMemcpyHostToDevice, stream),
               error, "copying the token groups");
    CUDA_CHECK(cudaMemcpyAsync(groups->starts, host + N,
                               (size_t)(groups->count + 1) * sizeof(int64_t),
                               cudaMemcpyHostToDevice, stream),
               error, "copying the token groups");
    CUDA_CHECK(
        cudaMemcpyAsync(groups->order, host + 2 * N + 1, bytes, cudaMemcpyHostToDevice, stream),
        error, "copying the token groups");
    /* the host arrays are reused by the next forward: nothing may still read them then */
    CUDA_CHECK(cudaStreamSynchronize(stream), error, "copying the slice");
    return CPPARITY_OK;
}

/* Counts the slice's labels and groups its tokens by id for the embedding's backward (ids and
 * labels were checked on the whole batch, the same on every rank: implementation_cuda.cu). */
static cpparity_status prepare_slice(cuda_model *model, const cpparity_batch *local,
                                     cpparity_error *error) {
    const int64_t N = model->batch * model->shard.local_len;
    model->labels_local = 0;
    for (int64_t n = 0; n < N; n++) {
        model->labels_local += local->labels[n] != CPPARITY_IGNORE_INDEX;
    }
    int64_t *host = model->host_groups;
    model->groups.count = cuda_token_groups_build(host, host + N, host + 2 * N + 1,
                                                  host + 3 * N + 1, local->input_ids, N);
    return copy_slice(model, local, error);
}

/* Moves kv heads [B, L, Hkv, Dh] to [B, U·L, Hkvl, Dh] over the Ulysses group (U = cp, or a
 * hybrid's U), repeating them first to U heads when replicated. */
static cpparity_status kv_to_sequence(cuda_model *model, float *out, const float *in,
                                      cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len, U = model->ulysses_degree;
    if (!model->kv_replicated) {
        return cuda_model_heads_to_sequence(model, out, in, c->num_key_value_heads, error);
    }
    if (model->fault == CPPARITY_FAULT_GQA_KV_MAPPING) {
        const cpparity_status status =
            cuda_model_fault_repeat_kv(model, model->repeated, in, error);
        return status == CPPARITY_OK
                   ? cuda_model_heads_to_sequence(model, out, model->repeated, U, error)
                   : status;
    }
    CUDA_CHECK(cuda_repeat_kv(model->repeated, in, N, c->num_key_value_heads, U, c->head_dim,
                              model->stream),
               error, "repeating kv heads");
    return cuda_model_heads_to_sequence(model, out, model->repeated, U, error);
}

/* Attention of layer l through the kernel, on the stream. */
static cpparity_status attention_forward(cuda_model *model, int64_t l, cpparity_error *error) {
    const cuda_layer_activations *a = &model->layer[l];
    float *act = model->activations;
    const cpparity_mask_description mask = cuda_model_layer_mask(model, l);
    const cpparity_attention_dims dims = {model->batch, model->shard.padded_seq_len,
                                          model->local_heads, model->local_kv_heads,
                                          model->config.head_dim};
    const float scale = cuda_model_attention_scale(model);
    char message[512] = "";
    kernel_call_begin(model->kernel); /* the threading contract (kernel_call.h) */
    const int failed = cuda_model_kernel_forward(
        model, act + a->sequence_out, act + a->sequence_lse, act + a->sequence_q,
        act + a->sequence_k, act + a->sequence_v, &mask, &dims, scale, message, sizeof message);
    kernel_call_end(model->kernel);
    if (failed != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d layer %lld: kernel %s forward failed: %s",
                                  model->comm->rank, (long long)l, model->kernel->name, message);
    }
    return cuda_model_store(model, act + a->sequence_out,
                            dims.batch * dims.seq_len * dims.heads * dims.head_dim, error);
}

/* Status chaining: runs the next step only while everything succeeded. */
#define STEP(call)                                                                                 \
    do {                                                                                           \
        if (status == CPPARITY_OK) {                                                               \
            status = (call);                                                                       \
        }                                                                                          \
    } while (0)

/* A layer's attention half: norm, projections, rotary, all-to-alls, kernel, o_proj, residual. */
static cpparity_status attention_half(cuda_model *model, int64_t l, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len;
    const int64_t D = c->hidden_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const cuda_layer_activations *a = &model->layer[l];
    float *act = model->activations;
    const float *w = model->parameters;
    cudaStream_t stream = model->stream;
    CUDA_CHECK(cuda_rmsnorm_forward(act + a->input_normed, act + a->input_rstd, act + a->input,
                                    w + p->input_layernorm, N, D, (float)c->rms_norm_eps, stream),
               error, "input_layernorm");
    cpparity_status status = cuda_model_store(model, act + a->input_normed, N * D, error);
    STEP(cuda_model_linear_forward(model, act + a->q, act + a->input_normed, w + p->q_proj, N, D,
                                   H * Dh, error));
    STEP(cuda_model_linear_forward(model, act + a->k, act + a->input_normed, w + p->k_proj, N, D,
                                   Hkv * Dh, error));
    STEP(cuda_model_linear_forward(model, act + a->v, act + a->input_normed, w + p->v_proj, N, D,
                                   Hkv * Dh, error));
    STEP(cuda_model_store(model, act + a->q, N * H * Dh, error));
    STEP(cuda_model_store(model, act + a->k, N * Hkv * Dh, error));
    STEP(cuda_model_store(model, act + a->v, N * Hkv * Dh, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_rope_apply(act + a->q, model->positions, N, H, Dh, c->rope_theta, 1, stream),
               error, "rotary on q");
    CUDA_CHECK(cuda_rope_apply(act + a->k, model->positions, N, Hkv, Dh, c->rope_theta, 1, stream),
               error, "rotary on k");
    STEP(cuda_model_store(model, act + a->q, N * H * Dh, error));
    STEP(cuda_model_store(model, act + a->k, N * Hkv * Dh, error));
    /* Ulysses and hybrid: q, k, v to the Ulysses group's tokens × this rank's share of heads */
    const bool all_to_all = model->algorithm.kind != CPPARITY_ALGORITHM_RING;
    if (all_to_all) {
        STEP(cuda_model_heads_to_sequence(model, act + a->sequence_q, act + a->q, H, error));
        STEP(kv_to_sequence(model, act + a->sequence_k, act + a->k, error));
        STEP(kv_to_sequence(model, act + a->sequence_v, act + a->v, error));
    }
    if (model->ring) { /* ring: the rank's own q, k, v with every head; hybrid: the group's */
        STEP(cuda_model_ring_forward(model, l, error));
    } else {
        STEP(attention_forward(model, l, error));
    }
    if (all_to_all) { /* back to this rank's tokens, every head */
        STEP(cuda_model_sequence_to_heads(model, act + a->attention, act + a->sequence_out, H,
                                          error));
    }
    STEP(cuda_model_linear_forward(model, model->projection, act + a->attention, w + p->o_proj, N,
                                   H * Dh, D, error));
    STEP(cuda_model_store(model, model->projection, N * D, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_add(act + a->residual, act + a->input, model->projection, N * D, stream), error,
               "the attention residual");
    return cuda_model_store(model, act + a->residual, N * D, error);
}

/* A layer's MLP half: norm, gate and up, SwiGLU, down_proj, residual into out. */
static cpparity_status mlp_half(cuda_model *model, int64_t l, float *out, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len;
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const cuda_layer_activations *a = &model->layer[l];
    float *act = model->activations;
    const float *w = model->parameters;
    cudaStream_t stream = model->stream;
    CUDA_CHECK(cuda_rmsnorm_forward(act + a->post_normed, act + a->post_rstd, act + a->residual,
                                    w + p->post_attention_layernorm, N, D, (float)c->rms_norm_eps,
                                    stream),
               error, "post_attention_layernorm");
    cpparity_status status = cuda_model_store(model, act + a->post_normed, N * D, error);
    STEP(cuda_model_linear_forward(model, act + a->gate, act + a->post_normed, w + p->gate_proj, N,
                                   D, F, error));
    STEP(cuda_model_linear_forward(model, act + a->up, act + a->post_normed, w + p->up_proj, N, D,
                                   F, error));
    STEP(cuda_model_store(model, act + a->gate, N * F, error));
    STEP(cuda_model_store(model, act + a->up, N * F, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_swiglu_forward(act + a->swiglu, act + a->gate, act + a->up, N * F, stream),
               error, "SwiGLU");
    STEP(cuda_model_store(model, act + a->swiglu, N * F, error));
    STEP(cuda_model_linear_forward(model, model->projection, act + a->swiglu, w + p->down_proj, N,
                                   F, D, error));
    STEP(cuda_model_store(model, model->projection, N * D, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_add(out, act + a->residual, model->projection, N * D, stream), error,
               "the MLP residual");
    return cuda_model_store(model, out, N * D, error);
}

/* The final norm, the LM head and this rank's loss sum (copied to the host). */
static cpparity_status head_forward(cuda_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len, D = c->hidden_size;
    const int64_t V = c->vocab_size;
    float *act = model->activations;
    const float *w = model->parameters;
    cudaStream_t stream = model->stream;
    CUDA_CHECK(cuda_rmsnorm_forward(act + model->final_normed, act + model->final_rstd,
                                    act + model->final_input, w + model->parameter.norm, N, D,
                                    (float)c->rms_norm_eps, stream),
               error, "the final norm");
    cpparity_status status = cuda_model_store(model, act + model->final_normed, N * D, error);
    STEP(cuda_model_linear_forward(model, act + model->logits, act + model->final_normed,
                                   w + model->parameter.lm_head, N, D, V, error));
    STEP(cuda_model_store(model, act + model->logits, N * V, error));
    if (model->fault == CPPARITY_FAULT_AUTOPAD_TRUNCATE) {
        STEP(cuda_model_fault_truncate_logits(model, error));
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_cross_entropy_sum(model->loss_sum, model->row_loss, act + model->logits,
                                      model->labels, N, V, stream),
               error, "the cross-entropy");
    CUDA_CHECK(cudaMemcpyAsync(&model->loss_sum_local, model->loss_sum, sizeof(float),
                               cudaMemcpyDeviceToHost, stream),
               error, "copying the loss sum");
    CUDA_CHECK(cudaStreamSynchronize(stream), error, "finishing the forward");
    return CPPARITY_OK;
}

cpparity_status cuda_model_forward(cuda_model *model, const cpparity_batch *local,
                                   cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L, D = c->hidden_size;
    if (local->batch != B || local->seq_len != L) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: slice of %lld x %lld tokens, expected %lld x %lld",
                                  model->comm->rank, (long long)local->batch,
                                  (long long)local->seq_len, (long long)B, (long long)L);
    }
    cpparity_status status = gather_mask(model, local, error);
    STEP(prepare_slice(model, local, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    float *act = model->activations;
    CUDA_CHECK(cuda_embedding_forward(act + model->layer[0].input, model->input_ids,
                                      model->parameters + model->parameter.embed_tokens, N, D,
                                      model->stream),
               error, "the embedding");
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        float *out = l + 1 < c->num_hidden_layers ? act + model->layer[l + 1].input
                                                  : act + model->final_input;
        status = attention_half(model, l, error);
        STEP(mlp_half(model, l, out, error));
    }
    STEP(head_forward(model, error));
    /* the global label count and loss sum: a mean of per-rank means would be wrong */
    model->labels_global = model->labels_local;
    float loss_sum = model->loss_sum_local;
    STEP(cuda_model_all_reduce_host(model, &model->labels_global, 1, CPPARITY_INT64, error));
    STEP(cuda_model_all_reduce_host(model, &loss_sum, 1, CPPARITY_FLOAT32, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    if (model->labels_global == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "the batch has no valid label (every label is -100)");
    }
    model->loss = loss_sum / (float)model->labels_global;
    if (model->fault == CPPARITY_FAULT_LOSS_MEAN_OF_MEANS) {
        float mean = model->loss_sum_local / (float)model->labels_local;
        status = cuda_model_all_reduce_host(model, &mean, 1, CPPARITY_FLOAT32, error);
        model->loss = mean / (float)model->shard.cp;
    }
    if (status == CPPARITY_OK && model->fault == CPPARITY_FAULT_STALE_RANK_SLICE) {
        status = cuda_model_fault_report_stale_slice(model, error);
    }
    return status;
}
