/*
 * attention_layer.h — what one layer's attention mask is made of (docs/masks.md).
 *
 * This is a definition shared by the reference, the implementation under test and the case
 * files: a layer's type, its window W and chunk size C, and where the chunk grid starts. It holds
 * no math; each side evaluates the predicate with its own code.
 */
#ifndef CPPARITY_COMMON_ATTENTION_LAYER_H
#define CPPARITY_COMMON_ATTENTION_LAYER_H

#include <stdint.h>

typedef enum cpparity_layer_type {
    CPPARITY_LAYER_FULL = 0,    /* causal only ("full_attention") */
    CPPARITY_LAYER_SLIDING = 1, /* exactly W keys including the diagonal ("sliding_attention") */
    CPPARITY_LAYER_CHUNKED = 2, /* same chunk of C tokens ("chunked_attention") */
} cpparity_layer_type;

typedef enum cpparity_chunk_origin {
    CPPARITY_CHUNK_ORIGIN_ROW = 0,      /* grid starts at the row start shifted by left padding */
    CPPARITY_CHUNK_ORIGIN_DOCUMENT = 1, /* opt-in variant: grid starts at each document */
    CPPARITY_CHUNK_ORIGIN_POSITION = 2, /* opt-in variant: chunks counted in position_ids */
} cpparity_chunk_origin;

typedef struct cpparity_attention_layer {
    cpparity_layer_type type;           /* which terms of the predicate apply */
    int64_t window;                     /* W >= 1; read only when type is sliding */
    int64_t chunk_size;                 /* C >= 1; read only when type is chunked */
    cpparity_chunk_origin chunk_origin; /* read only when type is chunked */
} cpparity_attention_layer;

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

#define CPPARITY_LAYER_TYPE_COUNT 3
#define CPPARITY_CHUNK_ORIGIN_COUNT 3

/* "full_attention", "sliding_attention", "chunked_attention" (transformers' spelling), indexed by
 * cpparity_layer_type; "row", "document", "position", indexed by cpparity_chunk_origin
 * (common/names.h). */
extern const char *const cpparity_layer_type_names[CPPARITY_LAYER_TYPE_COUNT];
extern const char *const cpparity_chunk_origin_names[CPPARITY_CHUNK_ORIGIN_COUNT];

/* The name of a layer type, or "unknown". */
const char *cpparity_layer_type_name(cpparity_layer_type type);

#ifdef __cplusplus
}
#endif

#endif
