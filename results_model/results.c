/* results.c — outcome names, the deciding limit and releasing a run's results (see results.h). */
#include "results_model/results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"

const char *const run_outcome_names[RUN_OUTCOME_COUNT] = {"PASS",    "FAIL",  "REFUSED",
                                                          "NOT RUN", "ERROR", "NOT CLAIMED"};

const char *const run_store_names[RUN_STORE_COUNT] = {"metrics", "failures", "all"};

const char *run_store_name(run_store store) {
    return cpparity_name_of(run_store_names, RUN_STORE_COUNT, (int)store);
}

const char *run_outcome_name(run_outcome outcome) {
    return cpparity_name_of(run_outcome_names, RUN_OUTCOME_COUNT, (int)outcome);
}

/* Frees every item's stored tensors and record arrays, the items and the discrimination records,
 * and leaves those pointers NULL and their counts 0 (provenance and outcome counts are kept), so
 * a second call does nothing. */
void run_item_free_tensors(run_item *item) {
    for (int64_t t = 0; item->tensors != NULL && t < item->tensor_count; t++) {
        free(item->tensors[t].values);
        free(item->tensors[t].reference);
        free(item->tensors[t].position_error);
        free(item->tensors[t].position_limit);
        free(item->tensors[t].positions);
    }
    free(item->tensors);
    item->tensors = NULL;
    item->tensor_count = 0;
}

void run_results_free(run_results *results) {
    if (results == NULL) {
        return;
    }
    for (int64_t i = 0; results->items != NULL && i < results->item_count; i++) {
        run_item_free_tensors(&results->items[i]);
    }
    free(results->items);
    results->items = NULL;
    results->item_count = 0;
    free(results->discrimination);
    results->discrimination = NULL;
    results->discrimination_count = 0;
}

void run_item_describe_worst(const run_item *item, const tensor_record *record, char *text,
                             size_t size) {
    const int64_t head_dim = item->source->model.head_dim;
    if (strncmp(record->name, "attention/", strlen("attention/")) == 0) {
        /* an attention-level tensor: [B, S, heads, Dh], or lse [B, H, S] */
        if (record->shape_rank == 4) {
            snprintf(text, size, "%s batch row %lld position %lld head %lld dim %lld", record->name,
                     (long long)record->worst[0], (long long)record->worst[1],
                     (long long)record->worst[2], (long long)record->worst[3]);
        } else {
            snprintf(text, size, "%s batch row %lld head %lld position %lld", record->name,
                     (long long)record->worst[0], (long long)record->worst[1],
                     (long long)record->worst[2]);
        }
        return;
    }
    if (record->kind == CPPARITY_KIND_LOSS) {
        snprintf(text, size, "%s rank %d", record->name, record->rank);
    } else if (record->kind == CPPARITY_KIND_LOGITS) {
        snprintf(text, size, "%s rank %d batch row %lld position %lld vocab %lld", record->name,
                 record->rank, (long long)record->worst[0], (long long)record->worst[1],
                 (long long)record->worst[2]);
    } else if (record->shape_rank == 2) {
        char head[48] = "";
        if (strstr(record->name, "q_proj") || strstr(record->name, "k_proj") ||
            strstr(record->name, "v_proj")) {
            snprintf(head, sizeof head, " (head %lld)", (long long)(record->worst[0] / head_dim));
        } else if (strstr(record->name, "o_proj")) {
            snprintf(head, sizeof head, " (head %lld)", (long long)(record->worst[1] / head_dim));
        }
        snprintf(text, size, "%s rank %d row %lld column %lld%s", record->name, record->rank,
                 (long long)record->worst[0], (long long)record->worst[1], head);
    } else {
        snprintf(text, size, "%s rank %d feature %lld", record->name, record->rank,
                 (long long)record->worst[0]);
    }
}

void results_variant_name(const char *token_layout, const char *algorithm, char *text,
                          size_t size) {
    const bool contiguous = token_layout[0] == '\0' || strcmp(token_layout, "contiguous") == 0;
    if (algorithm[0] == '\0' || (contiguous && strcmp(algorithm, "ulysses") == 0)) {
        snprintf(text, size, "%s", "");
        return;
    }
    snprintf(text, size, "%s %s", contiguous ? "contiguous" : token_layout, algorithm);
}

void run_item_cp_label(const run_item *item, char *text, size_t size) {
    char variant[48];
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    snprintf(text, size, "%lld%s%s", (long long)item->cp, variant[0] != '\0' ? " " : "", variant);
}

deciding_limit results_deciding_limit(double error, double limit, double cp1_limit) {
    deciding_limit decided = {limit, "naive", 0.0};
    if (cp1_limit > 0.0 && cp1_limit < limit) { /* never when limit is NaN: naive decides */
        decided.limit = cp1_limit;
        decided.rule = "cp 1";
    }
    if (isnan(error)) {
        decided.ratio = NAN;
    } else if (decided.limit > 0.0) {
        decided.ratio = error / decided.limit;
    } else {
        decided.ratio = error > 0.0 ? INFINITY : 0.0;
    }
    return decided;
}

int tensor_record_stored_shape(const tensor_record *record, int64_t shape[4], int64_t *count) {
    int rank = record->shape_rank;
    for (int d = 0; d < rank && d < 4; d++) {
        shape[d] = record->shape[d];
    }
    if (record->window[2] > 0 && rank == 3) {
        shape[0] = 1;
        shape[1] = record->window[2];
    }
    *count = 1;
    for (int d = 0; d < rank && d < 4; d++) {
        *count *= shape[d];
    }
    return rank;
}

deciding_limit tensor_record_deciding_limit(const tensor_record *record) {
    return results_deciding_limit(record->metrics.relative_l2, record->decision.limit,
                                  record->decision.cp1_limit);
}
