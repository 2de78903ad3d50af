/*
 * comm_nccl.h — the `nccl` communicator: NCCL on GPUs, one rank per GPU, and its bootstrap.
 *
 * Bootstrap. Under mpirun (this build has MPI and comm_mpi_detected() says a launcher started
 * the process) the ranks are MPI's: comm_nccl_launch runs inside comm_mpi_launch, which owns
 * MPI_Init and MPI_Finalize as for the mpi communicator. Each rank takes the GPU numbered by its
 * rank among the ranks of its node (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) modulo the
 * node's device count; rank 0 makes the NCCL unique id (ncclGetUniqueId) and broadcasts it over
 * MPI; every rank then starts NCCL (ncclCommInitRankConfig, non-blocking, polled against the
 * deadline). Each step ends with an agreement over MPI, so a rank that cannot start (no GPU,
 * NCCL failing) makes every rank fail with an error instead of leaving the others waiting.
 * More ranks on a node than it has GPUs are refused (NCCL cannot put two ranks of one
 * communicator on one GPU). Without MPI, or not under mpirun, the job is ONE rank on GPU 0 (a
 * local unique id, nranks 1): that is how a one-GPU machine runs it (a build without MPI that an
 * MPI launcher started several times refuses to run rather than run the job once per process).
 * A machine without a CUDA device fails the launch with CPPARITY_ERROR_RUNTIME, "--comm nccl: no
 * CUDA device (...)"; nothing crashes.
 *
 * Collectives run on the caller's stream (`void *stream` is a cudaStream_t, NULL the default
 * stream) and return when they are complete: all_to_all is one ncclSend and one ncclRecv per
 * peer inside ncclGroupStart/ncclGroupEnd, all_gather ncclAllGather, broadcast ncclBroadcast,
 * all_reduce_sum ncclAllReduce with ncclSum, for every element type of comm.h (bfloat16 as
 * ncclBfloat16; bfloat16 sums are supported here, unlike on the CPU communicators).
 *
 * Identical bits. NCCL documents that ncclAllReduce "leaves identical copies of the result in
 * each recvbuff": each of its algorithms reduces every output element once (ring: reduce-scatter
 * then all-gather; tree: reduce to the root then broadcast; NVLS and CollNet: the switch or the
 * network reduces, then the result is multicast) and copies that one result to every rank, so
 * every rank ends with the same bits. The ORDER of the floating-point additions, however, is
 * NCCL's (it depends on the algorithm, protocol, channel count and topology) and not the rank
 * order comm.h describes for mpi and local: float sums may differ in their last bits from those
 * communicators' and between machines, never between the ranks of one job. Integer sums are
 * exact.
 *
 * Host buffers. The harness also passes HOST pointers (exit codes, plans: small control
 * values). Every buffer is classified with cudaPointerGetAttributes: device and managed memory
 * go to NCCL as they are; host memory (pageable or pinned) is staged through a device scratch
 * buffer owned by the communicator: the stream is first drained (against the deadline, so the
 * copies' implicit synchronisation cannot wait unbounded), inputs are copied in on the stream,
 * NCCL runs on the scratch, outputs are copied back and the stream is drained again before the
 * call returns. Each host buffer has a region of its own, so in-place calls on host memory work
 * as well. Device buffers must live on the communicator's GPU (else CPPARITY_ERROR_INPUT).
 *
 * gather_bytes (host bytes), agree_status and split go over MPI when the job has MPI (the mpi
 * communicator over the same ranks, with its deadlines); with one rank they are local. split
 * also splits the NCCL communicator: ncclCommSplit (NCCL >= 2.18; ranks ordered by key then
 * parent rank, as MPI_Comm_split orders the MPI side), otherwise a new unique id broadcast in the
 * MPI sub-communicator and ncclCommInitRankConfig.
 *
 * Deadlines. After enqueuing, a call polls ncclCommGetAsyncError (until NCCL no longer reports
 * ncclInProgress) and then cudaStreamQuery, sleeping 50 µs between polls after the first spins,
 * until the work is done, an error appears, or comm->timeout_seconds (CLOCK_MONOTONIC, from the
 * start of the call) have passed. On an error or the deadline the NCCL communicator is aborted
 * (ncclCommAbort), this communicator becomes unusable (every later call fails at once) and the
 * call returns CPPARITY_ERROR_RUNTIME naming the collective, the rank and the timeout; the other
 * ranks then fail in their own deadline or on NCCL's remote error. Any other runtime failure
 * inside a call (a CUDA or NCCL error, out of memory) does the same; input errors found here (a
 * device buffer on another GPU) leave the communicator usable, as in comm.c.
 *
 * abort: ncclCommAbort, then under MPI the mpi communicator's abort (prints the message, then
 * MPI_Abort ends the job); with one rank it prints the message and every pending and later call
 * of the job's communicators fails at once, as for local.
 *
 * Ownership: as comm.h; split results own their MPI sub-communicator and NCCL communicator, and
 * must be freed before their parent. A released communicator is finalised (ncclCommFinalize,
 * polled against the deadline, then ncclCommDestroy), an unusable one aborted.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_NCCL_H
#define CPPARITY_DISTRIBUTED_COMM_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "distributed/comm/comm.h"

/* Runs main on this process's rank of an nccl job (see the top of this file). ranks: 0, or the
 * number the launcher started (1 without mpirun). *exit_code is main's return value; when the
 * job cannot start (no CUDA device, NCCL or MPI failing on any rank, a rank count that does not
 * match) CPPARITY_ERROR_RUNTIME or CPPARITY_ERROR_INPUT naming why, and *exit_code 3 (2 for bad
 * input). */
cpparity_status comm_nccl_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                 void *argument, int *exit_code, cpparity_error *error);

/* Always false: nccl is chosen by --comm nccl, never detected (under mpirun detection picks
 * mpi). */
bool comm_nccl_detected(void);

/* "NCCL 2.28.9" (the linked library's version, ncclGetVersion; needs no GPU). */
void comm_nccl_library_version(char *text, size_t size);

#endif
