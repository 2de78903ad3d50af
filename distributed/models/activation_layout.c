/* activation_layout.c — the saved activations of the model under test (see
 * activation_layout.h). */
#include "distributed/models/activation_layout.h"

#include <stddef.h>

/* Appends one activation and records its offset. */
static cpparity_status add(cpparity_tensor_table *table, int64_t *offset, const char *name,
                           int64_t layer, int rank, const int64_t *shape, cpparity_error *error) {
    *offset = table->total;
    return cpparity_tensor_table_add(table, rank, shape, error, "layers.%lld.%s", (long long)layer,
                                     name);
}

cpparity_status activation_layout_build(cpparity_tensor_table *table,
                                        model_layer_activations *layers, int64_t *final_input,
                                        int64_t *final_rstd, int64_t *final_normed, int64_t *logits,
                                        const cpparity_model_config *c,
                                        const activation_layout_sizes *sizes,
                                        cpparity_error *error) {
    const int64_t B = sizes->batch, L = sizes->local_len, S = sizes->seq_len;
    const int64_t D = c->hidden_size, F = c->intermediate_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const int64_t Hl = sizes->local_heads, Hkvl = sizes->local_kv_heads;
    cpparity_status status = CPPARITY_OK;
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        model_layer_activations *a = &layers[l];
        const struct {
            int64_t *offset;
            const char *name;
            int rank;
            int64_t shape[4];
        } tensors[] = {
            {&a->input, "input", 3, {B, L, D}},
            {&a->input_rstd, "input_rstd", 2, {B, L}},
            {&a->input_normed, "input_normed", 3, {B, L, D}},
            {&a->q, "q", 4, {B, L, H, Dh}},
            {&a->k, "k", 4, {B, L, Hkv, Dh}},
            {&a->v, "v", 4, {B, L, Hkv, Dh}},
            {&a->sequence_q, "sequence_q", 4, {B, S, Hl, Dh}},
            {&a->sequence_k, "sequence_k", 4, {B, S, Hkvl, Dh}},
            {&a->sequence_v, "sequence_v", 4, {B, S, Hkvl, Dh}},
            {&a->sequence_out, "sequence_out", 4, {B, S, Hl, Dh}},
            {&a->sequence_lse, "sequence_lse", 3, {B, Hl, S}},
            {&a->attention, "attention", 4, {B, L, H, Dh}},
            {&a->residual, "residual", 3, {B, L, D}},
            {&a->post_rstd, "post_rstd", 2, {B, L}},
            {&a->post_normed, "post_normed", 3, {B, L, D}},
            {&a->gate, "gate", 3, {B, L, F}},
            {&a->up, "up", 3, {B, L, F}},
            {&a->swiglu, "swiglu", 3, {B, L, F}},
        };
        for (size_t i = 0; i < sizeof tensors / sizeof *tensors && status == CPPARITY_OK; i++) {
            status = add(table, tensors[i].offset, tensors[i].name, l, tensors[i].rank,
                         tensors[i].shape, error);
        }
    }
    const int64_t last = c->num_hidden_layers;
    const int64_t tokens_features[] = {B, L, D}, tokens[] = {B, L};
    const int64_t vocab[] = {B, sizes->logits_rows, c->vocab_size};
    if (status == CPPARITY_OK) {
        status = add(table, final_input, "input", last, 3, tokens_features, error);
    }
    if (status == CPPARITY_OK) {
        status = add(table, final_rstd, "rstd", last, 2, tokens, error);
    }
    if (status == CPPARITY_OK) {
        status = add(table, final_normed, "normed", last, 3, tokens_features, error);
    }
    if (status == CPPARITY_OK) {
        status = add(table, logits, "logits", last, 3, vocab, error);
    }
    return status;
}
