/* mixed_blocks.c — the mixed blocks of a whole attention call, found once (see mixed_blocks.h). */
#include "mixed_blocks.h"

#include <stdlib.h>
#include <string.h>

#include "parallel.h"

static int64_t band_count(const attention_tiles *tiles) {
    return tiles->edge / TILE_PRODUCT_ROWS + 1;
}

/* The mixed key tiles of flattened query tile f, in increasing order, through visit (NULL: only
 * counted). */
static int64_t mixed_key_tiles(const attention_tiles *tiles, int64_t f, int64_t *visit) {
    int64_t b = 0, query_tile = 0, q_begin = 0, q_end = 0, count = 0;
    attention_tile_of(tiles, f, &b, &query_tile);
    attention_tile_tokens(tiles, query_tile, &q_begin, &q_end);
    for (int64_t key_tile = 0; key_tile <= query_tile; key_tile++) {
        int64_t k_begin = 0, k_end = 0;
        attention_tile_tokens(tiles, key_tile, &k_begin, &k_end);
        if (reference_mask_classify_block(tiles->mask, b, q_begin, q_end, k_begin, k_end) ==
            REFERENCE_BLOCK_MIXED) {
            if (visit != NULL) {
                visit[count] = key_tile;
            }
            count++;
        }
    }
    return count;
}

/* Item f: the blocks of flattened query tile f. */
static void find_item(void *context, int64_t f, void *memory) {
    mixed_blocks *mixed = context;
    const attention_tiles *tiles = mixed->tiles;
    int64_t *key_tiles = memory; /* (count) */
    const int64_t found = mixed_key_tiles(tiles, f, key_tiles);
    int64_t b = 0, query_tile = 0;
    attention_tile_of(tiles, f, &b, &query_tile);
    const int64_t edge = tiles->edge, bands = band_count(tiles);
    for (int64_t i = 0; i < found; i++) {
        const int64_t index = mixed->first[f] + i;
        mixed_block *entry = &mixed->blocks[index];
        tile_band *key_bands = mixed->bands + 2 * bands * index;
        entry->key_tile = key_tiles[i];
        entry->present =
            attention_block_find(tiles, b, query_tile, key_tiles[i], ATTENTION_KEY_MAJOR,
                                 mixed->predicates + edge * edge * index, &entry->block);
        if (entry->present) {
            attention_block_bands_into(&entry->block, key_bands, key_bands + bands);
            entry->block.key_bands = key_bands;
            entry->block.query_bands = key_bands + bands;
        }
    }
}

static size_t bytes_per_block(int64_t edge) {
    return sizeof(mixed_block) + (size_t)(edge * edge) +
           2 * (size_t)(edge / TILE_PRODUCT_ROWS + 1) * sizeof(tile_band);
}

int64_t mixed_blocks_most_bytes(int64_t batch, int64_t tiles, int64_t edge) {
    return (batch * tiles + 1) * (int64_t)sizeof(int64_t) +
           ATTENTION_MIXED_PER_TILE * batch * tiles * (int64_t)bytes_per_block(edge);
}

cpparity_status mixed_blocks_find(mixed_blocks *mixed, const attention_tiles *tiles, bool *found,
                                  cpparity_error *error) {
    memset(mixed, 0, sizeof *mixed);
    *found = false;
    const int64_t flat = tiles->shape.batch * tiles->count, edge = tiles->edge;
    mixed->first = malloc((size_t)(flat + 1) * sizeof *mixed->first);
    if (mixed->first == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the reference attention's mixed blocks)");
    }
    mixed->first[0] = 0;
    for (int64_t f = 0; f < flat; f++) {
        mixed->first[f + 1] = mixed->first[f] + mixed_key_tiles(tiles, f, NULL);
    }
    const size_t blocks = (size_t)mixed->first[flat];
    if (blocks > (size_t)(ATTENTION_MIXED_PER_TILE * flat)) {
        mixed_blocks_free(mixed);
        return CPPARITY_OK; /* found pair by pair instead */
    }
    mixed->blocks = malloc((blocks > 0 ? blocks : 1) * sizeof *mixed->blocks);
    mixed->predicates = malloc(blocks > 0 ? blocks * (size_t)(edge * edge) : 1);
    mixed->bands =
        malloc((blocks > 0 ? blocks : 1) * 2 * (size_t)band_count(tiles) * sizeof *mixed->bands);
    mixed->tiles = tiles;
    if (mixed->blocks == NULL || mixed->predicates == NULL || mixed->bands == NULL) {
        mixed_blocks_free(mixed);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the reference attention's mixed blocks: %zu)",
                                  blocks);
    }
    const reference_parallel_work work = {
        .items = flat,
        .scratch_bytes = (size_t)tiles->count * sizeof(int64_t),
        .run_item = find_item,
        .context = mixed,
    };
    cpparity_status status = reference_parallel_run(&work, "the reference attention", error);
    if (status != CPPARITY_OK) {
        mixed_blocks_free(mixed);
        return status;
    }
    *found = true;
    return CPPARITY_OK;
}

const mixed_block *mixed_blocks_lookup(const mixed_blocks *mixed, int64_t b, int64_t query_tile,
                                       int64_t key_tile) {
    const int64_t f = b * mixed->tiles->count + query_tile;
    for (int64_t i = mixed->first[f]; i < mixed->first[f + 1]; i++) {
        if (mixed->blocks[i].key_tile == key_tile) {
            return &mixed->blocks[i];
        }
    }
    return NULL;
}

void mixed_blocks_free(mixed_blocks *mixed) {
    free(mixed->first);
    free(mixed->blocks);
    free(mixed->predicates);
    free(mixed->bands);
    memset(mixed, 0, sizeof *mixed);
}
