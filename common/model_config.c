/* model_config.c — the configuration field table, layer descriptions and validation (see
 * model_config.h). */
#include "common/model_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/names.h"

const char *const cpparity_layer_type_names[CPPARITY_LAYER_TYPE_COUNT] = {
    "full_attention", "sliding_attention", "chunked_attention"};
const char *const cpparity_chunk_origin_names[CPPARITY_CHUNK_ORIGIN_COUNT] = {"row", "document",
                                                                              "position"};

const char *cpparity_layer_type_name(cpparity_layer_type type) {
    return cpparity_name_of(cpparity_layer_type_names, CPPARITY_LAYER_TYPE_COUNT, (int)type);
}

#define FIELD(name, type, required, layer, default_value, description)                             \
    {                                                                                              \
#name, type, offsetof(cpparity_model_config, name), required, layer, default_value,        \
            description                                                                            \
    }

const cpparity_model_field cpparity_model_fields[CPPARITY_MODEL_FIELD_COUNT] = {
    FIELD(vocab_size, CPPARITY_FIELD_SIZE, true, -1, 0, "V, tokens in the vocabulary"),
    FIELD(hidden_size, CPPARITY_FIELD_SIZE, true, -1, 0, "D, width of the residual stream"),
    FIELD(num_hidden_layers, CPPARITY_FIELD_SIZE, true, -1, 0, "L, decoder layers (at most 64)"),
    FIELD(num_attention_heads, CPPARITY_FIELD_SIZE, true, -1, 0, "H, query heads"),
    FIELD(num_key_value_heads, CPPARITY_FIELD_SIZE, true, -1, 0,
          "Hkv, key/value heads (H % Hkv == 0; 1 is multi-query)"),
    FIELD(head_dim, CPPARITY_FIELD_SIZE, true, -1, 0, "Dh, even (rotary embeddings rotate halves)"),
    FIELD(intermediate_size, CPPARITY_FIELD_SIZE, true, -1, 0, "F, width of the SwiGLU MLP"),
    FIELD(rms_norm_eps, CPPARITY_FIELD_POSITIVE, false, -1, 1e-6, "epsilon of every RMSNorm"),
    FIELD(rope_theta, CPPARITY_FIELD_POSITIVE, false, -1, 10000.0,
          "base of the rotary frequencies"),
    FIELD(layer_types, CPPARITY_FIELD_LAYER_TYPES, false, -1, CPPARITY_LAYER_FULL,
          "one of full_attention, sliding_attention, chunked_attention per layer (default: all "
          "full_attention)"),
    FIELD(sliding_window, CPPARITY_FIELD_SIZE, false, CPPARITY_LAYER_SLIDING, 0,
          "W, keys a sliding layer sees including the diagonal (required by sliding layers)"),
    FIELD(attention_chunk_size, CPPARITY_FIELD_SIZE, false, CPPARITY_LAYER_CHUNKED, 0,
          "C, tokens per chunk of a chunked layer (required by chunked layers)"),
    FIELD(chunk_origin, CPPARITY_FIELD_CHUNK_ORIGIN, false, -1, CPPARITY_CHUNK_ORIGIN_ROW,
          "where the chunk grid starts: row (shifted by left padding), document (each document's "
          "first token) or position (chunks counted in position_ids)"),
    FIELD(tie_word_embeddings, CPPARITY_FIELD_BOOLEAN, false, -1, 0,
          "lm_head shares embed_tokens' weight"),
};

#undef FIELD

const cpparity_model_field *cpparity_model_field_find(const char *name) {
    for (int i = 0; name != NULL && i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        if (strcmp(cpparity_model_fields[i].name, name) == 0) {
            return &cpparity_model_fields[i];
        }
    }
    return NULL;
}

void *cpparity_model_field_address(cpparity_model_config *config,
                                   const cpparity_model_field *field) {
    return (char *)config + field->offset;
}

const void *cpparity_model_field_value(const cpparity_model_config *config,
                                       const cpparity_model_field *field) {
    return (const char *)config + field->offset;
}

/* Bytes of a field's member. */
static size_t field_size(const cpparity_model_field *field) {
    switch (field->type) {
    case CPPARITY_FIELD_SIZE:
        return sizeof(int64_t);
    case CPPARITY_FIELD_POSITIVE:
        return sizeof(double);
    case CPPARITY_FIELD_BOOLEAN:
        return sizeof(bool);
    case CPPARITY_FIELD_LAYER_TYPES:
        return sizeof(cpparity_layer_type) * CPPARITY_MAX_LAYERS;
    case CPPARITY_FIELD_CHUNK_ORIGIN:
        return sizeof(cpparity_chunk_origin);
    }
    return 0;
}

void cpparity_model_field_copy(cpparity_model_config *target, const cpparity_model_config *source,
                               const cpparity_model_field *field) {
    memcpy(cpparity_model_field_address(target, field), cpparity_model_field_value(source, field),
           field_size(field));
}

void cpparity_model_config_set_defaults(cpparity_model_config *config) {
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        const cpparity_model_field *field = &cpparity_model_fields[i];
        if (field->required) {
            continue;
        }
        void *member = cpparity_model_field_address(config, field);
        switch (field->type) {
        case CPPARITY_FIELD_SIZE:
            *(int64_t *)member = (int64_t)field->default_value;
            break;
        case CPPARITY_FIELD_POSITIVE:
            *(double *)member = field->default_value;
            break;
        case CPPARITY_FIELD_BOOLEAN:
            *(bool *)member = field->default_value != 0.0;
            break;
        case CPPARITY_FIELD_LAYER_TYPES:
            for (int l = 0; l < CPPARITY_MAX_LAYERS; l++) {
                ((cpparity_layer_type *)member)[l] = (cpparity_layer_type)field->default_value;
            }
            break;
        case CPPARITY_FIELD_CHUNK_ORIGIN:
            *(cpparity_chunk_origin *)member = (cpparity_chunk_origin)field->default_value;
            break;
        }
    }
}

void cpparity_model_field_format(const cpparity_model_config *config,
                                 const cpparity_model_field *field, char *text, size_t size) {
    const void *member = cpparity_model_field_value(config, field);
    if (size == 0) {
        return;
    }
    text[0] = '\0';
    switch (field->type) {
    case CPPARITY_FIELD_SIZE:
        snprintf(text, size, "%lld", (long long)*(const int64_t *)member);
        return;
    case CPPARITY_FIELD_POSITIVE:
        snprintf(text, size, "%.17g", *(const double *)member);
        return;
    case CPPARITY_FIELD_BOOLEAN:
        snprintf(text, size, "%s", *(const bool *)member ? "true" : "false");
        return;
    case CPPARITY_FIELD_CHUNK_ORIGIN:
        snprintf(text, size, "%s",
                 cpparity_name_of(cpparity_chunk_origin_names, CPPARITY_CHUNK_ORIGIN_COUNT,
                                  (int)*(const cpparity_chunk_origin *)member));
        return;
    case CPPARITY_FIELD_LAYER_TYPES: {
        const cpparity_layer_type *types = member;
        size_t used = (size_t)snprintf(text, size, "[");
        const int64_t layers = config->num_hidden_layers < CPPARITY_MAX_LAYERS
                                   ? config->num_hidden_layers
                                   : CPPARITY_MAX_LAYERS;
        for (int64_t l = 0; l < layers && used < size; l++) {
            used += (size_t)snprintf(text + used, size - used, "%s%s", l > 0 ? ", " : "",
                                     cpparity_layer_type_name(types[l]));
        }
        if (used < size) {
            snprintf(text + used, size - used, "]");
        }
        return;
    }
    }
}

cpparity_attention_layer cpparity_model_layer(const cpparity_model_config *config, int64_t l) {
    cpparity_attention_layer layer = {config->layer_types[l], config->sliding_window,
                                      config->attention_chunk_size, config->chunk_origin};
    return layer;
}

bool cpparity_layer_type_parse(const char *text, cpparity_layer_type *type) {
    const int index =
        cpparity_name_index(cpparity_layer_type_names, CPPARITY_LAYER_TYPE_COUNT, text);
    if (index < 0) {
        return false;
    }
    *type = (cpparity_layer_type)index;
    return true;
}

/* Whether some layer of config has this type. */
static bool uses_layer_type(const cpparity_model_config *config, int type, int64_t *first) {
    const int64_t layers =
        config->num_hidden_layers < CPPARITY_MAX_LAYERS ? config->num_hidden_layers : 0;
    for (int64_t l = 0; l < layers; l++) {
        if ((int)config->layer_types[l] == type) {
            *first = l;
            return true;
        }
    }
    return false;
}

/* Checks one field's value on its own. */
static cpparity_status validate_field(const cpparity_model_config *config,
                                      const cpparity_model_field *field, cpparity_error *error) {
    const void *member = cpparity_model_field_value(config, field);
    int64_t layer = 0;
    switch (field->type) {
    case CPPARITY_FIELD_SIZE: {
        const int64_t value = *(const int64_t *)member;
        if (field->required && value < 1) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s must be >= 1, got %lld",
                                      field->name, (long long)value);
        }
        if (field->required_by_layer >= 0 && value < 1 &&
            uses_layer_type(config, field->required_by_layer, &layer)) {
            return cpparity_error_set(
                error, CPPARITY_ERROR_INPUT, "%s must be >= 1 (layer %lld is %s), got %lld",
                field->name, (long long)layer, cpparity_layer_type_name(config->layer_types[layer]),
                (long long)value);
        }
        return CPPARITY_OK;
    }
    case CPPARITY_FIELD_POSITIVE: {
        const double value = *(const double *)member;
        if (!(value > 0.0) || !isfinite(value)) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s must be finite and > 0, got %g", field->name, value);
        }
        return CPPARITY_OK;
    }
    case CPPARITY_FIELD_CHUNK_ORIGIN: {
        const int value = (int)*(const cpparity_chunk_origin *)member;
        if (value < 0 || value >= CPPARITY_CHUNK_ORIGIN_COUNT) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: unknown value %d",
                                      field->name, value);
        }
        return CPPARITY_OK;
    }
    case CPPARITY_FIELD_LAYER_TYPES: {
        const cpparity_layer_type *types = member;
        for (int64_t l = 0; l < config->num_hidden_layers && l < CPPARITY_MAX_LAYERS; l++) {
            if ((int)types[l] < 0 || (int)types[l] >= CPPARITY_LAYER_TYPE_COUNT) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "%s[%lld]: unknown layer type %d", field->name,
                                          (long long)l, (int)types[l]);
            }
        }
        return CPPARITY_OK;
    }
    case CPPARITY_FIELD_BOOLEAN:
        return CPPARITY_OK;
    }
    return CPPARITY_OK;
}

cpparity_status cpparity_model_config_validate(const cpparity_model_config *config,
                                               cpparity_error *error) {
    if (config->num_hidden_layers > CPPARITY_MAX_LAYERS) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "num_hidden_layers must be <= %d, got %lld", CPPARITY_MAX_LAYERS,
                                  (long long)config->num_hidden_layers);
    }
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        cpparity_status status = validate_field(config, &cpparity_model_fields[i], error);
        if (status != CPPARITY_OK) {
            return status;
        }
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
    return CPPARITY_OK;
}
