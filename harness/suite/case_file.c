/*
 * case_file.c — reads a YAML suite file (schema: cases/README.md) into a cpparity_suite with
 * libyaml's document API. It checks every key, type and value, merges the suite's defaults into
 * each case, resolves tolerances with the origin of every field and validates the model
 * configuration. Every error is bad input whose message starts with "PATH:LINE:COLUMN: " (1-based,
 * the offending node) followed by the case and the key path.
 */
#include "harness/suite/case_file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "common/names.h"
#include "harness/judging/tolerance.h"
#include "harness/suite/yaml_limits.h"

#define SCOPE_CAPACITY 160   /* "case 'NAME'" */
#define KEY_PATH_CAPACITY 96 /* "rows[12].documents[3]" */
#define FOUND_CAPACITY 96    /* what a node holds, for messages */

typedef struct suite_loader {
    const char *path;         /* display path used in messages */
    yaml_document_t document; /* the parsed file */
    cpparity_error *error;    /* where failures are recorded */
    int64_t *name_slots;      /* open-addressing set of case indices by name (−1: empty), so
                                 duplicate names are found in O(1) each, not O(cases) */
    int64_t name_capacity;    /* slots, a power of two at least twice the cases */
    int64_t row_entries;      /* rows and document lengths the suite holds so far, a copy of the
                                 defaults' rows counted for every case given it */
} suite_loader;

/* The most rows and document lengths a loaded suite holds (cases/README.md, Limits): the
 * defaults' rows are copied into every case that uses them, so a few kilobytes of YAML could
 * otherwise ask for gigabytes. */
#define SUITE_MAX_ROW_ENTRIES ((int64_t)16 << 20)

/* Counts entries more rows or document lengths against SUITE_MAX_ROW_ENTRIES. */
static bool within_row_budget(suite_loader *loader, int64_t entries) {
    if (entries > SUITE_MAX_ROW_ENTRIES - loader->row_entries) {
        return false;
    }
    loader->row_entries += entries;
    return true;
}

/* Rows plus document lengths of count rows. */
static int64_t row_entries(const cpparity_row_layout *rows, int64_t count) {
    int64_t entries = count;
    for (int64_t i = 0; i < count; i++) {
        entries += rows[i].document_count;
    }
    return entries;
}

static const char *const top_keys[] = {"defaults", "cases"};
static const char *const defaults_keys[] = {"model",  "seq_len", "rows",       "cp",
                                            "dtypes", "seed",    "tolerances", "level"};
static const char *const case_keys[] = {"name",       "description", "model",  "seq_len",
                                        "rows",       "cp",          "dtypes", "seed",
                                        "tolerances", "expect",      "level"};
static const char *const row_keys[] = {"left_padding", "documents", "right_padding",
                                       "padding_positions", "start_positions"};
static const char *const expect_keys[] = {"refuse"};
#define TOLERANCE_FIELD_COUNT 3
static const char *const tolerance_fields[TOLERANCE_FIELD_COUNT] = {"ratio", "floor", "ceiling"};
#define COUNT_OF(array) (sizeof(array) / sizeof *(array))

/* A model mapping as written: the values that were set and the node each came from. */
typedef struct model_settings {
    cpparity_model_config config;                          /* values of the keys that were set */
    int64_t layer_count;                                   /* entries of layer_types when set */
    const yaml_node_t *values[CPPARITY_MODEL_FIELD_COUNT]; /* each field's value node (index in
                                                               cpparity_model_fields), NULL when
                                                               not set */
} model_settings;

/* Tolerance fields as written: value and node per dtype, kind and field (ratio, floor, ceiling). */
typedef struct tolerance_settings {
    double values[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT][TOLERANCE_FIELD_COUNT];
    const yaml_node_t *nodes[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT][TOLERANCE_FIELD_COUNT];
} tolerance_settings;

/* The keys shared by `defaults` and a case, as written; a NULL node means the key is absent. */
typedef struct case_settings {
    const yaml_node_t *model_key; /* the `model` key node */
    model_settings model;
    const yaml_node_t *seq_len_value;
    int64_t seq_len;
    const yaml_node_t *rows_value;
    cpparity_row_layout *rows; /* owned until moved into a case */
    int64_t row_count;
    const yaml_node_t *cp_value;
    int64_t cp_sizes[CPPARITY_MAX_CP_SIZES];
    int cp_count;
    const yaml_node_t *dtypes_value;
    cpparity_dtype dtypes[CPPARITY_DTYPE_COUNT];
    int dtype_count;
    const yaml_node_t *seed_value;
    uint64_t seed;
    tolerance_settings tolerances;
    const yaml_node_t *level_value;
    cpparity_case_level level;
} case_settings;

/* Writes printf-style text into buffer, truncated when too long (names and paths for messages). */
static void format_text(char *buffer, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void format_text(char *buffer, size_t size, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(buffer, size, format, arguments);
    va_end(arguments);
}

/* Records an input error at mark: "PATH:LINE:COLUMN: SCOPE: KEY_PATH: detail" (empty parts are
 * left out). */
static cpparity_status fail_at_mark(const suite_loader *loader, yaml_mark_t mark, const char *scope,
                                    const char *key_path, const char *format, va_list arguments) {
    char detail[768];
    vsnprintf(detail, sizeof detail, format, arguments);
    return cpparity_error_set(loader->error, CPPARITY_ERROR_INPUT, "%s:%lu:%lu: %s%s%s%s%s",
                              loader->path, (unsigned long)mark.line + 1,
                              (unsigned long)mark.column + 1, scope, scope[0] ? ": " : "", key_path,
                              key_path[0] ? ": " : "", detail);
}

/* Records an input error located at the start of node. */
static cpparity_status fail(const suite_loader *loader, const yaml_node_t *node, const char *scope,
                            const char *key_path, const char *format, ...)
    __attribute__((format(printf, 5, 6)));
static cpparity_status fail(const suite_loader *loader, const yaml_node_t *node, const char *scope,
                            const char *key_path, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    cpparity_status status =
        fail_at_mark(loader, node->start_mark, scope, key_path, format, arguments);
    va_end(arguments);
    return status;
}

/* Records an input error at an explicit position (0-based line and column). */
static cpparity_status fail_at(const suite_loader *loader, size_t line, size_t column,
                               const char *format, ...) __attribute__((format(printf, 4, 5)));
static cpparity_status fail_at(const suite_loader *loader, size_t line, size_t column,
                               const char *format, ...) {
    yaml_mark_t mark = {0, line, column};
    va_list arguments;
    va_start(arguments, format);
    cpparity_status status = fail_at_mark(loader, mark, "", "", format, arguments);
    va_end(arguments);
    return status;
}

/* Records that memory ran out (a runtime failure, not bad input). */
static cpparity_status out_of_memory(const suite_loader *loader) {
    return cpparity_error_set(loader->error, CPPARITY_ERROR_RUNTIME, "%s: out of memory",
                              loader->path);
}

/* The node with this document index (libyaml's 1-based node ids). */
static const yaml_node_t *node_at(suite_loader *loader, int node_id) {
    return yaml_document_get_node(&loader->document, node_id);
}

/* The 1-based line where node starts. */
static unsigned long node_line(const yaml_node_t *node) {
    return (unsigned long)node->start_mark.line + 1;
}

/* The text of a scalar node (libyaml terminates it with a NUL). */
static const char *scalar_text(const yaml_node_t *node) {
    return (const char *)node->data.scalar.value;
}

/* Whether node is an unquoted scalar, the only form numbers and booleans may take. */
static bool is_plain_scalar(const yaml_node_t *node) {
    return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* Number of entries of a sequence node. */
static int64_t sequence_length(const yaml_node_t *node) {
    return node->data.sequence.items.top - node->data.sequence.items.start;
}

/* Entry i of a sequence node. */
static const yaml_node_t *sequence_item(suite_loader *loader, const yaml_node_t *node, int64_t i) {
    return node_at(loader, node->data.sequence.items.start[i]);
}

/* Describes what node holds for "expected X, got Y" messages. */
static void describe_node(const yaml_node_t *node, char *buffer, size_t size) {
    switch (node->type) {
    case YAML_SEQUENCE_NODE:
        snprintf(buffer, size, "a sequence");
        return;
    case YAML_MAPPING_NODE:
        snprintf(buffer, size, "a mapping");
        return;
    case YAML_SCALAR_NODE:
        if (node->data.scalar.length == 0 && is_plain_scalar(node)) {
            snprintf(buffer, size, "an empty value");
        } else if (!is_plain_scalar(node)) {
            snprintf(buffer, size, "the quoted string '%.40s'", scalar_text(node));
        } else {
            snprintf(buffer, size, "'%.40s'", scalar_text(node));
        }
        return;
    case YAML_NO_NODE:
        break;
    }
    snprintf(buffer, size, "nothing");
}

/* Writes "a, b, c" for a list of names into buffer (truncated when it does not fit). */
static void join_names(const char *const *names, size_t count, char *buffer, size_t size) {
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        int written = snprintf(buffer + used, size - used, "%s%s", i > 0 ? ", " : "", names[i]);
        if (written < 0 || (size_t)written >= size - used) {
            return;
        }
        used += (size_t)written;
    }
}

/* The position of text in names, or -1. */
static int name_index(const char *const *names, size_t count, const char *text) {
    return cpparity_name_index(names, (int)count, text);
}

/* Checks that node is a mapping whose keys are scalars taken from known, each at most once.
 * key_path names the mapping in messages. */
static cpparity_status check_mapping(suite_loader *loader, const yaml_node_t *node,
                                     const char *scope, const char *key_path,
                                     const char *const *known, size_t known_count) {
    char found[FOUND_CAPACITY];
    if (node->type != YAML_MAPPING_NODE) {
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, key_path, "expected a mapping, got %s", found);
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        if (key->type != YAML_SCALAR_NODE) {
            describe_node(key, found, sizeof found);
            return fail(loader, key, scope, key_path, "keys must be strings, got %s", found);
        }
        if (name_index(known, known_count, scalar_text(key)) < 0) {
            char expected[256];
            join_names(known, known_count, expected, sizeof expected);
            return fail(loader, key, scope, key_path, "unknown key '%.60s' (expected one of: %s)",
                        scalar_text(key), expected);
        }
        for (const yaml_node_pair_t *earlier = node->data.mapping.pairs.start; earlier < pair;
             earlier++) {
            const yaml_node_t *earlier_key = node_at(loader, earlier->key);
            if (strcmp(scalar_text(earlier_key), scalar_text(key)) == 0) {
                return fail(loader, key, scope, key_path, "duplicate key '%s' (first at line %lu)",
                            scalar_text(key), node_line(earlier_key));
            }
        }
    }
    return CPPARITY_OK;
}

/* The value of key in a checked mapping, or NULL; *key_node (when not NULL) receives the key. */
static const yaml_node_t *mapping_value(suite_loader *loader, const yaml_node_t *node,
                                        const char *key, const yaml_node_t **key_node) {
    if (node->type != YAML_MAPPING_NODE) {
        return NULL;
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *candidate = node_at(loader, pair->key);
        if (candidate->type == YAML_SCALAR_NODE && strcmp(scalar_text(candidate), key) == 0) {
            if (key_node != NULL) {
                *key_node = candidate;
            }
            return node_at(loader, pair->value);
        }
    }
    return NULL;
}

/* Parses a plain decimal integer ([-+]?[0-9]+) that fits int64; *overflow tells why it failed. */
static bool parse_integer_text(const char *text, int64_t *value, bool *overflow) {
    const char *digits = text + (text[0] == '-' || text[0] == '+');
    if (digits[0] == '\0') {
        return false;
    }
    for (const char *c = digits; *c != '\0'; c++) {
        if (*c < '0' || *c > '9') {
            return false;
        }
    }
    char *end = NULL;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    if (end == NULL || *end != '\0') {
        return false;
    }
    *value = (int64_t)parsed;
    return true;
}

/* Parses a finite decimal number (3, 0.5, 1e-6, 1.0e-6); *overflow tells why it failed. */
static bool parse_number_text(const char *text, double *value, bool *overflow) {
    bool has_digit = false;
    for (const char *c = text; *c != '\0'; c++) {
        if (*c >= '0' && *c <= '9') {
            has_digit = true;
        } else if (strchr("+-.eE", *c) == NULL) {
            return false; /* keeps out inf, nan and hexadecimal floats, which strtod accepts */
        }
    }
    if (!has_digit) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    double parsed = strtod(text, &end);
    if (end == NULL || *end != '\0') {
        return false;
    }
    if (errno == ERANGE || !isfinite(parsed)) {
        *overflow = true;
        return false;
    }
    *value = parsed;
    return true;
}

/* Reads an integer >= minimum written as a plain YAML integer. */
static cpparity_status read_integer(const suite_loader *loader, const yaml_node_t *node,
                                    const char *scope, const char *key_path, int64_t minimum,
                                    int64_t *value) {
    bool overflow = false;
    int64_t parsed = 0;
    if (!is_plain_scalar(node) || !parse_integer_text(scalar_text(node), &parsed, &overflow)) {
        if (overflow) {
            return fail(loader, node, scope, key_path, "integer out of range: %.40s",
                        scalar_text(node));
        }
        char found[FOUND_CAPACITY];
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, key_path, "expected an integer, got %s", found);
    }
    if (parsed < minimum) {
        return fail(loader, node, scope, key_path, "must be >= %lld, got %lld", (long long)minimum,
                    (long long)parsed);
    }
    *value = parsed;
    return CPPARITY_OK;
}

/* Reads a finite number written as a plain YAML integer or float; it must be >= minimum when
 * inclusive, > minimum otherwise. */
static cpparity_status read_number(const suite_loader *loader, const yaml_node_t *node,
                                   const char *scope, const char *key_path, double minimum,
                                   bool inclusive, double *value) {
    bool overflow = false;
    double parsed = 0.0;
    if (!is_plain_scalar(node) || !parse_number_text(scalar_text(node), &parsed, &overflow)) {
        if (overflow) {
            return fail(loader, node, scope, key_path, "number out of range: %.40s",
                        scalar_text(node));
        }
        char found[FOUND_CAPACITY];
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, key_path, "expected a number, got %s", found);
    }
    if (inclusive ? !(parsed >= minimum) : !(parsed > minimum)) {
        return fail(loader, node, scope, key_path, "must be %s %g, got %g", inclusive ? ">=" : ">",
                    minimum, parsed);
    }
    *value = parsed;
    return CPPARITY_OK;
}

/* Reads a boolean written as plain true or false. */
static cpparity_status read_boolean(const suite_loader *loader, const yaml_node_t *node,
                                    const char *scope, const char *key_path, bool *value) {
    if (is_plain_scalar(node) && strcmp(scalar_text(node), "true") == 0) {
        *value = true;
        return CPPARITY_OK;
    }
    if (is_plain_scalar(node) && strcmp(scalar_text(node), "false") == 0) {
        *value = false;
        return CPPARITY_OK;
    }
    char found[FOUND_CAPACITY];
    describe_node(node, found, sizeof found);
    return fail(loader, node, scope, key_path, "expected true or false, got %s", found);
}

/* Reads a string (any scalar) shorter than capacity into buffer. */
static cpparity_status read_string(const suite_loader *loader, const yaml_node_t *node,
                                   const char *scope, const char *key_path, char *buffer,
                                   size_t capacity) {
    if (node->type != YAML_SCALAR_NODE) {
        char found[FOUND_CAPACITY];
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, key_path, "expected a string, got %s", found);
    }
    size_t length = node->data.scalar.length;
    if (strlen(scalar_text(node)) != length) {
        return fail(loader, node, scope, key_path, "must not contain a NUL character");
    }
    if (length >= capacity) {
        return fail(loader, node, scope, key_path, "too long (%zu characters, at most %zu)", length,
                    capacity - 1);
    }
    memcpy(buffer, scalar_text(node), length + 1);
    return CPPARITY_OK;
}

/* Checks that node is a sequence; with non_empty, that it has at least one entry. */
static cpparity_status check_sequence(const suite_loader *loader, const yaml_node_t *node,
                                      const char *scope, const char *key_path, const char *entries,
                                      bool non_empty) {
    if (node->type != YAML_SEQUENCE_NODE) {
        char found[FOUND_CAPACITY];
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, key_path, "expected a sequence of %s, got %s", entries,
                    found);
    }
    if (non_empty && sequence_length(node) == 0) {
        return fail(loader, node, scope, key_path, "must list at least one of %s", entries);
    }
    return CPPARITY_OK;
}

/* Copies the value of one model field from source to target (the merge of `model` mappings). */
static void copy_model_field(model_settings *target, const model_settings *source, int field) {
    cpparity_model_field_copy(&target->config, &source->config, &cpparity_model_fields[field]);
    if (cpparity_model_fields[field].type == CPPARITY_FIELD_LAYER_TYPES) {
        target->layer_count = source->layer_count;
    }
    target->values[field] = source->values[field];
}

/* Reads model.layer_types: at most CPPARITY_MAX_LAYERS known layer type names. */
static cpparity_status parse_layer_types(suite_loader *loader, const yaml_node_t *node,
                                         const char *scope, const char *key_path,
                                         model_settings *settings) {
    cpparity_status status = check_sequence(loader, node, scope, key_path, "layer types", false);
    if (status != CPPARITY_OK) {
        return status;
    }
    int64_t count = sequence_length(node);
    if (count > CPPARITY_MAX_LAYERS) {
        return fail(loader, sequence_item(loader, node, CPPARITY_MAX_LAYERS), scope, key_path,
                    "at most %d layers", CPPARITY_MAX_LAYERS);
    }
    char expected[128];
    cpparity_names_join(cpparity_layer_type_names, CPPARITY_LAYER_TYPE_COUNT, ", ", " or ",
                        expected, sizeof expected);
    for (int64_t l = 0; l < count; l++) {
        const yaml_node_t *item = sequence_item(loader, node, l);
        char item_path[KEY_PATH_CAPACITY];
        format_text(item_path, sizeof item_path, "%s[%lld]", key_path, (long long)l);
        if (item->type != YAML_SCALAR_NODE ||
            !cpparity_layer_type_parse(scalar_text(item), &settings->config.layer_types[l])) {
            char found[FOUND_CAPACITY];
            describe_node(item, found, sizeof found);
            return fail(loader, item, scope, item_path, "unknown layer type %s (expected %s)",
                        found, expected);
        }
    }
    settings->layer_count = count;
    return CPPARITY_OK;
}

/* Reads one model field's value into settings, as the field's type says. */
static cpparity_status parse_model_value(suite_loader *loader, const yaml_node_t *value,
                                         const char *scope, const cpparity_model_field *field,
                                         model_settings *settings) {
    char key_path[KEY_PATH_CAPACITY];
    format_text(key_path, sizeof key_path, "model.%s", field->name);
    void *member = cpparity_model_field_address(&settings->config, field);
    switch (field->type) {
    case CPPARITY_FIELD_SIZE:
        return read_integer(loader, value, scope, key_path, 1, member);
    case CPPARITY_FIELD_POSITIVE:
        return read_number(loader, value, scope, key_path, 0.0, false, member);
    case CPPARITY_FIELD_BOOLEAN:
        return read_boolean(loader, value, scope, key_path, member);
    case CPPARITY_FIELD_LAYER_TYPES:
        return parse_layer_types(loader, value, scope, key_path, settings);
    case CPPARITY_FIELD_CHUNK_ORIGIN: {
        const int origin =
            value->type == YAML_SCALAR_NODE
                ? cpparity_name_index(cpparity_chunk_origin_names, CPPARITY_CHUNK_ORIGIN_COUNT,
                                      scalar_text(value))
                : -1;
        if (origin < 0) {
            char found[FOUND_CAPACITY], expected[64];
            describe_node(value, found, sizeof found);
            cpparity_names_join(cpparity_chunk_origin_names, CPPARITY_CHUNK_ORIGIN_COUNT, ", ",
                                " or ", expected, sizeof expected);
            return fail(loader, value, scope, key_path, "expected %s, got %s", expected, found);
        }
        *(cpparity_chunk_origin *)member = (cpparity_chunk_origin)origin;
        return CPPARITY_OK;
    }
    }
    return CPPARITY_OK;
}

/* Reads a `model` mapping: known keys (the fields of cpparity_model_fields), each value checked
 * on its own. */
static cpparity_status parse_model(suite_loader *loader, const yaml_node_t *node, const char *scope,
                                   model_settings *settings) {
    const char *names[CPPARITY_MODEL_FIELD_COUNT];
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        names[i] = cpparity_model_fields[i].name;
    }
    cpparity_status status =
        check_mapping(loader, node, scope, "model", names, CPPARITY_MODEL_FIELD_COUNT);
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        const int field = name_index(names, CPPARITY_MODEL_FIELD_COUNT, scalar_text(key));
        if (field < 0) { /* check_mapping has refused unknown keys; kept for safety */
            return fail(loader, key, scope, "model", "unknown key '%.60s'", scalar_text(key));
        }
        const yaml_node_t *value = node_at(loader, pair->value);
        settings->values[field] = value;
        status = parse_model_value(loader, value, scope, &cpparity_model_fields[field], settings);
    }
    return status;
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

/* Reads a row's start_positions: one integer in [0, CPPARITY_MAX_START_POSITION] per document. */
static cpparity_status parse_start_positions(suite_loader *loader, const yaml_node_t *value,
                                             const char *scope, const char *key_path,
                                             cpparity_row_layout *row) {
    char item_path[KEY_PATH_CAPACITY];
    format_text(item_path, sizeof item_path, "%s.start_positions", key_path);
    cpparity_status status =
        check_sequence(loader, value, scope, item_path, "start positions", false);
    const int64_t count = status == CPPARITY_OK ? sequence_length(value) : 0;
    if (status == CPPARITY_OK && count != row->document_count) {
        return fail(loader, value, scope, item_path,
                    "%lld start positions for %lld documents (one per document)", (long long)count,
                    (long long)row->document_count);
    }
    if (status != CPPARITY_OK || count == 0) {
        return status;
    }
    row->start_positions = calloc((size_t)count, sizeof *row->start_positions);
    if (row->start_positions == NULL) {
        return out_of_memory(loader);
    }
    for (int64_t d = 0; status == CPPARITY_OK && d < count; d++) {
        format_text(item_path, sizeof item_path, "%s.start_positions[%lld]", key_path,
                    (long long)d);
        const yaml_node_t *item = sequence_item(loader, value, d);
        status = read_integer(loader, item, scope, item_path, 0, &row->start_positions[d]);
        if (status == CPPARITY_OK && row->start_positions[d] > CPPARITY_MAX_START_POSITION) {
            status =
                fail(loader, item, scope, item_path, "must be <= %lld, got %lld",
                     (long long)CPPARITY_MAX_START_POSITION, (long long)row->start_positions[d]);
        }
    }
    return status;
}

/* Reads one row mapping (left_padding, documents, right_padding, padding_positions,
 * start_positions) into row. */
static cpparity_status parse_row(suite_loader *loader, const yaml_node_t *node, const char *scope,
                                 const char *key_path, cpparity_row_layout *row) {
    char item_path[KEY_PATH_CAPACITY];
    cpparity_status status =
        check_mapping(loader, node, scope, key_path, row_keys, COUNT_OF(row_keys));
    if (status != CPPARITY_OK) {
        return status;
    }
    const yaml_node_t *value = mapping_value(loader, node, "left_padding", NULL);
    if (value != NULL) {
        format_text(item_path, sizeof item_path, "%s.left_padding", key_path);
        status = read_integer(loader, value, scope, item_path, 0, &row->left_padding);
    }
    value = mapping_value(loader, node, "right_padding", NULL);
    if (status == CPPARITY_OK && value != NULL) {
        format_text(item_path, sizeof item_path, "%s.right_padding", key_path);
        status = read_integer(loader, value, scope, item_path, 0, &row->right_padding);
    }
    value = mapping_value(loader, node, "padding_positions", NULL);
    if (status == CPPARITY_OK && value != NULL) {
        format_text(item_path, sizeof item_path, "%s.padding_positions", key_path);
        if (value->type == YAML_SCALAR_NODE && strcmp(scalar_text(value), "zero") == 0) {
            row->padding_continues = false;
        } else if (value->type == YAML_SCALAR_NODE && strcmp(scalar_text(value), "continue") == 0) {
            row->padding_continues = true;
        } else {
            char found[FOUND_CAPACITY];
            describe_node(value, found, sizeof found);
            return fail(loader, value, scope, item_path, "expected zero or continue, got %s",
                        found);
        }
    }
    value = mapping_value(loader, node, "documents", NULL);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (value != NULL) {
        format_text(item_path, sizeof item_path, "%s.documents", key_path);
        status = check_sequence(loader, value, scope, item_path, "document lengths", false);
    }
    int64_t count = status == CPPARITY_OK && value != NULL ? sequence_length(value) : 0;
    if (count > 0 && !within_row_budget(loader, count)) {
        return fail(loader, value, scope, item_path,
                    "the suite holds more than %lld rows and document lengths (cases/README.md, "
                    "Limits)",
                    (long long)SUITE_MAX_ROW_ENTRIES);
    }
    if (count > 0) {
        row->document_lengths = calloc((size_t)count, sizeof *row->document_lengths);
        if (row->document_lengths == NULL) {
            return out_of_memory(loader);
        }
        row->document_count = count;
    }
    for (int64_t d = 0; status == CPPARITY_OK && d < count; d++) {
        format_text(item_path, sizeof item_path, "%s.documents[%lld]", key_path, (long long)d);
        status = read_integer(loader, sequence_item(loader, value, d), scope, item_path, 1,
                              &row->document_lengths[d]);
    }
    value = mapping_value(loader, node, "start_positions", NULL);
    if (status == CPPARITY_OK && value != NULL) {
        status = parse_start_positions(loader, value, scope, key_path, row);
    }
    return status;
}

/* Reads `rows`: a non-empty sequence of row mappings, owned by settings afterwards. */
static cpparity_status parse_rows(suite_loader *loader, const yaml_node_t *node, const char *scope,
                                  case_settings *settings) {
    cpparity_status status = check_sequence(loader, node, scope, "rows", "rows", true);
    if (status != CPPARITY_OK) {
        return status;
    }
    int64_t count = sequence_length(node);
    if (!within_row_budget(loader, count)) {
        return fail(loader, node, scope, "rows",
                    "the suite holds more than %lld rows and document lengths (cases/README.md, "
                    "Limits)",
                    (long long)SUITE_MAX_ROW_ENTRIES);
    }
    settings->rows = calloc((size_t)count, sizeof *settings->rows);
    if (settings->rows == NULL) {
        return out_of_memory(loader);
    }
    settings->row_count = count;
    for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
        char key_path[KEY_PATH_CAPACITY];
        format_text(key_path, sizeof key_path, "rows[%lld]", (long long)i);
        status =
            parse_row(loader, sequence_item(loader, node, i), scope, key_path, &settings->rows[i]);
    }
    return status;
}

/* Reads `cp`: 1 to CPPARITY_MAX_CP_SIZES distinct integers >= 1. */
static cpparity_status parse_cp(suite_loader *loader, const yaml_node_t *node, const char *scope,
                                case_settings *settings) {
    cpparity_status status = check_sequence(loader, node, scope, "cp", "cp sizes", true);
    if (status != CPPARITY_OK) {
        return status;
    }
    int64_t count = sequence_length(node);
    if (count > CPPARITY_MAX_CP_SIZES) {
        return fail(loader, sequence_item(loader, node, CPPARITY_MAX_CP_SIZES), scope, "cp",
                    "at most %d cp sizes", CPPARITY_MAX_CP_SIZES);
    }
    for (int i = 0; i < (int)count; i++) {
        const yaml_node_t *item = sequence_item(loader, node, i);
        char key_path[KEY_PATH_CAPACITY];
        format_text(key_path, sizeof key_path, "cp[%d]", i);
        status = read_integer(loader, item, scope, key_path, 1, &settings->cp_sizes[i]);
        if (status != CPPARITY_OK) {
            return status;
        }
        for (int earlier = 0; earlier < i; earlier++) {
            if (settings->cp_sizes[earlier] == settings->cp_sizes[i]) {
                return fail(loader, item, scope, key_path, "duplicate cp size %lld (also cp[%d])",
                            (long long)settings->cp_sizes[i], earlier);
            }
        }
    }
    settings->cp_count = (int)count;
    return CPPARITY_OK;
}

/* Reads `dtypes`: a non-empty list of distinct dtype names. */
static cpparity_status parse_dtypes(suite_loader *loader, const yaml_node_t *node,
                                    const char *scope, case_settings *settings) {
    cpparity_status status = check_sequence(loader, node, scope, "dtypes", "dtypes", true);
    int count = 0;
    for (int64_t i = 0; status == CPPARITY_OK && i < sequence_length(node); i++) {
        const yaml_node_t *item = sequence_item(loader, node, i);
        char key_path[KEY_PATH_CAPACITY];
        format_text(key_path, sizeof key_path, "dtypes[%lld]", (long long)i);
        int dtype = item->type == YAML_SCALAR_NODE
                        ? name_index(cpparity_dtype_names, CPPARITY_DTYPE_COUNT, scalar_text(item))
                        : -1;
        if (dtype < 0) {
            char found[FOUND_CAPACITY];
            describe_node(item, found, sizeof found);
            return fail(loader, item, scope, key_path, "unknown dtype %s (expected f32 or bf16)",
                        found);
        }
        for (int earlier = 0; earlier < count; earlier++) {
            if (settings->dtypes[earlier] == (cpparity_dtype)dtype) {
                return fail(loader, item, scope, key_path, "duplicate dtype '%s'",
                            cpparity_dtype_names[dtype]);
            }
        }
        settings->dtypes[count++] = (cpparity_dtype)dtype;
    }
    settings->dtype_count = count;
    return status;
}

/* Reads tolerances.DTYPE.KIND: field -> number (> 0; ratio >= 1). */
static cpparity_status parse_tolerance_fields(suite_loader *loader, const yaml_node_t *node,
                                              const char *scope, const char *key_path, int dtype,
                                              int kind, tolerance_settings *settings) {
    cpparity_status status =
        check_mapping(loader, node, scope, key_path, tolerance_fields, TOLERANCE_FIELD_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        int field = name_index(tolerance_fields, TOLERANCE_FIELD_COUNT, scalar_text(key));
        if (field < 0) { /* check_mapping has refused unknown keys; kept for safety */
            return fail(loader, key, scope, key_path, "unknown key '%.60s'", scalar_text(key));
        }
        const yaml_node_t *value = node_at(loader, pair->value);
        char field_path[KEY_PATH_CAPACITY];
        format_text(field_path, sizeof field_path, "%s.%s", key_path, tolerance_fields[field]);
        bool is_ratio = field == 0;
        status = read_number(loader, value, scope, field_path, is_ratio ? 1.0 : 0.0, is_ratio,
                             &settings->values[dtype][kind][field]);
        settings->nodes[dtype][kind][field] = value;
    }
    return status;
}

/* Reads tolerances.DTYPE: kind -> fields. */
static cpparity_status parse_tolerance_kinds(suite_loader *loader, const yaml_node_t *node,
                                             const char *scope, int dtype,
                                             tolerance_settings *settings) {
    char key_path[KEY_PATH_CAPACITY];
    format_text(key_path, sizeof key_path, "tolerances.%s", cpparity_dtype_names[dtype]);
    cpparity_status status = check_mapping(loader, node, scope, key_path,
                                           cpparity_tensor_kind_names, CPPARITY_KIND_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        int kind = name_index(cpparity_tensor_kind_names, CPPARITY_KIND_COUNT, scalar_text(key));
        if (kind < 0) { /* check_mapping has refused unknown keys; kept for safety */
            return fail(loader, key, scope, key_path, "unknown key '%.60s'", scalar_text(key));
        }
        char kind_path[KEY_PATH_CAPACITY];
        format_text(kind_path, sizeof kind_path, "%s.%s", key_path,
                    cpparity_tensor_kind_names[kind]);
        status = parse_tolerance_fields(loader, node_at(loader, pair->value), scope, kind_path,
                                        dtype, kind, settings);
    }
    return status;
}

/* Reads `tolerances`: dtype -> kind -> field -> number. */
static cpparity_status parse_tolerances(suite_loader *loader, const yaml_node_t *node,
                                        const char *scope, tolerance_settings *settings) {
    cpparity_status status = check_mapping(loader, node, scope, "tolerances", cpparity_dtype_names,
                                           CPPARITY_DTYPE_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        int dtype = name_index(cpparity_dtype_names, CPPARITY_DTYPE_COUNT, scalar_text(key));
        if (dtype < 0) { /* check_mapping has refused unknown keys; kept for safety */
            return fail(loader, key, scope, "tolerances", "unknown key '%.60s'", scalar_text(key));
        }
        status =
            parse_tolerance_kinds(loader, node_at(loader, pair->value), scope, dtype, settings);
    }
    return status;
}

/* Reads the keys `defaults` and a case share (model, seq_len, rows, cp, dtypes, seed,
 * tolerances) from a checked mapping; other keys are left to the caller. */
static cpparity_status parse_settings(suite_loader *loader, const yaml_node_t *node,
                                      const char *scope, case_settings *settings) {
    cpparity_status status = CPPARITY_OK;
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         status == CPPARITY_OK && pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = node_at(loader, pair->key);
        const yaml_node_t *value = node_at(loader, pair->value);
        const char *name = scalar_text(key);
        if (strcmp(name, "model") == 0) {
            settings->model_key = key;
            status = parse_model(loader, value, scope, &settings->model);
        } else if (strcmp(name, "seq_len") == 0) {
            settings->seq_len_value = value;
            status = read_integer(loader, value, scope, "seq_len", 1, &settings->seq_len);
        } else if (strcmp(name, "rows") == 0) {
            settings->rows_value = value;
            status = parse_rows(loader, value, scope, settings);
        } else if (strcmp(name, "cp") == 0) {
            settings->cp_value = value;
            status = parse_cp(loader, value, scope, settings);
        } else if (strcmp(name, "dtypes") == 0) {
            settings->dtypes_value = value;
            status = parse_dtypes(loader, value, scope, settings);
        } else if (strcmp(name, "seed") == 0) {
            int64_t seed = 0;
            settings->seed_value = value;
            status = read_integer(loader, value, scope, "seed", 0, &seed);
            settings->seed = (uint64_t)seed;
        } else if (strcmp(name, "tolerances") == 0) {
            status = parse_tolerances(loader, value, scope, &settings->tolerances);
        } else if (strcmp(name, "level") == 0) {
            settings->level_value = value;
            bool known = false;
            for (int l = 0; l < CPPARITY_LEVEL_COUNT && value->type == YAML_SCALAR_NODE; l++) {
                if (strcmp(scalar_text(value), cpparity_case_level_names[l]) == 0) {
                    settings->level = (cpparity_case_level)l;
                    known = true;
                }
            }
            if (!known) {
                char found[FOUND_CAPACITY];
                describe_node(value, found, sizeof found);
                status = fail(loader, value, scope, "level", "expected model or attention, got %s",
                              found);
            }
        }
    }
    return status;
}

/* Merges the model of a case over the defaults' model key by key and checks the result:
 * required keys, layer_types against num_hidden_layers, W and C where used, then
 * cpparity_model_config_validate. anchor locates errors that no single case node explains. */
static cpparity_status resolve_model(suite_loader *loader, const char *scope,
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
            return fail(loader, anchor, scope, "",
                        "model.%s: missing (set it in the case's model or in defaults.model)",
                        described->name);
        }
    }
    if (layer_types_field >= 0 && merged.values[layer_types_field] != NULL &&
        merged.layer_count != resolved.num_hidden_layers) {
        const yaml_node_t *where = overrides->values[layer_types_field] != NULL
                                       ? overrides->values[layer_types_field]
                                       : anchor;
        return fail(loader, where, scope, "model.layer_types",
                    "lists %lld layer types, num_hidden_layers is %lld",
                    (long long)merged.layer_count, (long long)resolved.num_hidden_layers);
    }
    for (int field = 0; field < CPPARITY_MODEL_FIELD_COUNT; field++) {
        const cpparity_model_field *described = &cpparity_model_fields[field];
        if (described->required_by_layer < 0 || merged.values[field] != NULL) {
            continue;
        }
        for (int64_t l = 0; l < resolved.num_hidden_layers && l < CPPARITY_MAX_LAYERS; l++) {
            if ((int)resolved.layer_types[l] == described->required_by_layer) {
                char key_path[KEY_PATH_CAPACITY];
                format_text(key_path, sizeof key_path, "model.%s", described->name);
                return fail(loader, anchor, scope, key_path,
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
        return fail(loader, anchor, scope, "model", "%s", invalid.message);
    }
    *config = resolved;
    return CPPARITY_OK;
}

/* Checks that every row adds up to seq_len; rows_value holds the row nodes for locations. */
static cpparity_status check_row_sums(suite_loader *loader, const char *scope,
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
        format_text(key_path, sizeof key_path, "rows[%lld]", (long long)i);
        const yaml_node_t *node = sequence_item(loader, rows_value, i);
        if (overflow) {
            return fail(loader, node, scope, key_path, "adds up to more than %lld tokens",
                        (long long)INT64_MAX);
        }
        int64_t total = row->left_padding + documents + row->right_padding;
        if (total != seq_len) {
            return fail(loader, node, scope, key_path,
                        "adds up to %lld tokens (left_padding %lld + documents %lld + "
                        "right_padding %lld), seq_len is %lld",
                        (long long)total, (long long)row->left_padding, (long long)documents,
                        (long long)row->right_padding, (long long)seq_len);
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

/* Combines a case's settings with the defaults into result and checks what only the combination
 * can show (required keys, rows against seq_len, cp sizes against seq_len, the model). Moves
 * the case's rows into result. */
static cpparity_status resolve_case(suite_loader *loader, const char *scope,
                                    const yaml_node_t *case_node, const yaml_node_t *name_node,
                                    const case_settings *defaults, case_settings *settings,
                                    cpparity_case *result) {
    const case_settings *seq_len_from = settings->seq_len_value ? settings : defaults;
    const case_settings *rows_from = settings->rows_value ? settings : defaults;
    const case_settings *cp_from = settings->cp_value ? settings : defaults;
    const char *missing = seq_len_from->seq_len_value == NULL ? "seq_len"
                          : rows_from->rows_value == NULL     ? "rows"
                          : cp_from->cp_value == NULL         ? "cp"
                                                              : NULL;
    if (missing != NULL) {
        return fail(loader, case_node, scope, missing,
                    "missing (set it in the case or in defaults)");
    }
    result->seq_len = seq_len_from->seq_len;
    if (rows_from != settings &&
        !within_row_budget(loader, row_entries(defaults->rows, defaults->row_count))) {
        return fail(loader, case_node, scope, "rows",
                    "the suite holds more than %lld rows and document lengths once the defaults' "
                    "rows are given to this case (cases/README.md, Limits)",
                    (long long)SUITE_MAX_ROW_ENTRIES);
    }
    cpparity_status status = check_row_sums(loader, scope, rows_from->rows_value, rows_from->rows,
                                            rows_from->row_count, result->seq_len);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (rows_from == settings) {
        result->rows = settings->rows;
        settings->rows = NULL;
    } else if (!copy_rows(defaults->rows, defaults->row_count, &result->rows)) {
        return out_of_memory(loader);
    }
    result->batch_size = rows_from->row_count;
    for (int i = 0; i < cp_from->cp_count; i++) {
        if (cp_from->cp_sizes[i] > result->seq_len) {
            char key_path[KEY_PATH_CAPACITY];
            format_text(key_path, sizeof key_path, "cp[%d]", i);
            return fail(loader, sequence_item(loader, cp_from->cp_value, i), scope, key_path,
                        "cp size %lld exceeds seq_len (%lld)", (long long)cp_from->cp_sizes[i],
                        (long long)result->seq_len);
        }
        result->cp_sizes[i] = cp_from->cp_sizes[i];
    }
    result->cp_count = cp_from->cp_count;
    const case_settings *dtypes_from = settings->dtypes_value ? settings : defaults;
    if (dtypes_from->dtypes_value != NULL) {
        memcpy(result->dtypes, dtypes_from->dtypes, sizeof result->dtypes);
        result->dtype_count = dtypes_from->dtype_count;
    } else {
        result->dtypes[0] = CPPARITY_DTYPE_F32;
        result->dtype_count = 1;
    }
    result->seed = settings->seed_value ? settings->seed : defaults->seed;
    result->level = settings->level_value ? settings->level : defaults->level;
    if (result->level == CPPARITY_LEVEL_ATTENTION &&
        (result->cp_count != 1 || result->cp_sizes[0] != 1)) {
        return fail(loader, cp_from->cp_value != NULL ? cp_from->cp_value : case_node, scope, "cp",
                    "an attention-level case judges one kernel call alone: cp must be [1]");
    }
    if (result->level == CPPARITY_LEVEL_ATTENTION && result->expect_refuse) {
        return fail(loader, case_node, scope, "expect",
                    "an attention-level case has no implementation to refuse it");
    }
    resolve_tolerances(&defaults->tolerances, &settings->tolerances, result);
    const yaml_node_t *anchor = settings->model_key != NULL ? settings->model_key : name_node;
    return resolve_model(loader, scope, anchor, &defaults->model, &settings->model, result->level,
                         &result->model);
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

/* Reads the `expect` mapping of a case. */
static cpparity_status parse_expect(suite_loader *loader, const yaml_node_t *node,
                                    const char *scope, cpparity_case *result) {
    cpparity_status status =
        check_mapping(loader, node, scope, "expect", expect_keys, COUNT_OF(expect_keys));
    if (status != CPPARITY_OK) {
        return status;
    }
    const yaml_node_t *refuse = mapping_value(loader, node, "refuse", NULL);
    if (refuse == NULL) {
        return fail(loader, node, scope, "expect.refuse",
                    "missing (the text the refusal must contain)");
    }
    status = read_string(loader, refuse, scope, "expect.refuse", result->refusal,
                         sizeof result->refusal);
    if (status == CPPARITY_OK && result->refusal[0] == '\0') {
        return fail(loader, refuse, scope, "expect.refuse", "must not be empty");
    }
    result->expect_refuse = status == CPPARITY_OK;
    return status;
}

/* Reads, merges and checks case number position of the suite into suite->cases[position]. */
/* FNV-1a hash of a case name. */
static uint64_t name_hash(const char *name) {
    uint64_t hash = 1469598103934665603ull;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++) {
        hash = (hash ^ *c) * 1099511628211ull;
    }
    return hash;
}

/* The index of the earlier case called name, or −1 after recording position under it. */
static int64_t name_seen_or_add(suite_loader *loader, const cpparity_suite *suite, const char *name,
                                int64_t position) {
    const int64_t mask = loader->name_capacity - 1;
    for (int64_t slot = (int64_t)(name_hash(name) & (uint64_t)mask);; slot = (slot + 1) & mask) {
        const int64_t index = loader->name_slots[slot];
        if (index < 0) {
            loader->name_slots[slot] = position;
            return -1;
        }
        if (strcmp(suite->cases[index].name, name) == 0) {
            return index;
        }
    }
}

static cpparity_status parse_case(suite_loader *loader, const yaml_node_t *node, int64_t position,
                                  const case_settings *defaults, cpparity_suite *suite) {
    cpparity_case *result = &suite->cases[position];
    char scope[SCOPE_CAPACITY];
    format_text(scope, sizeof scope, "cases[%lld]", (long long)position);
    result->line = (int64_t)node_line(node);
    if (node->type != YAML_MAPPING_NODE) {
        char found[FOUND_CAPACITY];
        describe_node(node, found, sizeof found);
        return fail(loader, node, scope, "", "expected a mapping, got %s", found);
    }
    const yaml_node_t *name = mapping_value(loader, node, "name", NULL);
    if (name == NULL) {
        return fail(loader, node, scope, "name", "missing (every case needs a unique name)");
    }
    cpparity_status status =
        read_string(loader, name, scope, "name", result->name, sizeof result->name);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (result->name[0] == '\0' || !is_valid_case_name(result->name)) {
        return fail(loader, name, scope, "name",
                    "'%s' must be non-empty and use only letters, digits, '_', '.' and '-'",
                    result->name);
    }
    format_text(scope, sizeof scope, "case '%s'", result->name);
    const int64_t earlier = name_seen_or_add(loader, suite, result->name, position);
    if (earlier >= 0) {
        return fail(loader, name, scope, "name",
                    "duplicate case name (first used by the case at line %lld)",
                    (long long)suite->cases[earlier].line);
    }
    status = check_mapping(loader, node, scope, "", case_keys, COUNT_OF(case_keys));
    const yaml_node_t *description = mapping_value(loader, node, "description", NULL);
    if (status == CPPARITY_OK && description != NULL) {
        status = read_string(loader, description, scope, "description", result->description,
                             sizeof result->description);
    }
    const yaml_node_t *expect = mapping_value(loader, node, "expect", NULL);
    if (status == CPPARITY_OK && expect != NULL) {
        status = parse_expect(loader, expect, scope, result);
    }
    case_settings settings;
    memset(&settings, 0, sizeof settings);
    if (status == CPPARITY_OK) {
        status = parse_settings(loader, node, scope, &settings);
    }
    if (status == CPPARITY_OK) {
        status = resolve_case(loader, scope, node, name, defaults, &settings, result);
    }
    cpparity_row_layouts_free(settings.rows, settings.row_count);
    return status;
}

/* Reads the whole document: defaults, then every case. */
static cpparity_status load_document(suite_loader *loader, cpparity_suite *suite) {
    const yaml_node_t *root = yaml_document_get_root_node(&loader->document);
    if (root == NULL) {
        return fail_at(loader, 0, 0, "empty file: expected a mapping with 'cases'");
    }
    if (root->type != YAML_MAPPING_NODE) {
        char found[FOUND_CAPACITY];
        describe_node(root, found, sizeof found);
        return fail(loader, root, "", "",
                    "expected a mapping with 'defaults' and 'cases' at the top level, got %s",
                    found);
    }
    cpparity_status status = check_mapping(loader, root, "", "", top_keys, COUNT_OF(top_keys));
    if (status != CPPARITY_OK) {
        return status;
    }
    case_settings defaults;
    memset(&defaults, 0, sizeof defaults);
    const yaml_node_t *defaults_value = mapping_value(loader, root, "defaults", NULL);
    if (defaults_value != NULL) {
        status = check_mapping(loader, defaults_value, "defaults", "", defaults_keys,
                               COUNT_OF(defaults_keys));
        if (status == CPPARITY_OK) {
            status = parse_settings(loader, defaults_value, "defaults", &defaults);
        }
    }
    const yaml_node_t *cases = mapping_value(loader, root, "cases", NULL);
    if (status == CPPARITY_OK && cases == NULL) {
        status = fail(loader, root, "", "cases", "missing (a suite lists at least one case)");
    }
    if (status == CPPARITY_OK) {
        status = check_sequence(loader, cases, "", "cases", "cases", true);
    }
    if (status == CPPARITY_OK) {
        int64_t count = sequence_length(cases);
        loader->name_capacity = 16;
        while (loader->name_capacity < 2 * count) {
            loader->name_capacity *= 2;
        }
        suite->cases = calloc((size_t)count, sizeof *suite->cases);
        loader->name_slots = malloc((size_t)loader->name_capacity * sizeof *loader->name_slots);
        if (suite->cases == NULL || loader->name_slots == NULL) {
            status = out_of_memory(loader);
        } else {
            suite->count = count;
            memset(loader->name_slots, 0xff, (size_t)loader->name_capacity * sizeof(int64_t));
        }
    }
    for (int64_t i = 0; status == CPPARITY_OK && i < suite->count; i++) {
        status = parse_case(loader, sequence_item(loader, cases, i), i, &defaults, suite);
    }
    free(loader->name_slots);
    loader->name_slots = NULL;
    cpparity_row_layouts_free(defaults.rows, defaults.row_count);
    return status;
}

/* Turns a libyaml parser failure into a located error (or a runtime error for no memory). */
static cpparity_status parser_failure(const suite_loader *loader, const yaml_parser_t *parser,
                                      const char *text, size_t length) {
    if (parser->error == YAML_MEMORY_ERROR) {
        return out_of_memory(loader);
    }
    const char *problem = parser->problem != NULL ? parser->problem : "unknown problem";
    if (parser->error == YAML_READER_ERROR) {
        /* reader errors (bad encoding) carry a byte offset instead of a mark */
        size_t line = 0, column = 0;
        for (size_t i = 0; i < parser->problem_offset && i < length; i++) {
            line += text[i] == '\n';
            column = text[i] == '\n' ? 0 : column + 1;
        }
        return fail_at(loader, line, column, "YAML syntax error: %s", problem);
    }
    if (parser->context != NULL) {
        return fail_at(loader, parser->problem_mark.line, parser->problem_mark.column,
                       "YAML syntax error: %s (%s at line %lu, column %lu)", problem,
                       parser->context, (unsigned long)parser->context_mark.line + 1,
                       (unsigned long)parser->context_mark.column + 1);
    }
    return fail_at(loader, parser->problem_mark.line, parser->problem_mark.column,
                   "YAML syntax error: %s", problem);
}

/* Checks that the stream holds no second document after the one already loaded. */
static cpparity_status check_single_document(const suite_loader *loader, yaml_parser_t *parser,
                                             const char *text, size_t length) {
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next)) {
        return parser_failure(loader, parser, text, length);
    }
    const yaml_node_t *root = yaml_document_get_root_node(&next);
    cpparity_status status = CPPARITY_OK;
    if (root != NULL) {
        status = fail_at(loader, root->start_mark.line, root->start_mark.column,
                         "a suite file holds one YAML document, found a second one");
    }
    yaml_document_delete(&next);
    return status;
}

cpparity_status cpparity_suite_load_text(const char *text, size_t length, const char *display_path,
                                         cpparity_suite *suite, cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    cpparity_error_clear(error);
    suite_loader loader;
    memset(&loader, 0, sizeof loader);
    loader.path = display_path != NULL ? display_path : "<text>";
    loader.error = error;
    if (text == NULL) {
        if (length > 0) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: no text", loader.path);
        }
        text = "";
    }
    if (length > YAML_LIMIT_BYTES) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: %zu bytes, over the %zu-byte (256 MiB) limit of a suite "
                                  "file (cases/README.md, Limits)",
                                  loader.path, length, YAML_LIMIT_BYTES);
    }
    yaml_limit_violation violation;
    yaml_limit_result limits = yaml_limits_check_depth(text, length, &violation);
    if (limits == YAML_LIMIT_NO_MEMORY) {
        return out_of_memory(&loader);
    }
    if (limits == YAML_LIMIT_EXCEEDED) {
        return fail_at(&loader, violation.line, violation.column, "%s", violation.message);
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        return out_of_memory(&loader);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
    cpparity_status status = CPPARITY_OK;
    if (!yaml_parser_load(&parser, &loader.document)) {
        status = parser_failure(&loader, &parser, text, length);
    } else {
        status = check_single_document(&loader, &parser, text, length);
        if (status == CPPARITY_OK) {
            limits = yaml_limits_check_aliases(&loader.document, &violation);
            status =
                limits == YAML_LIMIT_NO_MEMORY ? out_of_memory(&loader)
                : limits == YAML_LIMIT_EXCEEDED
                    ? fail_at(&loader, violation.line, violation.column, "%s", violation.message)
                    : CPPARITY_OK;
        }
        if (status == CPPARITY_OK) {
            status = load_document(&loader, suite);
        }
        yaml_document_delete(&loader.document);
    }
    yaml_parser_delete(&parser);
    if (status != CPPARITY_OK) {
        cpparity_suite_free(suite);
        return status;
    }
    format_text(suite->path, sizeof suite->path, "%s", loader.path);
    return CPPARITY_OK;
}

cpparity_status cpparity_suite_load(const char *path, cpparity_suite *suite,
                                    cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    cpparity_error_clear(error);
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: cannot read: %s", path,
                                  strerror(errno));
    }
    char *text = NULL;
    size_t length = 0, capacity = 0;
    int read_error = 0;
    for (;;) {
        if (length > YAML_LIMIT_BYTES) {
            free(text);
            fclose(file);
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: larger than the %zu-byte (256 MiB) limit of a suite "
                                      "file (cases/README.md, Limits)",
                                      path, YAML_LIMIT_BYTES);
        }
        if (length == capacity) {
            size_t grown = capacity == 0 ? 65536 : capacity * 2;
            char *larger = realloc(text, grown);
            if (larger == NULL) {
                free(text);
                fclose(file);
                return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: out of memory", path);
            }
            text = larger;
            capacity = grown;
        }
        size_t got = fread(text + length, 1, capacity - length, file);
        length += got;
        if (got == 0) {
            read_error = ferror(file) ? errno : 0;
            break;
        }
    }
    bool failed = ferror(file) != 0;
    fclose(file);
    if (failed) {
        free(text);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: cannot read: %s", path,
                                  strerror(read_error != 0 ? read_error : EIO));
    }
    cpparity_status status = cpparity_suite_load_text(text, length, path, suite, error);
    free(text);
    return status;
}

const char *cpparity_default_suite(void) {
    if (access("cases/ci.yaml", R_OK) == 0) {
        return "cases/ci.yaml";
    }
    return CPPARITY_SOURCE_DIR "/cases/ci.yaml";
}
