/*
 * export.h — `cpparity export`: one case's inputs, weights, per-layer dense masks and float64
 * reference outputs in the HDF5 layout of docs/command-line.md, for independent tools
 * (fixtures/crosscheck_torch.py reads it).
 *
 *   /model                  attributes: model.md's configuration names (int64 / float64),
 *                           layer_types (strings), chunk_origin, tie_word_embeddings (0/1),
 *                           case, seed, digest (export_digest: what rank dumps must copy)
 *   /source/suite_yaml      uint8 [n]: the suite file's bytes; attribute path
 *   /inputs/input_ids       int64 [B,S]      /inputs/labels         int64 [B,S] (−100 ignored)
 *   /inputs/attention_mask  int8  [B,S]      /inputs/position_ids   int64 [B,S]
 *   /weights/<name>         float64, model.md's names and shapes
 *   /masks/layer_<l>        uint8 [B,S,S], 1 = may attend (only when S <= 1024)
 *   /reference/loss         float64 scalar   /reference/logits      float64 [B,S,V] (unless
 *                           left out: `export --no-logits`; written one row block at a time)
 *   /reference/final_normed float64 [B,S,D]: the LM head's input (logits = final_normed · headᵀ)
 *   /reference/grads/<name> float64, one per parameter
 */
#ifndef CPPARITY_HARNESS_STORAGE_EXPORT_H
#define CPPARITY_HARNESS_STORAGE_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"
#include "common/digest.h"
#include "common/error.h"
#include "reference/team.h"

/* Largest S for which dense masks are written. */
#define EXPORT_DENSE_MASK_LIMIT 1024

/* The suite file the exported case was read from. */
typedef struct export_source {
    const char *suite_path; /* as given on the command line */
    const char *suite_text; /* its bytes */
    size_t suite_length;
} export_source;

/* The export's digest: of the suite file's bytes, the case's name and its seed (docs/
 * dump-format.md: a rank dump copies it, so a dump of another export or seed is refused). */
void export_digest(const char *suite_text, size_t length, const char *case_name, uint64_t seed,
                   char hex[CPPARITY_DIGEST_HEX]);

/* The ranks the export's reference is spread over (reference/team.h): this process is the team's
 * rank 0, and summon(context, case, seed) has the others join (reference_cache.h's
 * reference_outputs_share) before it computes. */
typedef struct export_spread {
    const reference_team *team;
    cpparity_status (*summon)(void *context, const cpparity_case *c, uint64_t seed,
                              cpparity_error *error);
    void *context;
} export_spread;

/* Runs the reference on the case (spread as spread says; NULL: this process alone) and writes
 * path (never overwriting: CPPARITY_ERROR_INPUT if it exists), /reference/logits only with
 * logits. Nothing is left at path on failure. */
cpparity_status export_case(const cpparity_case *exported, const export_source *source, bool logits,
                            const char *path, const export_spread *spread, cpparity_error *error);

#endif
