/* failing_tensors.c — failing tensors worst first, and their words, for the reports (see
 * failing_tensors.h). */
#include "reports/failing_tensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far past its limit a tensor is (see failing_tensors.h). */
static double severity(const tensor_record *record) {
    const double ratio = tensor_record_deciding_limit(record).ratio;
    return record->metrics.nonfinite > 0 || isnan(ratio) ? INFINITY : ratio;
}

/* Worst first; ties in record order. */
static int by_severity(const void *a, const void *b) {
    const failing_tensor *x = a, *y = b;
    if (x->severity != y->severity) {
        return x->severity > y->severity ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

failing_tensor *failing_tensors(const run_item *item, int64_t *count) {
    *count = 0;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        *count += !item->tensors[i].decision.passed;
    }
    if (*count == 0) {
        return NULL;
    }
    failing_tensor *failing = malloc((size_t)*count * sizeof *failing);
    if (failing == NULL) {
        *count = -1;
        return NULL;
    }
    int64_t next = 0;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        if (!item->tensors[i].decision.passed) {
            failing[next].severity = severity(&item->tensors[i]);
            failing[next++].index = i;
        }
    }
    qsort(failing, (size_t)next, sizeof *failing, by_severity);
    return failing;
}

const char *failing_tensors_case_name(const run_item *item) {
    return item->source != NULL ? item->source->name : "(no case)";
}

void failing_tensors_worst_coordinates(const tensor_record *record, char *text, size_t size) {
    if (record->metrics.worst_index < 0) {
        snprintf(text, size, "none");
        return;
    }
    if (record->shape_rank <= 0) {
        snprintf(text, size, "scalar");
        return;
    }
    size_t used = (size_t)snprintf(text, size, "[");
    for (int d = 0; d < record->shape_rank && d < 4 && used < size; d++) {
        used += (size_t)snprintf(text + used, size - used, "%s%lld", d > 0 ? ", " : "",
                                 (long long)record->worst[d]);
    }
    if (used < size) {
        snprintf(text + used, size - used, "]");
    }
}

void failing_tensors_limit_origin(const tensor_record *record, const char *times, char *text,
                                  size_t size) {
    const cpparity_tolerance *t = &record->tolerance;
    const char *ratio = cpparity_tolerance_origin_name(t->ratio_origin);
    const char *floor = cpparity_tolerance_origin_name(t->floor_origin);
    if (strcmp(tensor_record_deciding_limit(record).rule, "cp 1") == 0) {
        snprintf(text, size,
                 "CP only: ratio %.3g (%s) %s cp 1 %.3g + floor %.3g (%s); naive: %s %.3g",
                 t->ratio, ratio, times, record->cp1_error, t->floor, floor, times,
                 record->baseline_error);
        return;
    }
    int used = snprintf(text, size, "ratio %.3g (%s) %s naive %.3g + floor %.3g (%s)", t->ratio,
                        ratio, times, record->baseline_error, t->floor, floor);
    if (!isnan(record->cp1_error) && used > 0 && (size_t)used < size) {
        snprintf(text + used, size - (size_t)used, "; CP only: %s cp 1 %.3g", times,
                 record->cp1_error);
    }
}
