/*
 * results.h — the results model: everything one `cpparity run` found, as the results file, the
 * console, JUnit and Markdown writers (reports/) and the run itself share it. It holds data
 * only; the comparisons that fill it are in harness/judging/, the writers in reports/ and
 * beside it in results_model/ (results_file.h).
 *
 * One item is one (case, cp size, dtype) run. Each item holds one tensor record per compared
 * tensor and rank: "loss", "logits" (the rank's slice of the sequence) and every parameter
 * gradient by model.md's name ("grads/<name>").
 */
#ifndef CPPARITY_RESULTS_MODEL_RESULTS_H
#define CPPARITY_RESULTS_MODEL_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"

#define CPPARITY_RECORD_NAME 112                  /* bytes of a tensor record name, NUL included */
#define CPPARITY_REASON_TEXT 160                  /* bytes of a pass/fail reason, NUL included */
#define CPPARITY_MESSAGE_TEXT CPPARITY_ERROR_TEXT /* an item's message holds an error's */
#define CPPARITY_FEATURE_NAME 16                  /* bytes of a mask feature name, NUL included */
#define CPPARITY_COMMAND_LINE 2048 /* bytes of the recorded command line, NUL included */

/* Metrics of one compared tensor against the float64 reference (docs/tolerances.md, item 1). */
typedef struct compare_metrics {
    int64_t count;           /* elements in the tensor */
    int64_t compared;        /* elements included in the error */
    int64_t excluded;        /* elements excluded by the include mask */
    int64_t nonfinite;       /* x or r non-finite (included or not) */
    int64_t first_nonfinite; /* flat index of the first such element, −1 if none */
    double max_abs;          /* max |x − r| over compared elements (0 when none) */
    double error_norm;       /* ‖x − r‖₂ over compared elements */
    double reference_norm;   /* ‖r‖₂ over compared elements */
    double relative_l2;      /* error_norm / reference_norm; error_norm when reference_norm == 0 */
    bool absolute;           /* true when relative_l2 holds an absolute norm (zero reference) */
    int64_t worst_index;     /* flat index of the max |x − r| compared element, −1 if none */
    double worst_value;      /* x at worst_index */
    double worst_reference;  /* r at worst_index */
} compare_metrics;

typedef struct compare_decision {
    bool passed;      /* the tensor passes both rules (docs/tolerances.md) */
    double limit;     /* ratio × naive baseline error + floor: the limit of the pass rule */
    double cp1_limit; /* ratio × the same tensor's error at cp = 1 + floor (the CP-only rule),
                         NaN for cp = 1 items */
    char reason[CPPARITY_REASON_TEXT]; /* why, in words: "non-finite values", "error 3e-5 > limit
                                          2e-6 = ..." */
} compare_decision;

typedef enum run_outcome {
    RUN_PASS = 0,        /* every tensor within tolerance */
    RUN_FAIL = 1,        /* a parity failure (or an expected refusal that did not happen) */
    RUN_REFUSED = 2,     /* refused as the case expected, with the expected text */
    RUN_NOT_RUN = 3,     /* not run: the reason is in message (e.g. cp does not divide ranks) */
    RUN_ERROR = 4,       /* bad input or runtime failure while running this item */
    RUN_NOT_CLAIMED = 5, /* the --kernel declares it lacks what the item needs (a capability, a
                            head dim, its supports()): not a failure, not run */
} run_outcome;

#define RUN_OUTCOME_COUNT 6
/* "PASS", "FAIL", "REFUSED", "NOT RUN", "ERROR", "NOT CLAIMED", indexed by run_outcome. */
extern const char *const run_outcome_names[RUN_OUTCOME_COUNT];
const char *run_outcome_name(run_outcome outcome);

/* Which compared tensors a results file keeps (--store). */
typedef enum run_store {
    RUN_STORE_METRICS = 0,  /* "metrics": none, only their metrics */
    RUN_STORE_FAILURES = 1, /* "failures": values and reference of failing tensors */
    RUN_STORE_ALL = 2,      /* "all": every compared tensor */
} run_store;
#define RUN_STORE_COUNT 3
extern const char *const run_store_names[RUN_STORE_COUNT];
const char *run_store_name(run_store store);

typedef struct tensor_record {
    char name[CPPARITY_RECORD_NAME]; /* "loss", "logits" or "grads/<parameter name>" */
    cpparity_tensor_kind kind;       /* loss, logits or grads */
    int rank;                        /* rank of the CP group that produced it */
    compare_metrics metrics;         /* against the float64 reference */
    int shape_rank;                  /* dimensions of the compared tensor */
    int64_t shape[4];                /* its shape: loss (), logits [B, L_r, V], grads as model.md */
    int64_t position_offset;         /* logits: global position of the rank's first row when its
                                        rows are consecutive positions, else −1 (judge_item.h) */
    int64_t worst[4];                /* coordinates of the element a failure names: the first
                                        non-finite one when there is one, else
                                        metrics.worst_index; a determinism failure's first
                                        changed element (logits: b, global position, vocab;
                                        grads: row, column) */
    double baseline_error;        /* the naive same-dtype baseline's error on the same elements */
    double cp1_error;             /* the same tensor's error at cp = 1 (rank 0), NaN at cp = 1 */
    cpparity_tolerance tolerance; /* applied, with origins */
    compare_decision decision;    /* pass or fail, limit, reason */
    float *values;                /* stored values (per --store) or NULL; owned */
    double *reference;            /* stored float64 reference or NULL; owned */
    int64_t window[3];            /* logits whose stored values are a window of the rank's rows,
                                     not the whole tensor (too large to keep whole: judge_item.h):
                                     batch row, first row, rows; values and reference are then
                                     [1, rows, V]. rows (window[2]) 0: the whole tensor */
    double *position_error;       /* logits: (shape[1]) the error along the rank's slice, per
                                     position ‖x − r‖₂ / ‖r‖₂ over batch rows and vocabulary of
                                     the compared elements (NaN where none is); NULL otherwise;
                                     owned. Kept for every logits record, passing or not */
    double *position_limit;       /* logits with position_error: (shape[1]) each position's own
                                     limit, ratio × the naive baseline's error on the same
                                     elements + floor (NaN where nothing is compared or the
                                     baseline is not finite: no per-position rule there); NULL
                                     when no per-position rule applies (no baseline); owned */
    bool position_checked;        /* logits: the per-position rule applies (docs/tolerances.md)
                                     and the next four say where it is tightest */
    int64_t position_worst;       /* the global position whose error is furthest over (or
                                     nearest to) its own limit */
    double position_worst_error; /* that position's ‖x − r‖₂ / ‖r‖₂ (batch rows, vocabulary) */
    double position_worst_baseline;    /* the naive baseline's, on the same elements */
    int64_t position_worst_element[2]; /* its largest |x − r|: batch row, vocabulary id */
    int64_t *positions;                /* logits whose rows are not consecutive positions
                                          (position_offset −1): (shape[1]) the global position of
                                          each row, in row order; NULL otherwise; owned */
} tensor_record;

typedef struct run_item {
    const cpparity_case *source;         /* the case (owned by the suite) */
    char suite_path[CPPARITY_PATH];      /* the file the case came from */
    int64_t cp;                          /* cp size */
    cpparity_dtype dtype;                /* dtype of the implementation under test */
    bool is_baseline;                    /* cp = 1: judged against the ceiling */
    run_outcome outcome;                 /* verdict */
    char message[CPPARITY_MESSAGE_TEXT]; /* refusal text, not-run reason, error, or worst failure */
    int64_t padded_seq_len;              /* S after automatic padding to a multiple of cp */
    char token_layout[16];               /* how the ranks' rows cut the padded sequence:
                                            "contiguous", "zigzag", "round-robin" or
                                            "permutation" (harness/judging/token_layout.h);
                                            for a `cpparity run` item the layout it ran (or
                                            would have); otherwise "" when no logits were
                                            compared */
    char algorithm[16];                  /* the CP algorithm of a `cpparity run` item: "ulysses"
                                            or "ring"; "" for items that have none (attention
                                            level, `cpparity judge`) */
    int64_t tensors_expected;            /* (1 + 1 + parameters) × cp records expected */
    int64_t tensor_count;                /* records present */
    tensor_record *tensors;              /* (tensor_count) owned */
    int64_t logits_excluded;             /* logits excluded (fully masked rows, autopad), summed */
    bool gradients_identical;            /* gradients bit-identical on every rank */
    double worst_ratio;                  /* max over tensors of error / limit */
    int64_t worst_tensor;                /* index of that tensor, −1 if none */
    double seconds;                      /* wall time of the implementation under test */
    double reference_seconds;            /* wall time of the float64 reference for this item */
    double wall_seconds;  /* wall time of the item on its root: the implementation under test and
                             the reference computed alongside it (less than the sum when they
                             overlap) */
    int32_t error_status; /* RUN_ERROR only: 2 bad input / refusal, 3 runtime */
    bool by_choice;       /* RUN_NOT_RUN on purpose (the cp = 1 run cannot fit the memory
                             limit: the items at cp > 1 are decided without it); the exit code
                             does not count it */
} run_item;

typedef struct discrimination_record {
    const cpparity_case *source;         /* the case */
    char feature[CPPARITY_FEATURE_NAME]; /* "window", "chunks", "documents", "padding" */
    double change;                       /* largest relative change of loss/logits/grads when off */
    double threshold;                    /* 10 × the tightest tolerance limit applied */
    bool discriminating;                 /* change >= threshold */
} discrimination_record;

typedef struct run_provenance {
    char version[32];    /* cpparity version */
    char git_commit[48]; /* commit built */
    char compiler[128];  /* compiler and version */
    char libraries[512]; /* "HDF5 1.10.8; Open MPI 4.1.4; OpenBLAS 0.3.21; ..." */
    char host[128];      /* host name */
    char command_line[CPPARITY_COMMAND_LINE]; /* argv joined with spaces */
    char comm[16];                            /* the communicator backend: "mpi" or "local" */
    char device[16];                          /* "cpu" or "cuda" */
    char implementation[64]; /* the implementation under test (distributed/models/implementation.h)
                              */
    char kernel[256];        /* attention kernel name and version */
    char fault[32];          /* the fault --inject planted (common/fault.h), "none" */
    int ranks;               /* ranks of the job */
    uint64_t seed;           /* --seed, or 0 when the cases' own seeds were used */
    bool seed_overridden;    /* --seed given */
    double reference_spread_seconds; /* wall time of the float64 references and naive baselines
                                        every rank computed together before the items (run.c),
                                        0 on one rank */
    char store[16];                  /* "metrics", "failures" or "all" */
    char start_time[32];             /* UTC, ISO 8601 */
    char end_time[32];               /* UTC, ISO 8601 */
} run_provenance;

typedef struct run_results {
    run_provenance provenance; /* where and how */
    run_item *items;           /* (item_count) in suite order, then cp, then dtype */
    int64_t item_count;
    discrimination_record *discrimination; /* (discrimination_count) */
    int64_t discrimination_count;
    int64_t passed, failed, refused, not_run, errors; /* counts of item outcomes (not_run: those
                                                         that could not run here) */
    int64_t not_claimed;                              /* and of NOT CLAIMED ones */
    int64_t left_out; /* NOT RUN on purpose (run_item.by_choice), not in not_run */
} run_results;

/* The shape of a record's stored values into shape (its own, or [1, rows, V] for a window);
 * returns the number of dimensions and sets *count to the elements. */
int tensor_record_stored_shape(const tensor_record *record, int64_t shape[4], int64_t *count);

/* The limit that decided a tensor (docs/tolerances.md): of the pass rule's limit (ratio × the
 * naive baseline's error + floor) and, for a cp > 1 item judged against cp = 1, the CP-only
 * rule's cp1_limit, the tighter one: the limit a passing error is closest to, and the one a
 * failing error broke by the most. What the console, Markdown, JUnit and HTML reports show in
 * their limit column, with the rule's name. */
typedef struct deciding_limit {
    double limit;     /* that limit (NaN when none was computed) */
    const char *rule; /* "naive" (the pass rule) or "cp 1" (the CP-only rule); static */
    double ratio;     /* error / limit, the larger of the two rules' ratios: ∞ for an error over a
                         zero or unknown limit, 0 for no error, NaN when the error is NaN */
} deciding_limit;

/* The deciding limit of a tensor whose error (relative L2) was judged against limit and cp1_limit
 * (NaN, or not positive, when the CP-only rule did not apply). */
deciding_limit results_deciding_limit(double error, double limit, double cp1_limit);

/* results_deciding_limit of a decided record (its relative L2 error and decision's limits). */
deciding_limit tensor_record_deciding_limit(const tensor_record *record);

/* What distinguishes an item of a `cpparity run` among those of its cp and dtype: "" for
 * contiguous Ulysses (and for items without an algorithm), else "<layout> <algorithm>", e.g.
 * "zigzag ring", "contiguous ring", "round-robin ulysses". From a run_item's or a read item's
 * token_layout and algorithm. */
void results_variant_name(const char *token_layout, const char *algorithm, char *text, size_t size);

/* An item's cp with its variant, for "cp %s": "4", or "4 zigzag ring". */
void run_item_cp_label(const run_item *item, char *text, size_t size);

/* "grads/model.layers.0.self_attn.q_proj.weight rank 1 row 5 column 3 (head 1)": where a
 * tensor's worst element is, in words (logits: batch row, global position, vocab entry; q/k/v/o
 * projections: the head), written into text (truncated to size). */
void run_item_describe_worst(const run_item *item, const tensor_record *record, char *text,
                             size_t size);

/* Frees an item's tensor records and what each owns (values, reference, position_error,
 * positions), and leaves the item with none. */
void run_item_free_tensors(run_item *item);

/* Releases every item's tensors and the arrays; safe on a zeroed struct. */
void run_results_free(run_results *results);

#endif
