/*
 * mask_predicate.h — the per-thread mask logic of the implementation under test, for CPU and
 * CUDA alike (__host__ __device__): the allowed(b, q, k) predicate over a compact
 * cpparity_mask_description, and the classification of a tile of queries × keys.
 *
 * Written independently of reference/mask.c (shared definition, not shared code). Kept in a
 * header so the CPU unit tests cover exactly what the GPU kernels run.
 */
#ifndef CPPARITY_DISTRIBUTED_MASK_PREDICATE_H
#define CPPARITY_DISTRIBUTED_MASK_PREDICATE_H

#include <stdbool.h>
#include <stdint.h>

#include "distributed/device/device_inline.h"
#include "distributed/kernels/kernel.h"

enum { MASK_TILE_EMPTY = 0, MASK_TILE_PARTIAL = 1, MASK_TILE_FULL = 2 };

/* Floor division for a positive divisor (C's / truncates toward zero). */
static inline CPPARITY_HOST_DEVICE int64_t mask_floor_div(int64_t value, int64_t divisor) {
    const int64_t quotient = value / divisor;
    return (value % divisor != 0 && value < 0) ? quotient - 1 : quotient;
}

/* Chunk index of token t of row b (row grid shifted by left padding, document grid, or counted
 * in position_ids). Document and position grids restart with each document, so only the row
 * grid's index never decreases along a row; the document term tells chunks of two documents
 * apart. */
static inline CPPARITY_HOST_DEVICE int64_t mask_chunk_index(const cpparity_mask_description *mask,
                                                            int64_t b, int64_t t) {
    if (mask->chunk_origin == 2) {
        return mask_floor_div(mask->position[b * mask->seq_len + t], mask->chunk_size);
    }
    const int64_t origin = mask->chunk_origin == 1 ? mask->document_start[b * mask->seq_len + t]
                                                   : mask->left_padding[b];
    return mask_floor_div(t - origin, mask->chunk_size);
}

/* masks.md's predicate: may query q attend key k in row b? */
static inline CPPARITY_HOST_DEVICE bool mask_allowed(const cpparity_mask_description *mask,
                                                     int64_t b, int64_t q, int64_t k) {
    const int64_t row = b * mask->seq_len;
    if (k > q || !mask->key_valid[row + k] || mask->document[row + q] != mask->document[row + k]) {
        return false;
    }
    if (mask->layer_type == 1 && q - k >= mask->window) {
        return false;
    }
    if (mask->layer_type == 2 && mask_chunk_index(mask, b, q) != mask_chunk_index(mask, b, k)) {
        return false;
    }
    return true;
}

/* Classifies queries [q0, q1) × keys [k0, k1) of row b: EMPTY (skip), FULL (no predicate
 * needed) or PARTIAL (evaluate per pair). Cost O(k1 − k0) for the key-validity scan, which
 * scan_keys = false skips, taking every key as valid: that is the self-test's
 * "tile-classification" fault (common/fault.h), never what a kernel should call. */
static inline CPPARITY_HOST_DEVICE int
mask_classify_tile_scanning(const cpparity_mask_description *mask, int64_t b, int64_t q0,
                            int64_t q1, int64_t k0, int64_t k1, bool scan_keys) {
    const int64_t row = b * mask->seq_len;
    if (k0 >= q1) {
        return MASK_TILE_EMPTY; /* every key after every query */
    }
    /* documents never decrease: the tile spans documents [first, last] on each side */
    const int64_t q_first = mask->document[row + q0], q_last = mask->document[row + q1 - 1];
    const int64_t k_first = mask->document[row + k0], k_last = mask->document[row + k1 - 1];
    if (k_last < q_first || q_last < k_first) {
        return MASK_TILE_EMPTY;
    }
    if (mask->layer_type == 1 && q0 - (k1 - 1) >= mask->window) {
        return MASK_TILE_EMPTY; /* the closest pair is already outside the window */
    }
    if (mask->layer_type == 2) {
        const int64_t qc0 = mask_chunk_index(mask, b, q0), qc1 = mask_chunk_index(mask, b, q1 - 1);
        const int64_t kc0 = mask_chunk_index(mask, b, k0), kc1 = mask_chunk_index(mask, b, k1 - 1);
        if (mask->chunk_origin == 0 && (kc1 < qc0 || qc1 < kc0)) {
            return MASK_TILE_EMPTY;
        }
        if (!(qc0 == qc1 && kc0 == kc1 && qc0 == kc0)) {
            return MASK_TILE_PARTIAL;
        }
    }
    int64_t valid = scan_keys ? 0 : k1 - k0;
    for (int64_t k = k0; scan_keys && k < k1; k++) {
        valid += mask->key_valid[row + k];
    }
    if (valid == 0) {
        return MASK_TILE_EMPTY;
    }
    const bool causal_full = k1 - 1 <= q0;
    const bool one_document = q_first == q_last && k_first == k_last && q_first == k_first;
    const bool window_full = mask->layer_type != 1 || (q1 - 1) - k0 < mask->window;
    return (causal_full && one_document && window_full && valid == k1 - k0) ? MASK_TILE_FULL
                                                                            : MASK_TILE_PARTIAL;
}

/* mask_classify_tile_scanning with the key-validity scan: what every kernel calls. */
static inline CPPARITY_HOST_DEVICE int mask_classify_tile(const cpparity_mask_description *mask,
                                                          int64_t b, int64_t q0, int64_t q1,
                                                          int64_t k0, int64_t k1) {
    return mask_classify_tile_scanning(mask, b, q0, q1, k0, k1, true);
}

#endif
