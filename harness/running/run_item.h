/*
 * run_item.h — running one (case, cp size, dtype) on a CP group: the implementation under test
 * (distributed/models/implementation.h) on every rank of the group with inputs and weights the
 * harness builds from the fixtures, its outputs gathered on the group's root, which takes the
 * float64 reference from its cache and judges the item (harness/judging/judge_item.h).
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_ITEM_H
#define CPPARITY_HARNESS_RUNNING_RUN_ITEM_H

#include <stdint.h>

#include "common/error.h"
#include "results_model/results.h"
#include "distributed/comm/comm.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel.h"
#include "harness/judging/baseline_table.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/run_options.h"
#include "harness/running/run_plan.h"

/* What is under test: the implementation and the attention kernel it calls. */
typedef struct run_target {
    const cpparity_implementation *implementation; /* chosen by --device */
    const cpparity_attention_kernel *kernel;       /* chosen by --kernel */
    cpparity_fault fault; /* planted by --inject or the self-test (common/fault.h) */
} run_target;

/* Zeroes item and fills what is known before it runs: its case, suite, cp, dtype, whether it
 * is a baseline, the padded length; no worst tensor yet. */
void run_item_begin(run_item *item, const run_plan *plan, const run_plan_item *planned);

/* Runs plan item `index` on every rank of group (all must call it with the same root). On
 * group rank `root`, which computes (or finds in its cache) the float64 reference and judges,
 * fills *item (zeroed first; tensors owned by it); other ranks leave it zeroed. Item-level
 * problems (refusals, bad input, a failed implementation call, a missing output) become the
 * item's outcome and message; only a broken communicator returns an error. baselines holds the
 * baseline errors (empty while baselines run). */
cpparity_status run_item_execute(cpparity_comm *group, int root, const run_plan *plan,
                                 int64_t index, const run_options *options,
                                 const run_target *target, const baseline_table *baselines,
                                 reference_cache *cache, run_item *item, cpparity_error *error);

#endif
