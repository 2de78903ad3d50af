/*
 * model_parameters.h — the model's parameters by model.md's names and shapes ([out, in], as
 * torch.nn.Linear stores them), in one table. lm_head.weight is absent when the embeddings are
 * tied. The same table describes the gradients.
 */
#ifndef CPPARITY_COMMON_MODEL_PARAMETERS_H
#define CPPARITY_COMMON_MODEL_PARAMETERS_H

#include "common/error.h"
#include "common/model_config.h"
#include "common/tensor_table.h"

/* Builds table (zeroed by the caller) for a validated configuration. */
cpparity_status cpparity_model_parameter_table(const cpparity_model_config *config,
                                               cpparity_tensor_table *table, cpparity_error *error);

/* Offsets of one layer's parameters and the global ones, resolved from a table by name. */
typedef struct cpparity_layer_parameters {
    int64_t input_layernorm;          /* (D) */
    int64_t q_proj;                   /* (H·Dh, D) */
    int64_t k_proj;                   /* (Hkv·Dh, D) */
    int64_t v_proj;                   /* (Hkv·Dh, D) */
    int64_t o_proj;                   /* (D, H·Dh) */
    int64_t post_attention_layernorm; /* (D) */
    int64_t gate_proj;                /* (F, D) */
    int64_t up_proj;                  /* (F, D) */
    int64_t down_proj;                /* (D, F) */
} cpparity_layer_parameters;

typedef struct cpparity_model_parameters {
    int64_t embed_tokens;                                  /* (V, D) */
    cpparity_layer_parameters layers[CPPARITY_MAX_LAYERS]; /* per layer */
    int64_t norm;                                          /* (D) */
    int64_t lm_head;                                       /* (V, D); = embed_tokens when tied */
} cpparity_model_parameters;

/* Resolves every offset of the table built by cpparity_model_parameter_table. */
cpparity_status cpparity_model_parameters_locate(const cpparity_model_config *config,
                                                 const cpparity_tensor_table *table,
                                                 cpparity_model_parameters *located,
                                                 cpparity_error *error);

#endif
