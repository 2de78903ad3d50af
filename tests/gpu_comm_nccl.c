/*
 * gpu_comm_nccl.c — checks the `nccl` communicator (distributed/comm/comm_nccl.h) with one rank on
 * one GPU, as a one-GPU machine without MPI runs it: every collective for every element type on
 * device buffers (the default stream and a stream of its own) and on host buffers (pageable,
 * pinned, managed, and host and device mixed in one call), in place and not; gather_bytes,
 * agree_status, a split (and a negative color); abort, after which every call of the job fails
 * at once; and a deadline: a host function holds the stream past a 1 s timeout, the collective
 * fails naming itself and the timeout, and the communicator is unusable afterwards.
 *
 * Without a CUDA device it checks that the launch fails as it must (CPPARITY_ERROR_RUNTIME,
 * "--comm nccl: no CUDA device", the job never called) and that asking for 2 ranks without
 * mpirun is bad input, then exits 77 (skipped) saying why.
 *
 * Prints "gpu_comm_nccl: N passed, M failed"; exits 1 on any failure, 3 when the job could not
 * start.
 */
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/monotonic_clock.h"
#include "distributed/comm/comm.h"
#include "distributed/comm/comm_nccl.h"
#include "distributed/device/cuda_check.h"
#include "tests/support/comm_hash.h"

enum { SKIPPED = 77, MAX_BYTES = 512 };

#define TIMEOUT 60.0        /* seconds: never reached by a passing check */
#define SHORT_TIMEOUT 1.0   /* seconds: the deadline check */
#define HOLD_SECONDS 3      /* how long the host function holds the stream */
#define AT_ONCE_SECONDS 0.5 /* a call on an aborted communicator must fail within this */

/* Returns the status of a call from the enclosing function when it failed. */
#define CALL(call)                                                                                 \
    do {                                                                                           \
        const cpparity_status call_status_ = (call);                                               \
        if (call_status_ != CPPARITY_OK) {                                                         \
            return call_status_;                                                                   \
        }                                                                                          \
    } while (0)

/* Fails the check with a message when condition is false. */
#define CHECK(condition, error, ...)                                                               \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            return cpparity_error_set((error), CPPARITY_ERROR_RUNTIME, __VA_ARGS__);               \
        }                                                                                          \
    } while (0)

static const cpparity_element_type all_types[] = {CPPARITY_FLOAT32, CPPARITY_FLOAT64,
                                                  CPPARITY_INT64, CPPARITY_INT8, CPPARITY_BFLOAT16};
#define TYPE_COUNT ((int)(sizeof all_types / sizeof *all_types))

/* Where a buffer of a check lives. */
typedef enum placement {
    PLACE_DEVICE = 0,   /* cudaMalloc */
    PLACE_PAGEABLE = 1, /* malloc */
    PLACE_PINNED = 2,   /* cudaMallocHost */
    PLACE_MANAGED = 3,  /* cudaMallocManaged */
} placement;

static const char *const placement_names[] = {"device", "pageable", "pinned", "managed"};

/* One way of calling the collectives: where send and receive live, and on which stream. */
typedef struct setup {
    placement send;    /* also the buffer of broadcast and of in-place calls */
    placement receive; /* receive buffers */
    bool own_stream;   /* a stream of its own, else the default stream (NULL) */
} setup;

static const setup setups[] = {
    {PLACE_DEVICE, PLACE_DEVICE, false},     {PLACE_DEVICE, PLACE_DEVICE, true},
    {PLACE_PAGEABLE, PLACE_PAGEABLE, false}, {PLACE_PAGEABLE, PLACE_PAGEABLE, true},
    {PLACE_PINNED, PLACE_PINNED, true},      {PLACE_MANAGED, PLACE_MANAGED, false},
    {PLACE_DEVICE, PLACE_PAGEABLE, true},    {PLACE_PAGEABLE, PLACE_DEVICE, false},
};
#define SETUP_COUNT ((int)(sizeof setups / sizeof *setups))

/* The tally every check adds to. */
typedef struct tally {
    int passed; /* checks that passed */
    int failed; /* checks that failed (each printed) */
} tally;

static void record(tally *counts, const char *name, cpparity_status status,
                   const cpparity_error *error) {
    if (status == CPPARITY_OK) {
        counts->passed++;
    } else {
        counts->failed++;
        fprintf(stderr, "gpu_comm_nccl: FAILED %s: %s\n", name, error->message);
    }
}

/* A buffer of bytes in place `where`, holding initial (bytes of it). */
static cpparity_status buffer_make(placement where, const void *initial, size_t bytes,
                                   void **buffer, cpparity_error *error) {
    *buffer = NULL;
    switch (where) {
    case PLACE_DEVICE:
        CUDA_CHECK(cudaMalloc(buffer, bytes), error, "allocating a device buffer");
        CUDA_CHECK(cudaMemcpy(*buffer, initial, bytes, cudaMemcpyHostToDevice), error,
                   "filling a device buffer");
        /* a copy from pageable memory may return before its DMA ends, and the collective may run
         * on a non-blocking stream: let the copy finish first */
        CUDA_CHECK(cudaDeviceSynchronize(), error, "filling a device buffer");
        return CPPARITY_OK;
    case PLACE_PAGEABLE:
        *buffer = malloc(bytes);
        CHECK(*buffer != NULL, error, "out of memory");
        break;
    case PLACE_PINNED:
        CUDA_CHECK(cudaMallocHost(buffer, bytes), error, "allocating a pinned buffer");
        break;
    case PLACE_MANAGED:
        CUDA_CHECK(cudaMallocManaged(buffer, bytes, cudaMemAttachGlobal), error,
                   "allocating a managed buffer");
        break;
    }
    memcpy(*buffer, initial, bytes);
    return CPPARITY_OK;
}

/* Copies a buffer's bytes to host memory. */
static cpparity_status buffer_read(placement where, const void *buffer, size_t bytes, void *host,
                                   cpparity_error *error) {
    if (where == PLACE_DEVICE) {
        CUDA_CHECK(cudaMemcpy(host, buffer, bytes, cudaMemcpyDeviceToHost), error,
                   "reading a device buffer");
    } else {
        memcpy(host, buffer, bytes);
    }
    return CPPARITY_OK;
}

static void buffer_free(placement where, void *buffer) {
    if (buffer == NULL) {
        return;
    }
    switch (where) {
    case PLACE_DEVICE:
    case PLACE_MANAGED:
        cudaFree(buffer);
        break;
    case PLACE_PAGEABLE:
        free(buffer);
        break;
    case PLACE_PINNED:
        cudaFreeHost(buffer);
        break;
    }
}

/* The collectives checked on every setup and type. */
typedef enum collective {
    COLLECTIVE_ALL_TO_ALL = 0,
    COLLECTIVE_ALL_GATHER = 1,
    COLLECTIVE_ALL_REDUCE = 2,
    COLLECTIVE_ALL_REDUCE_IN_PLACE = 3,
    COLLECTIVE_BROADCAST = 4,
    COLLECTIVE_SHIFT = 5, /* the ring step: on one rank, to itself */
    COLLECTIVE_COUNT = 6,
} collective;

static const char *const collective_names[] = {
    "all_to_all", "all_gather", "all_reduce_sum", "all_reduce_sum in place", "broadcast", "shift"};
static const int64_t collective_counts[] = {5, 3, 6, 6, 7, 4};

/* Runs one collective of one type on one setup (one rank: every result equals the input) and
 * compares the result with the hash values sent. */
static cpparity_status check_one(cpparity_comm *comm, const setup *how, cudaStream_t stream,
                                 collective which, cpparity_element_type type,
                                 cpparity_error *error) {
    const int64_t count = collective_counts[which];
    const size_t element = (size_t)cpparity_element_size(type);
    const size_t bytes = (size_t)count * element;
    unsigned char sent[MAX_BYTES], sentinel[MAX_BYTES], got[MAX_BYTES];
    for (int64_t i = 0; i < count; i++) {
        hash_element(type, 0, (int)which, i, sent + (size_t)i * element);
    }
    memset(sentinel, 0xA5, sizeof sentinel);
    const bool in_place = which == COLLECTIVE_ALL_REDUCE_IN_PLACE || which == COLLECTIVE_BROADCAST;
    void *send = NULL, *receive = NULL;
    cpparity_status status = buffer_make(how->send, sent, bytes, &send, error);
    if (status == CPPARITY_OK && !in_place) {
        status = buffer_make(how->receive, sentinel, bytes, &receive, error);
    }
    if (status == CPPARITY_OK) {
        switch (which) {
        case COLLECTIVE_ALL_TO_ALL:
            status = cpparity_all_to_all(comm, send, receive, count, type, stream, error);
            break;
        case COLLECTIVE_ALL_GATHER:
            status = cpparity_all_gather(comm, send, receive, count, type, stream, error);
            break;
        case COLLECTIVE_ALL_REDUCE:
            status = cpparity_all_reduce_sum(comm, send, receive, count, type, stream, error);
            break;
        case COLLECTIVE_ALL_REDUCE_IN_PLACE:
            status = cpparity_all_reduce_sum(comm, send, send, count, type, stream, error);
            break;
        case COLLECTIVE_SHIFT:
            status = cpparity_shift(comm, send, receive, count, type, 1, stream, error);
            break;
        case COLLECTIVE_BROADCAST:
        case COLLECTIVE_COUNT:
            status = cpparity_broadcast(comm, send, count, type, 0, stream, error);
            break;
        }
    }
    if (status == CPPARITY_OK) {
        status = in_place ? buffer_read(how->send, send, bytes, got, error)
                          : buffer_read(how->receive, receive, bytes, got, error);
    }
    if (status == CPPARITY_OK && memcmp(got, sent, bytes) != 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "the result differs from what was sent (first bytes %02x %02x, "
                                    "expected %02x %02x)",
                                    got[0], got[1], sent[0], sent[1]);
    }
    buffer_free(how->send, send);
    buffer_free(how->receive, receive);
    return status;
}

/* Every collective, every type, every setup. */
static void check_collectives(cpparity_comm *comm, tally *counts) {
    cudaStream_t own = NULL;
    cpparity_error error;
    if (cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
        cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "cudaStreamCreateWithFlags failed");
        record(counts, "creating a stream", CPPARITY_ERROR_RUNTIME, &error);
        return;
    }
    for (int s = 0; s < SETUP_COUNT; s++) {
        const setup *how = &setups[s];
        for (int c = 0; c < COLLECTIVE_COUNT; c++) {
            for (int t = 0; t < TYPE_COUNT; t++) {
                char name[160];
                snprintf(name, sizeof name, "%s of type %d, send %s, receive %s, %s stream",
                         collective_names[c], (int)all_types[t], placement_names[how->send],
                         placement_names[how->receive], how->own_stream ? "own" : "default");
                cpparity_error_clear(&error);
                record(counts, name,
                       check_one(comm, how, how->own_stream ? own : NULL, (collective)c,
                                 all_types[t], &error),
                       &error);
            }
        }
    }
    cudaStreamDestroy(own);
}

/* A sum of one rank keeps bfloat16 bits too (NCCL sums bfloat16; the CPU communicators refuse):
 * and counts of 0 do nothing and succeed. */
static cpparity_status check_edges(cpparity_comm *comm, cpparity_error *error) {
    uint16_t half[2] = {0x3F80, 0xC040}; /* 1, -3 */
    CALL(cpparity_all_reduce_sum(comm, half, half, 2, CPPARITY_BFLOAT16, NULL, error));
    CHECK(half[0] == 0x3F80 && half[1] == 0xC040, error, "bfloat16 sum of one rank changed bits");
    CALL(cpparity_all_reduce_sum(comm, NULL, NULL, 0, CPPARITY_FLOAT32, NULL, error));
    CALL(cpparity_all_to_all(comm, NULL, NULL, 0, CPPARITY_INT8, NULL, error));
    return CPPARITY_OK;
}

/* The identity of the world: kind, rank, size. */
static cpparity_status check_identity(cpparity_comm *comm, cpparity_error *error) {
    CHECK(strcmp(comm->kind, "nccl") == 0 && comm->rank == 0 && comm->size == 1 &&
              comm->world_rank == 0,
          error, "kind %s rank %d size %d world_rank %d", comm->kind, comm->rank, comm->size,
          comm->world_rank);
    return CPPARITY_OK;
}

/* gather_bytes of 5 bytes and of none. */
static cpparity_status check_gather_bytes(cpparity_comm *comm, cpparity_error *error) {
    const unsigned char send[5] = {1, 2, 3, 250, 0};
    for (int64_t length = 5; length >= 0; length -= 5) {
        int64_t sizes[1] = {-1};
        void *received = NULL;
        CALL(cpparity_gather_bytes(comm, send, length, &received, sizes, 0, error));
        const bool right = received != NULL && sizes[0] == length &&
                           (length == 0 || memcmp(received, send, (size_t)length) == 0);
        free(received);
        CHECK(right, error, "gather_bytes of %lld bytes: wrong result", (long long)length);
    }
    return CPPARITY_OK;
}

/* agree_status: one rank agrees with itself. */
static cpparity_status check_agree_status(cpparity_comm *comm, cpparity_error *error) {
    cpparity_status agreed = CPPARITY_OK;
    CALL(cpparity_agree_status(comm, CPPARITY_ERROR_INPUT, &agreed, error));
    CHECK(agreed == CPPARITY_ERROR_INPUT, error, "agreed %d, expected 2", (int)agreed);
    CALL(cpparity_agree_status(comm, CPPARITY_OK, &agreed, error));
    CHECK(agreed == CPPARITY_OK, error, "agreed %d, expected 0", (int)agreed);
    return CPPARITY_OK;
}

/* split: color 3 makes a group of one that works on device and host buffers; a negative color
 * gives NULL. */
static cpparity_status check_split(cpparity_comm *comm, cpparity_error *error) {
    cpparity_comm *group = NULL;
    CALL(cpparity_comm_split(comm, 3, -7, &group, error));
    CHECK(group != NULL, error, "no group");
    cpparity_status status = CPPARITY_OK;
    if (strcmp(group->kind, "nccl") != 0 || group->rank != 0 || group->size != 1 ||
        group->world_rank != 0 || group->timeout_seconds != comm->timeout_seconds) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "group kind %s rank %d size %d world %d", group->kind,
                                    group->rank, group->size, group->world_rank);
    }
    const setup device = {PLACE_DEVICE, PLACE_DEVICE, false};
    const setup host = {PLACE_PAGEABLE, PLACE_PAGEABLE, false};
    for (int t = 0; status == CPPARITY_OK && t < TYPE_COUNT; t++) {
        status = check_one(group, &device, NULL, COLLECTIVE_ALL_REDUCE, all_types[t], error);
        if (status == CPPARITY_OK) {
            status = check_one(group, &host, NULL, COLLECTIVE_ALL_TO_ALL, all_types[t], error);
        }
    }
    cpparity_comm_free(group);
    CALL(status);
    group = comm; /* must become NULL */
    CALL(cpparity_comm_split(comm, -1, 0, &group, error));
    CHECK(group == NULL, error, "a negative color gave a communicator");
    return CPPARITY_OK;
}

/* Whether call failed at once with a runtime error whose message contains expected. */
static cpparity_status expect_failure(const char *what, cpparity_status status, double started,
                                      const cpparity_error *failure, const char *expected,
                                      cpparity_error *error) {
    const double took = monotonic_seconds() - started;
    CHECK(status == CPPARITY_ERROR_RUNTIME && strstr(failure->message, expected) != NULL &&
              took < AT_ONCE_SECONDS,
          error,
          "%s: status %d after %.3f s, message \"%s\" (expected a runtime error at once "
          "containing \"%s\")",
          what, (int)status, took, failure->message, expected);
    return CPPARITY_OK;
}

/* abort (one rank: it returns): every later call of the job fails at once, on the world and on a
 * communicator split from it before. */
static cpparity_status check_abort(cpparity_comm *comm, cpparity_error *error) {
    cpparity_comm *group = NULL;
    CALL(cpparity_comm_split(comm, 0, 0, &group, error));
    CHECK(group != NULL, error, "no group to abort with");
    fprintf(stderr, "gpu_comm_nccl: aborting the job on purpose (the next line is expected):\n");
    cpparity_comm_abort(comm, 3, "gpu_comm_nccl: aborted on purpose");
    double value = 1.0;
    cpparity_status agreed = CPPARITY_OK;
    cpparity_error failure;
    double started = monotonic_seconds();
    cpparity_status status =
        cpparity_all_reduce_sum(comm, &value, &value, 1, CPPARITY_FLOAT64, NULL, &failure);
    cpparity_status result =
        expect_failure("all_reduce_sum after abort", status, started, &failure, "aborted", error);
    if (result == CPPARITY_OK) {
        started = monotonic_seconds();
        status = cpparity_agree_status(comm, CPPARITY_OK, &agreed, &failure);
        result =
            expect_failure("agree_status after abort", status, started, &failure, "aborted", error);
    }
    if (result == CPPARITY_OK) {
        started = monotonic_seconds();
        status = cpparity_broadcast(group, &value, 1, CPPARITY_FLOAT64, 0, NULL, &failure);
        result = expect_failure("broadcast on a split communicator after abort", status, started,
                                &failure, "aborted", error);
    }
    cpparity_comm_free(group);
    return result;
}

typedef struct named_check {
    const char *name;                                          /* printed on failure */
    cpparity_status (*run)(cpparity_comm *, cpparity_error *); /* the check */
} named_check;

static const named_check checks[] = {
    {"identity", check_identity},
    {"bfloat16 sum and empty calls", check_edges},
    {"gather_bytes", check_gather_bytes},
    {"agree_status", check_agree_status},
    {"split", check_split},
};

/* The main job: every check, then abort (last: it ends the job's communicators). */
static int checks_job(cpparity_comm *world, void *argument) {
    tally *counts = argument;
    for (size_t c = 0; c < sizeof checks / sizeof *checks; c++) {
        cpparity_error error;
        cpparity_error_clear(&error);
        record(counts, checks[c].name, checks[c].run(world, &error), &error);
    }
    check_collectives(world, counts);
    cpparity_error error;
    cpparity_error_clear(&error);
    record(counts, "abort", check_abort(world, &error), &error);
    return 0;
}

/* A host function that holds its stream for HOLD_SECONDS. */
static void CUDART_CB hold_stream(void *argument) {
    (void)argument;
    const struct timespec pause = {HOLD_SECONDS, 0};
    nanosleep(&pause, NULL);
}

static cpparity_status deadline_body(cpparity_comm *world, cudaStream_t stream, double *values,
                                     cpparity_error *error) {
    CUDA_CHECK(cudaLaunchHostFunc(stream, hold_stream, NULL), error, "holding the stream");
    cpparity_error failure;
    const double started = monotonic_seconds();
    const cpparity_status status =
        cpparity_all_reduce_sum(world, values, values, 4, CPPARITY_FLOAT64, stream, &failure);
    const double took = monotonic_seconds() - started;
    CHECK(status == CPPARITY_ERROR_RUNTIME && strstr(failure.message, "all_reduce_sum") != NULL &&
              strstr(failure.message, "rank 0") != NULL &&
              strstr(failure.message, "timed out after 1 s") != NULL && took >= SHORT_TIMEOUT &&
              took < SHORT_TIMEOUT + 30.0,
          error, "held stream: status %d after %.3f s: %s", (int)status, took, failure.message);
    double later = 0.0;
    const double again = monotonic_seconds();
    const cpparity_status refused =
        cpparity_all_gather(world, &later, &later, 1, CPPARITY_FLOAT64, NULL, &failure);
    return expect_failure("all_gather after the timeout", refused, again, &failure, "unusable",
                          error);
}

/* The deadline job: with the world's timeout lowered to 1 s (after NCCL has started, which may
 * itself take longer), a collective behind a held stream times out. */
static int deadline_job(cpparity_comm *world, void *argument) {
    tally *counts = argument;
    world->timeout_seconds = SHORT_TIMEOUT;
    cpparity_error error;
    cpparity_error_clear(&error);
    cudaStream_t stream = NULL;
    double *values = NULL;
    cpparity_status status =
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
                cudaMalloc((void **)&values, 4 * sizeof *values) == cudaSuccess
            ? CPPARITY_OK
            : cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME,
                                 "could not make a stream and a buffer");
    if (status == CPPARITY_OK) {
        status = deadline_body(world, stream, values, &error);
    }
    record(counts, "deadline", status, &error);
    if (stream != NULL) {
        cudaStreamSynchronize(stream); /* the held work ends before its buffer goes */
        cudaStreamDestroy(stream);
    }
    cudaFree(values);
    return 0;
}

/* A job that must never run. */
static int never_job(cpparity_comm *world, void *argument) {
    (void)world;
    *(bool *)argument = true;
    return 0;
}

/* Without a device: launching fails as it must. Returns SKIPPED, or 1 when it does not. */
static int without_device(const char *why) {
    bool called = false;
    int code = -1;
    cpparity_error error;
    cpparity_error_clear(&error);
    cpparity_status status = comm_nccl_launch(2, TIMEOUT, never_job, &called, &code, &error);
    if (status != CPPARITY_ERROR_INPUT || called || strstr(error.message, "one rank") == NULL) {
        fprintf(stderr, "gpu_comm_nccl: 2 ranks without mpirun: status %d: %s\n", (int)status,
                error.message);
        return 1;
    }
    status = comm_nccl_launch(0, TIMEOUT, never_job, &called, &code, &error);
    if (status != CPPARITY_ERROR_RUNTIME || code != 3 || called ||
        strstr(error.message, "--comm nccl: no CUDA device (") == NULL) {
        fprintf(stderr,
                "gpu_comm_nccl: launching without a device: status %d, exit code %d, job %s: %s\n",
                (int)status, code, called ? "called" : "not called", error.message);
        return 1;
    }
    printf("SKIPPED: no CUDA device here (cudaGetDeviceCount: %s); launching --comm nccl fails "
           "as it must: %s\n",
           why, error.message);
    return SKIPPED;
}

int main(void) {
    int devices = 0;
    const cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0) {
        return without_device(found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
    }
    tally counts = {0, 0};
    int code = -1;
    cpparity_error error;
    cpparity_error_clear(&error);
    if (comm_nccl_launch(0, TIMEOUT, checks_job, &counts, &code, &error) != CPPARITY_OK) {
        fprintf(stderr, "gpu_comm_nccl: the job could not start: %s\n", error.message);
        return 3;
    }
    if (comm_nccl_launch(1, TIMEOUT, deadline_job, &counts, &code, &error) != CPPARITY_OK) {
        fprintf(stderr, "gpu_comm_nccl: the deadline job could not start: %s\n", error.message);
        return 3;
    }
    printf("gpu_comm_nccl: %d passed, %d failed\n", counts.passed, counts.failed);
    return counts.failed > 0 ? 1 : 0;
}
