/* selftest_file.c — the self-test's results file (see selftest_file.h). */
#include "results_model/selftest_file.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "results_model/hdf5_util.h"
#include "results_model/results_file.h"

#define FAULT_NAME 32 /* bytes of a fault name in a row, NUL included */

typedef struct fault_row {
    char fault[FAULT_NAME];
    int8_t applicable;
    char note[SELFTEST_NOTE_TEXT];
    char bug[SELFTEST_NOTE_TEXT];
    char planted_in[SELFTEST_NOTE_TEXT];
    int64_t cases_caught;
    double strongest, detection_ratio, seconds;
} fault_row;

typedef struct seed_row {
    int64_t seed;
    int64_t failures;
    double worst_ratio;
    char worst[SELFTEST_HOW_TEXT];
} seed_row;

static void copy_text(char *out, size_t size, const char *text) {
    snprintf(out, size, "%s", text != NULL ? text : "");
}

static cpparity_status write_faults(hid_t group, const selftest_matrix *matrix,
                                    cpparity_error *error) {
    fault_row *rows = calloc((size_t)matrix->fault_count + 1, sizeof *rows);
    if (rows == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (fault rows)");
    }
    for (int64_t f = 0; f < matrix->fault_count; f++) {
        const selftest_fault_row *row = &matrix->faults[f];
        const cpparity_fault_info *info = &cpparity_faults[row->fault];
        copy_text(rows[f].fault, sizeof rows[f].fault, info->name);
        rows[f].applicable = row->applicable ? 1 : 0;
        copy_text(rows[f].note, sizeof rows[f].note, row->note);
        copy_text(rows[f].bug, sizeof rows[f].bug, info->bug);
        copy_text(rows[f].planted_in, sizeof rows[f].planted_in, info->where);
        rows[f].cases_caught = row->cases_caught;
        rows[f].strongest = row->strongest;
        rows[f].detection_ratio = row->detection_ratio;
        rows[f].seconds = row->seconds;
    }
    const hdf5_member members[] = {
        {"fault", offsetof(fault_row, fault), 0, FAULT_NAME},
        {"applicable", offsetof(fault_row, applicable), H5T_NATIVE_INT8, 0},
        {"note", offsetof(fault_row, note), 0, SELFTEST_NOTE_TEXT},
        {"bug", offsetof(fault_row, bug), 0, SELFTEST_NOTE_TEXT},
        {"planted_in", offsetof(fault_row, planted_in), 0, SELFTEST_NOTE_TEXT},
        {"cases_caught", offsetof(fault_row, cases_caught), H5T_NATIVE_INT64, 0},
        {"strongest", offsetof(fault_row, strongest), H5T_NATIVE_DOUBLE, 0},
        {"detection_ratio", offsetof(fault_row, detection_ratio), H5T_NATIVE_DOUBLE, 0},
        {"seconds", offsetof(fault_row, seconds), H5T_NATIVE_DOUBLE, 0},
    };
    const hid_t type =
        hdf5_compound_type(sizeof(fault_row), members, sizeof members / sizeof *members, error);
    cpparity_status status = type < 0 ? CPPARITY_ERROR_RUNTIME : CPPARITY_OK;
    if (status == CPPARITY_OK) {
        status = hdf5_write_compound(group, "faults", type, matrix->fault_count, rows,
                                     "the matrix's rows: each fault planted, where, whether it "
                                     "could be, how many cases caught it and its detection "
                                     "ratio (the second-strongest catching case's)",
                                     error);
        status = HDF5_CLOSE(type, status, error);
    }
    free(rows);
    return status;
}

static cpparity_status write_seeds(hid_t group, const selftest_matrix *matrix,
                                   cpparity_error *error) {
    seed_row *rows = calloc((size_t)matrix->seed_count + 1, sizeof *rows);
    if (rows == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (seed rows)");
    }
    for (int64_t s = 0; s < matrix->seed_count; s++) {
        rows[s].seed = (int64_t)matrix->seeds[s].seed;
        rows[s].failures = matrix->seeds[s].failures;
        rows[s].worst_ratio = matrix->seeds[s].worst_ratio;
        copy_text(rows[s].worst, sizeof rows[s].worst, matrix->seeds[s].worst);
    }
    const hdf5_member members[] = {
        {"seed", offsetof(seed_row, seed), H5T_NATIVE_INT64, 0},
        {"failures", offsetof(seed_row, failures), H5T_NATIVE_INT64, 0},
        {"worst_ratio", offsetof(seed_row, worst_ratio), H5T_NATIVE_DOUBLE, 0},
        {"worst", offsetof(seed_row, worst), 0, SELFTEST_HOW_TEXT},
    };
    const hid_t type =
        hdf5_compound_type(sizeof(seed_row), members, sizeof members / sizeof *members, error);
    cpparity_status status = type < 0 ? CPPARITY_ERROR_RUNTIME : CPPARITY_OK;
    if (status == CPPARITY_OK) {
        status = hdf5_write_compound(group, "seeds", type, matrix->seed_count, rows,
                                     "clean reruns under other seeds: failures are false alarms; "
                                     "worst_ratio is the largest ratio of a passing item",
                                     error);
        status = HDF5_CLOSE(type, status, error);
    }
    free(rows);
    return status;
}

/* The matrix datasets caught, ratio, how ([F, C]) and the case names ([C]). */
static cpparity_status write_cells(hid_t group, const selftest_matrix *matrix,
                                   cpparity_error *error) {
    const int64_t F = matrix->fault_count, C = matrix->case_count, cells = F * C;
    int8_t *caught = calloc((size_t)cells + 1, sizeof *caught);
    double *ratio = calloc((size_t)cells + 1, sizeof *ratio);
    char *how = calloc((size_t)cells + 1, SELFTEST_HOW_TEXT);
    char *names = calloc((size_t)C + 1, CPPARITY_CASE_NAME);
    hid_t how_type = H5I_INVALID_HID, name_type = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_OK;
    if (caught == NULL || ratio == NULL || how == NULL || names == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (matrix)");
        goto done;
    }
    for (int64_t f = 0; f < F; f++) {
        for (int64_t c = 0; c < C; c++) {
            const selftest_cell *cell = selftest_matrix_cell(matrix, f, c);
            caught[f * C + c] = cell->caught ? 1 : 0;
            ratio[f * C + c] = cell->ratio;
            copy_text(how + (f * C + c) * SELFTEST_HOW_TEXT, SELFTEST_HOW_TEXT, cell->how);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        copy_text(names + c * CPPARITY_CASE_NAME, CPPARITY_CASE_NAME, matrix->cases[c]->name);
    }
    const int64_t dims[2] = {F, C};
    HDF5_CHECK(how_type = hdf5_string_type(SELFTEST_HOW_TEXT), error, "creating a string type");
    HDF5_CHECK(name_type = hdf5_string_type(CPPARITY_CASE_NAME), error, "creating a string type");
    if (hdf5_write_dataset(group, "cases", name_type, 1, &C, names,
                           "the matrix's columns: case names in suite order",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "caught", H5T_NATIVE_INT8, 2, dims, caught,
                           "[fault, case]: 1 when an item of the case failed or errored with the "
                           "fault planted",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "ratio", H5T_NATIVE_DOUBLE, 2, dims, ratio,
                           "[fault, case]: the largest error/limit ratio of the catching items' "
                           "tensors (inf: non-finite, ranks differ or an error; NaN: not caught)",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "how", how_type, 2, dims, how,
                           "[fault, case]: the item and tensor that caught it",
                           error) != CPPARITY_OK) {
        status = CPPARITY_ERROR_RUNTIME;
    }
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    status = HDF5_CLOSE(how_type, status, error);
    status = HDF5_CLOSE(name_type, status, error);
    free(caught);
    free(ratio);
    free(how);
    free(names);
    return status;
}

static cpparity_status write_selftest(hid_t file, const void *context, cpparity_error *error) {
    const selftest_matrix *matrix = context;
    hid_t group = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_OK;
    HDF5_CHECK(group = H5Gcreate2(file, "selftest", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating /selftest");
    const hdf5_named_int64 integers[] = {
        {"passed", matrix->passed ? 1 : 0},
        {"minimum_cases", SELFTEST_MINIMUM_CASES},
        {"clean_failures", matrix->clean_failures},
        {"false_alarms", matrix->false_alarms},
    };
    if (hdf5_attributes_int64(group, integers, sizeof integers / sizeof *integers, error) !=
            CPPARITY_OK ||
        hdf5_attribute_double(group, "clean_worst_ratio", matrix->clean_worst_ratio, error) !=
            CPPARITY_OK ||
        hdf5_attribute_string(group, "clean_worst", matrix->clean_worst, error) != CPPARITY_OK ||
        hdf5_attribute_double(group, "smallest_detection_ratio", matrix->smallest_detection_ratio,
                              error) != CPPARITY_OK ||
        hdf5_attribute_string(group, "weakest_fault",
                              matrix->weakest_fault >= 0
                                  ? cpparity_fault_name((cpparity_fault)matrix->weakest_fault)
                                  : "",
                              error) != CPPARITY_OK ||
        hdf5_attribute_double(group, "seconds", matrix->seconds, error) != CPPARITY_OK ||
        write_faults(group, matrix, error) != CPPARITY_OK ||
        write_seeds(group, matrix, error) != CPPARITY_OK ||
        write_cells(group, matrix, error) != CPPARITY_OK) {
        status = CPPARITY_ERROR_RUNTIME;
    }
    return HDF5_CLOSE(group, status, error);
fail:
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status selftest_file_write(const run_results *clean, const selftest_matrix *matrix,
                                    const char *path, cpparity_error *error) {
    return results_file_write_extended(clean, path, write_selftest, matrix, error);
}
