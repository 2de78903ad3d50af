/*
 * results_file.h — the HDF5 results file of one `cpparity run` (docs/results-file.md).
 *
 * One run per file. It is written under a temporary name next to the destination and published
 * only when complete (output_file.h): a failure or a crash never leaves a half file, and an
 * existing file is never replaced. docs/results-file.md shows how to read it with h5py.
 *
 * Layout (ints are int64 and flags int64 0/1 unless noted; strings are fixed-length ASCII; every
 * dataset has a `Description` attribute):
 *
 *   /                   format = "cpparity-results", format_version = 2 (2: baseline_error
 *                       is the naive same-dtype baseline's error; cp1_error, cp1_limit added)
 *   /provenance         attributes: version, git_commit, compiler, libraries, host,
 *                       command_line, comm, device, implementation, kernel, fault (the
 *                       fault --inject planted, "none" normally), store,
 *                       start_time, end_time
 *                       (strings); ranks, seed (the uint64 seed's bits as int64),
 *                       seed_overridden (0/1); reference_spread_seconds (float64)
 *   /summary            attributes: passed, failed, refused, not_run, errors, items,
 *                       discrimination_records
 *   /cases/<case>       one group per case (names are [A-Za-z0-9_.-]; a second case of the same
 *                       name from another suite becomes <case>~2, ...). Attributes: name, suite
 *                       (path of the case file), description, seq_len, batch_size, seed,
 *                       expect_refuse, refusal, cp_sizes (int64 array), dtypes (string array)
 *                       and the resolved model configuration under model.md's (transformers')
 *                       names, as /model of `cpparity export` (one attribute per field of
 *                       common/model_config.h's table, hdf5_write_model_config): vocab_size,
 *                       hidden_size,
 *                       num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 *                       intermediate_size, sliding_window, attention_chunk_size,
 *                       tie_word_embeddings (int64); rms_norm_eps, rope_theta (float64);
 *                       layer_types (string array); chunk_origin ("row", "document" or
 *                       "position").
 *     rows              int64 [B, 3]: left padding, number of documents, right padding per row
 *     document_lengths  int64 [total documents]: every row's document lengths, row after row
 *     document_start_positions  int64 [total documents]: start_positions as declared, -1 where
 *                       not declared
 *   /cases/<case>/<dtype>/cp_<n>     one group per run item; dtype is "f32" or "bf16"; an
 *                       item of another layout or algorithm than contiguous Ulysses is
 *                       cp_<n>_<layout>_<algorithm> (e.g. cp_4_zigzag_ring)
 *                       attributes: outcome ("PASS", "FAIL", "REFUSED", "NOT RUN", "ERROR"),
 *                       message, cp, dtype, is_baseline, padded_seq_len, tensors_expected,
 *                       tensors_compared, logits_excluded, gradients_identical, worst_ratio
 *                       (float64), worst_tensor (name, "" if none), worst_tensor_index (row of
 *                       metrics, -1 if none), token_layout (how the ranks' rows cut the padded
 *                       sequence: "contiguous", "zigzag", "round-robin", "permutation"; a
 *                       `cpparity run` item's is the layout it ran; otherwise "" when no logits
 *                       were compared), algorithm ("ulysses", "ring"; "" when the item has none:
 *                       attention level, `cpparity judge`), error_status (ERROR: 2 bad input, 3
 * runtime; else 0), seconds, reference_seconds, wall_seconds (the item on its root with the
 * reference computed alongside the implementation) (float64) metrics           compound [tensor
 * records], one row per compared tensor and rank (may have 0 rows), attribute error_metric. Fields:
 * tensor (S112), kind (S8), rank (int32), count, compared, excluded, nonfinite, first_nonfinite
 *                       (int64), max_abs, error_norm, reference_norm, relative_l2 (float64),
 *                       absolute (int8), worst_index (int64), worst_value, worst_reference
 *                       (float64), w0..w3 (int64: coordinates of the element a failure
 *                       names, the first non-finite one if any, else worst_index; -1 past the
 *                       tensor's rank or when there is no worst element), position_offset
 *                       (int64), baseline_error (the naive baseline's error on the same
 *                       elements), cp1_error (the tensor's error at cp = 1; NaN at cp = 1), ratio,
 *                       floor, ceiling (float64), ratio_origin, floor_origin, ceiling_origin (S8:
 *                       "default", "suite", "case"), limit (ratio × baseline_error + floor),
 *                       cp1_limit (ratio × cp1_error + floor; NaN at cp = 1) (float64), passed
 *                       (int8), reason (S160)
 *     tensors/          always present; for each record with stored values a float32 dataset
 *                       "<tensor name, '/' → ':'>@rank<r>" in the record's shape, and with a
 *                       stored reference a float64 dataset of the same name + ".reference".
 *                       Attributes on each: tensor, rank, position_offset. Chunked, shuffled,
 *                       deflate-compressed, fletcher32 (scalars and empty tensors contiguous).
 *     profiles/         always present; for each logits record a float64 dataset
 *                       "logits@rank<r>" [L_r]: per row of the rank's slice, ‖x − r‖ / ‖r‖
 *                       over batch rows and vocabulary of compared elements, NaN where none is;
 *                       when the rank's rows are not consecutive positions (position_offset
 *                       -1: zigzag, round-robin, ...) also int64 "positions@rank<r>" [L_r], the
 *                       global position of each row. Attributes tensor, rank, position_offset.
 *   /discrimination     compound, only when there are records: case (S128), feature (S16),
 *                       change, threshold (float64), discriminating (int8)
 *
 * Groups are created with link creation order tracked, so tools that honour it list cases and
 * items in run order.
 */
#ifndef CPPARITY_RESULTS_MODEL_RESULTS_FILE_H
#define CPPARITY_RESULTS_MODEL_RESULTS_FILE_H

#include <hdf5.h>

#include "common/error.h"
#include "common/output_file.h"
#include "results_model/results.h"

/* The version written as /format_version; bumped when a reader would misread the layout. */
#define RESULTS_FILE_FORMAT_VERSION 2

/* Writes results to a new HDF5 file at path (the layout above). Refuses an existing path with
 * CPPARITY_ERROR_INPUT naming "--out"; any HDF5 failure, an item without a case, an unsafe case
 * name or a tensor whose shape does not match its element count is CPPARITY_ERROR_RUNTIME with
 * the failing object named. On failure nothing is left at path (nor a temporary file). results
 * is only read. */
cpparity_status results_file_write(const run_results *results, const char *path,
                                   cpparity_error *error);

/* The name of item's group under its dtype group: cp_<n>, or cp_<n>_<layout>_<algorithm> for
 * another layout or algorithm than contiguous Ulysses (a hybrid's colon a hyphen:
 * cp_4_zigzag_hybrid-2x2). */
void results_item_group_name(const run_item *item, char *name, size_t size);

/* The same into an output_file begun by the caller (one of a set published together); nothing is
 * published. */
cpparity_status results_file_write_staged(const run_results *results, const output_file *file,
                                          cpparity_error *error);

/* Writes more into the open file (a group of its own) before it is published. */
typedef cpparity_status (*results_file_extra)(hid_t file, const void *context,
                                              cpparity_error *error);

/* results_file_write, with extra(file, context) called after the results are in: the file is
 * published only when it succeeds too. */
cpparity_status results_file_write_extended(const run_results *results, const char *path,
                                            results_file_extra extra, const void *context,
                                            cpparity_error *error);

#endif
