/*
 * mixed_blocks.h — internal to reference/: the mixed blocks of a whole attention call, found
 * once. A (query tile, key tile) pair that the mask classifies as mixed needs its predicate
 * evaluated pair by pair, its live ranges and its bands (attention_tiles.h); none of that depends
 * on the head, so a call computing every tile of every head finds them once, key-major, before
 * its items run, and attention_block_find hands them out (tiles->mixed). What is found is exactly
 * what attention_block_find computes without it.
 */
#ifndef CPPARITY_REFERENCE_MIXED_BLOCKS_H
#define CPPARITY_REFERENCE_MIXED_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "reference/attention_tiles.h"

typedef struct mixed_block {
    int64_t key_tile;
    bool present;          /* false: classified mixed, yet no pair is allowed */
    attention_block block; /* key-major; allowed and the bands point into the pools */
} mixed_block;

typedef struct mixed_blocks {
    int64_t *first;      /* (B·count + 1): the blocks of flattened query tile f are */
    mixed_block *blocks; /* blocks[first[f] .. first[f + 1]), in increasing key tile */
    uint8_t *predicates; /* edge² per block */
    tile_band *bands;    /* 2·(edge / TILE_PRODUCT_ROWS + 1) per block */
    const attention_tiles *tiles;
} mixed_blocks;

/* Finds every mixed block of every batch row's query tiles and the key tiles up to each (causal),
 * on the reference's threads, unless there are more than ATTENTION_MIXED_PER_TILE per query tile
 * on average: *found is then false and mixed empty (the blocks are found pair by pair).
 * CPPARITY_ERROR_RUNTIME when out of memory. */
cpparity_status mixed_blocks_find(mixed_blocks *mixed, const attention_tiles *tiles, bool *found,
                                  cpparity_error *error);

/* The most bytes mixed_blocks_find holds for B batch rows of `tiles` tiles of `edge` tokens. */
int64_t mixed_blocks_most_bytes(int64_t batch, int64_t tiles, int64_t edge);

/* The mixed block (b, query_tile, key_tile), or NULL when mixed does not hold it. */
const mixed_block *mixed_blocks_lookup(const mixed_blocks *mixed, int64_t b, int64_t query_tile,
                                       int64_t key_tile);

/* Releases what mixed_blocks_find allocated; safe on a zeroed struct. */
void mixed_blocks_free(mixed_blocks *mixed);

#endif
