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

/* Every per-token activation has this rank's N = local_rows tokens (all B·S in one process);
 * the attention's log-sum-exp is kept whole (B, H, S), gathered from the ranks, for the backward's
 * gradients of the keys, which read it for every query. */
static cpparity_status build_activation_table(reference_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, S = model->seq_len, D = c->hidden_size, N = model->local_rows;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const int64_t F = c->intermediate_size;
    cpparity_status status =
        add_activation(model, &model->rope_cos, 2, (int64_t[]){N, Dh / 2}, "rope.cos", -1, error);
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->rope_sin, 2, (int64_t[]){N, Dh / 2}, "rope.sin", -1,
                                error);
    }
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        reference_layer_activations *a = &model->layer[l];
        const struct {
            int64_t *offset;
            const char *name;
            int rank;
            int64_t shape[4];
        } tensors[] = {
            {&a->input, "input", 2, {N, D}},
            {&a->input_rstd, "input_rstd", 1, {N}},
            {&a->input_normed, "input_normed", 2, {N, D}},
            {&a->q, "q", 3, {N, H, Dh}},
            {&a->k, "k", 3, {N, Hkv, Dh}},
            {&a->v, "v", 3, {N, Hkv, Dh}},
            {&a->attention, "attention", 3, {N, H, Dh}},
            {&a->lse, "lse", 3, {B, H, S}},
            {&a->residual, "residual", 2, {N, D}},
            {&a->post_rstd, "post_rstd", 1, {N}},
            {&a->post_normed, "post_normed", 2, {N, D}},
            {&a->gate, "gate", 2, {N, F}},
            {&a->up, "up", 2, {N, F}},
            {&a->swiglu, "swiglu", 2, {N, F}},
        };
        for (size_t i = 0; i < sizeof tensors / sizeof *tensors && status == CPPARITY_OK; i++) {
            status = add_activation(model, tensors[i].offset, tensors[i].rank, tensors[i].shape,
                                    tensors[i].name, l, error);
        }
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->final_input, 2, (int64_t[]){N, D}, "final.input", -1,
                                error);
    }
    if (status == CPPARITY_OK) {
        status =
            add_activation(model, &model->final_rstd, 1, (int64_t[]){N}, "final.rstd", -1, error);
    }
    if (status == CPPARITY_OK) {
        status = add_activation(model, &model->final_normed, 2, (int64_t[]){N, D}, "final.normed",
                                -1, error);
    }
    if (status == CPPARITY_OK) {
        status =
            add_activation(model, &model->logits_lse, 1, (int64_t[]){N}, "logits_lse", -1, error);
    }
    if (status == CPPARITY_OK) {
        status =
            add_activation(model, &model->token_loss, 1, (int64_t[]){N}, "token_loss", -1, error);
    }
    return status;
}

cpparity_status reference_model_init(reference_model *model, const cpparity_model_config *config,
                                     int64_t batch, int64_t seq_len, cpparity_error *error) {
    return reference_model_init_spread(model, config, batch, seq_len, NULL, error);
}

cpparity_status reference_model_init_spread(reference_model *model,
                                            const cpparity_model_config *config, int64_t batch,
                                            int64_t seq_len, const reference_team *team,
                                            cpparity_error *error) {
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
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    if (size > 1) {
        model->rows.first = row_blocks_first(&model->rows.blocks, size, rank);
        model->rows.end = row_blocks_first(&model->rows.blocks, size, rank + 1);
        model->rows.team = team;
    }
    row_blocks_rows(&model->rows.blocks, model->rows.first, model->rows.end, &model->first_row,
                    &model->local_rows);
    model->local_rows -= model->first_row;
    model->rank_rows = malloc((size_t)size * sizeof *model->rank_rows);
    if (model->rank_rows == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (%d ranks)", size);
    }
    for (int r = 0; r < size; r++) {
        model->rank_rows[r] = reference_model_rank_rows(model, r);
    }
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

int64_t reference_model_rank_rows(const reference_model *model, int rank) {
    const int size = reference_team_size(model->rows.team);
    int64_t first = 0, end = 0;
    row_blocks_rows(&model->rows.blocks, row_blocks_first(&model->rows.blocks, size, rank),
                    row_blocks_first(&model->rows.blocks, size, rank + 1), &first, &end);
    return end - first;
}

cpparity_status reference_model_final_normed_whole(const reference_model *model, double *whole,
                                                   cpparity_error *error) {
    return reference_team_gather_rows(model->rows.team, reference_model_final_normed(model),
                                      model->rank_rows, model->config.hidden_size, whole, error);
}

void reference_model_logits_block(const reference_model *model, int64_t block, double *out) {
    const row_block at = row_blocks_at(&model->rows.blocks, block);
    lm_head_logits_rows(out,
                        reference_model_final_normed(model) +
                            (at.flat - model->first_row) * model->config.hidden_size,
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
    free(model->rank_rows);
    memset(model, 0, sizeof *model);
}
