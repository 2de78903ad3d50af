/* token_layout.c — the positions each rank holds, checked and recognised (see token_layout.h). */
#include "harness/judging/token_layout.h"

#include <stdbool.h>
#include <stdlib.h>

#include "common/names.h"

const char *const token_layout_kind_names[TOKEN_LAYOUT_KIND_COUNT] = {
    "contiguous",
    "zigzag",
    "round-robin",
    "permutation",
};

const char *token_layout_kind_name(token_layout_kind kind) {
    return cpparity_name_of(token_layout_kind_names, TOKEN_LAYOUT_KIND_COUNT, (int)kind);
}

/* The number of positions rank holds, or an error saying why the layout cannot be built. */
cpparity_status token_layout_count(const token_layout *layout, int64_t rank, int64_t *count,
                                   cpparity_error *error) {
    const int64_t Sp = layout->padded_len, cp = layout->cp;
    const char *name = token_layout_kind_name(layout->kind);
    if (cp < 1 || Sp < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s layout of %lld positions on %lld ranks: needs cp >= 1 and "
                                  "a length >= 0",
                                  name, (long long)Sp, (long long)cp);
    }
    if (rank < 0 || rank >= cp) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %lld is outside the %lld ranks of the %s layout",
                                  (long long)rank, (long long)cp, name);
    }
    int64_t divisor = 0;
    switch (layout->kind) {
    case TOKEN_LAYOUT_CONTIGUOUS:
        divisor = cp;
        break;
    case TOKEN_LAYOUT_ZIGZAG:
        divisor = 2 * cp;
        break;
    case TOKEN_LAYOUT_ROUND_ROBIN:
        if (layout->chunk_len < 1) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "round-robin layout: chunk length %lld, needs >= 1",
                                      (long long)layout->chunk_len);
        }
        divisor = layout->chunk_len;
        break;
    default:
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "a %s layout has no rule to fill positions with", name);
    }
    if (Sp % divisor != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s layout: padded length %lld is not a multiple of %lld", name,
                                  (long long)Sp, (long long)divisor);
    }
    if (layout->kind == TOKEN_LAYOUT_ROUND_ROBIN) {
        const int64_t chunks = Sp / divisor; /* rank r holds chunks r, r + cp, … below chunks */
        *count = rank < chunks ? (chunks - rank + cp - 1) / cp * divisor : 0;
    } else {
        *count = Sp / cp;
    }
    return CPPARITY_OK;
}

/* The position of rank's row under a layout token_layout_count accepted. */
static int64_t position_of(const token_layout *layout, int64_t rank, int64_t row) {
    const int64_t Sp = layout->padded_len, cp = layout->cp;
    switch (layout->kind) {
    case TOKEN_LAYOUT_ZIGZAG: {
        const int64_t chunk = Sp / (2 * cp);
        return row < chunk ? rank * chunk + row : (2 * cp - 1 - rank) * chunk + (row - chunk);
    }
    case TOKEN_LAYOUT_ROUND_ROBIN: {
        const int64_t chunk = layout->chunk_len;
        return (rank + row / chunk * cp) * chunk + row % chunk;
    }
    default:
        return rank * (Sp / cp) + row;
    }
}

cpparity_status token_layout_fill(const token_layout *layout, int64_t rank, int64_t *positions,
                                  cpparity_error *error) {
    int64_t count = 0;
    cpparity_status status = token_layout_count(layout, rank, &count, error);
    for (int64_t row = 0; status == CPPARITY_OK && row < count; row++) {
        positions[row] = position_of(layout, rank, row);
    }
    return status;
}

cpparity_status token_layout_check_partition(int64_t padded_len, int64_t cp,
                                             const int64_t *const *positions,
                                             const int64_t *lengths, cpparity_error *error) {
    /* holder[p]: −1, or the (rank, row) holding p packed as rank · rows + row */
    int64_t rows = 1, held = 0;
    for (int64_t r = 0; r < cp; r++) {
        rows = lengths[r] >= rows ? lengths[r] + 1 : rows;
        held += lengths[r];
    }
    int64_t *holder = malloc((size_t)(padded_len > 0 ? padded_len : 1) * sizeof *holder);
    if (holder == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (checking %lld positions)", (long long)padded_len);
    }
    for (int64_t p = 0; p < padded_len; p++) {
        holder[p] = -1;
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t r = 0; r < cp && status == CPPARITY_OK; r++) {
        for (int64_t t = 0; t < lengths[r] && status == CPPARITY_OK; t++) {
            const int64_t p = positions[r][t];
            if (p < 0 || p >= padded_len) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "rank %lld row %lld holds position %lld, outside "
                                            "[0, %lld)",
                                            (long long)r, (long long)t, (long long)p,
                                            (long long)padded_len);
            } else if (holder[p] >= 0) {
                status = cpparity_error_set(
                    error, CPPARITY_ERROR_INPUT,
                    "position %lld is held twice: by rank %lld row %lld and by rank %lld row %lld",
                    (long long)p, (long long)(holder[p] / rows), (long long)(holder[p] % rows),
                    (long long)r, (long long)t);
            } else {
                holder[p] = r * rows + t;
            }
        }
    }
    for (int64_t p = 0; p < padded_len && status == CPPARITY_OK; p++) {
        if (holder[p] < 0) {
            status = cpparity_error_set(
                error, CPPARITY_ERROR_INPUT,
                "position %lld is held by no rank (the ranks hold %lld of %lld positions)",
                (long long)p, (long long)held, (long long)padded_len);
        }
    }
    free(holder);
    return status;
}

/* Whether the ranks hold exactly the positions layout deals out, row by row. */
static bool follows(const token_layout *layout, const int64_t *const *positions,
                    const int64_t *lengths) {
    cpparity_error ignored;
    for (int64_t r = 0; r < layout->cp; r++) {
        int64_t count = 0;
        if (token_layout_count(layout, r, &count, &ignored) != CPPARITY_OK || count != lengths[r]) {
            return false;
        }
        for (int64_t t = 0; t < count; t++) {
            if (positions[r][t] != position_of(layout, r, t)) {
                return false;
            }
        }
    }
    return true;
}

token_layout_kind token_layout_recognise(int64_t padded_len, int64_t cp,
                                         const int64_t *const *positions, const int64_t *lengths,
                                         int64_t *chunk_len) {
    if (chunk_len != NULL) {
        *chunk_len = 0;
    }
    if (cp < 1) {
        return TOKEN_LAYOUT_PERMUTATION;
    }
    /* round-robin's chunk: rank 0's first run of consecutive positions from 0 */
    int64_t run = 0;
    while (run < lengths[0] && positions[0][run] == run) {
        run++;
    }
    const token_layout candidates[] = {
        {TOKEN_LAYOUT_CONTIGUOUS, padded_len, cp, 0},
        {TOKEN_LAYOUT_ZIGZAG, padded_len, cp, 0},
        {TOKEN_LAYOUT_ROUND_ROBIN, padded_len, cp, run},
    };
    for (int i = 0; i < CPPARITY_COUNT_OF(candidates); i++) {
        if (follows(&candidates[i], positions, lengths)) {
            if (chunk_len != NULL) {
                *chunk_len = candidates[i].chunk_len;
            }
            return candidates[i].kind;
        }
    }
    return TOKEN_LAYOUT_PERMUTATION;
}
