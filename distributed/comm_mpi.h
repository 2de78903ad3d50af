/*
 * comm_mpi.h — the `mpi` communicator over Open MPI. Collectives are the non-blocking MPI ones
 * polled against the deadline; a timeout or a failed rank ends the job with MPI_Abort and a
 * message naming the rank. Every MPI return code goes through one check (MPI_CHECK in
 * comm_mpi.c) that names the call, the source line and the rank.
 *
 * The driver calls MPI_Init_thread/MPI_Finalize; this file only wraps MPI_COMM_WORLD.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_MPI_H
#define CPPARITY_DISTRIBUTED_COMM_MPI_H

#include "common/error.h"
#include "distributed/comm.h"

/* A communicator over MPI_COMM_WORLD (MPI must be initialised). Free with cpparity_comm_free. */
cpparity_status comm_mpi_create_world(cpparity_comm **comm, double timeout_seconds,
                                      cpparity_error *error);

#endif
