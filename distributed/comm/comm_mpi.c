/*
 * comm_mpi.c — the `mpi` communicator (see comm_mpi.h) over a duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, so that every failed MPI call comes back to MPI_CHECK, which records the
 * MPI error text, the world rank, the call and its source line.
 *
 * Every collective is started non-blocking (MPI_Ialltoall, MPI_Iallgather, ...) and completed by
 * polling MPI_Test, sleeping 50 µs between tests after the first spins, until it completes or the
 * deadline (comm->timeout_seconds) passes; then the rank prints "cpparity: rank R: MPI
 * <collective> timed out after T s", removes its temporary files and output claims
 * (common/temporary_files.h: MPI_Abort returns to no caller that could) and calls
 * MPI_Abort(comm, 3): the job stops, it never hangs, and leaves nothing behind.
 *
 * Waiting for computation is not a hang: when the deadline passes, the waiting rank asks every
 * other rank of the communicator what it is doing, on a duplicate of the world kept for these
 * queries; a thread of each process (MPI_THREAD_MULTIPLE) answers with its rank's state —
 * computing (outside every collective), waiting in a collective, or finished (its job's main
 * has returned) — and, when waiting, in which collective (the communicator's key and the
 * collective's number on it, the same on every rank by construction). If one answers
 * "computing" (the float64 reference of a long case, another group's item), the deadline moves
 * on by another timeout. If every other rank answers that it waits in this very collective, the
 * collective is in flight (every rank has entered it; only MPI's transfer remains): the deadline
 * moves on too, at most WATCH_IN_FLIGHT_GRACE times in a row. Otherwise — every other rank
 * waiting elsewhere (collectives called out of step: a real hang), finished, or not answering
 * within WATCH_REPLY_SECONDS (a stopped or stuck process answers nothing) — the request is
 * tested once more (it may have completed while the others answered) and the deadline fires.
 * Without MPI_THREAD_MULTIPLE waits are timed plainly.
 *
 * Floating-point sums do not use MPI_SUM, whose order is the library's choice: every rank
 * gathers all contributions (MPI_Iallgather) and adds them in rank order itself, so every rank
 * ends with the same bits as the local communicator (the vectors are small: gradients of a tiny
 * model). Integer sums use MPI_SUM, which is exact.
 */
#include "distributed/comm/comm_mpi.h"
#include "distributed/comm/mpi_check.h"

#include "common/monotonic_clock.h"
#include "common/temporary_files.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What an mpi communicator owns. */
typedef struct mpi_state {
    MPI_Comm communicator; /* private duplicate (or split) with MPI_ERRORS_RETURN */
    int *world_ranks;      /* (size) the world rank of each rank of the communicator */
    bool owns_watch;       /* the world communicator: it made the watch and ends it */
    uint64_t key;          /* the same on every rank of it, different from the job's others */
    int64_t collectives;   /* collectives begun on it: the current one's number */
} mpi_state;

static const cpparity_comm_operations mpi_operations;

/* --- waiting for computation is not a hang (see the top of this file) ----------------------- */

enum {
    WATCH_QUERY_TAG = 4242, /* "what are you doing?" (payload: the query's number) */
    WATCH_REPLY_TAG = 4243, /* the answer (payload: the query's number, the state) */
    WATCH_COMPUTING = 0,    /* outside every collective */
    WATCH_WAITING = 1,      /* waiting in a collective */
    WATCH_FINISHED = 2,     /* its job's main has returned */
};

/* Seconds a queried rank has to answer: a rank whose responder thread does not answer in that
 * time is stopped (SIGSTOP), stuck or gone, not computing. */
#define WATCH_REPLY_SECONDS 5.0

/* Timeouts in a row a collective every rank has entered may take to complete: MPI's transfer on
 * a loaded machine, bounded so that ranks agreeing on a collective that cannot complete (a ring
 * shift whose ranks disagree on the offset) still end. */
#define WATCH_IN_FLIGHT_GRACE 3

/* What the others answered (watch_survey). */
typedef enum watch_finding {
    WATCH_NOBODY_COMPUTES, /* waiting elsewhere, finished or silent: the deadline may fire */
    WATCH_SOMEONE_COMPUTES,
    WATCH_ALL_INSIDE, /* every other rank waits in this very collective */
} watch_finding;

/* The process's watch: its state for the others, and the thread that tells them. */
typedef struct mpi_watch {
    MPI_Comm control; /* MPI_COMM_NULL: no watch (waits are timed plainly) */
    int world_size;   /* ranks of the world */
    int world_rank;   /* this rank */
    atomic_int state; /* this rank's WATCH_* */
    /* while waiting: the collective waited in (set before state becomes WATCH_WAITING) */
    _Atomic uint64_t waiting_key;
    _Atomic int64_t waiting_number;
    atomic_bool stop;    /* the responder ends */
    pthread_t responder; /* answers the others' queries */
    bool responding;     /* the responder runs */
    int queries;         /* queries this rank has made (their numbers) */
} mpi_watch;

static mpi_watch watch = {.control = MPI_COMM_NULL};

/* The responder: answers every query with this rank's state, until told to stop. It runs while
 * the main thread computes (MPI_THREAD_MULTIPLE), and stops with the process: a stopped or
 * stuck process answers nothing. */
static void *watch_respond(void *unused) {
    (void)unused;
    const struct timespec pause = {0, 5000000L};
    while (!atomic_load(&watch.stop)) {
        int arrived = 0, number = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, WATCH_QUERY_TAG, watch.control, &arrived, &status) !=
            MPI_SUCCESS) {
            return NULL;
        }
        if (!arrived) {
            nanosleep(&pause, NULL);
            continue;
        }
        if (MPI_Recv(&number, 1, MPI_INT, status.MPI_SOURCE, WATCH_QUERY_TAG, watch.control,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return NULL;
        }
        const int64_t state = atomic_load(&watch.state);
        const int64_t reply[4] = {number, state, (int64_t)atomic_load(&watch.waiting_key),
                                  atomic_load(&watch.waiting_number)};
        if (MPI_Send(reply, 4, MPI_INT64_T, status.MPI_SOURCE, WATCH_REPLY_TAG, watch.control) !=
            MPI_SUCCESS) {
            return NULL;
        }
    }
    return NULL;
}

/* What the other ranks of comm are doing, while this one waits in comm's current collective:
 * asks each (its responder answers with its state) and waits up to WATCH_REPLY_SECONDS for the
 * answers. Someone computes if one answers so; all are inside if every other rank answers that
 * it waits in the same collective; a rank waiting elsewhere, finished, or not answering
 * (stopped, stuck, gone) is neither. */
static watch_finding watch_survey(const cpparity_comm *comm) {
    const mpi_state *state = comm->implementation;
    if (watch.control == MPI_COMM_NULL || !watch.responding || state->world_ranks == NULL) {
        return WATCH_NOBODY_COMPUTES;
    }
    const int number = ++watch.queries;
    int asked = 0, answered = 0, inside = 0;
    bool computing = false;
    for (int rank = 0; rank < comm->size; rank++) {
        const int world = state->world_ranks[rank];
        MPI_Request request;
        if (world == watch.world_rank || MPI_Isend(&number, 1, MPI_INT, world, WATCH_QUERY_TAG,
                                                   watch.control, &request) != MPI_SUCCESS) {
            continue;
        }
        MPI_Request_free(&request); /* a small send: it completes on its own */
        asked++;
    }
    const double give_up = monotonic_seconds() + WATCH_REPLY_SECONDS;
    const struct timespec pause = {0, 1000000L};
    while (answered < asked && !computing && monotonic_seconds() < give_up) {
        int arrived = 0;
        int64_t reply[4] = {0, 0, 0, 0};
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, WATCH_REPLY_TAG, watch.control, &arrived, &status) !=
            MPI_SUCCESS) {
            return WATCH_NOBODY_COMPUTES;
        }
        if (!arrived) {
            nanosleep(&pause, NULL);
            continue;
        }
        if (MPI_Recv(reply, 4, MPI_INT64_T, status.MPI_SOURCE, WATCH_REPLY_TAG, watch.control,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return WATCH_NOBODY_COMPUTES;
        }
        if (reply[0] == number) { /* an answer to an earlier query is stale */
            answered++;
            computing = reply[1] == WATCH_COMPUTING;
            inside += reply[1] == WATCH_WAITING && (uint64_t)reply[2] == state->key &&
                      reply[3] == state->collectives;
        }
    }
    if (computing) {
        return WATCH_SOMEONE_COMPUTES;
    }
    return asked > 0 && inside == asked ? WATCH_ALL_INSIDE : WATCH_NOBODY_COMPUTES;
}

/* Starts the watch on a duplicate of the world (collective: every rank creating its world), and
 * its responder when MPI runs with MPI_THREAD_MULTIPLE; without it waits are timed plainly. */
static void watch_start(void) {
    int size = 0, rank = 0, provided = MPI_THREAD_SINGLE;
    MPI_Comm control = MPI_COMM_NULL;
    if (watch.control != MPI_COMM_NULL || MPI_Query_thread(&provided) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &control) != MPI_SUCCESS) {
        return;
    }
    watch.control = control;
    watch.world_size = size;
    watch.world_rank = rank;
    watch.queries = 0;
    atomic_store(&watch.state, WATCH_COMPUTING);
    atomic_store(&watch.stop, false);
    watch.responding = provided == MPI_THREAD_MULTIPLE &&
                       pthread_create(&watch.responder, NULL, watch_respond, NULL) == 0;
}

/* Ends the watch: the responder stops, the duplicate is freed. */
static void watch_end(void) {
    if (watch.control == MPI_COMM_NULL) {
        return;
    }
    if (watch.responding) {
        atomic_store(&watch.stop, true);
        pthread_join(watch.responder, NULL);
        watch.responding = false;
    }
    MPI_Comm_free(&watch.control);
    watch.control = MPI_COMM_NULL;
}

/* See mpi_check.h. */
cpparity_status mpi_failure(int code, cpparity_error *error, const char *what, const char *call,
                            const char *file, int line) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "MPI error code %d", code);
    }
    int world_rank = -1, initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    }
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                              "MPI: %s failed on rank %d: %s returned \"%s\" (%s:%d)", what,
                              world_rank, call, text, file, line);
}

/* The MPI datatype of type; MPI_DATATYPE_NULL for an unknown type. bfloat16 moves as 16-bit
 * words (it is never summed here). */
static MPI_Datatype mpi_datatype(cpparity_element_type type) {
    switch (type) {
    case CPPARITY_FLOAT32:
        return MPI_FLOAT;
    case CPPARITY_FLOAT64:
        return MPI_DOUBLE;
    case CPPARITY_INT64:
        return MPI_INT64_T;
    case CPPARITY_INT8:
        return MPI_INT8_T;
    case CPPARITY_BFLOAT16:
        return MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
}

/* The communicator's MPI handle. */
static MPI_Comm mpi_handle(const cpparity_comm *comm) {
    return ((const mpi_state *)comm->implementation)->communicator;
}

/* Begins a collective (or the ring shift) on comm: every operation calls it first, on every
 * rank, so the current collective's number is the same on every rank. */
static void mpi_begin(cpparity_comm *comm) {
    ((mpi_state *)comm->implementation)->collectives++;
}

/* Completes request by polling MPI_Test until it is done or comm's deadline has passed (moved
 * on while the watch finds another rank computing, or the collective in flight; see the top of
 * this file); on timeout prints "cpparity: rank R: MPI <collective> timed out after T s" and
 * stops the job with MPI_Abort(comm, 3) (returning CPPARITY_ERROR_RUNTIME only should MPI_Abort
 * return). */
static cpparity_status mpi_wait(const cpparity_comm *comm, MPI_Request *request,
                                const char *collective, cpparity_error *error) {
    const mpi_state *state = comm->implementation;
    double deadline = monotonic_seconds() + comm->timeout_seconds;
    const struct timespec pause = {0, 50000L};
    int in_flight = 0; /* deadlines moved on in a row because every rank is inside */
    atomic_store(&watch.waiting_key, state->key);
    atomic_store(&watch.waiting_number, state->collectives);
    atomic_store(&watch.state, WATCH_WAITING);
    for (int spins = 0;; spins++) {
        int done = 0;
        int tested = MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (tested == MPI_SUCCESS && !done && monotonic_seconds() > deadline) {
            const watch_finding finding = watch_survey(comm);
            if (finding == WATCH_SOMEONE_COMPUTES ||
                (finding == WATCH_ALL_INSIDE && in_flight < WATCH_IN_FLIGHT_GRACE)) {
                in_flight = finding == WATCH_ALL_INSIDE ? in_flight + 1 : 0;
                deadline = monotonic_seconds() + comm->timeout_seconds; /* not a hang */
                continue;
            }
            /* the survey took time: the collective may have completed meanwhile */
            tested = MPI_Test(request, &done, MPI_STATUS_IGNORE);
            if (tested == MPI_SUCCESS && !done) {
                fprintf(stderr, "cpparity: rank %d: MPI %s timed out after %g s%s\n",
                        comm->world_rank, collective, comm->timeout_seconds,
                        finding == WATCH_ALL_INSIDE
                            ? " (every rank had entered it; MPI did not complete it)"
                            : "");
                fflush(stderr);
                temporary_files_remove_all(); /* MPI_Abort ends this process: no claim left */
                MPI_Abort(mpi_handle(comm), 3);
                atomic_store(&watch.state, WATCH_COMPUTING);
                return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                          "mpi communicator: %s timed out after %g s on rank %d "
                                          "and MPI_Abort returned",
                                          collective, comm->timeout_seconds, comm->world_rank);
            }
        }
        if (tested != MPI_SUCCESS || done) {
            atomic_store(&watch.state, WATCH_COMPUTING);
        }
        MPI_CHECK(tested, error, collective);
        if (done) {
            return CPPARITY_OK;
        }
        if (spins >= 64) {
            nanosleep(&pause, NULL);
        }
    }
}

/* What only the mpi communicator checks (comm.c has checked the rest): the stream must be NULL
 * (MPI moves host memory here) and `blocks` blocks of count elements must fit MPI's int counts. */
static cpparity_status mpi_check_buffers(const cpparity_comm *comm, const char *collective,
                                         int64_t count, int64_t blocks, const void *stream,
                                         cpparity_error *error) {
    if (stream != NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mpi communicator: %s on rank %d: stream must be NULL (the mpi "
                                  "communicator moves host memory)",
                                  collective, comm->world_rank);
    }
    if (count > INT_MAX / blocks) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mpi communicator: %s on rank %d: count %lld out of range (MPI "
                                  "counts are int)",
                                  collective, comm->world_rank, (long long)count);
    }
    return CPPARITY_OK;
}

/* all_to_all (see comm.h). */
static cpparity_status mpi_all_to_all(cpparity_comm *comm, const void *send, void *receive,
                                      int64_t count_per_rank, cpparity_element_type type,
                                      void *stream, cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status =
        mpi_check_buffers(comm, "all_to_all", count_per_rank, comm->size, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    MPI_Request request;
    MPI_Datatype datatype = mpi_datatype(type);
    MPI_CHECK(MPI_Ialltoall(send, (int)count_per_rank, datatype, receive, (int)count_per_rank,
                            datatype, mpi_handle(comm), &request),
              error, "all_to_all");
    return mpi_wait(comm, &request, "all_to_all", error);
}

/* Gathers count elements from every rank into gathered (size · count elements). */
static cpparity_status mpi_gather_all(const cpparity_comm *comm, const void *send, void *gathered,
                                      int64_t count, cpparity_element_type type,
                                      const char *collective, cpparity_error *error) {
    MPI_Request request;
    MPI_Datatype datatype = mpi_datatype(type);
    MPI_CHECK(MPI_Iallgather(send, (int)count, datatype, gathered, (int)count, datatype,
                             mpi_handle(comm), &request),
              error, collective);
    return mpi_wait(comm, &request, collective, error);
}

/* receive[i] = ((all[0][i] + all[1][i]) + all[2][i]) + ... for `ranks` rows of count elements
 * (float32 or float64). */
static void mpi_sum_in_rank_order(const void *all, void *receive, int64_t count, int ranks,
                                  cpparity_element_type type) {
    for (int64_t i = 0; i < count; i++) {
        if (type == CPPARITY_FLOAT32) {
            const float *rows = all;
            float sum = rows[i];
            for (int rank = 1; rank < ranks; rank++) {
                sum += rows[rank * count + i];
            }
            ((float *)receive)[i] = sum;
        } else {
            const double *rows = all;
            double sum = rows[i];
            for (int rank = 1; rank < ranks; rank++) {
                sum += rows[rank * count + i];
            }
            ((double *)receive)[i] = sum;
        }
    }
}

/* all_reduce_sum (see comm.h): floating types gathered and summed in rank order here, integers
 * with MPI_SUM; bfloat16 is refused. */
static cpparity_status mpi_all_reduce_sum(cpparity_comm *comm, const void *send, void *receive,
                                          int64_t count, cpparity_element_type type, void *stream,
                                          cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status = mpi_check_buffers(
        comm, "all_reduce_sum", count,
        type == CPPARITY_FLOAT32 || type == CPPARITY_FLOAT64 ? comm->size : 1, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (type == CPPARITY_BFLOAT16) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mpi communicator: all_reduce_sum on rank %d: bfloat16 sums are "
                                  "not supported on the CPU",
                                  comm->world_rank);
    }
    if (type == CPPARITY_INT64 || type == CPPARITY_INT8) {
        MPI_Request request;
        MPI_CHECK(MPI_Iallreduce(send == receive ? MPI_IN_PLACE : send, receive, (int)count,
                                 mpi_datatype(type), MPI_SUM, mpi_handle(comm), &request),
                  error, "all_reduce_sum");
        return mpi_wait(comm, &request, "all_reduce_sum", error);
    }
    size_t bytes = (size_t)(comm->size * count * cpparity_element_size(type));
    void *all = malloc(bytes > 0 ? bytes : 1);
    if (all == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "mpi communicator: all_reduce_sum on rank %d: out of memory for "
                                  "%zu bytes",
                                  comm->world_rank, bytes);
    }
    status = mpi_gather_all(comm, send, all, count, type, "all_reduce_sum", error);
    if (status == CPPARITY_OK) {
        mpi_sum_in_rank_order(all, receive, count, comm->size, type);
    }
    free(all);
    return status;
}

/* all_gather (see comm.h). */
static cpparity_status mpi_all_gather(cpparity_comm *comm, const void *send, void *receive,
                                      int64_t count_per_rank, cpparity_element_type type,
                                      void *stream, cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status =
        mpi_check_buffers(comm, "all_gather", count_per_rank, comm->size, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    return mpi_gather_all(comm, send, receive, count_per_rank, type, "all_gather", error);
}

/* The tag of the ring shift's messages (point to point, in call order on each pair of ranks). */
#define MPI_SHIFT_TAG 0x51f7

/* shift (see comm.h): MPI_Irecv from rank − offset and MPI_Isend to rank + offset, each waited for
 * under the deadline. Ranks that disagree on the offset meet no partner and time out. */
static cpparity_status mpi_shift(cpparity_comm *comm, const void *send, void *receive,
                                 int64_t count, cpparity_element_type type, int offset,
                                 void *stream, cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status = mpi_check_buffers(comm, "shift", count, 1, stream, error);
    if (status != CPPARITY_OK || count == 0) {
        return status;
    }
    const int to = (comm->rank + offset) % comm->size;
    const int from = (comm->rank - offset + comm->size) % comm->size;
    MPI_Request requests[2];
    MPI_CHECK(MPI_Irecv(receive, (int)count, mpi_datatype(type), from, MPI_SHIFT_TAG,
                        mpi_handle(comm), &requests[0]),
              error, "shift");
    MPI_CHECK(MPI_Isend(send, (int)count, mpi_datatype(type), to, MPI_SHIFT_TAG, mpi_handle(comm),
                        &requests[1]),
              error, "shift");
    status = mpi_wait(comm, &requests[0], "shift", error);
    return status != CPPARITY_OK ? status : mpi_wait(comm, &requests[1], "shift", error);
}

/* broadcast (see comm.h). */
static cpparity_status mpi_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                     cpparity_element_type type, int root, void *stream,
                                     cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status = mpi_check_buffers(comm, "broadcast", count, 1, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    MPI_Request request;
    MPI_CHECK(MPI_Ibcast(buffer, (int)count, mpi_datatype(type), root, mpi_handle(comm), &request),
              error, "broadcast");
    return mpi_wait(comm, &request, "broadcast", error);
}

/* The second step of gather_bytes: every rank's bytes into `gathered` on root, where counts and
 * displacements (int, size entries) describe them; non-roots pass NULLs. */
static cpparity_status mpi_gather_bytes_data(const cpparity_comm *comm, const void *send,
                                             int send_bytes, void *gathered, const int *counts,
                                             const int *displacements, int root,
                                             cpparity_error *error) {
    MPI_Request request;
    MPI_CHECK(MPI_Igatherv(send, send_bytes, MPI_BYTE, gathered, counts, displacements, MPI_BYTE,
                           root, mpi_handle(comm), &request),
              error, "gather_bytes");
    return mpi_wait(comm, &request, "gather_bytes", error);
}

/* gather_bytes (see comm.h): MPI_Igather of the lengths, then MPI_Igatherv of the bytes. If the
 * root cannot hold the total (over INT_MAX bytes or out of memory) it returns the error and the
 * other ranks end in the timeout. */
static cpparity_status mpi_gather_bytes(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                        void **received, int64_t *sizes, int root,
                                        cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status = CPPARITY_OK;
    const bool is_root = comm->rank == root;
    if (send_bytes > INT_MAX) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mpi communicator: gather_bytes on rank %d: %lld bytes, over "
                                  "MPI's limit of INT_MAX",
                                  comm->world_rank, (long long)send_bytes);
    }
    MPI_Request request;
    MPI_CHECK(MPI_Igather(&send_bytes, 1, MPI_INT64_T, is_root ? sizes : NULL, 1, MPI_INT64_T, root,
                          mpi_handle(comm), &request),
              error, "gather_bytes");
    status = mpi_wait(comm, &request, "gather_bytes", error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (!is_root) {
        return mpi_gather_bytes_data(comm, send, (int)send_bytes, NULL, NULL, NULL, root, error);
    }
    int64_t total = 0;
    for (int rank = 0; rank < comm->size; rank++) {
        total += sizes[rank];
    }
    if (total > INT_MAX) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mpi communicator: gather_bytes on rank %d: %lld bytes in all, "
                                  "over the MPI limit of INT_MAX",
                                  comm->world_rank, (long long)total);
    }
    int *counts = malloc(2 * (size_t)comm->size * sizeof *counts);
    char *gathered = malloc(total > 0 ? (size_t)total : 1);
    if (counts == NULL || gathered == NULL) {
        free(counts);
        free(gathered);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "mpi communicator: gather_bytes on rank %d: out of memory for "
                                  "%lld bytes",
                                  comm->world_rank, (long long)total);
    }
    int *displacements = counts + comm->size;
    int offset = 0;
    for (int rank = 0; rank < comm->size; rank++) {
        counts[rank] = (int)sizes[rank];
        displacements[rank] = offset;
        offset += counts[rank];
    }
    status = mpi_gather_bytes_data(comm, send, (int)send_bytes, gathered, counts, displacements,
                                   root, error);
    free(counts);
    if (status != CPPARITY_OK) {
        free(gathered);
        return status;
    }
    *received = gathered;
    return CPPARITY_OK;
}

/* agree_status (see comm.h): MPI_MAX over the ranks' statuses. */
static cpparity_status mpi_agree_status(cpparity_comm *comm, cpparity_status local,
                                        cpparity_status *agreed, cpparity_error *error) {
    mpi_begin(comm);
    int mine = (int)local, largest = 0;
    MPI_Request request;
    MPI_CHECK(MPI_Iallreduce(&mine, &largest, 1, MPI_INT, MPI_MAX, mpi_handle(comm), &request),
              error, "agree_status");
    cpparity_status status = mpi_wait(comm, &request, "agree_status", error);
    if (status == CPPARITY_OK) {
        *agreed = (cpparity_status)largest;
    }
    return status;
}

/* Wraps an MPI communicator (already given MPI_ERRORS_RETURN) as a cpparity_comm; on failure
 * frees nothing (the caller frees `handle`). */
static cpparity_status mpi_wrap(MPI_Comm handle, int world_rank, double timeout_seconds,
                                uint64_t key, cpparity_comm **result, cpparity_error *error) {
    int rank = 0, size = 0;
    MPI_CHECK(MPI_Comm_rank(handle, &rank), error, "creating a communicator");
    MPI_CHECK(MPI_Comm_size(handle, &size), error, "creating a communicator");
    cpparity_comm *comm = calloc(1, sizeof *comm);
    mpi_state *state = calloc(1, sizeof *state);
    if (comm == NULL || state == NULL) {
        free(comm);
        free(state);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "mpi communicator: out of memory on rank %d", world_rank);
    }
    state->communicator = handle;
    state->key = key;
    state->world_ranks = malloc((size_t)size * sizeof *state->world_ranks);
    MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
    int *ranks = malloc((size_t)size * sizeof *ranks);
    if (state->world_ranks == NULL || ranks == NULL ||
        MPI_Comm_group(handle, &group) != MPI_SUCCESS ||
        MPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS) {
        free(state->world_ranks);
        state->world_ranks = NULL; /* the watch then never extends this one's deadlines */
    }
    for (int r = 0; ranks != NULL && r < size; r++) {
        ranks[r] = r;
    }
    if (state->world_ranks != NULL &&
        MPI_Group_translate_ranks(group, size, ranks, world_group, state->world_ranks) !=
            MPI_SUCCESS) {
        free(state->world_ranks);
        state->world_ranks = NULL;
    }
    free(ranks);
    if (group != MPI_GROUP_NULL) {
        MPI_Group_free(&group);
    }
    if (world_group != MPI_GROUP_NULL) {
        MPI_Group_free(&world_group);
    }
    comm->operations = &mpi_operations;
    comm->kind = "mpi";
    comm->rank = rank;
    comm->size = size;
    comm->world_rank = world_rank;
    comm->timeout_seconds = timeout_seconds;
    comm->implementation = state;
    *result = comm;
    return CPPARITY_OK;
}

/* Waits for every rank of comm to arrive (MPI_Ibarrier against the deadline), so that the
 * blocking MPI_Comm_split after it cannot hang on a missing rank. */
static cpparity_status mpi_split_barrier(const cpparity_comm *comm, cpparity_error *error) {
    MPI_Request request;
    MPI_CHECK(MPI_Ibarrier(mpi_handle(comm), &request), error, "split");
    return mpi_wait(comm, &request, "split", error);
}

/* A communicator's key from what every rank of it knows alike (splitmix64's finaliser over
 * the parts): different keys for different communicators of the job, but for a collision. */
static uint64_t mpi_key(uint64_t parent, uint64_t collective, uint64_t color) {
    uint64_t key = parent;
    const uint64_t parts[2] = {collective, color};
    for (int part = 0; part < 2; part++) {
        key ^= parts[part] + 0x9e3779b97f4a7c15ULL + (key << 6) + (key >> 2);
        key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
        key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
        key ^= key >> 31;
    }
    return key;
}

/* Sets MPI_ERRORS_RETURN on handle and wraps it with key; frees handle on failure. */
static cpparity_status mpi_adopt(MPI_Comm handle, int world_rank, double timeout_seconds,
                                 uint64_t key, cpparity_comm **result, cpparity_error *error) {
    int code = MPI_Comm_set_errhandler(handle, MPI_ERRORS_RETURN);
    cpparity_status status =
        code == MPI_SUCCESS
            ? mpi_wrap(handle, world_rank, timeout_seconds, key, result, error)
            : mpi_failure(code, error, "creating a communicator",
                          "MPI_Comm_set_errhandler(handle, MPI_ERRORS_RETURN)", __FILE__, __LINE__);
    if (status != CPPARITY_OK) {
        MPI_Comm_free(&handle);
    }
    return status;
}

/* split (see comm.h): MPI_Comm_split after a timed barrier; a negative color (MPI_UNDEFINED)
 * gives *result = NULL. The new communicator keeps the world rank and the timeout. */
static cpparity_status mpi_split(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                                 cpparity_error *error) {
    mpi_begin(comm);
    cpparity_status status = mpi_split_barrier(comm, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    MPI_Comm handle = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(mpi_handle(comm), color < 0 ? MPI_UNDEFINED : color, key, &handle),
              error, "split");
    if (handle == MPI_COMM_NULL) {
        return CPPARITY_OK;
    }
    const mpi_state *parent = comm->implementation; /* the split's collective number: the same */
    return mpi_adopt(handle, comm->world_rank, comm->timeout_seconds,
                     mpi_key(parent->key, (uint64_t)parent->collectives, (uint64_t)color), result,
                     error);
}

/* abort (see comm.h): prints "cpparity: rank R: message" and calls MPI_Abort(MPI_COMM_WORLD,
 * code), which ends every process of the job. */
static void mpi_abort(cpparity_comm *comm, int code, const char *message) {
    fprintf(stderr, "cpparity: rank %d: %s\n", comm->world_rank,
            message != NULL ? message : "(no message)");
    fflush(stderr);
    temporary_files_remove_all(); /* MPI_Abort ends this process: no claim left behind */
    MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code); /* MPI_Abort does not return; should it, the job still ends */
}

/* free (see comm.h): frees the MPI communicator unless MPI is already finalized. */
static void mpi_free(cpparity_comm *comm) {
    mpi_state *state = comm->implementation;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && state->communicator != MPI_COMM_NULL) {
        MPI_Comm_free(&state->communicator);
    }
    if (!finalized && state->owns_watch) {
        watch_end();
    }
    free(state->world_ranks);
    free(state);
    free(comm);
}

static const cpparity_comm_operations mpi_operations = {
    .all_to_all = mpi_all_to_all,
    .all_reduce_sum = mpi_all_reduce_sum,
    .all_gather = mpi_all_gather,
    .broadcast = mpi_broadcast,
    .gather_bytes = mpi_gather_bytes,
    .agree_status = mpi_agree_status,
    .split = mpi_split,
    .shift = mpi_shift,
    .abort = mpi_abort,
    .free = mpi_free,
};

void comm_mpi_finished(void) {
    atomic_store(&watch.state, WATCH_FINISHED);
}

bool comm_mpi_detected(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

void comm_mpi_library_version(char *text, size_t size) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int length = 0;
    if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) {
        snprintf(version, sizeof version, "MPI (version unavailable)");
    }
    version[strcspn(version, ",\n")] = '\0';
    snprintf(text, size, "%s", version);
}

/* MPI_Init_thread with errors returned on MPI_COMM_WORLD; *initialised_here says whether this
 * call started MPI (and so must finalise it). */
static cpparity_status mpi_start(bool *initialised_here, cpparity_error *error) {
    int initialized = 0, finalized = 0, provided = 0;
    *initialised_here = false;
    MPI_CHECK(MPI_Initialized(&initialized), error, "starting MPI");
    MPI_CHECK(MPI_Finalized(&finalized), error, "starting MPI");
    if (finalized) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "mpi communicator: MPI was already finalised in this process");
    }
    if (!initialized) {
        /* MPI_THREAD_MULTIPLE for the watch's responder thread (see the top of this file); with
         * less, waits are timed plainly */
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), error,
                  "starting MPI");
        *initialised_here = true;
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), error, "starting MPI");
    return CPPARITY_OK;
}

cpparity_status comm_mpi_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                void *argument, int *exit_code, cpparity_error *error) {
    *exit_code = 3;
    if (main == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "comm_mpi_launch: no job to run");
    }
    bool initialised_here = false;
    cpparity_status status = mpi_start(&initialised_here, error);
    cpparity_comm *world = NULL;
    if (status == CPPARITY_OK) {
        status = comm_mpi_create_world(&world, timeout_seconds, error);
    }
    if (status == CPPARITY_OK && ranks != 0 && ranks != world->size) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "mpi communicator: asked for %d ranks, the MPI job has %d (the "
                                    "launcher sets them: mpirun -np %d)",
                                    ranks, world->size, ranks);
    }
    if (status == CPPARITY_OK) {
        *exit_code = main(world, argument);
        comm_mpi_finished();
    }
    cpparity_comm_free(world);
    if (initialised_here) {
        const int code = MPI_Finalize();
        if (code != MPI_SUCCESS && status == CPPARITY_OK) {
            status =
                mpi_failure(code, error, "finalising MPI", "MPI_Finalize()", __FILE__, __LINE__);
            *exit_code = *exit_code > 3 ? *exit_code : 3;
        }
    }
    return status;
}

cpparity_status comm_mpi_create_world(cpparity_comm **comm, double timeout_seconds,
                                      cpparity_error *error) {
    if (comm == NULL || !(timeout_seconds > 0.0)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "comm_mpi_create_world: need a result pointer and a positive "
                                  "timeout (got %g s)",
                                  timeout_seconds);
    }
    *comm = NULL;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "comm_mpi_create_world: MPI is not initialised (or already "
                                  "finalized)");
    }
    int world_rank = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), error, "creating the world");
    MPI_Comm handle = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &handle), error, "creating the world");
    const bool watching = watch.control == MPI_COMM_NULL;
    watch_start();
    static uint64_t worlds = 0; /* worlds made in this process: every rank makes them alike */
    cpparity_status status =
        mpi_adopt(handle, world_rank, timeout_seconds, mpi_key(0, 0, ++worlds), comm, error);
    if (status == CPPARITY_OK && watching) {
        ((mpi_state *)(*comm)->implementation)->owns_watch = true;
    } else if (watching) {
        watch_end();
    }
    return status;
}
