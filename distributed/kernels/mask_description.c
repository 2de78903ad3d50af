/* mask_description.c — the compact mask over the gathered sequence (see mask_description.h). */
#include "mask_description.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void mask_storage_free(mask_storage *storage) {
    free(storage->document);
    free(storage->document_start);
    free(storage->position);
    free(storage->key_valid);
    free(storage->left_padding);
    memset(storage, 0, sizeof *storage);
}

cpparity_status mask_storage_build(mask_storage *storage, int64_t batch, int64_t seq_len,
                                   const int8_t *attention_mask, const int64_t *position_ids,
                                   cpparity_error *error) {
    return mask_storage_build_planted(storage, batch, seq_len, attention_mask, position_ids,
                                      CPPARITY_FAULT_NONE, 0, error);
}

cpparity_status mask_storage_build_planted(mask_storage *storage, int64_t batch, int64_t seq_len,
                                           const int8_t *attention_mask,
                                           const int64_t *position_ids, cpparity_fault fault,
                                           int64_t shard_length, cpparity_error *error) {
    memset(storage, 0, sizeof *storage);
    const size_t tokens = (size_t)(batch * seq_len);
    storage->batch = batch;
    storage->seq_len = seq_len;
    storage->document = malloc(tokens * sizeof(int64_t));
    storage->document_start = malloc(tokens * sizeof(int64_t));
    storage->position = malloc(tokens * sizeof(int64_t));
    storage->key_valid = malloc(tokens);
    storage->left_padding = malloc((size_t)batch * sizeof(int64_t));
    if (!storage->document || !storage->document_start || !storage->position ||
        !storage->key_valid || !storage->left_padding) {
        mask_storage_free(storage);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (mask of %lld x "
                                  "%lld tokens)",
                                  (long long)batch, (long long)seq_len);
    }
    /* the mask faults (fault.h) deviate here, inside the loops every run executes */
    const bool every_key_valid = /* fault site: mask-dropped, pad-leak */
        fault == CPPARITY_FAULT_MASK_DROPPED || fault == CPPARITY_FAULT_PAD_LEAK;
    const bool no_left_padding = /* fault site: chunk-no-left-pad, padding-side */
        fault == CPPARITY_FAULT_MASK_DROPPED || fault == CPPARITY_FAULT_CHUNK_NO_LEFT_PAD ||
        fault == CPPARITY_FAULT_PADDING_SIDE;
    const bool real_tokens_first =
        fault == CPPARITY_FAULT_PADDING_SIDE;                       /* fault site: padding-side */
    const bool one_document = fault == CPPARITY_FAULT_MASK_DROPPED; /* fault site: mask-dropped */
    const int64_t split_every = /* fault site: docs-local (a new document at every shard start) */
        fault == CPPARITY_FAULT_DOCS_LOCAL ? shard_length : 0;
    const bool positions_restart = /* fault site: chunk-position-restart */
        fault == CPPARITY_FAULT_CHUNK_POSITION_RESTART;
    for (int64_t b = 0; b < batch; b++) {
        const int64_t row = b * seq_len;
        int64_t leading = 0, real = 0;
        while (leading < seq_len && attention_mask[row + leading] == 0) {
            leading++;
        }
        for (int64_t t = 0; t < seq_len; t++) {
            real += attention_mask[row + t] != 0;
        }
        storage->left_padding[b] = no_left_padding ? 0 : leading;
        int64_t document = 0, start = 0;
        for (int64_t t = 0; t < seq_len; t++) {
            storage->key_valid[row + t] = every_key_valid     ? 1
                                          : real_tokens_first ? (int8_t)(t < real)
                                                              : attention_mask[row + t];
            const bool jump = t > 0 && position_ids[row + t] != position_ids[row + t - 1] + 1;
            const bool shard_start = split_every > 0 && t > 0 && t % split_every == 0;
            if (!one_document && (jump || shard_start)) {
                document++;
                start = t;
            }
            storage->document[row + t] = document;
            storage->document_start[row + t] = start;
            storage->position[row + t] = positions_restart ? t - start : position_ids[row + t];
        }
    }
    return CPPARITY_OK;
}

cpparity_mask_description mask_storage_describe(const mask_storage *storage,
                                                cpparity_attention_layer layer) {
    cpparity_mask_description mask;
    memset(&mask, 0, sizeof mask);
    mask.batch = storage->batch;
    mask.seq_len = storage->seq_len;
    mask.layer_type = (int32_t)layer.type;
    mask.chunk_origin = (int32_t)layer.chunk_origin;
    mask.window = layer.window;
    mask.chunk_size = layer.chunk_size;
    mask.document = storage->document;
    mask.document_start = storage->document_start;
    mask.key_valid = storage->key_valid;
    mask.left_padding = storage->left_padding;
    mask.position = storage->position;
    return mask;
}
