/*
 * judge_dumps.h — the rank dumps of one framework run (docs/dump-format.md) read, checked as a
 * set and turned into what judge_item takes: one dump per rank of one cp size and dtype, all of
 * the export they claim to come from, token positions that partition the padded sequence, each
 * gradient in full on every rank or in slices that tile it (reassembled, then every rank holds
 * the whole tensor). Every problem is CPPARITY_ERROR_INPUT naming the files and the HDF5 path.
 */
#ifndef CPPARITY_HARNESS_RUNNING_JUDGE_DUMPS_H
#define CPPARITY_HARNESS_RUNNING_JUDGE_DUMPS_H

#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "common/tensor_table.h"
#include "harness/judging/token_layout.h"
#include "harness/storage/export_reader.h"
#include "harness/storage/rank_dump.h"

typedef struct judge_dump_set {
    rank_dump *dumps;     /* (cp) in rank order, owned */
    int64_t cp;           /* ranks */
    cpparity_dtype dtype; /* the dumps' dtype */
    int64_t padded_len;   /* Sp = Σ L_r */
    token_layout_kind layout;
    float *losses;             /* [cp] */
    float *logits;             /* rank after rank, [B, L_r, V] each */
    float *gradients;          /* [cp][P], reassembled */
    const int64_t **positions; /* [cp] each dump's positions */
    int64_t *lengths;          /* [cp] L_r */
} judge_dump_set;

/* Reads the count dumps of paths as one run of case c (its parameter table: parameters) made from
 * the export read into reading. */
cpparity_status judge_dumps_load(const char *const *paths, int64_t count,
                                 const export_reading *reading, const cpparity_case *c,
                                 const cpparity_tensor_table *parameters, judge_dump_set *set,
                                 cpparity_error *error);

/* Releases the set; safe on a zeroed one. */
void judge_dump_set_free(judge_dump_set *set);

#endif
