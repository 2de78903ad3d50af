/*
 * case_file.h — reading YAML suite files (schema: cases/README.md) into the case types of
 * common/case.h, with libyaml's document API. Every key, type and value is checked, the suite's
 * defaults are merged into each case, tolerances are resolved with the origin of every field and
 * the model configuration is validated (common/model_config.h).
 */
#ifndef CPPARITY_HARNESS_SUITE_CASE_FILE_H
#define CPPARITY_HARNESS_SUITE_CASE_FILE_H

#include <stddef.h>

#include "common/case.h"
#include "common/error.h"

/* Reads and validates a suite file. On error returns CPPARITY_ERROR_INPUT with a message
 * "PATH:LINE:COLUMN: ..." naming the offending key ("PATH: cannot read: ..." for an unreadable
 * file; CPPARITY_ERROR_RUNTIME only when out of memory), and leaves suite empty. The suite is
 * cleared on entry: free a previously loaded one first (cpparity_suite_free). */
cpparity_status cpparity_suite_load(const char *path, cpparity_suite *suite, cpparity_error *error);

/* A suite file's bytes, whole (at most 256 MiB; cases/README.md, Limits), into *text (malloc'd,
 * not NUL-terminated; free it) and *length. CPPARITY_ERROR_INPUT naming the file when it cannot
 * be read or is too large. */
cpparity_status cpparity_suite_read(const char *path, char **text, size_t *length,
                                    cpparity_error *error);

/* The same from YAML text in memory; display_path is used in messages. */
cpparity_status cpparity_suite_load_text(const char *text, size_t length, const char *display_path,
                                         cpparity_suite *suite, cpparity_error *error);

/* The suite used when a command is given none: cases/ci.yaml of the working directory if it
 * exists, else the one in the source tree cpparity was built from. */
const char *cpparity_default_suite(void);

#endif
