/*
 * yaml_source.h — a YAML file parsed with libyaml's document API, read with positions: the
 * document is loaded within the limits of yaml_limits.h (one document, no syntax error), nodes
 * are read as typed values (plain decimal integers, finite numbers, true/false, strings, names
 * from a name table) and every problem becomes bad input located at the offending node:
 *
 *     PATH:LINE:COLUMN: SCOPE: KEY_PATH: detail
 *
 * (1-based; an empty scope or key path is left out). It knows nothing of cases: the schema is
 * case_schema.h. Every reader returns CPPARITY_OK or the status it recorded in source->error.
 */
#ifndef CPPARITY_HARNESS_SUITE_YAML_SOURCE_H
#define CPPARITY_HARNESS_SUITE_YAML_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "common/error.h"

#define YAML_SOURCE_FOUND 96 /* bytes of a description of what a node holds, for messages */

typedef struct yaml_source {
    const char *path;         /* display path used in messages */
    yaml_document_t document; /* the parsed file, once yaml_source_parse succeeded */
    cpparity_error *error;    /* where failures are recorded */
} yaml_source;

/* Parses text (length bytes, not NUL-terminated) into source->document: refuses a text over
 * YAML_LIMIT_BYTES, nested deeper than YAML_LIMIT_DEPTH, with a syntax error, a second document
 * or aliases over the limits. On success the caller releases the document with
 * yaml_document_delete; on failure nothing is left to release. */
cpparity_status yaml_source_parse(yaml_source *source, const char *text, size_t length);

/* Records an input error located at the start of node. */
cpparity_status yaml_source_fail(const yaml_source *source, const yaml_node_t *node,
                                 const char *scope, const char *key_path, const char *format, ...)
    __attribute__((format(printf, 5, 6)));

/* Records an input error at an explicit position (0-based line and column, as libyaml's marks). */
cpparity_status yaml_source_fail_at(const yaml_source *source, size_t line, size_t column,
                                    const char *format, ...) __attribute__((format(printf, 4, 5)));

/* Records that memory ran out (a runtime failure, not bad input). */
cpparity_status yaml_source_out_of_memory(const yaml_source *source);

/* Writes printf-style text into buffer, truncated when too long (scopes and key paths). */
void yaml_source_format(char *buffer, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* The node with this document index (libyaml's 1-based node ids). */
const yaml_node_t *yaml_source_node(yaml_source *source, int node_id);

/* The text of a scalar node (NUL-terminated by libyaml). */
const char *yaml_source_text(const yaml_node_t *node);

/* The 1-based line where node starts. */
unsigned long yaml_source_line(const yaml_node_t *node);

/* Entries of a sequence node, and entry i of it. */
int64_t yaml_source_length(const yaml_node_t *node);
const yaml_node_t *yaml_source_item(yaml_source *source, const yaml_node_t *node, int64_t i);

/* What node holds, for "expected X, got Y" messages ("a mapping", "'abc'", "an empty value"). */
void yaml_source_describe(const yaml_node_t *node, char *buffer, size_t size);

/* Checks that node is a mapping whose keys are scalars taken from known, each at most once;
 * key_path names the mapping in messages. */
cpparity_status yaml_source_check_mapping(yaml_source *source, const yaml_node_t *node,
                                          const char *scope, const char *key_path,
                                          const char *const *known, size_t known_count);

/* The value of key in a mapping, or NULL; *key_node (when not NULL) receives the key node. */
const yaml_node_t *yaml_source_value(yaml_source *source, const yaml_node_t *node, const char *key,
                                     const yaml_node_t **key_node);

/* Checks that node is a sequence (of what entries names); with non_empty, of one entry or more. */
cpparity_status yaml_source_check_sequence(const yaml_source *source, const yaml_node_t *node,
                                           const char *scope, const char *key_path,
                                           const char *entries, bool non_empty);

/* An integer >= minimum written as a plain decimal YAML integer within int64. */
cpparity_status yaml_source_read_integer(const yaml_source *source, const yaml_node_t *node,
                                         const char *scope, const char *key_path, int64_t minimum,
                                         int64_t *value);

/* A finite number written as a plain decimal: >= minimum when inclusive, > minimum otherwise. */
cpparity_status yaml_source_read_number(const yaml_source *source, const yaml_node_t *node,
                                        const char *scope, const char *key_path, double minimum,
                                        bool inclusive, double *value);

/* A boolean written as plain true or false. */
cpparity_status yaml_source_read_boolean(const yaml_source *source, const yaml_node_t *node,
                                         const char *scope, const char *key_path, bool *value);

/* A string (any scalar without NUL) shorter than capacity, copied into buffer. */
cpparity_status yaml_source_read_string(const yaml_source *source, const yaml_node_t *node,
                                        const char *scope, const char *key_path, char *buffer,
                                        size_t capacity);

/* One of count names, its index in *index. Refused as "expected a, b or c, got X", or, with a
 * noun, "unknown NOUN X (expected a, b or c)". */
cpparity_status yaml_source_read_name(const yaml_source *source, const yaml_node_t *node,
                                      const char *scope, const char *key_path,
                                      const char *const *names, int count, const char *noun,
                                      int *index);

#endif
