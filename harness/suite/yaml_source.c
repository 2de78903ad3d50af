/* yaml_source.c — a parsed YAML file read with positions (see yaml_source.h). */
#include "harness/suite/yaml_source.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "harness/suite/yaml_limits.h"

void yaml_source_format(char *buffer, size_t size, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(buffer, size, format, arguments);
    va_end(arguments);
}

/* Records an input error at mark: "PATH:LINE:COLUMN: SCOPE: KEY_PATH: detail" (empty parts are
 * left out). */
static cpparity_status fail_at_mark(const yaml_source *source, yaml_mark_t mark, const char *scope,
                                    const char *key_path, const char *format, va_list arguments) {
    char detail[768];
    vsnprintf(detail, sizeof detail, format, arguments);
    return cpparity_error_set(source->error, CPPARITY_ERROR_INPUT, "%s:%lu:%lu: %s%s%s%s%s",
                              source->path, (unsigned long)mark.line + 1,
                              (unsigned long)mark.column + 1, scope, scope[0] ? ": " : "", key_path,
                              key_path[0] ? ": " : "", detail);
}

/* Records an input error located at the start of node. */
cpparity_status yaml_source_fail(const yaml_source *source, const yaml_node_t *node,
                                 const char *scope, const char *key_path, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    cpparity_status status =
        fail_at_mark(source, node->start_mark, scope, key_path, format, arguments);
    va_end(arguments);
    return status;
}

/* Records an input error at an explicit position (0-based line and column). */
cpparity_status yaml_source_fail_at(const yaml_source *source, size_t line, size_t column,
                                    const char *format, ...) {
    yaml_mark_t mark = {0, line, column};
    va_list arguments;
    va_start(arguments, format);
    cpparity_status status = fail_at_mark(source, mark, "", "", format, arguments);
    va_end(arguments);
    return status;
}

/* Records that memory ran out (a runtime failure, not bad input). */
cpparity_status yaml_source_out_of_memory(const yaml_source *source) {
    return cpparity_error_set(source->error, CPPARITY_ERROR_RUNTIME, "%s: out of memory",
                              source->path);
}

/* The node with this document index (libyaml's 1-based node ids). */
const yaml_node_t *yaml_source_node(yaml_source *source, int node_id) {
    return yaml_document_get_node(&source->document, node_id);
}

/* The 1-based line where node starts. */
unsigned long yaml_source_line(const yaml_node_t *node) {
    return (unsigned long)node->start_mark.line + 1;
}

/* The text of a scalar node (libyaml terminates it with a NUL). */
const char *yaml_source_text(const yaml_node_t *node) {
    return (const char *)node->data.scalar.value;
}

/* Whether node is an unquoted scalar, the only form numbers and booleans may take. */
static bool is_plain_scalar(const yaml_node_t *node) {
    return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* Number of entries of a sequence node. */
int64_t yaml_source_length(const yaml_node_t *node) {
    return node->data.sequence.items.top - node->data.sequence.items.start;
}

/* Entry i of a sequence node. */
const yaml_node_t *yaml_source_item(yaml_source *source, const yaml_node_t *node, int64_t i) {
    return yaml_source_node(source, node->data.sequence.items.start[i]);
}

/* Describes what node holds for "expected X, got Y" messages. */
void yaml_source_describe(const yaml_node_t *node, char *buffer, size_t size) {
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
            snprintf(buffer, size, "the quoted string '%.40s'", yaml_source_text(node));
        } else {
            snprintf(buffer, size, "'%.40s'", yaml_source_text(node));
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
cpparity_status yaml_source_check_mapping(yaml_source *source, const yaml_node_t *node,
                                          const char *scope, const char *key_path,
                                          const char *const *known, size_t known_count) {
    char found[YAML_SOURCE_FOUND];
    if (node->type != YAML_MAPPING_NODE) {
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, key_path, "expected a mapping, got %s", found);
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_source_node(source, pair->key);
        if (key->type != YAML_SCALAR_NODE) {
            yaml_source_describe(key, found, sizeof found);
            return yaml_source_fail(source, key, scope, key_path, "keys must be strings, got %s",
                                    found);
        }
        if (name_index(known, known_count, yaml_source_text(key)) < 0) {
            char expected[256];
            join_names(known, known_count, expected, sizeof expected);
            return yaml_source_fail(source, key, scope, key_path,
                                    "unknown key '%.60s' (expected one of: %s)",
                                    yaml_source_text(key), expected);
        }
        for (const yaml_node_pair_t *earlier = node->data.mapping.pairs.start; earlier < pair;
             earlier++) {
            const yaml_node_t *earlier_key = yaml_source_node(source, earlier->key);
            if (strcmp(yaml_source_text(earlier_key), yaml_source_text(key)) == 0) {
                return yaml_source_fail(source, key, scope, key_path,
                                        "duplicate key '%s' (first at line %lu)",
                                        yaml_source_text(key), yaml_source_line(earlier_key));
            }
        }
    }
    return CPPARITY_OK;
}

/* The value of key in a checked mapping, or NULL; *key_node (when not NULL) receives the key. */
const yaml_node_t *yaml_source_value(yaml_source *source, const yaml_node_t *node, const char *key,
                                     const yaml_node_t **key_node) {
    if (node->type != YAML_MAPPING_NODE) {
        return NULL;
    }
    for (const yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        const yaml_node_t *candidate = yaml_source_node(source, pair->key);
        if (candidate->type == YAML_SCALAR_NODE && strcmp(yaml_source_text(candidate), key) == 0) {
            if (key_node != NULL) {
                *key_node = candidate;
            }
            return yaml_source_node(source, pair->value);
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
cpparity_status yaml_source_read_integer(const yaml_source *source, const yaml_node_t *node,
                                         const char *scope, const char *key_path, int64_t minimum,
                                         int64_t *value) {
    bool overflow = false;
    int64_t parsed = 0;
    if (!is_plain_scalar(node) || !parse_integer_text(yaml_source_text(node), &parsed, &overflow)) {
        if (overflow) {
            return yaml_source_fail(source, node, scope, key_path, "integer out of range: %.40s",
                                    yaml_source_text(node));
        }
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, key_path, "expected an integer, got %s",
                                found);
    }
    if (parsed < minimum) {
        return yaml_source_fail(source, node, scope, key_path, "must be >= %lld, got %lld",
                                (long long)minimum, (long long)parsed);
    }
    *value = parsed;
    return CPPARITY_OK;
}

/* Reads a finite number written as a plain YAML integer or float; it must be >= minimum when
 * inclusive, > minimum otherwise. */
cpparity_status yaml_source_read_number(const yaml_source *source, const yaml_node_t *node,
                                        const char *scope, const char *key_path, double minimum,
                                        bool inclusive, double *value) {
    bool overflow = false;
    double parsed = 0.0;
    if (!is_plain_scalar(node) || !parse_number_text(yaml_source_text(node), &parsed, &overflow)) {
        if (overflow) {
            return yaml_source_fail(source, node, scope, key_path, "number out of range: %.40s",
                                    yaml_source_text(node));
        }
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, key_path, "expected a number, got %s", found);
    }
    if (inclusive ? !(parsed >= minimum) : !(parsed > minimum)) {
        return yaml_source_fail(source, node, scope, key_path, "must be %s %g, got %g",
                                inclusive ? ">=" : ">", minimum, parsed);
    }
    *value = parsed;
    return CPPARITY_OK;
}

/* Reads a boolean written as plain true or false. */
cpparity_status yaml_source_read_boolean(const yaml_source *source, const yaml_node_t *node,
                                         const char *scope, const char *key_path, bool *value) {
    if (is_plain_scalar(node) && strcmp(yaml_source_text(node), "true") == 0) {
        *value = true;
        return CPPARITY_OK;
    }
    if (is_plain_scalar(node) && strcmp(yaml_source_text(node), "false") == 0) {
        *value = false;
        return CPPARITY_OK;
    }
    char found[YAML_SOURCE_FOUND];
    yaml_source_describe(node, found, sizeof found);
    return yaml_source_fail(source, node, scope, key_path, "expected true or false, got %s", found);
}

/* Reads a string (any scalar) shorter than capacity into buffer. */
cpparity_status yaml_source_read_string(const yaml_source *source, const yaml_node_t *node,
                                        const char *scope, const char *key_path, char *buffer,
                                        size_t capacity) {
    if (node->type != YAML_SCALAR_NODE) {
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, key_path, "expected a string, got %s", found);
    }
    size_t length = node->data.scalar.length;
    if (strlen(yaml_source_text(node)) != length) {
        return yaml_source_fail(source, node, scope, key_path, "must not contain a NUL character");
    }
    if (length >= capacity) {
        return yaml_source_fail(source, node, scope, key_path,
                                "too long (%zu characters, at most %zu)", length, capacity - 1);
    }
    memcpy(buffer, yaml_source_text(node), length + 1);
    return CPPARITY_OK;
}

/* Checks that node is a sequence; with non_empty, that it has at least one entry. */
cpparity_status yaml_source_check_sequence(const yaml_source *source, const yaml_node_t *node,
                                           const char *scope, const char *key_path,
                                           const char *entries, bool non_empty) {
    if (node->type != YAML_SEQUENCE_NODE) {
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, key_path, "expected a sequence of %s, got %s",
                                entries, found);
    }
    if (non_empty && yaml_source_length(node) == 0) {
        return yaml_source_fail(source, node, scope, key_path, "must list at least one of %s",
                                entries);
    }
    return CPPARITY_OK;
}

/* Turns a libyaml parser failure into a located error (or a runtime error for no memory). */
static cpparity_status parser_failure(const yaml_source *source, const yaml_parser_t *parser,
                                      const char *text, size_t length) {
    if (parser->error == YAML_MEMORY_ERROR) {
        return yaml_source_out_of_memory(source);
    }
    const char *problem = parser->problem != NULL ? parser->problem : "unknown problem";
    if (parser->error == YAML_READER_ERROR) {
        /* reader errors (bad encoding) carry a byte offset instead of a mark */
        size_t line = 0, column = 0;
        for (size_t i = 0; i < parser->problem_offset && i < length; i++) {
            line += text[i] == '\n';
            column = text[i] == '\n' ? 0 : column + 1;
        }
        return yaml_source_fail_at(source, line, column, "YAML syntax error: %s", problem);
    }
    if (parser->context != NULL) {
        return yaml_source_fail_at(source, parser->problem_mark.line, parser->problem_mark.column,
                                   "YAML syntax error: %s (%s at line %lu, column %lu)", problem,
                                   parser->context, (unsigned long)parser->context_mark.line + 1,
                                   (unsigned long)parser->context_mark.column + 1);
    }
    return yaml_source_fail_at(source, parser->problem_mark.line, parser->problem_mark.column,
                               "YAML syntax error: %s", problem);
}

/* Checks that the stream holds no second document after the one already loaded. */
static cpparity_status check_single_document(const yaml_source *source, yaml_parser_t *parser,
                                             const char *text, size_t length) {
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next)) {
        return parser_failure(source, parser, text, length);
    }
    const yaml_node_t *root = yaml_document_get_root_node(&next);
    cpparity_status status = CPPARITY_OK;
    if (root != NULL) {
        status = yaml_source_fail_at(source, root->start_mark.line, root->start_mark.column,
                                     "a suite file holds one YAML document, found a second one");
    }
    yaml_document_delete(&next);
    return status;
}

cpparity_status yaml_source_parse(yaml_source *source, const char *text, size_t length) {
    if (length > YAML_LIMIT_BYTES) {
        return cpparity_error_set(source->error, CPPARITY_ERROR_INPUT,
                                  "%s: %zu bytes, over the %zu-byte (256 MiB) limit of a suite "
                                  "file (cases/README.md, Limits)",
                                  source->path, length, YAML_LIMIT_BYTES);
    }
    yaml_limit_violation violation;
    yaml_limit_result limits = yaml_limits_check_depth(text, length, &violation);
    if (limits == YAML_LIMIT_NO_MEMORY) {
        return yaml_source_out_of_memory(source);
    }
    if (limits == YAML_LIMIT_EXCEEDED) {
        return yaml_source_fail_at(source, violation.line, violation.column, "%s",
                                   violation.message);
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        return yaml_source_out_of_memory(source);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
    cpparity_status status = CPPARITY_OK;
    if (!yaml_parser_load(&parser, &source->document)) {
        status = parser_failure(source, &parser, text, length);
    } else {
        status = check_single_document(source, &parser, text, length);
        if (status == CPPARITY_OK) {
            limits = yaml_limits_check_aliases(&source->document, &violation);
            status = limits == YAML_LIMIT_NO_MEMORY ? yaml_source_out_of_memory(source)
                     : limits == YAML_LIMIT_EXCEEDED
                         ? yaml_source_fail_at(source, violation.line, violation.column, "%s",
                                               violation.message)
                         : CPPARITY_OK;
        }
        if (status != CPPARITY_OK) {
            yaml_document_delete(&source->document);
        }
    }
    yaml_parser_delete(&parser);
    return status;
}

cpparity_status yaml_source_read_name(const yaml_source *source, const yaml_node_t *node,
                                      const char *scope, const char *key_path,
                                      const char *const *names, int count, const char *noun,
                                      int *index) {
    const int found_index = node->type == YAML_SCALAR_NODE
                                ? name_index(names, (size_t)count, yaml_source_text(node))
                                : -1;
    if (found_index >= 0) {
        *index = found_index;
        return CPPARITY_OK;
    }
    char found[YAML_SOURCE_FOUND], expected[128];
    yaml_source_describe(node, found, sizeof found);
    cpparity_names_join(names, count, ", ", " or ", expected, sizeof expected);
    if (noun != NULL) {
        return yaml_source_fail(source, node, scope, key_path, "unknown %s %s (expected %s)", noun,
                                found, expected);
    }
    return yaml_source_fail(source, node, scope, key_path, "expected %s, got %s", expected, found);
}
