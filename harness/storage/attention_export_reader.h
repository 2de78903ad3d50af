/*
 * attention_export_reader.h — what `cpparity judge` needs of an attention-level export
 * (docs/dump-format.md, "The attention-level export"): the suite it was made from, its cases in
 * order with their seeds and input seeds, and the digest, recomputed and checked. The arrays
 * (inputs, reference outputs) are for the kernel's side and are not read: the judge draws the
 * same inputs from the seeds and computes the reference itself. Anything missing or
 * inconsistent is CPPARITY_ERROR_INPUT naming the file and the HDF5 path.
 */
#ifndef CPPARITY_HARNESS_STORAGE_ATTENTION_EXPORT_READER_H
#define CPPARITY_HARNESS_STORAGE_ATTENTION_EXPORT_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"
#include "common/digest.h"
#include "common/error.h"

/* One case of the export, in its order. */
typedef struct attention_export_entry {
    char name[CPPARITY_CASE_NAME];
    uint64_t seed;       /* the case's fixture seed */
    uint64_t input_seed; /* what its q, k, v, dout were drawn from */
} attention_export_entry;

typedef struct attention_export_reading {
    bool is_attention_export; /* false: the file is a model-level export (has /model) */
    char suite_path[256];     /* as given to `cpparity export` (or "--random N --seed S") */
    char digest[CPPARITY_DIGEST_HEX];
    char *suite_text; /* (suite_length) owned */
    size_t suite_length;
    attention_export_entry *cases; /* (case_count) owned, in order */
    int64_t case_count;
} attention_export_reading;

/* Reads path after reading it once in a forked child (results_model/hdf5_guard.h). A model-level
 * export (with /model and no /cases) is CPPARITY_OK with is_attention_export false and nothing
 * else read. */
cpparity_status attention_export_read(const char *path, attention_export_reading *reading,
                                      cpparity_error *error);
void attention_export_reading_free(attention_export_reading *reading);

#endif
