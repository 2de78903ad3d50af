/*
 * parallel.h — internal to reference/: runs numbered work items on reference_threads() threads.
 *
 * Items are handed out in increasing order to whichever thread is free. The caller makes each
 * item's result independent of the thread and of the order (an item writes only its own outputs
 * and reduces them in a fixed order), which is what keeps the reference bitwise identical for
 * every thread count. When a thread cannot be started, the threads already running (the calling
 * one at least) do its share: fewer threads, same results. OpenBLAS is made single-threaded
 * first (see threads.h).
 */
#ifndef CPPARITY_REFERENCE_PARALLEL_H
#define CPPARITY_REFERENCE_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Runs item `item` with `scratch`, this thread's scratch_bytes of 64-byte aligned memory. */
typedef void (*reference_item_function)(void *context, int64_t item, void *scratch);

typedef struct reference_parallel_work {
    int64_t items;                    /* items 0 .. items−1 */
    size_t scratch_bytes;             /* per thread; 0 for none */
    reference_item_function run_item; /* called once per item */
    void *context;                    /* passed to run_item */
} reference_parallel_work;

/* Runs every item and returns when all are done. CPPARITY_ERROR_RUNTIME (naming `what`) when
 * not even one thread's scratch can be allocated; no item has run then. With scratch_bytes 0
 * nothing is allocated (run_item gets NULL) and it cannot fail; with no item, neither is
 * anything started or allocated. */
cpparity_status reference_parallel_run(const reference_parallel_work *work, const char *what,
                                       cpparity_error *error);

#endif
