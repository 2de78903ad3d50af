/*
 * kernel_dump.h — a kernel dump (docs/dump-format.md, "The kernel dump", version 1): what an
 * attention kernel called from Python gave on every case and layer of an attention-level export,
 * read whole and checked against what the export's cases make each tensor's shape, after reading
 * it once in a forked child (results_model/hdf5_guard.h). Anything not as the page says is
 * CPPARITY_ERROR_INPUT naming the file and the HDF5 path; CPPARITY_ERROR_RUNTIME when out of
 * memory. harness/running/kernel_replay.h gives the outputs back as a kernel's calls.
 */
#ifndef CPPARITY_HARNESS_STORAGE_KERNEL_DUMP_H
#define CPPARITY_HARNESS_STORAGE_KERNEL_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/digest.h"
#include "common/error.h"

#define KERNEL_DUMP_TEXT 256   /* bytes of a name attribute, NUL included */
#define KERNEL_DUMP_REASON 512 /* bytes of an `unsupported` reason, NUL included */
#define KERNEL_DUMP_OUTPUTS 5  /* out, lse, dq, dk, dv */
#define KERNEL_DUMP_QUERY_BLOCKS 2
#define KERNEL_DUMP_KEY_BLOCKS 3

/* What one case of the export makes the dump's shapes. */
typedef struct kernel_dump_shape {
    const char *name;
    int64_t batch, seq_len, heads, kv_heads, head_dim, layer_count;
    int64_t query_rows[KERNEL_DUMP_QUERY_BLOCKS]; /* rows of each query block */
    int64_t key_rows[KERNEL_DUMP_KEY_BLOCKS];     /* rows of each key block */
} kernel_dump_shape;

/* One layer's outputs (all owned; NULL where the dump has none). */
typedef struct kernel_dump_layer {
    char unsupported[KERNEL_DUMP_REASON]; /* the kernel's reason; "" when it claims the layer */
    float *called[KERNEL_DUMP_OUTPUTS];   /* its forward, and backward on that forward */
    float *alone[3];                      /* dq, dk, dv given the reference's out and lse */
    float *again[KERNEL_DUMP_OUTPUTS];    /* a second call (deterministic) */
    float *blocks[KERNEL_DUMP_QUERY_BLOCKS][KERNEL_DUMP_KEY_BLOCKS][KERNEL_DUMP_OUTPUTS];
} kernel_dump_layer;

typedef struct kernel_dump_case {
    kernel_dump_layer *layers; /* (layer_count) */
    int64_t layer_count;
} kernel_dump_case;

typedef struct kernel_dump {
    char kernel[KERNEL_DUMP_TEXT], kernel_version[KERNEL_DUMP_TEXT];
    char framework[KERNEL_DUMP_TEXT], framework_version[KERNEL_DUMP_TEXT];
    char export_digest[CPPARITY_DIGEST_HEX];
    bool deterministic;         /* again/ holds a second call, to equal the first bit for bit */
    bool block_calls;           /* blocks/ holds every non-empty pair's calls */
    bool backward_uses_out_lse; /* backward_alone/ holds the backward given the reference's */
    kernel_dump_case *cases;    /* (case_count) in the export's order */
    int64_t case_count;
} kernel_dump;

/* Reads path as the dump of the export whose digest is export_digest and whose cases are shapes
 * (count of them, in order). */
cpparity_status kernel_dump_read(const char *path, const char *export_digest,
                                 const kernel_dump_shape *shapes, int64_t count, kernel_dump *dump,
                                 cpparity_error *error);
void kernel_dump_free(kernel_dump *dump);

#endif
