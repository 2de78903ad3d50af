/* test_models.c — the small model configuration unit tests share (see test_models.h). */
#include "tests/support/test_models.h"

#include <stdlib.h>

#include "common/row_blocks.h"

#include <string.h>

cpparity_model_config test_small_model(cpparity_layer_type first, cpparity_layer_type second) {
    cpparity_model_config config;
    memset(&config, 0, sizeof config);
    cpparity_model_config_set_defaults(&config);
    config.vocab_size = 11;
    config.hidden_size = 8;
    config.num_hidden_layers = 2;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 2;
    config.head_dim = 4;
    config.intermediate_size = 12;
    config.layer_types[0] = first;
    config.layer_types[1] = second;
    config.sliding_window = 3;
    config.attention_chunk_size = 3;
    return config;
}

double *test_reference_logits(const reference_model *model) {
    const int64_t V = model->config.vocab_size;
    const row_blocks blocks = row_blocks_of(model->batch, model->seq_len);
    double *logits = malloc((size_t)(model->batch * model->seq_len * V + 1) * sizeof *logits);
    for (int64_t k = 0; logits != NULL && k < blocks.count; k++) {
        reference_model_logits_block(model, k, logits + row_blocks_at(&blocks, k).flat * V);
    }
    return logits;
}
