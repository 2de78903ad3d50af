/*
 * reference_cache.h — the float64 reference's outputs for a case, computed once per (case, seed)
 * on the rank that compares that case and kept for its other cp sizes and dtypes (the reference
 * does not depend on either). Only what comparison needs is kept: loss, logits, every gradient
 * and which query rows are fully masked.
 */
#ifndef CPPARITY_HARNESS_JUDGING_REFERENCE_CACHE_H
#define CPPARITY_HARNESS_JUDGING_REFERENCE_CACHE_H

#include <stdint.h>

#include "common/error.h"
#include "common/tensor_table.h"
#include "common/case.h"

typedef struct reference_outputs {
    int64_t case_index;                    /* the plan's case index */
    uint64_t seed;                         /* fixture seed */
    int64_t batch, seq_len, vocab;         /* B, S, V */
    double loss;                           /* the loss */
    double *logits;                        /* [B, S, V] */
    double *gradients;                     /* (parameter_table.total) */
    uint8_t *fully_masked;                 /* [B, S] 1: the query row sees no key in some layer */
    cpparity_tensor_table parameter_table; /* model.md's names, shapes and offsets */
    double seconds;                        /* what computing it took */
} reference_outputs;

typedef struct reference_cache {
    reference_outputs *entries; /* (count) owned */
    int64_t count;
} reference_cache;

/* The outputs for (case_index, seed), computed now when not cached (*computed_now says which).
 * The pointer stays valid until the next reference_cache_get or reference_cache_free. Errors are
 * the reference's own (input, or
 * runtime when out of memory). */
cpparity_status reference_cache_get(reference_cache *cache, int64_t case_index,
                                    const cpparity_case *c, uint64_t seed,
                                    const reference_outputs **outputs, int *computed_now,
                                    cpparity_error *error);

void reference_cache_free(reference_cache *cache);

#endif
