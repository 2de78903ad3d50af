/*
 * test_ulysses.c — the all-to-alls around attention move every value exactly where the Ulysses
 * layout says, on N ranks of the local communicator (threads).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/comm/comm_local.h"
#include "distributed/cp/ulysses.h"

typedef struct layout_test {
    int64_t batch, local_len, heads, head_dim;
    int failures; /* counted across ranks (written under each rank's own slot) */
    int rank_failures[8];
} layout_test;

/* The value a token holds for (b, global position, head, d): exactly representable in float. */
static float encode(int64_t b, int64_t position, int64_t head, int64_t d) {
    return (float)(((b * 64 + position) * 32 + head) * 16 + d);
}

static cpparity_status check_layout(cpparity_comm *comm, void *argument, cpparity_error *error) {
    layout_test *test = argument;
    const int64_t B = test->batch, L = test->local_len, H = test->heads, Dh = test->head_dim;
    const int64_t cp = comm->size, S = L * cp, Hl = H / cp;
    float *tokens = calloc((size_t)(B * L * H * Dh), sizeof(float));
    float *sequence = malloc((size_t)(B * S * Hl * Dh) * sizeof(float));
    float *back = malloc((size_t)(B * L * H * Dh) * sizeof(float));
    float *scratch = malloc((size_t)(2 * B * L * H * Dh) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < L; t++) {
            for (int64_t h = 0; h < H; h++) {
                for (int64_t d = 0; d < Dh; d++) {
                    tokens[((b * L + t) * H + h) * Dh + d] = encode(b, comm->rank * L + t, h, d);
                }
            }
        }
    }
    cpparity_status status =
        ulysses_heads_to_sequence(comm, sequence, tokens, B, L, H, Dh, scratch, error);
    int failures = 0;
    /* rank r holds heads [r·Hl, (r+1)·Hl) of every position */
    for (int64_t b = 0; status == CPPARITY_OK && b < B; b++) {
        for (int64_t p = 0; p < S; p++) {
            for (int64_t h = 0; h < Hl; h++) {
                for (int64_t d = 0; d < Dh; d++) {
                    failures += sequence[((b * S + p) * Hl + h) * Dh + d] !=
                                encode(b, p, comm->rank * Hl + h, d);
                }
            }
        }
    }
    if (status == CPPARITY_OK) {
        status = ulysses_sequence_to_heads(comm, back, sequence, B, L, H, Dh, scratch, error);
    }
    if (status == CPPARITY_OK &&
        memcmp(back, tokens, (size_t)(B * L * H * Dh) * sizeof(float)) != 0) {
        failures += 1000; /* the round trip is not the identity */
    }
    test->rank_failures[comm->rank] = failures;
    free(tokens);
    free(sequence);
    free(back);
    free(scratch);
    return status;
}

static void expect_layout(int ranks, int64_t batch, int64_t local_len, int64_t heads,
                          int64_t head_dim) {
    layout_test test = {batch, local_len, heads, head_dim, 0, {0}};
    cpparity_status statuses[8];
    cpparity_error errors[8];
    cr_assert_eq(comm_local_run(ranks, 5.0, check_layout, &test, statuses, errors, NULL),
                 CPPARITY_OK);
    for (int r = 0; r < ranks; r++) {
        cr_expect_eq(statuses[r], CPPARITY_OK, "rank %d: %s", r, errors[r].message);
        cr_expect_eq(test.rank_failures[r], 0,
                     "cp %d B=%lld L=%lld H=%lld: rank %d has %d misplaced values (+1000 when the "
                     "round trip is not the identity)",
                     ranks, (long long)batch, (long long)local_len, (long long)heads, r,
                     test.rank_failures[r]);
    }
}

Test(ulysses, one_rank__is_the_identity) {
    expect_layout(1, 2, 5, 4, 3);
}

Test(ulysses, two_ranks_batch_3_heads_8__values_land_where_the_layout_says) {
    expect_layout(2, 3, 4, 8, 2);
}

Test(ulysses, four_ranks_batch_2_heads_8__values_land_where_the_layout_says) {
    expect_layout(4, 2, 3, 8, 4);
}

Test(ulysses, three_ranks_heads_equal_cp__values_land_where_the_layout_says) {
    expect_layout(3, 2, 2, 3, 5);
}

Test(ulysses, repeated_kv_heads__sum_back_to_their_source_head) {
    /* 2 kv heads repeated to 4: head j reads kv head j / 2 */
    const float kv[2 * 2 * 3] = {1, 2, 3, 4,  5,  6,
                                 7, 8, 9, 10, 11, 12}; /* [tokens 2][kv 2][Dh 3] */
    float repeated[2 * 4 * 3], summed[2 * 2 * 3];
    ulysses_repeat_kv(repeated, kv, 2, 2, 4, 3);
    for (int t = 0; t < 2; t++) {
        for (int j = 0; j < 4; j++) {
            for (int d = 0; d < 3; d++) {
                cr_expect_eq(repeated[(t * 4 + j) * 3 + d], kv[(t * 2 + j / 2) * 3 + d],
                             "token %d head %d d %d", t, j, d);
            }
        }
    }
    ulysses_sum_repeated_kv(summed, repeated, 2, 2, 4, 3);
    for (int i = 0; i < 12; i++) {
        cr_expect_eq(summed[i], 2.0f * kv[i], "each kv head was used twice: element %d", i);
    }
}
