/*
 * export.h — `cpparity export`: one case's inputs, weights, per-layer dense masks and float64
 * reference outputs in the HDF5 layout of docs/command-line.md, for independent tools
 * (fixtures/crosscheck_torch.py reads it).
 *
 *   /model                  attributes: model.md's configuration names (int64 / float64),
 *                           layer_types (strings), chunk_origin, tie_word_embeddings (0/1),
 *                           case, seed
 *   /inputs/input_ids       int64 [B,S]      /inputs/labels         int64 [B,S] (−100 ignored)
 *   /inputs/attention_mask  int8  [B,S]      /inputs/position_ids   int64 [B,S]
 *   /weights/<name>         float64, model.md's names and shapes
 *   /masks/layer_<l>        uint8 [B,S,S], 1 = may attend (only when S <= 1024)
 *   /reference/loss         float64 scalar   /reference/logits      float64 [B,S,V]
 *   /reference/grads/<name> float64, one per parameter
 */
#ifndef CPPARITY_HARNESS_STORAGE_EXPORT_H
#define CPPARITY_HARNESS_STORAGE_EXPORT_H

#include "common/error.h"
#include "common/case.h"

/* Largest S for which dense masks are written. */
#define EXPORT_DENSE_MASK_LIMIT 1024

/* Runs the reference on the case and writes path (never overwriting: CPPARITY_ERROR_INPUT if it
 * exists). Nothing is left at path on failure. */
cpparity_status export_case(const cpparity_case *exported, const char *path, cpparity_error *error);

#endif
