/* parallel.c — the reference's work-item runner (see parallel.h). */
#include "parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "threads.h"

typedef struct runner {
    const reference_parallel_work *work;
    atomic_llong next_item; /* the next item not yet handed out */
} runner;

typedef struct worker {
    runner *shared;
    void *scratch; /* this thread's scratch */
    pthread_t thread;
} worker;

static void *worker_main(void *argument) {
    worker *self = argument;
    const reference_parallel_work *work = self->shared->work;
    for (;;) {
        const int64_t item = (int64_t)atomic_fetch_add(&self->shared->next_item, 1);
        if (item >= work->items) {
            return NULL;
        }
        work->run_item(work->context, item, self->scratch);
    }
}

/* 64-byte aligned scratch (a cache line, and the widest vector). */
static void *scratch_allocate(size_t bytes) {
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

cpparity_status reference_parallel_run(const reference_parallel_work *work, const char *what,
                                       cpparity_error *error) {
    if (work->items <= 0) {
        return CPPARITY_OK; /* nothing to run: no thread, no scratch */
    }
    if (openblas_get_num_threads() != 1) {
        openblas_set_num_threads(1); /* its threads would change the order of some sums */
    }
    int64_t threads = reference_threads();
    if (threads > work->items) {
        threads = work->items;
    }
    worker workers[REFERENCE_MAX_THREADS];
    runner shared = {work, 0};
    int64_t ready = 0; /* workers with scratch */
    while (ready < threads) {
        workers[ready].shared = &shared;
        workers[ready].scratch = NULL;
        if (work->scratch_bytes > 0 &&
            (workers[ready].scratch = scratch_allocate(work->scratch_bytes)) == NULL) {
            break;
        }
        ready++;
    }
    if (ready == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (%zu bytes of scratch for %s)",
                                  work->scratch_bytes, what);
    }
    int64_t started = 1; /* worker 0 is the calling thread */
    while (started < ready &&
           pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) == 0) {
        started++;
    }
    worker_main(&workers[0]);
    for (int64_t i = 1; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
    }
    for (int64_t i = 0; i < ready; i++) {
        free(workers[i].scratch);
    }
    return CPPARITY_OK;
}
