/*
 * case.h — one parity case and a suite of them (the schema is in cases/README.md).
 *
 * A case is a definition shared by the reference, the fixtures, the implementation under test
 * and the harness: the model configuration, the batch layout (per row: left padding, document
 * lengths, right padding), the cp sizes and dtypes to run, the seed, the tolerances with where
 * each came from, and optionally the refusal it must produce. It holds no math; the YAML loader
 * is harness/suite/case_file.h.
 */
#ifndef CPPARITY_COMMON_CASE_H
#define CPPARITY_COMMON_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/model_config.h"

#define CPPARITY_CASE_NAME 128        /* bytes of a case name, NUL included */
#define CPPARITY_CASE_DESCRIPTION 256 /* bytes of a case description, NUL included */
#define CPPARITY_MAX_CP_SIZES 16      /* cp sizes one case may list */
#define CPPARITY_REFUSAL_TEXT 256     /* bytes of an expected refusal text, NUL included */
#define CPPARITY_PATH 512             /* bytes of a suite path kept for reports, NUL included */

typedef enum cpparity_dtype {
    CPPARITY_DTYPE_F32 = 0,  /* "f32" */
    CPPARITY_DTYPE_BF16 = 1, /* "bf16" */
} cpparity_dtype;
#define CPPARITY_DTYPE_COUNT 2
extern const char *const cpparity_dtype_names[CPPARITY_DTYPE_COUNT];

typedef enum cpparity_tensor_kind {
    CPPARITY_KIND_LOSS = 0,   /* "loss" */
    CPPARITY_KIND_LOGITS = 1, /* "logits" */
    CPPARITY_KIND_GRADS = 2,  /* "grads": every parameter gradient */
} cpparity_tensor_kind;
#define CPPARITY_KIND_COUNT 3
extern const char *const cpparity_tensor_kind_names[CPPARITY_KIND_COUNT];

typedef enum cpparity_tolerance_origin {
    CPPARITY_ORIGIN_DEFAULT = 0, /* built into cpparity (harness/judging/tolerance.c) */
    CPPARITY_ORIGIN_SUITE = 1,   /* the suite's defaults: */
    CPPARITY_ORIGIN_CASE = 2,    /* the case itself */
} cpparity_tolerance_origin;
#define CPPARITY_ORIGIN_COUNT 3
extern const char *const cpparity_tolerance_origin_names[CPPARITY_ORIGIN_COUNT];

/* err <= ratio × err_baseline + floor, and err_baseline <= ceiling (docs/tolerances.md). */
typedef struct cpparity_tolerance {
    double ratio;                             /* multiple of the baseline's error */
    double floor;                             /* absolute allowance added to it */
    double ceiling;                           /* the baseline's own limit against float64 */
    cpparity_tolerance_origin ratio_origin;   /* where ratio came from */
    cpparity_tolerance_origin floor_origin;   /* where floor came from */
    cpparity_tolerance_origin ceiling_origin; /* where ceiling came from */
} cpparity_tolerance;

/* The largest start position a document may declare (positions stay far from overflow). */
#define CPPARITY_MAX_START_POSITION ((int64_t)1 << 40)

typedef struct cpparity_row_layout {
    int64_t left_padding;      /* leading padding tokens */
    int64_t document_count;    /* number of documents */
    int64_t *document_lengths; /* (document_count) each >= 1; owned by the suite */
    int64_t right_padding;     /* trailing padding tokens */
    bool padding_continues;    /* padding_positions: continue — padding position_ids count on
                                  through the adjacent document (HF's arange), instead of 0 */
    int64_t *start_positions;  /* (document_count) position_ids of each document's first token,
                                  <= CPPARITY_MAX_START_POSITION; NULL when not given: 0, except
                                  that the first document continues the count of left padding
                                  with padding_continues. Owned by the suite */
} cpparity_row_layout;

/* What a case judges (cases/README.md, `level`). */
typedef enum cpparity_case_level {
    CPPARITY_LEVEL_MODEL = 0,     /* "model": the whole context-parallel model (the default) */
    CPPARITY_LEVEL_ATTENTION = 1, /* "attention": the attention kernel alone, one call per layer */
} cpparity_case_level;
#define CPPARITY_LEVEL_COUNT 2
extern const char *const cpparity_case_level_names[CPPARITY_LEVEL_COUNT];

/* How the padded sequence is dealt out to the ranks of a CP group (docs/masks.md, "Who holds
 * what"); the case key `layouts`. With Sp the padded length and cp the ranks:
 *   contiguous:  rank r holds [r·Sp/cp, (r + 1)·Sp/cp)                        (Sp: multiple of cp)
 *   zigzag:      2·cp chunks of Sp/(2·cp); rank r holds chunk r, then 2·cp−1−r (of 2·cp)
 *   round-robin: token t on rank t mod cp, in increasing order (chunks of one token) (of cp) */
typedef enum cpparity_layout {
    CPPARITY_LAYOUT_CONTIGUOUS = 0,  /* "contiguous" */
    CPPARITY_LAYOUT_ZIGZAG = 1,      /* "zigzag" */
    CPPARITY_LAYOUT_ROUND_ROBIN = 2, /* "round-robin" */
} cpparity_layout;
#define CPPARITY_LAYOUT_COUNT 3
extern const char *const cpparity_layout_names[CPPARITY_LAYOUT_COUNT];

/* The context-parallel algorithm of the implementation under test; the case key `algorithms`. */
typedef enum cpparity_algorithm {
    CPPARITY_ALGORITHM_ULYSSES = 0, /* "ulysses": all-to-all to heads × whole sequence */
    CPPARITY_ALGORITHM_RING = 1,    /* "ring": queries stay, key/value blocks pass round the ring */
    CPPARITY_ALGORITHM_HYBRID = 2,  /* "hybrid:UxR": Ulysses inside groups of U consecutive ranks,
                                       ring across the R groups (U·R = cp) */
} cpparity_algorithm;
#define CPPARITY_ALGORITHM_COUNT 3
extern const char *const cpparity_algorithm_names[CPPARITY_ALGORITHM_COUNT];

#define CPPARITY_MAX_ALGORITHMS 8 /* entries of one case's `algorithms` */

/* One entry of `algorithms`: an algorithm, with its degrees for hybrid. */
typedef struct cpparity_algorithm_choice {
    cpparity_algorithm kind; /* ulysses, ring or hybrid */
    int64_t ulysses_degree;  /* hybrid: U >= 2, the ranks of one Ulysses group; else 0 */
    int64_t ring_degree;     /* hybrid: R >= 2, the groups round the ring; else 0 */
} cpparity_algorithm_choice;

/* "ulysses", "ring", "hybrid:2x4" into text. */
void cpparity_algorithm_choice_name(cpparity_algorithm_choice choice, char *text, size_t size);

typedef struct cpparity_case {
    char name[CPPARITY_CASE_NAME];                  /* unique within the suite */
    char description[CPPARITY_CASE_DESCRIPTION];    /* optional free text, "" when absent */
    int64_t line;                                   /* 1-based line of the case in its file */
    cpparity_model_config model;                    /* validated */
    int64_t seq_len;                                /* S: every row adds up to it */
    int64_t batch_size;                             /* B = number of rows */
    cpparity_row_layout *rows;                      /* (batch_size) owned by the suite */
    int64_t cp_sizes[CPPARITY_MAX_CP_SIZES];        /* distinct, each >= 1 */
    int cp_count;                                   /* >= 1 */
    cpparity_dtype dtypes[CPPARITY_DTYPE_COUNT];    /* distinct */
    int dtype_count;                                /* >= 1 */
    cpparity_layout layouts[CPPARITY_LAYOUT_COUNT]; /* distinct; default [contiguous] */
    int layout_count;                               /* >= 1 */
    cpparity_algorithm_choice algorithms[CPPARITY_MAX_ALGORITHMS]; /* distinct; [ulysses] */
    int algorithm_count;                                           /* >= 1 */
    uint64_t seed;                                                 /* fixture seed */
    cpparity_tolerance tolerances[CPPARITY_DTYPE_COUNT][CPPARITY_KIND_COUNT]; /* resolved */
    cpparity_case_level level;           /* model (default) or attention */
    bool expect_refuse;                  /* the implementation must refuse this case */
    char refusal[CPPARITY_REFUSAL_TEXT]; /* text the refusal message must contain */
    char family[CPPARITY_CASE_NAME];     /* the case whose `sweep` generated this one; "" for a
                                            case as written */
} cpparity_case;

typedef struct cpparity_suite {
    char path[CPPARITY_PATH]; /* the file it was read from */
    cpparity_case *cases;     /* (count) in file order */
    int64_t count;            /* number of cases */
} cpparity_suite;

/* Releases count rows and their document lengths; safe on NULL. */
void cpparity_row_layouts_free(cpparity_row_layout *rows, int64_t count);

/* Releases everything a load allocated; safe on a zeroed suite. */
void cpparity_suite_free(cpparity_suite *suite);

/* The case with this exact name, or NULL. */
const cpparity_case *cpparity_suite_find(const cpparity_suite *suite, const char *name);

/* "f32"/"bf16", "loss"/"logits"/"grads", "default"/"suite"/"case" (from the tables above). */
const char *cpparity_dtype_name(cpparity_dtype dtype);
const char *cpparity_layout_name(cpparity_layout layout);
const char *cpparity_algorithm_name(cpparity_algorithm algorithm);
const char *cpparity_tensor_kind_name(cpparity_tensor_kind kind);
const char *cpparity_tolerance_origin_name(cpparity_tolerance_origin origin);

#endif
