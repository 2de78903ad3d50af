/*
 * comm_mpi.h — the `mpi` communicator over Open MPI, and its bootstrap. Collectives are the
 * non-blocking MPI ones polled against the deadline; a timeout or a failed rank ends the job
 * with MPI_Abort and a message naming the rank. The deadline is for hangs, not for computation:
 * while another rank of the communicator computes (it has not said it is waiting in a collective
 * or has finished), a waiting rank waits on (comm_mpi.c). Every MPI return code goes through one
 * check (MPI_CHECK, mpi_check.h) that names the call, the source line and the rank.
 *
 * The communicator owns MPI's life: comm_mpi_launch initialises MPI, wraps MPI_COMM_WORLD, runs
 * the job and finalises MPI. Nothing else in cpparity calls MPI_Init or MPI_Finalize.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_MPI_H
#define CPPARITY_DISTRIBUTED_COMM_MPI_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "distributed/comm/comm.h"

/* Runs main on this process's rank of the MPI job (the ranks are the processes mpirun started;
 * ranks must be 0 or equal to their number). Initialises MPI (MPI_Init_thread, errors returned,
 * not fatal) unless it already is, creates the world communicator with timeout_seconds, calls
 * main, frees the communicator and finalises MPI if it initialised it. *exit_code is main's
 * return value; when MPI cannot start or finalise, CPPARITY_ERROR_RUNTIME naming the call (and
 * *exit_code 3). */
cpparity_status comm_mpi_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                void *argument, int *exit_code, cpparity_error *error);

/* A communicator over MPI_COMM_WORLD (MPI must be initialised): for tests that manage MPI
 * themselves. Free with cpparity_comm_free. */
cpparity_status comm_mpi_create_world(cpparity_comm **comm, double timeout_seconds,
                                      cpparity_error *error);

/* Says this rank's job is over: ranks still waiting for it stop waiting for a computation, and
 * time out at their deadline. comm_mpi_launch says it after main returns; tests that manage MPI
 * themselves say it. */
void comm_mpi_finished(void);

/* Whether this process was started by an MPI launcher (mpirun / mpiexec / srun set the
 * environment); no MPI call is made. */
bool comm_mpi_detected(void);

/* "Open MPI v4.1.4" (the MPI library's own version line, which needs no initialised MPI). */
void comm_mpi_library_version(char *text, size_t size);

#endif
