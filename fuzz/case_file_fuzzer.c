/*
 * case_file_fuzzer.c — libFuzzer target for the YAML case loader (harness/suite/case_file.h).
 *
 * Every input is loaded with cpparity_suite_load_text under the display path "fuzz.yaml" and the
 * loader's contract is checked:
 *   - success: error status OK, at least one case, the suite's path is the display path; the
 *     suite is then freed (LeakSanitizer reports anything cpparity_suite_free leaves behind);
 *   - failure: the status is CPPARITY_ERROR_INPUT or CPPARITY_ERROR_RUNTIME and equals the
 *     error's, the message is non-empty, NUL-terminated inside its buffer and begins with
 *     "fuzz.yaml:", and the suite is left empty.
 * Anything else is printed and abort()ed, so libFuzzer records the input as a crash. Memory
 * errors, undefined behaviour and leaks are found by the sanitizers the target is built with
 * (fuzz/CMakeLists.txt). How to run it: fuzz/README.md.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/case.h"
#include "common/error.h"
#include "harness/suite/case_file.h"

#define DISPLAY_PATH "fuzz.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void contract_broken(const char *what, cpparity_status status, const cpparity_error *error) {
    fprintf(stderr, "case_file_fuzzer: contract broken: %s (returned %d, error status %d)\n", what,
            (int)status, (int)error->status);
    if (memchr(error->message, '\0', sizeof error->message) != NULL) {
        fprintf(stderr, "case_file_fuzzer: message: %s\n", error->message);
    }
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cpparity_suite suite;
    cpparity_error error;
    memset(&suite, 0xA5, sizeof suite); /* the loader must clear it on entry */
    memset(&error, 0xA5, sizeof error); /* and set every field it reports */

    /* data is not NUL-terminated: the loader must read only `size` bytes (ASan checks). */
    cpparity_status status =
        cpparity_suite_load_text((const char *)data, size, DISPLAY_PATH, &suite, &error);

    if (status == CPPARITY_OK) {
        if (error.status != CPPARITY_OK) {
            contract_broken("success with an error status set", status, &error);
        }
        if (suite.count < 1 || suite.cases == NULL) {
            contract_broken("success with no cases", status, &error);
        }
        if (memchr(suite.path, '\0', sizeof suite.path) == NULL ||
            strcmp(suite.path, DISPLAY_PATH) != 0) {
            contract_broken("success without the display path as the suite's path", status, &error);
        }
        cpparity_suite_free(&suite);
        return 0;
    }
    if (status != CPPARITY_ERROR_INPUT && status != CPPARITY_ERROR_RUNTIME) {
        contract_broken("a status other than OK, INPUT or RUNTIME", status, &error);
    }
    if (error.status != status) {
        contract_broken("the error's status differs from the one returned", status, &error);
    }
    if (memchr(error.message, '\0', sizeof error.message) == NULL) {
        contract_broken("the message is not NUL-terminated", status, &error);
    }
    if (error.message[0] == '\0') {
        contract_broken("the message is empty", status, &error);
    }
    if (strncmp(error.message, DISPLAY_PATH ":", strlen(DISPLAY_PATH ":")) != 0) {
        contract_broken("the message does not begin with \"" DISPLAY_PATH ":\"", status, &error);
    }
    if (suite.cases != NULL || suite.count != 0) {
        contract_broken("failure with a non-empty suite", status, &error);
    }
    return 0;
}
