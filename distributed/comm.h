/*
 * comm.h — the communicator the implementation under test runs on: one small interface with
 * three implementations, `mpi` (Open MPI, one process per rank), `local` (N ranks as threads of
 * one process: machines without MPI, several ranks on one GPU) and `nccl` (GPU issue).
 *
 * Buffers are passed through untouched as `void *` with an element type and count, and every
 * data-moving call takes an opaque `stream` (NULL on the CPU; a cudaStream_t for nccl), so device
 * pointers and streams pass through this interface unchanged.
 *
 * Every collective has a deadline (comm->timeout_seconds): instead of hanging it fails with
 * CPPARITY_ERROR_RUNTIME and a message naming the collective, the rank and the timeout, and the
 * communicator is then unusable (every later call fails at once on every rank). A rank that
 * fails for another reason calls cpparity_comm_abort, which stops the whole job with a message:
 * MPI_Abort for mpi; for local, every other rank's pending and later calls fail promptly.
 *
 * Ownership: a cpparity_comm is created by its implementation's constructor (comm_mpi.h,
 * comm_local.h) and released with cpparity_comm_free; communicators made by split are released
 * the same way, before their parent.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_H
#define CPPARITY_DISTRIBUTED_COMM_H

#include <stdint.h>

#include "common/error.h"

typedef enum cpparity_element_type {
    CPPARITY_FLOAT32 = 0,  /* float */
    CPPARITY_FLOAT64 = 1,  /* double */
    CPPARITY_INT64 = 2,    /* int64_t */
    CPPARITY_INT8 = 3,     /* int8_t */
    CPPARITY_BFLOAT16 = 4, /* uint16_t holding bfloat16 bits (sum: not supported on CPU) */
} cpparity_element_type;

/* Size in bytes of one element. */
int64_t cpparity_element_size(cpparity_element_type type);

typedef struct cpparity_comm cpparity_comm;

typedef struct cpparity_comm_operations {
    /* send holds `size` blocks of count_per_rank elements; block j goes to rank j. receive gets
     * block i from rank i, in rank order. send and receive must not overlap. */
    cpparity_status (*all_to_all)(cpparity_comm *comm, const void *send, void *receive,
                                  int64_t count_per_rank, cpparity_element_type type, void *stream,
                                  cpparity_error *error);
    /* receive = element-wise sum over ranks of send (count elements); send == receive allowed.
     * Ranks are summed in rank order, so every rank ends with identical bits. */
    cpparity_status (*all_reduce_sum)(cpparity_comm *comm, const void *send, void *receive,
                                      int64_t count, cpparity_element_type type, void *stream,
                                      cpparity_error *error);
    /* receive (size · count_per_rank) = the send blocks of ranks 0..size−1, in rank order. */
    cpparity_status (*all_gather)(cpparity_comm *comm, const void *send, void *receive,
                                  int64_t count_per_rank, cpparity_element_type type, void *stream,
                                  cpparity_error *error);
    /* buffer (count elements) of rank root is copied to every rank. */
    cpparity_status (*broadcast)(cpparity_comm *comm, void *buffer, int64_t count,
                                 cpparity_element_type type, int root, void *stream,
                                 cpparity_error *error);
    /* Host bytes of any length from every rank to root. On root, *received is a malloc'd
     * concatenation in rank order (the caller frees it) and sizes[r] (caller-provided, size
     * entries) the length from rank r; elsewhere *received is NULL. */
    cpparity_status (*gather_bytes)(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                    void **received, int64_t *sizes, int root,
                                    cpparity_error *error);
    /* *agreed = the largest status any rank passed in: lets every rank exit with one code. */
    cpparity_status (*agree_status)(cpparity_comm *comm, cpparity_status local,
                                    cpparity_status *agreed, cpparity_error *error);
    /* Ranks passing the same color form a new communicator, ranked by (key, parent rank). Every
     * rank of comm must call it. *result is allocated; free it with cpparity_comm_free. */
    cpparity_status (*split)(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                             cpparity_error *error);
    /* Stops the whole job: prints message (with the rank) to stderr and makes every rank stop
     * with exit code `code` (mpi) or fail every pending and later call (local). */
    void (*abort)(cpparity_comm *comm, int code, const char *message);
    /* Releases this communicator (not its parent). */
    void (*free)(cpparity_comm *comm);
} cpparity_comm_operations;

struct cpparity_comm {
    const cpparity_comm_operations *operations; /* the implementation */
    const char *kind;                           /* "mpi", "local" or "nccl" */
    int rank;                                   /* 0 .. size − 1 */
    int size;                                   /* number of ranks */
    int world_rank;                             /* rank in the job, for messages */
    double timeout_seconds;                     /* deadline of every collective */
    void *implementation;                       /* owned by the implementation */
};

/* Convenience wrappers: comm->operations->X(comm, ...). */
static inline cpparity_status cpparity_all_to_all(cpparity_comm *comm, const void *send,
                                                  void *receive, int64_t count_per_rank,
                                                  cpparity_element_type type, void *stream,
                                                  cpparity_error *error) {
    return comm->operations->all_to_all(comm, send, receive, count_per_rank, type, stream, error);
}
static inline cpparity_status cpparity_all_reduce_sum(cpparity_comm *comm, const void *send,
                                                      void *receive, int64_t count,
                                                      cpparity_element_type type, void *stream,
                                                      cpparity_error *error) {
    return comm->operations->all_reduce_sum(comm, send, receive, count, type, stream, error);
}
static inline cpparity_status cpparity_all_gather(cpparity_comm *comm, const void *send,
                                                  void *receive, int64_t count_per_rank,
                                                  cpparity_element_type type, void *stream,
                                                  cpparity_error *error) {
    return comm->operations->all_gather(comm, send, receive, count_per_rank, type, stream, error);
}
static inline cpparity_status cpparity_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                                 cpparity_element_type type, int root, void *stream,
                                                 cpparity_error *error) {
    return comm->operations->broadcast(comm, buffer, count, type, root, stream, error);
}
static inline cpparity_status cpparity_gather_bytes(cpparity_comm *comm, const void *send,
                                                    int64_t send_bytes, void **received,
                                                    int64_t *sizes, int root,
                                                    cpparity_error *error) {
    return comm->operations->gather_bytes(comm, send, send_bytes, received, sizes, root, error);
}
static inline cpparity_status cpparity_agree_status(cpparity_comm *comm, cpparity_status local,
                                                    cpparity_status *agreed,
                                                    cpparity_error *error) {
    return comm->operations->agree_status(comm, local, agreed, error);
}
static inline cpparity_status cpparity_comm_split(cpparity_comm *comm, int color, int key,
                                                  cpparity_comm **result, cpparity_error *error) {
    return comm->operations->split(comm, color, key, result, error);
}
static inline void cpparity_comm_abort(cpparity_comm *comm, int code, const char *message) {
    comm->operations->abort(comm, code, message);
}
static inline void cpparity_comm_free(cpparity_comm *comm) {
    if (comm != NULL) {
        comm->operations->free(comm);
    }
}

#endif
