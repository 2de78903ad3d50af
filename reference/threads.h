/*
 * threads.h — how many threads the float64 reference computes with.
 *
 * The reference splits its work into items whose results do not depend on which thread runs
 * them or in which order (each output element is reduced by one item, in a fixed order), so its
 * results are bitwise identical for every thread count. The setting is process-wide; set it
 * before computing, not while a reference computation runs.
 */
#ifndef CPPARITY_REFERENCE_THREADS_H
#define CPPARITY_REFERENCE_THREADS_H

/* Most threads reference_set_threads accepts; larger requests are clamped to it. */
#define REFERENCE_MAX_THREADS 256

/* Uses `threads` threads from now on (default 1; values below 1 mean 1, values above
 * REFERENCE_MAX_THREADS mean that). Whatever the setting, the reference makes OpenBLAS
 * single-threaded (openblas_set_num_threads(1), process-wide) before it computes: OpenBLAS's own
 * threading changes the order of some sums, and the reference's threads are the parallelism. */
void reference_set_threads(int threads);

/* The current setting, >= 1. */
int reference_threads(void);

#endif
