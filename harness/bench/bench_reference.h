/*
 * bench_reference.h — `cpparity bench reference`: times the float64 reference attention,
 * forward + backward, on the masks users run (causal, sliding window, chunked, packed documents)
 * at a chosen thread count, next to this machine's dgemm on as many threads measured in the same
 * run (the ceiling). GFLOP/s are counted on allowed pairs only (4·Dh flops per allowed pair
 * forward, 10·Dh backward; docs/benchmarks.md), so that sparse masks are not flattered by work
 * they skip. --json prints one JSON object per line (docs/benchmarks.md lists the fields).
 */
#ifndef CPPARITY_HARNESS_BENCH_BENCH_REFERENCE_H
#define CPPARITY_HARNESS_BENCH_BENCH_REFERENCE_H

#include <stdio.h>

/* Runs the benchmark with argv after "reference"; prints the table to out, errors to err.
 * Returns the process exit code (0, 2 for a bad flag, 3 for a runtime failure). */
int bench_reference_main(int argc, char **argv, FILE *out, FILE *err);

/* Measures dgemm GFLOP/s on `threads` threads of its own, OpenBLAS single-threaded in each (as
 * the reference runs it): 1024³ products, timed from the first thread's first product to the
 * last thread's last. Prints a table comment, or with json a JSON line with "what": "dgemm".
 * Returns 0, or 3 when the threads or their matrices could not be had. */
int bench_dgemm_ceiling(int threads, int json, FILE *out, FILE *err);

#endif
