/*
 * case_reader.h — reads the keys of a case, or of a suite's `defaults`, from a YAML mapping into
 * case_settings, each value as its row of the schema (case_schema.h) says: type, range and the
 * member it fills. Only what one value shows is checked here; what needs the case and the
 * defaults together (required keys, rows against seq_len, the merged model) is case_defaults.h.
 * Errors are bad input located at the offending node (yaml_source.h).
 */
#ifndef CPPARITY_HARNESS_SUITE_CASE_READER_H
#define CPPARITY_HARNESS_SUITE_CASE_READER_H

#include <stdint.h>
#include <yaml.h>

#include "common/case.h"
#include "common/model_config.h"
#include "harness/suite/case_schema.h"
#include "harness/suite/yaml_source.h"

/* A model mapping as written: the values that were set and the node each came from. */
typedef struct model_settings {
    cpparity_model_config config;                          /* values of the keys that were set */
    int64_t layer_count;                                   /* entries of layer_types when set */
    const yaml_node_t *values[CPPARITY_MODEL_FIELD_COUNT]; /* each field's value node (index in
                                                               cpparity_model_fields), NULL when
                                                               not set */
} model_settings;

/* Tolerance fields as written: value and node per dtype, kind and field (case_tolerance_fields). */
typedef struct tolerance_settings {
    double values[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT][CASE_TOLERANCE_FIELD_COUNT];
    const yaml_node_t *nodes[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT][CASE_TOLERANCE_FIELD_COUNT];
} tolerance_settings;

/* The keys of a case or of `defaults` as written. */
typedef struct case_settings {
    cpparity_case values;                     /* each key's value in its member (case_keys); the
                                                 rows (values.rows) are owned until moved */
    const yaml_node_t *nodes[CASE_KEY_COUNT]; /* each key's value node, NULL when absent */
    const yaml_node_t *model_key;             /* the `model` key node itself */
    model_settings model;                     /* `model`, key by key */
    tolerance_settings tolerances;            /* `tolerances`, field by field */
} case_settings;

/* A suite being read: its source and what it holds so far. */
typedef struct case_reader {
    yaml_source *source; /* the parsed file and where errors go */
    int64_t row_entries; /* rows and document lengths held so far (CASE_MAX_ROW_ENTRIES), a
                            copy of the defaults' rows counted for every case given it */
} case_reader;

/* Counts entries more rows or document lengths against CASE_MAX_ROW_ENTRIES; false when the
 * suite would hold more (nothing is counted then). */
bool case_reader_take_rows(case_reader *reader, int64_t entries);

/* Reads the value node of the case_keys row key into settings (values and nodes); scope names the
 * case ("case 'x'") or "defaults" in messages. */
cpparity_status case_reader_read_key(case_reader *reader, const yaml_node_t *value,
                                     const char *scope, case_key_index key,
                                     case_settings *settings);

/* Reads every key of a mapping already checked against the schema that `defaults` allows too,
 * in the order written; the case-only keys are left to the caller. */
cpparity_status case_reader_read_shared(case_reader *reader, const yaml_node_t *mapping,
                                        const char *scope, case_settings *settings);

/* Releases what settings own (rows not moved into a case). */
void case_settings_free(case_settings *settings);

#endif
