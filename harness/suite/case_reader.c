/* case_reader.c — reads the keys of a case or of `defaults` as the schema says (see
 * case_reader.h). */
#include "harness/suite/case_reader.h"

#include <stdlib.h>
#include <string.h>

#include "common/names.h"

#define KEY_PATH_CAPACITY 96 /* "rows[12].documents[3]" */

/* The member of the struct at base that key fills, and its second member (a count). */
static void *member_of(void *base, const case_key *key) {
    return (char *)base + key->offset;
}
static void *count_of(void *base, const case_key *key) {
    return (char *)base + key->count_offset;
}

/* Stores a name's index into an enum member, or into a bool member (false for the first name). */
static void store_index(void *member, size_t size, int index) {
    if (size == sizeof(bool)) {
        const bool flag = index != 0;
        memcpy(member, &flag, sizeof flag);
    } else {
        memcpy(member, &index, sizeof index);
    }
}

bool case_reader_take_rows(case_reader *reader, int64_t entries) {
    if (entries > CASE_MAX_ROW_ENTRIES - reader->row_entries) {
        return false;
    }
    reader->row_entries += entries;
    return true;
}

/* Refuses a value that would take the suite over CASE_MAX_ROW_ENTRIES. */
static cpparity_status over_row_budget(const case_reader *reader, const yaml_node_t *node,
                                       const char *scope, const char *key_path) {
    return yaml_source_fail(reader->source, node, scope, key_path,
                            "the suite holds more than %lld rows and document lengths "
                            "(cases/README.md, Limits)",
                            (long long)CASE_MAX_ROW_ENTRIES);
}

/* Whether name uses only [A-Za-z0-9_.-]. */
static bool is_valid_case_name(const char *name) {
    for (const char *c = name; *c != '\0'; c++) {
        bool letter = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z');
        bool digit = *c >= '0' && *c <= '9';
        if (!letter && !digit && strchr("_.-", *c) == NULL) {
            return false;
        }
    }
    return true;
}

/* Reads a scalar key (a name, string, integer or enumeration) into its member of base. */
static cpparity_status read_scalar(case_reader *reader, const yaml_node_t *node, const char *scope,
                                   const char *key_path, const case_key *key, void *base) {
    void *member = member_of(base, key);
    cpparity_status status = CPPARITY_OK;
    switch (key->type) {
    case CASE_VALUE_NAME:
        status = yaml_source_read_string(reader->source, node, scope, key_path, member, key->size);
        if (status == CPPARITY_OK && (((char *)member)[0] == '\0' || !is_valid_case_name(member))) {
            return yaml_source_fail(
                reader->source, node, scope, key_path,
                "'%s' must be non-empty and use only letters, digits, '_', '.' and '-'",
                (const char *)member);
        }
        return status;
    case CASE_VALUE_STRING:
        return yaml_source_read_string(reader->source, node, scope, key_path, member, key->size);
    case CASE_VALUE_INTEGER: {
        int64_t value = 0;
        status =
            yaml_source_read_integer(reader->source, node, scope, key_path, key->minimum, &value);
        memcpy(member, &value, sizeof value);
        return status;
    }
    case CASE_VALUE_ENUM: {
        int index = 0;
        status = yaml_source_read_name(reader->source, node, scope, key_path, key->names,
                                       key->name_count, NULL, &index);
        if (status == CPPARITY_OK) {
            store_index(member, key->size, index);
        }
        return status;
    }
    default:
        return CPPARITY_OK;
    }
}

/* Checks that the value of a set or of `rows` is a non-empty sequence; *count its entries. */
static cpparity_status read_entries(const case_reader *reader, const yaml_node_t *node,
                                    const char *scope, const case_key *key, int64_t *count) {
    cpparity_status status =
        yaml_source_check_sequence(reader->source, node, scope, key->name, key->entries, true);
    *count = status == CPPARITY_OK ? yaml_source_length(node) : 0;
    return status;
}

/* Reads a set: 1 to maximum_count distinct integers, or 1 or more distinct names, into its
 * member of values (int64_t[] or enum[]) and the count into its int count. */
static cpparity_status read_set(case_reader *reader, const yaml_node_t *node, const char *scope,
                                const case_key *key, cpparity_case *values) {
    int64_t count = 0;
    cpparity_status status = read_entries(reader, node, scope, key, &count);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (key->maximum_count > 0 && count > key->maximum_count) {
        return yaml_source_fail(reader->source,
                                yaml_source_item(reader->source, node, key->maximum_count), scope,
                                key->name, "at most %d %s", key->maximum_count, key->entries);
    }
    const bool names = key->type == CASE_VALUE_ENUM_SET;
    int64_t *integers = member_of(values, key);
    int *indices = member_of(values, key);
    for (int i = 0; i < (int)count; i++) {
        const yaml_node_t *item = yaml_source_item(reader->source, node, i);
        char key_path[KEY_PATH_CAPACITY];
        yaml_source_format(key_path, sizeof key_path, "%s[%d]", key->name, i);
        int64_t integer = 0;
        int index = 0;
        status = names ? yaml_source_read_name(reader->source, item, scope, key_path, key->names,
                                               key->name_count, key->entry, &index)
                       : yaml_source_read_integer(reader->source, item, scope, key_path,
                                                  key->minimum, &integer);
        for (int earlier = 0; status == CPPARITY_OK && earlier < i; earlier++) {
            if (names && indices[earlier] == index) {
                return yaml_source_fail(reader->source, item, scope, key_path, "duplicate %s '%s'",
                                        key->entry, key->names[index]);
            }
            if (!names && integers[earlier] == integer) {
                return yaml_source_fail(reader->source, item, scope, key_path,
                                        "duplicate %s %lld (also %s[%d])", key->entry,
                                        (long long)integer, key->name, earlier);
            }
        }
        if (status != CPPARITY_OK) {
            return status;
        }
        if (names) {
            indices[i] = index;
        } else {
            integers[i] = integer;
        }
    }
    const int entries = (int)count;
    memcpy(count_of(values, key), &entries, sizeof entries);
    return CPPARITY_OK;
}

/* Reads one entry of `algorithms`: `ulysses`, `ring` or `hybrid:UxR` (U, R >= 2, U·R <= 1024). */
static cpparity_status read_algorithm(case_reader *reader, const yaml_node_t *item,
                                      const char *scope, const char *key_path,
                                      cpparity_algorithm_choice *choice) {
    const char *text = item->type == YAML_SCALAR_NODE ? yaml_source_text(item) : "";
    if (strncmp(text, "hybrid:", 7) == 0) {
        long long u = 0, r = 0;
        int used = 0;
        if (sscanf(text + 7, "%3lldx%3lld%n", &u, &r, &used) != 2 || text[7 + used] != '\0' ||
            u < 2 || r < 2 || u * r > 1024) {
            return yaml_source_fail(reader->source, item, scope, key_path,
                                    "'%s' is not hybrid:UxR with U and R from 2 up and U·R at "
                                    "most 1024 (e.g. hybrid:2x4: Ulysses inside groups of 2 "
                                    "ranks, ring across 4 groups)",
                                    text);
        }
        *choice = (cpparity_algorithm_choice){CPPARITY_ALGORITHM_HYBRID, u, r};
        return CPPARITY_OK;
    }
    static const char *const plain[] = {"ulysses", "ring", "hybrid:UxR"};
    int index = 0;
    cpparity_status status =
        yaml_source_read_name(reader->source, item, scope, key_path, plain, 3, "algorithm", &index);
    if (status == CPPARITY_OK && index == 2) { /* the placeholder itself */
        status = yaml_source_fail(reader->source, item, scope, key_path,
                                  "write hybrid's degrees, e.g. hybrid:2x4 (U x R = cp)");
    }
    *choice = (cpparity_algorithm_choice){(cpparity_algorithm)index, 0, 0};
    return status;
}

/* Reads `algorithms`: 1 to maximum_count distinct entries into its member and count. */
static cpparity_status read_algorithms(case_reader *reader, const yaml_node_t *node,
                                       const char *scope, const case_key *key,
                                       cpparity_case *values) {
    int64_t count = 0;
    cpparity_status status = read_entries(reader, node, scope, key, &count);
    if (status == CPPARITY_OK && count > key->maximum_count) {
        return yaml_source_fail(reader->source,
                                yaml_source_item(reader->source, node, key->maximum_count), scope,
                                key->name, "at most %d %s", key->maximum_count, key->entries);
    }
    cpparity_algorithm_choice *choices = member_of(values, key);
    for (int i = 0; status == CPPARITY_OK && i < (int)count; i++) {
        const yaml_node_t *item = yaml_source_item(reader->source, node, i);
        char key_path[KEY_PATH_CAPACITY];
        yaml_source_format(key_path, sizeof key_path, "%s[%d]", key->name, i);
        status = read_algorithm(reader, item, scope, key_path, &choices[i]);
        for (int earlier = 0; status == CPPARITY_OK && earlier < i; earlier++) {
            if (memcmp(&choices[earlier], &choices[i], sizeof choices[i]) == 0) {
                char name[48];
                cpparity_algorithm_choice_name(choices[i], name, sizeof name);
                return yaml_source_fail(reader->source, item, scope, key_path,
                                        "duplicate algorithm '%s'", name);
            }
        }
    }
    const int entries = (int)count;
    if (status == CPPARITY_OK) {
        memcpy(count_of(values, key), &entries, sizeof entries);
    }
    return status;
}

/* Reads a row's list of integers (>= minimum, <= maximum when set) into its int64_t * member. A
 * list with a count member of its own sets it and counts against the row budget; one without
 * has one entry per document. key_path names the list. */
static cpparity_status read_row_list(case_reader *reader, const yaml_node_t *node,
                                     const char *scope, const char *key_path, const case_key *key,
                                     cpparity_row_layout *row) {
    cpparity_status status =
        yaml_source_check_sequence(reader->source, node, scope, key_path, key->entries, false);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t count = yaml_source_length(node);
    if (key->count_size == 0 && count != row->document_count) {
        return yaml_source_fail(reader->source, node, scope, key_path,
                                "%lld %s for %lld documents (one per document)", (long long)count,
                                key->entries, (long long)row->document_count);
    }
    if (count == 0) {
        return CPPARITY_OK;
    }
    if (key->count_size != 0 && !case_reader_take_rows(reader, count)) {
        return over_row_budget(reader, node, scope, key_path);
    }
    int64_t *entries = calloc((size_t)count, sizeof *entries);
    if (entries == NULL) {
        return yaml_source_out_of_memory(reader->source);
    }
    memcpy(member_of(row, key), &entries, sizeof entries);
    if (key->count_size != 0) {
        memcpy(count_of(row, key), &count, sizeof count);
    }
    for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
        char item_path[KEY_PATH_CAPACITY];
        yaml_source_format(item_path, sizeof item_path, "%s[%lld]", key_path, (long long)i);
        const yaml_node_t *item = yaml_source_item(reader->source, node, i);
        status = yaml_source_read_integer(reader->source, item, scope, item_path, key->minimum,
                                          &entries[i]);
        if (status == CPPARITY_OK && key->maximum > 0 && entries[i] > key->maximum) {
            status = yaml_source_fail(reader->source, item, scope, item_path,
                                      "must be <= %lld, got %lld", (long long)key->maximum,
                                      (long long)entries[i]);
        }
    }
    return status;
}

/* Reads one row mapping (case_row_keys) into row: its scalar keys first, then its lists, each
 * in table order (a list may depend on the lists before it). */
static cpparity_status read_row(case_reader *reader, const yaml_node_t *node, const char *scope,
                                const char *key_path, cpparity_row_layout *row) {
    const char *names[CASE_ROW_KEY_COUNT];
    const int name_count = case_key_names(case_row_keys, CASE_ROW_KEY_COUNT, true, names);
    cpparity_status status =
        yaml_source_check_mapping(reader->source, node, scope, key_path, names, (size_t)name_count);
    for (int lists = 0; lists < 2; lists++) {
        for (int k = 0; status == CPPARITY_OK && k < CASE_ROW_KEY_COUNT; k++) {
            const case_key *key = &case_row_keys[k];
            const yaml_node_t *value = yaml_source_value(reader->source, node, key->name, NULL);
            if (value == NULL || (key->type == CASE_VALUE_INTEGER_LIST) != (lists == 1)) {
                continue;
            }
            char item_path[KEY_PATH_CAPACITY];
            yaml_source_format(item_path, sizeof item_path, "%s.%s", key_path, key->name);
            status = lists == 1 ? read_row_list(reader, value, scope, item_path, key, row)
                                : read_scalar(reader, value, scope, item_path, key, row);
        }
    }
    return status;
}

/* Reads `rows`: a non-empty sequence of row mappings, owned by values afterwards. */
static cpparity_status read_rows(case_reader *reader, const yaml_node_t *node, const char *scope,
                                 const case_key *key, cpparity_case *values) {
    int64_t count = 0;
    cpparity_status status = read_entries(reader, node, scope, key, &count);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (!case_reader_take_rows(reader, count)) {
        return over_row_budget(reader, node, scope, key->name);
    }
    values->rows = calloc((size_t)count, sizeof *values->rows);
    if (values->rows == NULL) {
        return yaml_source_out_of_memory(reader->source);
    }
    values->batch_size = count;
    for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
        char key_path[KEY_PATH_CAPACITY];
        yaml_source_format(key_path, sizeof key_path, "%s[%lld]", key->name, (long long)i);
        status = read_row(reader, yaml_source_item(reader->source, node, i), scope, key_path,
                          &values->rows[i]);
    }
    return status;
}

/* Reads one model field's value into settings, as the field's type says. */
static cpparity_status read_model_value(case_reader *reader, const yaml_node_t *value,
                                        const char *scope, const cpparity_model_field *field,
                                        model_settings *settings) {
    char key_path[KEY_PATH_CAPACITY];
    yaml_source_format(key_path, sizeof key_path, "model.%s", field->name);
    void *member = cpparity_model_field_address(&settings->config, field);
    const yaml_source *source = reader->source;
    switch (field->type) {
    case CPPARITY_FIELD_SIZE:
        return yaml_source_read_integer(source, value, scope, key_path, 1, member);
    case CPPARITY_FIELD_POSITIVE:
        return yaml_source_read_number(source, value, scope, key_path, 0.0, false, member);
    case CPPARITY_FIELD_BOOLEAN:
        return yaml_source_read_boolean(source, value, scope, key_path, member);
    case CPPARITY_FIELD_LAYER_TYPES: {
        cpparity_status status =
            yaml_source_check_sequence(source, value, scope, key_path, "layer types", false);
        const int64_t count = status == CPPARITY_OK ? yaml_source_length(value) : 0;
        if (count > CPPARITY_MAX_LAYERS) {
            return yaml_source_fail(source,
                                    yaml_source_item(reader->source, value, CPPARITY_MAX_LAYERS),
                                    scope, key_path, "at most %d layers", CPPARITY_MAX_LAYERS);
        }
        for (int64_t l = 0; status == CPPARITY_OK && l < count; l++) {
            char item_path[KEY_PATH_CAPACITY];
            yaml_source_format(item_path, sizeof item_path, "%s[%lld]", key_path, (long long)l);
            int type = 0;
            status = yaml_source_read_name(source, yaml_source_item(reader->source, value, l),
                                           scope, item_path, cpparity_layer_type_names,
                                           CPPARITY_LAYER_TYPE_COUNT, "layer type", &type);
            settings->config.layer_types[l] = (cpparity_layer_type)type;
        }
        settings->layer_count = count;
        return status;
    }
    case CPPARITY_FIELD_CHUNK_ORIGIN: {
        int origin = 0;
        cpparity_status status =
            yaml_source_read_name(source, value, scope, key_path, cpparity_chunk_origin_names,
                                  CPPARITY_CHUNK_ORIGIN_COUNT, NULL, &origin);
        *(cpparity_chunk_origin *)member = (cpparity_chunk_origin)origin;
        return status;
    }
    }
    return CPPARITY_OK;
}

/* Reads a `model` mapping: known keys (the fields of cpparity_model_fields), each value checked
 * on its own. */
static cpparity_status read_model(case_reader *reader, const yaml_node_t *node, const char *scope,
                                  model_settings *settings) {
    const char *names[CPPARITY_MODEL_FIELD_COUNT];
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        names[i] = cpparity_model_fields[i].name;
    }
    cpparity_status status = yaml_source_check_mapping(reader->source, node, scope, "model", names,
                                                       CPPARITY_MODEL_FIELD_COUNT);
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_source_node(reader->source, pair->key);
        const int field =
            cpparity_name_index(names, CPPARITY_MODEL_FIELD_COUNT, yaml_source_text(key));
        const yaml_node_t *value = yaml_source_node(reader->source, pair->value);
        settings->values[field] = value;
        status = read_model_value(reader, value, scope, &cpparity_model_fields[field], settings);
    }
    return status;
}

/* Reads tolerances.DTYPE.KIND: field -> number (case_tolerance_fields). */
static cpparity_status read_tolerance_fields(case_reader *reader, const yaml_node_t *node,
                                             const char *scope, const char *key_path, int dtype,
                                             int kind, tolerance_settings *settings) {
    const char *names[CASE_TOLERANCE_FIELD_COUNT];
    for (int i = 0; i < CASE_TOLERANCE_FIELD_COUNT; i++) {
        names[i] = case_tolerance_fields[i].name;
    }
    cpparity_status status = yaml_source_check_mapping(reader->source, node, scope, key_path, names,
                                                       CASE_TOLERANCE_FIELD_COUNT);
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_source_node(reader->source, pair->key);
        const int field =
            cpparity_name_index(names, CASE_TOLERANCE_FIELD_COUNT, yaml_source_text(key));
        const case_tolerance_field *described = &case_tolerance_fields[field];
        const yaml_node_t *value = yaml_source_node(reader->source, pair->value);
        char field_path[KEY_PATH_CAPACITY];
        yaml_source_format(field_path, sizeof field_path, "%s.%s", key_path, described->name);
        status =
            yaml_source_read_number(reader->source, value, scope, field_path, described->minimum,
                                    described->inclusive, &settings->values[dtype][kind][field]);
        settings->nodes[dtype][kind][field] = value;
    }
    return status;
}

/* Reads `tolerances`: dtype -> kind -> field -> number. */
static cpparity_status read_tolerances(case_reader *reader, const yaml_node_t *node,
                                       const char *scope, tolerance_settings *settings) {
    cpparity_status status = yaml_source_check_mapping(reader->source, node, scope, "tolerances",
                                                       cpparity_dtype_names, CPPARITY_DTYPE_COUNT);
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const int dtype =
            cpparity_name_index(cpparity_dtype_names, CPPARITY_DTYPE_COUNT,
                                yaml_source_text(yaml_source_node(reader->source, pair->key)));
        const yaml_node_t *kinds = yaml_source_node(reader->source, pair->value);
        char key_path[KEY_PATH_CAPACITY];
        yaml_source_format(key_path, sizeof key_path, "tolerances.%s", cpparity_dtype_names[dtype]);
        status = yaml_source_check_mapping(reader->source, kinds, scope, key_path,
                                           cpparity_tensor_kind_names, CPPARITY_KIND_COUNT);
        for (const yaml_node_pair_t *kind_pair = kinds->data.mapping.pairs.start;
             status == CPPARITY_OK && kind_pair < kinds->data.mapping.pairs.top; kind_pair++) {
            const int kind = cpparity_name_index(
                cpparity_tensor_kind_names, CPPARITY_KIND_COUNT,
                yaml_source_text(yaml_source_node(reader->source, kind_pair->key)));
            char kind_path[KEY_PATH_CAPACITY];
            yaml_source_format(kind_path, sizeof kind_path, "%s.%s", key_path,
                               cpparity_tensor_kind_names[kind]);
            status =
                read_tolerance_fields(reader, yaml_source_node(reader->source, kind_pair->value),
                                      scope, kind_path, dtype, kind, settings);
        }
    }
    return status;
}

/* Reads the `expect` mapping of a case: {refuse: TEXT}, TEXT not empty. */
static cpparity_status read_expect(case_reader *reader, const yaml_node_t *node, const char *scope,
                                   cpparity_case *values) {
    cpparity_status status = yaml_source_check_mapping(reader->source, node, scope, "expect",
                                                       case_expect_keys, CASE_EXPECT_KEY_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    const yaml_node_t *refuse = yaml_source_value(reader->source, node, "refuse", NULL);
    if (refuse == NULL) {
        return yaml_source_fail(reader->source, node, scope, "expect.refuse",
                                "missing (the text the refusal must contain)");
    }
    status = yaml_source_read_string(reader->source, refuse, scope, "expect.refuse",
                                     values->refusal, sizeof values->refusal);
    if (status == CPPARITY_OK && values->refusal[0] == '\0') {
        return yaml_source_fail(reader->source, refuse, scope, "expect.refuse",
                                "must not be empty");
    }
    values->expect_refuse = status == CPPARITY_OK;
    return status;
}

cpparity_status case_reader_read_key(case_reader *reader, const yaml_node_t *value,
                                     const char *scope, case_key_index index,
                                     case_settings *settings) {
    const case_key *key = &case_keys[index];
    settings->nodes[index] = value;
    switch (key->type) {
    case CASE_VALUE_INTEGER_SET:
    case CASE_VALUE_ENUM_SET:
        return read_set(reader, value, scope, key, &settings->values);
    case CASE_VALUE_ALGORITHMS:
        return read_algorithms(reader, value, scope, key, &settings->values);
    case CASE_VALUE_ROWS:
        return read_rows(reader, value, scope, key, &settings->values);
    case CASE_VALUE_MODEL:
        return read_model(reader, value, scope, &settings->model);
    case CASE_VALUE_TOLERANCES:
        return read_tolerances(reader, value, scope, &settings->tolerances);
    case CASE_VALUE_EXPECT:
        return read_expect(reader, value, scope, &settings->values);
    case CASE_VALUE_SWEEP:
        return CPPARITY_OK; /* read as a whole by case_sweep_read, which makes the family */
    default:
        return read_scalar(reader, value, scope, key->name, key, &settings->values);
    }
}

cpparity_status case_reader_read_shared(case_reader *reader, const yaml_node_t *mapping,
                                        const char *scope, case_settings *settings) {
    cpparity_status status = CPPARITY_OK;
    for (const yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < mapping->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_source_node(reader->source, pair->key);
        const case_key *described = case_key_find(yaml_source_text(key));
        if (described == NULL || described->case_only) {
            continue;
        }
        if (described->type == CASE_VALUE_MODEL) {
            settings->model_key = key;
        }
        status = case_reader_read_key(reader, yaml_source_node(reader->source, pair->value), scope,
                                      (case_key_index)(described - case_keys), settings);
    }
    return status;
}

void case_settings_free(case_settings *settings) {
    cpparity_row_layouts_free(settings->values.rows, settings->values.batch_size);
    settings->values.rows = NULL;
    settings->values.batch_size = 0;
}
