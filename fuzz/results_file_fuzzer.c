/*
 * results_file_fuzzer.c — libFuzzer target for the results file reader
 * (results_model/results_reader.h), which `cpparity report`, `diff` and the nightly trend run on
 * files that live for months on shared disks.
 *
 * Every input is an HDF5 file image, read with results_file_read_image under the name "fuzz.h5"
 * (in memory: HDF5's core driver), and the reader's contract is checked:
 *   - success: error status OK, the results' path is the name; they are then freed
 *     (read_results_free);
 *   - failure: the status is CPPARITY_ERROR_INPUT (bad input, its message beginning with
 *     "fuzz.h5") or CPPARITY_ERROR_RUNTIME (out of memory) and equals the error's, the message
 *     is non-empty and NUL-terminated inside its buffer, and nothing is left half-read (no item,
 *     case or discrimination row).
 * In both cases every HDF5 object the reader opened must be closed again (H5Fget_obj_count).
 * Anything else is printed and abort()ed, so libFuzzer records the input as a crash. The seeds
 * (fuzz/results-corpus/) are small results files of `cpparity run` and `cpparity judge`, written
 * with checksums everywhere (docs/results-file.md, "Integrity"), so most mutations are refused
 * by HDF5's checksums; what gets through exercises the reader's own checks. HDF5 itself is not
 * instrumented: a crash inside it shows in the stack. How to run it: fuzz/README.md.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "common/error.h"
#include "fuzz/fuzz_contract.h"
#include "results_model/results_reader.h"

#define DISPLAY_NAME "fuzz.h5"
#define TARGET "results_file_fuzzer"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    read_results results;
    cpparity_error error;
    memset(&results, 0xA5, sizeof results); /* the reader must clear it on entry */
    memset(&error, 0xA5, sizeof error);     /* and set every field it reports */
    const cpparity_status status =
        results_file_read_image(data, size, DISPLAY_NAME, &results, &error);
    /* every file, group, dataset, type, space and attribute the reader opened is closed again */
    const ssize_t still_open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (still_open != 0) {
        fprintf(stderr, "results_file_fuzzer: %zd HDF5 objects left open\n", still_open);
        fuzz_contract_broken(TARGET, "HDF5 objects left open", status, &error);
    }
    if (status == CPPARITY_OK) {
        fuzz_check_success(TARGET, status, &error);
        if (strcmp(results.path, DISPLAY_NAME) != 0) {
            fuzz_contract_broken(TARGET, "success without the name as the results' path", status,
                                 &error);
        }
        read_results_free(&results);
        return 0;
    }
    fuzz_check_failure(TARGET, status, &error, DISPLAY_NAME, false);
    if (results.item_count != 0 || results.case_count != 0 || results.discrimination_count != 0) {
        fuzz_contract_broken(TARGET, "failure with something half-read", status, &error);
    }
    read_results_free(&results);
    return 0;
}
