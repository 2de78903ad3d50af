/*
 * comm_launch.h — starting a job on a communicator chosen by name (`--comm`): each backend owns
 * its bootstrap (the local one starts threads, the mpi one initialises and finalises MPI), so
 * the driver only says which one and what to run. A backend is one table row in
 * comm_launch.c.
 */
#ifndef CPPARITY_DISTRIBUTED_COMM_LAUNCH_H
#define CPPARITY_DISTRIBUTED_COMM_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "distributed/comm/comm.h"

typedef struct cpparity_comm_backend {
    const char *name;         /* the --comm value: "local", "mpi" */
    const char *description;  /* one line for --help */
    bool ranks_from_launcher; /* the ranks are processes an outside launcher started (mpirun):
                                 --ranks does not apply */
    /* Whether this process was started by this backend's launcher (mpirun for mpi). */
    bool (*detected)(void);
    /* The library behind it, for provenance ("" when none). */
    void (*library_version)(char *text, size_t size);
    /* Runs main on every rank of a new job (see comm_local_launch, comm_mpi_launch). ranks: the
     * ranks to start (local), or 0 / the launcher's count (mpi). *exit_code: this process's
     * exit code (local: the largest over its ranks). */
    cpparity_status (*launch)(int ranks, double timeout_seconds, cpparity_job_main main,
                              void *argument, int *exit_code, cpparity_error *error);
} cpparity_comm_backend;

/* Number of backends built, and backend index (NULL outside [0, count)). */
int comm_backend_count(void);
const cpparity_comm_backend *comm_backend_at(int index);

/* The backend called name, or NULL when it was not built (or does not exist). */
const cpparity_comm_backend *comm_backend_find(const char *name);

/* The backend whose launcher started this process (mpi under mpirun), else local. */
const cpparity_comm_backend *comm_backend_detect(void);

#endif
