/* model.c — the reference model's storage: parameter and activation tables (see model.h). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

/* Appends one activation tensor and stores its offset. */
static cpparity_status add_activation(reference_model *model, int64_t *offset, int rank,
                                      const int64_t *shape, const char *name, int64_t layer,
                                      cpparity_error *error) {
    *offset = model->activation_table.total;
    if (layer < 0) {
        return cpparity_tensor_table_add(&model->activation_table, rank, shape, error, "%s", name);
    }
    return cpparity_tensor_table_add(&model->activation_table, rank, shape, error, "layers.%lld.%s",
                                     (long long)layer, name);
}

static cpparity_status build_activation_table(reference_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, S = model->seq_len, D = c->hidden_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const int64_t F = c->intermediate_size;
    cpparity_status status = add_activation(model, &model->rope_cos, 3, (int64_t[]){B, S, Dh / 2},
                                            "rope.cos", -1, error);
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->rope_sin, 3, (int64_t[]){B, S, Dh / 2}, "rope.sin",
                                -1, error);
    }
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        reference_layer_activations *a = &model->layer[l];
        const struct {
            int64_t *offset;
            const char *name;
            int rank;
            int64_t shape[4];
        } tensors[] = {
            {&a->input, "input", 3, {B, S, D}},
            {&a->input_rstd, "input_rstd", 2, {B, S}},
            {&a->input_normed, "input_normed", 3, {B, S, D}},
            {&a->q, "q", 4, {B, S, H, Dh}},
            {&a->k, "k", 4, {B, S, Hkv, Dh}},
            {&a->v, "v", 4, {B, S, Hkv, Dh}},
            {&a->attention, "attention", 4, {B, S, H, Dh}},
            {&a->lse, "lse", 3, {B, H, S}},
            {&a->residual, "residual", 3, {B, S, D}},
            {&a->post_rstd, "post_rstd", 2, {B, S}},
            {&a->post_normed, "post_normed", 3, {B, S, D}},
            {&a->gate, "gate", 3, {B, S, F}},
            {&a->up, "up", 3, {B, S, F}},
            {&a->swiglu, "swiglu", 3, {B, S, F}},
        };
        for (size_t i = 0; i < sizeof tensors / sizeof *tensors && status == CPPARITY_OK; i++) {
            status = add_activation(model, tensors[i].offset, tensors[i].rank, tensors[i].shape,
                                    tensors[i].name, l, error);
        }
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->final_input, 3, (int64_t[]){B, S, D}, "final.input",
                                -1, error);
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->final_rstd, 2, (int64_t[]){B, S}, "final.rstd", -1,
                                error);
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->final_normed, 3, (int64_t[]){B, S, D},
                                "final.normed", -1, error);
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->logits_lse, 2, (int64_t[]){B, S}, "logits_lse", -1,
                                error);
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->token_loss, 2, (int64_t[]){B, S}, "token_loss", -1,
                                error);
    }
    return status;
}

cpparity_status reference_model_init(reference_model *model, const cpparity_model_config *config,
                                     int64_t batch, int64_t seq_len, cpparity_error *error) {
    memset(model, 0, sizeof *model);
    cpparity_status status = cpparity_model_config_validate(config, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (batch < 1 || seq_len < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "batch size and sequence length must be >= 1, got %lld x %lld",
                                  (long long)batch, (long long)seq_len);
    }
    model->config = *config;
    model->batch = batch;
    model->seq_len = seq_len;
    model->rows = reference_rows_all(batch, seq_len);
    status = cpparity_model_parameter_table(config, &model->parameter_table, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameters_locate(config, &model->parameter_table,
                                                  &model->parameter, error);
    }
    if (status == CPPARITY_OK) {
        status = build_activation_table(model, error);
    }
    if (status == CPPARITY_OK) {
        model->parameters = calloc((size_t)model->parameter_table.total, sizeof(double));
        model->gradients = calloc((size_t)model->parameter_table.total, sizeof(double));
        model->activations = calloc((size_t)model->activation_table.total, sizeof(double));
        if (!model->parameters || !model->gradients || !model->activations) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "out of memory (reference model: %lld parameters, %lld "
                                        "activation values)",
                                        (long long)model->parameter_table.total,
                                        (long long)model->activation_table.total);
        }
    }
    if (status != CPPARITY_OK) {
        reference_model_free(model);
    }
    return status;
}

void reference_model_logits_block(const reference_model *model, int64_t block, double *out) {
    const row_block at = row_blocks_at(&model->rows.blocks, block);
    lm_head_logits_rows(out,
                        reference_model_final_normed(model) + at.flat * model->config.hidden_size,
                        reference_model_head(model), at.end - at.begin, model->config.hidden_size,
                        model->config.vocab_size);
}

const double *reference_model_final_normed(const reference_model *model) {
    return model->activations + model->final_normed;
}

const double *reference_model_head(const reference_model *model) {
    return model->parameters + model->parameter.lm_head;
}

void reference_model_free(reference_model *model) {
    for (int64_t l = 0; l < CPPARITY_MAX_LAYERS; l++) {
        reference_mask_free(&model->masks[l]);
    }
    cpparity_tensor_table_free(&model->parameter_table);
    cpparity_tensor_table_free(&model->activation_table);
    free(model->parameters);
    free(model->gradients);
    free(model->activations);
    memset(model, 0, sizeof *model);
}
