/*
 * test_token_layout.c — which positions each rank holds (harness/judging/token_layout.h):
 * contiguous, zigzag and round-robin filled at cp 1, 2, 3 and 4, even and odd padded lengths,
 * pinned against hand-written positions, each a partition of the sequence and recognised as its
 * own kind (cp 1 as contiguous); layouts that cannot be built refused with why; partitions with
 * a position out of range, held twice or held by no rank refused naming it; and anything else
 * recognised as a permutation.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "harness/judging/token_layout.h"

#define MAX_RANKS 4
#define MAX_ROWS 16

/* A layout filled for every rank. */
typedef struct filled {
    int64_t storage[MAX_RANKS][MAX_ROWS];
    const int64_t *positions[MAX_RANKS];
    int64_t lengths[MAX_RANKS];
} filled;

static void fill_all(filled *f, const token_layout *layout) {
    memset(f, 0, sizeof *f);
    cr_assert(layout->cp <= MAX_RANKS);
    for (int64_t r = 0; r < layout->cp; r++) {
        cpparity_error error;
        cr_assert_eq(token_layout_count(layout, r, &f->lengths[r], &error), CPPARITY_OK, "%s",
                     error.message);
        cr_assert(f->lengths[r] <= MAX_ROWS);
        cr_assert_eq(token_layout_fill(layout, r, f->storage[r], &error), CPPARITY_OK, "%s",
                     error.message);
        f->positions[r] = f->storage[r];
    }
}

/* From hand-written positions: ranks' rows listed with −1 ending each rank. */
static void from_list(filled *f, int64_t cp, const int64_t *list) {
    memset(f, 0, sizeof *f);
    for (int64_t r = 0; r < cp; r++) {
        while (*list >= 0 || *list < -1) {
            f->storage[r][f->lengths[r]++] = *list++;
        }
        list++;
        f->positions[r] = f->storage[r];
    }
}

typedef struct layout_case {
    token_layout layout;
    const int64_t expected[MAX_RANKS * (MAX_ROWS + 1)]; /* each rank's positions, −1 after each */
    token_layout_kind recognised;                       /* cp 1: contiguous, whatever it was */
    int64_t recognised_chunk;                           /* round-robin's chunk, else 0 */
} layout_case;

static const layout_case cases[] = {
    {{TOKEN_LAYOUT_CONTIGUOUS, 7, 1, 0}, {0, 1, 2, 3, 4, 5, 6, -1}, TOKEN_LAYOUT_CONTIGUOUS, 0},
    {{TOKEN_LAYOUT_CONTIGUOUS, 8, 2, 0},
     {0, 1, 2, 3, -1, 4, 5, 6, 7, -1},
     TOKEN_LAYOUT_CONTIGUOUS,
     0},
    {{TOKEN_LAYOUT_CONTIGUOUS, 12, 4, 0},
     {0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1},
     TOKEN_LAYOUT_CONTIGUOUS,
     0},
    {{TOKEN_LAYOUT_ZIGZAG, 6, 1, 0}, {0, 1, 2, 3, 4, 5, -1}, TOKEN_LAYOUT_CONTIGUOUS, 0},
    {{TOKEN_LAYOUT_ZIGZAG, 8, 2, 0}, {0, 1, 6, 7, -1, 2, 3, 4, 5, -1}, TOKEN_LAYOUT_ZIGZAG, 0},
    {{TOKEN_LAYOUT_ZIGZAG, 4, 2, 0}, {0, 3, -1, 1, 2, -1}, TOKEN_LAYOUT_ZIGZAG, 0},
    {{TOKEN_LAYOUT_ZIGZAG, 8, 4, 0},
     {0, 7, -1, 1, 6, -1, 2, 5, -1, 3, 4, -1},
     TOKEN_LAYOUT_ZIGZAG,
     0},
    {{TOKEN_LAYOUT_ZIGZAG, 16, 4, 0},
     {0, 1, 14, 15, -1, 2, 3, 12, 13, -1, 4, 5, 10, 11, -1, 6, 7, 8, 9, -1},
     TOKEN_LAYOUT_ZIGZAG,
     0},
    {{TOKEN_LAYOUT_ROUND_ROBIN, 7, 1, 1}, {0, 1, 2, 3, 4, 5, 6, -1}, TOKEN_LAYOUT_CONTIGUOUS, 0},
    {{TOKEN_LAYOUT_ROUND_ROBIN, 7, 2, 1},
     {0, 2, 4, 6, -1, 1, 3, 5, -1},
     TOKEN_LAYOUT_ROUND_ROBIN,
     1},
    {{TOKEN_LAYOUT_ROUND_ROBIN, 9, 4, 1},
     {0, 4, 8, -1, 1, 5, -1, 2, 6, -1, 3, 7, -1},
     TOKEN_LAYOUT_ROUND_ROBIN,
     1},
    {{TOKEN_LAYOUT_ROUND_ROBIN, 12, 2, 3},
     {0, 1, 2, 6, 7, 8, -1, 3, 4, 5, 9, 10, 11, -1},
     TOKEN_LAYOUT_ROUND_ROBIN,
     3},
    {{TOKEN_LAYOUT_ROUND_ROBIN, 8, 3, 2},
     {0, 1, 6, 7, -1, 2, 3, -1, 4, 5, -1},
     TOKEN_LAYOUT_ROUND_ROBIN,
     2},
    /* one chunk per rank is the contiguous layout */
    {{TOKEN_LAYOUT_ROUND_ROBIN, 8, 2, 4},
     {0, 1, 2, 3, -1, 4, 5, 6, 7, -1},
     TOKEN_LAYOUT_CONTIGUOUS,
     0},
    /* fewer chunks than ranks: the last rank holds nothing */
    {{TOKEN_LAYOUT_ROUND_ROBIN, 6, 4, 2},
     {0, 1, -1, 2, 3, -1, 4, 5, -1, -1},
     TOKEN_LAYOUT_ROUND_ROBIN,
     2},
};

Test(token_layout, every_layout__filled_as_pinned_a_partition_and_recognised) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const layout_case *c = &cases[i];
        const char *name = token_layout_kind_name(c->layout.kind);
        filled got, expected;
        fill_all(&got, &c->layout);
        from_list(&expected, c->layout.cp, c->expected);
        for (int64_t r = 0; r < c->layout.cp; r++) {
            cr_assert_eq(got.lengths[r], expected.lengths[r], "%s Sp %lld cp %lld rank %lld", name,
                         (long long)c->layout.padded_len, (long long)c->layout.cp, (long long)r);
            for (int64_t t = 0; t < got.lengths[r]; t++) {
                cr_assert_eq(got.positions[r][t], expected.positions[r][t],
                             "%s Sp %lld cp %lld rank %lld row %lld", name,
                             (long long)c->layout.padded_len, (long long)c->layout.cp, (long long)r,
                             (long long)t);
            }
        }
        cpparity_error error;
        cr_assert_eq(token_layout_check_partition(c->layout.padded_len, c->layout.cp, got.positions,
                                                  got.lengths, &error),
                     CPPARITY_OK, "%s cp %lld: %s", name, (long long)c->layout.cp, error.message);
        int64_t chunk = -1;
        const token_layout_kind kind = token_layout_recognise(c->layout.padded_len, c->layout.cp,
                                                              got.positions, got.lengths, &chunk);
        cr_assert_eq(kind, c->recognised, "%s Sp %lld cp %lld recognised as %s", name,
                     (long long)c->layout.padded_len, (long long)c->layout.cp,
                     token_layout_kind_name(kind));
        cr_assert_eq(chunk, c->recognised_chunk, "%s cp %lld: chunk %lld", name,
                     (long long)c->layout.cp, (long long)chunk);
    }
}

Test(token_layout, names__one_per_kind) {
    cr_assert_str_eq(token_layout_kind_name(TOKEN_LAYOUT_CONTIGUOUS), "contiguous");
    cr_assert_str_eq(token_layout_kind_name(TOKEN_LAYOUT_ZIGZAG), "zigzag");
    cr_assert_str_eq(token_layout_kind_name(TOKEN_LAYOUT_ROUND_ROBIN), "round-robin");
    cr_assert_str_eq(token_layout_kind_name(TOKEN_LAYOUT_PERMUTATION), "permutation");
}

static void expect_refused(const token_layout *layout, int64_t rank, const char *message) {
    cpparity_error error;
    int64_t count = 0, positions[MAX_ROWS] = {-7};
    cr_assert_eq(token_layout_count(layout, rank, &count, &error), CPPARITY_ERROR_INPUT);
    cr_assert_str_eq(error.message, message);
    cr_assert_eq(token_layout_fill(layout, rank, positions, &error), CPPARITY_ERROR_INPUT);
    cr_assert_str_eq(error.message, message);
    cr_assert_eq(positions[0], -7, "positions written on error");
}

Test(token_layout, unbuildable_layouts__refused_saying_why) {
    const struct {
        token_layout layout;
        int64_t rank;
        const char *message;
    } refused[] = {
        {{TOKEN_LAYOUT_CONTIGUOUS, 7, 2, 0},
         0,
         "contiguous layout: padded length 7 is not a multiple of 2"},
        {{TOKEN_LAYOUT_ZIGZAG, 7, 1, 0},
         0,
         "zigzag layout: padded length 7 is not a multiple of 2"},
        {{TOKEN_LAYOUT_ZIGZAG, 6, 2, 0},
         1,
         "zigzag layout: padded length 6 is not a multiple of 4"},
        {{TOKEN_LAYOUT_ROUND_ROBIN, 7, 2, 2},
         0,
         "round-robin layout: padded length 7 is not a multiple of 2"},
        {{TOKEN_LAYOUT_ROUND_ROBIN, 8, 2, 0}, 0, "round-robin layout: chunk length 0, needs >= 1"},
        {{TOKEN_LAYOUT_PERMUTATION, 8, 2, 0},
         0,
         "a permutation layout has no rule to fill positions with"},
        {{TOKEN_LAYOUT_CONTIGUOUS, 8, 2, 0},
         2,
         "rank 2 is outside the 2 ranks of the contiguous layout"},
        {{TOKEN_LAYOUT_CONTIGUOUS, 8, 0, 0},
         0,
         "contiguous layout of 8 positions on 0 ranks: needs cp >= 1 and a length >= 0"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        expect_refused(&refused[i].layout, refused[i].rank, refused[i].message);
    }
}

static void expect_not_partition(int64_t padded_len, int64_t cp, const int64_t *list,
                                 const char *message) {
    filled f;
    from_list(&f, cp, list);
    cpparity_error error;
    cr_assert_eq(token_layout_check_partition(padded_len, cp, f.positions, f.lengths, &error),
                 CPPARITY_ERROR_INPUT, "accepted, expected: %s", message);
    cr_assert_str_eq(error.message, message);
    cr_assert_eq(token_layout_recognise(padded_len, cp, f.positions, f.lengths, NULL),
                 TOKEN_LAYOUT_PERMUTATION);
}

Test(token_layout, not_a_partition__refused_naming_rank_row_and_position) {
    /* out of range, above and below */
    expect_not_partition(8, 2, (const int64_t[]){0, 1, 6, 7, -1, 2, 3, 8, 5, -1},
                         "rank 1 row 2 holds position 8, outside [0, 8)");
    expect_not_partition(4, 2, (const int64_t[]){0, 3, -1, -2, 2, -1},
                         "rank 1 row 0 holds position -2, outside [0, 4)");
    /* overlap: within a rank and across ranks */
    expect_not_partition(4, 2, (const int64_t[]){0, 0, -1, 1, 2, -1},
                         "position 0 is held twice: by rank 0 row 0 and by rank 0 row 1");
    expect_not_partition(8, 4, (const int64_t[]){0, 7, -1, 1, 6, -1, 2, 5, -1, 3, 6, -1},
                         "position 6 is held twice: by rank 1 row 1 and by rank 3 row 1");
    /* a hole: the first position no rank holds */
    expect_not_partition(7, 2, (const int64_t[]){0, 2, 4, 6, -1, 1, 5, -1},
                         "position 3 is held by no rank (the ranks hold 6 of 7 positions)");
    expect_not_partition(4, 2, (const int64_t[]){-1, -1},
                         "position 0 is held by no rank (the ranks hold 0 of 4 positions)");
}

Test(token_layout, other_partitions__recognised_as_permutation) {
    const struct {
        int64_t padded_len, cp;
        int64_t list[MAX_RANKS * (MAX_ROWS + 1)];
    } others[] = {
        {4, 2, {1, 0, -1, 2, 3, -1}},             /* contiguous, rank 0's rows reversed */
        {4, 2, {3, 0, -1, 1, 2, -1}},             /* zigzag, rank 0's rows reversed */
        {8, 2, {0, 1, 2, -1, 3, 4, 5, 6, 7, -1}}, /* contiguous but unequal */
        {6, 2, {0, 2, 4, -1, 5, 3, 1, -1}},       /* round-robin, rank 1 backwards */
        {6, 2, {0, 1, 4, -1, 2, 3, 5, -1}},       /* chunks of 2 then 1 */
        {6, 3, {1, 4, -1, 0, 3, -1, 2, 5, -1}},   /* round-robin with ranks 0 and 1 swapped */
    };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        filled f;
        from_list(&f, others[i].cp, others[i].list);
        cpparity_error error;
        cr_assert_eq(token_layout_check_partition(others[i].padded_len, others[i].cp, f.positions,
                                                  f.lengths, &error),
                     CPPARITY_OK, "case %zu: %s", i, error.message);
        int64_t chunk = -1;
        cr_assert_eq(token_layout_recognise(others[i].padded_len, others[i].cp, f.positions,
                                            f.lengths, &chunk),
                     TOKEN_LAYOUT_PERMUTATION, "case %zu", i);
        cr_assert_eq(chunk, 0);
    }
}
