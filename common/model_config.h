/*
 * model_config.h — the tiny Llama-style model's configuration (docs/model.md), with
 * transformers' names. A definition shared by the reference, the implementation under test and
 * the case files; it holds no math.
 *
 * Every field is described once, in cpparity_model_fields: its transformers name, its type,
 * whether a case must set it (or which layer type requires it) and its default. The case loader,
 * the validation, the HDF5 writers (`/model` of an export, `/cases/<case>` of a results file) and
 * `cpparity list --model` all iterate that table; adding a field is one struct member plus one
 * table row (and the math that uses it).
 */
#ifndef CPPARITY_COMMON_MODEL_CONFIG_H
#define CPPARITY_COMMON_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/attention_layer.h"
#include "common/error.h"

#define CPPARITY_MAX_LAYERS 64

typedef struct cpparity_model_config {
    int64_t vocab_size;                                   /* V */
    int64_t hidden_size;                                  /* D */
    int64_t num_hidden_layers;                            /* L <= CPPARITY_MAX_LAYERS */
    int64_t num_attention_heads;                          /* H */
    int64_t num_key_value_heads;                          /* Hkv, H % Hkv == 0 */
    int64_t head_dim;                                     /* Dh, even (rotary halves) */
    int64_t intermediate_size;                            /* F */
    double rms_norm_eps;                                  /* eps > 0 */
    double rope_theta;                                    /* > 0 */
    cpparity_layer_type layer_types[CPPARITY_MAX_LAYERS]; /* one per layer */
    int64_t sliding_window;                               /* W >= 1 (used by sliding layers) */
    int64_t attention_chunk_size;                         /* C >= 1 (used by chunked layers) */
    cpparity_chunk_origin chunk_origin; /* row (default), or the document or position variant */
    bool tie_word_embeddings;           /* lm_head shares embed_tokens */
} cpparity_model_config;

/* How a configuration field is stored and written. */
typedef enum cpparity_model_field_type {
    CPPARITY_FIELD_SIZE = 0,         /* int64_t, >= 1 where set or used */
    CPPARITY_FIELD_POSITIVE = 1,     /* double, finite and > 0 */
    CPPARITY_FIELD_BOOLEAN = 2,      /* bool, YAML true/false, HDF5 int64 0/1 */
    CPPARITY_FIELD_LAYER_TYPES = 3,  /* layer_types: one name per layer (num_hidden_layers) */
    CPPARITY_FIELD_CHUNK_ORIGIN = 4, /* cpparity_chunk_origin by name ("row", "document",
                                        "position") */
} cpparity_model_field_type;

typedef struct cpparity_model_field {
    const char *name;               /* transformers' key, e.g. "vocab_size" */
    cpparity_model_field_type type; /* storage and syntax */
    size_t offset;                  /* of the member in cpparity_model_config */
    bool required;                  /* every case must set it (directly or through defaults) */
    int required_by_layer;          /* a cpparity_layer_type that needs it, or −1 */
    double default_value;           /* when absent: the number, size, 0/1 or enum index */
    const char *description;        /* one line for help texts and documentation */
} cpparity_model_field;

#define CPPARITY_MODEL_FIELD_COUNT 14
extern const cpparity_model_field cpparity_model_fields[CPPARITY_MODEL_FIELD_COUNT];

/* The field called name, or NULL. */
const cpparity_model_field *cpparity_model_field_find(const char *name);

/* The field's member in config (cast to the type the field's type names). */
void *cpparity_model_field_address(cpparity_model_config *config,
                                   const cpparity_model_field *field);
const void *cpparity_model_field_value(const cpparity_model_config *config,
                                       const cpparity_model_field *field);

/* Copies one field's value from source to target. */
void cpparity_model_field_copy(cpparity_model_config *target, const cpparity_model_config *source,
                               const cpparity_model_field *field);

/* Sets every field that is not required to its default (layer_types: all full_attention). */
void cpparity_model_config_set_defaults(cpparity_model_config *config);

/* The value of field in config as text ("64", "1e-06", "true", "row",
 * "[full_attention, sliding_attention]"), truncated to size bytes. */
void cpparity_model_field_format(const cpparity_model_config *config,
                                 const cpparity_model_field *field, char *text, size_t size);

/* The attention description of layer l (type, W, C, chunk origin). */
cpparity_attention_layer cpparity_model_layer(const cpparity_model_config *config, int64_t l);

/* Checks every field of the table (sizes >= 1 where required or used by a layer, positive
 * numbers finite and > 0, known enumeration values) and the rules across fields
 * (num_hidden_layers <= CPPARITY_MAX_LAYERS, H % Hkv, even head_dim). CPPARITY_ERROR_INPUT with
 * the configuration key named in the message. */
cpparity_status cpparity_model_config_validate(const cpparity_model_config *config,
                                               cpparity_error *error);

/* Parses "full_attention" / "sliding_attention" / "chunked_attention". False when unknown. */
bool cpparity_layer_type_parse(const char *text, cpparity_layer_type *type);

#endif
