/* tensor_table.c — named tensors in one allocation (see tensor_table.h). */
#include "common/tensor_table.h"

#include "common/checked_size.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The capacity after growing from capacity entries. */
static int64_t grown_capacity(int64_t capacity) {
    return capacity * 2 + 16;
}

int64_t cpparity_tensor_table_bytes(int64_t count) {
    int64_t capacity = 0;
    while (capacity < count) {
        capacity = grown_capacity(capacity);
    }
    return capacity * (int64_t)sizeof(cpparity_tensor_entry);
}

cpparity_status cpparity_tensor_table_add(cpparity_tensor_table *table, int rank,
                                          const int64_t *shape, cpparity_error *error,
                                          const char *name_format, ...) {
    if (rank < 0 || rank > CPPARITY_TENSOR_MAX_RANK) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "tensor rank %d out of range", rank);
    }
    if (table->count == table->capacity) {
        int64_t capacity = grown_capacity(table->capacity);
        cpparity_tensor_entry *grown =
            realloc(table->entries, (size_t)capacity * sizeof *table->entries);
        if (grown == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "out of memory (tensor table)");
        }
        table->entries = grown;
        table->capacity = capacity;
    }
    cpparity_tensor_entry *entry = &table->entries[table->count];
    memset(entry, 0, sizeof *entry);
    va_list arguments;
    va_start(arguments, name_format);
    int length = vsnprintf(entry->name, sizeof entry->name, name_format, arguments);
    va_end(arguments);
    if (length < 0 || (size_t)length >= sizeof entry->name) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "tensor name too long: %s...",
                                  entry->name);
    }
    entry->rank = rank;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "tensor %s: dimension %d is negative", entry->name, d);
        }
        entry->shape[d] = shape[d];
    }
    int64_t total = 0;
    if (!cpparity_elements_checked(shape, rank, &entry->count) ||
        !cpparity_add_checked(table->total, entry->count, &total) ||
        total > CPPARITY_MAX_ELEMENTS) {
        char dims[160] = "";
        for (int d = 0, used = 0; d < rank && used < (int)sizeof dims; d++) {
            used += snprintf(dims + used, sizeof dims - (size_t)used, "%s%lld", d ? " x " : "",
                             (long long)shape[d]);
        }
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "tensor %s: [%s] is more than %lld elements in all (the sizes "
                                  "of the case are too large to hold)",
                                  entry->name, dims, (long long)CPPARITY_MAX_ELEMENTS);
    }
    entry->offset = table->total;
    table->total = total;
    table->count++;
    return CPPARITY_OK;
}

const cpparity_tensor_entry *cpparity_tensor_table_find(const cpparity_tensor_table *table,
                                                        const char *name) {
    for (int64_t i = 0; i < table->count; i++) {
        if (strcmp(table->entries[i].name, name) == 0) {
            return &table->entries[i];
        }
    }
    return NULL;
}

void cpparity_tensor_table_free(cpparity_tensor_table *table) {
    free(table->entries);
    memset(table, 0, sizeof *table);
}
