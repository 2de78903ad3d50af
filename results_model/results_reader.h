/*
 * results_reader.h — a results file read back (the inverse of results_file.h, for `cpparity
 * diff` and reports): provenance, per run item its case, cp, dtype, outcome, message and the
 * metrics table, and the discrimination table. Cases are known by name; the stored tensor values
 * are not read.
 *
 * A file that is not HDF5, not a cpparity results file, truncated or damaged, or written in a
 * format version this cpparity does not read is bad input (CPPARITY_ERROR_INPUT) with a message
 * naming the file and what is wrong; nothing is ever half-read into a success.
 */
#ifndef CPPARITY_RESULTS_MODEL_RESULTS_READER_H
#define CPPARITY_RESULTS_MODEL_RESULTS_READER_H

#include <stdint.h>

#include "common/error.h"
#include "results_model/results.h"
#include "results_model/results_layout.h"

/* The logits error along the sequence on one rank: at each position of the rank's slice,
 * ‖x − r‖₂ / ‖r‖₂ over the batch rows and vocabulary of the compared elements (NaN where none is
 * compared: fully masked rows, automatic padding). */
typedef struct read_profile {
    int rank;                /* rank of the CP group */
    int64_t position_offset; /* first global position of the slice, −1 when the rank's rows are
                                not consecutive positions */
    int64_t length;          /* positions in the slice */
    double *error;           /* (length) owned */
    double *limit;           /* (length) each entry's own limit (limits@rank<r>: NaN where the
                                per-position rule does not apply), NULL in files written before
                                it was recorded; owned */
    int64_t *positions;      /* position_offset −1: (length) the global position of each entry,
                                NULL in files written before they were recorded; NULL when
                                position_offset >= 0 (entry k is at position_offset + k); owned */
} read_profile;

/* A case's layout, for marking padding and document boundaries along the sequence. */
typedef struct read_case {
    char name[CPPARITY_CASE_NAME];
    int64_t seq_len;           /* S */
    int64_t batch_size;        /* B */
    int64_t *rows;             /* (B × 3) left padding, documents, right padding; owned */
    int64_t *document_lengths; /* (document_count) row after row; owned */
    int64_t document_count;
} read_case;

typedef struct read_item {
    char case_name[CPPARITY_CASE_NAME];      /* the case's name (attribute name of /cases/<case>) */
    char suite[CPPARITY_PATH];               /* the suite file it came from */
    char dtype[8];                           /* "f32", "bf16" */
    int64_t cp;                              /* cp size */
    char outcome[16];                        /* "PASS", "FAIL", "REFUSED", "NOT RUN", "ERROR" */
    char message[CPPARITY_MESSAGE_TEXT];     /* refusal, reason not run, error, worst failure */
    double worst_ratio;                      /* error / limit of the worst tensor */
    char worst_tensor[CPPARITY_RECORD_NAME]; /* its name, "" if none */
    metrics_row *tensors;                    /* (tensor_count) the metrics table; owned */
    int64_t tensor_count;
    int64_t case_index;     /* its case in read_results.cases */
    int64_t padded_seq_len; /* S after automatic padding to a multiple of cp (0 if not recorded) */
    char token_layout[16];  /* "contiguous", "zigzag", "round-robin", "permutation"; "" when not
                               recorded (no logits compared, or an older file) */
    char algorithm[16];     /* "ulysses", "ring"; "" when the item has none or the file is older */
    read_profile *profiles; /* (profile_count) logits error profiles in rank order; none for
                               items that compared no logits */
    int64_t profile_count;
    bool by_choice; /* NOT RUN on purpose (attribute by_choice; false in older files) */
} read_item;

typedef struct read_results {
    char path[CPPARITY_PATH];  /* the file read */
    int64_t format_version;    /* /format_version */
    run_provenance provenance; /* /provenance (strings; ranks and seed) */
    read_item *items;          /* (item_count) in the file's order; owned */
    int64_t item_count;
    read_case *cases; /* (case_count) in the file's order; owned */
    int64_t case_count;
    discrimination_row *discrimination; /* (discrimination_count) /discrimination; owned; none
                                           when the run computed no discrimination */
    int64_t discrimination_count;
} read_results;

/* Reads path into results (zeroed first; free with read_results_free even after a failure),
 * after reading it once in a forked child (hdf5_guard.h): a file that crashes or hangs HDF5 is
 * CPPARITY_ERROR_INPUT "PATH is damaged: ...". */
cpparity_status results_file_read(const char *path, read_results *results, cpparity_error *error);

/* The same from an HDF5 file image in memory (size bytes, only read), named name in messages and
 * in results->path: the fuzz target's entry (fuzz/results_file_fuzzer.c). */
cpparity_status results_file_read_image(const void *image, size_t size, const char *name,
                                        read_results *results, cpparity_error *error);

void read_results_free(read_results *results);

#endif
