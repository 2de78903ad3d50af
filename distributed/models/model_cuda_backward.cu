/* model_cuda_backward.cu — backward of the CUDA model (see model_cuda.h): model_f32_backward.c's
 * steps in the same order on device buffers — the layers in reverse, the all-to-alls reversed
 * around the kernel's backward (or the ring's backward, model_cuda_ring.cu), then one all-reduce
 * of every parameter gradient. */
#include "distributed/models/model_cuda.h"

#include <math.h>
#include <string.h>

#include "distributed/device/cuda_check.h"
#include "distributed/kernels/kernel_call.h"

/* Status chaining: runs the next step only while everything succeeded. */
#define STEP(call)                                                                                 \
    do {                                                                                           \
        if (status == CPPARITY_OK) {                                                               \
            status = (call);                                                                       \
        }                                                                                          \
    } while (0)

/* Moves kv gradients [B, U·L, Hkvl, Dh] back to [B, L, Hkv, Dh] over the Ulysses group (U = cp,
 * or a hybrid's U), summing the repeats if replicated. */
static cpparity_status kv_to_heads(cuda_model *model, float *out, const float *in,
                                   cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len, U = model->ulysses_degree;
    if (!model->kv_replicated) {
        return cuda_model_sequence_to_heads(model, out, in, c->num_key_value_heads, error);
    }
    const cpparity_status status =
        cuda_model_sequence_to_heads(model, model->repeated, in, U, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (model->fault == CPPARITY_FAULT_GQA_KV_MAPPING ||
        model->fault == CPPARITY_FAULT_KV_SUM_BACK) {
        return cuda_model_fault_sum_repeated_kv(model, out, model->repeated, error);
    }
    CUDA_CHECK(cuda_sum_repeated_kv(out, model->repeated, N, c->num_key_value_heads, U, c->head_dim,
                                    model->stream),
               error, "summing the repeated kv gradients");
    return CPPARITY_OK;
}

/* The kernel's backward of layer l: d.sequence_q, _k, _v from d.sequence_out. */
static cpparity_status attention_backward(cuda_model *model, int64_t l, cpparity_error *error) {
    const cuda_layer_activations *a = &model->layer[l];
    const float *act = model->activations;
    const cuda_backward_buffers *d = &model->grad;
    const cpparity_mask_description mask = cuda_model_layer_mask(model, l);
    const cpparity_attention_dims dims = {model->batch, model->shard.padded_seq_len,
                                          model->local_heads, model->local_kv_heads,
                                          model->config.head_dim};
    const float scale = cuda_model_attention_scale(model);
    char message[512] = "";
    kernel_call_begin(model->kernel); /* the threading contract (kernel_call.h) */
    const int failed = cuda_model_kernel_backward(
        model, d->sequence_q, d->sequence_k, d->sequence_v, d->sequence_out, act + a->sequence_q,
        act + a->sequence_k, act + a->sequence_v, act + a->sequence_out, act + a->sequence_lse,
        &mask, &dims, scale, message, sizeof message);
    kernel_call_end(model->kernel);
    if (failed != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d layer %lld: kernel %s backward failed: %s",
                                  model->comm->rank, (long long)l, model->kernel->name, message);
    }
    return CPPARITY_OK;
}

/* out = residual + down(swiglu(gate(h), up(h))), h = rmsnorm(residual): d.stream holds d out,
 * leaves d residual in d.residual. */
static cpparity_status mlp_backward(cuda_model *model, int64_t l, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len;
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const cuda_layer_activations *a = &model->layer[l];
    const float *act = model->activations;
    const float *w = model->parameters;
    float *g = model->gradients;
    const cuda_backward_buffers *d = &model->grad;
    cudaStream_t stream = model->stream;
    CUDA_CHECK(cudaMemcpyAsync(d->residual, d->stream, (size_t)(N * D) * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream),
               error, "copying the stream gradient");
    cpparity_status status =
        cuda_model_linear_backward(model, d->swiglu, g + p->down_proj, d->stream, act + a->swiglu,
                                   w + p->down_proj, N, F, D, false, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(
        cuda_swiglu_backward(d->gate, d->up, d->swiglu, act + a->gate, act + a->up, N * F, stream),
        error, "SwiGLU backward");
    STEP(cuda_model_linear_backward(model, d->normed, g + p->gate_proj, d->gate,
                                    act + a->post_normed, w + p->gate_proj, N, D, F, false, error));
    STEP(cuda_model_linear_backward(model, d->normed, g + p->up_proj, d->up, act + a->post_normed,
                                    w + p->up_proj, N, D, F, true, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_rmsnorm_backward(d->residual, g + p->post_attention_layernorm, d->normed,
                                     act + a->residual, w + p->post_attention_layernorm,
                                     act + a->post_rstd, N, D, stream),
               error, "post_attention_layernorm backward");
    return CPPARITY_OK;
}

/* residual = input + o_proj(attention(rmsnorm(input))): d.residual holds d residual, leaves
 * d input in d.stream. */
static cpparity_status attention_half_backward(cuda_model *model, int64_t l,
                                               cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len;
    const int64_t D = c->hidden_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const cuda_layer_activations *a = &model->layer[l];
    const float *act = model->activations;
    const float *w = model->parameters;
    float *g = model->gradients;
    const cuda_backward_buffers *d = &model->grad;
    cudaStream_t stream = model->stream;
    CUDA_CHECK(cudaMemcpyAsync(d->stream, d->residual, (size_t)(N * D) * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream),
               error, "copying the residual gradient");
    cpparity_status status =
        cuda_model_linear_backward(model, d->attention, g + p->o_proj, d->residual,
                                   act + a->attention, w + p->o_proj, N, H * Dh, D, false, error);
    /* Ulysses and hybrid: the all-to-alls reversed around the attention's backward */
    const bool all_to_all = model->algorithm.kind != CPPARITY_ALGORITHM_RING;
    if (all_to_all) {
        STEP(cuda_model_heads_to_sequence(model, d->sequence_out, d->attention, H, error));
    }
    if (model->ring) { /* ring: d.attention to d.q, d.k, d.v on the rank's own rows */
        STEP(cuda_model_ring_backward(model, l, error));
    } else {
        STEP(attention_backward(model, l, error));
    }
    if (all_to_all) {
        STEP(cuda_model_sequence_to_heads(model, d->q, d->sequence_q, H, error));
        STEP(kv_to_heads(model, d->k, d->sequence_k, error));
        STEP(kv_to_heads(model, d->v, d->sequence_v, error));
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_rope_apply(d->q, model->positions, N, H, Dh, c->rope_theta, -1, stream), error,
               "rotary backward on q");
    CUDA_CHECK(cuda_rope_apply(d->k, model->positions, N, Hkv, Dh, c->rope_theta, -1, stream),
               error, "rotary backward on k");
    STEP(cuda_model_linear_backward(model, d->normed, g + p->q_proj, d->q, act + a->input_normed,
                                    w + p->q_proj, N, D, H * Dh, false, error));
    STEP(cuda_model_linear_backward(model, d->normed, g + p->k_proj, d->k, act + a->input_normed,
                                    w + p->k_proj, N, D, Hkv * Dh, true, error));
    STEP(cuda_model_linear_backward(model, d->normed, g + p->v_proj, d->v, act + a->input_normed,
                                    w + p->v_proj, N, D, Hkv * Dh, true, error));
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_rmsnorm_backward(d->stream, g + p->input_layernorm, d->normed, act + a->input,
                                     w + p->input_layernorm, act + a->input_rstd, N, D, stream),
               error, "input_layernorm backward");
    return CPPARITY_OK;
}

/* Zeroes the gradients and every backward buffer (the CPU's calloc: d.stream is added into). */
static cpparity_status clear(cuda_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L;
    const int64_t S = cuda_model_sequence_rows(model), Dh = c->head_dim;
    const int64_t D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const int64_t Hl = model->local_heads, Hkvl = model->local_kv_heads;
    cuda_backward_buffers *d = &model->grad;
    const struct {
        float *buffer;
        int64_t count;
    } buffers[] = {
        {model->gradients, model->parameter_table.total},
        {d->stream, N * D},
        {d->residual, N * D},
        {d->normed, N * D},
        {d->swiglu, N * F},
        {d->gate, N * F},
        {d->up, N * F},
        {d->attention, N * H * Dh},
        {d->q, N * H * Dh},
        {d->k, N * Hkv * Dh},
        {d->v, N * Hkv * Dh},
        {d->sequence_out, B * S * Hl * Dh},
        {d->sequence_q, B * S * Hl * Dh},
        {d->sequence_k, B * S * Hkvl * Dh},
        {d->sequence_v, B * S * Hkvl * Dh},
        {d->logits, N * c->vocab_size},
    };
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
        CUDA_CHECK(cudaMemsetAsync(buffers[i].buffer, 0, (size_t)buffers[i].count * sizeof(float),
                                   model->stream),
                   error, "zeroing the backward's buffers");
    }
    return CPPARITY_OK;
}

/* d logits, then the LM head and the final norm: leaves d x of the last layer in d.stream. */
static cpparity_status head_backward(cuda_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->batch * model->shard.local_len, D = c->hidden_size;
    const float *act = model->activations;
    const float *w = model->parameters;
    float *g = model->gradients;
    const cuda_backward_buffers *d = &model->grad;
    const float token_weight =
        model->fault == CPPARITY_FAULT_LOSS_MEAN_OF_MEANS
            ? 1.0f / ((float)model->labels_local * (float)model->shard.cp) /* mean of means */
            : 1.0f / (float)model->labels_global;
    CUDA_CHECK(cuda_cross_entropy_backward(d->logits, act + model->logits, model->labels, N,
                                           c->vocab_size, token_weight, model->stream),
               error, "the cross-entropy backward");
    const cpparity_status status = cuda_model_linear_backward(
        model, d->normed, g + model->parameter.lm_head, d->logits, act + model->final_normed,
        w + model->parameter.lm_head, N, D, c->vocab_size, false, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_rmsnorm_backward(d->stream, g + model->parameter.norm, d->normed,
                                     act + model->final_input, w + model->parameter.norm,
                                     act + model->final_rstd, N, D, model->stream),
               error, "the final norm backward");
    return CPPARITY_OK;
}

/* The embedding's gradient (the tokens of each vocabulary row in order, no atomics). */
static cpparity_status embedding_backward(cuda_model *model, cpparity_error *error) {
    CUDA_CHECK(cuda_embedding_backward(model->gradients + model->parameter.embed_tokens,
                                       model->grad.stream, &model->groups,
                                       model->config.hidden_size, model->stream),
               error, "the embedding backward");
    return CPPARITY_OK;
}

cpparity_status cuda_model_backward(cuda_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    if (model->labels_global == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "backward needs a forward with at least one valid label");
    }
    cpparity_status status = clear(model, error);
    STEP(head_backward(model, error));
    for (int64_t l = c->num_hidden_layers - 1; l >= 0 && status == CPPARITY_OK; l--) {
        status = mlp_backward(model, l, error);
        STEP(attention_half_backward(model, l, error));
    }
    STEP(embedding_backward(model, error));
    /* every rank saw only its tokens: the gradient is the sum over the group */
    if (model->fault == CPPARITY_FAULT_GRAD_NOT_REDUCED ||
        model->fault == CPPARITY_FAULT_GRAD_REDUCE_ORDER ||
        model->fault == CPPARITY_FAULT_GRAD_SCALED_BY_CP) {
        STEP(cuda_model_fault_reduce_gradients(model, error));
    } else {
        STEP(cuda_model_all_reduce_device(model, model->gradients, model->parameter_table.total,
                                          error));
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "finishing the backward");
    return CPPARITY_OK;
}
