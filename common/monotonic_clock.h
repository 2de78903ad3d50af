/* monotonic_clock.h — seconds from CLOCK_MONOTONIC, for timings reported by cpparity. */
#ifndef CPPARITY_COMMON_MONOTONIC_CLOCK_H
#define CPPARITY_COMMON_MONOTONIC_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point; only differences mean anything. */
static inline double monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

#endif
