/*
 * mpi_check.h — the one check every MPI return code goes through. MPI_CHECK(call, error, what)
 * runs call; on failure it records in error the MPI error text, the world rank, the call and its
 * source line (mpi_failure) and returns CPPARITY_ERROR_RUNTIME from the enclosing function.
 * Communicators must have MPI_ERRORS_RETURN set for failures to come back here.
 */
#ifndef CPPARITY_DISTRIBUTED_MPI_CHECK_H
#define CPPARITY_DISTRIBUTED_MPI_CHECK_H

#include <mpi.h>

#include "common/error.h"

/* Records the failure of an MPI call that returned `code`, made for `what`. Returns
 * CPPARITY_ERROR_RUNTIME. */
cpparity_status mpi_failure(int code, cpparity_error *error, const char *what, const char *call,
                            const char *file, int line);

#define MPI_CHECK(call, error, what)                                                               \
    do {                                                                                           \
        int mpi_check_code_ = (call);                                                              \
        if (mpi_check_code_ != MPI_SUCCESS) {                                                      \
            return mpi_failure(mpi_check_code_, (error), (what), #call, __FILE__, __LINE__);       \
        }                                                                                          \
    } while (0)

#endif
