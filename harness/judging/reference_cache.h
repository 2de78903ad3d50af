/*
 * reference_cache.h — the float64 reference's outputs for a case, computed once per (case, seed)
 * on the rank that compares that case and kept for its other cp sizes and dtypes (the reference
 * does not depend on either). Only what comparison needs is kept: loss, every gradient, which
 * query rows are fully masked and, instead of the logits [B, S, V] (never held whole:
 * docs/architecture.md, "Long context: row blocks"), what makes any row block of them again —
 * the final norm's output [B, S, D] and the LM head's weight [V, D] — and, per dtype, the naive
 * same-dtype baseline of the same inputs (naive_model.h), which the pass rule multiplies.
 */
#ifndef CPPARITY_HARNESS_JUDGING_REFERENCE_CACHE_H
#define CPPARITY_HARNESS_JUDGING_REFERENCE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/tensor_table.h"
#include "harness/judging/naive_model.h"
#include "common/case.h"
#include "reference/team.h"

typedef struct reference_outputs {
    int64_t case_index;                    /* the plan's case index */
    uint64_t seed;                         /* fixture seed */
    int64_t batch, seq_len, vocab, hidden; /* B, S, V, D */
    double loss;                           /* the loss */
    double *final_normed;                  /* [B, S, D] the LM head's input */
    double *head;                          /* [V, D] the LM head's weight */
    double *gradients;                     /* (parameter_table.total) */
    uint8_t *fully_masked;                 /* [B, S] 1: the query row sees no key in some layer */
    cpparity_tensor_table parameter_table; /* model.md's names, shapes and offsets */
    double seconds;                        /* what computing it took */
    naive_outputs naive[CPPARITY_DTYPE_COUNT]; /* the naive same-dtype baseline per dtype,
                                                  computed on demand (naive_model.h) */
    bool naive_ready[CPPARITY_DTYPE_COUNT];    /* naive[dtype] holds it */
} reference_outputs;

/* The reference logits of row block `block` of row_blocks_of(B, S) (common/row_blocks.h):
 * out (rows of the block, V), bit for bit those the reference's forward computed. */
void reference_outputs_logits_block(const reference_outputs *outputs, int64_t block, double *out);

typedef struct reference_cache {
    reference_outputs *entries; /* (count) owned */
    int64_t count;
    const char *directory; /* --reference-cache DIR: outputs kept on disk between runs
                              (reference_store.h); NULL for none */
    int64_t reused;        /* outputs read from directory instead of computed */
    int64_t stored;        /* outputs computed and written there */
    int64_t rejected;      /* entries there that could not be trusted (recomputed, replaced) */
    int64_t computed;      /* outputs computed here (alone, or as the team's rank 0) */
    int64_t shared;        /* other ranks' references this rank computed its share of (its
                              caller counts them: reference_outputs_share keeps no cache) */
    char warning[CPPARITY_ERROR_TEXT]; /* why the last one was rejected, or a store failed */
    const reference_team *team;        /* the ranks computing each reference together (reference/
                                          team.h), this one their rank 0; NULL: this process alone */
    /* With a team: called before each reference is computed (not when it is cached) so that the
     * team's other ranks join with reference_outputs_share on the same case and seed. */
    cpparity_status (*summon)(void *context, const cpparity_case *c, uint64_t seed,
                              cpparity_error *error);
    void *summon_context;
} reference_cache;

/* The outputs for (case_index, seed), computed now when not cached (*computed_now says which):
 * from memory, else from the cache's directory when it holds an intact entry, else computed (and
 * stored there). An entry that cannot be trusted is counted and described in warning, never
 * used; failing to store one is a warning too, never an error.
 * The pointer stays valid until the next reference_cache_get or reference_cache_free. Errors are
 * the reference's own (input, or
 * runtime when out of memory). */
cpparity_status reference_cache_get(reference_cache *cache, int64_t case_index,
                                    const cpparity_case *c, uint64_t seed,
                                    const reference_outputs **outputs, int *computed_now,
                                    cpparity_error *error);

/* The same outputs with naive[dtype] computed (once) from the same inputs and weights.
 * *seconds_now is the time spent computing now (reference and baseline), 0 when both were
 * cached. Errors as reference_cache_get, or the baseline's own. */
cpparity_status reference_cache_get_with_naive(reference_cache *cache, int64_t case_index,
                                               const cpparity_case *c, uint64_t seed,
                                               cpparity_dtype dtype,
                                               const reference_outputs **outputs,
                                               double *seconds_now, cpparity_error *error);

/* Another rank's share of a reference that rank 0 of team computes with reference_cache_get: the
 * same case and seed, in the same order; the outputs are not kept here. */
cpparity_status reference_outputs_share(const cpparity_case *c, uint64_t seed,
                                        const reference_team *team, cpparity_error *error);

/* Rank 0 of team: naive[dtype] of the cached outputs of (case_index, seed) computed spread over
 * team (naive_model.h naive_model_run_spread: the same bits as alone), while every other rank
 * of it calls reference_naive_share on the same case, seed and dtype. Rank 0 sends each rank the
 * final norm's rows of its blocks, from which it makes the reference's logits of them. An error
 * when the outputs are not cached or their naive[dtype] is there already (reference_cache_has
 * tells which, before the others are asked to join). */
cpparity_status reference_cache_spread_naive(reference_cache *cache, int64_t case_index,
                                             const cpparity_case *c, uint64_t seed,
                                             cpparity_dtype dtype, const reference_team *team,
                                             cpparity_error *error);

/* Whether the cache holds the outputs of (case_index, seed) in memory and, for dtype >= 0, their
 * naive baseline of that dtype. */
bool reference_cache_has(const reference_cache *cache, int64_t case_index, uint64_t seed,
                         int dtype);

/* Another rank's share of the naive baseline rank 0 computes with reference_cache_spread_naive. */
cpparity_status reference_naive_share(const cpparity_case *c, uint64_t seed, cpparity_dtype dtype,
                                      const reference_team *team, cpparity_error *error);

/* The outputs of a variant of the case's reference, not cached: config in place of the case's
 * model (the same parameter shapes; the discrimination check changes layer types) and the mask
 * features of features_off (reference/model.h REFERENCE_WITHOUT_*) removed, on the case's inputs
 * and weights of seed. With a team every rank of it calls this in the same order and each gets
 * the outputs (the same bits as alone); NULL computes them in this process. Free them with
 * reference_outputs_free. Errors as reference_cache_get. */
cpparity_status
reference_outputs_compute_variant(reference_outputs *outputs, const cpparity_case *c,
                                  const cpparity_model_config *config, unsigned features_off,
                                  uint64_t seed, const reference_team *team, cpparity_error *error);

/* Frees what outputs holds and zeroes it. */
void reference_outputs_free(reference_outputs *outputs);

/* Frees every entry; the settings (directory, team, summon) stay. */
void reference_cache_free(reference_cache *cache);

#endif
