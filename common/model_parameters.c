/* model_parameters.c — model.md's parameter names and shapes (see model_parameters.h). */
#include "common/model_parameters.h"

#include <stdio.h>
#include <string.h>

cpparity_status cpparity_model_parameter_table(const cpparity_model_config *config,
                                               cpparity_tensor_table *table,
                                               cpparity_error *error) {
    const int64_t V = config->vocab_size, D = config->hidden_size, F = config->intermediate_size;
    const int64_t q_out = config->num_attention_heads * config->head_dim;
    const int64_t kv_out = config->num_key_value_heads * config->head_dim;
    cpparity_status status =
        cpparity_tensor_table_add(table, 2, (int64_t[]){V, D}, error, "model.embed_tokens.weight");
    for (int64_t l = 0; l < config->num_hidden_layers && status == CPPARITY_OK; l++) {
        const struct {
            const char *name;
            int rank;
            int64_t shape[2];
        } layer[] = {
            {"input_layernorm.weight", 1, {D, 0}},
            {"self_attn.q_proj.weight", 2, {q_out, D}},
            {"self_attn.k_proj.weight", 2, {kv_out, D}},
            {"self_attn.v_proj.weight", 2, {kv_out, D}},
            {"self_attn.o_proj.weight", 2, {D, q_out}},
            {"post_attention_layernorm.weight", 1, {D, 0}},
            {"mlp.gate_proj.weight", 2, {F, D}},
            {"mlp.up_proj.weight", 2, {F, D}},
            {"mlp.down_proj.weight", 2, {D, F}},
        };
        for (size_t i = 0; i < sizeof layer / sizeof *layer && status == CPPARITY_OK; i++) {
            status = cpparity_tensor_table_add(table, layer[i].rank, layer[i].shape, error,
                                               "model.layers.%lld.%s", (long long)l, layer[i].name);
        }
    }
    if (status == CPPARITY_OK) {
        status = cpparity_tensor_table_add(table, 1, (int64_t[]){D}, error, "model.norm.weight");
    }
    if (status == CPPARITY_OK && !config->tie_word_embeddings) {
        status = cpparity_tensor_table_add(table, 2, (int64_t[]){V, D}, error, "lm_head.weight");
    }
    return status;
}

static cpparity_status locate(const cpparity_tensor_table *table, int64_t *offset,
                              cpparity_error *error, const char *name) {
    const cpparity_tensor_entry *entry = cpparity_tensor_table_find(table, name);
    if (entry == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "parameter %s is missing", name);
    }
    *offset = entry->offset;
    return CPPARITY_OK;
}

cpparity_status cpparity_model_parameters_locate(const cpparity_model_config *config,
                                                 const cpparity_tensor_table *table,
                                                 cpparity_model_parameters *located,
                                                 cpparity_error *error) {
    memset(located, 0, sizeof *located);
    cpparity_status status =
        locate(table, &located->embed_tokens, error, "model.embed_tokens.weight");
    char name[CPPARITY_TENSOR_NAME];
    for (int64_t l = 0; l < config->num_hidden_layers && status == CPPARITY_OK; l++) {
        cpparity_layer_parameters *layer = &located->layers[l];
        const struct {
            const char *suffix;
            int64_t *offset;
        } wanted[] = {
            {"input_layernorm.weight", &layer->input_layernorm},
            {"self_attn.q_proj.weight", &layer->q_proj},
            {"self_attn.k_proj.weight", &layer->k_proj},
            {"self_attn.v_proj.weight", &layer->v_proj},
            {"self_attn.o_proj.weight", &layer->o_proj},
            {"post_attention_layernorm.weight", &layer->post_attention_layernorm},
            {"mlp.gate_proj.weight", &layer->gate_proj},
            {"mlp.up_proj.weight", &layer->up_proj},
            {"mlp.down_proj.weight", &layer->down_proj},
        };
        for (size_t i = 0; i < sizeof wanted / sizeof *wanted && status == CPPARITY_OK; i++) {
            snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, wanted[i].suffix);
            status = locate(table, wanted[i].offset, error, name);
        }
    }
    if (status == CPPARITY_OK) {
        status = locate(table, &located->norm, error, "model.norm.weight");
    }
    if (status == CPPARITY_OK) {
        status = config->tie_word_embeddings
                     ? locate(table, &located->lm_head, error, "model.embed_tokens.weight")
                     : locate(table, &located->lm_head, error, "lm_head.weight");
    }
    return status;
}
