/*
 * selftest_matrix.h — what `cpparity selftest` found (data only, like results.h): for every
 * planted fault (common/fault.h) and every case of the suites, whether the case caught it,
 * how strongly and by which tensor; the clean run's margin and the false alarms of the reruns
 * under other seeds. harness/running/selftest.c fills it, reports/selftest_console.c prints it,
 * results_model/selftest_file.c writes it into the results file.
 *
 * A case catches a fault when one of its items (a dtype and cp size) fails or errors. Its
 * detection ratio is the largest error-to-limit ratio among those items' tensors (both rules of
 * docs/tolerances.md); a non-finite value, gradients that differ between ranks (any difference
 * fails) or an error count as infinite. A fault's detection ratio is the ratio of its
 * second-strongest catching case: the "caught by at least two cases" rule rests on it.
 */
#ifndef CPPARITY_RESULTS_MODEL_SELFTEST_MATRIX_H
#define CPPARITY_RESULTS_MODEL_SELFTEST_MATRIX_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"
#include "results_model/results.h"

#define SELFTEST_MINIMUM_CASES 2 /* cases that must catch every fault */
#define SELFTEST_HOW_TEXT 160    /* bytes of a cell's "how", NUL included */
#define SELFTEST_NOTE_TEXT 256   /* bytes of a fault's note, NUL included */

typedef struct selftest_cell {
    bool caught;                 /* an item of the case failed or errored */
    double ratio;                /* detection ratio (above); NaN when not caught */
    char how[SELFTEST_HOW_TEXT]; /* "grads/... rank 1 (cp 2, f32)", "error: ..."; "" if not */
} selftest_cell;

typedef struct selftest_fault_row {
    int fault;                     /* cpparity_fault */
    bool applicable;               /* it could be planted in what is under test */
    char note[SELFTEST_NOTE_TEXT]; /* why not, when not applicable */
    int64_t cases_caught;          /* cases that caught it */
    double strongest;              /* largest cell ratio (NaN: none) */
    double detection_ratio;        /* second-largest cell ratio (NaN: fewer than 2 cases) */
    double seconds;                /* the pass's wall time */
} selftest_fault_row;

typedef struct selftest_seed_row {
    uint64_t seed;                 /* the seed every case ran with */
    int64_t failures;              /* items that failed or errored: false alarms */
    double worst_ratio;            /* the largest ratio of a passing item */
    char worst[SELFTEST_HOW_TEXT]; /* where: case, tensor, cp, dtype */
} selftest_seed_row;

typedef struct selftest_matrix {
    int64_t case_count;                  /* columns */
    const cpparity_case **cases;         /* (case_count) borrowed from the plan */
    int64_t fault_count;                 /* rows */
    selftest_fault_row *faults;          /* (fault_count) */
    selftest_cell *cells;                /* [fault_count, case_count] */
    int64_t clean_failures;              /* clean items that failed, errored or did not run */
    double clean_worst_ratio;            /* the clean run's largest ratio (its margin) */
    char clean_worst[SELFTEST_HOW_TEXT]; /* where */
    int64_t seed_count;                  /* --seeds */
    selftest_seed_row *seeds;            /* (seed_count) */
    int64_t false_alarms;                /* failures over the seed reruns */
    double smallest_detection_ratio;     /* min over applicable faults of detection_ratio */
    int weakest_fault;                   /* the fault it belongs to, −1 when none */
    bool passed;                         /* the self-test's verdict */
    double seconds;                      /* the whole self-test's wall time */
} selftest_matrix;

/* The cell of fault row f, case c. */
selftest_cell *selftest_matrix_cell(const selftest_matrix *matrix, int64_t f, int64_t c);

/* "cp 2 f32 grads/... rank 1": the item's worst tensor, in words, into text. */
void selftest_describe_item(const run_item *item, char *text, size_t size);

/* The detection ratio of an item that failed or errored (the definition above), or its worst
 * ratio when it passed. */
double selftest_item_ratio(const run_item *item);

/* The index of the item's tensor with the largest ratio (non-finite failures infinite) and
 * that ratio; −1 (ratio 0) when it has none. */
int64_t selftest_item_strongest(const run_item *item, double *ratio);

/* Releases the arrays; safe on a zeroed matrix. */
void selftest_matrix_free(selftest_matrix *matrix);

#endif
