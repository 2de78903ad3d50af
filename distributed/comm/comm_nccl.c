/*
 * comm_nccl.c — the `nccl` communicator (see comm_nccl.h).
 *
 * Written in C and compiled as C against the CUDA runtime's and NCCL's C headers (CUDA::cudart,
 * NCCL::NCCL): it launches no kernel of its own, so nvcc brings nothing, while as C it gets the
 * project's whole warning set (-Wall -Wextra -Wshadow -Wstrict-prototypes -Wvla) under gcc and
 * clang, the sanitized copy and clang-format like every other communicator. CUDA calls go through
 * CUDA_CHECK (cuda_check.h, which needs only cuda_runtime.h), NCCL calls through NCCL_CHECK
 * (nccl_check.h), MPI calls through MPI_CHECK (mpi_check.h); every MPI collective goes through
 * the mpi communicator (comm_mpi.h) over the same ranks, with its deadlines.
 *
 * Every operation is a body that may fail anywhere, wrapped by nccl_end: a runtime failure
 * aborts the NCCL communicator and marks this communicator unusable (see comm_nccl.h).
 */
#include "distributed/comm/comm_nccl.h"
#include "distributed/device/cuda_check.h"
#include "distributed/comm/nccl_check.h"

#include "common/monotonic_clock.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CPPARITY_HAVE_MPI
#include <mpi.h>

#include "distributed/comm/comm_mpi.h"
#include "distributed/comm/mpi_check.h"
#endif

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the nccl communicator needs NCCL 2.14 or later (non-blocking communicators)"
#endif
#if CUDART_VERSION < 11000
#error "the nccl communicator needs CUDA 11 or later (cudaPointerGetAttributes on host memory)"
#endif

/* ncclCommSplit arrived in NCCL 2.18; before it split makes a communicator from a new id. */
#define NCCL_HAS_COMM_SPLIT (NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0))

#define NCCL_TEXT 512        /* bytes of a failure note */
#define NCCL_ALIGNMENT 256   /* bytes: alignment of the scratch regions */
#define NCCL_SPINS 64        /* polls before the first sleep */
#define NCCL_PAUSE_NS 50000L /* sleep between later polls */

/* What every communicator of one job (the world and what is split from it) shares. */
typedef struct nccl_job {
    bool aborted;            /* abort was called: every call of the job fails at once */
    char message[NCCL_TEXT]; /* which rank aborted, and why */
} nccl_job;

/* What an nccl communicator owns. */
typedef struct nccl_state {
    ncclComm_t nccl;         /* NULL once aborted */
    cpparity_comm *mpi;      /* the same ranks over MPI; NULL in one-rank mode */
    bool owns_mpi;           /* split results own theirs; the world's belongs to comm_mpi_launch */
    nccl_job *job;           /* shared with the world */
    bool owns_job;           /* the world */
    int device;              /* this rank's CUDA device */
    void *scratch;           /* device memory staging host buffers (NULL until needed) */
    size_t scratch_bytes;    /* its size */
    ncclComm_t split_slot;   /* where NCCL writes a split's result (it may do so asynchronously) */
    bool failed;             /* unusable: every call fails at once */
    char failure[NCCL_TEXT]; /* why */
} nccl_state;

/* One call in progress: its name, where it runs and its deadline. */
typedef struct nccl_call {
    const char *collective; /* "all_reduce_sum" */
    char where[96];         /* "nccl communicator: all_reduce_sum on rank 3", for messages */
    cudaStream_t stream;    /* the caller's stream */
    double deadline;        /* monotonic seconds */
    double timeout;         /* seconds, for messages */
} nccl_call;

/* One buffer of a call, as the caller passed it and as NCCL gets it. */
typedef struct nccl_buffer {
    void *caller; /* the caller's pointer */
    size_t bytes; /* its size */
    bool in;      /* NCCL reads it: staged host data is copied to the device first */
    bool out;     /* NCCL writes it: staged data is copied back to the host after */
    bool host;    /* host memory: NCCL gets a region of the scratch buffer */
    void *device; /* what NCCL gets */
} nccl_buffer;

static const cpparity_comm_operations nccl_operations;

/* This process's rank in the nccl job, for messages (one rank per process). */
static int nccl_process_rank = -1;

/* Returns the status of a call from the enclosing function when it failed. */
#define NCCL_CALL(call)                                                                            \
    do {                                                                                           \
        const cpparity_status nccl_call_status_ = (call);                                          \
        if (nccl_call_status_ != CPPARITY_OK) {                                                    \
            return nccl_call_status_;                                                              \
        }                                                                                          \
    } while (0)

/* See nccl_check.h. */
cpparity_status nccl_failure(ncclResult_t code, cpparity_error *error, const char *what,
                             const char *call, const char *file, int line) {
    const char *last = ncclGetLastError(NULL);
    const bool has_last = last != NULL && last[0] != '\0';
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                              "NCCL: %s failed on rank %d: %s returned \"%s\"%s%s%s (%s:%d)", what,
                              nccl_process_rank, call, ncclGetErrorString(code),
                              has_last ? " (NCCL's last error: " : "", has_last ? last : "",
                              has_last ? ")" : "", file, line);
}

/* The NCCL type of an element type (comm.c has refused unknown ones). */
static ncclDataType_t nccl_datatype(cpparity_element_type type) {
    switch (type) {
    case CPPARITY_FLOAT32:
        return ncclFloat32;
    case CPPARITY_FLOAT64:
        return ncclFloat64;
    case CPPARITY_INT64:
        return ncclInt64;
    case CPPARITY_INT8:
        return ncclInt8;
    case CPPARITY_BFLOAT16:
        return ncclBfloat16;
    }
    return ncclInt8;
}

static nccl_state *nccl_get(const cpparity_comm *comm) {
    return comm->implementation;
}

/* cudaStreamQuery with "not ready yet" as a success; *drained says whether it has finished. */
static cudaError_t nccl_stream_query(cudaStream_t stream, bool *drained) {
    const cudaError_t code = cudaStreamQuery(stream);
    *drained = code == cudaSuccess;
    return code == cudaErrorNotReady ? cudaSuccess : code;
}

/* Polls until NCCL has finished the last call on nccl (ncclCommGetAsyncError no longer
 * ncclInProgress) and then, when stream_too, until stream has drained: CPPARITY_OK, or the NCCL
 * or CUDA error, or a timeout once deadline has passed. Aborts nothing (the caller does). */
static cpparity_status nccl_poll(ncclComm_t nccl, bool stream_too, cudaStream_t stream,
                                 double deadline, double timeout, const char *collective,
                                 const char *where, cpparity_error *error) {
    const struct timespec pause = {0, NCCL_PAUSE_NS};
    for (int spins = 0;; spins++) {
        ncclResult_t state = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(nccl, &state), error, collective);
        if (!nccl_result_ok(state)) {
            return nccl_failure(state, error, collective,
                                "ncclCommGetAsyncError(nccl, &state) (an asynchronous error)",
                                __FILE__, __LINE__);
        }
        if (state == ncclSuccess) {
            bool drained = true;
            if (stream_too) {
                CUDA_CHECK(nccl_stream_query(stream, &drained), error, where);
            }
            if (drained) {
                return CPPARITY_OK;
            }
        }
        if (monotonic_seconds() > deadline) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: timed out after %g s",
                                      where, timeout);
        }
        if (spins >= NCCL_SPINS) {
            nanosleep(&pause, NULL);
        }
    }
}

/* Appends text to error's message when there is room (error may be NULL). */
static void nccl_append(cpparity_error *error, const char *text) {
    if (error != NULL) {
        const size_t used = strlen(error->message);
        snprintf(error->message + used, sizeof error->message - used, "%s", text);
    }
}

/* Aborts the NCCL communicator and marks comm unusable, noting why. */
static void nccl_mark_failed(cpparity_comm *comm, const char *why) {
    nccl_state *state = nccl_get(comm);
    if (state->nccl != NULL) {
        (void)ncclCommAbort(state->nccl);
        state->nccl = NULL;
    }
    if (!state->failed) {
        state->failed = true;
        snprintf(state->failure, sizeof state->failure, "%.*s", NCCL_TEXT - 1, why);
    }
}

/* Ends an operation: a runtime failure aborts the NCCL communicator and makes comm unusable. */
static cpparity_status nccl_end(cpparity_comm *comm, cpparity_status status,
                                cpparity_error *error) {
    if (status == CPPARITY_ERROR_RUNTIME && nccl_get(comm)->nccl != NULL) {
        nccl_mark_failed(comm, error != NULL ? error->message : "a runtime failure");
        nccl_append(error, "; the NCCL communicator was aborted and every later call on it fails");
    }
    return status;
}

/* Fails when comm can no longer be used: the job was aborted, or an earlier call failed. */
static cpparity_status nccl_usable(const cpparity_comm *comm, const char *collective,
                                   cpparity_error *error) {
    const nccl_state *state = nccl_get(comm);
    if (state->job->aborted) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "nccl communicator: %s on rank %d: the job was aborted (%s)",
                                  collective, comm->world_rank, state->job->message);
    }
    if (state->failed || state->nccl == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "nccl communicator: %s on rank %d: unusable after an earlier "
                                  "failure (%s)",
                                  collective, comm->world_rank, state->failure);
    }
    return CPPARITY_OK;
}

/* Starts a data-moving call: comm usable, the deadline, the stream, this rank's device. */
static cpparity_status nccl_begin(const cpparity_comm *comm, const char *collective, void *stream,
                                  nccl_call *call, cpparity_error *error) {
    call->collective = collective;
    snprintf(call->where, sizeof call->where, "nccl communicator: %s on rank %d", collective,
             comm->world_rank);
    call->stream = (cudaStream_t)stream;
    call->timeout = comm->timeout_seconds;
    call->deadline = monotonic_seconds() + comm->timeout_seconds;
    NCCL_CALL(nccl_usable(comm, collective, error));
    CUDA_CHECK(cudaSetDevice(nccl_get(comm)->device), error, call->where);
    return CPPARITY_OK;
}

/* Waits for the call's NCCL work and stream (see nccl_poll). */
static cpparity_status nccl_wait(const cpparity_comm *comm, const nccl_call *call,
                                 cpparity_error *error) {
    return nccl_poll(nccl_get(comm)->nccl, true, call->stream, call->deadline, call->timeout,
                     call->collective, call->where, error);
}

/* Sets buffer->host: host memory (pageable or pinned) is staged, device and managed memory are
 * used as they are; a device buffer must be on the communicator's device. */
static cpparity_status nccl_locate(const cpparity_comm *comm, const nccl_call *call,
                                   nccl_buffer *buffer, cpparity_error *error) {
    struct cudaPointerAttributes attributes;
    memset(&attributes, 0, sizeof attributes);
    CUDA_CHECK(cudaPointerGetAttributes(&attributes, buffer->caller), error, call->where);
    buffer->host =
        attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost;
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != nccl_get(comm)->device) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: a buffer lives on CUDA device %d, the communicator on "
                                  "device %d",
                                  call->where, attributes.device, nccl_get(comm)->device);
    }
    return CPPARITY_OK;
}

/* Makes the scratch buffer at least bytes long. */
static cpparity_status nccl_reserve(nccl_state *state, size_t bytes, const nccl_call *call,
                                    cpparity_error *error) {
    if (bytes <= state->scratch_bytes) {
        return CPPARITY_OK;
    }
    if (state->scratch != NULL) {
        CUDA_CHECK(cudaFree(state->scratch), error, call->where);
        state->scratch = NULL;
        state->scratch_bytes = 0;
    }
    CUDA_CHECK(cudaMalloc(&state->scratch, bytes), error, call->where);
    state->scratch_bytes = bytes;
    return CPPARITY_OK;
}

/* Prepares the call's buffers (count of them, at most 4) for NCCL: each host buffer gets a region
 * of its own in the scratch buffer (so in-place and overlapping host buffers work: every input
 * is copied in before NCCL writes anything), the stream is drained and host inputs are copied in
 * on it. Buffers of 0 bytes are passed as they are. */
static cpparity_status nccl_stage_in(cpparity_comm *comm, const nccl_call *call,
                                     nccl_buffer *buffers, int count, cpparity_error *error) {
    nccl_state *state = nccl_get(comm);
    size_t offsets[4] = {0}, total = 0;
    bool staged = false;
    for (int b = 0; b < count; b++) {
        buffers[b].host = false;
        buffers[b].device = buffers[b].caller;
        if (buffers[b].bytes == 0) {
            continue;
        }
        NCCL_CALL(nccl_locate(comm, call, &buffers[b], error));
        if (!buffers[b].host) {
            continue;
        }
        staged = true;
        offsets[b] = total;
        total += (buffers[b].bytes + NCCL_ALIGNMENT - 1) / NCCL_ALIGNMENT * NCCL_ALIGNMENT;
    }
    if (!staged) {
        return CPPARITY_OK;
    }
    NCCL_CALL(nccl_reserve(state, total, call, error));
    /* copies from pageable memory may wait for the stream: let them find it idle */
    NCCL_CALL(nccl_wait(comm, call, error));
    for (int b = 0; b < count; b++) {
        if (buffers[b].host) {
            buffers[b].device = (unsigned char *)state->scratch + offsets[b];
            if (buffers[b].in) {
                CUDA_CHECK(cudaMemcpyAsync(buffers[b].device, buffers[b].caller, buffers[b].bytes,
                                           cudaMemcpyHostToDevice, call->stream),
                           error, call->where);
            }
        }
    }
    return CPPARITY_OK;
}

/* Completes the call: waits for NCCL and the stream, copies staged outputs back to the host and
 * waits for those copies. */
static cpparity_status nccl_stage_out(const cpparity_comm *comm, const nccl_call *call,
                                      const nccl_buffer *buffers, int count,
                                      cpparity_error *error) {
    NCCL_CALL(nccl_wait(comm, call, error));
    bool copied = false;
    for (int b = 0; b < count; b++) {
        if (buffers[b].host && buffers[b].out) {
            CUDA_CHECK(cudaMemcpyAsync(buffers[b].caller, buffers[b].device, buffers[b].bytes,
                                       cudaMemcpyDeviceToHost, call->stream),
                       error, call->where);
            copied = true;
        }
    }
    return copied ? nccl_wait(comm, call, error) : CPPARITY_OK;
}

/* The sends and receives of all_to_all, inside the caller's group. */
static cpparity_status nccl_exchange(const cpparity_comm *comm, const nccl_call *call,
                                     const unsigned char *send, unsigned char *receive,
                                     size_t count, size_t block_bytes, ncclDataType_t datatype,
                                     cpparity_error *error) {
    ncclComm_t nccl = nccl_get(comm)->nccl;
    for (int peer = 0; peer < comm->size; peer++) {
        NCCL_CHECK(
            ncclSend(send + (size_t)peer * block_bytes, count, datatype, peer, nccl, call->stream),
            error, call->collective);
        NCCL_CHECK(ncclRecv(receive + (size_t)peer * block_bytes, count, datatype, peer, nccl,
                            call->stream),
                   error, call->collective);
    }
    return CPPARITY_OK;
}

static cpparity_status all_to_all_body(cpparity_comm *comm, const nccl_call *call, const void *send,
                                       void *receive, int64_t count, cpparity_element_type type,
                                       cpparity_error *error) {
    const size_t block = (size_t)count * (size_t)cpparity_element_size(type);
    const size_t bytes = block * (size_t)comm->size;
    nccl_buffer buffers[2] = {{(void *)send, bytes, true, false, false, NULL},
                              {receive, bytes, false, true, false, NULL}};
    NCCL_CALL(nccl_stage_in(comm, call, buffers, 2, error));
    NCCL_CHECK(ncclGroupStart(), error, call->collective);
    const cpparity_status status = nccl_exchange(comm, call, buffers[0].device, buffers[1].device,
                                                 (size_t)count, block, nccl_datatype(type), error);
    const ncclResult_t ended = ncclGroupEnd(); /* always closes the group */
    NCCL_CALL(status);
    if (!nccl_result_ok(ended)) {
        return nccl_failure(ended, error, call->collective, "ncclGroupEnd()", __FILE__, __LINE__);
    }
    return nccl_stage_out(comm, call, buffers, 2, error);
}

/* all_to_all (see comm.h): ncclSend/ncclRecv with every peer in one group. */
static cpparity_status nccl_all_to_all(cpparity_comm *comm, const void *send, void *receive,
                                       int64_t count_per_rank, cpparity_element_type type,
                                       void *stream, cpparity_error *error) {
    nccl_call call;
    cpparity_status status = nccl_begin(comm, "all_to_all", stream, &call, error);
    if (status == CPPARITY_OK && count_per_rank > 0) {
        status = all_to_all_body(comm, &call, send, receive, count_per_rank, type, error);
    }
    return nccl_end(comm, status, error);
}

static cpparity_status all_reduce_body(cpparity_comm *comm, const nccl_call *call, const void *send,
                                       void *receive, int64_t count, cpparity_element_type type,
                                       cpparity_error *error) {
    const size_t bytes = (size_t)count * (size_t)cpparity_element_size(type);
    nccl_buffer buffers[2] = {{(void *)send, bytes, true, false, false, NULL},
                              {receive, bytes, false, true, false, NULL}};
    NCCL_CALL(nccl_stage_in(comm, call, buffers, 2, error));
    NCCL_CHECK(ncclAllReduce(buffers[0].device, buffers[1].device, (size_t)count,
                             nccl_datatype(type), ncclSum, nccl_get(comm)->nccl, call->stream),
               error, call->collective);
    return nccl_stage_out(comm, call, buffers, 2, error);
}

/* all_reduce_sum (see comm.h, and comm_nccl.h on the order of the sum): ncclAllReduce. */
static cpparity_status nccl_all_reduce_sum(cpparity_comm *comm, const void *send, void *receive,
                                           int64_t count, cpparity_element_type type, void *stream,
                                           cpparity_error *error) {
    nccl_call call;
    cpparity_status status = nccl_begin(comm, "all_reduce_sum", stream, &call, error);
    if (status == CPPARITY_OK && count > 0) {
        status = all_reduce_body(comm, &call, send, receive, count, type, error);
    }
    return nccl_end(comm, status, error);
}

static cpparity_status all_gather_body(cpparity_comm *comm, const nccl_call *call, const void *send,
                                       void *receive, int64_t count, cpparity_element_type type,
                                       cpparity_error *error) {
    const size_t bytes = (size_t)count * (size_t)cpparity_element_size(type);
    nccl_buffer buffers[2] = {{(void *)send, bytes, true, false, false, NULL},
                              {receive, bytes * (size_t)comm->size, false, true, false, NULL}};
    NCCL_CALL(nccl_stage_in(comm, call, buffers, 2, error));
    NCCL_CHECK(ncclAllGather(buffers[0].device, buffers[1].device, (size_t)count,
                             nccl_datatype(type), nccl_get(comm)->nccl, call->stream),
               error, call->collective);
    return nccl_stage_out(comm, call, buffers, 2, error);
}

/* all_gather (see comm.h): ncclAllGather. */
static cpparity_status nccl_all_gather(cpparity_comm *comm, const void *send, void *receive,
                                       int64_t count_per_rank, cpparity_element_type type,
                                       void *stream, cpparity_error *error) {
    nccl_call call;
    cpparity_status status = nccl_begin(comm, "all_gather", stream, &call, error);
    if (status == CPPARITY_OK && count_per_rank > 0) {
        status = all_gather_body(comm, &call, send, receive, count_per_rank, type, error);
    }
    return nccl_end(comm, status, error);
}

static cpparity_status shift_body(cpparity_comm *comm, const nccl_call *call, const void *send,
                                  void *receive, int64_t count, cpparity_element_type type,
                                  int offset, cpparity_error *error) {
    const size_t bytes = (size_t)count * (size_t)cpparity_element_size(type);
    nccl_buffer buffers[2] = {{(void *)send, bytes, true, false, false, NULL},
                              {receive, bytes, false, true, false, NULL}};
    NCCL_CALL(nccl_stage_in(comm, call, buffers, 2, error));
    const int to = (comm->rank + offset) % comm->size;
    const int from = (comm->rank - offset + comm->size) % comm->size;
    NCCL_CHECK(ncclGroupStart(), error, call->collective);
    ncclResult_t result = ncclSend(buffers[0].device, (size_t)count, nccl_datatype(type), to,
                                   nccl_get(comm)->nccl, call->stream);
    const char *failed = "ncclSend()";
    if (nccl_result_ok(result)) {
        result = ncclRecv(buffers[1].device, (size_t)count, nccl_datatype(type), from,
                          nccl_get(comm)->nccl, call->stream);
        failed = "ncclRecv()";
    }
    const ncclResult_t ended = ncclGroupEnd(); /* always closes the group */
    if (!nccl_result_ok(result)) {
        return nccl_failure(result, error, call->collective, failed, __FILE__, __LINE__);
    }
    if (!nccl_result_ok(ended)) {
        return nccl_failure(ended, error, call->collective, "ncclGroupEnd()", __FILE__, __LINE__);
    }
    return nccl_stage_out(comm, call, buffers, 2, error);
}

/* shift (see comm.h): ncclSend to rank + offset and ncclRecv from rank − offset, grouped. */
static cpparity_status nccl_shift(cpparity_comm *comm, const void *send, void *receive,
                                  int64_t count, cpparity_element_type type, int offset,
                                  void *stream, cpparity_error *error) {
    nccl_call call;
    cpparity_status status = nccl_begin(comm, "shift", stream, &call, error);
    if (status == CPPARITY_OK && count > 0) {
        status = shift_body(comm, &call, send, receive, count, type, offset, error);
    }
    return nccl_end(comm, status, error);
}

static cpparity_status broadcast_body(cpparity_comm *comm, const nccl_call *call, void *buffer,
                                      int64_t count, cpparity_element_type type, int root,
                                      cpparity_error *error) {
    const bool is_root = comm->rank == root;
    const size_t bytes = (size_t)count * (size_t)cpparity_element_size(type);
    nccl_buffer buffers[1] = {{buffer, bytes, is_root, !is_root, false, NULL}};
    NCCL_CALL(nccl_stage_in(comm, call, buffers, 1, error));
    NCCL_CHECK(ncclBroadcast(buffers[0].device, buffers[0].device, (size_t)count,
                             nccl_datatype(type), root, nccl_get(comm)->nccl, call->stream),
               error, call->collective);
    return nccl_stage_out(comm, call, buffers, 1, error);
}

/* broadcast (see comm.h): ncclBroadcast in place. */
static cpparity_status nccl_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                      cpparity_element_type type, int root, void *stream,
                                      cpparity_error *error) {
    nccl_call call;
    cpparity_status status = nccl_begin(comm, "broadcast", stream, &call, error);
    if (status == CPPARITY_OK && count > 0) {
        status = broadcast_body(comm, &call, buffer, count, type, root, error);
    }
    return nccl_end(comm, status, error);
}

/* gather_bytes with one rank: a copy of the bytes (root is 0: comm.c checked it). */
static cpparity_status gather_bytes_alone(const cpparity_comm *comm, const void *send,
                                          int64_t send_bytes, void **received, int64_t *sizes,
                                          cpparity_error *error) {
    unsigned char *copy = malloc(send_bytes > 0 ? (size_t)send_bytes : 1);
    if (copy == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "nccl communicator: gather_bytes on rank %d: out of memory for "
                                  "%lld bytes",
                                  comm->world_rank, (long long)send_bytes);
    }
    if (send_bytes > 0) {
        memcpy(copy, send, (size_t)send_bytes);
    }
    sizes[0] = send_bytes;
    *received = copy;
    return CPPARITY_OK;
}

/* gather_bytes (see comm.h): host bytes, over MPI when the job has MPI. */
static cpparity_status nccl_gather_bytes(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                         void **received, int64_t *sizes, int root,
                                         cpparity_error *error) {
    const nccl_state *state = nccl_get(comm);
    cpparity_status status = nccl_usable(comm, "gather_bytes", error);
    if (status == CPPARITY_OK) {
        status =
            state->mpi != NULL
                ? cpparity_gather_bytes(state->mpi, send, send_bytes, received, sizes, root, error)
                : gather_bytes_alone(comm, send, send_bytes, received, sizes, error);
    }
    return nccl_end(comm, status, error);
}

/* agree_status (see comm.h): over MPI when the job has MPI; one rank agrees with itself. */
static cpparity_status nccl_agree_status(cpparity_comm *comm, cpparity_status local,
                                         cpparity_status *agreed, cpparity_error *error) {
    const nccl_state *state = nccl_get(comm);
    cpparity_status status = nccl_usable(comm, "agree_status", error);
    if (status == CPPARITY_OK && state->mpi != NULL) {
        status = cpparity_agree_status(state->mpi, local, agreed, error);
    } else if (status == CPPARITY_OK) {
        *agreed = local;
    }
    return nccl_end(comm, status, error);
}

/* The rank and size NCCL gives nccl. */
static cpparity_status nccl_identity(ncclComm_t nccl, int *rank, int *size, cpparity_error *error) {
    NCCL_CHECK(ncclCommUserRank(nccl, rank), error, "creating a communicator");
    NCCL_CHECK(ncclCommCount(nccl, size), error, "creating a communicator");
    return CPPARITY_OK;
}

/* Wraps a started NCCL communicator as a cpparity_comm of kind "nccl" (kept by *result). mpi:
 * the same ranks over MPI, or NULL; owns_mpi: free it with the communicator. job: the parent's,
 * or NULL for a world (which makes and owns one). On failure nothing is kept: nccl is aborted,
 * an owned mpi freed. */
static cpparity_status nccl_wrap(ncclComm_t nccl, cpparity_comm *mpi, bool owns_mpi, nccl_job *job,
                                 int device, int world_rank, double timeout_seconds,
                                 cpparity_comm **result, cpparity_error *error) {
    int rank = -1, size = 0;
    cpparity_status status = nccl_identity(nccl, &rank, &size, error);
    if (status == CPPARITY_OK && mpi != NULL && (mpi->rank != rank || mpi->size != size)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "nccl communicator: on rank %d NCCL says rank %d of %d, MPI "
                                    "rank %d of %d",
                                    world_rank, rank, size, mpi->rank, mpi->size);
    }
    cpparity_comm *comm = calloc(1, sizeof *comm);
    nccl_state *state = calloc(1, sizeof *state);
    nccl_job *own_job = job == NULL ? calloc(1, sizeof *own_job) : NULL;
    if (status == CPPARITY_OK && (comm == NULL || state == NULL || (job == NULL && !own_job))) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "nccl communicator: out of memory on rank %d", world_rank);
    }
    if (status != CPPARITY_OK) {
        free(comm);
        free(state);
        free(own_job);
        (void)ncclCommAbort(nccl);
        if (owns_mpi) {
            cpparity_comm_free(mpi);
        }
        return status;
    }
    state->nccl = nccl;
    state->mpi = mpi;
    state->owns_mpi = owns_mpi;
    state->job = job != NULL ? job : own_job;
    state->owns_job = job == NULL;
    state->device = device;
    comm->operations = &nccl_operations;
    comm->kind = "nccl";
    comm->rank = rank;
    comm->size = size;
    comm->world_rank = world_rank;
    comm->timeout_seconds = timeout_seconds;
    comm->implementation = state;
    *result = comm;
    return CPPARITY_OK;
}

/* Starts ncclCommInitRankConfig on a non-blocking communicator (*nccl set even when it then
 * fails; the caller polls it). */
static cpparity_status nccl_init_start(ncclComm_t *nccl, int size, ncclUniqueId id, int rank,
                                       cpparity_error *error) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NCCL_CHECK(ncclCommInitRankConfig(nccl, size, id, rank, &config), error, "starting NCCL");
    return CPPARITY_OK;
}

/* Starts rank `rank` of an NCCL communicator of `size` ranks on the current device and waits for
 * it until deadline; on failure aborts it and *nccl is NULL. */
static cpparity_status nccl_init(ncclComm_t *nccl, int size, ncclUniqueId id, int rank,
                                 double deadline, double timeout, cpparity_error *error) {
    char where[96];
    snprintf(where, sizeof where, "nccl communicator: starting NCCL on rank %d", nccl_process_rank);
    *nccl = NULL;
    cpparity_status status = nccl_init_start(nccl, size, id, rank, error);
    if (status == CPPARITY_OK && *nccl == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: no communicator came back",
                                    where);
    }
    if (status == CPPARITY_OK) {
        status = nccl_poll(*nccl, false, NULL, deadline, timeout, "starting NCCL", where, error);
    }
    if (status != CPPARITY_OK && *nccl != NULL) {
        (void)ncclCommAbort(*nccl);
        *nccl = NULL;
    }
    return status;
}

/* A new NCCL unique id (made by the first rank of a communicator). */
static cpparity_status nccl_unique_id(ncclUniqueId *id, cpparity_error *error) {
    NCCL_CHECK(ncclGetUniqueId(id), error, "making the NCCL unique id");
    return CPPARITY_OK;
}

#if NCCL_HAS_COMM_SPLIT
/* The NCCL side of split: ncclCommSplit, polled on the parent (the split is its operation) and
 * then on the new communicator. *child: NULL for a negative color. */
static cpparity_status nccl_split_handle(cpparity_comm *comm, int color, int key,
                                         const cpparity_comm *mpi_child, double deadline,
                                         ncclComm_t *child, cpparity_error *error) {
    (void)mpi_child;
    nccl_state *state = nccl_get(comm);
    char where[96];
    snprintf(where, sizeof where, "nccl communicator: split on rank %d", comm->world_rank);
    state->split_slot = NULL;
    NCCL_CHECK(ncclCommSplit(state->nccl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                             &state->split_slot, NULL),
               error, "split");
    /* NCCL fills the slot from its own thread when the parent's operation completes */
    const struct timespec pause = {0, NCCL_PAUSE_NS};
    for (;;) {
        NCCL_CALL(nccl_poll(state->nccl, false, NULL, deadline, comm->timeout_seconds, "split",
                            where, error));
        *child = *(ncclComm_t volatile *)&state->split_slot;
        if (*child != NULL || color < 0) {
            break;
        }
        if (monotonic_seconds() > deadline) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: timed out after %g s",
                                      where, comm->timeout_seconds);
        }
        nanosleep(&pause, NULL);
    }
    state->split_slot = NULL;
    if (*child != NULL) {
        const cpparity_status status =
            nccl_poll(*child, false, NULL, deadline, comm->timeout_seconds, "split", where, error);
        if (status != CPPARITY_OK) {
            (void)ncclCommAbort(*child);
            *child = NULL;
            return status;
        }
    }
    return CPPARITY_OK;
}
#else
/* The NCCL side of split without ncclCommSplit: the group's first rank makes a unique id, every
 * rank of the group learns whether it could and receives it over MPI (mpi_child; none with one
 * rank), and the group starts a new NCCL communicator. *child: NULL for a negative color. */
static cpparity_status nccl_split_handle(cpparity_comm *comm, int color, int key,
                                         const cpparity_comm *mpi_child, double deadline,
                                         ncclComm_t *child, cpparity_error *error) {
    (void)key;
    if (color < 0) {
        return CPPARITY_OK;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    const int rank = mpi_child != NULL ? mpi_child->rank : 0;
    const int size = mpi_child != NULL ? mpi_child->size : 1;
    cpparity_status status = rank == 0 ? nccl_unique_id(&id, error) : CPPARITY_OK;
    if (mpi_child != NULL) {
        cpparity_status agreed = CPPARITY_OK;
        NCCL_CALL(cpparity_agree_status((cpparity_comm *)mpi_child, status, &agreed, error));
        if (status == CPPARITY_OK && agreed != CPPARITY_OK) {
            return cpparity_error_set(error, agreed,
                                      "nccl communicator: split on rank %d: the first rank of the "
                                      "group could not make an NCCL unique id",
                                      comm->world_rank);
        }
        NCCL_CALL(status);
        NCCL_CALL(cpparity_broadcast((cpparity_comm *)mpi_child, &id, (int64_t)sizeof id,
                                     CPPARITY_INT8, 0, NULL, error));
    }
    NCCL_CALL(status);
    return nccl_init(child, size, id, rank, deadline, comm->timeout_seconds, error);
}
#endif

static cpparity_status split_body(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                                  cpparity_error *error) {
    nccl_state *state = nccl_get(comm);
    const double deadline = monotonic_seconds() + comm->timeout_seconds;
    CUDA_CHECK(cudaSetDevice(state->device), error, "nccl communicator: split");
    cpparity_comm *mpi_child = NULL;
    if (state->mpi != NULL) {
        NCCL_CALL(cpparity_comm_split(state->mpi, color, key, &mpi_child, error));
    }
    ncclComm_t child = NULL;
    cpparity_status status =
        nccl_split_handle(comm, color, key, mpi_child, deadline, &child, error);
    if (status == CPPARITY_OK && (child != NULL) != (color >= 0)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "nccl communicator: split on rank %d: color %d gave %s NCCL "
                                    "communicator",
                                    comm->world_rank, color, child != NULL ? "an" : "no");
    }
    if (status != CPPARITY_OK || child == NULL) {
        if (child != NULL) {
            (void)ncclCommAbort(child);
        }
        cpparity_comm_free(mpi_child);
        return status;
    }
    return nccl_wrap(child, mpi_child, true, state->job, state->device, comm->world_rank,
                     comm->timeout_seconds, result, error);
}

/* split (see comm.h): the MPI side with MPI_Comm_split (comm_mpi.c), the NCCL side with
 * ncclCommSplit (or a new unique id); a negative color gives *result = NULL. The new communicator
 * keeps the world rank, the device, the timeout and the job. */
static cpparity_status nccl_split(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                                  cpparity_error *error) {
    cpparity_status status = nccl_usable(comm, "split", error);
    if (status == CPPARITY_OK) {
        status = split_body(comm, color, key, result, error);
    }
    return nccl_end(comm, status, error);
}

/* abort (see comm.h and comm_nccl.h): ncclCommAbort; under MPI the mpi communicator's abort
 * (message, MPI_Abort: it does not return); with one rank the message, and every call of the
 * job's communicators fails from now on. */
static void nccl_abort(cpparity_comm *comm, int code, const char *message) {
    nccl_state *state = nccl_get(comm);
    if (message == NULL) {
        message = "(no message)";
    }
    char why[NCCL_TEXT];
    snprintf(why, sizeof why, "rank %d aborted (code %d): %s", comm->world_rank, code, message);
    nccl_mark_failed(comm, why);
    if (state->mpi != NULL) {
        cpparity_comm_abort(state->mpi, code, message);
    }
    if (!state->job->aborted) {
        state->job->aborted = true;
        snprintf(state->job->message, sizeof state->job->message, "%.*s", NCCL_TEXT - 1, why);
        fprintf(stderr, "cpparity: rank %d: %s\n", comm->world_rank, message);
        fflush(stderr);
    }
}

/* Releases a healthy NCCL communicator: ncclCommFinalize polled against the deadline, then
 * ncclCommDestroy; ncclCommAbort should it fail or time out. */
static void nccl_release(ncclComm_t nccl, double timeout_seconds) {
    cpparity_error ignored;
    bool finalized = nccl_result_ok(ncclCommFinalize(nccl));
    if (finalized) {
        finalized = nccl_poll(nccl, false, NULL, monotonic_seconds() + timeout_seconds,
                              timeout_seconds, "releasing the communicator",
                              "nccl communicator: free", &ignored) == CPPARITY_OK;
    }
    if (finalized) {
        (void)ncclCommDestroy(nccl);
    } else {
        (void)ncclCommAbort(nccl);
    }
}

/* free (see comm.h): the NCCL communicator (aborted when this communicator or the job failed),
 * the scratch buffer, an owned MPI sub-communicator, and the job with the world. */
static void nccl_free(cpparity_comm *comm) {
    nccl_state *state = nccl_get(comm);
    if (state->nccl != NULL) {
        (void)cudaSetDevice(state->device);
        if (state->failed || state->job->aborted) {
            (void)ncclCommAbort(state->nccl);
        } else {
            nccl_release(state->nccl, comm->timeout_seconds);
        }
    }
    if (state->scratch != NULL) {
        (void)cudaFree(state->scratch);
    }
    if (state->owns_mpi) {
        cpparity_comm_free(state->mpi);
    }
    if (state->owns_job) {
        free(state->job);
    }
    free(state);
    free(comm);
}

static const cpparity_comm_operations nccl_operations = {
    .all_to_all = nccl_all_to_all,
    .all_reduce_sum = nccl_all_reduce_sum,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .gather_bytes = nccl_gather_bytes,
    .agree_status = nccl_agree_status,
    .split = nccl_split,
    .shift = nccl_shift,
    .abort = nccl_abort,
    .free = nccl_free,
};

bool comm_nccl_detected(void) {
    return false;
}

void comm_nccl_library_version(char *text, size_t size) {
    int code = 0;
    if (ncclGetVersion(&code) != ncclSuccess || code <= 0) {
        snprintf(text, size, "NCCL (version unavailable)");
    } else if (code < 10000) { /* before 2.9: major·1000 + minor·100 + patch */
        snprintf(text, size, "NCCL %d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
    } else {
        snprintf(text, size, "NCCL %d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
    }
}

/* Checks that this process sees a CUDA device and makes device `choice` modulo their number the
 * current one (*device). */
static cpparity_status nccl_choose_device(int choice, int *device, cpparity_error *error) {
    int count = 0;
    const cudaError_t found = cudaGetDeviceCount(&count);
    if (found != cudaSuccess) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "--comm nccl: no CUDA device (rank %d: cudaGetDeviceCount "
                                  "returned %s: %s)",
                                  nccl_process_rank, cudaGetErrorName(found),
                                  cudaGetErrorString(found));
    }
    if (count <= 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "--comm nccl: no CUDA device (rank %d: cudaGetDeviceCount found "
                                  "0 devices)",
                                  nccl_process_rank);
    }
    *device = choice % count;
    CUDA_CHECK(cudaSetDevice(*device), error, "nccl communicator: choosing this rank's GPU");
    return CPPARITY_OK;
}

/* The one-rank job: GPU 0, a local unique id, NCCL with one rank. */
static cpparity_status nccl_launch_alone(double timeout_seconds, cpparity_job_main main,
                                         void *argument, int *exit_code, cpparity_error *error) {
    nccl_process_rank = 0;
    const double deadline = monotonic_seconds() + timeout_seconds;
    int device = 0;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    NCCL_CALL(nccl_choose_device(0, &device, error));
    NCCL_CALL(nccl_unique_id(&id, error));
    ncclComm_t nccl = NULL;
    NCCL_CALL(nccl_init(&nccl, 1, id, 0, deadline, timeout_seconds, error));
    cpparity_comm *world = NULL;
    NCCL_CALL(nccl_wrap(nccl, NULL, false, NULL, device, 0, timeout_seconds, &world, error));
    *exit_code = main(world, argument);
    cpparity_comm_free(world);
    return CPPARITY_OK;
}

#ifdef CPPARITY_HAVE_MPI
/* This process's rank among the ranks of its node, and their number. */
static cpparity_status nccl_node_rank(int *node_rank, int *node_size, cpparity_error *error) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              error, "finding the ranks of this node");
    int code = MPI_Comm_rank(node, node_rank);
    if (code == MPI_SUCCESS) {
        code = MPI_Comm_size(node, node_size);
    }
    MPI_Comm_free(&node);
    if (code != MPI_SUCCESS) {
        return mpi_failure(code, error, "finding the ranks of this node",
                           "MPI_Comm_rank/MPI_Comm_size(node)", __FILE__, __LINE__);
    }
    return CPPARITY_OK;
}

/* This rank's GPU under MPI: its rank on the node modulo the node's devices. */
static cpparity_status nccl_choose_device_mpi(int *device, cpparity_error *error) {
    int node_rank = 0, node_size = 0, count = 0;
    NCCL_CALL(nccl_node_rank(&node_rank, &node_size, error));
    NCCL_CALL(nccl_choose_device(node_rank, device, error));
    if (cudaGetDeviceCount(&count) == cudaSuccess && node_size > count) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "--comm nccl: %d ranks on the node of rank %d share %d CUDA "
                                  "device%s (NCCL needs one GPU per rank: mpirun -np at most the "
                                  "GPUs of each node)",
                                  node_size, nccl_process_rank, count, count == 1 ? "" : "s");
    }
    return CPPARITY_OK;
}

/* Every rank learns whether every rank managed a step of the start (agree_status over MPI): a
 * rank that failed keeps its own error, the others get one saying another rank failed. */
static cpparity_status nccl_agree_start(cpparity_comm *mpi_world, cpparity_status local,
                                        const cpparity_error *local_error, const char *step,
                                        cpparity_error *error) {
    cpparity_status agreed = CPPARITY_OK;
    NCCL_CALL(cpparity_agree_status(mpi_world, local, &agreed, error));
    if (local != CPPARITY_OK) {
        if (error != NULL) {
            *error = *local_error;
        }
        return local;
    }
    if (agreed != CPPARITY_OK) {
        return cpparity_error_set(error, agreed,
                                  "nccl communicator: rank %d: another rank failed %s (its own "
                                  "message says why)",
                                  mpi_world->world_rank, step);
    }
    return CPPARITY_OK;
}

/* Starts the NCCL world over the MPI world (see comm_nccl.h). */
static cpparity_status nccl_start_mpi(cpparity_comm *mpi_world, double timeout_seconds,
                                      cpparity_comm **world, cpparity_error *error) {
    nccl_process_rank = mpi_world->world_rank;
    const double deadline = monotonic_seconds() + timeout_seconds;
    int device = -1;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    cpparity_error local_error;
    cpparity_error_clear(&local_error);
    cpparity_status local = nccl_choose_device_mpi(&device, &local_error);
    if (local == CPPARITY_OK && mpi_world->rank == 0) {
        local = nccl_unique_id(&id, &local_error);
    }
    NCCL_CALL(nccl_agree_start(mpi_world, local, &local_error, "to choose its GPU", error));
    NCCL_CALL(
        cpparity_broadcast(mpi_world, &id, (int64_t)sizeof id, CPPARITY_INT8, 0, NULL, error));
    ncclComm_t nccl = NULL;
    local = nccl_init(&nccl, mpi_world->size, id, mpi_world->rank, deadline, timeout_seconds,
                      &local_error);
    const cpparity_status status =
        nccl_agree_start(mpi_world, local, &local_error, "to start NCCL", error);
    if (status != CPPARITY_OK) {
        if (nccl != NULL) {
            (void)ncclCommAbort(nccl);
        }
        return status;
    }
    return nccl_wrap(nccl, mpi_world, false, NULL, device, mpi_world->world_rank, timeout_seconds,
                     world, error);
}

/* What comm_nccl_launch asks comm_mpi_launch to run, and how starting NCCL went. */
typedef struct nccl_bootstrap {
    double timeout_seconds; /* the job's deadline */
    cpparity_job_main main; /* the job */
    void *argument;         /* its argument */
    cpparity_status status; /* starting NCCL */
    cpparity_error error;   /* why it failed */
} nccl_bootstrap;

/* The job comm_mpi_launch runs: starts NCCL over the MPI world, runs the real job on it. */
static int nccl_mpi_job(cpparity_comm *mpi_world, void *argument) {
    nccl_bootstrap *bootstrap = argument;
    cpparity_comm *world = NULL;
    bootstrap->status =
        nccl_start_mpi(mpi_world, bootstrap->timeout_seconds, &world, &bootstrap->error);
    if (bootstrap->status != CPPARITY_OK) {
        return (int)bootstrap->status;
    }
    const int code = bootstrap->main(world, bootstrap->argument);
    cpparity_comm_free(world);
    return code;
}
#else
/* The number of processes an MPI launcher says it started (0 when none says so). */
static int nccl_launcher_size(void) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        const char *value = getenv(names[n]);
        if (value != NULL) {
            return atoi(value);
        }
    }
    return 0;
}
#endif

cpparity_status comm_nccl_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                 void *argument, int *exit_code, cpparity_error *error) {
    *exit_code = 3;
    if (main == NULL || !(timeout_seconds > 0.0)) {
        *exit_code = 2;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "comm_nccl_launch: need a job and a positive timeout (got %g s)",
                                  timeout_seconds);
    }
#ifdef CPPARITY_HAVE_MPI
    if (comm_mpi_detected()) {
        nccl_bootstrap bootstrap = {
            timeout_seconds, main, argument, CPPARITY_OK, {CPPARITY_OK, ""}};
        cpparity_status status =
            comm_mpi_launch(ranks, timeout_seconds, nccl_mpi_job, &bootstrap, exit_code, error);
        if (status == CPPARITY_OK && bootstrap.status != CPPARITY_OK) {
            if (error != NULL) {
                *error = bootstrap.error;
            }
            status = bootstrap.status;
        }
        return status;
    }
#else
    if (nccl_launcher_size() > 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "--comm nccl: an MPI launcher started %d processes, but this "
                                  "cpparity was built without MPI: each would run alone (run one "
                                  "process, or build with MPI)",
                                  nccl_launcher_size());
    }
#endif
    if (ranks > 1) {
        *exit_code = 2;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--comm nccl: asked for %d ranks; without mpirun it runs one "
                                  "rank (start more with mpirun -np %d)",
                                  ranks, ranks);
    }
    return nccl_launch_alone(timeout_seconds, main, argument, exit_code, error);
}
