/*
 * test_comm_local.c — the `local` communicator (N ranks as threads): every collective against
 * values each rank can compute alone (value = f(source rank, destination rank, index)), for
 * 1 to 5 ranks and every element type; the rank-order, bit-identical sum; split groups working
 * concurrently; and the failure paths: a rank that never calls makes the others time out (and
 * the test ends), abort makes the others' calls fail promptly, mismatched calls are reported.
 *
 * Rank bodies run on threads, where Criterion's assertions must not be used: a body reports a
 * wrong value by returning CPPARITY_ERROR_RUNTIME with a message, and the test's main thread
 * asserts on every rank's status and message.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "distributed/comm/comm.h"
#include "distributed/comm/comm_local.h"
#include "tests/support/comm_hash.h"

#define MAX_RANKS 8
#define LONG_TIMEOUT 30.0 /* seconds: never reached by a passing test */

/* Fails the rank body with a message when condition is false. */
#define BODY_CHECK(condition, error, ...)                                                          \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            return cpparity_error_set((error), CPPARITY_ERROR_RUNTIME, __VA_ARGS__);               \
        }                                                                                          \
    } while (0)

/* Returns the status of a communicator call from the rank body when it failed. */
#define BODY_CALL(call)                                                                            \
    do {                                                                                           \
        cpparity_status body_call_status_ = (call);                                                \
        if (body_call_status_ != CPPARITY_OK) {                                                    \
            return body_call_status_;                                                              \
        }                                                                                          \
    } while (0)

static const cpparity_element_type all_types[] = {CPPARITY_FLOAT32, CPPARITY_FLOAT64,
                                                  CPPARITY_INT64, CPPARITY_INT8, CPPARITY_BFLOAT16};

/* Seconds on a monotonic clock. */
static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Runs body on `ranks` ranks and asserts that the run itself started. */
static void run_ranks(int ranks, double timeout, comm_local_body body, void *argument,
                      cpparity_status *statuses, cpparity_error *errors) {
    cpparity_error error;
    cr_assert_eq(comm_local_run(ranks, timeout, body, argument, statuses, errors, &error),
                 CPPARITY_OK, "%s", error.message);
}

/* run_ranks with standard error captured into text (capacity bytes, NUL-terminated); each
 * Criterion test runs in its own process, so redirecting file descriptor 2 is safe. */
static void run_capturing_stderr(int ranks, double timeout, comm_local_body body, void *argument,
                                 cpparity_status *statuses, cpparity_error *errors, char *text,
                                 size_t capacity) {
    FILE *captured = tmpfile();
    cr_assert_not_null(captured);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    cr_assert_geq(saved, 0);
    cr_assert_geq(dup2(fileno(captured), STDERR_FILENO), 0);
    cpparity_error error;
    cpparity_status run = comm_local_run(ranks, timeout, body, argument, statuses, errors, &error);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(captured);
    size_t length = fread(text, 1, capacity - 1, captured);
    fclose(captured);
    text[length] = '\0';
    cr_assert_eq(run, CPPARITY_OK, "%s", error.message);
}

/* Asserts every rank of a run succeeded, naming the first that did not. */
static void expect_all_ok(int ranks, const cpparity_status *statuses, const cpparity_error *errors,
                          const char *what) {
    for (int rank = 0; rank < ranks; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_OK, "%s, %d ranks: rank %d: %s", what, ranks, rank,
                     errors[rank].message);
    }
}

/* --- all_to_all ------------------------------------------------------------------------------ */

typedef struct all_to_all_case {
    cpparity_element_type type; /* element type */
    int64_t count;              /* elements per block */
} all_to_all_case;

/* Sends block j, element i = f(rank, j, i) to rank j; checks block i of receive is f(i, rank, ·).
 */
static cpparity_status all_to_all_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const all_to_all_case *test = argument;
    int64_t element = cpparity_element_size(test->type);
    size_t bytes = (size_t)(comm->size * test->count * element);
    unsigned char *send = malloc(bytes + 1), *receive = malloc(bytes + 1);
    unsigned char expected[8] = {0};
    BODY_CHECK(send != NULL && receive != NULL, error, "out of memory");
    for (int destination = 0; destination < comm->size; destination++) {
        for (int64_t i = 0; i < test->count; i++) {
            hash_element(test->type, comm->rank, destination, i,
                         send + (destination * test->count + i) * element);
        }
    }
    memset(receive, 0xA5, bytes + 1);
    cpparity_status status =
        cpparity_all_to_all(comm, send, receive, test->count, test->type, NULL, error);
    for (int source = 0; status == CPPARITY_OK && source < comm->size; source++) {
        for (int64_t i = 0; status == CPPARITY_OK && i < test->count; i++) {
            hash_element(test->type, source, comm->rank, i, expected);
            if (memcmp(receive + (source * test->count + i) * element, expected, (size_t)element) !=
                0) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "type %d: rank %d: block %d element %lld is not "
                                            "f(%d, %d, %lld)",
                                            (int)test->type, comm->rank, source, (long long)i,
                                            source, comm->rank, (long long)i);
            }
        }
    }
    if (status == CPPARITY_OK && receive[bytes] != 0xA5) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "wrote past the receive end");
    }
    free(send);
    free(receive);
    return status;
}

/* all_to_all with every element type and counts 5 and 0 on `ranks` ranks. */
static void check_all_to_all(int ranks) {
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        for (int64_t count = 5; count >= 0; count -= 5) {
            all_to_all_case test = {all_types[t], count};
            cpparity_status statuses[MAX_RANKS];
            cpparity_error errors[MAX_RANKS];
            run_ranks(ranks, LONG_TIMEOUT, all_to_all_body, &test, statuses, errors);
            expect_all_ok(ranks, statuses, errors, "all_to_all");
        }
    }
}

Test(comm_local, all_to_all__one_rank__own_block_comes_back) {
    check_all_to_all(1);
}

Test(comm_local, all_to_all__two_ranks__blocks_land_in_rank_order) {
    check_all_to_all(2);
}

Test(comm_local, all_to_all__three_ranks__blocks_land_in_rank_order) {
    check_all_to_all(3);
}

Test(comm_local, all_to_all__four_ranks__blocks_land_in_rank_order) {
    check_all_to_all(4);
}

/* --- all_reduce_sum -------------------------------------------------------------------------- */

#define REDUCE_COUNT 64

typedef struct reduce_case {
    cpparity_element_type type;                         /* FLOAT32, FLOAT64, INT64 or INT8 */
    bool in_place;                                      /* send == receive */
    double inputs[MAX_RANKS][REDUCE_COUNT];             /* rank r's contribution, as doubles */
    unsigned char results[MAX_RANKS][REDUCE_COUNT * 8]; /* what each rank received */
} reduce_case;

/* Converts the double `value` to element i of type in buffer. */
static void store_element(cpparity_element_type type, void *buffer, int64_t i, double value) {
    switch (type) {
    case CPPARITY_FLOAT32:
        ((float *)buffer)[i] = (float)value;
        break;
    case CPPARITY_FLOAT64:
        ((double *)buffer)[i] = value;
        break;
    case CPPARITY_INT64:
        ((int64_t *)buffer)[i] = (int64_t)value;
        break;
    case CPPARITY_INT8:
        ((int8_t *)buffer)[i] = (int8_t)value;
        break;
    case CPPARITY_BFLOAT16:
        break;
    }
}

/* Sums this rank's inputs into test->results[rank]. */
static cpparity_status reduce_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    reduce_case *test = argument;
    unsigned char send[REDUCE_COUNT * 8];
    for (int64_t i = 0; i < REDUCE_COUNT; i++) {
        store_element(test->type, send, i, test->inputs[comm->rank][i]);
    }
    void *receive = test->in_place ? (void *)send : (void *)test->results[comm->rank];
    BODY_CALL(cpparity_all_reduce_sum(comm, send, receive, REDUCE_COUNT, test->type, NULL, error));
    if (test->in_place) {
        memcpy(test->results[comm->rank], send, sizeof send);
    }
    return CPPARITY_OK;
}

/* Runs reduce_body and asserts every rank holds the same bits, equal to the rank-order sum
 * computed here in the element type. */
static void check_reduce(reduce_case *test, int ranks) {
    cpparity_status statuses[MAX_RANKS];
    cpparity_error errors[MAX_RANKS];
    run_ranks(ranks, LONG_TIMEOUT, reduce_body, test, statuses, errors);
    expect_all_ok(ranks, statuses, errors, "all_reduce_sum");
    int64_t element = cpparity_element_size(test->type);
    unsigned char expected[REDUCE_COUNT * 8];
    for (int64_t i = 0; i < REDUCE_COUNT; i++) {
        float sum32 = (float)test->inputs[0][i];
        double sum64 = test->inputs[0][i];
        int64_t sum_integer = (int64_t)test->inputs[0][i];
        for (int rank = 1; rank < ranks; rank++) {
            sum32 += (float)test->inputs[rank][i];
            sum64 += test->inputs[rank][i];
            sum_integer += (int64_t)test->inputs[rank][i];
        }
        switch (test->type) {
        case CPPARITY_FLOAT32:
            ((float *)expected)[i] = sum32;
            break;
        case CPPARITY_FLOAT64:
            ((double *)expected)[i] = sum64;
            break;
        case CPPARITY_INT64:
            ((int64_t *)expected)[i] = sum_integer;
            break;
        case CPPARITY_INT8:
            ((int8_t *)expected)[i] = (int8_t)sum_integer;
            break;
        case CPPARITY_BFLOAT16:
            break;
        }
    }
    for (int rank = 0; rank < ranks; rank++) {
        cr_assert_eq(
            memcmp(test->results[rank], test->results[0], (size_t)(REDUCE_COUNT * element)), 0,
            "rank %d's sum differs from rank 0's in some bit", rank);
    }
    for (int64_t i = 0; i < REDUCE_COUNT; i++) {
        cr_assert_eq(
            memcmp(test->results[0] + i * element, expected + i * element, (size_t)element), 0,
            "element %lld is not the rank-order sum", (long long)i);
    }
}

/* Pseudo-random doubles in [-1, 1) from a seed (xorshift), so that summation order matters. */
static double next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (double)(*state >> 11) / 4503599627370496.0 - 1.0;
}

Test(comm_local, all_reduce_sum__cancelling_doubles__rank_order_bits_on_every_rank) {
    static reduce_case test;
    memset(&test, 0, sizeof test);
    test.type = CPPARITY_FLOAT64;
    uint64_t seed = 42;
    for (int rank = 0; rank < 3; rank++) {
        for (int i = 0; i < REDUCE_COUNT; i++) {
            test.inputs[rank][i] = next_random(&seed) * 1e3;
        }
    }
    /* ((1e16 + 1) + -1e16) is 0 in float64, while (1e16 + -1e16) + 1 would be 1; element 1
     * catches the reverse order: ((1 + 1e16) + -1e16) is 0, (-1e16 + 1e16) + 1 is 1. */
    test.inputs[0][0] = 1e16;
    test.inputs[1][0] = 1.0;
    test.inputs[2][0] = -1e16;
    test.inputs[0][1] = 1.0;
    test.inputs[1][1] = 1e16;
    test.inputs[2][1] = -1e16;
    check_reduce(&test, 3);
    cr_assert_eq(((double *)test.results[0])[0], 0.0, "element 0: not summed in rank order");
    cr_assert_eq(((double *)test.results[0])[1], 0.0, "element 1: not summed in rank order");
}

Test(comm_local, all_reduce_sum__float32_in_place_five_ranks__rank_order_bits_on_every_rank) {
    static reduce_case test;
    memset(&test, 0, sizeof test);
    test.type = CPPARITY_FLOAT32;
    test.in_place = true;
    uint64_t seed = 7;
    for (int rank = 0; rank < 5; rank++) {
        for (int i = 0; i < REDUCE_COUNT; i++) {
            test.inputs[rank][i] = next_random(&seed) * (rank % 2 == 0 ? 1e6 : 1e-3);
        }
    }
    check_reduce(&test, 5);
}

Test(comm_local, all_reduce_sum__integers_four_ranks__exact_sums) {
    static reduce_case test;
    const cpparity_element_type types[] = {CPPARITY_INT64, CPPARITY_INT8};
    for (int t = 0; t < 2; t++) {
        memset(&test, 0, sizeof test);
        test.type = types[t];
        for (int rank = 0; rank < 4; rank++) {
            for (int i = 0; i < REDUCE_COUNT; i++) {
                test.inputs[rank][i] = (double)((i * 7 + rank * 5) % 61 - 30);
            }
        }
        check_reduce(&test, 4);
    }
}

/* Tries a bfloat16 sum, expecting an input error that says it is not supported. */
static cpparity_status bfloat16_sum_body(cpparity_comm *comm, void *argument,
                                         cpparity_error *error) {
    (void)argument;
    uint16_t values[4] = {0x3F80, 0x3F80, 0x3F80, 0x3F80};
    cpparity_status status =
        cpparity_all_reduce_sum(comm, values, values, 4, CPPARITY_BFLOAT16, NULL, error);
    BODY_CHECK(status == CPPARITY_ERROR_INPUT && strstr(error->message, "not supported") != NULL,
               error, "bfloat16 sum: got status %d: %s", (int)status, error->message);
    return CPPARITY_OK;
}

Test(comm_local, all_reduce_sum__bfloat16__refused_as_not_supported) {
    cpparity_status statuses[2];
    cpparity_error errors[2];
    run_ranks(2, LONG_TIMEOUT, bfloat16_sum_body, NULL, statuses, errors);
    expect_all_ok(2, statuses, errors, "bfloat16 sum");
}

/* --- all_gather, broadcast, gather_bytes, agree_status -------------------------------------- */

/* Gathers f(rank, 0, i) for i < 3 from every rank and checks the rank order. */
static cpparity_status all_gather_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const cpparity_element_type *type = argument;
    int64_t element = cpparity_element_size(*type);
    unsigned char send[3 * 8] = {0}, receive[MAX_RANKS * 3 * 8], expected[8] = {0};
    for (int64_t i = 0; i < 3; i++) {
        hash_element(*type, comm->rank, 0, i, send + i * element);
    }
    BODY_CALL(cpparity_all_gather(comm, send, receive, 3, *type, NULL, error));
    for (int source = 0; source < comm->size; source++) {
        for (int64_t i = 0; i < 3; i++) {
            hash_element(*type, source, 0, i, expected);
            BODY_CHECK(memcmp(receive + (source * 3 + i) * element, expected, (size_t)element) == 0,
                       error, "type %d, rank %d: block %d element %lld wrong", (int)*type,
                       comm->rank, source, (long long)i);
        }
    }
    return CPPARITY_OK;
}

Test(comm_local, all_gather__one_to_four_ranks_each_type__blocks_in_rank_order) {
    for (int ranks = 1; ranks <= 4; ranks++) {
        for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
            cpparity_element_type type = all_types[t];
            cpparity_status statuses[MAX_RANKS];
            cpparity_error errors[MAX_RANKS];
            run_ranks(ranks, LONG_TIMEOUT, all_gather_body, &type, statuses, errors);
            expect_all_ok(ranks, statuses, errors, "all_gather");
        }
    }
}

/* --- shift (the ring step) ---------------------------------------------------------------------
 */

/* Shifts f(rank, 2, i), i < 5, by offsets 1, −1, 2, size and 3 − 2·size: the receive holds the
 * send of rank − offset (mod size). */
static cpparity_status shift_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const cpparity_element_type *type = argument;
    const int64_t element = cpparity_element_size(*type);
    const int offsets[] = {1, -1, 2, comm->size, 3 - 2 * comm->size};
    for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
        unsigned char send[5 * 8] = {0}, receive[5 * 8] = {0}, expected[8] = {0};
        for (int64_t i = 0; i < 5; i++) {
            hash_element(*type, comm->rank, 2, i, send + i * element);
        }
        BODY_CALL(cpparity_shift(comm, send, receive, 5, *type, offsets[o], NULL, error));
        const int from = ((comm->rank - offsets[o]) % comm->size + comm->size) % comm->size;
        for (int64_t i = 0; i < 5; i++) {
            hash_element(*type, from, 2, i, expected);
            BODY_CHECK(memcmp(receive + i * element, expected, (size_t)element) == 0, error,
                       "type %d, offset %d, rank %d: element %lld is not rank %d's", (int)*type,
                       offsets[o], comm->rank, (long long)i, from);
        }
    }
    return CPPARITY_OK;
}

Test(comm_local, shift__one_to_eight_ranks_each_type__receive_from_rank_minus_offset) {
    const int sizes[] = {1, 2, 3, 4, 8};
    for (size_t n = 0; n < sizeof sizes / sizeof *sizes; n++) {
        for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
            cpparity_element_type type = all_types[t];
            cpparity_status statuses[MAX_RANKS];
            cpparity_error errors[MAX_RANKS];
            run_ranks(sizes[n], LONG_TIMEOUT, shift_body, &type, statuses, errors);
            expect_all_ok(sizes[n], statuses, errors, "shift");
        }
    }
}

/* Ranks that disagree on the offset: every rank fails saying so, nothing hangs. */
static cpparity_status shift_mismatch_body(cpparity_comm *comm, void *argument,
                                           cpparity_error *error) {
    (void)argument;
    double send = 1.0, receive = 0.0;
    return cpparity_shift(comm, &send, &receive, 1, CPPARITY_FLOAT64, comm->rank == 0 ? 1 : -1,
                          NULL, error);
}

Test(comm_local, shift__offsets_differ__every_rank_fails_naming_them, .timeout = 20) {
    cpparity_status statuses[MAX_RANKS];
    cpparity_error errors[MAX_RANKS];
    run_ranks(3, LONG_TIMEOUT, shift_mismatch_body, NULL, statuses, errors);
    for (int rank = 0; rank < 3; rank++) {
        cr_assert_neq(statuses[rank], CPPARITY_OK);
        cr_assert(strstr(errors[rank].message, "shift") != NULL &&
                      strstr(errors[rank].message, "offsets") != NULL,
                  "rank %d: %s", rank, errors[rank].message);
    }
}

/* Broadcasts 7 doubles f(root, 1, i) from rank 2; the others start with garbage. */
static cpparity_status broadcast_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const int root = *(const int *)argument;
    double buffer[7], expected;
    for (int64_t i = 0; i < 7; i++) {
        if (comm->rank == root) {
            hash_element(CPPARITY_FLOAT64, root, 1, i, &buffer[i]);
        } else {
            buffer[i] = -1.0 - (double)comm->rank;
        }
    }
    BODY_CALL(cpparity_broadcast(comm, buffer, 7, CPPARITY_FLOAT64, root, NULL, error));
    for (int64_t i = 0; i < 7; i++) {
        hash_element(CPPARITY_FLOAT64, root, 1, i, &expected);
        BODY_CHECK(buffer[i] == expected, error, "rank %d: element %lld is %g, not %g", comm->rank,
                   (long long)i, buffer[i], expected);
    }
    return CPPARITY_OK;
}

Test(comm_local, broadcast__root_two_of_four__every_rank_gets_the_root_buffer) {
    int root = 2;
    cpparity_status statuses[4];
    cpparity_error errors[4];
    run_ranks(4, LONG_TIMEOUT, broadcast_body, &root, statuses, errors);
    expect_all_ok(4, statuses, errors, "broadcast");
}

typedef struct gather_case {
    int root;                   /* receiving rank */
    int64_t lengths[MAX_RANKS]; /* bytes sent by each rank */
} gather_case;

/* Sends lengths[rank] bytes f(rank, 2, i); the root checks the concatenation and the sizes. */
static cpparity_status gather_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const gather_case *test = argument;
    int8_t send[16], expected;
    int64_t sizes[MAX_RANKS];
    void *received = (void *)&sizes; /* must be overwritten */
    for (int64_t i = 0; i < test->lengths[comm->rank]; i++) {
        hash_element(CPPARITY_INT8, comm->rank, 2, i, &send[i]);
    }
    BODY_CALL(cpparity_gather_bytes(comm, send, test->lengths[comm->rank], &received,
                                    comm->rank == test->root ? sizes : NULL, test->root, error));
    if (comm->rank != test->root) {
        BODY_CHECK(received == NULL, error, "rank %d: received is not NULL off the root",
                   comm->rank);
        return CPPARITY_OK;
    }
    BODY_CHECK(received != NULL, error, "root: received is NULL");
    const int8_t *bytes = received;
    int64_t offset = 0;
    cpparity_status status = CPPARITY_OK;
    for (int source = 0; source < comm->size && status == CPPARITY_OK; source++) {
        if (sizes[source] != test->lengths[source]) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "sizes[%d] = %lld, expected %lld", source,
                                        (long long)sizes[source], (long long)test->lengths[source]);
        }
        for (int64_t i = 0; i < test->lengths[source] && status == CPPARITY_OK; i++) {
            hash_element(CPPARITY_INT8, source, 2, i, &expected);
            if (bytes[offset + i] != expected) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "byte %lld from rank %d wrong", (long long)i, source);
            }
        }
        offset += test->lengths[source];
    }
    free(received);
    return status;
}

Test(comm_local, gather_bytes__different_lengths_including_zero__concatenated_on_root) {
    gather_case test = {1, {3, 0, 7, 1}};
    cpparity_status statuses[4];
    cpparity_error errors[4];
    run_ranks(4, LONG_TIMEOUT, gather_body, &test, statuses, errors);
    expect_all_ok(4, statuses, errors, "gather_bytes");
    gather_case empty = {0, {0, 0, 0}};
    run_ranks(3, LONG_TIMEOUT, gather_body, &empty, statuses, errors);
    expect_all_ok(3, statuses, errors, "gather_bytes of nothing");
}

typedef struct agree_case {
    cpparity_status local[MAX_RANKS];  /* what each rank passes */
    cpparity_status agreed[MAX_RANKS]; /* what each rank got */
} agree_case;

/* Agrees on the largest status. */
static cpparity_status agree_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    agree_case *test = argument;
    return cpparity_agree_status(comm, test->local[comm->rank], &test->agreed[comm->rank], error);
}

Test(comm_local, agree_status__mixed_statuses__every_rank_gets_the_largest) {
    const cpparity_status inputs[3][4] = {
        {CPPARITY_OK, CPPARITY_ERROR_INPUT, CPPARITY_OK, CPPARITY_ERROR_RUNTIME},
        {CPPARITY_OK, CPPARITY_OK, CPPARITY_ERROR_INPUT, CPPARITY_OK},
        {CPPARITY_OK, CPPARITY_OK, CPPARITY_OK, CPPARITY_OK},
    };
    const cpparity_status expected[3] = {CPPARITY_ERROR_RUNTIME, CPPARITY_ERROR_INPUT, CPPARITY_OK};
    for (int c = 0; c < 3; c++) {
        agree_case test;
        memcpy(test.local, inputs[c], sizeof inputs[c]);
        cpparity_status statuses[4];
        cpparity_error errors[4];
        run_ranks(4, LONG_TIMEOUT, agree_body, &test, statuses, errors);
        expect_all_ok(4, statuses, errors, "agree_status");
        for (int rank = 0; rank < 4; rank++) {
            cr_assert_eq(test.agreed[rank], expected[c], "case %d rank %d: agreed %d", c, rank,
                         (int)test.agreed[rank]);
        }
    }
}

/* --- split ----------------------------------------------------------------------------------- */

/* Five ranks split by parity with keys −rank: the evens become [4, 2, 0], the odds [3, 1]. Both
 * groups run collectives at the same time, then the parent still works. */
static cpparity_status split_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)argument;
    cpparity_comm *group = NULL;
    BODY_CALL(cpparity_comm_split(comm, comm->rank % 2, -comm->rank, &group, error));
    BODY_CHECK(group != NULL, error, "rank %d: no group", comm->rank);
    int even = comm->rank % 2 == 0;
    int expected_size = even ? 3 : 2;
    int expected_rank = even ? (4 - comm->rank) / 2 : (3 - comm->rank) / 2;
    cpparity_status status = CPPARITY_OK;
    if (group->size != expected_size || group->rank != expected_rank ||
        group->world_rank != comm->rank || strcmp(group->kind, "local") != 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "rank %d: group size %d rank %d world %d, expected %d %d %d",
                                    comm->rank, group->size, group->rank, group->world_rank,
                                    expected_size, expected_rank, comm->rank);
    }
    for (int round = 0; round < 50 && status == CPPARITY_OK; round++) {
        int64_t mine = comm->rank, gathered[MAX_RANKS];
        status = cpparity_all_gather(group, &mine, gathered, 1, CPPARITY_INT64, NULL, error);
        for (int r = 0; r < group->size && status == CPPARITY_OK; r++) {
            int64_t parent = even ? 4 - 2 * r : 3 - 2 * r;
            if (gathered[r] != parent) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "rank %d round %d: group rank %d is parent %lld, "
                                            "expected %lld",
                                            comm->rank, round, r, (long long)gathered[r],
                                            (long long)parent);
            }
        }
        double sum = (double)comm->rank;
        if (status == CPPARITY_OK) {
            status = cpparity_all_reduce_sum(group, &sum, &sum, 1, CPPARITY_FLOAT64, NULL, error);
        }
        if (status == CPPARITY_OK && sum != (even ? 6.0 : 4.0)) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "group sum %g", sum);
        }
    }
    cpparity_comm_free(group);
    BODY_CALL(status);
    cpparity_status agreed;
    BODY_CALL(cpparity_agree_status(comm, CPPARITY_OK, &agreed, error));
    /* Equal keys keep parent order; a negative color gives no communicator. */
    BODY_CALL(
        cpparity_comm_split(comm, comm->rank == 4 ? -1 : 0, comm->rank < 2 ? 1 : 0, &group, error));
    if (comm->rank == 4) {
        BODY_CHECK(group == NULL, error, "negative color gave a communicator");
        return CPPARITY_OK;
    }
    int tie_rank = comm->rank < 2 ? comm->rank + 2 : comm->rank - 2;
    status = group != NULL && group->size == 4 && group->rank == tie_rank
                 ? CPPARITY_OK
                 : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "rank %d: tie-broken group rank wrong", comm->rank);
    if (status == CPPARITY_OK) {
        status = cpparity_agree_status(group, CPPARITY_OK, &agreed, error);
    }
    cpparity_comm_free(group);
    return status;
}

Test(comm_local, split__two_colors_reversed_keys__groups_ordered_and_usable_concurrently) {
    cpparity_status statuses[5];
    cpparity_error errors[5];
    run_ranks(5, LONG_TIMEOUT, split_body, NULL, statuses, errors);
    expect_all_ok(5, statuses, errors, "split");
}

/* --- failures -------------------------------------------------------------------------------- */

typedef struct failure_case {
    int odd_rank;                          /* the rank that misbehaves */
    double elapsed[MAX_RANKS];             /* seconds the first failing call took on each rank */
    double elapsed_after[MAX_RANKS];       /* seconds a later call took */
    cpparity_status later[MAX_RANKS];      /* status of the later call */
    cpparity_error later_error[MAX_RANKS]; /* its error */
} failure_case;

/* The odd rank returns at once; the others call all_reduce_sum, then agree_status. */
static cpparity_status missing_rank_body(cpparity_comm *comm, void *argument,
                                         cpparity_error *error) {
    failure_case *test = argument;
    if (comm->rank == test->odd_rank) {
        return CPPARITY_OK;
    }
    float value = 1.0f;
    double start = now_seconds();
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT32, NULL, error);
    test->elapsed[comm->rank] = now_seconds() - start;
    start = now_seconds();
    cpparity_status agreed;
    test->later[comm->rank] =
        cpparity_agree_status(comm, CPPARITY_OK, &agreed, &test->later_error[comm->rank]);
    test->elapsed_after[comm->rank] = now_seconds() - start;
    return status;
}

Test(comm_local, timeout__rank_never_calls__others_fail_naming_the_collective, .timeout = 20) {
    failure_case test = {.odd_rank = 2};
    cpparity_status statuses[3];
    cpparity_error errors[3];
    run_ranks(3, 0.3, missing_rank_body, &test, statuses, errors);
    cr_assert_eq(statuses[2], CPPARITY_OK);
    int reporters = 0;
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_ERROR_RUNTIME, "rank %d: %s", rank,
                     errors[rank].message);
        cr_assert(strstr(errors[rank].message, "all_reduce_sum") != NULL &&
                      strstr(errors[rank].message, "timed out after 0.3 s") != NULL,
                  "rank %d: %s", rank, errors[rank].message);
        if (strstr(errors[rank].message, "all_reduce_sum timed out after 0.3 s on rank") != NULL &&
            strstr(errors[rank].message, "(waiting for ranks 2)") != NULL) {
            reporters++;
        }
        cr_assert(test.elapsed[rank] > 0.25 && test.elapsed[rank] < 3.0,
                  "rank %d waited %.3f s for a 0.3 s timeout", rank, test.elapsed[rank]);
        cr_assert_eq(test.later[rank], CPPARITY_ERROR_RUNTIME, "rank %d: later call succeeded",
                     rank);
        cr_assert(test.elapsed_after[rank] < 0.25, "rank %d: later call took %.3f s", rank,
                  test.elapsed_after[rank]);
        cr_assert(strstr(test.later_error[rank].message, "agree_status failed") != NULL &&
                      strstr(test.later_error[rank].message, "timed out") != NULL,
                  "rank %d later: %s", rank, test.later_error[rank].message);
    }
    cr_assert_geq(reporters, 1, "no rank reported the timeout itself: %s | %s", errors[0].message,
                  errors[1].message);
}

/* The odd rank computes (sleeps 1 s, three deadlines of 0.3 s) before the all_reduce_sum the
 * others wait in; then all meet again in a split group. */
static cpparity_status computing_rank_body(cpparity_comm *comm, void *argument,
                                           cpparity_error *error) {
    failure_case *test = argument;
    if (comm->rank == test->odd_rank) {
        const struct timespec pause = {1, 0};
        nanosleep(&pause, NULL);
    }
    float value = 1.0f;
    double start = now_seconds();
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT32, NULL, error);
    test->elapsed[comm->rank] = now_seconds() - start;
    if (status == CPPARITY_OK && value != (float)comm->size) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: sum %g", comm->rank,
                                    (double)value);
    }
    return status;
}

Test(comm_local, timeout__a_rank_computes_past_the_deadline__the_others_wait_for_it,
     .timeout = 20) {
    failure_case test = {.odd_rank = 1};
    cpparity_status statuses[3];
    cpparity_error errors[3];
    run_ranks(3, 0.3, computing_rank_body, &test, statuses, errors);
    expect_all_ok(3, statuses, errors, "waiting for a computing rank");
    for (int rank = 0; rank < 3; rank += 2) { /* they really waited past three deadlines */
        cr_assert(test.elapsed[rank] > 0.9, "rank %d waited %.3f s", rank, test.elapsed[rank]);
    }
}

/* Ranks 0 and 1 wait for each other in the world; rank 2 waits in a group of its own with rank 1
 * (out of step: every missing rank is waiting somewhere): a real hang, which the deadline ends
 * even though nobody computes. */
static cpparity_status crossed_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)argument;
    cpparity_comm *pair = NULL;
    cpparity_status status = cpparity_comm_split(comm, comm->rank >= 1 ? 1 : 0, 0, &pair, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    cpparity_status agreed;
    if (comm->rank == 2) { /* waits for rank 1 in the pair, which waits in the world */
        status = cpparity_agree_status(pair, CPPARITY_OK, &agreed, error);
    } else {
        status = cpparity_agree_status(comm, CPPARITY_OK, &agreed, error);
    }
    cpparity_comm_free(pair);
    return status;
}

Test(comm_local, timeout__collectives_out_of_step_across_groups__still_time_out, .timeout = 20) {
    cpparity_status statuses[3];
    cpparity_error errors[3];
    const double start = now_seconds();
    run_ranks(3, 0.3, crossed_body, NULL, statuses, errors);
    cr_assert(now_seconds() - start < 5.0, "the crossed wait took %.1f s", now_seconds() - start);
    for (int rank = 0; rank < 3; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_ERROR_RUNTIME, "rank %d: %s", rank,
                     errors[rank].message);
        cr_assert(strstr(errors[rank].message, "timed out") != NULL, "rank %d: %s", rank,
                  errors[rank].message);
    }
}

/* The odd rank aborts after 50 ms; the others are waiting in all_gather with a 30 s deadline. */
static cpparity_status abort_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    failure_case *test = argument;
    if (comm->rank == test->odd_rank) {
        struct timespec pause = {0, 50000000L};
        nanosleep(&pause, NULL);
        cpparity_comm_abort(comm, 3, "deliberate failure");
        cpparity_comm_abort(comm, 3, "second abort, not printed");
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "aborted");
    }
    int64_t mine = comm->rank, all[MAX_RANKS];
    double start = now_seconds();
    cpparity_status status = cpparity_all_gather(comm, &mine, all, 1, CPPARITY_INT64, NULL, error);
    test->elapsed[comm->rank] = now_seconds() - start;
    start = now_seconds();
    test->later[comm->rank] =
        cpparity_broadcast(comm, &mine, 1, CPPARITY_INT64, 0, NULL, &test->later_error[comm->rank]);
    test->elapsed_after[comm->rank] = now_seconds() - start;
    return status;
}

Test(comm_local, abort__one_rank_aborts__others_fail_promptly_and_message_printed_once,
     .timeout = 20) {
    failure_case test = {.odd_rank = 1};
    cpparity_status statuses[3];
    cpparity_error errors[3];
    char text[1024];
    run_capturing_stderr(3, LONG_TIMEOUT, abort_body, &test, statuses, errors, text, sizeof text);
    cr_assert_str_eq(text, "cpparity: rank 1: deliberate failure\n");
    for (int rank = 0; rank < 3; rank += 2) {
        cr_assert_eq(statuses[rank], CPPARITY_ERROR_RUNTIME, "rank %d", rank);
        cr_assert(strstr(errors[rank].message, "all_gather failed") != NULL &&
                      strstr(errors[rank].message, "rank 1 aborted") != NULL &&
                      strstr(errors[rank].message, "deliberate failure") != NULL,
                  "rank %d: %s", rank, errors[rank].message);
        cr_assert(test.elapsed[rank] < 2.0, "rank %d waited %.3f s after the abort", rank,
                  test.elapsed[rank]);
        cr_assert_eq(test.later[rank], CPPARITY_ERROR_RUNTIME);
        cr_assert(test.elapsed_after[rank] < 0.25, "later call took %.3f s",
                  test.elapsed_after[rank]);
        cr_assert(strstr(test.later_error[rank].message, "broadcast failed") != NULL, "%s",
                  test.later_error[rank].message);
    }
}

/* Rank 0 aborts through a split communicator; the others' calls on the parent fail. */
static cpparity_status abort_in_group_body(cpparity_comm *comm, void *argument,
                                           cpparity_error *error) {
    (void)argument;
    cpparity_comm *group = NULL;
    BODY_CALL(cpparity_comm_split(comm, comm->rank % 2, 0, &group, error));
    cpparity_status status = CPPARITY_OK;
    if (comm->rank == 0) {
        cpparity_comm_abort(group, 3, "group abort");
    } else {
        cpparity_status agreed;
        status = cpparity_agree_status(comm, CPPARITY_OK, &agreed, error);
        status = status == CPPARITY_ERROR_RUNTIME && strstr(error->message, "group abort") != NULL
                     ? CPPARITY_OK
                     : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                          "rank %d: parent call not failed by the abort: %s",
                                          comm->rank, error->message);
    }
    cpparity_comm_free(group);
    return status;
}

Test(comm_local, abort__through_split_communicator__fails_the_parent_too, .timeout = 20) {
    cpparity_status statuses[4];
    cpparity_error errors[4];
    char text[256];
    run_capturing_stderr(4, LONG_TIMEOUT, abort_in_group_body, NULL, statuses, errors, text,
                         sizeof text);
    expect_all_ok(4, statuses, errors, "abort in group");
    cr_assert_str_eq(text, "cpparity: rank 0: group abort\n");
}

/* Rank 0 calls all_gather, rank 1 broadcast, then both try agree_status. */
static cpparity_status mismatch_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)argument;
    double values[2] = {1.0, 2.0};
    double gathered[4];
    cpparity_status status =
        comm->rank == 0
            ? cpparity_all_gather(comm, values, gathered, 2, CPPARITY_FLOAT64, NULL, error)
            : cpparity_broadcast(comm, values, 2, CPPARITY_FLOAT64, 0, NULL, error);
    BODY_CHECK(status == CPPARITY_ERROR_RUNTIME && strstr(error->message, "mismatched") != NULL,
               error, "rank %d: mismatch not reported: %s", comm->rank, error->message);
    cpparity_status agreed;
    status = cpparity_agree_status(comm, CPPARITY_OK, &agreed, error);
    BODY_CHECK(status == CPPARITY_ERROR_RUNTIME, error, "communicator usable after a mismatch");
    return CPPARITY_OK;
}

Test(comm_local, mismatch__different_collectives__both_ranks_fail_with_a_message, .timeout = 20) {
    cpparity_status statuses[2];
    cpparity_error errors[2];
    run_ranks(2, LONG_TIMEOUT, mismatch_body, NULL, statuses, errors);
    expect_all_ok(2, statuses, errors, "mismatch");
}

/* Bad arguments fail with CPPARITY_ERROR_INPUT before any rendezvous (one rank). */
static cpparity_status bad_arguments_body(cpparity_comm *comm, void *argument,
                                          cpparity_error *error) {
    (void)argument;
    double buffer[2] = {0};
    int stream = 0;
    cpparity_error ignored;
    BODY_CHECK(cpparity_all_to_all(comm, buffer, buffer + 1, 1, CPPARITY_FLOAT64, &stream,
                                   &ignored) == CPPARITY_ERROR_INPUT &&
                   strstr(ignored.message, "stream") != NULL,
               error, "non-NULL stream accepted: %s", ignored.message);
    BODY_CHECK(cpparity_all_gather(comm, buffer, buffer + 1, -1, CPPARITY_FLOAT64, NULL,
                                   &ignored) == CPPARITY_ERROR_INPUT,
               error, "negative count accepted");
    BODY_CHECK(cpparity_all_reduce_sum(comm, buffer, buffer, 1, (cpparity_element_type)99, NULL,
                                       &ignored) == CPPARITY_ERROR_INPUT,
               error, "unknown type accepted");
    BODY_CHECK(cpparity_broadcast(comm, buffer, 1, CPPARITY_FLOAT64, 1, NULL, &ignored) ==
                   CPPARITY_ERROR_INPUT,
               error, "root outside the communicator accepted");
    BODY_CHECK(cpparity_all_to_all(comm, NULL, buffer, 1, CPPARITY_FLOAT64, NULL, &ignored) ==
                   CPPARITY_ERROR_INPUT,
               error, "NULL send accepted");
    /* The communicator still works after refused calls. */
    BODY_CALL(cpparity_all_reduce_sum(comm, buffer, buffer, 2, CPPARITY_FLOAT64, NULL, error));
    BODY_CHECK(strcmp(comm->kind, "local") == 0 && comm->world_rank == comm->rank &&
                   comm->size == 1,
               error, "kind %s world_rank %d size %d", comm->kind, comm->world_rank, comm->size);
    return CPPARITY_OK;
}

Test(comm_local, arguments__bad_stream_count_type_root__refused_as_input_errors) {
    cpparity_status statuses[1];
    cpparity_error errors[1];
    run_ranks(1, LONG_TIMEOUT, bad_arguments_body, NULL, statuses, errors);
    expect_all_ok(1, statuses, errors, "bad arguments");
    cpparity_error error;
    cr_assert_eq(comm_local_run(0, 1.0, bad_arguments_body, NULL, statuses, errors, &error),
                 CPPARITY_ERROR_INPUT);
    cr_assert_eq(comm_local_run(1, 0.0, bad_arguments_body, NULL, statuses, errors, &error),
                 CPPARITY_ERROR_INPUT);
}

Test(comm_local, element_size__each_type__bytes_of_one_element) {
    cr_assert_eq(cpparity_element_size(CPPARITY_FLOAT32), 4);
    cr_assert_eq(cpparity_element_size(CPPARITY_FLOAT64), 8);
    cr_assert_eq(cpparity_element_size(CPPARITY_INT64), 8);
    cr_assert_eq(cpparity_element_size(CPPARITY_INT8), 1);
    cr_assert_eq(cpparity_element_size(CPPARITY_BFLOAT16), 2);
    cr_assert_eq(cpparity_element_size((cpparity_element_type)99), 0);
}

/* Many rounds of mixed collectives, to shake out rendezvous races. */
static cpparity_status stress_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)argument;
    for (int round = 0; round < 500; round++) {
        int64_t value = round + comm->rank, sum = value;
        BODY_CALL(cpparity_all_reduce_sum(comm, &sum, &sum, 1, CPPARITY_INT64, NULL, error));
        int64_t expected = (int64_t)round * comm->size + comm->size * (comm->size - 1) / 2;
        BODY_CHECK(sum == expected, error, "round %d: sum %lld, expected %lld", round,
                   (long long)sum, (long long)expected);
        int64_t root_value = round;
        BODY_CALL(cpparity_broadcast(comm, &root_value, 1, CPPARITY_INT64, round % comm->size, NULL,
                                     error));
        BODY_CHECK(root_value == round, error, "round %d: broadcast %lld", round,
                   (long long)root_value);
    }
    return CPPARITY_OK;
}

Test(comm_local, stress__five_hundred_rounds_on_six_ranks__every_round_correct) {
    cpparity_status statuses[6];
    cpparity_error errors[6];
    run_ranks(6, LONG_TIMEOUT, stress_body, NULL, statuses, errors);
    expect_all_ok(6, statuses, errors, "stress");
}
