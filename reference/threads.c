/* threads.c — the reference's thread count (see threads.h). */
#include "threads.h"

#include <stdatomic.h>

static atomic_int thread_count = 1;

void reference_set_threads(int threads) {
    if (threads < 1) {
        threads = 1;
    }
    if (threads > REFERENCE_MAX_THREADS) {
        threads = REFERENCE_MAX_THREADS;
    }
    atomic_store(&thread_count, threads);
}

int reference_threads(void) {
    return atomic_load(&thread_count);
}
