/*
 * judge_item.h — judging one run item with the policy of docs/tolerances.md: every rank's loss,
 * logits rows (at the global positions the rank holds) and gradients are compared with the
 * float64 reference (compare.h), each tensor is decided against the naive same-dtype baseline's
 * error on the same elements (and, for cp > 1, against its own error at cp = 1), counted (a
 * missing tensor fails the item), gradients are checked bit-identical across ranks, and the
 * item gets its outcome and message. Values are kept as --store asks.
 */
#ifndef CPPARITY_HARNESS_JUDGING_JUDGE_ITEM_H
#define CPPARITY_HARNESS_JUDGING_JUDGE_ITEM_H

#include <stdint.h>

#include "common/error.h"
#include "common/row_blocks.h"
#include "results_model/results.h"
#include "harness/judging/baseline_table.h"
#include "harness/judging/reference_cache.h"

/* Where the implementation's logits rows come from: never all at once (docs/architecture.md,
 * "Long context: row blocks"). judge_item walks the padded sequence one block of positions at a
 * time (row_blocks_of(B, Sp), in order: every block, once, even after a failure, so that a
 * source moving rows between ranks stays in step) and reads, for each rank holding positions of
 * the block, the runs of its consecutive rows that hold them. */
typedef struct judge_logits {
    /* Called for every block before its rows are read (NULL: nothing to do); `cpparity run`
     * gathers the block's rows from the ranks here. An error stops the walk. */
    cpparity_status (*begin_block)(void *context, const row_block *block, cpparity_error *error);
    /* rows (count × V floats) = rank's logits rows [row, row + count) of batch row batch_row,
     * all of them holding positions of the current block. */
    cpparity_status (*read)(void *context, int64_t rank, int64_t batch_row, int64_t row,
                            int64_t count, float *rows, cpparity_error *error);
    void *context;
} judge_logits;

/* Logits held in memory, rank after rank, [B, L_r, V] each (tests, and whoever holds them). */
typedef struct judge_memory_logits {
    const float *logits; /* rank after rank */
    int64_t cp, batch, vocab;
    const int64_t *lengths; /* [cp] L_r, or NULL: every rank local_len */
    int64_t local_len;
} judge_memory_logits;

/* The source reading from memory (memory must outlive its use). */
judge_logits judge_logits_in_memory(const judge_memory_logits *memory);

/* Logits records past this many elements (B·L·V) are not kept whole under --store failures
 * (kept tentatively while the walk runs, they would hold that much whether they fail or not):
 * the window of the rank's rows around the element a failure names is kept instead, at most one
 * block of positions (results.h, tensor_record.window). --store all keeps every record whole, as
 * asked (the memory estimate counts it). */
#define JUDGE_STORE_WHOLE_LOGITS ((int64_t)1 << 22)

/* What the implementation under test produced on every rank of the item's group.
 *
 * Which rows a rank holds: with positions NULL, the contiguous layout, rank r holding the
 * local_len positions [r·L, (r + 1)·L) (what `cpparity run` shards). Otherwise rank r holds
 * lengths[r] rows (L_r; ranks may differ), and positions[r][t] is the global position, in the
 * padded sequence, of its row t: the same for every batch row, in the order of its logits rows.
 * The ranks' positions must partition [0, Sp) with Sp = Σ L_r >= S (token_layout.h fills the
 * usual layouts). Positions at or past S (automatic padding) and fully masked query rows are
 * not compared, whichever rank holds them.
 *
 * Each rank's logits record (results.h) has shape [B, L_r, V] in the rank's row order; its
 * worst element and non-finite values are named by global position; its error profile
 * (position_error, profiles/logits@rank<r>) has one entry per row of the rank, in the rank's
 * row order. position_offset is the global position of the rank's row 0 when its rows are
 * consecutive positions (every contiguous layout, where the profile is then indexed by global
 * position − position_offset as before), and −1 when they are not (zigzag, round-robin, a
 * permutation, an empty rank), the record's positions then holding the global position of each
 * row (profiles/positions@rank<r> in the results file). The item's token_layout names the layout
 * token_layout_recognise finds ("contiguous" when positions is NULL). */
typedef struct judge_inputs {
    const reference_outputs *reference; /* the case's float64 outputs */
    const naive_outputs *naive;         /* the naive same-dtype baseline of the item's dtype */
    const float *losses;                /* [cp] each rank's loss */
    judge_logits logits;                /* each rank's [B, L_r, V], read one block at a time */
    const float *gradients;             /* [cp][P] each rank's gradients, laid out as
                                           reference->parameter_table */
    int64_t local_len;                  /* positions NULL: L = ceil(S / cp), every rank's L_r;
                                           rank r's slice starts at r·L. Ignored otherwise */
    run_store store;                    /* which values to keep */
    const int64_t *const *positions;    /* NULL (contiguous), or [cp] arrays: positions[r] holds
                                           the global positions of rank r's rows, (lengths[r]) */
    const int64_t *lengths;             /* [cp] L_r with positions; ignored when it is NULL */
    const char *cp1_not_run;            /* the case's cp = 1 item was left out (its reason,
                                           "cp 1 not run: needs ..."): no CP-only check, the
                                           naive rule alone decides, and the item says so; NULL
                                           normally */
} judge_inputs;

/* Fills item's tensor records from in and decides item (its source, cp, dtype and is_baseline
 * must be set). baselines holds the cp = 1 errors (empty for a cp = 1 item); NULL makes no
 * CP-only check (`cpparity judge` without the framework's own cp = 1 dumps), and so does
 * in->cp1_not_run, which every tensor's reason and the item's message then give. Returns
 * CPPARITY_ERROR_INPUT, saying why (token_layout_check_partition's message, or the ranks holding
 * fewer than S positions), when in's positions are given and do not partition [0, Σ L_r) ⊇
 * [0, S), before comparing anything; CPPARITY_ERROR_RUNTIME when out of memory. */
cpparity_status judge_item(run_item *item, int64_t case_index, const judge_inputs *in,
                           const baseline_table *baselines, cpparity_error *error);

/* Decides every tensor of an item whose records hold their metrics, baseline errors and
 * tolerances (compare_decide; for cp > 1 also against the same tensor at cp = 1 from
 * baselines), and the item's outcome, worst tensor and message. judge_item calls it; attention-
 * level items (harness/running/attention_item.h) fill their records themselves and call it. */
void judge_item_decide(run_item *item, int64_t case_index, const baseline_table *baselines);

#endif
