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
#include "harness/judging/judge_item.h"
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
    float *gradients;          /* [cp][P], reassembled */
    const int64_t **positions; /* [cp] each dump's positions */
    int64_t *lengths;          /* [cp] L_r */
} judge_dump_set;

/* Which dumps to read, what run they must be, and the memory the padding bound comes from. */
typedef struct judge_dumps_request {
    const char *const *paths; /* (count) the dumps, in any order */
    int64_t count;
    const char *flag;          /* "--baseline" for the framework's cp = 1 dumps (every refusal
                                  then starts with it), NULL for the judged run */
    int64_t cp;                /* the cp they must have (1 for a baseline); 0: any */
    int dtype;                 /* the cpparity_dtype they must have; -1: any */
    int64_t memory_bytes;      /* the memory limit (--max-memory, else what is available) */
    const char *memory_source; /* where that limit came from, for the refusal */
    run_store store;           /* what --store keeps (all: every logits element, counted) */
} judge_dumps_request;

/* The bytes the judge holds per position of the padded sequence. The logits are read and
 * compared one block of positions at a time (judge_item.h), so nothing per logits element is held
 * for the whole sequence unless --store all keeps it (12 bytes an element: float32 values and the
 * float64 reference); per batch row 8 (the indices as read); and 64 more (the position, its owner
 * and row in the walk, the partition check, its profile sums and entry, its entry in the results'
 * positions). Checked sizes: INT64_MAX when it does not fit. */
int64_t judge_dumps_position_bytes(const cpparity_case *c, run_store store);

/* The padding bound (docs/dump-format.md): the most positions the ranks' rows may add up to, the
 * padded length Sp, for case c under a memory limit of memory_bytes: memory_bytes divided by
 * judge_dumps_position_bytes(c), and never below S (a dump without padding is never refused by
 * it). store: what --store keeps. */
int64_t judge_dumps_most_positions(const cpparity_case *c, run_store store, int64_t memory_bytes);

/* Reads request's dumps as one run of case c (its parameter table: parameters) made from the
 * export read into reading: each checked, right after its attributes and before any shape,
 * against the export (digest, case, seed), request's cp and dtype, and the padding bound left by
 * the dumps read before it (judge_dumps_most_positions of request's memory). */
cpparity_status judge_dumps_load(const judge_dumps_request *request, const export_reading *reading,
                                 const cpparity_case *c, const cpparity_tensor_table *parameters,
                                 judge_dump_set *set, cpparity_error *error);

/* The dumps' logits as judge_item reads them: rank r's rows from dump r, one run of rows at a
 * time (rank_dump_read_logits); set must outlive its use. */
judge_logits judge_dump_set_logits(const judge_dump_set *set);

/* Releases the set; safe on a zeroed one. */
void judge_dump_set_free(judge_dump_set *set);

#endif
