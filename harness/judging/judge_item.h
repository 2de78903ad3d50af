/*
 * judge_item.h — judging one run item with the policy of docs/tolerances.md: every rank's loss,
 * logits slice and gradients are compared with the float64 reference (compare.h), each tensor
 * is decided against the naive same-dtype baseline's error on the same elements (and, for
 * cp > 1, against its own error at cp = 1), counted
 * (a missing tensor fails the item), gradients are checked bit-identical across ranks, and the
 * item gets its outcome and message. Values are kept as --store asks.
 */
#ifndef CPPARITY_HARNESS_JUDGING_JUDGE_ITEM_H
#define CPPARITY_HARNESS_JUDGING_JUDGE_ITEM_H

#include <stdint.h>

#include "common/error.h"
#include "results_model/results.h"
#include "harness/judging/baseline_table.h"
#include "harness/judging/reference_cache.h"

/* What the implementation under test produced on every rank of the item's group. */
typedef struct judge_inputs {
    const reference_outputs *reference; /* the case's float64 outputs */
    const naive_outputs *naive;         /* the naive same-dtype baseline of the item's dtype */
    const float *losses;                /* [cp] each rank's loss */
    const float *logits;                /* [cp][B, L, V] each rank's slice */
    const float *gradients;             /* [cp][P] each rank's gradients, laid out as
                                           reference->parameter_table */
    int64_t local_len;                  /* L = ceil(S / cp): rank r's slice starts at r·L */
    run_store store;                    /* which values to keep */
} judge_inputs;

/* Fills item's tensor records from in and decides item (its source, cp, dtype and is_baseline
 * must be set). baselines holds the cp = 1 errors (empty for a cp = 1 item).
 * CPPARITY_ERROR_RUNTIME only when out of memory. */
cpparity_status judge_item(run_item *item, int64_t case_index, const judge_inputs *in,
                           const baseline_table *baselines, cpparity_error *error);

/* Decides every tensor of an item whose records hold their metrics, baseline errors and
 * tolerances (compare_decide; for cp > 1 also against the same tensor at cp = 1 from
 * baselines), and the item's outcome, worst tensor and message. judge_item calls it; attention-
 * level items (harness/running/attention_item.h) fill their records themselves and call it. */
void judge_item_decide(run_item *item, int64_t case_index, const baseline_table *baselines);

#endif
