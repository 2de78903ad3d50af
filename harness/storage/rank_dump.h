/*
 * rank_dump.h — one rank's dump of a framework's run (docs/dump-format.md, version 1), read and
 * checked against the case it claims to be a run of: every attribute, every dataset's type and
 * shape, every gradient name of model.md's table (in full or as a flat slice). Anything wrong
 * is CPPARITY_ERROR_INPUT naming the file and the HDF5 path; nothing is trusted before it is
 * checked. What holds across the ranks of a run (cp, ranks, the partition of the positions,
 * slices tiling their tensor) is judge_dumps.h's.
 */
#ifndef CPPARITY_HARNESS_STORAGE_RANK_DUMP_H
#define CPPARITY_HARNESS_STORAGE_RANK_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"
#include "common/digest.h"
#include "common/error.h"
#include "common/tensor_table.h"
#include "results_model/hdf5_input.h"

#define RANK_DUMP_FORMAT "cpparity-rank-dump"
#define RANK_DUMP_VERSION 1
#define RANK_DUMP_TEXT 256 /* bytes of a name attribute (framework, kernel, ...), NUL included */

typedef struct rank_dump {
    const char *path; /* as given (not owned) */
    char framework[RANK_DUMP_TEXT], framework_version[RANK_DUMP_TEXT], kernel[RANK_DUMP_TEXT];
    char case_name[RANK_DUMP_TEXT];
    char export_digest[CPPARITY_DIGEST_HEX];
    cpparity_dtype dtype;
    int64_t cp, rank, seed;
    int64_t rows;         /* L_r: logits rows of this rank */
    int64_t *positions;   /* [L_r] global positions of those rows (every batch row alike) */
    double loss;          /* the loss as the framework reports it on this rank */
    int64_t batch, vocab; /* B and V of /logits [B, L_r, V], read by rank_dump_read_logits */
    hdf5_input file;      /* kept open for rank_dump_read_logits (file.file <= 0: closed) */
    float *gradients;     /* laid out as the parameter table; a sliced tensor holds its slice
                             at [offset, offset + length) and NaN elsewhere */
    bool *sliced;         /* [parameter count]: given under /gradient_slices */
    int64_t *slice_offset, *slice_length; /* [parameter count]: the slice, when sliced */
} rank_dump;

/* What a dump must be, checked in this order right after its root attributes are read and
 * before any dataset's shape, so that a dump of another export, of the wrong cp or dtype, or
 * padded past the bound is named as such rather than as a shape that does not fit. */
typedef struct rank_dump_expect {
    const char *export_digest; /* the export's digest, with its case and seed: a dump of another
                                  export or seed is refused naming both; NULL: not checked (the
                                  fuzz target, which reads dumps of no export) */
    const char *case_name;     /* the export's case (with export_digest) */
    uint64_t seed;             /* the export's seed (with export_digest) */
    const char *flag;          /* the option that named the dump ("--baseline"), said first in
                                  a refusal; NULL for the judged run's dumps */
    int64_t cp;                /* the cp the dump must have (1 for a baseline); 0: any */
    int dtype;                 /* the cpparity_dtype it must have; -1: any */
    int64_t most_rows;         /* the most logits rows this dump may hold: what is left of the
                                  padding bound (judge_dumps.h); < 0: no bound */
    const char *bound;         /* how that bound was found, for the refusal (not owned) */
} rank_dump_expect;

/* Reads path as a dump of case c, whose parameters table describes (model.md's names and
 * shapes), checked against expect (NULL: nothing expected, no row bound), after reading it once
 * in a forked child (results_model/hdf5_guard.h: a dump that crashes or hangs HDF5 is
 * CPPARITY_ERROR_INPUT "PATH is damaged: ..."; the child reads the logits too, one block of rows
 * at a time). CPPARITY_ERROR_INPUT naming the file and the HDF5 path for anything that is not as
 * docs/dump-format.md says; CPPARITY_ERROR_RUNTIME when out of memory. The logits are not read
 * here (rank_dump_read_logits): the file stays open until rank_dump_free. dump is freed on
 * failure. */
cpparity_status rank_dump_read(const char *path, const cpparity_case *c,
                               const cpparity_tensor_table *parameters,
                               const rank_dump_expect *expect, rank_dump *dump,
                               cpparity_error *error);

/* The same from an HDF5 file image in memory (size bytes, only read), called name in messages and
 * in dump->path (name must outlive dump), in this process (not guarded): the fuzz target's entry
 * (fuzz/rank_dump_fuzzer.c), which guards it itself in its guarded mode. */
cpparity_status rank_dump_read_image(const void *image, size_t size, const char *name,
                                     const cpparity_case *c,
                                     const cpparity_tensor_table *parameters,
                                     const rank_dump_expect *expect, rank_dump *dump,
                                     cpparity_error *error);

/* rows (count × V floats) = /logits[batch_row, row : row + count, :] of a dump rank_dump_read
 * returned: the logits are read one block of rows at a time, never whole (after the guarded
 * child read every block once). CPPARITY_ERROR_INPUT naming the file when HDF5 cannot read
 * them; CPPARITY_ERROR_RUNTIME for rows outside the dataset. */
cpparity_status rank_dump_read_logits(const rank_dump *dump, int64_t batch_row, int64_t row,
                                      int64_t count, float *rows, cpparity_error *error);

/* Releases what rank_dump_read allocated and closes the file; safe on a zeroed dump. */
void rank_dump_free(rank_dump *dump);

#endif
