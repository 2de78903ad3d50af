/*
 * test_comm_checks.c — the argument checks comm.c makes once, in front of every communicator
 * implementation: each bad call is refused as bad input naming the collective and the rank,
 * before the implementation sees it, so the communicator stays usable (a good call afterwards
 * still works). Exercised through the local communicator; the mpi one gets the same checks
 * from the same code.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "distributed/comm/comm.h"
#include "distributed/comm/comm_local.h"

#define RANKS 2
#define TIMEOUT 20.0 /* seconds: never reached by a passing test */

/* One bad call and the text its refusal must contain. */
typedef struct bad_call {
    const char *what;     /* for failure messages */
    const char *expected; /* in the error message */
} bad_call;

static const bad_call bad_calls[] = {
    {"all_to_all with a negative count", "all_to_all on rank"},
    {"all_to_all in place", "must not overlap"},
    {"all_reduce_sum of an unknown type", "unknown element type 99"},
    {"all_gather into NULL", "NULL buffer"},
    {"broadcast from root 7 of 2", "root 7 is not a rank"},
    {"gather_bytes with -1 bytes", "bad send buffer"},
    {"gather_bytes without sizes on the root", "NULL received"},
    {"agree_status without a result", "NULL agreed"},
    {"split without a result", "NULL result"},
};
#define BAD_CALL_COUNT ((int)(sizeof bad_calls / sizeof *bad_calls))

/* Makes bad call number index on comm. */
static cpparity_status make_bad_call(cpparity_comm *comm, int index, cpparity_error *error) {
    float buffer[8] = {0};
    int64_t sizes[2] = {0, 0};
    void *received = NULL;
    switch (index) {
    case 0:
        return cpparity_all_to_all(comm, buffer, buffer + 4, -1, CPPARITY_FLOAT32, NULL, error);
    case 1:
        return cpparity_all_to_all(comm, buffer, buffer, 2, CPPARITY_FLOAT32, NULL, error);
    case 2:
        return cpparity_all_reduce_sum(comm, buffer, buffer, 2, (cpparity_element_type)99, NULL,
                                       error);
    case 3:
        return cpparity_all_gather(comm, buffer, NULL, 2, CPPARITY_FLOAT32, NULL, error);
    case 4:
        return cpparity_broadcast(comm, buffer, 2, CPPARITY_FLOAT32, 7, NULL, error);
    case 5:
        return cpparity_gather_bytes(comm, buffer, -1, &received, sizes, 1, error);
    case 6:
        return cpparity_gather_bytes(comm, buffer, 4, &received, NULL, comm->rank, error);
    case 7:
        return cpparity_agree_status(comm, CPPARITY_OK, NULL, error);
    default:
        return cpparity_comm_split(comm, 0, 0, NULL, error);
    }
}

/* Every rank makes every bad call, checks the refusal, then a good all_reduce_sum. */
static cpparity_status checks_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)argument;
    for (int i = 0; i < BAD_CALL_COUNT; i++) {
        cpparity_error refusal;
        cpparity_error_clear(&refusal);
        const cpparity_status status = make_bad_call(comm, i, &refusal);
        char rank[32];
        snprintf(rank, sizeof rank, "on rank %d", comm->rank);
        if (status != CPPARITY_ERROR_INPUT ||
            strstr(refusal.message, bad_calls[i].expected) == NULL ||
            strstr(refusal.message, rank) == NULL || strstr(refusal.message, "local") == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "%s: status %d, message '%s' (expected '%s' and '%s')",
                                      bad_calls[i].what, (int)status, refusal.message,
                                      bad_calls[i].expected, rank);
        }
    }
    double value = comm->rank + 1.0;
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT64, NULL, error);
    if (status == CPPARITY_OK && value != 3.0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "sum after refusals is %g", value);
    }
    return status;
}

Test(comm_checks, bad_arguments__refused_before_the_implementation__communicator_still_usable) {
    cpparity_status statuses[RANKS];
    cpparity_error errors[RANKS], error;
    cr_assert_eq(comm_local_run(RANKS, TIMEOUT, checks_body, NULL, statuses, errors, &error),
                 CPPARITY_OK, "%s", error.message);
    for (int rank = 0; rank < RANKS; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_OK, "rank %d: %s", rank, errors[rank].message);
    }
}

Test(comm_checks, null_communicator__refused_not_crashed) {
    cpparity_error error;
    float value = 0.0f;
    cr_assert_eq(cpparity_all_reduce_sum(NULL, &value, &value, 1, CPPARITY_FLOAT32, NULL, &error),
                 CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "NULL communicator") != NULL, "%s", error.message);
    cpparity_comm_free(NULL); /* safe */
}
