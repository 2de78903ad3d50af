/* model_f32_forward.c — forward of the float32 context-parallel model (see model_f32.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_call.h"
#include "distributed/models/layers_f32.h"
#include "distributed/models/model_f32.h"
#include "distributed/cp/ring.h"
#include "distributed/cp/ulysses.h"

/* Gathers every rank's attention_mask and position_ids and rebuilds the compact mask over the
 * whole padded sequence (once per step). */
static cpparity_status gather_mask(f32_model *model, const cpparity_batch *local,
                                   cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, cp = model->shard.cp;
    const int64_t S = model->shard.padded_seq_len;
    int8_t *masks = malloc((size_t)(cp * B * L));
    int64_t *positions = malloc((size_t)(cp * B * L) * sizeof(int64_t));
    int8_t *mask_rows = malloc((size_t)(B * S));
    int64_t *position_rows = malloc((size_t)(B * S) * sizeof(int64_t));
    cpparity_status status = CPPARITY_OK;
    if (!masks || !positions || !mask_rows || !position_rows) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (mask gather)");
    }
    if (status == CPPARITY_OK) {
        status = cpparity_all_gather(model->comm, local->attention_mask, masks, B * L,
                                     CPPARITY_INT8, NULL, error);
    }
    if (status == CPPARITY_OK) {
        status = cpparity_all_gather(model->comm, local->position_ids, positions, B * L,
                                     CPPARITY_INT64, NULL, error);
    }
    if (status == CPPARITY_OK) {
        /* gathered [cp, B, L] → rows [B, S]: rank i's row t sits at its layout's position */
        for (int64_t i = 0; i < cp; i++) {
            for (int64_t b = 0; b < B; b++) {
                for (int64_t t = 0; t < L; t++) {
                    const int64_t at = b * S + shard_position(&model->shard, i, t);
                    mask_rows[at] = masks[(i * B + b) * L + t];
                    position_rows[at] = positions[(i * B + b) * L + t];
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

/* Scratch for one layer: the all-to-all buffers, kv repeats and a [B, L, D] projection. */
typedef struct forward_scratch {
    float *exchange;   /* 2·B·L·max(H, cp)·Dh */
    float *repeated;   /* B·L·cp·Dh: kv heads repeated to cp when replicated */
    float *projection; /* B·L·D */
    float *reordered;  /* B·L·H·Dh: the attention output in rank order (zigzag, round-robin) */
} forward_scratch;

/* Moves kv heads [B, L, Hkv, Dh] to [B, S, Hkvl, Dh] over the all-to-all's ranks (all of them
 * for Ulysses, the group of U for a hybrid), repeating them first when replicated. */
static cpparity_status kv_to_sequence(f32_model *model, float *out, const float *in,
                                      forward_scratch *scratch, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, degree = model->ulysses_degree;
    if (!model->kv_replicated) {
        return ulysses_heads_to_sequence_ordered(model->ulysses_comm, out, in, B, L,
                                                 c->num_key_value_heads, c->head_dim,
                                                 scratch->exchange, model->fault, error);
    }
    ulysses_repeat_kv_mapped(scratch->repeated, in, B * L, c->num_key_value_heads, degree,
                             c->head_dim, model->fault);
    return ulysses_heads_to_sequence_ordered(model->ulysses_comm, out, scratch->repeated, B, L,
                                             degree, c->head_dim, scratch->exchange, model->fault,
                                             error);
}

/* The all-to-alls of layer l's q, k, v into sequence_q, sequence_k, sequence_v: the tokens of
 * every rank of the all-to-all, rank after rank, × the rank's share of heads. */
static cpparity_status exchange_in(f32_model *model, const f32_layer_activations *a,
                                   forward_scratch *scratch, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, Dh = model->config.head_dim;
    float *act = model->activations;
    cpparity_status status = ulysses_heads_to_sequence_ordered(
        model->ulysses_comm, act + a->sequence_q, act + a->q, B, L,
        model->config.num_attention_heads, Dh, scratch->exchange, model->fault, error);
    if (status == CPPARITY_OK) {
        status = kv_to_sequence(model, act + a->sequence_k, act + a->k, scratch, error);
    }
    if (status == CPPARITY_OK) {
        status = kv_to_sequence(model, act + a->sequence_v, act + a->v, scratch, error);
    }
    return status;
}

/* Ulysses attention of layer l: q, k, v to heads × the whole sequence (in position order), the
 * kernel's whole-sequence call, the output back to this rank's tokens in a->attention. */
static cpparity_status ulysses_forward(f32_model *model, int64_t l, const f32_layer_activations *a,
                                       forward_scratch *scratch, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, Dh = model->config.head_dim;
    const int64_t H = model->config.num_attention_heads;
    float *act = model->activations;
    cpparity_status status = exchange_in(model, a, scratch, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    /* the all-to-all delivers rank after rank; the kernel sees tokens in position order */
    shard_reorder(&model->shard, act + a->sequence_q, B, model->local_heads * Dh, scratch->exchange,
                  true);
    shard_reorder(&model->shard, act + a->sequence_k, B, model->local_kv_heads * Dh,
                  scratch->exchange, true);
    shard_reorder(&model->shard, act + a->sequence_v, B, model->local_kv_heads * Dh,
                  scratch->exchange, true);
    const cpparity_mask_description mask = f32_model_layer_mask(model, l);
    const cpparity_attention_dims dims = {B, model->shard.padded_seq_len, model->local_heads,
                                          model->local_kv_heads, Dh};
    char message[512] = "";
    if (kernel_call_forward(model->kernel, act + a->sequence_out, act + a->sequence_lse,
                            act + a->sequence_q, act + a->sequence_k, act + a->sequence_v, &mask,
                            &dims, f32_model_attention_scale(model), message,
                            sizeof message) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d layer %lld: kernel %s forward failed: %s",
                                  model->comm->rank, (long long)l, model->kernel->name, message);
    }
    f32_model_store(model, act + a->sequence_out, dims.batch * dims.seq_len * dims.heads * Dh);
    /* sent back rank after rank: a copy, since backward needs sequence_out in position order */
    float *ranked = act + a->sequence_out;
    if (model->shard.kind != CPPARITY_LAYOUT_CONTIGUOUS) {
        ranked = scratch->reordered;
        memcpy(ranked, act + a->sequence_out,
               (size_t)(dims.batch * dims.seq_len * dims.heads * Dh) * sizeof(float));
        shard_reorder(&model->shard, ranked, B, dims.heads * Dh, scratch->exchange, false);
    }
    return ulysses_sequence_to_heads(model->ulysses_comm, act + a->attention, ranked, B, L, H, Dh,
                                     scratch->exchange, error);
}

/* Ring attention of layer l (ring.h): on this rank's own q, k, v with every head (ring), or on
 * its Ulysses group's tokens and its share of heads after the group's all-to-all (hybrid). The
 * output lands in sequence_out (which backward reads) and a->attention, lse in sequence_lse. */
static cpparity_status ring_forward(f32_model *model, int64_t l, const f32_layer_activations *a,
                                    forward_scratch *scratch, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const bool hybrid = model->algorithm.kind == CPPARITY_ALGORITHM_HYBRID;
    float *act = model->activations;
    cpparity_status status = hybrid ? exchange_in(model, a, scratch, error) : CPPARITY_OK;
    if (status != CPPARITY_OK) {
        return status;
    }
    const ring_setup ring = f32_model_ring(model);
    const cpparity_mask_description mask = f32_model_layer_mask(model, l);
    const int64_t count = model->batch * model->ring_rows * model->local_heads * c->head_dim;
    status = ring_attention_forward(
        &ring, act + a->sequence_out, act + a->sequence_lse, act + (hybrid ? a->sequence_q : a->q),
        act + (hybrid ? a->sequence_k : a->k), act + (hybrid ? a->sequence_v : a->v), &mask,
        f32_model_attention_scale(model), error);
    if (status != CPPARITY_OK) {
        return status;
    }
    f32_model_store(model, act + a->sequence_out, count);
    if (hybrid) { /* back to this rank's tokens, every head */
        return ulysses_sequence_to_heads(
            model->ulysses_comm, act + a->attention, act + a->sequence_out, model->batch,
            model->shard.local_len, c->num_attention_heads, c->head_dim, scratch->exchange, error);
    }
    memcpy(act + a->attention, act + a->sequence_out, (size_t)count * sizeof(float));
    return CPPARITY_OK;
}

static cpparity_status layer_forward(f32_model *model, int64_t l, const cpparity_batch *local,
                                     float *out, forward_scratch *scratch, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L;
    const int64_t D = c->hidden_size, F = c->intermediate_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const f32_layer_activations *a = &model->layer[l];
    float *act = model->activations;
    const float *w = model->parameters;

    f32_rmsnorm_forward(act + a->input_normed, act + a->input_rstd, act + a->input,
                        w + p->input_layernorm, N, D, c->rms_norm_eps);
    f32_model_store(model, act + a->input_normed, N * D);
    f32_linear_forward(act + a->q, act + a->input_normed, w + p->q_proj, N, D, H * Dh);
    f32_linear_forward(act + a->k, act + a->input_normed, w + p->k_proj, N, D, Hkv * Dh);
    f32_linear_forward(act + a->v, act + a->input_normed, w + p->v_proj, N, D, Hkv * Dh);
    f32_model_store(model, act + a->q, N * H * Dh);
    f32_model_store(model, act + a->k, N * Hkv * Dh);
    f32_model_store(model, act + a->v, N * Hkv * Dh);
    const int64_t *positions = f32_model_rope_positions(model, local);
    f32_rope_apply(act + a->q, positions, N, H, Dh, c->rope_theta, 1);
    f32_rope_apply(act + a->k, positions, N, Hkv, Dh, c->rope_theta, 1);
    f32_model_store(model, act + a->q, N * H * Dh);
    f32_model_store(model, act + a->k, N * Hkv * Dh);

    cpparity_status status = model->algorithm.kind == CPPARITY_ALGORITHM_ULYSSES
                                 ? ulysses_forward(model, l, a, scratch, error)
                                 : ring_forward(model, l, a, scratch, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    f32_linear_forward(scratch->projection, act + a->attention, w + p->o_proj, N, H * Dh, D);
    f32_model_store(model, scratch->projection, N * D);
    for (int64_t i = 0; i < N * D; i++) {
        act[a->residual + i] = act[a->input + i] + scratch->projection[i];
    }
    f32_model_store(model, act + a->residual, N * D);
    f32_rmsnorm_forward(act + a->post_normed, act + a->post_rstd, act + a->residual,
                        w + p->post_attention_layernorm, N, D, c->rms_norm_eps);
    f32_model_store(model, act + a->post_normed, N * D);
    f32_linear_forward(act + a->gate, act + a->post_normed, w + p->gate_proj, N, D, F);
    f32_linear_forward(act + a->up, act + a->post_normed, w + p->up_proj, N, D, F);
    f32_model_store(model, act + a->gate, N * F);
    f32_model_store(model, act + a->up, N * F);
    f32_swiglu_forward(act + a->swiglu, act + a->gate, act + a->up, N * F);
    f32_model_store(model, act + a->swiglu, N * F);
    f32_linear_forward(scratch->projection, act + a->swiglu, w + p->down_proj, N, F, D);
    f32_model_store(model, scratch->projection, N * D);
    for (int64_t i = 0; i < N * D; i++) {
        out[i] = act[a->residual + i] + scratch->projection[i];
    }
    f32_model_store(model, out, N * D);
    return CPPARITY_OK;
}

/* The slice of logits this rank reports: its own, made when read; with stale-rank-slice the
 * next rank's (every rank's whole slice made and gathered: the fault runs at self-test sizes).
 * Every run asks. */
static cpparity_status report_slice(f32_model *model, cpparity_error *error) {
    const int64_t N = model->batch * model->shard.local_len, V = model->config.vocab_size;
    const int64_t slice = N * V, cp = model->shard.cp;
    const int64_t source = model->fault == CPPARITY_FAULT_STALE_RANK_SLICE
                               ? (model->shard.rank + 1) % cp
                               : model->shard.rank;
    if (source == model->shard.rank || model->reported_logits == NULL) {
        return CPPARITY_OK; /* its own logits: made when they are read */
    }
    float *own = malloc((size_t)(slice + 1) * sizeof(float));
    float *all = malloc((size_t)(cp * slice + 1) * sizeof(float));
    cpparity_status status = CPPARITY_OK;
    if (own == NULL || all == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: out of memory",
                                    model->comm->rank);
    }
    if (status == CPPARITY_OK) {
        f32_head_logits(model, 0, N, own);
        status = cpparity_all_gather(model->comm, own, all, slice, CPPARITY_FLOAT32, NULL, error);
    }
    if (status == CPPARITY_OK) {
        memcpy(model->reported_logits, all + source * slice, (size_t)slice * sizeof(float));
    }
    free(own);
    free(all);
    return status;
}

cpparity_status f32_model_forward(f32_model *model, const cpparity_batch *local,
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
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t widest =
        c->num_attention_heads > model->shard.cp ? c->num_attention_heads : model->shard.cp;
    forward_scratch scratch = {
        malloc((size_t)(2 * N * widest * c->head_dim) * sizeof(float)),
        malloc((size_t)(N * model->shard.cp * c->head_dim) * sizeof(float)),
        malloc((size_t)(N * D) * sizeof(float)),
        malloc((size_t)(N * c->num_attention_heads * c->head_dim) * sizeof(float)),
    };
    if (!scratch.exchange || !scratch.repeated || !scratch.projection || !scratch.reordered) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: out of memory",
                                    model->comm->rank);
    }
    float *act = model->activations;
    const float *w = model->parameters;
    if (status == CPPARITY_OK) {
        f32_embedding_forward(act + model->layer[0].input, local->input_ids,
                              w + model->parameter.embed_tokens, N, D);
    }
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        float *out = l + 1 < c->num_hidden_layers ? act + model->layer[l + 1].input
                                                  : act + model->final_input;
        status = layer_forward(model, l, local, out, &scratch, error);
    }
    free(scratch.exchange);
    free(scratch.repeated);
    free(scratch.projection);
    free(scratch.reordered);
    if (status != CPPARITY_OK) {
        return status;
    }
    f32_rmsnorm_forward(act + model->final_normed, act + model->final_rstd,
                        act + model->final_input, w + model->parameter.norm, N, D, c->rms_norm_eps);
    f32_model_store(model, act + model->final_normed, N * D);
    status = f32_head_forward(model, local, error); /* the loss, one chunk of logits at a time */
    if (status != CPPARITY_OK) {
        return status;
    }
    /* the global label count and loss sum: a mean of per-rank means would be wrong */
    float loss_sum = model->loss_sum;
    status = cpparity_all_reduce_sum(model->comm, &model->labels_local, &model->labels_global, 1,
                                     CPPARITY_INT64, NULL, error);
    if (status == CPPARITY_OK) {
        status = cpparity_all_reduce_sum(model->comm, &loss_sum, &loss_sum, 1, CPPARITY_FLOAT32,
                                         NULL, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    if (model->labels_global == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "the batch has no valid label (every label is -100)");
    }
    model->loss = loss_sum / (float)model->labels_global;
    if (model->fault == CPPARITY_FAULT_LOSS_MEAN_OF_MEANS) {
        float mean = model->loss_sum / (float)model->labels_local;
        status =
            cpparity_all_reduce_sum(model->comm, &mean, &mean, 1, CPPARITY_FLOAT32, NULL, error);
        model->loss = mean / (float)model->shard.cp;
    }
    if (status == CPPARITY_OK) {
        status = report_slice(model, error);
    }
    return status;
}
