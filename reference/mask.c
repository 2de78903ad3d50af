/*
 * mask.c — the reference mask: per-token facts from the definition, the predicate, and block
 * classification (see mask.h).
 */
#include "mask.h"

#include <stdlib.h>
#include <string.h>

/* Floor division (rounds toward −∞), as masks.md's fdiv; divisor > 0. */
static int64_t floor_divide(int64_t numerator, int64_t divisor) {
    int64_t quotient = numerator / divisor;
    if ((numerator % divisor != 0) && (numerator < 0)) {
        quotient -= 1;
    }
    return quotient;
}

void reference_mask_free(reference_mask *mask) {
    if (mask == NULL) {
        return;
    }
    free(mask->key_valid);
    free(mask->valid_prefix);
    free(mask->document);
    free(mask->chunk);
    free(mask->left_padding);
    memset(mask, 0, sizeof *mask);
}

static cpparity_status validate_arguments(int64_t batch, int64_t seq_len,
                                          cpparity_attention_layer layer, int64_t block_size,
                                          cpparity_error *error) {
    if (batch < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "batch size must be >= 1, got %lld",
                                  (long long)batch);
    }
    if (seq_len < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "sequence length must be >= 1, got %lld", (long long)seq_len);
    }
    if (block_size < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "block size must be >= 1, got %lld",
                                  (long long)block_size);
    }
    if (layer.type == CPPARITY_LAYER_SLIDING && layer.window < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "sliding_window must be >= 1, got %lld", (long long)layer.window);
    }
    if (layer.type == CPPARITY_LAYER_CHUNKED && layer.chunk_size < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "attention_chunk_size must be >= 1, got %lld",
                                  (long long)layer.chunk_size);
    }
    if (layer.type != CPPARITY_LAYER_FULL && layer.type != CPPARITY_LAYER_SLIDING &&
        layer.type != CPPARITY_LAYER_CHUNKED) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "unknown layer type %d",
                                  (int)layer.type);
    }
    return CPPARITY_OK;
}

/* Chunk ids of one row: fdiv(t − origin, C) where origin is lp (row grid) or the start of t's
 * document (document grid), or fdiv(position_ids[t], C) (position grid). For the document and
 * position grids the id is renumbered so that it never decreases and equal ids mean "same
 * document and same chunk of it": inside a document positions rise by exactly 1 (a step of any
 * other size starts a new one), so fdiv(position, C) never decreases there either. */
static void fill_chunk_ids(int64_t *chunk, const int64_t *document, const int64_t *position,
                           int64_t seq_len, int64_t left_padding, cpparity_attention_layer layer) {
    if (layer.chunk_origin == CPPARITY_CHUNK_ORIGIN_ROW) {
        for (int64_t t = 0; t < seq_len; t++) {
            chunk[t] = floor_divide(t - left_padding, layer.chunk_size);
        }
        return;
    }
    int64_t document_start = 0;
    int64_t previous_in_document = 0;
    int64_t id = 0;
    for (int64_t t = 0; t < seq_len; t++) {
        if (t > 0 && document[t] != document[t - 1]) {
            document_start = t;
            id += 1;
        }
        int64_t in_document = layer.chunk_origin == CPPARITY_CHUNK_ORIGIN_POSITION
                                  ? floor_divide(position[t], layer.chunk_size)
                                  : floor_divide(t - document_start, layer.chunk_size);
        if (t > 0 && document_start != t && in_document != previous_in_document) {
            id += 1;
        }
        previous_in_document = in_document;
        chunk[t] = id;
    }
}

cpparity_status reference_mask_init(reference_mask *mask, int64_t batch, int64_t seq_len,
                                    const int8_t *attention_mask, const int64_t *position_ids,
                                    cpparity_attention_layer layer, int64_t block_size,
                                    cpparity_error *error) {
    memset(mask, 0, sizeof *mask);
    cpparity_status status = validate_arguments(batch, seq_len, layer, block_size, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t t = 0; t < seq_len; t++) {
            int8_t value = attention_mask[b * seq_len + t];
            if (value != 0 && value != 1) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "attention_mask[%lld][%lld] is %d; it must be 0 or 1",
                                          (long long)b, (long long)t, (int)value);
            }
        }
    }
    size_t tokens = (size_t)(batch * seq_len);
    mask->batch = batch;
    mask->seq_len = seq_len;
    mask->block_size = block_size;
    mask->layer = layer;
    mask->key_valid = malloc(tokens * sizeof *mask->key_valid);
    mask->valid_prefix = malloc((size_t)(batch * (seq_len + 1)) * sizeof *mask->valid_prefix);
    mask->document = malloc(tokens * sizeof *mask->document);
    mask->left_padding = malloc((size_t)batch * sizeof *mask->left_padding);
    if (layer.type == CPPARITY_LAYER_CHUNKED) {
        mask->chunk = malloc(tokens * sizeof *mask->chunk);
    }
    if (mask->key_valid == NULL || mask->valid_prefix == NULL || mask->document == NULL ||
        mask->left_padding == NULL || (layer.type == CPPARITY_LAYER_CHUNKED && !mask->chunk)) {
        reference_mask_free(mask);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory building the reference mask (B=%lld, S=%lld)",
                                  (long long)batch, (long long)seq_len);
    }
    memcpy(mask->key_valid, attention_mask, tokens * sizeof *mask->key_valid);
    for (int64_t b = 0; b < batch; b++) {
        const int8_t *valid = attention_mask + b * seq_len;
        const int64_t *position = position_ids + b * seq_len;
        int64_t *document = mask->document + b * seq_len;
        int64_t *prefix = mask->valid_prefix + b * (seq_len + 1);
        int64_t left_padding = 0;
        while (left_padding < seq_len && valid[left_padding] == 0) {
            left_padding++;
        }
        mask->left_padding[b] = left_padding;
        prefix[0] = 0;
        for (int64_t t = 0; t < seq_len; t++) {
            prefix[t + 1] = prefix[t] + valid[t];
            if (t == 0) {
                document[t] = 0;
            } else {
                document[t] = document[t - 1] + (position[t] - position[t - 1] != 1 ? 1 : 0);
            }
        }
        if (mask->chunk != NULL) {
            fill_chunk_ids(mask->chunk + b * seq_len, document, position, seq_len, left_padding,
                           layer);
        }
    }
    return CPPARITY_OK;
}

bool reference_mask_allowed(const reference_mask *mask, int64_t b, int64_t q, int64_t k) {
    const int64_t row = b * mask->seq_len;
    if (k > q || mask->key_valid[row + k] != 1) {
        return false;
    }
    if (mask->document[row + q] != mask->document[row + k]) {
        return false;
    }
    if (mask->layer.type == CPPARITY_LAYER_SLIDING && !(k > q - mask->layer.window)) {
        return false;
    }
    if (mask->layer.type == CPPARITY_LAYER_CHUNKED &&
        mask->chunk[row + q] != mask->chunk[row + k]) {
        return false;
    }
    return true;
}

void reference_mask_fill_block(const reference_mask *mask, int64_t b, int64_t q_begin,
                               int64_t q_end, int64_t k_begin, int64_t k_end, int64_t query_step,
                               int64_t key_step, uint8_t *allowed) {
    for (int64_t q = q_begin; q < q_end; q++) {
        uint8_t *row = allowed + (q - q_begin) * query_step;
        for (int64_t k = k_begin; k < k_end; k++) {
            row[(k - k_begin) * key_step] = (uint8_t)reference_mask_allowed(mask, b, q, k);
        }
    }
}

/* Classifies one term whose per-token id never decreases along the row: the pair passes when
 * the query's id equals the key's. */
static reference_block_class classify_equal_ids(const int64_t *id, int64_t q_begin, int64_t q_end,
                                                int64_t k_begin, int64_t k_end) {
    int64_t q_low = id[q_begin], q_high = id[q_end - 1];
    int64_t k_low = id[k_begin], k_high = id[k_end - 1];
    if (q_high < k_low || k_high < q_low) {
        return REFERENCE_BLOCK_NONE;
    }
    if (q_low == q_high && k_low == k_high && q_low == k_low) {
        return REFERENCE_BLOCK_ALL;
    }
    return REFERENCE_BLOCK_MIXED;
}

/* Combines the class of one more term into the block's class so far. */
static reference_block_class combine(reference_block_class so_far, reference_block_class term) {
    return term < so_far ? term : so_far;
}

reference_block_class reference_mask_classify_block(const reference_mask *mask, int64_t b,
                                                    int64_t q_begin, int64_t q_end, int64_t k_begin,
                                                    int64_t k_end) {
    const int64_t row = b * mask->seq_len;
    reference_block_class result = REFERENCE_BLOCK_ALL;

    /* causal: k <= q */
    if (k_begin > q_end - 1) {
        return REFERENCE_BLOCK_NONE;
    }
    result = combine(result, k_end - 1 <= q_begin ? REFERENCE_BLOCK_ALL : REFERENCE_BLOCK_MIXED);

    /* key padding */
    const int64_t *prefix = mask->valid_prefix + b * (mask->seq_len + 1);
    int64_t valid_keys = prefix[k_end] - prefix[k_begin];
    if (valid_keys == 0) {
        return REFERENCE_BLOCK_NONE;
    }
    result = combine(result,
                     valid_keys == k_end - k_begin ? REFERENCE_BLOCK_ALL : REFERENCE_BLOCK_MIXED);

    /* documents */
    reference_block_class term =
        classify_equal_ids(mask->document + row, q_begin, q_end, k_begin, k_end);
    if (term == REFERENCE_BLOCK_NONE) {
        return REFERENCE_BLOCK_NONE;
    }
    result = combine(result, term);

    /* sliding window: q − k < W over the block's range of q − k */
    if (mask->layer.type == CPPARITY_LAYER_SLIDING) {
        int64_t smallest_distance = q_begin - (k_end - 1);
        int64_t largest_distance = (q_end - 1) - k_begin;
        if (smallest_distance >= mask->layer.window) {
            return REFERENCE_BLOCK_NONE;
        }
        result = combine(result, largest_distance < mask->layer.window ? REFERENCE_BLOCK_ALL
                                                                       : REFERENCE_BLOCK_MIXED);
    }

    /* chunks */
    if (mask->layer.type == CPPARITY_LAYER_CHUNKED) {
        term = classify_equal_ids(mask->chunk + row, q_begin, q_end, k_begin, k_end);
        if (term == REFERENCE_BLOCK_NONE) {
            return REFERENCE_BLOCK_NONE;
        }
        result = combine(result, term);
    }
    return result;
}

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

void reference_block_list_free(reference_block_list *list) {
    if (list == NULL) {
        return;
    }
    free(list->offsets);
    free(list->key_block);
    free(list->block_class);
    memset(list, 0, sizeof *list);
}

cpparity_status reference_mask_block_list(const reference_mask *mask, int64_t b,
                                          reference_block_list *list, cpparity_error *error) {
    const int64_t size = mask->block_size;
    const int64_t blocks = (mask->seq_len + size - 1) / size;
    memset(list, 0, sizeof *list);
    list->query_blocks = blocks;
    list->offsets = malloc((size_t)(blocks + 1) * sizeof *list->offsets);
    if (list->offsets == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (block list)");
    }
    int64_t capacity = blocks;
    int64_t entries = 0;
    list->key_block = malloc((size_t)capacity * sizeof *list->key_block);
    list->block_class = malloc((size_t)capacity * sizeof *list->block_class);
    for (int64_t query_block = 0; query_block < blocks; query_block++) {
        int64_t q_begin = query_block * size, q_end = minimum(q_begin + size, mask->seq_len);
        list->offsets[query_block] = entries;
        /* causal: key blocks after the query block are empty */
        for (int64_t key_block = 0; key_block <= query_block; key_block++) {
            int64_t k_begin = key_block * size, k_end = minimum(k_begin + size, mask->seq_len);
            reference_block_class block_class =
                reference_mask_classify_block(mask, b, q_begin, q_end, k_begin, k_end);
            if (block_class == REFERENCE_BLOCK_NONE) {
                continue;
            }
            if (entries == capacity || list->key_block == NULL || list->block_class == NULL) {
                capacity = 2 * capacity + 16;
                int64_t *grown_keys =
                    realloc(list->key_block, (size_t)capacity * sizeof *list->key_block);
                if (grown_keys != NULL) {
                    list->key_block = grown_keys;
                }
                uint8_t *grown_classes =
                    realloc(list->block_class, (size_t)capacity * sizeof *list->block_class);
                if (grown_classes != NULL) {
                    list->block_class = grown_classes;
                }
                if (grown_keys == NULL || grown_classes == NULL) {
                    reference_block_list_free(list);
                    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                              "out of memory (block list)");
                }
            }
            list->key_block[entries] = key_block;
            list->block_class[entries] = (uint8_t)block_class;
            entries++;
        }
    }
    list->offsets[blocks] = entries;
    return CPPARITY_OK;
}

cpparity_status reference_mask_count(const reference_mask *mask, reference_mask_counts *counts,
                                     cpparity_error *error) {
    memset(counts, 0, sizeof *counts);
    const int64_t size = mask->block_size;
    for (int64_t b = 0; b < mask->batch; b++) {
        reference_block_list list;
        cpparity_status status = reference_mask_block_list(mask, b, &list, error);
        if (status != CPPARITY_OK) {
            return status;
        }
        int64_t nonempty = list.offsets[list.query_blocks];
        counts->blocks_none += list.query_blocks * list.query_blocks - nonempty;
        for (int64_t query_block = 0; query_block < list.query_blocks; query_block++) {
            int64_t q_begin = query_block * size, q_end = minimum(q_begin + size, mask->seq_len);
            for (int64_t e = list.offsets[query_block]; e < list.offsets[query_block + 1]; e++) {
                int64_t k_begin = list.key_block[e] * size;
                int64_t k_end = minimum(k_begin + size, mask->seq_len);
                int64_t area = (q_end - q_begin) * (k_end - k_begin);
                counts->pairs_visited += area;
                if (list.block_class[e] == REFERENCE_BLOCK_ALL) {
                    counts->blocks_all++;
                    counts->pairs_allowed += area;
                    continue;
                }
                counts->blocks_mixed++;
                counts->pairs_evaluated += area;
                for (int64_t q = q_begin; q < q_end; q++) {
                    for (int64_t k = k_begin; k < k_end; k++) {
                        counts->pairs_allowed += reference_mask_allowed(mask, b, q, k) ? 1 : 0;
                    }
                }
            }
        }
        reference_block_list_free(&list);
    }
    return CPPARITY_OK;
}
