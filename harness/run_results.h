/*
 * run_results.h — everything one `cpparity run` found, as the results file, the JUnit and
 * Markdown writers and the console table read it. Built on rank 0 of the job.
 *
 * One item is one (case, cp size, dtype) run. Each item holds one tensor record per compared
 * tensor and rank: "loss", "logits" (the rank's slice of the sequence) and every parameter
 * gradient by model.md's name ("grads/<name>").
 */
#ifndef CPPARITY_HARNESS_RUN_RESULTS_H
#define CPPARITY_HARNESS_RUN_RESULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/case.h"
#include "harness/compare.h"

typedef enum run_outcome {
    RUN_PASS = 0,    /* every tensor within tolerance */
    RUN_FAIL = 1,    /* a parity failure (or an expected refusal that did not happen) */
    RUN_REFUSED = 2, /* refused as the case expected, with the expected text */
    RUN_NOT_RUN = 3, /* not run: the reason is in message (e.g. cp does not divide ranks) */
    RUN_ERROR = 4,   /* bad input or runtime failure while running this item */
} run_outcome;

/* "PASS", "FAIL", "REFUSED", "NOT RUN", "ERROR". */
const char *run_outcome_name(run_outcome outcome);

typedef struct tensor_record {
    char name[112];               /* "loss", "logits" or "grads/<parameter name>" */
    cpparity_tensor_kind kind;    /* loss, logits or grads */
    int rank;                     /* rank of the CP group that produced it */
    compare_metrics metrics;      /* against the float64 reference */
    int shape_rank;               /* dimensions of the compared tensor */
    int64_t shape[4];             /* its shape: loss (), logits [B, S/cp, V], grads as model.md */
    int64_t position_offset;      /* first global position of this rank's slice (logits) */
    int64_t worst[4];             /* coordinates of metrics.worst_index (logits: b, global
                                     position, vocab; grads: row, column) */
    double baseline_error;        /* the same tensor's error at cp = 1 (rank 0) */
    cpparity_tolerance tolerance; /* applied, with origins */
    compare_decision decision;    /* pass or fail, limit, reason */
    float *values;                /* stored values (per --store) or NULL; owned */
    double *reference;            /* stored float64 reference or NULL; owned */
} tensor_record;

typedef struct run_item {
    const cpparity_case *source; /* the case (owned by the suite) */
    char suite_path[512];        /* the file the case came from */
    int64_t cp;                  /* cp size */
    cpparity_dtype dtype;        /* dtype of the implementation under test */
    bool is_baseline;            /* cp = 1: judged against the ceiling */
    run_outcome outcome;         /* verdict */
    char message[1024];          /* refusal text, not-run reason, error, or worst failure */
    int64_t padded_seq_len;      /* S after automatic padding to a multiple of cp */
    int64_t tensors_expected;    /* (1 + 1 + parameters) × cp records expected */
    int64_t tensor_count;        /* records present */
    tensor_record *tensors;      /* (tensor_count) owned */
    int64_t logits_excluded;     /* logits excluded (fully masked rows, autopad), summed */
    bool gradients_identical;    /* gradients bit-identical on every rank */
    double worst_ratio;          /* max over tensors of error / limit */
    int64_t worst_tensor;        /* index of that tensor, −1 if none */
    double seconds;              /* wall time of the implementation under test */
    double reference_seconds;    /* wall time of the float64 reference for this item */
    int32_t error_status;        /* RUN_ERROR only: 2 bad input / refusal, 3 runtime */
} run_item;

typedef struct discrimination_record {
    const cpparity_case *source; /* the case */
    char feature[16];            /* "window", "chunks", "documents", "padding" */
    double change;               /* largest relative change of loss/logits/grads when off */
    double threshold;            /* 10 × the tightest tolerance limit applied */
    bool discriminating;         /* change >= threshold */
} discrimination_record;

typedef struct run_provenance {
    char version[32];        /* cpparity version */
    char git_commit[48];     /* commit built */
    char compiler[128];      /* compiler and version */
    char libraries[512];     /* "HDF5 1.10.8; Open MPI 4.1.4; OpenBLAS 0.3.21; ..." */
    char host[128];          /* host name */
    char command_line[2048]; /* argv joined with spaces */
    char comm[16];           /* "mpi" or "local" */
    char device[16];         /* "cpu" or "cuda" */
    char kernel[256];        /* attention kernel name and version */
    int ranks;               /* ranks of the job */
    uint64_t seed;           /* --seed, or 0 when the cases' own seeds were used */
    bool seed_overridden;    /* --seed given */
    char store[16];          /* "metrics", "failures" or "all" */
    char start_time[32];     /* UTC, ISO 8601 */
    char end_time[32];       /* UTC, ISO 8601 */
} run_provenance;

typedef struct run_results {
    run_provenance provenance; /* where and how */
    run_item *items;           /* (item_count) in suite order, then cp, then dtype */
    int64_t item_count;
    discrimination_record *discrimination; /* (discrimination_count) */
    int64_t discrimination_count;
    int64_t passed, failed, refused, not_run, errors; /* counts of item outcomes */
} run_results;

/* Releases every item's tensors and the arrays; safe on a zeroed struct. */
void run_results_free(run_results *results);

#endif
