/*
 * model_f32_backward.c — backward of the float32 context-parallel model (see model_f32.h): the
 * layers of model_f32_forward.c in reverse, the all-to-alls reversed around the kernel's
 * backward, then one all-reduce of every parameter gradient over the group.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_call.h"
#include "distributed/models/layers_f32.h"
#include "distributed/models/model_f32.h"
#include "distributed/cp/ring.h"
#include "distributed/cp/ulysses.h"

/* Gradient buffers for one layer, reused layer after layer. */
typedef struct backward_scratch {
    float *stream;       /* [N, D] d loss / d residual stream */
    float *residual;     /* [N, D] */
    float *normed;       /* [N, D] */
    float *swiglu;       /* [N, F] */
    float *gate;         /* [N, F] */
    float *up;           /* [N, F] */
    float *attention;    /* [N, H·Dh] */
    float *q;            /* [N, H·Dh] */
    float *k;            /* [N, Hkv·Dh] */
    float *v;            /* [N, Hkv·Dh] */
    float *sequence_out; /* [B, S, Hl, Dh] */
    float *sequence_q;   /* [B, S, Hl, Dh] */
    float *sequence_k;   /* [B, S, Hkvl, Dh] */
    float *sequence_v;   /* [B, S, Hkvl, Dh] */
    float *repeated;     /* [N, cp, Dh] */
    float *exchange;     /* 2·N·max(H, cp)·Dh */
} backward_scratch;

/* Moves kv gradients [B, S, Hkvl, Dh] back to [B, L, Hkv, Dh] over the all-to-all's ranks,
 * summing repeats if replicated. */
static cpparity_status kv_to_heads(f32_model *model, float *out, const float *in,
                                   backward_scratch *d, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, degree = model->ulysses_degree;
    if (!model->kv_replicated) {
        return ulysses_sequence_to_heads(model->ulysses_comm, out, in, B, L, c->num_key_value_heads,
                                         c->head_dim, d->exchange, error);
    }
    cpparity_status status = ulysses_sequence_to_heads(model->ulysses_comm, d->repeated, in, B, L,
                                                       degree, c->head_dim, d->exchange, error);
    if (status == CPPARITY_OK) {
        ulysses_sum_repeated_kv_mapped(out, d->repeated, B * L, c->num_key_value_heads, degree,
                                       c->head_dim, model->fault);
    }
    return status;
}

/* The all-to-alls back of the sequence-side gradients d->sequence_q, _k, _v to d->q, d->k, d->v
 * of this rank's tokens. */
static cpparity_status exchange_out(f32_model *model, backward_scratch *d, cpparity_error *error) {
    cpparity_status status = ulysses_sequence_to_heads(
        model->ulysses_comm, d->q, d->sequence_q, model->batch, model->shard.local_len,
        model->config.num_attention_heads, model->config.head_dim, d->exchange, error);
    if (status == CPPARITY_OK) {
        status = kv_to_heads(model, d->k, d->sequence_k, d, error);
    }
    if (status == CPPARITY_OK) {
        status = kv_to_heads(model, d->v, d->sequence_v, d, error);
    }
    return status;
}

/* Ulysses backward of layer l's attention: d->attention [B, L, H·Dh] to d->q, d->k, d->v of
 * this rank's tokens, through the kernel's whole-sequence backward in position order. */
static cpparity_status ulysses_backward(f32_model *model, int64_t l, const f32_layer_activations *a,
                                        backward_scratch *d, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, Dh = model->config.head_dim;
    const int64_t H = model->config.num_attention_heads;
    const float *act = model->activations;
    cpparity_status status =
        ulysses_heads_to_sequence_ordered(model->ulysses_comm, d->sequence_out, d->attention, B, L,
                                          H, Dh, d->exchange, model->fault, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t query_width = model->local_heads * Dh, key_width = model->local_kv_heads * Dh;
    shard_reorder(&model->shard, d->sequence_out, B, query_width, d->exchange, true);
    const cpparity_mask_description mask = f32_model_layer_mask(model, l);
    const cpparity_attention_dims dims = {B, model->shard.padded_seq_len, model->local_heads,
                                          model->local_kv_heads, Dh};
    char message[512] = "";
    if (kernel_call_backward(model->kernel, d->sequence_q, d->sequence_k, d->sequence_v,
                             d->sequence_out, act + a->sequence_q, act + a->sequence_k,
                             act + a->sequence_v, act + a->sequence_out, act + a->sequence_lse,
                             &mask, &dims, f32_model_attention_scale(model), message,
                             sizeof message) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d layer %lld: kernel %s backward failed: %s",
                                  model->comm->rank, (long long)l, model->kernel->name, message);
    }
    shard_reorder(&model->shard, d->sequence_q, B, query_width, d->exchange, false);
    shard_reorder(&model->shard, d->sequence_k, B, key_width, d->exchange, false);
    shard_reorder(&model->shard, d->sequence_v, B, key_width, d->exchange, false);
    return exchange_out(model, d, error);
}

/* Ring backward of layer l's attention (ring.h): d->attention to d->q, d->k, d->v; for a hybrid
 * through its Ulysses group's all-to-alls around the ring. */
static cpparity_status ring_backward(f32_model *model, int64_t l, const f32_layer_activations *a,
                                     backward_scratch *d, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const bool hybrid = model->algorithm.kind == CPPARITY_ALGORITHM_HYBRID;
    const float *act = model->activations;
    cpparity_status status = CPPARITY_OK;
    if (hybrid) {
        status = ulysses_heads_to_sequence_ordered(model->ulysses_comm, d->sequence_out,
                                                   d->attention, model->batch,
                                                   model->shard.local_len, c->num_attention_heads,
                                                   c->head_dim, d->exchange, model->fault, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    const ring_setup ring = f32_model_ring(model);
    const cpparity_mask_description mask = f32_model_layer_mask(model, l);
    status = ring_attention_backward(
        &ring, hybrid ? d->sequence_q : d->q, hybrid ? d->sequence_k : d->k,
        hybrid ? d->sequence_v : d->v, hybrid ? d->sequence_out : d->attention,
        act + (hybrid ? a->sequence_q : a->q), act + (hybrid ? a->sequence_k : a->k),
        act + (hybrid ? a->sequence_v : a->v), act + a->sequence_out, act + a->sequence_lse, &mask,
        f32_model_attention_scale(model), error);
    return status == CPPARITY_OK && hybrid ? exchange_out(model, d, error) : status;
}

static cpparity_status layer_backward(f32_model *model, int64_t l, const cpparity_batch *local,
                                      backward_scratch *d, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L;
    const int64_t D = c->hidden_size, F = c->intermediate_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const f32_layer_activations *a = &model->layer[l];
    const float *act = model->activations;
    const float *w = model->parameters;
    float *g = model->gradients;

    /* out = residual + down(swiglu(gate(h), up(h))), h = rmsnorm(residual) */
    memcpy(d->residual, d->stream, (size_t)(N * D) * sizeof(float));
    f32_linear_backward(d->swiglu, g + p->down_proj, d->stream, act + a->swiglu, w + p->down_proj,
                        N, F, D, 0);
    f32_swiglu_backward(d->gate, d->up, d->swiglu, act + a->gate, act + a->up, N * F);
    f32_linear_backward(d->normed, g + p->gate_proj, d->gate, act + a->post_normed,
                        w + p->gate_proj, N, D, F, 0);
    f32_linear_backward(d->normed, g + p->up_proj, d->up, act + a->post_normed, w + p->up_proj, N,
                        D, F, 1);
    f32_rmsnorm_backward(d->residual, g + p->post_attention_layernorm, d->normed, act + a->residual,
                         w + p->post_attention_layernorm, act + a->post_rstd, N, D);

    /* residual = input + o_proj(attention) */
    memcpy(d->stream, d->residual, (size_t)(N * D) * sizeof(float));
    f32_linear_backward(d->attention, g + p->o_proj, d->residual, act + a->attention, w + p->o_proj,
                        N, H * Dh, D, 0);
    cpparity_status status = model->algorithm.kind == CPPARITY_ALGORITHM_ULYSSES
                                 ? ulysses_backward(model, l, a, d, error)
                                 : ring_backward(model, l, a, d, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t *positions = f32_model_rope_positions(model, local);
    f32_rope_apply(d->q, positions, N, H, Dh, c->rope_theta, -1);
    f32_rope_apply(d->k, positions, N, Hkv, Dh, c->rope_theta, -1);
    f32_linear_backward(d->normed, g + p->q_proj, d->q, act + a->input_normed, w + p->q_proj, N, D,
                        H * Dh, 0);
    f32_linear_backward(d->normed, g + p->k_proj, d->k, act + a->input_normed, w + p->k_proj, N, D,
                        Hkv * Dh, 1);
    f32_linear_backward(d->normed, g + p->v_proj, d->v, act + a->input_normed, w + p->v_proj, N, D,
                        Hkv * Dh, 1);
    f32_rmsnorm_backward(d->stream, g + p->input_layernorm, d->normed, act + a->input,
                         w + p->input_layernorm, act + a->input_rstd, N, D);
    return CPPARITY_OK;
}

/* Every rank saw only its tokens: the gradient is the sum over the group, identical bits on
 * every rank. The faults grad-not-reduced, grad-scaled-by-cp and grad-reduce-order live here. */
static cpparity_status reduce_gradients(f32_model *model, cpparity_error *error) {
    float *g = model->gradients;
    const int64_t total = model->parameter_table.total, cp = model->shard.cp;
    if (model->fault == CPPARITY_FAULT_GRAD_NOT_REDUCED) {
        return CPPARITY_OK;
    }
    if (model->fault == CPPARITY_FAULT_GRAD_REDUCE_ORDER) { /* summed from this rank on */
        float *all = malloc((size_t)(cp * total) * sizeof(float));
        if (all == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: out of memory",
                                      model->comm->rank);
        }
        cpparity_status status =
            cpparity_all_gather(model->comm, g, all, total, CPPARITY_FLOAT32, NULL, error);
        for (int64_t i = 0; status == CPPARITY_OK && i < total; i++) {
            float sum = 0.0f;
            for (int64_t r = 0; r < cp; r++) {
                sum += all[((model->shard.rank + r) % cp) * total + i];
            }
            g[i] = sum;
        }
        free(all);
        return status;
    }
    cpparity_status status =
        cpparity_all_reduce_sum(model->comm, g, g, total, CPPARITY_FLOAT32, NULL, error);
    if (status == CPPARITY_OK && model->fault == CPPARITY_FAULT_GRAD_SCALED_BY_CP) {
        for (int64_t i = 0; i < total; i++) {
            g[i] /= (float)cp; /* averaged, as data parallelism would */
        }
    }
    return status;
}

cpparity_status f32_model_backward(f32_model *model, const cpparity_batch *local,
                                   cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L;
    const int64_t cp = model->shard.cp; /* the sequence tensors: every token, or a ring member's */
    const int64_t S = model->algorithm.kind == CPPARITY_ALGORITHM_ULYSSES
                          ? model->shard.padded_seq_len
                          : model->ring_rows;
    const int64_t D = c->hidden_size, F = c->intermediate_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const int64_t Hl = model->local_heads, Hkvl = model->local_kv_heads;
    const int64_t widest = H > cp ? H : cp;
    if (model->labels_global == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "backward needs a forward with at least one valid label");
    }
    const int64_t sizes[] = {N * D,
                             N * D,
                             N * D,
                             N * F,
                             N * F,
                             N * F,
                             N * H * Dh,
                             N * H * Dh,
                             N * Hkv * Dh,
                             N * Hkv * Dh,
                             B * S * Hl * Dh,
                             B * S * Hl * Dh,
                             B * S * Hkvl * Dh,
                             B * S * Hkvl * Dh,
                             N * cp * Dh,
                             2 * N * widest * Dh,
                             f32_head_chunk_rows(model) * c->vocab_size,
                             f32_head_chunk_rows(model) * c->vocab_size};
    enum { BUFFERS = sizeof sizes / sizeof *sizes };
    float *buffers[BUFFERS];
    cpparity_status status = CPPARITY_OK;
    for (int i = 0; i < BUFFERS; i++) {
        buffers[i] = calloc((size_t)sizes[i], sizeof(float));
        if (buffers[i] == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: out of memory",
                                        model->comm->rank);
        }
    }
    backward_scratch d = {buffers[0],  buffers[1],  buffers[2],  buffers[3],
                          buffers[4],  buffers[5],  buffers[6],  buffers[7],
                          buffers[8],  buffers[9],  buffers[10], buffers[11],
                          buffers[12], buffers[13], buffers[14], buffers[15]};
    if (status == CPPARITY_OK) {
        memset(model->gradients, 0, (size_t)model->parameter_table.total * sizeof(float));
        const float token_weight =
            model->fault == CPPARITY_FAULT_LOSS_MEAN_OF_MEANS
                ? 1.0f / ((float)model->labels_local * (float)cp) /* mean of per-rank means */
                : 1.0f / (float)model->labels_global;
        f32_head_backward(model, local, token_weight, d.normed, buffers[16], buffers[17]);
    }
    if (status == CPPARITY_OK) {
        const float *act = model->activations;
        const float *w = model->parameters;
        float *g = model->gradients;
        f32_rmsnorm_backward(d.stream, g + model->parameter.norm, d.normed,
                             act + model->final_input, w + model->parameter.norm,
                             act + model->final_rstd, N, D);
        for (int64_t l = c->num_hidden_layers - 1; l >= 0 && status == CPPARITY_OK; l--) {
            status = layer_backward(model, l, local, &d, error);
        }
        if (status == CPPARITY_OK) {
            f32_embedding_backward(g + model->parameter.embed_tokens, d.stream, local->input_ids, N,
                                   D);
            status = reduce_gradients(model, error);
        }
    }
    for (int i = 0; i < BUFFERS; i++) {
        free(buffers[i]);
    }
    return status;
}
