/*
 * nccl_check.h — the one check every NCCL return code goes through. NCCL_CHECK(call, error, what)
 * runs call; on failure it records in error what was being done, this process's rank, the call,
 * NCCL's text for the code (ncclGetErrorString) and NCCL's own last error line when it has one
 * (ncclGetLastError), and the source line (nccl_failure), and returns CPPARITY_ERROR_RUNTIME from
 * the enclosing function.
 *
 * ncclInProgress is not a failure: the communicators of comm_nccl.c are non-blocking, so NCCL
 * may return it from any call while it is still working; the caller then polls
 * ncclCommGetAsyncError until the operation is done (and fails there if it does not finish).
 */
#ifndef CPPARITY_DISTRIBUTED_NCCL_CHECK_H
#define CPPARITY_DISTRIBUTED_NCCL_CHECK_H

#include <nccl.h>
#include <stdbool.h>

#include "common/error.h"

/* Records the failure of an NCCL call that returned `code`, made for `what`, on this process's
 * rank of the nccl job (-1 before comm_nccl_launch has chosen it). Returns
 * CPPARITY_ERROR_RUNTIME. Defined in comm_nccl.c. */
cpparity_status nccl_failure(ncclResult_t code, cpparity_error *error, const char *what,
                             const char *call, const char *file, int line);

/* Whether an NCCL result is a success (done, or accepted and still running). */
static inline bool nccl_result_ok(ncclResult_t code) {
    return code == ncclSuccess || code == ncclInProgress;
}

#define NCCL_CHECK(call, error, what)                                                              \
    do {                                                                                           \
        const ncclResult_t nccl_check_code_ = (call);                                              \
        if (!nccl_result_ok(nccl_check_code_)) {                                                   \
            return nccl_failure(nccl_check_code_, (error), (what), #call, __FILE__, __LINE__);     \
        }                                                                                          \
    } while (0)

#endif
