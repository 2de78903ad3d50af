/*
 * token_layout.h — which global token positions each rank of a CP group holds. A layout cuts the
 * padded sequence, positions 0 … Sp − 1 (docs/masks.md, automatic padding), among cp ranks, the
 * same for every batch row:
 *   - contiguous:  Sp / cp consecutive positions per rank, rank r holds [r·L, (r + 1)·L);
 *   - zigzag:      2·cp chunks of Sp / (2·cp); rank r holds chunk r, then chunk 2·cp − 1 − r;
 *   - round-robin: chunks of chunk_len positions; chunk c goes to rank c mod cp, and each rank
 *                  holds its chunks in increasing order (ranks may hold different counts);
 *   - permutation: any other partition (only recognised, never filled).
 * A rank's positions are listed in the order of its rows (its logits rows, judge_item.h).
 * judge_item and `cpparity judge` check a partition given from outside with
 * token_layout_check_partition before using it.
 */
#ifndef CPPARITY_HARNESS_JUDGING_TOKEN_LAYOUT_H
#define CPPARITY_HARNESS_JUDGING_TOKEN_LAYOUT_H

#include <stdint.h>

#include "common/error.h"

typedef enum token_layout_kind {
    TOKEN_LAYOUT_CONTIGUOUS = 0,  /* "contiguous" */
    TOKEN_LAYOUT_ZIGZAG = 1,      /* "zigzag" */
    TOKEN_LAYOUT_ROUND_ROBIN = 2, /* "round-robin" */
    TOKEN_LAYOUT_PERMUTATION = 3, /* "permutation": any other partition */
} token_layout_kind;

#define TOKEN_LAYOUT_KIND_COUNT 4
/* "contiguous", "zigzag", "round-robin", "permutation", indexed by token_layout_kind. */
extern const char *const token_layout_kind_names[TOKEN_LAYOUT_KIND_COUNT];
const char *token_layout_kind_name(token_layout_kind kind);

/* A layout that can be filled (any kind but TOKEN_LAYOUT_PERMUTATION). */
typedef struct token_layout {
    token_layout_kind kind; /* how positions are dealt out */
    int64_t padded_len;     /* Sp: positions 0 … Sp − 1 */
    int64_t cp;             /* ranks of the group, >= 1 */
    int64_t chunk_len;      /* round-robin only: positions per chunk, >= 1, dividing Sp */
} token_layout;

/* How many positions rank holds under layout, into *count. CPPARITY_ERROR_INPUT, saying why,
 * when the layout cannot be built (contiguous: Sp not a multiple of cp; zigzag: of 2·cp;
 * round-robin: of chunk_len; a permutation; cp < 1; rank outside [0, cp)). */
cpparity_status token_layout_count(const token_layout *layout, int64_t rank, int64_t *count,
                                   cpparity_error *error);

/* Writes rank's positions, in the order of its rows, into positions (token_layout_count
 * entries, caller-owned). Errors as token_layout_count; positions is untouched on error. */
cpparity_status token_layout_fill(const token_layout *layout, int64_t rank, int64_t *positions,
                                  cpparity_error *error);

/* Checks that the ranks' positions (positions[r]: lengths[r] entries; NULL allowed when
 * lengths[r] is 0) partition [0, padded_len) exactly. CPPARITY_ERROR_INPUT at the first problem,
 * rank by rank and row by row, with a message naming it:
 *   "rank 1 row 3 holds position 9, outside [0, 8)",
 *   "position 5 is held twice: by rank 0 row 2 and by rank 1 row 0",
 *   "position 6 is held by no rank (the ranks hold 7 of 8 positions)";
 * CPPARITY_ERROR_RUNTIME when out of memory (it takes one int64 per position). */
cpparity_status token_layout_check_partition(int64_t padded_len, int64_t cp,
                                             const int64_t *const *positions,
                                             const int64_t *lengths, cpparity_error *error);

/* The kind of layout the ranks' positions follow: contiguous, then zigzag, then round-robin
 * (with the chunk length rank 0's first run suggests) are tried in that order, so cp = 1 is
 * always "contiguous"; anything else, a non-partition included, is TOKEN_LAYOUT_PERMUTATION.
 * When chunk_len is not NULL it receives the round-robin chunk length (0 for other kinds). */
token_layout_kind token_layout_recognise(int64_t padded_len, int64_t cp,
                                         const int64_t *const *positions, const int64_t *lengths,
                                         int64_t *chunk_len);

#endif
