/*
 * run_item.h — running one (case, cp size, dtype) on a CP group: the implementation under test
 * on every rank of the group, the float64 reference on the group's first rank, and the
 * comparison of loss, each rank's logits slice and every gradient there, decided with the
 * policy of ../shared/spec/tolerances.md against the baseline (cp = 1) errors.
 */
#ifndef CPPARITY_HARNESS_RUN_ITEM_H
#define CPPARITY_HARNESS_RUN_ITEM_H

#include <stdint.h>

#include "common/error.h"
#include "distributed/comm.h"
#include "distributed/kernel.h"
#include "harness/run_options.h"
#include "harness/reference_cache.h"
#include "harness/run_plan.h"
#include "harness/run_results.h"

/* The baseline error of one tensor (rank 0 of the cp = 1 run) of a case and dtype. */
typedef struct baseline_entry {
    int64_t case_index; /* into the plan */
    int32_t dtype;      /* cpparity_dtype */
    char name[112];     /* tensor record name */
    double error;       /* its error */
} baseline_entry;

typedef struct baseline_table {
    baseline_entry *entries; /* (count) owned */
    int64_t count;
} baseline_table;

/* Appends the rank-0 records of a finished baseline item. */
cpparity_status baseline_table_add(baseline_table *table, int64_t case_index, const run_item *item,
                                   cpparity_error *error);
/* The entry for (case, dtype, name), or NULL. */
const baseline_entry *baseline_table_find(const baseline_table *table, int64_t case_index,
                                          cpparity_dtype dtype, const char *name);
void baseline_table_free(baseline_table *table);

/* Runs plan item `index` on every rank of group (all must call it with the same root). On
 * group rank `root`, which computes (or finds in its cache) the float64 reference and compares,
 * fills *item (zeroed first; tensors owned by it); other ranks leave it zeroed. Item-level
 * problems (refusals, bad input, a failed kernel) become the item's outcome and message; only a
 * broken communicator returns an error. baselines holds the cp = 1 errors (empty for cp = 1). */
cpparity_status run_item_execute(cpparity_comm *group, int root, const run_plan *plan,
                                 int64_t index, const run_options *options,
                                 const cpparity_attention_kernel *kernel,
                                 const baseline_table *baselines, reference_cache *cache,
                                 run_item *item, cpparity_error *error);

/* "grads/model.layers.0.self_attn.q_proj.weight rank 1 row 5 col 3 (head 1)": where a
 * tensor's worst element is, in words. */
void run_item_describe_worst(const run_item *item, const tensor_record *record, char *text,
                             size_t size);

#endif
