/*
 * export_reader.h — what `cpparity judge` needs of an export (export.h): the suite file it was
 * made from (/source/suite_yaml), the case's name, the seed and the digest (/model), checked to
 * agree with one another (the digest is recomputed from the other three). Anything missing or
 * inconsistent is CPPARITY_ERROR_INPUT naming the file and the HDF5 path.
 */
#ifndef CPPARITY_HARNESS_STORAGE_EXPORT_READER_H
#define CPPARITY_HARNESS_STORAGE_EXPORT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "common/digest.h"
#include "common/error.h"
#include "results_model/hdf5_input.h"

#define EXPORT_READER_TEXT 256 /* bytes of the case name and the suite path, NUL included */

typedef struct export_reading {
    char case_name[EXPORT_READER_TEXT];
    char suite_path[EXPORT_READER_TEXT]; /* as it was given to `cpparity export` */
    char digest[CPPARITY_DIGEST_HEX];
    uint64_t seed;
    char *suite_text; /* (suite_length) owned */
    size_t suite_length;
} export_reading;

/* Reads the export at path into reading, after reading it once in a forked child
 * (results_model/hdf5_guard.h: a file that crashes or hangs HDF5 is CPPARITY_ERROR_INPUT "PATH is
 * damaged: ..."); CPPARITY_ERROR_INPUT naming the file and the HDF5 path for anything else that
 * is not an intact export of this cpparity. */
cpparity_status export_read(const char *path, export_reading *reading, cpparity_error *error);

void export_reading_free(export_reading *reading);

/* /source of an open export, model-level or attention-level alike: its path attribute into
 * suite_path (size bytes) and the suite's bytes (1 to 256 MiB) into a new *text of *length
 * bytes (the caller frees it, also on failure). */
cpparity_status export_read_source(const hdf5_input *input, char *suite_path, size_t size,
                                   char **text, size_t *length, cpparity_error *error);

#endif
