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
#include "fuzz/fuzz_contract.h"
#include "harness/suite/case_file.h"

#define DISPLAY_PATH "fuzz.yaml"
#define TARGET "case_file_fuzzer"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cpparity_suite suite;
    cpparity_error error;
    memset(&suite, 0xA5, sizeof suite); /* the loader must clear it on entry */
    memset(&error, 0xA5, sizeof error); /* and set every field it reports */

    /* data is not NUL-terminated: the loader must read only `size` bytes (ASan checks). */
    cpparity_status status =
        cpparity_suite_load_text((const char *)data, size, DISPLAY_PATH, &suite, &error);

    if (status == CPPARITY_OK) {
        fuzz_check_success(TARGET, status, &error);
        if (suite.count < 1 || suite.cases == NULL) {
            fuzz_contract_broken(TARGET, "success with no cases", status, &error);
        }
        if (memchr(suite.path, '\0', sizeof suite.path) == NULL ||
            strcmp(suite.path, DISPLAY_PATH) != 0) {
            fuzz_contract_broken(TARGET, "success without the display path as the suite's path",
                                 status, &error);
        }
        cpparity_suite_free(&suite);
        return 0;
    }
    fuzz_check_failure(TARGET, status, &error, DISPLAY_PATH ":", true);
    if (suite.cases != NULL || suite.count != 0) {
        fuzz_contract_broken(TARGET, "failure with a non-empty suite", status, &error);
    }
    return 0;
}
