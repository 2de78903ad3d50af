/*
 * layer_attention.h — what each layer's attention kernel is called with, the same in the CPU and
 * CUDA models: the mask description of layer l and the softmax scale, with the planted faults
 * (common/fault.h) that change them (window-off-by-one, mask-dropped, layer-type-mixup,
 * scale-dropped). With CPPARITY_FAULT_NONE: the layer's type from the config over the rebuilt
 * mask, and 1/sqrt(head_dim).
 */
#ifndef CPPARITY_DISTRIBUTED_LAYER_ATTENTION_H
#define CPPARITY_DISTRIBUTED_LAYER_ATTENTION_H

#include <stdint.h>

#include "common/fault.h"
#include "common/model_config.h"
#include "distributed/kernels/kernel.h"
#include "distributed/kernels/mask_description.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

/* The description of layer l (pointers into mask). */
cpparity_mask_description layer_attention_mask(const mask_storage *mask,
                                               const cpparity_model_config *config, int64_t l,
                                               cpparity_fault fault);

/* The scale the kernel applies to q·k. */
float layer_attention_scale(int64_t head_dim, cpparity_fault fault);

#ifdef __cplusplus
}
#endif

#endif
