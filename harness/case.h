/*
 * case.h — one parity case and a suite of them, as read from a YAML case file
 * (../shared/spec/interface.md; the schema is documented in cases/README.md).
 *
 * A case is a definition shared by the reference, the implementation under test and the
 * harness: the model configuration, the batch layout (per row: left padding, document lengths,
 * right padding), the cp sizes and dtypes to run, the seed, the tolerances with where each came
 * from, and optionally the refusal it must produce.
 */
#ifndef CPPARITY_HARNESS_CASE_H
#define CPPARITY_HARNESS_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/model_config.h"

#define CPPARITY_CASE_NAME 128
#define CPPARITY_MAX_CP_SIZES 16
#define CPPARITY_REFUSAL_TEXT 256

typedef enum cpparity_dtype {
    CPPARITY_DTYPE_F32 = 0,  /* "f32" */
    CPPARITY_DTYPE_BF16 = 1, /* "bf16" */
} cpparity_dtype;
#define CPPARITY_DTYPE_COUNT 2

typedef enum cpparity_tensor_kind {
    CPPARITY_KIND_LOSS = 0,   /* "loss" */
    CPPARITY_KIND_LOGITS = 1, /* "logits" */
    CPPARITY_KIND_GRADS = 2,  /* "grads": every parameter gradient */
} cpparity_tensor_kind;
#define CPPARITY_KIND_COUNT 3

typedef enum cpparity_tolerance_origin {
    CPPARITY_ORIGIN_DEFAULT = 0, /* built into cpparity (harness/tolerance.c) */
    CPPARITY_ORIGIN_SUITE = 1,   /* the suite's defaults: */
    CPPARITY_ORIGIN_CASE = 2,    /* the case itself */
} cpparity_tolerance_origin;

/* err_cp <= ratio × err_baseline + floor, and err_baseline <= ceiling (tolerances.md). */
typedef struct cpparity_tolerance {
    double ratio;                             /* multiple of the cp = 1 baseline's error */
    double floor;                             /* absolute allowance added to it */
    double ceiling;                           /* the baseline's own limit against float64 */
    cpparity_tolerance_origin ratio_origin;   /* where ratio came from */
    cpparity_tolerance_origin floor_origin;   /* where floor came from */
    cpparity_tolerance_origin ceiling_origin; /* where ceiling came from */
} cpparity_tolerance;

typedef struct cpparity_row_layout {
    int64_t left_padding;      /* leading padding tokens */
    int64_t document_count;    /* number of documents */
    int64_t *document_lengths; /* (document_count) each >= 1; owned by the suite */
    int64_t right_padding;     /* trailing padding tokens */
    bool padding_continues;    /* padding_positions: continue — padding position_ids count on
                                  through the adjacent document (HF's arange), instead of 0 */
} cpparity_row_layout;

typedef struct cpparity_case {
    char name[CPPARITY_CASE_NAME];               /* unique within the suite */
    char description[256];                       /* optional free text, "" when absent */
    int64_t line;                                /* 1-based line of the case in its file */
    cpparity_model_config model;                 /* validated */
    int64_t seq_len;                             /* S: every row adds up to it */
    int64_t batch_size;                          /* B = number of rows */
    cpparity_row_layout *rows;                   /* (batch_size) owned by the suite */
    int64_t cp_sizes[CPPARITY_MAX_CP_SIZES];     /* distinct, each >= 1 */
    int cp_count;                                /* >= 1 */
    cpparity_dtype dtypes[CPPARITY_DTYPE_COUNT]; /* distinct */
    int dtype_count;                             /* >= 1 */
    uint64_t seed;                               /* fixture seed */
    cpparity_tolerance tolerances[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT]; /* resolved */
    bool expect_refuse;                  /* the implementation must refuse this case */
    char refusal[CPPARITY_REFUSAL_TEXT]; /* text the refusal message must contain */
} cpparity_case;

typedef struct cpparity_suite {
    char path[512];       /* the file it was read from */
    cpparity_case *cases; /* (count) in file order */
    int64_t count;        /* number of cases */
} cpparity_suite;

/* Reads and validates a suite file. On error returns CPPARITY_ERROR_INPUT with a message
 * "PATH:LINE:COLUMN: ..." naming the offending key ("PATH: cannot read: ..." for an unreadable
 * file; CPPARITY_ERROR_RUNTIME only when out of memory), and leaves suite empty. The suite is
 * cleared on entry: free a previously loaded one first. */
cpparity_status cpparity_suite_load(const char *path, cpparity_suite *suite, cpparity_error *error);

/* The same from YAML text in memory; display_path is used in messages. */
cpparity_status cpparity_suite_load_text(const char *text, size_t length, const char *display_path,
                                         cpparity_suite *suite, cpparity_error *error);

/* Releases everything a load allocated; safe on a zeroed suite. */
void cpparity_suite_free(cpparity_suite *suite);

/* The case with this exact name, or NULL. */
const cpparity_case *cpparity_suite_find(const cpparity_suite *suite, const char *name);

/* "f32"/"bf16", "loss"/"logits"/"grads", "default"/"suite"/"case". */
const char *cpparity_dtype_name(cpparity_dtype dtype);
const char *cpparity_tensor_kind_name(cpparity_tensor_kind kind);
const char *cpparity_tolerance_origin_name(cpparity_tolerance_origin origin);

/* The built-in tolerance for a dtype and tensor kind (origin CPPARITY_ORIGIN_DEFAULT). */
cpparity_tolerance cpparity_tolerance_default(cpparity_dtype dtype, cpparity_tensor_kind kind);

#endif
