/*
 * comm.c — what every communicator shares: element sizes, and the argument checks made once in
 * front of every implementation (see comm.h) before the call reaches comm->operations.
 */
#include "distributed/comm/comm.h"

#include <stdbool.h>
#include <stddef.h>

/* Size in bytes of one element of type; 0 for a value outside the enumeration. */
int64_t cpparity_element_size(cpparity_element_type type) {
    switch (type) {
    case CPPARITY_FLOAT32:
        return 4;
    case CPPARITY_FLOAT64:
        return 8;
    case CPPARITY_INT64:
        return 8;
    case CPPARITY_INT8:
        return 1;
    case CPPARITY_BFLOAT16:
        return 2;
    }
    return 0;
}

/* "mpi communicator: all_to_all on rank 3: " for messages. */
#define WHERE_FORMAT "%s communicator: %s on rank %d: "
#define WHERE(comm, collective) (comm)->kind, (collective), (comm)->world_rank

/* Checks a data-moving call: a known type, 0 <= count, `blocks` blocks of count elements
 * addressable in int64 bytes, and both buffers present when there is data. */
static cpparity_status check_buffers(const cpparity_comm *comm, const char *collective,
                                     const void *send, const void *receive, int64_t count,
                                     int64_t blocks, cpparity_element_type type,
                                     cpparity_error *error) {
    const int64_t element_size = cpparity_element_size(type);
    if (element_size == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  WHERE_FORMAT "unknown element type %d", WHERE(comm, collective),
                                  (int)type);
    }
    if (count < 0 || count > INT64_MAX / element_size / (blocks > 0 ? blocks : 1)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  WHERE_FORMAT "count %lld out of range", WHERE(comm, collective),
                                  (long long)count);
    }
    if (count > 0 && (send == NULL || receive == NULL)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  WHERE_FORMAT "NULL buffer for %lld elements",
                                  WHERE(comm, collective), (long long)count);
    }
    return CPPARITY_OK;
}

/* Checks that root names a rank of comm. */
static cpparity_status check_root(const cpparity_comm *comm, const char *collective, int root,
                                  cpparity_error *error) {
    if (root < 0 || root >= comm->size) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  WHERE_FORMAT "root %d is not a rank of a communicator of %d "
                                               "ranks",
                                  WHERE(comm, collective), root, comm->size);
    }
    return CPPARITY_OK;
}

/* A communicator must exist and have its operations. */
static cpparity_status check_comm(const cpparity_comm *comm, const char *collective,
                                  cpparity_error *error) {
    if (comm == NULL || comm->operations == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s on a NULL communicator",
                                  collective);
    }
    return CPPARITY_OK;
}

cpparity_status cpparity_all_to_all(cpparity_comm *comm, const void *send, void *receive,
                                    int64_t count_per_rank, cpparity_element_type type,
                                    void *stream, cpparity_error *error) {
    cpparity_status status = check_comm(comm, "all_to_all", error);
    if (status == CPPARITY_OK) {
        status = check_buffers(comm, "all_to_all", send, receive, count_per_rank, comm->size, type,
                               error);
    }
    if (status == CPPARITY_OK && count_per_rank > 0 && send == receive) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    WHERE_FORMAT "send and receive must not overlap",
                                    WHERE(comm, "all_to_all"));
    }
    return status != CPPARITY_OK ? status
                                 : comm->operations->all_to_all(comm, send, receive, count_per_rank,
                                                                type, stream, error);
}

cpparity_status cpparity_all_reduce_sum(cpparity_comm *comm, const void *send, void *receive,
                                        int64_t count, cpparity_element_type type, void *stream,
                                        cpparity_error *error) {
    cpparity_status status = check_comm(comm, "all_reduce_sum", error);
    if (status == CPPARITY_OK) {
        /* an implementation may gather every rank's contribution to sum in rank order */
        status =
            check_buffers(comm, "all_reduce_sum", send, receive, count, comm->size, type, error);
    }
    return status != CPPARITY_OK
               ? status
               : comm->operations->all_reduce_sum(comm, send, receive, count, type, stream, error);
}

cpparity_status cpparity_all_gather(cpparity_comm *comm, const void *send, void *receive,
                                    int64_t count_per_rank, cpparity_element_type type,
                                    void *stream, cpparity_error *error) {
    cpparity_status status = check_comm(comm, "all_gather", error);
    if (status == CPPARITY_OK) {
        status = check_buffers(comm, "all_gather", send, receive, count_per_rank, comm->size, type,
                               error);
    }
    return status != CPPARITY_OK ? status
                                 : comm->operations->all_gather(comm, send, receive, count_per_rank,
                                                                type, stream, error);
}

cpparity_status cpparity_shift(cpparity_comm *comm, const void *send, void *receive, int64_t count,
                               cpparity_element_type type, int offset, void *stream,
                               cpparity_error *error) {
    cpparity_status status = check_comm(comm, "shift", error);
    if (status == CPPARITY_OK) {
        status = check_buffers(comm, "shift", send, receive, count, 1, type, error);
    }
    if (status == CPPARITY_OK && count > 0 && send == receive) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    WHERE_FORMAT "send and receive must not overlap",
                                    WHERE(comm, "shift"));
    }
    if (status == CPPARITY_OK && comm->operations->shift == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    WHERE_FORMAT "this communicator has no ring shift",
                                    WHERE(comm, "shift"));
    }
    const int normalised = (int)(((int64_t)offset % comm->size + comm->size) % comm->size);
    return status != CPPARITY_OK ? status
                                 : comm->operations->shift(comm, send, receive, count, type,
                                                           normalised, stream, error);
}

cpparity_status cpparity_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                   cpparity_element_type type, int root, void *stream,
                                   cpparity_error *error) {
    cpparity_status status = check_comm(comm, "broadcast", error);
    if (status == CPPARITY_OK) {
        status = check_buffers(comm, "broadcast", buffer, buffer, count, 1, type, error);
    }
    if (status == CPPARITY_OK) {
        status = check_root(comm, "broadcast", root, error);
    }
    return status != CPPARITY_OK
               ? status
               : comm->operations->broadcast(comm, buffer, count, type, root, stream, error);
}

cpparity_status cpparity_gather_bytes(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                      void **received, int64_t *sizes, int root,
                                      cpparity_error *error) {
    cpparity_status status = check_comm(comm, "gather_bytes", error);
    if (status == CPPARITY_OK) {
        status = check_root(comm, "gather_bytes", root, error);
    }
    if (status == CPPARITY_OK && (received == NULL || (comm->rank == root && sizes == NULL))) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    WHERE_FORMAT "NULL received or (on the root) sizes",
                                    WHERE(comm, "gather_bytes"));
    }
    if (status == CPPARITY_OK) {
        *received = NULL;
        if (send_bytes < 0 || send_bytes > INT64_MAX / comm->size ||
            (send_bytes > 0 && send == NULL)) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        WHERE_FORMAT "bad send buffer (%lld bytes)",
                                        WHERE(comm, "gather_bytes"), (long long)send_bytes);
        }
    }
    return status != CPPARITY_OK ? status
                                 : comm->operations->gather_bytes(comm, send, send_bytes, received,
                                                                  sizes, root, error);
}

cpparity_status cpparity_agree_status(cpparity_comm *comm, cpparity_status local,
                                      cpparity_status *agreed, cpparity_error *error) {
    cpparity_status status = check_comm(comm, "agree_status", error);
    if (status == CPPARITY_OK && agreed == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT, WHERE_FORMAT "NULL agreed",
                                    WHERE(comm, "agree_status"));
    }
    return status != CPPARITY_OK ? status
                                 : comm->operations->agree_status(comm, local, agreed, error);
}

cpparity_status cpparity_comm_split(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                                    cpparity_error *error) {
    cpparity_status status = check_comm(comm, "split", error);
    if (status == CPPARITY_OK && result == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT, WHERE_FORMAT "NULL result",
                                    WHERE(comm, "split"));
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    *result = NULL;
    return comm->operations->split(comm, color, key, result, error);
}

void cpparity_comm_abort(cpparity_comm *comm, int code, const char *message) {
    comm->operations->abort(comm, code, message != NULL ? message : "(no message)");
}

void cpparity_comm_free(cpparity_comm *comm) {
    if (comm != NULL) {
        comm->operations->free(comm);
    }
}
