/* baseline_table.c — baseline errors by case, dtype and tensor (see baseline_table.h). */
#include "harness/judging/baseline_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cpparity_status baseline_table_add(baseline_table *table, int64_t case_index, const run_item *item,
                                   cpparity_error *error) {
    baseline_entry *grown = realloc(table->entries, (size_t)(table->count + item->tensor_count) *
                                                        sizeof *table->entries);
    if (grown == NULL && item->tensor_count > 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (baselines)");
    }
    table->entries = grown;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->rank != 0) {
            continue;
        }
        baseline_entry *entry = &table->entries[table->count++];
        memset(entry, 0, sizeof *entry);
        entry->case_index = case_index;
        entry->dtype = (int32_t)item->dtype;
        snprintf(entry->name, sizeof entry->name, "%s", record->name);
        entry->error = record->metrics.relative_l2;
    }
    return CPPARITY_OK;
}

const baseline_entry *baseline_table_find(const baseline_table *table, int64_t case_index,
                                          cpparity_dtype dtype, const char *name) {
    for (int64_t i = 0; i < table->count; i++) {
        const baseline_entry *entry = &table->entries[i];
        if (entry->case_index == case_index && entry->dtype == (int32_t)dtype &&
            strcmp(entry->name, name) == 0) {
            return entry;
        }
    }
    return NULL;
}

void baseline_table_free(baseline_table *table) {
    free(table->entries);
    memset(table, 0, sizeof *table);
}
