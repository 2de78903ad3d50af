/* layer_attention.c — a layer's mask description and softmax scale (see layer_attention.h). */
#include "distributed/models/layer_attention.h"

#include <math.h>

cpparity_mask_description layer_attention_mask(const mask_storage *mask,
                                               const cpparity_model_config *config, int64_t l,
                                               cpparity_fault fault) {
    const int64_t layer = fault == CPPARITY_FAULT_LAYER_TYPE_MIXUP
                              ? config->num_hidden_layers - 1 - l /* another layer's type */
                              : l;
    cpparity_mask_description description =
        mask_storage_describe(mask, cpparity_model_layer(config, layer));
    if (fault == CPPARITY_FAULT_WINDOW_OFF_BY_ONE) {
        description.window += 1;
    } else if (fault == CPPARITY_FAULT_MASK_DROPPED) {
        description.layer_type = 0; /* plain causal */
    }
    return description;
}

float layer_attention_scale(int64_t head_dim, cpparity_fault fault) {
    return fault == CPPARITY_FAULT_SCALE_DROPPED ? 1.0f : 1.0f / sqrtf((float)head_dim);
}
