/*
 * baseline_table.h — the baseline error of every tensor of every case and dtype, which the pass
 * rule of docs/tolerances.md multiplies: err <= ratio × err_baseline + floor. Filled on rank 0 of
 * the job from finished baseline (cp = 1) items and then sent to every rank as plain bytes.
 */
#ifndef CPPARITY_HARNESS_JUDGING_BASELINE_TABLE_H
#define CPPARITY_HARNESS_JUDGING_BASELINE_TABLE_H

#include <stdint.h>

#include "common/error.h"
#include "results_model/results.h"

/* The baseline error of one tensor (rank 0 of the baseline run) of a case and dtype. */
typedef struct baseline_entry {
    int64_t case_index;              /* into the plan */
    int32_t dtype;                   /* cpparity_dtype */
    char name[CPPARITY_RECORD_NAME]; /* tensor record name */
    double error;                    /* its relative L2 error against float64 */
} baseline_entry;

typedef struct baseline_table {
    baseline_entry *entries; /* (count) owned */
    int64_t count;           /* entries */
} baseline_table;

/* Appends the rank-0 records of a finished baseline item. CPPARITY_ERROR_RUNTIME when out of
 * memory. */
cpparity_status baseline_table_add(baseline_table *table, int64_t case_index, const run_item *item,
                                   cpparity_error *error);

/* The entry for (case, dtype, name), or NULL. */
const baseline_entry *baseline_table_find(const baseline_table *table, int64_t case_index,
                                          cpparity_dtype dtype, const char *name);

/* Releases the entries; safe on a zeroed table. */
void baseline_table_free(baseline_table *table);

#endif
