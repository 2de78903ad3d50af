/* comm_launch.c — the communicator backends of this build (see comm_launch.h). */
#include "distributed/comm/comm_launch.h"

#include <string.h>

#include "distributed/comm/comm_local.h"
#ifdef CPPARITY_HAVE_MPI
#include "distributed/comm/comm_mpi.h"
#endif
#ifdef CPPARITY_HAVE_NCCL
#include "distributed/comm/comm_nccl.h"
#endif

/* The local backend never needs an outside launcher and wraps no library. */
static bool local_detected(void) {
    return false;
}

static void local_library_version(char *text, size_t size) {
    if (size > 0) {
        text[0] = '\0';
    }
}

static const cpparity_comm_backend backends[] = {
    {"local", "N ranks as threads of this process (--ranks N)", false, local_detected,
     local_library_version, comm_local_launch},
#ifdef CPPARITY_HAVE_MPI
    {"mpi", "one process per rank, started by mpirun -np N", true, comm_mpi_detected,
     comm_mpi_library_version, comm_mpi_launch},
#endif
#ifdef CPPARITY_HAVE_NCCL
    {"nccl", "NCCL on GPUs: one rank per GPU (MPI starts the ranks; one rank without mpirun)", true,
     comm_nccl_detected, comm_nccl_library_version, comm_nccl_launch},
#endif
};

#define BACKEND_COUNT ((int)(sizeof backends / sizeof *backends))

int comm_backend_count(void) {
    return BACKEND_COUNT;
}

const cpparity_comm_backend *comm_backend_at(int index) {
    return index >= 0 && index < BACKEND_COUNT ? &backends[index] : NULL;
}

const cpparity_comm_backend *comm_backend_find(const char *name) {
    for (int i = 0; name != NULL && i < BACKEND_COUNT; i++) {
        if (strcmp(backends[i].name, name) == 0) {
            return &backends[i];
        }
    }
    return NULL;
}

const cpparity_comm_backend *comm_backend_detect(void) {
    for (int i = 0; i < BACKEND_COUNT; i++) {
        if (backends[i].detected()) {
            return &backends[i];
        }
    }
    return &backends[0];
}
