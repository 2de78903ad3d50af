/*
 * model_config.h — the tiny Llama-style model's configuration (../shared/spec/model.md), with
 * transformers' names. A definition shared by the reference, the implementation under test and
 * the case files; it holds no math.
 */
#ifndef CPPARITY_COMMON_MODEL_CONFIG_H
#define CPPARITY_COMMON_MODEL_CONFIG_H

#include <stdbool.h>
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
    cpparity_chunk_origin chunk_origin;                   /* row (default) or document variant */
    bool tie_word_embeddings;                             /* lm_head shares embed_tokens */
} cpparity_model_config;

/* The attention description of layer l (type, W, C, chunk origin). */
cpparity_attention_layer cpparity_model_layer(const cpparity_model_config *config, int64_t l);

/* Checks every size, H % Hkv, even head_dim, eps and theta > 0, W and C >= 1 where used.
 * CPPARITY_ERROR_INPUT with the configuration key named in the message. */
cpparity_status cpparity_model_config_validate(const cpparity_model_config *config,
                                               cpparity_error *error);

/* Parses "full_attention" / "sliding_attention" / "chunked_attention". False when unknown. */
bool cpparity_layer_type_parse(const char *text, cpparity_layer_type *type);

#endif
