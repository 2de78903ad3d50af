/*
 * activation_layout.h — where the model under test keeps what backward needs: one table of
 * saved activations (names, shapes, offsets into one buffer) for a model of the configuration on
 * B rows of L local tokens (S after the all-to-all), shared by the CPU model (model_f32.h) and
 * the CUDA model (model_cuda.h) so that both keep the same tensors in the same places.
 */
#ifndef CPPARITY_DISTRIBUTED_ACTIVATION_LAYOUT_H
#define CPPARITY_DISTRIBUTED_ACTIVATION_LAYOUT_H

#include <stdint.h>

#include "common/error.h"
#include "common/model_config.h"
#include "common/tensor_table.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

/* Offsets of one layer's saved activations (local tokens unless marked "sequence"). */
typedef struct model_layer_activations {
    int64_t input, input_rstd, input_normed;    /* [B,L,D], [B,L], [B,L,D] */
    int64_t q, k, v;                            /* [B,L,H,Dh], [B,L,Hkv,Dh] ×2, after rotary */
    int64_t sequence_q, sequence_k, sequence_v; /* sequence: [B,S,Hl,Dh], [B,S,Hkvl,Dh] ×2 */
    int64_t sequence_out, sequence_lse;         /* sequence: [B,S,Hl,Dh], [B,Hl,S] */
    int64_t attention;                          /* [B,L,H,Dh] attention output, back in tokens */
    int64_t residual, post_rstd, post_normed;   /* [B,L,D], [B,L], [B,L,D] */
    int64_t gate, up, swiglu;                   /* [B,L,F] ×3 */
} model_layer_activations;

/* The sizes the layout depends on. */
typedef struct activation_layout_sizes {
    int64_t batch;          /* B */
    int64_t local_len;      /* L */
    int64_t seq_len;        /* S, padded: the sequence after the all-to-all */
    int64_t local_heads;    /* Hl */
    int64_t local_kv_heads; /* Hkvl */
    int64_t logits_rows;    /* rows of the saved logits [B, logits_rows, V]: L (the CUDA model
                               keeps its slice's logits), or 0 (the CPU model makes them one
                               chunk of rows at a time: model_f32_head.c) */
} activation_layout_sizes;

/* Appends every saved activation of config's layers to table ("layers.<l>.<name>") and records
 * each offset in layers[l]; then the final norm's input, rstd, normed output and the logits
 * ("layers.<num_hidden_layers>.input|rstd|normed|logits") in the four final offsets. */
cpparity_status activation_layout_build(cpparity_tensor_table *table,
                                        model_layer_activations *layers, int64_t *final_input,
                                        int64_t *final_rstd, int64_t *final_normed, int64_t *logits,
                                        const cpparity_model_config *config,
                                        const activation_layout_sizes *sizes,
                                        cpparity_error *error);

#ifdef __cplusplus
}
#endif

#endif
