/* case_defaults.c — merges a suite's defaults into a case and checks the merged case (see
 * case_defaults.h). */
#include "harness/suite/case_defaults.h"

#include <stdlib.h>
#include <string.h>

#include "harness/judging/tolerance.h"

#define KEY_PATH_CAPACITY 96 /* "rows[12]" */

/* Copies the value of one model field from source to target (the merge of `model` mappings). */
static void copy_model_field(model_settings *target, const model_settings *source, int field) {
    cpparity_model_field_copy(&target->config, &source->config, &cpparity_model_fields[field]);
    if (cpparity_model_fields[field].type == CPPARITY_FIELD_LAYER_TYPES) {
        target->layer_count = source->layer_count;
    }
    target->values[field] = source->values[field];
}

/* Deep-copies count rows into *copy; false when memory runs out. */
static bool copy_rows(const cpparity_row_layout *rows, int64_t count, cpparity_row_layout **copy) {
    *copy = calloc((size_t)count, sizeof **copy);
    if (*copy == NULL) {
        return false;
    }
    for (int64_t i = 0; i < count; i++) {
        (*copy)[i] = rows[i];
        (*copy)[i].document_lengths = NULL;
        (*copy)[i].start_positions = NULL;
        if (rows[i].document_count > 0) {
            size_t size = (size_t)rows[i].document_count * sizeof *rows[i].document_lengths;
            (*copy)[i].document_lengths = malloc(size);
            (*copy)[i].start_positions = rows[i].start_positions != NULL ? malloc(size) : NULL;
            if ((*copy)[i].document_lengths == NULL ||
                (rows[i].start_positions != NULL && (*copy)[i].start_positions == NULL)) {
                cpparity_row_layouts_free(*copy, count);
                *copy = NULL;
                return false;
            }
            memcpy((*copy)[i].document_lengths, rows[i].document_lengths, size);
            if (rows[i].start_positions != NULL) {
                memcpy((*copy)[i].start_positions, rows[i].start_positions, size);
            }
        }
    }
    return true;
}

/* Merges the model of a case over the defaults' model key by key and checks the result:
 * required keys, layer_types against num_hidden_layers, W and C where used, then
 * cpparity_model_config_validate. anchor locates errors that no single case node explains. */
static cpparity_status resolve_model(case_reader *reader, const char *scope,
                                     const yaml_node_t *anchor, const model_settings *defaults,
                                     const model_settings *overrides, cpparity_case_level level,
                                     cpparity_model_config *config) {
    model_settings merged = *defaults;
    for (int field = 0; field < CPPARITY_MODEL_FIELD_COUNT; field++) {
        if (overrides->values[field] != NULL) {
            copy_model_field(&merged, overrides, field);
        }
    }
    cpparity_model_config resolved;
    memset(&resolved, 0, sizeof resolved);
    cpparity_model_config_set_defaults(&resolved);
    int layer_types_field = -1;
    for (int field = 0; field < CPPARITY_MODEL_FIELD_COUNT; field++) {
        const cpparity_model_field *described = &cpparity_model_fields[field];
        if (described->type == CPPARITY_FIELD_LAYER_TYPES) {
            layer_types_field = field;
        }
        if (merged.values[field] != NULL) {
            cpparity_model_field_copy(&resolved, &merged.config, described);
        } else if (described->required) {
            return yaml_source_fail(
                reader->source, anchor, scope, "",
                "model.%s: missing (set it in the case's model or in defaults.model)",
                described->name);
        }
    }
    if (layer_types_field >= 0 && merged.values[layer_types_field] != NULL &&
        merged.layer_count != resolved.num_hidden_layers) {
        const yaml_node_t *where = overrides->values[layer_types_field] != NULL
                                       ? overrides->values[layer_types_field]
                                       : anchor;
        return yaml_source_fail(reader->source, where, scope, "model.layer_types",
                                "lists %lld layer types, num_hidden_layers is %lld",
                                (long long)merged.layer_count,
                                (long long)resolved.num_hidden_layers);
    }
    for (int field = 0; field < CPPARITY_MODEL_FIELD_COUNT; field++) {
        const cpparity_model_field *described = &cpparity_model_fields[field];
        if (described->required_by_layer < 0 || merged.values[field] != NULL) {
            continue;
        }
        for (int64_t l = 0; l < resolved.num_hidden_layers && l < CPPARITY_MAX_LAYERS; l++) {
            if ((int)resolved.layer_types[l] == described->required_by_layer) {
                char key_path[KEY_PATH_CAPACITY];
                yaml_source_format(key_path, sizeof key_path, "model.%s", described->name);
                return yaml_source_fail(reader->source, anchor, scope, key_path,
                                        "missing, required because layer %lld is %s", (long long)l,
                                        cpparity_layer_type_name(resolved.layer_types[l]));
            }
        }
    }
    cpparity_error invalid;
    cpparity_error_clear(&invalid);
    /* an attention-level case has no rotary embedding: an odd head_dim is fine there */
    cpparity_model_config validated = resolved;
    if (level == CPPARITY_LEVEL_ATTENTION && validated.head_dim % 2 != 0) {
        validated.head_dim += 1;
    }
    if (cpparity_model_config_validate(&validated, &invalid) != CPPARITY_OK) {
        return yaml_source_fail(reader->source, anchor, scope, "model", "%s", invalid.message);
    }
    *config = resolved;
    return CPPARITY_OK;
}

/* Checks that every row adds up to seq_len; rows_value holds the row nodes for locations. */
static cpparity_status check_row_sums(case_reader *reader, const char *scope,
                                      const yaml_node_t *rows_value,
                                      const cpparity_row_layout *rows, int64_t count,
                                      int64_t seq_len) {
    for (int64_t i = 0; i < count; i++) {
        const cpparity_row_layout *row = &rows[i];
        int64_t documents = 0;
        bool overflow = false;
        for (int64_t d = 0; d < row->document_count && !overflow; d++) {
            overflow = row->document_lengths[d] > INT64_MAX - documents;
            documents += overflow ? 0 : row->document_lengths[d];
        }
        overflow = overflow || row->left_padding > INT64_MAX - documents ||
                   row->right_padding > INT64_MAX - documents - row->left_padding;
        char key_path[KEY_PATH_CAPACITY];
        yaml_source_format(key_path, sizeof key_path, "rows[%lld]", (long long)i);
        const yaml_node_t *node = yaml_source_item(reader->source, rows_value, i);
        if (overflow) {
            return yaml_source_fail(reader->source, node, scope, key_path,
                                    "adds up to more than %lld tokens", (long long)INT64_MAX);
        }
        int64_t total = row->left_padding + documents + row->right_padding;
        if (total != seq_len) {
            return yaml_source_fail(reader->source, node, scope, key_path,
                                    "adds up to %lld tokens (left_padding %lld + documents %lld + "
                                    "right_padding %lld), seq_len is %lld",
                                    (long long)total, (long long)row->left_padding,
                                    (long long)documents, (long long)row->right_padding,
                                    (long long)seq_len);
        }
    }
    return CPPARITY_OK;
}

/* Resolves every tolerance: the built-in value, then the suite's defaults, then the case. */
static void resolve_tolerances(const tolerance_settings *suite_level,
                               const tolerance_settings *case_level, cpparity_case *result) {
    const tolerance_settings *levels[2] = {suite_level, case_level};
    const cpparity_tolerance_origin origins[2] = {CPPARITY_ORIGIN_SUITE, CPPARITY_ORIGIN_CASE};
    for (int dtype = 0; dtype < CPPARITY_DTYPE_COUNT; dtype++) {
        for (int kind = 0; kind < CPPARITY_KIND_COUNT; kind++) {
            cpparity_tolerance tolerance =
                cpparity_tolerance_default((cpparity_dtype)dtype, (cpparity_tensor_kind)kind);
            for (int level = 0; level < 2; level++) {
                const double *values = levels[level]->values[dtype][kind];
                const yaml_node_t *const *nodes = levels[level]->nodes[dtype][kind];
                if (nodes[0] != NULL) {
                    tolerance.ratio = values[0];
                    tolerance.ratio_origin = origins[level];
                }
                if (nodes[1] != NULL) {
                    tolerance.floor = values[1];
                    tolerance.floor_origin = origins[level];
                }
                if (nodes[2] != NULL) {
                    tolerance.ceiling = values[2];
                    tolerance.ceiling_origin = origins[level];
                }
            }
            result->tolerances[dtype][kind] = tolerance;
        }
    }
}

/* Rows plus document lengths of count rows. */
static int64_t row_entries(const cpparity_row_layout *rows, int64_t count) {
    int64_t entries = count;
    for (int64_t i = 0; i < count; i++) {
        entries += rows[i].document_count;
    }
    return entries;
}

/* Gives result the value of a key merged as a whole (everything but rows, model and
 * tolerances): the case's, else the defaults', else the schema default. */
static void merge_whole(const case_key *key, const case_settings *from, cpparity_case *result) {
    char *member = (char *)result + key->offset;
    char *count = (char *)result + key->count_offset;
    if (from != NULL) {
        memcpy(member, (const char *)&from->values + key->offset, key->size);
        memcpy(count, (const char *)&from->values + key->count_offset, key->count_size);
        return;
    }
    if (key->default_kind != CASE_DEFAULT_VALUE) {
        return;
    }
    const int index = (int)key->default_value, one = 1;
    switch (key->type) {
    case CASE_VALUE_NAME:
    case CASE_VALUE_STRING:
        member[0] = '\0';
        return;
    case CASE_VALUE_INTEGER:
        memcpy(member, &key->default_value, sizeof key->default_value);
        return;
    case CASE_VALUE_ENUM:
        memcpy(member, &index, sizeof index);
        return;
    case CASE_VALUE_INTEGER_SET:
        memcpy(member, &key->default_value, sizeof key->default_value);
        memcpy(count, &one, sizeof one);
        return;
    case CASE_VALUE_ENUM_SET:
        memcpy(member, &index, sizeof index);
        memcpy(count, &one, sizeof one);
        return;
    case CASE_VALUE_ALGORITHMS: {
        const cpparity_algorithm_choice choice = {(cpparity_algorithm)index, 0, 0};
        memcpy(member, &choice, sizeof choice);
        memcpy(count, &one, sizeof one);
        return;
    }
    default:
        return;
    }
}

/* Gives result the rows of the case, or a copy of the defaults' (counted against the budget
 * again), after checking that every row adds up to seq_len. */
static cpparity_status merge_rows(case_reader *reader, const char *scope,
                                  const yaml_node_t *case_node, const case_settings *defaults,
                                  case_settings *settings, cpparity_case *result) {
    case_settings *from = settings->nodes[CASE_KEY_ROWS] != NULL ? settings : NULL;
    const cpparity_case *rows = from != NULL ? &settings->values : &defaults->values;
    const yaml_node_t *node =
        from != NULL ? settings->nodes[CASE_KEY_ROWS] : defaults->nodes[CASE_KEY_ROWS];
    if (from == NULL && !case_reader_take_rows(reader, row_entries(rows->rows, rows->batch_size))) {
        return yaml_source_fail(reader->source, case_node, scope, case_keys[CASE_KEY_ROWS].name,
                                "the suite holds more than %lld rows and document lengths once "
                                "the defaults' rows are given to this case (cases/README.md, "
                                "Limits)",
                                (long long)CASE_MAX_ROW_ENTRIES);
    }
    cpparity_status status =
        check_row_sums(reader, scope, node, rows->rows, rows->batch_size, result->seq_len);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (from == NULL) {
        if (!copy_rows(rows->rows, rows->batch_size, &result->rows)) {
            return yaml_source_out_of_memory(reader->source);
        }
        result->batch_size = rows->batch_size;
        return CPPARITY_OK;
    }
    result->rows = settings->values.rows;
    result->batch_size = settings->values.batch_size;
    settings->values.rows = NULL;
    settings->values.batch_size = 0;
    return CPPARITY_OK;
}

cpparity_status case_defaults_apply(case_reader *reader, const char *scope,
                                    const yaml_node_t *case_node, const yaml_node_t *name_node,
                                    const case_settings *defaults, case_settings *settings,
                                    cpparity_case *result) {
    const case_settings *from[CASE_KEY_COUNT];
    for (int k = 0; k < CASE_KEY_COUNT; k++) {
        from[k] = settings->nodes[k] != NULL   ? settings
                  : defaults->nodes[k] != NULL ? defaults
                                               : NULL;
        if (from[k] == NULL && case_keys[k].required && !case_keys[k].case_only) {
            return yaml_source_fail(reader->source, case_node, scope, case_keys[k].name,
                                    "missing (set it in the case or in defaults)");
        }
    }
    for (int k = 0; k < CASE_KEY_COUNT; k++) {
        const case_value_type type = case_keys[k].type;
        if (type != CASE_VALUE_ROWS && type != CASE_VALUE_MODEL && type != CASE_VALUE_TOLERANCES) {
            merge_whole(&case_keys[k], from[k], result);
        }
    }
    cpparity_status status = merge_rows(reader, scope, case_node, defaults, settings, result);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int i = 0; i < result->cp_count; i++) {
        if (result->cp_sizes[i] > result->seq_len) {
            char key_path[KEY_PATH_CAPACITY];
            yaml_source_format(key_path, sizeof key_path, "cp[%d]", i);
            return yaml_source_fail(
                reader->source,
                yaml_source_item(reader->source, from[CASE_KEY_CP]->nodes[CASE_KEY_CP], i), scope,
                key_path, "cp size %lld exceeds seq_len (%lld)", (long long)result->cp_sizes[i],
                (long long)result->seq_len);
        }
    }
    if (result->level == CPPARITY_LEVEL_ATTENTION &&
        (result->cp_count != 1 || result->cp_sizes[0] != 1)) {
        return yaml_source_fail(reader->source, from[CASE_KEY_CP]->nodes[CASE_KEY_CP], scope, "cp",
                                "an attention-level case judges one kernel call alone: cp must be "
                                "[1]");
    }
    for (int a = 0; a < result->algorithm_count; a++) { /* a hybrid runs at cp = U·R */
        const cpparity_algorithm_choice *choice = &result->algorithms[a];
        bool listed = choice->kind != CPPARITY_ALGORITHM_HYBRID;
        for (int i = 0; !listed && i < result->cp_count; i++) {
            listed = result->cp_sizes[i] == choice->ulysses_degree * choice->ring_degree;
        }
        if (!listed) {
            char key_path[KEY_PATH_CAPACITY];
            yaml_source_format(key_path, sizeof key_path, "algorithms[%d]", a);
            return yaml_source_fail(
                reader->source,
                yaml_source_item(reader->source,
                                 from[CASE_KEY_ALGORITHMS]->nodes[CASE_KEY_ALGORITHMS], a),
                scope, key_path, "hybrid:%lldx%lld runs at cp %lld, which cp does not list",
                (long long)choice->ulysses_degree, (long long)choice->ring_degree,
                (long long)(choice->ulysses_degree * choice->ring_degree));
        }
    }
    const case_key_index per_rank_keys[] = {CASE_KEY_LAYOUTS, CASE_KEY_ALGORITHMS};
    for (size_t i = 0; i < sizeof per_rank_keys / sizeof *per_rank_keys; i++) {
        const case_key_index k = per_rank_keys[i];
        if (result->level == CPPARITY_LEVEL_ATTENTION && from[k] != NULL) {
            return yaml_source_fail(reader->source, from[k]->nodes[k], scope, case_keys[k].name,
                                    "an attention-level case has no context-parallel group: leave "
                                    "%s out (it is for model-level cases)",
                                    case_keys[k].name);
        }
    }
    if (result->level == CPPARITY_LEVEL_ATTENTION && result->expect_refuse) {
        return yaml_source_fail(reader->source, case_node, scope, "expect",
                                "an attention-level case has no implementation to refuse it");
    }
    resolve_tolerances(&defaults->tolerances, &settings->tolerances, result);
    const yaml_node_t *anchor = settings->model_key != NULL ? settings->model_key : name_node;
    return resolve_model(reader, scope, anchor, &defaults->model, &settings->model, result->level,
                         &result->model);
}
