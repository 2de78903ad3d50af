/* yaml_limits.c — size, depth and alias-expansion limits of a suite file (see yaml_limits.h). */
#include "harness/suite/yaml_limits.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

yaml_limit_result yaml_limits_check_depth(const char *text, size_t length,
                                          yaml_limit_violation *violation) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        return YAML_LIMIT_NO_MEMORY;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
    yaml_limit_result result = YAML_LIMIT_KEPT;
    int depth = 0;
    for (bool done = false; !done;) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event)) {
            result = parser.error == YAML_MEMORY_ERROR ? YAML_LIMIT_NO_MEMORY : YAML_LIMIT_UNPARSED;
            break;
        }
        switch (event.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > YAML_LIMIT_DEPTH) {
                violation->line = event.start_mark.line;
                violation->column = event.start_mark.column;
                snprintf(violation->message, sizeof violation->message,
                         "collections nested more than %d deep (a suite needs fewer than 10)",
                         YAML_LIMIT_DEPTH);
                result = YAML_LIMIT_EXCEEDED;
                done = true;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return result;
}

/* Per node of the document (index - 1): its expanded size and height once known. */
typedef struct node_extent {
    int64_t size; /* nodes in its subtree, aliases expanded; 0 while unknown */
    int height;   /* collections on its deepest path, itself included */
    bool in_walk; /* on the current path: meeting it again is a cycle */
} node_extent;

typedef struct alias_walk {
    yaml_document_t *document;
    node_extent *extents;
    int64_t limit; /* the most expanded nodes allowed */
    yaml_limit_violation *violation;
} alias_walk;

static yaml_limit_result exceeded(alias_walk *walk, const yaml_node_t *node, const char *format,
                                  long long value) {
    walk->violation->line = node->start_mark.line;
    walk->violation->column = node->start_mark.column;
    snprintf(walk->violation->message, sizeof walk->violation->message, format, value);
    return YAML_LIMIT_EXCEEDED;
}

/* Fills the extent of node index (1-based) reached at depth; recursion is at most
 * YAML_LIMIT_DEPTH deep. */
static yaml_limit_result measure(alias_walk *walk, int index, int depth) {
    yaml_node_t *node = yaml_document_get_node(walk->document, index);
    node_extent *extent = &walk->extents[index - 1];
    if (extent->in_walk) {
        return exceeded(walk, node,
                        "an alias inside the node it names (a cycle %lld collections deep)",
                        (long long)depth);
    }
    if (extent->size == 0) {
        int64_t size = 1;
        int height = 0;
        if (node->type != YAML_SCALAR_NODE) {
            if (depth >= YAML_LIMIT_DEPTH) {
                return exceeded(walk, node,
                                "collections nested more than %lld deep once aliases are "
                                "expanded",
                                (long long)YAML_LIMIT_DEPTH);
            }
            extent->in_walk = true;
            const bool sequence = node->type == YAML_SEQUENCE_NODE;
            const int64_t count =
                sequence ? node->data.sequence.items.top - node->data.sequence.items.start
                         : 2 * (node->data.mapping.pairs.top - node->data.mapping.pairs.start);
            for (int64_t i = 0; i < count; i++) {
                const int child = sequence
                                      ? node->data.sequence.items.start[i]
                                      : (i % 2 == 0 ? node->data.mapping.pairs.start[i / 2].key
                                                    : node->data.mapping.pairs.start[i / 2].value);
                const yaml_limit_result result = measure(walk, child, depth + 1);
                if (result != YAML_LIMIT_KEPT) {
                    return result;
                }
                const node_extent *measured = &walk->extents[child - 1];
                size += measured->size;
                height = measured->height > height ? measured->height : height;
                if (size > walk->limit) {
                    return exceeded(walk, node,
                                    "more than %lld nodes once aliases are expanded (each "
                                    "alias counts as a copy of the node it names; aliases may "
                                    "add at most 4194304)",
                                    (long long)walk->limit);
                }
            }
            extent->in_walk = false;
            height += 1;
        }
        extent->size = size;
        extent->height = height;
    }
    if (depth + extent->height > YAML_LIMIT_DEPTH) {
        return exceeded(walk, node,
                        "collections nested more than %lld deep once aliases are expanded",
                        (long long)YAML_LIMIT_DEPTH);
    }
    return YAML_LIMIT_KEPT;
}

yaml_limit_result yaml_limits_check_aliases(yaml_document_t *document,
                                            yaml_limit_violation *violation) {
    const int64_t nodes = document->nodes.top - document->nodes.start;
    if (nodes == 0) {
        return YAML_LIMIT_KEPT;
    }
    node_extent *extents = calloc((size_t)nodes, sizeof *extents);
    if (extents == NULL) {
        return YAML_LIMIT_NO_MEMORY;
    }
    alias_walk walk = {document, extents, nodes + YAML_LIMIT_ALIAS_NODES, violation};
    const yaml_limit_result result = measure(&walk, 1, 0);
    free(extents);
    return result;
}
