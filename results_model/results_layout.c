/* results_layout.c — the metrics and discrimination tables' compound types (see
 * results_layout.h). */
#include "results_model/results_layout.h"

#include <stddef.h>

#include "results_model/hdf5_util.h"

hid_t results_metrics_type(cpparity_error *error) {
    const hdf5_member members[] = {
        {"tensor", offsetof(metrics_row, tensor), 0, FIELD_SIZE(metrics_row, tensor)},
        {"kind", offsetof(metrics_row, kind), 0, SHORT_NAME},
        {"rank", offsetof(metrics_row, rank), H5T_NATIVE_INT32, 0},
        {"count", offsetof(metrics_row, count), H5T_NATIVE_INT64, 0},
        {"compared", offsetof(metrics_row, compared), H5T_NATIVE_INT64, 0},
        {"excluded", offsetof(metrics_row, excluded), H5T_NATIVE_INT64, 0},
        {"nonfinite", offsetof(metrics_row, nonfinite), H5T_NATIVE_INT64, 0},
        {"first_nonfinite", offsetof(metrics_row, first_nonfinite), H5T_NATIVE_INT64, 0},
        {"max_abs", offsetof(metrics_row, max_abs), H5T_NATIVE_DOUBLE, 0},
        {"error_norm", offsetof(metrics_row, error_norm), H5T_NATIVE_DOUBLE, 0},
        {"reference_norm", offsetof(metrics_row, reference_norm), H5T_NATIVE_DOUBLE, 0},
        {"relative_l2", offsetof(metrics_row, relative_l2), H5T_NATIVE_DOUBLE, 0},
        {"absolute", offsetof(metrics_row, absolute), H5T_NATIVE_INT8, 0},
        {"worst_index", offsetof(metrics_row, worst_index), H5T_NATIVE_INT64, 0},
        {"worst_value", offsetof(metrics_row, worst_value), H5T_NATIVE_DOUBLE, 0},
        {"worst_reference", offsetof(metrics_row, worst_reference), H5T_NATIVE_DOUBLE, 0},
        {"w0", offsetof(metrics_row, w0), H5T_NATIVE_INT64, 0},
        {"w1", offsetof(metrics_row, w1), H5T_NATIVE_INT64, 0},
        {"w2", offsetof(metrics_row, w2), H5T_NATIVE_INT64, 0},
        {"w3", offsetof(metrics_row, w3), H5T_NATIVE_INT64, 0},
        {"position_offset", offsetof(metrics_row, position_offset), H5T_NATIVE_INT64, 0},
        {"baseline_error", offsetof(metrics_row, baseline_error), H5T_NATIVE_DOUBLE, 0},
        {"cp1_error", offsetof(metrics_row, cp1_error), H5T_NATIVE_DOUBLE, 0},
        {"ratio", offsetof(metrics_row, ratio), H5T_NATIVE_DOUBLE, 0},
        {"floor", offsetof(metrics_row, floor), H5T_NATIVE_DOUBLE, 0},
        {"ceiling", offsetof(metrics_row, ceiling), H5T_NATIVE_DOUBLE, 0},
        {"ratio_origin", offsetof(metrics_row, ratio_origin), 0, SHORT_NAME},
        {"floor_origin", offsetof(metrics_row, floor_origin), 0, SHORT_NAME},
        {"ceiling_origin", offsetof(metrics_row, ceiling_origin), 0, SHORT_NAME},
        {"limit", offsetof(metrics_row, limit), H5T_NATIVE_DOUBLE, 0},
        {"cp1_limit", offsetof(metrics_row, cp1_limit), H5T_NATIVE_DOUBLE, 0},
        {"passed", offsetof(metrics_row, passed), H5T_NATIVE_INT8, 0},
        {"reason", offsetof(metrics_row, reason), 0, FIELD_SIZE(metrics_row, reason)},
    };
    return hdf5_compound_type(sizeof(metrics_row), members, sizeof members / sizeof *members,
                              error);
}

hid_t results_discrimination_type(cpparity_error *error) {
    const hdf5_member members[] = {
        {"case", offsetof(discrimination_row, case_name), 0,
         FIELD_SIZE(discrimination_row, case_name)},
        {"feature", offsetof(discrimination_row, feature), 0,
         FIELD_SIZE(discrimination_row, feature)},
        {"change", offsetof(discrimination_row, change), H5T_NATIVE_DOUBLE, 0},
        {"threshold", offsetof(discrimination_row, threshold), H5T_NATIVE_DOUBLE, 0},
        {"discriminating", offsetof(discrimination_row, discriminating), H5T_NATIVE_INT8, 0},
    };
    return hdf5_compound_type(sizeof(discrimination_row), members, sizeof members / sizeof *members,
                              error);
}
