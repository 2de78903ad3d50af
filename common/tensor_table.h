/*
 * tensor_table.h — a table of named tensors laid out in one allocation.
 *
 * Parameters, gradients and activations are each one contiguous array of elements described by
 * a table: name, shape and offset of every tensor, so one loop can zero, compare or save them
 * all. The table owns its entries; the storage it describes is owned by whoever allocated it
 * (table.total elements of the caller's element type).
 */
#ifndef CPPARITY_COMMON_TENSOR_TABLE_H
#define CPPARITY_COMMON_TENSOR_TABLE_H

#include <stdint.h>

#include "common/error.h"

#define CPPARITY_TENSOR_NAME 96
#define CPPARITY_TENSOR_MAX_RANK 4

typedef struct cpparity_tensor_entry {
    char name[CPPARITY_TENSOR_NAME];         /* e.g. "model.layers.0.self_attn.q_proj.weight" */
    int rank;                                /* number of dimensions, 0 for a scalar */
    int64_t shape[CPPARITY_TENSOR_MAX_RANK]; /* outermost first */
    int64_t offset;                          /* first element in the storage */
    int64_t count;                           /* product of the shape (1 for a scalar) */
} cpparity_tensor_entry;

typedef struct cpparity_tensor_table {
    cpparity_tensor_entry *entries; /* (count) in storage order */
    int64_t count;                  /* number of tensors */
    int64_t capacity;               /* allocated entries */
    int64_t total;                  /* elements of storage the table describes */
} cpparity_tensor_table;

/* Appends a tensor of the given rank and shape after the last one. The name is formatted
 * printf-style. CPPARITY_ERROR_RUNTIME when out of memory, CPPARITY_ERROR_INPUT for a name
 * that does not fit or a negative dimension. */
cpparity_status cpparity_tensor_table_add(cpparity_tensor_table *table, int rank,
                                          const int64_t *shape, cpparity_error *error,
                                          const char *name_format, ...)
    __attribute__((format(printf, 5, 6)));

/* The entry with this exact name, or NULL. */
const cpparity_tensor_entry *cpparity_tensor_table_find(const cpparity_tensor_table *table,
                                                        const char *name);

/* Releases the entries; safe on a zeroed table. */
void cpparity_tensor_table_free(cpparity_tensor_table *table);

/* The bytes of the entries a table of count tensors allocates (cpparity_tensor_table_add grows
 * its array to 2·capacity + 16), for memory estimates: a few KiB per table. */
int64_t cpparity_tensor_table_bytes(int64_t count);

#endif
