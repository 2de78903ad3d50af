/*
 * block_rows.h — the rows of a kernel call as global tokens, for the CPU and CUDA kernels alike
 * (__host__ __device__): a block call of kernel ABI 3 names each query row and key row by its
 * token (any order); a whole-sequence call is the identity (both index arrays NULL).
 *
 * A tile of rows — query rows [i0, i1) against key rows [j0, j1) — is one of three shapes:
 * CONSECUTIVE when both sides run over consecutive tokens (every tile of a whole-sequence call,
 * most tiles of a block call): mask_classify_tile then decides it on the token ranges, which
 * block_rows_shape returns; KEYS_AFTER when every key comes after every query, which no mask
 * allows (each layer type is causal): EMPTY; SCATTERED otherwise: PARTIAL, the predicate decides
 * each pair.
 */
#ifndef CPPARITY_DISTRIBUTED_BLOCK_ROWS_H
#define CPPARITY_DISTRIBUTED_BLOCK_ROWS_H

#include <stdint.h>

#include "distributed/device/device_inline.h"
#include "distributed/kernels/kernel.h"
#include "distributed/kernels/mask_predicate.h"

/* The rows of a call's query-shaped tensors (q, out, dout, dq; lse) and key-shaped ones (k, v,
 * dk, dv): S for a whole-sequence call (block NULL), the block's Sq and Sk for a block call. */
static inline int64_t block_query_rows(const cpparity_attention_dims *dims,
                                       const cpparity_attention_block *block) {
    return block != NULL ? block->query_len : dims->seq_len;
}

static inline int64_t block_key_rows(const cpparity_attention_dims *dims,
                                     const cpparity_attention_block *block) {
    return block != NULL ? block->key_len : dims->seq_len;
}

/* The token of row `row` under index (NULL: the identity). */
static inline CPPARITY_HOST_DEVICE int64_t block_token(const int64_t *index, int64_t row) {
    return index != NULL ? index[row] : row;
}

enum { BLOCK_ROWS_CONSECUTIVE, BLOCK_ROWS_KEYS_AFTER, BLOCK_ROWS_SCATTERED };

/* The shape of query rows [i0, i1) × key rows [j0, j1) (both non-empty); for CONSECUTIVE, the
 * first query token and first key token in *q0 and *k0 (the tokens run to q0 + (i1 − i0) and
 * k0 + (j1 − j0)). */
static inline CPPARITY_HOST_DEVICE int block_rows_shape(const int64_t *query_index,
                                                        const int64_t *key_index, int64_t i0,
                                                        int64_t i1, int64_t j0, int64_t j1,
                                                        int64_t *q0, int64_t *k0) {
    *q0 = block_token(query_index, i0);
    *k0 = block_token(key_index, j0);
    if (query_index == NULL && key_index == NULL) {
        return BLOCK_ROWS_CONSECUTIVE;
    }
    int consecutive = 1;
    int64_t query_last = *q0, key_first = *k0;
    for (int64_t i = i0 + 1; i < i1; i++) {
        const int64_t token = block_token(query_index, i);
        consecutive = consecutive && token == block_token(query_index, i - 1) + 1;
        query_last = token > query_last ? token : query_last;
    }
    for (int64_t j = j0 + 1; j < j1; j++) {
        const int64_t token = block_token(key_index, j);
        consecutive = consecutive && token == block_token(key_index, j - 1) + 1;
        key_first = token < key_first ? token : key_first;
    }
    return consecutive              ? BLOCK_ROWS_CONSECUTIVE
           : key_first > query_last ? BLOCK_ROWS_KEYS_AFTER
                                    : BLOCK_ROWS_SCATTERED;
}

/* The class of query rows [i0, i1) × key rows [j0, j1) of batch row b (both non-empty) as a
 * kernel uses it: mask_classify_tile's on the token ranges when CONSECUTIVE, EMPTY when every key
 * comes after every query, PARTIAL otherwise. (kernel_cpu.c composes the same shapes with its
 * self-test faults.) */
static inline CPPARITY_HOST_DEVICE int block_classify_rows(const cpparity_mask_description *mask,
                                                           const int64_t *query_index,
                                                           const int64_t *key_index, int64_t b,
                                                           int64_t i0, int64_t i1, int64_t j0,
                                                           int64_t j1) {
    int64_t q0 = 0, k0 = 0;
    const int shape = block_rows_shape(query_index, key_index, i0, i1, j0, j1, &q0, &k0);
    return shape == BLOCK_ROWS_CONSECUTIVE
               ? mask_classify_tile(mask, b, q0, q0 + (i1 - i0), k0, k0 + (j1 - j0))
           : shape == BLOCK_ROWS_KEYS_AFTER ? MASK_TILE_EMPTY
                                            : MASK_TILE_PARTIAL;
}

/* The key rows a query tile ending at row i1 scans: up to i1 in a whole-sequence call (later
 * keys all come after its queries), every key row of a block call. */
static inline CPPARITY_HOST_DEVICE int64_t block_key_rows_scanned(const int64_t *query_index,
                                                                  const int64_t *key_index,
                                                                  int64_t key_len, int64_t i1) {
    return query_index == NULL && key_index == NULL && i1 < key_len ? i1 : key_len;
}

/* The first query row a key tile starting at row j0 needs: the tile of query rows holding j0 in
 * a whole-sequence call (earlier queries come before every key), row 0 of a block call. */
static inline CPPARITY_HOST_DEVICE int64_t block_first_query_row(const int64_t *query_index,
                                                                 const int64_t *key_index,
                                                                 int64_t j0, int64_t tile) {
    return query_index == NULL && key_index == NULL ? j0 / tile * tile : 0;
}

#endif
