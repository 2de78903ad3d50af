/* run_results.c — outcome names and releasing a run's results (see run_results.h). */
#include "run_results.h"

#include <stdlib.h>

const char *run_outcome_name(run_outcome outcome) {
    switch (outcome) {
    case RUN_PASS:
        return "PASS";
    case RUN_FAIL:
        return "FAIL";
    case RUN_REFUSED:
        return "REFUSED";
    case RUN_NOT_RUN:
        return "NOT RUN";
    case RUN_ERROR:
        return "ERROR";
    }
    return "UNKNOWN";
}

/* Frees every item's stored tensors and record arrays, the items and the discrimination records,
 * and leaves those pointers NULL and their counts 0 (provenance and outcome counts are kept), so
 * a second call does nothing. */
void run_results_free(run_results *results) {
    if (results == NULL) {
        return;
    }
    for (int64_t i = 0; results->items != NULL && i < results->item_count; i++) {
        run_item *item = &results->items[i];
        for (int64_t t = 0; item->tensors != NULL && t < item->tensor_count; t++) {
            free(item->tensors[t].values);
            free(item->tensors[t].reference);
        }
        free(item->tensors);
        item->tensors = NULL;
        item->tensor_count = 0;
    }
    free(results->items);
    results->items = NULL;
    results->item_count = 0;
    free(results->discrimination);
    results->discrimination = NULL;
    results->discrimination_count = 0;
}
