/*
 * mpi_comm_check.c — checks the `mpi` communicator under mpirun (Criterion covers one process
 * only, so this is an ordinary executable that ctest starts through mpiexec with 1, 2 and 4
 * ranks). Every rank computes its inputs and the expected outputs from (rank, index) alone:
 * all_to_all placement with hash-encoded values for every element type, the rank-order sum with
 * identical bits on every rank, all_gather, broadcast from a non-zero root, gather_bytes with
 * lengths including 0, agree_status and split. A check passes when it passes on every rank
 * (agreed with agree_status), so every rank prints the same counts and returns the same code:
 * "mpi_comm_check: N passed, M failed", exit 1 on any failure.
 *
 * Usage: mpi_comm_check [--timeout SECONDS] [--hang-rank R] [--compute-rank R --compute SECONDS]
 *                       [--disagree-shift]
 *   --hang-rank R: after the checks, rank R skips an all_reduce_sum and says its job is over;
 *   the others must time out and abort the job (exit non-zero, "timed out" on stderr) instead of
 *   hanging.
 *   --compute-rank R --compute SECONDS: after the checks, rank R computes (sleeps) SECONDS before
 *   an all_reduce_sum the others wait in: they must wait for it past their deadline (waiting for
 *   computation is not a hang) and every rank gets the sum.
 *   --disagree-shift (3 ranks): after the checks, rank 0 shifts by 2 and the others by 1, with
 *   messages too large to be sent before they are received: every rank is inside the same shift,
 *   which cannot complete. The deadline may move on while a collective every rank has entered is
 *   in flight, but only a few times: the job must still abort, saying every rank had entered it.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/comm/comm.h"
#include "distributed/comm/comm_mpi.h"
#include "tests/support/comm_hash.h"

#define MAX_COUNT 64

/* Fails the check with a message when condition is false. */
#define CHECK(condition, error, ...)                                                               \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            return cpparity_error_set((error), CPPARITY_ERROR_RUNTIME, __VA_ARGS__);               \
        }                                                                                          \
    } while (0)

/* Returns the status of a communicator call from the check when it failed. */
#define CALL(call)                                                                                 \
    do {                                                                                           \
        cpparity_status call_status_ = (call);                                                     \
        if (call_status_ != CPPARITY_OK) {                                                         \
            return call_status_;                                                                   \
        }                                                                                          \
    } while (0)

static const cpparity_element_type all_types[] = {CPPARITY_FLOAT32, CPPARITY_FLOAT64,
                                                  CPPARITY_INT64, CPPARITY_INT8, CPPARITY_BFLOAT16};

/* all_to_all: block j of rank r holds f(r, j, i); block i received must be f(i, rank, ·). */
static cpparity_status check_all_to_all(cpparity_comm *comm, cpparity_error *error) {
    const int64_t count = 5;
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        cpparity_element_type type = all_types[t];
        int64_t element = cpparity_element_size(type);
        size_t bytes = (size_t)(comm->size * count * element);
        unsigned char *send = malloc(bytes), *receive = calloc(1, bytes), expected[8] = {0};
        cpparity_status status = send != NULL && receive != NULL
                                     ? CPPARITY_OK
                                     : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "memory");
        for (int j = 0; status == CPPARITY_OK && j < comm->size; j++) {
            for (int64_t i = 0; i < count; i++) {
                hash_element(type, comm->rank, j, i, send + (j * count + i) * element);
            }
        }
        if (status == CPPARITY_OK) {
            status = cpparity_all_to_all(comm, send, receive, count, type, NULL, error);
        }
        for (int source = 0; status == CPPARITY_OK && source < comm->size; source++) {
            for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
                hash_element(type, source, comm->rank, i, expected);
                if (memcmp(receive + (source * count + i) * element, expected, (size_t)element)) {
                    status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                                "type %d: block %d element %lld misplaced",
                                                (int)type, source, (long long)i);
                }
            }
        }
        free(send);
        free(receive);
        CALL(status);
    }
    return CPPARITY_OK;
}

/* Rank r's contribution to element i of the floating-point sums: rank order matters. */
static double reduce_input(int rank, int64_t i) {
    if (i == 0) { /* ((1e16 + 1) + -1e16) + 0 ... is 0; (1e16 + -1e16) + 1 is 1 */
        return rank == 0 ? 1e16 : rank == 1 ? 1.0 : rank == 2 ? -1e16 : 0.0;
    }
    if (i == 1) { /* ((1 + 1e16) + -1e16) is 0; the reverse order gives 1 */
        return rank == 0 ? 1.0 : rank == 1 ? 1e16 : rank == 2 ? -1e16 : 0.0;
    }
    uint64_t state = (uint64_t)(rank * 1315423911u + (uint64_t)i * 2654435761u + 1);
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    double unit = (double)(state >> 11) / 9007199254740992.0 - 0.5;
    return unit * (rank % 2 == 0 ? 1e6 : 1e-3);
}

/* all_reduce_sum of float32 and float64 (in place and not): equal to the rank-order sum computed
 * here, and the same bits on every rank (gathered and compared). */
static cpparity_status check_all_reduce_float(cpparity_comm *comm, cpparity_error *error) {
    for (int t = 0; t < 2; t++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            double send64[MAX_COUNT], receive64[MAX_COUNT], expected64[MAX_COUNT];
            float send32[MAX_COUNT], receive32[MAX_COUNT], expected32[MAX_COUNT];
            for (int64_t i = 0; i < MAX_COUNT; i++) {
                send64[i] = reduce_input(comm->rank, i);
                send32[i] = (float)send64[i];
                expected64[i] = reduce_input(0, i);
                expected32[i] = (float)expected64[i];
                for (int rank = 1; rank < comm->size; rank++) {
                    expected64[i] += reduce_input(rank, i);
                    expected32[i] += (float)reduce_input(rank, i);
                }
            }
            cpparity_element_type type = t == 0 ? CPPARITY_FLOAT32 : CPPARITY_FLOAT64;
            void *send = t == 0 ? (void *)send32 : (void *)send64;
            void *receive = in_place ? send : t == 0 ? (void *)receive32 : (void *)receive64;
            const void *expected = t == 0 ? (void *)expected32 : (void *)expected64;
            size_t bytes = (size_t)(MAX_COUNT * cpparity_element_size(type));
            CALL(cpparity_all_reduce_sum(comm, send, receive, MAX_COUNT, type, NULL, error));
            CHECK(memcmp(receive, expected, bytes) == 0, error,
                  "type %d in_place %d: not the rank-order sum", (int)type, in_place);
            unsigned char *everyone = malloc(bytes * (size_t)comm->size);
            CHECK(everyone != NULL, error, "memory");
            cpparity_status status = cpparity_all_gather(comm, receive, everyone, (int64_t)bytes,
                                                         CPPARITY_INT8, NULL, error);
            for (int rank = 1; status == CPPARITY_OK && rank < comm->size; rank++) {
                if (memcmp(everyone, everyone + (size_t)rank * bytes, bytes) != 0) {
                    status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                                "type %d: rank %d's bits differ from rank 0's",
                                                (int)type, rank);
                }
            }
            free(everyone);
            CALL(status);
        }
    }
    return CPPARITY_OK;
}

/* all_reduce_sum of int64 and int8 (exact), and bfloat16 refused as not supported. */
static cpparity_status check_all_reduce_integer(cpparity_comm *comm, cpparity_error *error) {
    int64_t send64[MAX_COUNT], receive64[MAX_COUNT];
    int8_t send8[MAX_COUNT];
    for (int64_t i = 0; i < MAX_COUNT; i++) {
        send64[i] = (i * 7 + comm->rank * 5) % 61 - 30 + ((int64_t)comm->rank << 40);
        send8[i] = (int8_t)((i * 3 + comm->rank) % 21 - 10);
    }
    CALL(cpparity_all_reduce_sum(comm, send64, receive64, MAX_COUNT, CPPARITY_INT64, NULL, error));
    CALL(cpparity_all_reduce_sum(comm, send8, send8, MAX_COUNT, CPPARITY_INT8, NULL, error));
    for (int64_t i = 0; i < MAX_COUNT; i++) {
        int64_t expected64 = 0, expected8 = 0;
        for (int rank = 0; rank < comm->size; rank++) {
            expected64 += (i * 7 + rank * 5) % 61 - 30 + ((int64_t)rank << 40);
            expected8 += (i * 3 + rank) % 21 - 10;
        }
        CHECK(receive64[i] == expected64 && send8[i] == (int8_t)expected8, error,
              "element %lld: int64 %lld (expected %lld), int8 %d (expected %d)", (long long)i,
              (long long)receive64[i], (long long)expected64, send8[i], (int)expected8);
    }
    uint16_t half[2] = {0x3F80, 0x3F80};
    cpparity_error refused;
    cpparity_status status =
        cpparity_all_reduce_sum(comm, half, half, 2, CPPARITY_BFLOAT16, NULL, &refused);
    CHECK(status == CPPARITY_ERROR_INPUT && strstr(refused.message, "not supported") != NULL, error,
          "bfloat16 sum: status %d: %s", (int)status, refused.message);
    return CPPARITY_OK;
}

/* all_gather of f(r, 0, i), i < 3, for every type. */
static cpparity_status check_all_gather(cpparity_comm *comm, cpparity_error *error) {
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        cpparity_element_type type = all_types[t];
        int64_t element = cpparity_element_size(type);
        unsigned char send[3 * 8] = {0}, expected[8] = {0};
        unsigned char *receive = malloc((size_t)(comm->size * 3 * element));
        CHECK(receive != NULL, error, "memory");
        for (int64_t i = 0; i < 3; i++) {
            hash_element(type, comm->rank, 0, i, send + i * element);
        }
        cpparity_status status = cpparity_all_gather(comm, send, receive, 3, type, NULL, error);
        for (int source = 0; status == CPPARITY_OK && source < comm->size; source++) {
            for (int64_t i = 0; status == CPPARITY_OK && i < 3; i++) {
                hash_element(type, source, 0, i, expected);
                if (memcmp(receive + (source * 3 + i) * element, expected, (size_t)element)) {
                    status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                                "type %d: block %d element %lld wrong", (int)type,
                                                source, (long long)i);
                }
            }
        }
        free(receive);
        CALL(status);
    }
    return CPPARITY_OK;
}

/* The ring shift of f(rank, 2, i), i < 5, by offsets 1, −1, 2, size and 3 − 2·size, for every
 * type: the receive holds the send of rank − offset (mod size). */
static cpparity_status check_shift(cpparity_comm *comm, cpparity_error *error) {
    const int offsets[] = {1, -1, 2, comm->size, 3 - 2 * comm->size};
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        const cpparity_element_type type = all_types[t];
        const int64_t element = cpparity_element_size(type);
        for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
            unsigned char send[5 * 8] = {0}, receive[5 * 8] = {0}, expected[8] = {0};
            for (int64_t i = 0; i < 5; i++) {
                hash_element(type, comm->rank, 2, i, send + i * element);
            }
            CALL(cpparity_shift(comm, send, receive, 5, type, offsets[o], NULL, error));
            const int from =
                (int)(((comm->rank - offsets[o]) % comm->size + comm->size) % comm->size);
            for (int64_t i = 0; i < 5; i++) {
                hash_element(type, from, 2, i, expected);
                CHECK(memcmp(receive + i * element, expected, (size_t)element) == 0, error,
                      "type %d, offset %d, rank %d: element %lld is not rank %d's", (int)type,
                      offsets[o], comm->rank, (long long)i, from);
            }
        }
    }
    return CPPARITY_OK;
}

/* broadcast of 7 doubles from the last rank (non-zero when there are several). */
static cpparity_status check_broadcast(cpparity_comm *comm, cpparity_error *error) {
    int root = comm->size - 1;
    double buffer[7], expected;
    for (int64_t i = 0; i < 7; i++) {
        if (comm->rank == root) {
            hash_element(CPPARITY_FLOAT64, root, 1, i, &buffer[i]);
        } else {
            buffer[i] = -1.0;
        }
    }
    CALL(cpparity_broadcast(comm, buffer, 7, CPPARITY_FLOAT64, root, NULL, error));
    for (int64_t i = 0; i < 7; i++) {
        hash_element(CPPARITY_FLOAT64, root, 1, i, &expected);
        CHECK(buffer[i] == expected, error, "element %lld is %g, not %g", (long long)i, buffer[i],
              expected);
    }
    return CPPARITY_OK;
}

/* Bytes rank r sends in gather_bytes: 0, 2, 4, 0, 2, ... */
static int64_t gather_length(int rank) {
    return (rank % 3) * 2;
}

/* gather_bytes to the last rank with lengths including 0. */
static cpparity_status check_gather_bytes(cpparity_comm *comm, cpparity_error *error) {
    int root = comm->size - 1;
    int8_t send[8], expected;
    for (int64_t i = 0; i < gather_length(comm->rank); i++) {
        hash_element(CPPARITY_INT8, comm->rank, 2, i, &send[i]);
    }
    int64_t *sizes = comm->rank == root ? calloc((size_t)comm->size, sizeof *sizes) : NULL;
    CHECK(comm->rank != root || sizes != NULL, error, "memory");
    void *received = NULL;
    cpparity_status status =
        cpparity_gather_bytes(comm, send, gather_length(comm->rank), &received, sizes, root, error);
    if (status == CPPARITY_OK && comm->rank != root && received != NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "received set off the root");
    }
    if (status == CPPARITY_OK && comm->rank == root) {
        const int8_t *bytes = received;
        int64_t offset = 0;
        status = received != NULL
                     ? CPPARITY_OK
                     : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "root received NULL");
        for (int source = 0; status == CPPARITY_OK && source < comm->size; source++) {
            if (sizes[source] != gather_length(source)) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "sizes[%d] = %lld",
                                            source, (long long)sizes[source]);
            }
            for (int64_t i = 0; status == CPPARITY_OK && i < gather_length(source); i++) {
                hash_element(CPPARITY_INT8, source, 2, i, &expected);
                if (bytes[offset + i] != expected) {
                    status =
                        cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                           "byte %lld from rank %d wrong", (long long)i, source);
                }
            }
            offset += gather_length(source);
        }
    }
    free(received);
    free(sizes);
    return status;
}

/* agree_status: the last rank passes INPUT (→ INPUT everywhere), then all pass OK (→ OK). */
static cpparity_status check_agree_status(cpparity_comm *comm, cpparity_error *error) {
    cpparity_status agreed = CPPARITY_OK;
    CALL(cpparity_agree_status(
        comm, comm->rank == comm->size - 1 ? CPPARITY_ERROR_INPUT : CPPARITY_OK, &agreed, error));
    CHECK(agreed == CPPARITY_ERROR_INPUT, error, "agreed %d, expected 2", (int)agreed);
    CALL(cpparity_agree_status(comm, CPPARITY_OK, &agreed, error));
    CHECK(agreed == CPPARITY_OK, error, "agreed %d, expected 0", (int)agreed);
    return CPPARITY_OK;
}

/* split by parity with keys −rank: group ranks in reverse parent order; collectives in both
 * groups at once; a negative color gives NULL. */
static cpparity_status check_split(cpparity_comm *comm, cpparity_error *error) {
    cpparity_comm *group = NULL;
    CALL(cpparity_comm_split(comm, comm->rank % 2, -comm->rank, &group, error));
    CHECK(group != NULL, error, "no group");
    int members = (comm->size - comm->rank % 2 + 1) / 2;
    int highest = comm->size - 1 - ((comm->size - 1 - comm->rank) % 2); /* same parity */
    int expected_rank = (highest - comm->rank) / 2;
    cpparity_status status = CPPARITY_OK;
    if (group->size != members || group->rank != expected_rank ||
        group->world_rank != comm->world_rank || strcmp(group->kind, "mpi") != 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "group size %d rank %d world %d kind %s, expected %d %d %d",
                                    group->size, group->rank, group->world_rank, group->kind,
                                    members, expected_rank, comm->world_rank);
    }
    int64_t mine = comm->rank, gathered[64];
    if (status == CPPARITY_OK && group->size <= 64) {
        status = cpparity_all_gather(group, &mine, gathered, 1, CPPARITY_INT64, NULL, error);
    }
    for (int r = 0; status == CPPARITY_OK && r < group->size; r++) {
        if (gathered[r] != highest - 2 * r) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "group rank %d is parent %lld, expected %d", r,
                                        (long long)gathered[r], highest - 2 * r);
        }
    }
    double sum = (double)comm->rank, expected = 0.0;
    for (int r = 0; r < group->size; r++) {
        expected += (double)(highest - 2 * r);
    }
    if (status == CPPARITY_OK) {
        status = cpparity_all_reduce_sum(group, &sum, &sum, 1, CPPARITY_FLOAT64, NULL, error);
    }
    if (status == CPPARITY_OK && sum != expected) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "group sum %g, expected %g", sum,
                                    expected);
    }
    cpparity_comm_free(group);
    CALL(status);
    CALL(cpparity_comm_split(comm, comm->rank == 0 ? -1 : 0, 0, &group, error));
    status = (comm->rank == 0) == (group == NULL)
                 ? CPPARITY_OK
                 : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "negative color mishandled");
    cpparity_comm_free(group);
    return status;
}

/* The identity fields of the world communicator. */
static cpparity_status check_identity(cpparity_comm *comm, cpparity_error *error) {
    int world_rank = -1, world_size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    CHECK(strcmp(comm->kind, "mpi") == 0 && comm->rank == world_rank &&
              comm->world_rank == world_rank && comm->size == world_size,
          error, "kind %s rank %d world_rank %d size %d", comm->kind, comm->rank, comm->world_rank,
          comm->size);
    int stream = 0;
    double value = 0.0;
    cpparity_error refused;
    CHECK(cpparity_broadcast(comm, &value, 1, CPPARITY_FLOAT64, 0, &stream, &refused) ==
              CPPARITY_ERROR_INPUT,
          error, "non-NULL stream accepted");
    return CPPARITY_OK;
}

typedef struct named_check {
    const char *name;                                          /* printed on failure */
    cpparity_status (*run)(cpparity_comm *, cpparity_error *); /* the check */
} named_check;

static const named_check checks[] = {
    {"identity", check_identity},
    {"all_to_all", check_all_to_all},
    {"all_reduce_float", check_all_reduce_float},
    {"all_reduce_integer", check_all_reduce_integer},
    {"all_gather", check_all_gather},
    {"broadcast", check_broadcast},
    {"gather_bytes", check_gather_bytes},
    {"agree_status", check_agree_status},
    {"split", check_split},
    {"shift", check_shift},
};

/* Parses --timeout, --hang-rank, --compute-rank, --compute and --disagree-shift; false on
 * anything else. */
static bool parse_arguments(int argc, char **argv, double *timeout, int *hang_rank,
                            int *compute_rank, double *compute_seconds, bool *disagree_shift) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--disagree-shift") == 0) {
            *disagree_shift = true;
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            *timeout = atof(argv[++i]);
        } else if (strcmp(argv[i], "--hang-rank") == 0 && i + 1 < argc) {
            *hang_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--compute-rank") == 0 && i + 1 < argc) {
            *compute_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--compute") == 0 && i + 1 < argc) {
            *compute_seconds = atof(argv[++i]);
        } else {
            return false;
        }
    }
    return *timeout > 0.0;
}

/* Rank hang_rank skips an all_reduce_sum, says its job is over (comm_mpi_finished: it will call
 * no collective any more) and waits; the others must time out and abort the job. Returns only if
 * the job was not aborted (a failure). */
static void hang(cpparity_comm *comm, int hang_rank) {
    cpparity_error error;
    if (comm->rank == hang_rank) {
        comm_mpi_finished();
        const struct timespec pause = {0, 100000000L};
        for (double waited = 0.0; waited < 10.0 * comm->timeout_seconds + 10.0; waited += 0.1) {
            nanosleep(&pause, NULL);
        }
        fprintf(stderr, "mpi_comm_check: rank %d: the job was not aborted by the timeout\n",
                comm->rank);
        return;
    }
    double value = 1.0;
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT64, NULL, &error);
    fprintf(stderr, "mpi_comm_check: rank %d: all_reduce_sum without rank %d returned %d: %s\n",
            comm->rank, hang_rank, (int)status, status == CPPARITY_OK ? "" : error.message);
}

/* Rank 0 shifts by 2, the others by 1 (see --disagree-shift at the top); returns only if the
 * job was not aborted (a failure). */
static void disagree_shift(cpparity_comm *comm) {
    enum { COUNT = 1 << 22 }; /* 16 MiB of float32: far over any eager limit */
    float *send = calloc(COUNT, sizeof *send), *receive = calloc(COUNT, sizeof *receive);
    cpparity_error error;
    cpparity_status status = send == NULL || receive == NULL
                                 ? CPPARITY_ERROR_RUNTIME
                                 : cpparity_shift(comm, send, receive, COUNT, CPPARITY_FLOAT32,
                                                  comm->rank == 0 ? 2 : 1, NULL, &error);
    fprintf(stderr, "mpi_comm_check: rank %d: a shift the ranks disagree on returned %d\n",
            comm->rank, (int)status);
    free(send);
    free(receive);
}

/* Rank compute_rank computes (sleeps) for `seconds`, several timeouts, before it joins an
 * all_reduce_sum the others wait in: waiting for computation is not a hang, so every rank gets
 * the sum. Returns the status. */
static cpparity_status compute(cpparity_comm *comm, int compute_rank, double seconds,
                               cpparity_error *error) {
    if (comm->rank == compute_rank) {
        const struct timespec pause = {(time_t)seconds,
                                       (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&pause, NULL);
    }
    double value = 1.0;
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT64, NULL, error);
    if (status == CPPARITY_OK && value != (double)comm->size) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "the sum after waiting for rank %d is %g, not %d", compute_rank,
                                    value, comm->size);
    }
    return status;
}

int main(int argc, char **argv) {
    double timeout = 30.0, compute_seconds = 0.0;
    int hang_rank = -1, compute_rank = -1;
    bool disagreeing = false;
    int provided = 0; /* MPI_THREAD_MULTIPLE: as cpparity starts MPI (comm_mpi.c's watch) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (!parse_arguments(argc, argv, &timeout, &hang_rank, &compute_rank, &compute_seconds,
                         &disagreeing)) {
        fprintf(stderr, "usage: mpi_comm_check [--timeout SECONDS] [--hang-rank R] "
                        "[--compute-rank R --compute SECONDS] [--disagree-shift]\n");
        MPI_Finalize();
        return 2;
    }
    cpparity_comm *comm = NULL;
    cpparity_error error;
    if (comm_mpi_create_world(&comm, timeout, &error) != CPPARITY_OK) {
        fprintf(stderr, "mpi_comm_check: %s\n", error.message);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int passed = 0, failed = 0;
    for (size_t c = 0; c < sizeof checks / sizeof checks[0]; c++) {
        cpparity_error_clear(&error);
        cpparity_status status = checks[c].run(comm, &error);
        if (status != CPPARITY_OK) {
            fprintf(stderr, "mpi_comm_check: rank %d: FAIL %s: %s\n", comm->rank, checks[c].name,
                    error.message);
        }
        cpparity_status agreed = CPPARITY_ERROR_RUNTIME;
        cpparity_error agree_error;
        if (cpparity_agree_status(comm, status, &agreed, &agree_error) != CPPARITY_OK) {
            fprintf(stderr, "mpi_comm_check: rank %d: %s\n", comm->rank, agree_error.message);
            cpparity_comm_abort(comm, 1, "could not agree on a check's result");
        }
        passed += agreed == CPPARITY_OK;
        failed += agreed != CPPARITY_OK;
    }
    if (compute_rank >= 0) {
        cpparity_error_clear(&error);
        const cpparity_status status = compute(comm, compute_rank, compute_seconds, &error);
        if (status != CPPARITY_OK) {
            fprintf(stderr, "mpi_comm_check: rank %d: FAIL waiting for computation: %s\n",
                    comm->rank, error.message);
        }
        passed += status == CPPARITY_OK;
        failed += status != CPPARITY_OK;
    }
    if (hang_rank >= 0) {
        hang(comm, hang_rank);
        cpparity_comm_abort(comm, 4, "the timeout did not abort the job");
    }
    if (disagreeing) {
        disagree_shift(comm);
        cpparity_comm_abort(comm, 4, "the timeout did not abort the job");
    }
    if (comm->rank == 0) {
        printf("mpi_comm_check: %d passed, %d failed\n", passed, failed);
        fflush(stdout);
    }
    cpparity_comm_free(comm);
    MPI_Finalize();
    return failed > 0 ? 1 : 0;
}
