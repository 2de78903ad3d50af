/* export_reader.c — see export_reader.h. */
#include "harness/storage/export_reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/storage/export.h"
#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_input.h"

/* The largest suite an export holds: the loader's own limit (cases/README.md, Limits). */
#define EXPORT_READER_MAX_SUITE ((int64_t)256 << 20)

/* export_read in this process, unguarded. */
static cpparity_status read_path(const char *path, export_reading *reading, cpparity_error *error) {
    memset(reading, 0, sizeof *reading);
    hdf5_input input;
    int64_t seed = 0;
    cpparity_status status = hdf5_input_open(&input, path, error);
    if (status == CPPARITY_OK &&
        !(hdf5_input_exists(&input, "/", "model") && hdf5_input_exists(&input, "/", "source"))) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: not an export of this cpparity (no /model or /source: "
                                    "make it with `cpparity export`)",
                                    path);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_string(&input, "/model", "case", reading->case_name,
                                   sizeof reading->case_name, error);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_string(&input, "/model", "digest", reading->digest,
                                   sizeof reading->digest, error);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_int64(&input, "/model", "seed", &seed, error);
        reading->seed = (uint64_t)seed;
    }
    if (status == CPPARITY_OK) {
        status = export_read_source(&input, reading->suite_path, sizeof reading->suite_path,
                                    &reading->suite_text, &reading->suite_length, error);
    }
    if (status == CPPARITY_OK) {
        char digest[CPPARITY_DIGEST_HEX];
        export_digest(reading->suite_text, reading->suite_length, reading->case_name, reading->seed,
                      digest);
        if (strcmp(digest, reading->digest) != 0) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: /model: digest %s does not match its /source, case "
                                        "and seed (%s): the export was changed after it was made",
                                        path, reading->digest, digest);
        }
    }
    hdf5_input_close(&input);
    if (status != CPPARITY_OK) {
        export_reading_free(reading);
    }
    return status;
}

/* The whole read, in the guard's child (hdf5_guard.h): context is the path. */
static cpparity_status read_in_child(void *context, cpparity_error *error) {
    export_reading reading;
    const cpparity_status status = read_path(context, &reading, error);
    export_reading_free(&reading);
    return status;
}

cpparity_status export_read(const char *path, export_reading *reading, cpparity_error *error) {
    memset(reading, 0, sizeof *reading);
    const cpparity_status status =
        hdf5_guard_read_path(path, read_in_child, (void *)(uintptr_t)path, error);
    return status == CPPARITY_OK ? read_path(path, reading, error) : status;
}

cpparity_status export_read_source(const hdf5_input *input, char *suite_path, size_t size,
                                   char **text, size_t *length, cpparity_error *error) {
    int rank = 0;
    int64_t dims[HDF5_INPUT_MAX_RANK] = {0};
    *text = NULL;
    *length = 0;
    cpparity_status status = hdf5_input_string(input, "/source", "path", suite_path, size, error);
    if (status == CPPARITY_OK) {
        status = hdf5_input_shape(input, "/source/suite_yaml", H5T_INTEGER, &rank, dims, error);
    }
    if (status == CPPARITY_OK && (rank != 1 || dims[0] < 1 || dims[0] > EXPORT_READER_MAX_SUITE)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: /source/suite_yaml: 1 to %lld bytes expected", input->path,
                                    (long long)EXPORT_READER_MAX_SUITE);
    }
    if (status == CPPARITY_OK) {
        *text = malloc((size_t)dims[0]);
        *length = (size_t)dims[0];
        status = *text == NULL ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                               : hdf5_input_read(input, "/source/suite_yaml", H5T_INTEGER, 1, dims,
                                                 H5T_NATIVE_UINT8, *text, error);
    }
    return status;
}

void export_reading_free(export_reading *reading) {
    free(reading->suite_text);
    memset(reading, 0, sizeof *reading);
}
