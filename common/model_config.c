/* model_config.c — layer descriptions and validation of the model configuration. */
#include "model_config.h"

#include <string.h>

cpparity_attention_layer cpparity_model_layer(const cpparity_model_config *config, int64_t l) {
    cpparity_attention_layer layer = {config->layer_types[l], config->sliding_window,
                                      config->attention_chunk_size, config->chunk_origin};
    return layer;
}

bool cpparity_layer_type_parse(const char *text, cpparity_layer_type *type) {
    const cpparity_layer_type all[] = {CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING,
                                       CPPARITY_LAYER_CHUNKED};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (strcmp(text, cpparity_layer_type_name(all[i])) == 0) {
            *type = all[i];
            return true;
        }
    }
    return false;
}

cpparity_status cpparity_model_config_validate(const cpparity_model_config *config,
                                               cpparity_error *error) {
    const struct {
        const char *key;
        int64_t value;
    } sizes[] = {
        {"vocab_size", config->vocab_size},
        {"hidden_size", config->hidden_size},
        {"num_hidden_layers", config->num_hidden_layers},
        {"num_attention_heads", config->num_attention_heads},
        {"num_key_value_heads", config->num_key_value_heads},
        {"head_dim", config->head_dim},
        {"intermediate_size", config->intermediate_size},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (sizes[i].value < 1) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s must be >= 1, got %lld",
                                      sizes[i].key, (long long)sizes[i].value);
        }
    }
    if (config->num_hidden_layers > CPPARITY_MAX_LAYERS) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "num_hidden_layers must be <= %d, got %lld", CPPARITY_MAX_LAYERS,
                                  (long long)config->num_hidden_layers);
    }
    if (config->num_attention_heads % config->num_key_value_heads != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "num_attention_heads (%lld) must be a multiple of "
                                  "num_key_value_heads (%lld)",
                                  (long long)config->num_attention_heads,
                                  (long long)config->num_key_value_heads);
    }
    if (config->head_dim % 2 != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "head_dim must be even (rotary embeddings rotate halves), got "
                                  "%lld",
                                  (long long)config->head_dim);
    }
    if (!(config->rms_norm_eps > 0.0)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rms_norm_eps must be > 0, got %g",
                                  config->rms_norm_eps);
    }
    if (!(config->rope_theta > 0.0)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rope_theta must be > 0, got %g",
                                  config->rope_theta);
    }
    for (int64_t l = 0; l < config->num_hidden_layers; l++) {
        cpparity_layer_type type = config->layer_types[l];
        if (type == CPPARITY_LAYER_SLIDING && config->sliding_window < 1) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "sliding_window must be >= 1 (layer %lld is "
                                      "sliding_attention), got %lld",
                                      (long long)l, (long long)config->sliding_window);
        }
        if (type == CPPARITY_LAYER_CHUNKED && config->attention_chunk_size < 1) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "attention_chunk_size must be >= 1 (layer %lld is "
                                      "chunked_attention), got %lld",
                                      (long long)l, (long long)config->attention_chunk_size);
        }
    }
    return CPPARITY_OK;
}
