/*
 * results_diff.h — what changed between two runs (`cpparity diff OLD.h5 NEW.h5`), item by item
 * (case, dtype, cp) and tensor by tensor (name, rank):
 *   new failure   PASS or REFUSED before, FAIL or ERROR now                   (a regression)
 *   grew          a tensor's error more than `factor` times its old error     (a regression)
 *   fixed         FAIL or ERROR before, PASS or REFUSED now
 *   still failing FAIL or ERROR in both
 *   changed       any other change of outcome (for instance PASS to NOT RUN), or the same
 *                 outcome with another token layout (contiguous to zigzag: each rank's logits
 *                 are then other positions, so no tensor's growth is measured)
 *   only old / only new   an item present in one run only (never dropped)
 * Growth is measured against max(old error, GROWTH_FLOOR × the new limit), so an error that was
 * exactly zero and stays far below its limit is not a regression.
 */
#ifndef CPPARITY_RESULTS_MODEL_RESULTS_DIFF_H
#define CPPARITY_RESULTS_MODEL_RESULTS_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "results_model/results_reader.h"

#define RESULTS_DIFF_GROWTH_FLOOR 1e-3 /* of the limit: below it an error is noise for growth */

typedef enum diff_kind {
    DIFF_NEW_FAILURE = 0,
    DIFF_GREW = 1,
    DIFF_FIXED = 2,
    DIFF_STILL_FAILING = 3,
    DIFF_CHANGED = 4,
    DIFF_ONLY_OLD = 5,
    DIFF_ONLY_NEW = 6,
} diff_kind;
#define DIFF_KIND_COUNT 7
/* "new failure", "grew", "fixed", "still failing", "changed", "only in old", "only in new" */
extern const char *const diff_kind_names[DIFF_KIND_COUNT];

typedef struct diff_entry {
    diff_kind kind;
    bool regression;                    /* new failure or grew */
    char case_name[CPPARITY_CASE_NAME]; /* the item */
    char dtype[8];
    int64_t cp;
    char old_outcome[16], new_outcome[16]; /* "" where the item is absent */
    char tensor[CPPARITY_RECORD_NAME];     /* grew: the tensor; else the new (or old) worst */
    int rank;                              /* grew: its rank */
    double old_error, new_error, limit;    /* grew: the errors and the new limit */
    char message[CPPARITY_MESSAGE_TEXT];   /* new failure / changed: the new item's message */
    char old_layout[16], new_layout[16];   /* the items' token_layout ("" when not recorded) */
    char variant[48];                      /* a run item's layout and algorithm when not
                                              contiguous Ulysses ("zigzag ring"), else "" */
} diff_entry;

/* True when both items recorded a token layout and they differ. */
bool diff_entry_layout_changed(const diff_entry *entry);

/* True when a report should add "(layout OLD -> NEW)" to the entry: its layouts differ and its
 * message does not already say so (only a layout-only change, "changed" with the same outcome,
 * carries that in its message). */
bool diff_entry_layout_unstated(const diff_entry *entry);

typedef struct results_diff {
    double factor;       /* growth that counts */
    diff_entry *entries; /* (count) in the new run's order, then items only in old */
    int64_t count;
    int64_t kinds[DIFF_KIND_COUNT]; /* entries per kind */
    int64_t regressions;            /* new failures + grown errors */
    int64_t items_compared;         /* items present in both */
    int64_t tensors_compared;       /* tensor records present in both */
} results_diff;

/* Compares two runs read by results_file_read. CPPARITY_ERROR_INPUT when they cannot be
 * compared (different format versions), naming both files. */
cpparity_status results_diff_compute(const read_results *old_run, const read_results *new_run,
                                     double factor, results_diff *diff, cpparity_error *error);

void results_diff_free(results_diff *diff);

#endif
