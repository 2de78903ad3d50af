/*
 * attention_export.h — `cpparity export` of attention-level cases (`level: attention`): for each
 * case and each layer of its model, the inputs an attention-level item calls the kernel with (q,
 * k, v, dout drawn from the item's seed), the compact mask description, the block calls' token
 * indices and the float64 reference out, lse, dq, dk, dv, in the layout of docs/dump-format.md
 * ("The attention-level export"), for a kernel called from Python (python/cpparity_kernel.py).
 * Nothing S×S is built or written: the mask is the per-token facts of docs/masks.md.
 */
#ifndef CPPARITY_HARNESS_RUNNING_ATTENTION_EXPORT_H
#define CPPARITY_HARNESS_RUNNING_ATTENTION_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "harness/storage/export.h"

/* What selects the inputs: --seed S sets every case's input seed (as `run --seed`); otherwise
 * each case's own seed is its input seed (as `run`). */
typedef struct attention_export_seed {
    bool set;
    uint64_t value;
} attention_export_seed;

/* The input seed of case c under seed. */
uint64_t attention_export_input_seed(const cpparity_case *c, attention_export_seed seed);

/* Writes cases (count of them, every one level attention, float32 among its dtypes) of the suite
 * source gives to path, never overwriting it (CPPARITY_ERROR_INPUT if it exists); nothing is left
 * at path on failure. */
cpparity_status attention_export_write(const cpparity_case *const *cases, int64_t count,
                                       const export_source *source, attention_export_seed seed,
                                       const char *path, cpparity_error *error);

#endif
