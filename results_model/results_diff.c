/* results_diff.c — what changed between two runs (see results_diff.h). */
#include "results_model/results_diff.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const diff_kind_names[DIFF_KIND_COUNT] = {
    "new failure", "grew", "fixed", "still failing", "changed", "only in old", "only in new",
};

/* The order items and tensors are matched in. */
static int compare_items(const read_item *a, const read_item *b) {
    int order = strcmp(a->case_name, b->case_name);
    if (order == 0) {
        order = strcmp(a->dtype, b->dtype);
    }
    if (order == 0) {
        order = (a->cp > b->cp) - (a->cp < b->cp);
    }
    /* a `cpparity run` item is one (layout, algorithm) of its cp; items without an algorithm
     * (`cpparity judge`) match whatever layout they record, which the diff then compares */
    if (order == 0) {
        order = strcmp(a->algorithm, b->algorithm);
    }
    if (order == 0 && a->algorithm[0] != '\0') {
        order = strcmp(a->token_layout, b->token_layout);
    }
    return order;
}

static int compare_tensors(const metrics_row *a, const metrics_row *b) {
    const int order = strcmp(a->tensor, b->tensor);
    return order != 0 ? order : (a->rank > b->rank) - (a->rank < b->rank);
}

/* Pointers to every item of run, for sorting: merging two sorted lists matches every pair in
 * O(N log N). */
static const read_item **item_pointers(const read_results *run) {
    const read_item **order = malloc((size_t)(run->item_count + 1) * sizeof *order);
    if (order == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < run->item_count; i++) {
        order[i] = &run->items[i];
    }
    return order; /* sorted by the caller (qsort) */
}

static int compare_item_pointers(const void *a, const void *b) {
    return compare_items(*(const read_item *const *)a, *(const read_item *const *)b);
}

static int compare_tensor_pointers(const void *a, const void *b) {
    return compare_tensors(*(const metrics_row *const *)a, *(const metrics_row *const *)b);
}

static bool failing(const char *outcome) {
    return strcmp(outcome, "FAIL") == 0 || strcmp(outcome, "ERROR") == 0;
}

static bool passing(const char *outcome) {
    return strcmp(outcome, "PASS") == 0 || strcmp(outcome, "REFUSED") == 0;
}

/* Both token layouts recorded, and different. */
static bool layouts_differ(const char *old_layout, const char *new_layout) {
    return old_layout[0] != '\0' && new_layout[0] != '\0' && strcmp(old_layout, new_layout) != 0;
}

bool diff_entry_layout_changed(const diff_entry *entry) {
    return layouts_differ(entry->old_layout, entry->new_layout);
}

bool diff_entry_layout_unstated(const diff_entry *entry) {
    return diff_entry_layout_changed(entry) &&
           !(entry->kind == DIFF_CHANGED && strcmp(entry->old_outcome, entry->new_outcome) == 0);
}

static diff_entry *add_entry(results_diff *diff, int64_t *capacity, diff_kind kind,
                             const read_item *old_item, const read_item *new_item) {
    if (diff->count == *capacity) {
        const int64_t grown = *capacity == 0 ? 32 : 2 * *capacity;
        diff_entry *larger = realloc(diff->entries, (size_t)grown * sizeof *larger);
        if (larger == NULL) {
            return NULL;
        }
        diff->entries = larger;
        *capacity = grown;
    }
    diff_entry *entry = &diff->entries[diff->count++];
    memset(entry, 0, sizeof *entry);
    const read_item *item = new_item != NULL ? new_item : old_item;
    entry->kind = kind;
    entry->regression = kind == DIFF_NEW_FAILURE || kind == DIFF_GREW;
    snprintf(entry->case_name, sizeof entry->case_name, "%s", item->case_name);
    snprintf(entry->dtype, sizeof entry->dtype, "%s", item->dtype);
    entry->cp = item->cp;
    results_variant_name(item->token_layout, item->algorithm, entry->variant,
                         sizeof entry->variant);
    if (old_item != NULL) {
        snprintf(entry->old_outcome, sizeof entry->old_outcome, "%s", old_item->outcome);
        snprintf(entry->old_layout, sizeof entry->old_layout, "%s", old_item->token_layout);
    }
    if (new_item != NULL) {
        snprintf(entry->new_outcome, sizeof entry->new_outcome, "%s", new_item->outcome);
        snprintf(entry->new_layout, sizeof entry->new_layout, "%s", new_item->token_layout);
        snprintf(entry->message, sizeof entry->message, "%s", new_item->message);
    }
    snprintf(entry->tensor, sizeof entry->tensor, "%s", item->worst_tensor);
    diff->kinds[kind]++;
    diff->regressions += entry->regression;
    return entry;
}

/* Tensors of two passing items whose error grew by more than the factor. */
static cpparity_status compare_item_tensors(results_diff *diff, int64_t *capacity,
                                            const read_item *old_item, const read_item *new_item,
                                            cpparity_error *error) {
    const metrics_row **old_order =
        malloc((size_t)(old_item->tensor_count + 1) * sizeof *old_order);
    const metrics_row **new_order =
        malloc((size_t)(new_item->tensor_count + 1) * sizeof *new_order);
    cpparity_status status = CPPARITY_OK;
    if (old_order == NULL || new_order == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        goto done;
    }
    for (int64_t t = 0; t < old_item->tensor_count; t++) {
        old_order[t] = &old_item->tensors[t];
    }
    for (int64_t t = 0; t < new_item->tensor_count; t++) {
        new_order[t] = &new_item->tensors[t];
    }
    qsort(old_order, (size_t)old_item->tensor_count, sizeof *old_order, compare_tensor_pointers);
    qsort(new_order, (size_t)new_item->tensor_count, sizeof *new_order, compare_tensor_pointers);
    for (int64_t o = 0, n = 0; o < old_item->tensor_count && n < new_item->tensor_count;) {
        const int order = compare_tensors(old_order[o], new_order[n]);
        if (order != 0) {
            o += order < 0;
            n += order > 0;
            continue;
        }
        const metrics_row *before = old_order[o++], *after = new_order[n++];
        diff->tensors_compared++;
        const double base = fmax(before->relative_l2, RESULTS_DIFF_GROWTH_FLOOR * after->limit);
        const bool grew = isfinite(after->relative_l2) ? after->relative_l2 > diff->factor * base
                                                       : isfinite(before->relative_l2);
        if (!grew) {
            continue;
        }
        diff_entry *entry = add_entry(diff, capacity, DIFF_GREW, old_item, new_item);
        if (entry == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
            goto done;
        }
        snprintf(entry->tensor, sizeof entry->tensor, "%s", after->tensor);
        entry->rank = after->rank;
        entry->old_error = before->relative_l2;
        entry->new_error = after->relative_l2;
        entry->limit = after->limit;
    }
done:
    free(old_order);
    free(new_order);
    return status;
}

cpparity_status results_diff_compute(const read_results *old_run, const read_results *new_run,
                                     double factor, results_diff *diff, cpparity_error *error) {
    memset(diff, 0, sizeof *diff);
    diff->factor = factor;
    if (old_run->format_version != new_run->format_version) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s (format %lld) and %s (format %lld) cannot be compared: "
                                  "their layouts differ",
                                  old_run->path, (long long)old_run->format_version, new_run->path,
                                  (long long)new_run->format_version);
    }
    const read_item **old_order = item_pointers(old_run);
    const read_item **new_order = item_pointers(new_run);
    /* matched[i]: the old item matched to new item i (new run order), NULL when none */
    const read_item **matched = calloc((size_t)new_run->item_count + 1, sizeof *matched);
    char *old_matched = calloc((size_t)old_run->item_count + 1, 1);
    cpparity_status status = CPPARITY_OK;
    int64_t capacity = 0;
    if (old_order == NULL || new_order == NULL || matched == NULL || old_matched == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        goto done;
    }
    qsort(old_order, (size_t)old_run->item_count, sizeof *old_order, compare_item_pointers);
    qsort(new_order, (size_t)new_run->item_count, sizeof *new_order, compare_item_pointers);
    for (int64_t o = 0, n = 0; o < old_run->item_count && n < new_run->item_count;) {
        const int order = compare_items(old_order[o], new_order[n]);
        if (order != 0) {
            o += order < 0;
            n += order > 0;
            continue;
        }
        matched[new_order[n] - new_run->items] = old_order[o];
        old_matched[old_order[o] - old_run->items] = 1;
        o++;
        n++;
    }
    /* in the new run's order, so the report reads like the run */
    for (int64_t i = 0; i < new_run->item_count && status == CPPARITY_OK; i++) {
        const read_item *after = &new_run->items[i], *before = matched[i];
        diff_entry *entry = NULL;
        if (before == NULL) {
            entry = add_entry(diff, &capacity, DIFF_ONLY_NEW, NULL, after);
        } else {
            diff->items_compared++;
            if (passing(before->outcome) && failing(after->outcome)) {
                entry = add_entry(diff, &capacity, DIFF_NEW_FAILURE, before, after);
            } else if (failing(before->outcome) && passing(after->outcome)) {
                entry = add_entry(diff, &capacity, DIFF_FIXED, before, after);
            } else if (failing(before->outcome) && failing(after->outcome)) {
                entry = add_entry(diff, &capacity, DIFF_STILL_FAILING, before, after);
            } else if (strcmp(before->outcome, after->outcome) != 0) {
                entry = add_entry(diff, &capacity, DIFF_CHANGED, before, after);
            } else if (layouts_differ(before->token_layout, after->token_layout)) {
                entry = add_entry(diff, &capacity, DIFF_CHANGED, before, after);
                if (entry != NULL) { /* rank r's logits are other positions: not comparable */
                    snprintf(entry->message, sizeof entry->message,
                             "the ranks hold other positions now (layout %s -> %s): errors not "
                             "compared tensor by tensor",
                             before->token_layout, after->token_layout);
                }
            } else {
                status = compare_item_tensors(diff, &capacity, before, after, error);
                continue;
            }
        }
        if (entry == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
    }
    for (int64_t i = 0; i < old_run->item_count && status == CPPARITY_OK; i++) {
        if (!old_matched[i] &&
            add_entry(diff, &capacity, DIFF_ONLY_OLD, &old_run->items[i], NULL) == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
    }
done:
    free(old_order);
    free(new_order);
    free(matched);
    free(old_matched);
    if (status != CPPARITY_OK) {
        results_diff_free(diff);
    }
    return status;
}

void results_diff_free(results_diff *diff) {
    free(diff->entries);
    memset(diff, 0, sizeof *diff);
}
