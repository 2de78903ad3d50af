/* attention_export_reader.c — see attention_export_reader.h. */
#include "harness/storage/attention_export_reader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/storage/attention_export_format.h"
#include "harness/storage/export_reader.h"
#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_input.h"

#define MAX_CASES 100000 /* --random's largest N */

static cpparity_status read_cases(const hdf5_input *input, attention_export_reading *reading,
                                  cpparity_error *error) {
    char *names = NULL;
    int64_t count = 0, declared = 0;
    cpparity_status status = hdf5_input_int64(input, "/", "case_count", &declared, error);
    if (status == CPPARITY_OK) {
        status = hdf5_input_names(input, "/cases", CPPARITY_CASE_NAME, &names, &count, error);
    }
    if (status == CPPARITY_OK && (count != declared || count < 1 || count > MAX_CASES)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: /cases: %lld cases, the root's case_count says %lld",
                                    input->path, (long long)count, (long long)declared);
    }
    if (status == CPPARITY_OK) {
        reading->cases = calloc((size_t)count, sizeof *reading->cases);
        status = reading->cases == NULL
                     ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                     : CPPARITY_OK;
    }
    for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
        const char *name = names + i * CPPARITY_CASE_NAME;
        char group[CPPARITY_CASE_NAME + 16];
        snprintf(group, sizeof group, "/cases/%s", name);
        int64_t order = -1, seed = 0, input_seed = 0;
        status = hdf5_input_int64(input, group, "order", &order, error);
        if (status == CPPARITY_OK) {
            status = hdf5_input_int64(input, group, "seed", &seed, error);
        }
        if (status == CPPARITY_OK) {
            status = hdf5_input_int64(input, group, "input_seed", &input_seed, error);
        }
        if (status == CPPARITY_OK &&
            (order < 0 || order >= count || reading->cases[order].name[0] != '\0')) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: %s: order %lld is outside 0..%lld or given twice",
                                        input->path, group, (long long)order, (long long)count - 1);
        }
        if (status == CPPARITY_OK) {
            attention_export_entry *entry = &reading->cases[order];
            snprintf(entry->name, sizeof entry->name, "%s", name);
            entry->seed = (uint64_t)seed;
            entry->input_seed = (uint64_t)input_seed;
        }
    }
    reading->case_count = status == CPPARITY_OK ? count : 0;
    free(names);
    return status;
}

/* attention_export_read in this process, unguarded. */
static cpparity_status read_path(const char *path, attention_export_reading *reading,
                                 cpparity_error *error) {
    memset(reading, 0, sizeof *reading);
    hdf5_input input;
    int64_t version = 0;
    char format[64] = "";
    cpparity_status status = hdf5_input_open(&input, path, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (hdf5_input_exists(&input, "/", "model") && !hdf5_input_exists(&input, "/", "cases")) {
        hdf5_input_close(&input); /* a model-level export: export_reader.h reads it */
        return CPPARITY_OK;
    }
    reading->is_attention_export = true;
    status = hdf5_input_string(&input, "/", "format", format, sizeof format, error);
    if (status == CPPARITY_OK && strcmp(format, ATTENTION_EXPORT_FORMAT) != 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: /: format '%s', not an export of this cpparity (%s or "
                                    "a model-level export with /model)",
                                    path, format, ATTENTION_EXPORT_FORMAT);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_int64(&input, "/", "format_version", &version, error);
    }
    if (status == CPPARITY_OK && version != ATTENTION_EXPORT_VERSION) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: /: format_version %lld; this cpparity reads %d", path,
                                    (long long)version, ATTENTION_EXPORT_VERSION);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_string(&input, "/", "digest", reading->digest, sizeof reading->digest,
                                   error);
    }
    if (status == CPPARITY_OK) {
        status = export_read_source(&input, reading->suite_path, sizeof reading->suite_path,
                                    &reading->suite_text, &reading->suite_length, error);
    }
    if (status == CPPARITY_OK) {
        status = read_cases(&input, reading, error);
    }
    if (status == CPPARITY_OK) {
        cpparity_digest digest =
            attention_export_digest_start(reading->suite_text, reading->suite_length);
        for (int64_t i = 0; i < reading->case_count; i++) {
            attention_export_digest_case(&digest, reading->cases[i].name,
                                         reading->cases[i].input_seed);
        }
        char hex[CPPARITY_DIGEST_HEX];
        cpparity_digest_hex(&digest, hex);
        if (strcmp(hex, reading->digest) != 0) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: /: digest %s does not match its /source and cases "
                                        "(%s): the export was changed after it was made",
                                        path, reading->digest, hex);
        }
    }
    hdf5_input_close(&input);
    if (status != CPPARITY_OK) {
        attention_export_reading_free(reading);
    }
    return status;
}

/* The whole read, in the guard's child (hdf5_guard.h): context is the path. */
static cpparity_status read_in_child(void *context, cpparity_error *error) {
    attention_export_reading reading;
    const cpparity_status status = read_path(context, &reading, error);
    attention_export_reading_free(&reading);
    return status;
}

cpparity_status attention_export_read(const char *path, attention_export_reading *reading,
                                      cpparity_error *error) {
    memset(reading, 0, sizeof *reading);
    const cpparity_status status =
        hdf5_guard_read_path(path, read_in_child, (void *)(uintptr_t)path, error);
    return status == CPPARITY_OK ? read_path(path, reading, error) : status;
}

void attention_export_reading_free(attention_export_reading *reading) {
    free(reading->suite_text);
    free(reading->cases);
    memset(reading, 0, sizeof *reading);
}
