/*
 * comm_local.h — the `local` communicator: N ranks as threads of one process, for machines
 * without MPI and for several ranks on one GPU. Collectives meet at a shared rendezvous guarded
 * by a mutex and condition variable, with a deadline (timed waits): a rank that never arrives
 * makes the others fail with a timeout instead of hanging.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_LOCAL_H
#define CPPARITY_DISTRIBUTED_COMM_LOCAL_H

#include "common/error.h"
#include "distributed/comm/comm.h"

/* The work one rank does; its return value is that rank's status. */
typedef cpparity_status (*comm_local_body)(cpparity_comm *comm, void *argument,
                                           cpparity_error *error);

/* Runs body on `ranks` threads, thread r holding rank r of a fresh local communicator (freed
 * when the threads have returned). statuses[r] and errors[r] (caller-provided arrays of `ranks`
 * entries; errors may be NULL) receive each rank's result. Returns CPPARITY_ERROR_RUNTIME (in
 * error) only when the threads could not be started. */
cpparity_status comm_local_run(int ranks, double timeout_seconds, comm_local_body body,
                               void *argument, cpparity_status *statuses, cpparity_error *errors,
                               cpparity_error *error);

/* comm_local_run for a job: runs main on `ranks` threads (ranks >= 1) and sets *exit_code to the
 * largest exit code any rank returned (3 for a rank that could not run). CPPARITY_ERROR_RUNTIME
 * when the threads could not be started. */
cpparity_status comm_local_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                  void *argument, int *exit_code, cpparity_error *error);

#endif
