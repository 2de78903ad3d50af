/*
 * model_forward.c — the reference model's forward pass in float64 (see model.h):
 *   x = embed(ids); per layer: h = rmsnorm(x); q,k,v = h·Wᵀ; rope(q,k); a = attention(q,k,v);
 *   x += a·Woᵀ; h = rmsnorm(x); x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ;  logits = rmsnorm(x)·Wlmᵀ.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attention.h"
#include "reference/model.h"
#include "reference/model_layers.h"

static cpparity_status check_batch(const reference_model *model, const cpparity_batch *batch,
                                   cpparity_error *error) {
    if (batch->batch != model->batch || batch->seq_len != model->seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "batch of %lld x %lld tokens given to a model built for "
                                  "%lld x %lld",
                                  (long long)batch->batch, (long long)batch->seq_len,
                                  (long long)model->batch, (long long)model->seq_len);
    }
    const int64_t tokens = batch->batch * batch->seq_len;
    for (int64_t i = 0; i < tokens; i++) {
        const int64_t id = batch->input_ids[i], label = batch->labels[i];
        if (id < 0 || id >= model->config.vocab_size) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "input_ids[%lld][%lld] = %lld is outside [0, vocab_size = "
                                      "%lld)",
                                      (long long)(i / batch->seq_len),
                                      (long long)(i % batch->seq_len), (long long)id,
                                      (long long)model->config.vocab_size);
        }
        if (label != CPPARITY_IGNORE_INDEX && (label < 0 || label >= model->config.vocab_size)) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "labels[%lld][%lld] = %lld is neither -100 nor a token id",
                                      (long long)(i / batch->seq_len),
                                      (long long)(i % batch->seq_len), (long long)label);
        }
    }
    return CPPARITY_OK;
}

/* Builds every layer's mask from the batch, with the features of mask_features_off removed. */
static cpparity_status build_masks(reference_model *model, const cpparity_batch *batch,
                                   cpparity_error *error) {
    const int64_t tokens = model->batch * model->seq_len;
    int8_t *attention_mask = batch->attention_mask;
    int64_t *position_ids = batch->position_ids;
    int8_t *all_valid = NULL;
    int64_t *one_document = NULL;
    if (model->mask_features_off & REFERENCE_WITHOUT_PADDING) {
        all_valid = malloc((size_t)tokens);
        if (all_valid != NULL) {
            memset(all_valid, 1, (size_t)tokens);
        }
        attention_mask = all_valid;
    }
    if (model->mask_features_off & REFERENCE_WITHOUT_DOCUMENTS) {
        one_document = malloc((size_t)tokens * sizeof *one_document);
        for (int64_t i = 0; one_document != NULL && i < tokens; i++) {
            one_document[i] = i % model->seq_len;
        }
        position_ids = one_document;
    }
    cpparity_status status = CPPARITY_OK;
    if (attention_mask == NULL || position_ids == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (masks)");
    }
    for (int64_t l = 0; l < model->config.num_hidden_layers && status == CPPARITY_OK; l++) {
        reference_mask_free(&model->masks[l]);
        status = reference_mask_init(&model->masks[l], model->batch, model->seq_len, attention_mask,
                                     position_ids, cpparity_model_layer(&model->config, l),
                                     REFERENCE_MASK_DEFAULT_BLOCK, error);
    }
    free(all_valid);
    free(one_document);
    return status;
}

/* The lse (B,H,S) of the rows [first_row, first_row + rows) packed as (rows, H), and back. */
static void lse_pack(double *packed, const double *lse, const reference_model *model,
                     int64_t first_row, int64_t rows, bool unpack) {
    const int64_t S = model->seq_len, H = model->config.num_attention_heads;
    for (int64_t n = 0; n < rows; n++) {
        const int64_t b = (first_row + n) / S, t = (first_row + n) % S;
        for (int64_t h = 0; h < H; h++) {
            double *whole = (double *)&lse[(b * H + h) * S + t];
            if (unpack) {
                *whole = packed[n * H + h];
            } else {
                packed[n * H + h] = *whole;
            }
        }
    }
}

/* Every rank's rows of the attention's lse (B,H,S), whole on every rank: the gradients of the keys
 * read it for every query. */
static cpparity_status lse_share(const reference_model *model, double *lse, cpparity_error *error) {
    const int64_t N = model->batch * model->seq_len, H = model->config.num_attention_heads;
    double *mine = malloc((size_t)(model->local_rows * H + 1) * sizeof *mine);
    double *whole = malloc((size_t)(N * H) * sizeof *whole);
    cpparity_status status = CPPARITY_OK;
    if (mine == NULL || whole == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (lse, %lld)",
                                    (long long)(N * H));
    }
    if (status == CPPARITY_OK) {
        lse_pack(mine, lse, model, model->first_row, model->local_rows, false);
        status =
            reference_team_gather_rows(model->rows.team, mine, model->rank_rows, H, whole, error);
    }
    if (status == CPPARITY_OK) {
        lse_pack(whole, lse, model, 0, N, true);
    }
    free(mine);
    free(whole);
    return status;
}

cpparity_status reference_model_gather(const reference_model *model, const double *mine,
                                       int64_t width, double **whole, cpparity_error *error) {
    const int64_t N = model->batch * model->seq_len;
    *whole = malloc((size_t)(N * width + 1) * sizeof **whole);
    if (*whole == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (a gathered activation, %lld x %lld)",
                                  (long long)N, (long long)width);
    }
    const cpparity_status status =
        reference_team_gather_rows(model->rows.team, mine, model->rank_rows, width, *whole, error);
    if (status != CPPARITY_OK) {
        free(*whole);
        *whole = NULL;
    }
    return status;
}

/* The attention of layer l for this rank's queries: in one process the attention itself; spread,
 * over the keys and values gathered whole from every rank (team.h), the queries held here put in
 * place in a whole-shaped copy, their outputs taken back out. */
static cpparity_status attention_forward(reference_model *model, int64_t l, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const reference_layer_activations *a = &model->layer[l];
    double *act = model->activations;
    const reference_attention_shape shape = {model->batch, model->seq_len, H, Hkv, Dh};
    const double scale = 1.0 / sqrt((double)Dh);
    if (reference_team_size(model->rows.team) == 1) {
        return reference_attention_forward(act + a->attention, act + a->lse, act + a->q, act + a->k,
                                           act + a->v, &model->masks[l], shape, scale, error);
    }
    const int64_t N = model->batch * model->seq_len, first = model->first_row;
    const int64_t rows = model->local_rows;
    double *k = NULL, *v = NULL;
    double *q = calloc((size_t)(N * H * Dh), sizeof *q);
    double *out = calloc((size_t)(N * H * Dh), sizeof *out);
    cpparity_status status =
        q != NULL && out != NULL
            ? reference_model_gather(model, act + a->k, Hkv * Dh, &k, error)
            : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (attention)");
    if (status == CPPARITY_OK) {
        status = reference_model_gather(model, act + a->v, Hkv * Dh, &v, error);
    }
    if (status == CPPARITY_OK) {
        memcpy(q + first * H * Dh, act + a->q, (size_t)(rows * H * Dh) * sizeof *q);
        status = reference_attention_forward_rows(out, act + a->lse, q, k, v, &model->masks[l],
                                                  shape, scale, first, first + rows, error);
    }
    if (status == CPPARITY_OK) {
        memcpy(act + a->attention, out + first * H * Dh, (size_t)(rows * H * Dh) * sizeof *out);
        status = lse_share(model, act + a->lse, error);
    }
    free(q);
    free(k);
    free(v);
    free(out);
    return status;
}

/* One decoder layer: reads the stream at a->input, writes the layer's output to out. */
static cpparity_status layer_forward(reference_model *model, int64_t l, double *out,
                                     double *projection, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->local_rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const cpparity_layer_parameters *p = &model->parameter.layers[l];
    const reference_layer_activations *a = &model->layer[l];
    const reference_rows *rows = &model->rows;
    double *act = model->activations;
    const double *w = model->parameters;

    rmsnorm_forward(act + a->input_normed, act + a->input_rstd, act + a->input,
                    w + p->input_layernorm, N, D, c->rms_norm_eps);
    linear_forward(act + a->q, act + a->input_normed, w + p->q_proj, rows, D, H * Dh);
    linear_forward(act + a->k, act + a->input_normed, w + p->k_proj, rows, D, Hkv * Dh);
    linear_forward(act + a->v, act + a->input_normed, w + p->v_proj, rows, D, Hkv * Dh);
    rope_forward(act + a->q, act + model->rope_cos, act + model->rope_sin, N, H, Dh);
    rope_forward(act + a->k, act + model->rope_cos, act + model->rope_sin, N, Hkv, Dh);
    cpparity_status status = attention_forward(model, l, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    linear_forward(projection, act + a->attention, w + p->o_proj, rows, H * Dh, D);
    residual_forward(act + a->residual, act + a->input, projection, N * D);

    rmsnorm_forward(act + a->post_normed, act + a->post_rstd, act + a->residual,
                    w + p->post_attention_layernorm, N, D, c->rms_norm_eps);
    linear_forward(act + a->gate, act + a->post_normed, w + p->gate_proj, rows, D, F);
    linear_forward(act + a->up, act + a->post_normed, w + p->up_proj, rows, D, F);
    swiglu_forward(act + a->swiglu, act + a->gate, act + a->up, N * F);
    linear_forward(projection, act + a->swiglu, w + p->down_proj, rows, F, D);
    residual_forward(out, act + a->residual, projection, N * D);
    return CPPARITY_OK;
}

cpparity_status reference_model_forward(reference_model *model, const cpparity_batch *batch,
                                        cpparity_error *error) {
    cpparity_status status = check_batch(model, batch, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const cpparity_model_config *c = &model->config;
    const int64_t N = model->local_rows, D = c->hidden_size, first = model->first_row;
    double *act = model->activations;
    const double *w = model->parameters;
    status = build_masks(model, batch, error);
    double *projection = malloc((size_t)(N * D + 1) * sizeof *projection);
    if (status == CPPARITY_OK && projection == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (forward)");
    }
    if (status == CPPARITY_OK) {
        rope_tables(act + model->rope_cos, act + model->rope_sin, batch->position_ids + first, N,
                    c->head_dim, c->rope_theta);
        embedding_forward(act + model->layer[0].input, batch->input_ids + first,
                          w + model->parameter.embed_tokens, N, D);
    }
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        double *out = l + 1 < c->num_hidden_layers ? act + model->layer[l + 1].input
                                                   : act + model->final_input;
        status = layer_forward(model, l, out, projection, error);
    }
    free(projection);
    if (status != CPPARITY_OK) {
        return status;
    }
    rmsnorm_forward(act + model->final_normed, act + model->final_rstd, act + model->final_input,
                    w + model->parameter.norm, N, D, c->rms_norm_eps);
    status = lm_head_forward(act + model->logits_lse, act + model->token_loss,
                             act + model->final_normed, w + model->parameter.lm_head,
                             batch->labels + first, &model->rows, D, c->vocab_size, error);
    /* the terms of the valid labels of every rank, summed in token order */
    double *terms = act + model->token_loss;
    if (status == CPPARITY_OK && reference_team_size(model->rows.team) > 1) {
        status = reference_model_gather(model, act + model->token_loss, 1, &terms, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    model->loss_sum = 0.0;
    model->valid_labels = 0;
    for (int64_t n = 0; n < model->batch * model->seq_len; n++) {
        if (batch->labels[n] != CPPARITY_IGNORE_INDEX) {
            model->loss_sum += terms[n];
            model->valid_labels++;
        }
    }
    if (terms != act + model->token_loss) {
        free(terms);
    }
    if (model->valid_labels == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "the batch has no valid label (every label is -100): the loss "
                                  "is undefined");
    }
    model->loss = model->loss_sum / (double)model->valid_labels;
    return CPPARITY_OK;
}
