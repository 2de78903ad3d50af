/*
 * rank_dump_fuzzer.c — libFuzzer target for the rank dump reader of `cpparity judge`
 * (harness/storage/rank_dump.h), which reads files other people's frameworks wrote.
 *
 * Every input is an HDF5 file image, read with rank_dump_read_image under the name "fuzz.h5" as
 * a dump of the case of fuzz/rank-dump-case.yaml (loaded once), and the reader's contract is
 * checked:
 *   - success: error status OK, the dump's path is the name, 0 <= rank < cp, its rows and
 *     positions agree; it is then freed (rank_dump_free);
 *   - failure: the status is CPPARITY_ERROR_INPUT (bad input, the message beginning with
 *     "fuzz.h5") or CPPARITY_ERROR_RUNTIME (out of memory or an HDF5 failure), equal to the
 *     error's, the message non-empty and NUL-terminated inside its buffer, and nothing held
 *     (logits, gradients, positions all NULL);
 *   - in both cases every HDF5 object the reader opened is closed again (H5Fget_obj_count).
 * Anything else is printed and abort()ed, so libFuzzer records the input as a crash.
 *
 * Two modes. Plain (the default): the reader runs in this process, as `cpparity judge` ran it
 * before results_model/hdf5_guard.h, so a crash inside HDF5 is recorded: how the damaged inputs
 * of fuzz/rank-dump-damaged/ were found. Guarded (CPPARITY_FUZZ_GUARDED=1): the input is read as
 * the command line reads it, first in a forked child (hdf5_guard_read), then here only when the
 * child read it to the end; a child that crashed or hung is the "FILE is damaged" input error,
 * which the contract accepts: handled, not a crash. The guarded mode fuzzes the earliest format
 * (the h5py seeds) with nothing found unless the command line itself would crash. The seeds
 * (fuzz/rank-dump-corpus/) are dumps h5py wrote (tests/judge/make_dumps.py): h5py's default,
 * the earliest file format, has no metadata checksums, so mutations reach HDF5's own parsing;
 * crashes inside HDF5 show in the stack (fuzz/README.md lists those found).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <sanitizer/common_interface_defs.h>

#include "common/case.h"
#include "common/error.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "fuzz/fuzz_contract.h"
#include "results_model/hdf5_guard.h"
#include "harness/storage/rank_dump.h"
#include "harness/suite/case_file.h"

#define DISPLAY_NAME "fuzz.h5"
#define TARGET "rank_dump_fuzzer"
#define FUZZ_MOST_ROWS 4096 /* rows one dump may hold: far above the case's S, far below memory */
#define FUZZ_BOUND "4096 rows (the fuzz target's bound)"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static cpparity_suite suite;
static cpparity_tensor_table parameters;
static bool guarded;             /* CPPARITY_FUZZ_GUARDED=1 */
static long long damaged_inputs; /* guarded: inputs whose read crashed or hung in the child */

static void print_damaged(void) {
    fprintf(stderr,
            "rank_dump_fuzzer: guarded: %lld inputs crashed or hung HDF5 in the child, "
            "handled as damaged files\n",
            damaged_inputs);
}

/* In a guarded child a sanitizer's report is the child's end, not the fuzzer's finding: the
 * parent reports the read as damaged. Exit at once instead of the fuzzer's death callback, which
 * would record the input as a crash. */
static void child_death(void) {
    _exit(86);
}

static void child_hook(void) {
    __sanitizer_set_death_callback(child_death);
}

/* An input to read in the guard's child. */
typedef struct fuzz_image {
    const uint8_t *data;
    size_t size;
} fuzz_image;

/* no export: any digest, cp and dtype; the rows a mutated file claims are bounded before
 * anything of their size is allocated, as a judge's padding bound bounds them */
static const rank_dump_expect expect = {NULL, NULL, 0, NULL, 0, -1, FUZZ_MOST_ROWS, FUZZ_BOUND};

static cpparity_status read_in_child(void *context, cpparity_error *error) {
    const fuzz_image *image = context;
    rank_dump dump;
    const cpparity_status status =
        rank_dump_read_image(image->data, image->size, DISPLAY_NAME, &suite.cases[0], &parameters,
                             &expect, &dump, error);
    rank_dump_free(&dump);
    return status;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cpparity_error error;
    if (cpparity_suite_load(CPPARITY_FUZZ_DIR "/rank-dump-case.yaml", &suite, &error) !=
            CPPARITY_OK ||
        cpparity_model_parameter_table(&suite.cases[0].model, &parameters, &error) != CPPARITY_OK) {
        fprintf(stderr, "rank_dump_fuzzer: %s\n", error.message);
        abort();
    }
    const char *mode = getenv("CPPARITY_FUZZ_GUARDED");
    guarded = mode != NULL && strcmp(mode, "1") == 0;
    hdf5_guard_set_child_hook(child_hook);
    if (guarded) {
        atexit(print_damaged);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rank_dump dump;
    cpparity_error error;
    memset(&dump, 0xA5, sizeof dump);   /* the reader must clear it on entry */
    memset(&error, 0xA5, sizeof error); /* and set every field it reports */
    cpparity_status status = CPPARITY_OK;
    if (guarded) {
        fuzz_image image = {data, size};
        status = hdf5_guard_read(DISPLAY_NAME, (int64_t)size, read_in_child, &image, &error);
        damaged_inputs += status != CPPARITY_OK && strstr(error.message, " is damaged: ") != NULL;
        if (status != CPPARITY_OK) { /* read no further, as the command line */
            memset(&dump, 0, sizeof dump);
            dump.path = DISPLAY_NAME;
        }
    }
    if (status == CPPARITY_OK) {
        status = rank_dump_read_image(data, size, DISPLAY_NAME, &suite.cases[0], &parameters,
                                      &expect, &dump, &error);
    }
    const ssize_t still_open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (still_open != 0) {
        fprintf(stderr, "rank_dump_fuzzer: %zd HDF5 objects left open\n", still_open);
        fuzz_contract_broken(TARGET, "HDF5 objects left open", status, &error);
    }
    if (status == CPPARITY_OK) {
        fuzz_check_success(TARGET, status, &error);
        if (dump.path == NULL || strcmp(dump.path, DISPLAY_NAME) != 0) {
            fuzz_contract_broken(TARGET, "success without the name as the dump's path", status,
                                 &error);
        }
        if (dump.cp < 1 || dump.rank < 0 || dump.rank >= dump.cp || dump.rows < 0 ||
            (dump.rows > 0 && dump.positions == NULL)) {
            fuzz_contract_broken(TARGET, "success with an impossible rank, cp or row count", status,
                                 &error);
        }
        rank_dump_free(&dump);
        return 0;
    }
    fuzz_check_failure(TARGET, status, &error, DISPLAY_NAME, false);
    if (dump.file.file > 0 || dump.gradients != NULL || dump.positions != NULL) {
        fuzz_contract_broken(TARGET, "failure with something still held", status, &error);
    }
    return 0;
}
