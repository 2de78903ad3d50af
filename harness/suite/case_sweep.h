/*
 * case_sweep.h — the `sweep` key of a case (cases/README.md, Sweeps): one case written, a family
 * of cases run. The family puts the sliding window, the chunk size, a document boundary and the
 * end of left padding at every residue −r … +r around each multiple (1 … multiples) of each tile
 * size, on a sequence that runs one largest tile past that edge, for each GQA group listed. The
 * tile edges a kernel's own tiling has are then covered whatever tile sizes the built-in kernels
 * use. Each member is an ordinary case named NAME.<edge> (NAME.<edge>.g<group> when groups are
 * listed), merged and validated like a written one, its errors located at the `sweep` node.
 */
#ifndef CPPARITY_HARNESS_SUITE_CASE_SWEEP_H
#define CPPARITY_HARNESS_SUITE_CASE_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/suite/case_reader.h"

#define CASE_SWEEP_MAX_TILES 16   /* tile sizes one sweep may list */
#define CASE_SWEEP_MAX_GROUPS 16  /* GQA groups one sweep may list */
#define CASE_SWEEP_MAX_EDGES 4096 /* distinct edges one sweep may generate */
#define CASE_SWEEP_MAX_MEMBERS 4096

/* What a sweep varies (`vary`); every one by default. */
typedef enum case_sweep_quantity {
    CASE_SWEEP_WINDOW = 0,   /* "window": a sliding layer with sliding_window = edge */
    CASE_SWEEP_CHUNK = 1,    /* "chunk": a chunked layer with attention_chunk_size = edge */
    CASE_SWEEP_DOCUMENT = 2, /* "document": a row whose second document starts at the edge */
    CASE_SWEEP_PADDING = 3,  /* "padding": a row whose left padding ends at the edge */
} case_sweep_quantity;
#define CASE_SWEEP_QUANTITY_COUNT 4
extern const char *const case_sweep_quantity_names[CASE_SWEEP_QUANTITY_COUNT];

/* A sweep as read: its parameters and the edges they give (sorted, distinct, each >= 1). */
typedef struct case_sweep {
    const yaml_node_t *node;               /* the `sweep` mapping */
    int64_t tiles[CASE_SWEEP_MAX_TILES];   /* tile sizes */
    int tile_count;                        /* >= 1 */
    int64_t multiples;                     /* edges at 1 … multiples × tile */
    int64_t residues;                      /* each edge −residues … +residues */
    int64_t groups[CASE_SWEEP_MAX_GROUPS]; /* query heads per kv head; none: the model's */
    int group_count;                       /* 0 when `gqa_groups` is absent */
    const yaml_node_t *group_nodes[CASE_SWEEP_MAX_GROUPS]; /* for messages */
    bool vary[CASE_SWEEP_QUANTITY_COUNT];                  /* what the family varies */
    int64_t edges[CASE_SWEEP_MAX_EDGES];                   /* the values swept */
    int64_t edge_count;                                    /* >= 1 */
    int64_t largest_tile; /* the sequence runs this far past an edge */
} case_sweep;

/* Reads the `sweep` mapping of case scope into sweep (errors at the offending node). */
cpparity_status case_sweep_read(yaml_source *source, const yaml_node_t *node, const char *scope,
                                case_sweep *sweep);

/* Members of the family: edges × groups (at least 1). */
int64_t case_sweep_members(const case_sweep *sweep);

/* Member number member of the family written into settings, as if the case had written seq_len,
 * rows, the model's layers, sliding_window, attention_chunk_size and num_key_value_heads (each
 * located at the sweep node); its name (base name and suffix) into name. heads is the merged
 * num_attention_heads (0 when unknown: groups are then left to the model's validation). Refuses a
 * group that does not divide heads or a name longer than capacity − 1. */
cpparity_status case_sweep_member(case_reader *reader, const case_sweep *sweep, const char *scope,
                                  int64_t member, int64_t heads, const char *base, char *name,
                                  size_t capacity, case_settings *settings);

#endif
