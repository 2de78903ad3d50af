/*
 * comm.h — the communicator the implementation under test runs on: one small interface with
 * up to three implementations in a build, `mpi` (Open MPI, one process per rank, comm_mpi.h),
 * `local` (N ranks as threads of one process, comm_local.h: machines without MPI, several ranks
 * on one device) and `nccl` (NCCL on GPUs, one rank per GPU, comm_nccl.h; built when CUDA and
 * NCCL are found). distributed/comm/comm_launch.h starts a job on any of them by name.
 *
 * Buffers are passed through untouched as `void *` with an element type and count, and every
 * data-moving call takes an opaque `stream` (NULL for the CPU communicators, which refuse any
 * other value), so that a communicator moving device memory on a stream fits the same
 * interface.
 *
 * Every call goes through the functions below (comm.c), which check what every implementation
 * would have to check — a known element type, counts that are not negative and whose byte size
 * fits int64, buffers present when there is data, a root that is a rank of the communicator,
 * result pointers — and fail with CPPARITY_ERROR_INPUT naming the collective and the rank
 * before the implementation is called. Implementations check only what is theirs (MPI's int
 * counts, the stream, which sums they support).
 *
 * Every collective has a deadline (comm->timeout_seconds, measured on a monotonic clock), for
 * hangs, not for computation: while a rank the collective waits for is computing (neither
 * waiting in a collective of the job nor finished), the deadline moves on (local and mpi; nccl
 * keeps the plain deadline); mpi also moves it on, a few times, while every rank is inside the
 * same collective (MPI's transfer still in flight). When it passes with every missing rank
 * waiting elsewhere or gone,
 * instead of hanging it fails with CPPARITY_ERROR_RUNTIME and a message naming the collective,
 * the rank and the timeout, and the communicator is then unusable (every later call fails at
 * once on every rank; mpi stops the job with MPI_Abort). A rank that fails for another reason
 * calls cpparity_comm_abort, which stops the whole job with a message: MPI_Abort for mpi; for
 * local, every other rank's pending and later calls fail promptly.
 *
 * Ownership: a job's world communicator is made and released by its launcher
 * (comm_launch.h); communicators made by split are released with cpparity_comm_free, before
 * their parent.
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
     * Every rank ends with identical bits: mpi and local sum in rank order; nccl in NCCL's own
     * order, which is the same for every rank (comm_nccl.h). */
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
    /* Host bytes of any length (send_bytes >= 0, may differ between ranks) from every rank to
     * root. On root, *received is a malloc'd
     * concatenation in rank order (the caller frees it) and sizes[r] (caller-provided, size
     * entries) the length from rank r; elsewhere *received is NULL. */
    cpparity_status (*gather_bytes)(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                    void **received, int64_t *sizes, int root,
                                    cpparity_error *error);
    /* *agreed = the largest status any rank passed in: lets every rank exit with one code. */
    cpparity_status (*agree_status)(cpparity_comm *comm, cpparity_status local,
                                    cpparity_status *agreed, cpparity_error *error);
    /* The ring step of ring attention: send (count elements) goes to rank (rank + offset) mod
     * size, and receive gets the send of rank (rank − offset) mod size. offset is already in
     * [0, size) (cpparity_shift normalises it); every rank passes the same count, type and
     * offset. send and receive must not overlap. */
    cpparity_status (*shift)(cpparity_comm *comm, const void *send, void *receive, int64_t count,
                             cpparity_element_type type, int offset, void *stream,
                             cpparity_error *error);
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

/* The body of a job (comm_launch.h): runs on every rank with the job's world communicator and
 * returns that rank's process exit code (0 passed, 1 parity failure, 2 bad input, 3 runtime). */
typedef int (*cpparity_job_main)(cpparity_comm *world, void *argument);

/* The collectives, each checked (see the top of this file) and then passed to
 * comm->operations. Same semantics as the operations above. */
cpparity_status cpparity_all_to_all(cpparity_comm *comm, const void *send, void *receive,
                                    int64_t count_per_rank, cpparity_element_type type,
                                    void *stream, cpparity_error *error);
cpparity_status cpparity_all_reduce_sum(cpparity_comm *comm, const void *send, void *receive,
                                        int64_t count, cpparity_element_type type, void *stream,
                                        cpparity_error *error);
cpparity_status cpparity_all_gather(cpparity_comm *comm, const void *send, void *receive,
                                    int64_t count_per_rank, cpparity_element_type type,
                                    void *stream, cpparity_error *error);
cpparity_status cpparity_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                   cpparity_element_type type, int root, void *stream,
                                   cpparity_error *error);
cpparity_status cpparity_gather_bytes(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                      void **received, int64_t *sizes, int root,
                                      cpparity_error *error);
cpparity_status cpparity_agree_status(cpparity_comm *comm, cpparity_status local,
                                      cpparity_status *agreed, cpparity_error *error);
cpparity_status cpparity_comm_split(cpparity_comm *comm, int color, int key, cpparity_comm **result,
                                    cpparity_error *error);
/* The ring shift above; any offset, negative too (−1 sends to the previous rank, as dK and dV
 * travel back round the ring), taken modulo the size. */
cpparity_status cpparity_shift(cpparity_comm *comm, const void *send, void *receive, int64_t count,
                               cpparity_element_type type, int offset, void *stream,
                               cpparity_error *error);
/* Stops the whole job (see abort above); comm may not be NULL. */
void cpparity_comm_abort(cpparity_comm *comm, int code, const char *message);
/* Releases a communicator made by split; safe on NULL. */
void cpparity_comm_free(cpparity_comm *comm);

#endif
