/*
 * model_backward.c — the reference model's backward pass in float64 (see model.h). Runs the
 * layers of model_forward.c in reverse with the saved activations; every layer backward adds into
 * its gradients, which are zeroed first, so tied embeddings collect both of their uses.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attention.h"
#include "reference/model.h"
#include "reference/model_layers.h"

/* Gradient buffers for the activations of one layer, reused layer after layer. */
typedef struct backward_scratch {
    double *stream;    /* (N, D) d loss / d residual stream */
    double *residual;  /* (N, D) d loss / d stream after the attention residual */
    double *normed;    /* (N, D) d loss / d a normalised input */
    double *swiglu;    /* (N, F) */
    double *gate;      /* (N, F) */
    double *up;        /* (N, F) */
    double *attention; /* (N, H·Dh) */
    double *q;         /* (N, H·Dh) */
    double *k;         /* (N, Hkv·Dh) */
    double *v;         /* (N, Hkv·Dh) */
} backward_scratch;

static void zero(double *values, int64_t count) {
    memset(values, 0, (size_t)count * sizeof *values);
}

/* An RMSNorm's backward whose weight gradient is a sum over every rank's tokens, made in rank
 * order (reference_team_chain): the input gradient of this rank's rows comes with it. */
typedef struct rmsnorm_step {
    double *din, *dweight;
    const double *dout, *in, *weight, *rstd;
    int64_t rows, dim;
} rmsnorm_step;

static void rmsnorm_add(void *context) {
    const rmsnorm_step *r = context;
    rmsnorm_backward(r->din, r->dweight, r->dout, r->in, r->weight, r->rstd, r->rows, r->dim);
}

static cpparity_status rmsnorm_spread(const reference_model *model, rmsnorm_step step,
                                      cpparity_error *error) {
    return reference_team_chain(model->rows.team, step.dweight, step.dim, rmsnorm_add, &step,
                                error);
}

/* The attention backward of layer l for this rank's rows, adding into dq, dk, dv (local rows): in
 * one process the attention's own; spread, over the queries, keys, values, outputs and output
 * gradients gathered whole (the gradients of this rank's keys read every query that sees them). */
static cpparity_status attention_backward(const reference_model *model, int64_t l,
                                          backward_scratch *d, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const reference_layer_activations *a = &model->layer[l];
    const double *act = model->activations;
    const reference_attention_shape shape = {model->batch, model->seq_len, H, Hkv, Dh};
    const double scale = 1.0 / sqrt((double)Dh);
    if (reference_team_size(model->rows.team) == 1) {
        return reference_attention_backward(d->q, d->k, d->v, d->attention, act + a->q, act + a->k,
                                            act + a->v, act + a->attention, act + a->lse,
                                            &model->masks[l], shape, scale, error);
    }
    const int64_t N = model->batch * model->seq_len, first = model->first_row;
    const int64_t rows = model->local_rows;
    enum { Q, K, V, OUT, DOUT, GATHERED };
    const double *mine[GATHERED] = {act + a->q, act + a->k, act + a->v, act + a->attention,
                                    d->attention};
    const int64_t widths[GATHERED] = {H * Dh, Hkv * Dh, Hkv * Dh, H * Dh, H * Dh};
    double *whole[GATHERED] = {NULL};
    double *dq = calloc((size_t)(N * H * Dh), sizeof *dq);
    double *dk = calloc((size_t)(N * Hkv * Dh), sizeof *dk);
    double *dv = calloc((size_t)(N * Hkv * Dh), sizeof *dv);
    cpparity_status status = dq != NULL && dk != NULL && dv != NULL
                                 ? CPPARITY_OK
                                 : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                                      "out of memory (attention backward)");
    for (int i = 0; i < GATHERED && status == CPPARITY_OK; i++) {
        status = reference_model_gather(model, mine[i], widths[i], &whole[i], error);
    }
    if (status == CPPARITY_OK) {
        status = reference_attention_backward_rows(
            dq, dk, dv, whole[DOUT], whole[Q], whole[K], whole[V], whole[OUT], act + a->lse,
            &model->masks[l], shape, scale, first, first + rows, error);
    }
    if (status == CPPARITY_OK) { /* d->q, d->k, d->v are zero: the sums are taken as they are */
        memcpy(d->q, dq + first * H * Dh, (size_t)(rows * H * Dh) * sizeof *dq);
        memcpy(d->k, dk + first * Hkv * Dh, (size_t)(rows * Hkv * Dh) * sizeof *dk);
        memcpy(d->v, dv + first * Hkv * Dh, (size_t)(rows * Hkv * Dh) * sizeof *dv);
    }
    for (int i = 0; i < GATHERED; i++) {
        free(whole[i]);
    }
    free(dq);
    free(dk);
    free(dv);
    return status;
}

static void layer_backward(reference_model *model, int64_t l, backward_scratch *d,
                           cpparity_status *status, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->local_rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const reference_layer_activations *a = &model->layer[l];
    const double *act = model->activations;
    const double *w = model->parameters;
    const reference_rows *rows = &model->rows;
    double *g = model->gradients;

    /* out = residual + down(swiglu(gate(h2), up(h2))), h2 = rmsnorm(residual) */
    memcpy(d->residual, d->stream, (size_t)(N * D) * sizeof(double));
    zero(d->swiglu, N * F);
    *status = linear_backward(d->swiglu, g + p->down_proj, d->stream, act + a->swiglu,
                              w + p->down_proj, rows, F, D, error);
    if (*status != CPPARITY_OK) {
        return;
    }
    zero(d->gate, N * F);
    zero(d->up, N * F);
    swiglu_backward(d->gate, d->up, d->swiglu, act + a->gate, act + a->up, N * F);
    zero(d->normed, N * D);
    *status = linear_backward(d->normed, g + p->gate_proj, d->gate, act + a->post_normed,
                              w + p->gate_proj, rows, D, F, error);
    if (*status == CPPARITY_OK) {
        *status = linear_backward(d->normed, g + p->up_proj, d->up, act + a->post_normed,
                                  w + p->up_proj, rows, D, F, error);
    }
    if (*status == CPPARITY_OK) {
        *status =
            rmsnorm_spread(model,
                           (rmsnorm_step){d->residual, g + p->post_attention_layernorm, d->normed,
                                          act + a->residual, w + p->post_attention_layernorm,
                                          act + a->post_rstd, N, D},
                           error);
    }
    if (*status != CPPARITY_OK) {
        return;
    }

    /* residual = input + o_proj(attention(rope(q), rope(k), v)), q,k,v from h1 = rmsnorm(input) */
    memcpy(d->stream, d->residual, (size_t)(N * D) * sizeof(double));
    zero(d->attention, N * H * Dh);
    *status = linear_backward(d->attention, g + p->o_proj, d->residual, act + a->attention,
                              w + p->o_proj, rows, H * Dh, D, error);
    if (*status != CPPARITY_OK) {
        return;
    }
    zero(d->q, N * H * Dh);
    zero(d->k, N * Hkv * Dh);
    zero(d->v, N * Hkv * Dh);
    *status = attention_backward(model, l, d, error);
    if (*status != CPPARITY_OK) {
        return;
    }
    rope_backward(d->q, act + model->rope_cos, act + model->rope_sin, N, H, Dh);
    rope_backward(d->k, act + model->rope_cos, act + model->rope_sin, N, Hkv, Dh);
    zero(d->normed, N * D);
    *status = linear_backward(d->normed, g + p->q_proj, d->q, act + a->input_normed, w + p->q_proj,
                              rows, D, H * Dh, error);
    if (*status == CPPARITY_OK) {
        *status = linear_backward(d->normed, g + p->k_proj, d->k, act + a->input_normed,
                                  w + p->k_proj, rows, D, Hkv * Dh, error);
    }
    if (*status == CPPARITY_OK) {
        *status = linear_backward(d->normed, g + p->v_proj, d->v, act + a->input_normed,
                                  w + p->v_proj, rows, D, Hkv * Dh, error);
    }
    if (*status == CPPARITY_OK) {
        *status = rmsnorm_spread(model,
                                 (rmsnorm_step){d->stream, g + p->input_layernorm, d->normed,
                                                act + a->input, w + p->input_layernorm,
                                                act + a->input_rstd, N, D},
                                 error);
    }
}

cpparity_status reference_model_backward(reference_model *model, const cpparity_batch *batch,
                                         cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->local_rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    if (model->valid_labels == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "backward needs a forward with at least one valid label");
    }
    const int64_t sizes[] = {N * D, N * D,      N * D,      N * F,        N * F,
                             N * F, N * H * Dh, N * H * Dh, N * Hkv * Dh, N * Hkv * Dh};
    enum { BUFFERS = sizeof sizes / sizeof *sizes };
    double *buffers[BUFFERS];
    cpparity_status status = CPPARITY_OK;
    for (int i = 0; i < BUFFERS; i++) {
        buffers[i] = calloc((size_t)sizes[i] + 1, sizeof(double));
        if (buffers[i] == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (backward)");
        }
    }
    backward_scratch d = {buffers[0], buffers[1], buffers[2], buffers[3], buffers[4],
                          buffers[5], buffers[6], buffers[7], buffers[8], buffers[9]};
    const double *act = model->activations;
    const double *w = model->parameters;
    double *g = model->gradients;
    if (status == CPPARITY_OK) {
        zero(g, model->parameter_table.total);
        status = lm_head_backward(d.normed, g + model->parameter.lm_head, act + model->final_normed,
                                  w + model->parameter.lm_head, act + model->logits_lse,
                                  batch->labels + model->first_row, &model->rows, D, c->vocab_size,
                                  1.0 / (double)model->valid_labels, error);
    }
    if (status == CPPARITY_OK) {
        status = rmsnorm_spread(model,
                                (rmsnorm_step){d.stream, g + model->parameter.norm, d.normed,
                                               act + model->final_input, w + model->parameter.norm,
                                               act + model->final_rstd, N, D},
                                error);
    }
    for (int64_t l = c->num_hidden_layers - 1; l >= 0 && status == CPPARITY_OK; l--) {
        layer_backward(model, l, &d, &status, error);
    }
    /* the embedding's gradient adds every token's row in token order: on the last rank, which
     * holds the sums so far (tied, the LM head's), from every rank's rows */
    const int size = reference_team_size(model->rows.team);
    double *stream = d.stream;
    if (status == CPPARITY_OK && size > 1) {
        status = reference_model_gather(model, d.stream, D, &stream, error);
    }
    if (status == CPPARITY_OK && reference_team_rank(model->rows.team) == size - 1) {
        embedding_backward(g + model->parameter.embed_tokens, stream, batch->input_ids,
                           model->batch * model->seq_len, D);
    }
    if (stream != d.stream) {
        free(stream);
    }
    if (status == CPPARITY_OK) { /* the last rank holds every sum: it gives them to all */
        status = reference_team_from_last(model->rows.team, g, model->parameter_table.total, error);
    }
    for (int i = 0; i < BUFFERS; i++) {
        free(buffers[i]);
    }
    return status;
}
