/*
 * results_layout.h — the rows of the results file's metrics and discrimination tables as C
 * structs and their HDF5 compound types, shared by the writer (results_file.h) and the reader
 * (results_reader.h), so the two cannot drift apart. Fields are documented in results_file.h and
 * docs/results-file.md.
 */
#ifndef CPPARITY_RESULTS_MODEL_RESULTS_LAYOUT_H
#define CPPARITY_RESULTS_MODEL_RESULTS_LAYOUT_H

#include <hdf5.h>
#include <stdint.h>

#include "common/error.h"
#include "results_model/results.h"

/* One row of a cp_<n>/metrics table, as the compound type built by results_metrics_type describes
 * it. */
#define SHORT_NAME 8 /* bytes of a kind or tolerance origin name in a row, NUL included */

typedef struct metrics_row {
    char tensor[CPPARITY_RECORD_NAME]; /* tensor_record.name */
    char kind[SHORT_NAME];             /* "loss", "logits", "grads" */
    int32_t rank;                      /* rank of the CP group */
    int64_t count;                     /* compare_metrics fields, in order */
    int64_t compared;                  /* elements included in the error */
    int64_t excluded;                  /* elements excluded by the include mask */
    int64_t nonfinite;                 /* non-finite values where the reference is finite */
    int64_t first_nonfinite;           /* flat index of the first, -1 if none */
    double max_abs;                    /* max |x - r| */
    double error_norm;                 /* ||x - r|| */
    double reference_norm;             /* ||r|| */
    double relative_l2;                /* the error the pass rule uses */
    int8_t absolute;                   /* 1 when relative_l2 is absolute (zero reference) */
    int64_t worst_index;               /* flat index of the worst element, -1 if none */
    double worst_value;                /* x there */
    double worst_reference;            /* r there */
    int64_t w0, w1, w2, w3;            /* coordinates of worst_index, -1 where unused */
    int64_t position_offset;           /* first global position of the rank's slice */
    double baseline_error;             /* the naive same-dtype baseline's error on the same
                                          elements */
    double cp1_error;                  /* the same tensor's error at cp = 1, NaN at cp = 1 */
    double ratio;                      /* tolerance applied */
    double floor;                      /* tolerance applied */
    double ceiling;                    /* tolerance applied */
    char ratio_origin[SHORT_NAME];     /* "default", "suite", "case" */
    char floor_origin[SHORT_NAME];     /* idem */
    char ceiling_origin[SHORT_NAME];   /* idem */
    double limit;                      /* compare_decision.limit */
    double cp1_limit;                  /* compare_decision.cp1_limit */
    int8_t passed;                     /* compare_decision.passed */
    char reason[CPPARITY_REASON_TEXT]; /* compare_decision.reason */
} metrics_row;

/* A row holds each record's strings whole. */
#define FIELD_SIZE(type, field) sizeof(((type *)0)->field)
_Static_assert(FIELD_SIZE(metrics_row, tensor) == FIELD_SIZE(tensor_record, name),
               "metrics_row.tensor holds a tensor_record name");
_Static_assert(FIELD_SIZE(metrics_row, reason) == FIELD_SIZE(compare_decision, reason),
               "metrics_row.reason holds a compare_decision reason");
_Static_assert(SHORT_NAME > sizeof "logits" && SHORT_NAME >= sizeof "default",
               "kind and origin names fit metrics_row");

/* The compound type of metrics_row (the caller closes it), or a negative id with error filled. */
hid_t results_metrics_type(cpparity_error *error);

/* One row of /discrimination: can a case tell an implementation that drops a mask feature? */
typedef struct discrimination_row {
    char case_name[CPPARITY_CASE_NAME];  /* field "case" */
    char feature[CPPARITY_FEATURE_NAME]; /* "window", "chunks", "documents", "padding" */
    double change;                       /* largest relative change with the feature off */
    double threshold;                    /* 10 × the tightest limit */
    int8_t discriminating;               /* change >= threshold */
} discrimination_row;

_Static_assert(FIELD_SIZE(discrimination_row, case_name) == FIELD_SIZE(cpparity_case, name),
               "discrimination_row.case_name holds a case name");
_Static_assert(FIELD_SIZE(discrimination_row, feature) ==
                   FIELD_SIZE(discrimination_record, feature),
               "discrimination_row.feature holds a feature name");

/* The compound type of discrimination_row, as results_metrics_type. */
hid_t results_discrimination_type(cpparity_error *error);

#endif
