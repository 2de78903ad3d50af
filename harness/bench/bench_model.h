/*
 * bench_model.h — `cpparity bench model`: the float64 reference model's forward and backward
 * wall time and GFLOP/s per case of a suite, at a chosen thread count, next to this machine's
 * dgemm on as many threads measured in the same run; --json prints one JSON object per line
 * ("what": "model" or "dgemm"; docs/benchmarks.md).
 */
#ifndef CPPARITY_HARNESS_BENCH_BENCH_MODEL_H
#define CPPARITY_HARNESS_BENCH_BENCH_MODEL_H

#include <stdio.h>

/* Runs with argv after "model"; returns the process exit code. */
int bench_model_main(int argc, char **argv, FILE *out, FILE *err);

#endif
