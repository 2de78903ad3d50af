/*
 * selftest_file.h — the results file of `cpparity selftest` (docs/results-file.md): the clean
 * run in the layout of results_file.h, plus a /selftest group with the detection matrix
 * (results_model/selftest_matrix.h):
 *
 *   /selftest          attributes: passed (0/1), minimum_cases, clean_failures,
 *                      clean_worst_ratio, clean_worst (string), false_alarms,
 *                      smallest_detection_ratio, weakest_fault (string, "" if none), seconds
 *     cases            string [C]: case names, the matrix's columns
 *     faults           compound [F]: fault (S32), applicable (int8), note (S256), bug (S256),
 *                      planted_in (S256), cases_caught (int64), strongest, detection_ratio,
 *                      seconds (float64); the matrix's rows
 *     caught           int8 [F, C]: 1 when case c caught fault f
 *     ratio            float64 [F, C]: the cell's detection ratio (NaN when not caught;
 *                      inf for a non-finite value, differing ranks or an error)
 *     how              string [F, C]: the item and tensor that caught it ("" when not)
 *     seeds            compound [N]: seed (uint64 as int64), failures (int64), worst_ratio
 *                      (float64), worst (S160)
 *
 * Published like results_file_write: complete or not at all, never over an existing file.
 */
#ifndef CPPARITY_RESULTS_MODEL_SELFTEST_FILE_H
#define CPPARITY_RESULTS_MODEL_SELFTEST_FILE_H

#include "common/error.h"
#include "results_model/results.h"
#include "results_model/selftest_matrix.h"

cpparity_status selftest_file_write(const run_results *clean, const selftest_matrix *matrix,
                                    const char *path, cpparity_error *error);

#endif
