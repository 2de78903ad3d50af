/*
 * yaml_limits.h — the limits a suite file keeps before cpparity builds anything from it, so that
 * no input, however large or strange, costs more than its size: the file's size, how deeply its
 * collections nest, and how large aliases make it once expanded (a few bytes of `*alias` may
 * stand for a whole list; a list of aliases to a large list is quadratic). The limits are
 * documented in cases/README.md; a suite over one is bad input located at file:line:column.
 */
#ifndef CPPARITY_HARNESS_SUITE_YAML_LIMITS_H
#define CPPARITY_HARNESS_SUITE_YAML_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#define YAML_LIMIT_BYTES ((size_t)256 << 20)      /* a suite file: 256 MiB */
#define YAML_LIMIT_DEPTH 64                       /* collections inside collections */
#define YAML_LIMIT_ALIAS_NODES ((int64_t)4 << 20) /* nodes aliases may add once expanded */

typedef enum yaml_limit_result {
    YAML_LIMIT_KEPT = 0,     /* within every limit */
    YAML_LIMIT_EXCEEDED = 1, /* over one: violation says where and which */
    YAML_LIMIT_UNPARSED = 2, /* not YAML (nothing checked: loading reports the syntax error) */
    YAML_LIMIT_NO_MEMORY = 3,
} yaml_limit_result;

typedef struct yaml_limit_violation {
    size_t line, column; /* 0-based, as libyaml's marks */
    char message[256];   /* what was exceeded */
} yaml_limit_violation;

/* Walks text's parse events (nothing is built) and stops at the first collection nested deeper
 * than YAML_LIMIT_DEPTH: libyaml's own cost grows with the square of the depth. */
yaml_limit_result yaml_limits_check_depth(const char *text, size_t length,
                                          yaml_limit_violation *violation);

/* The loaded document's size with every alias expanded, and its depth through aliases: more than
 * YAML_LIMIT_ALIAS_NODES nodes beyond the written ones, deeper than YAML_LIMIT_DEPTH, or an
 * alias inside the node it names (a cycle), is YAML_LIMIT_EXCEEDED. */
yaml_limit_result yaml_limits_check_aliases(yaml_document_t *document,
                                            yaml_limit_violation *violation);

#endif
