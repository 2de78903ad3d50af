/* mask_description.c — the compact mask over the gathered sequence (see mask_description.h). */
#include "mask_description.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void mask_storage_free(mask_storage *storage) {
    free(storage->document);
    free(storage->document_start);
    free(storage->key_valid);
    free(storage->left_padding);
    memset(storage, 0, sizeof *storage);
}

cpparity_status mask_storage_build(mask_storage *storage, int64_t batch, int64_t seq_len,
                                   const int8_t *attention_mask, const int64_t *position_ids,
                                   cpparity_error *error) {
    memset(storage, 0, sizeof *storage);
    const size_t tokens = (size_t)(batch * seq_len);
    storage->batch = batch;
    storage->seq_len = seq_len;
    storage->document = malloc(tokens * sizeof(int64_t));
    storage->document_start = malloc(tokens * sizeof(int64_t));
    storage->key_valid = malloc(tokens);
    storage->left_padding = malloc((size_t)batch * sizeof(int64_t));
    if (!storage->document || !storage->document_start || !storage->key_valid ||
        !storage->left_padding) {
        mask_storage_free(storage);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (mask of %lld x "
                                  "%lld tokens)",
                                  (long long)batch, (long long)seq_len);
    }
    memcpy(storage->key_valid, attention_mask, tokens);
    for (int64_t b = 0; b < batch; b++) {
        const int64_t row = b * seq_len;
        int64_t leading = 0;
        while (leading < seq_len && attention_mask[row + leading] == 0) {
            leading++;
        }
        storage->left_padding[b] = leading;
        int64_t document = 0, start = 0;
        for (int64_t t = 0; t < seq_len; t++) {
            if (t > 0 && position_ids[row + t] != position_ids[row + t - 1] + 1) {
                document++;
                start = t;
            }
            storage->document[row + t] = document;
            storage->document_start[row + t] = start;
        }
    }
    return CPPARITY_OK;
}

void mask_storage_inject(mask_storage *storage, cpparity_fault fault, int64_t shard_length) {
    const int64_t S = storage->seq_len;
    for (int64_t b = 0; b < storage->batch; b++) {
        const int64_t row = b * S;
        switch (fault) {
        case CPPARITY_FAULT_MASK_DROPPED: /* plain causal: one document, every key valid */
            storage->left_padding[b] = 0;
            for (int64_t t = 0; t < S; t++) {
                storage->key_valid[row + t] = 1;
                storage->document[row + t] = 0;
                storage->document_start[row + t] = 0;
            }
            break;
        case CPPARITY_FAULT_PAD_LEAK:
            memset(storage->key_valid + row, 1, (size_t)S);
            break;
        case CPPARITY_FAULT_CHUNK_NO_LEFT_PAD:
            storage->left_padding[b] = 0;
            break;
        case CPPARITY_FAULT_PADDING_SIDE: { /* the n real tokens assumed to come first */
            int64_t real = 0;
            for (int64_t t = 0; t < S; t++) {
                real += storage->key_valid[row + t] != 0;
            }
            for (int64_t t = 0; t < S; t++) {
                storage->key_valid[row + t] = t < real;
            }
            storage->left_padding[b] = 0;
            break;
        }
        case CPPARITY_FAULT_DOCS_LOCAL: { /* a new document at every shard start as well */
            int64_t document = 0, start = 0, previous = storage->document[row];
            for (int64_t t = 1; t < S; t++) {
                const int64_t original = storage->document[row + t];
                const bool shard_start = shard_length > 0 && t % shard_length == 0;
                if (original != previous || shard_start) {
                    document++;
                    start = t;
                }
                previous = original;
                storage->document[row + t] = document;
                storage->document_start[row + t] = start;
            }
            break;
        }
        default:
            return;
        }
    }
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
    return mask;
}
