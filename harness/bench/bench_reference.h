/*
 * bench_reference.h — `cpparity bench reference`: times the float64 reference attention,
 * forward + backward, on the masks users run (causal, sliding window, chunked, packed documents)
 * and reports GFLOP/s counted on allowed pairs only (4·Dh flops per allowed pair forward,
 * 10·Dh backward), so that sparse masks are not flattered by work they skip.
 */
#ifndef CPPARITY_HARNESS_BENCH_BENCH_REFERENCE_H
#define CPPARITY_HARNESS_BENCH_BENCH_REFERENCE_H

#include <stdio.h>

/* Runs the benchmark with argv after "reference"; prints the table to out, errors to err.
 * Returns the process exit code (0, 2 for a bad flag, 3 for a runtime failure). */
int bench_reference_main(int argc, char **argv, FILE *out, FILE *err);

#endif
