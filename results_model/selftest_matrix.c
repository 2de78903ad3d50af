/* selftest_matrix.c — the self-test's findings (see selftest_matrix.h). */
#include "results_model/selftest_matrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

selftest_cell *selftest_matrix_cell(const selftest_matrix *matrix, int64_t f, int64_t c) {
    return &matrix->cells[f * matrix->case_count + c];
}

/* A tensor's error-to-limit ratio under both rules; infinite when it failed on non-finite
 * values (any non-finite value fails, whatever the finite elements' error). */
static double tensor_ratio(const tensor_record *record) {
    if (!record->decision.passed && record->metrics.nonfinite > 0) {
        return INFINITY;
    }
    const double ratio = tensor_record_deciding_limit(record).ratio;
    return isnan(ratio) ? INFINITY : ratio;
}

int64_t selftest_item_strongest(const run_item *item, double *ratio) {
    int64_t strongest = -1;
    *ratio = 0.0;
    for (int64_t t = 0; t < item->tensor_count; t++) {
        const double r = tensor_ratio(&item->tensors[t]);
        if (strongest < 0 || r > *ratio) {
            strongest = t;
            *ratio = r;
        }
    }
    return strongest;
}

double selftest_item_ratio(const run_item *item) {
    if (item->outcome == RUN_ERROR || item->outcome == RUN_NOT_RUN ||
        item->outcome == RUN_NOT_CLAIMED) {
        return INFINITY;
    }
    double ratio;
    selftest_item_strongest(item, &ratio);
    if (item->outcome == RUN_FAIL && !(ratio > 1.0) &&
        (!item->gradients_identical || item->tensor_count != item->tensors_expected)) {
        return INFINITY; /* any difference between ranks, any missing tensor fails */
    }
    return ratio;
}

void selftest_describe_item(const run_item *item, char *text, size_t size) {
    const char *dtype = cpparity_dtype_name(item->dtype);
    char cp[64];
    run_item_cp_label(item, cp, sizeof cp);
    double ratio;
    const int64_t strongest = selftest_item_strongest(item, &ratio);
    if (item->outcome == RUN_ERROR || item->outcome == RUN_NOT_RUN ||
        item->outcome == RUN_NOT_CLAIMED) {
        snprintf(text, size, "cp %s %s %s: %s", cp, dtype, run_outcome_name(item->outcome),
                 item->message);
    } else if (item->outcome == RUN_FAIL && !(ratio > 1.0) && !item->gradients_identical) {
        snprintf(text, size, "cp %s %s: gradients differ between ranks", cp, dtype);
    } else if (strongest >= 0) {
        const tensor_record *record = &item->tensors[strongest];
        snprintf(text, size, "cp %s %s %s rank %d%s", cp, dtype, record->name, record->rank,
                 record->metrics.nonfinite > 0 ? " (non-finite)" : "");
    } else {
        snprintf(text, size, "cp %s %s: %s", cp, dtype, item->message);
    }
}

void selftest_matrix_free(selftest_matrix *matrix) {
    free(matrix->faults);
    free(matrix->cells);
    free(matrix->seeds);
    matrix->faults = NULL;
    matrix->cells = NULL;
    matrix->seeds = NULL;
    matrix->fault_count = 0;
    matrix->seed_count = 0;
}
