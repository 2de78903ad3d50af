/* reference_cache.c — the reference's outputs, once per case (see reference_cache.h). */
#include "harness/judging/reference_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "common/monotonic_clock.h"
#include "common/model_parameters.h"
#include "harness/judging/reference_store.h"
#include "common/row_blocks.h"
#include "reference/model.h"

void reference_outputs_free(reference_outputs *outputs) {
    for (int d = 0; d < CPPARITY_DTYPE_COUNT; d++) {
        naive_outputs_free(&outputs->naive[d]);
    }
    free(outputs->final_normed);
    free(outputs->head);
    free(outputs->gradients);
    free(outputs->fully_masked);
    cpparity_tensor_table_free(&outputs->parameter_table);
    memset(outputs, 0, sizeof *outputs);
}

/* Runs the reference on the case with config for its model and the mask features of features_off
 * removed (spread over team: reference/team.h) and keeps what comparison needs, whole, on every
 * rank of the team. */
static cpparity_status compute_with(reference_outputs *outputs, const cpparity_case *c,
                                    const cpparity_model_config *config, unsigned features_off,
                                    uint64_t seed, const reference_team *team,
                                    cpparity_error *error) {
    const double start = monotonic_seconds();
    cpparity_batch batch = {0};
    reference_model model = {0};
    cpparity_status status = fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, seed, error);
    if (status == CPPARITY_OK) {
        status =
            reference_model_init_spread(&model, config, c->batch_size, c->seq_len, team, error);
    }
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(model.parameters, &model.parameter_table, seed);
        model.mask_features_off = features_off;
        status = reference_model_forward(&model, &batch, error);
    }
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, &batch, error);
    }
    const int64_t B = c->batch_size, S = c->seq_len, V = c->model.vocab_size;
    const int64_t D = c->model.hidden_size;
    if (status == CPPARITY_OK) {
        outputs->batch = B;
        outputs->seq_len = S;
        outputs->vocab = V;
        outputs->hidden = D;
        outputs->loss = model.loss;
        outputs->final_normed = malloc((size_t)(B * S * D) * sizeof(double));
        outputs->head = malloc((size_t)(V * D) * sizeof(double));
        outputs->gradients = malloc((size_t)model.parameter_table.total * sizeof(double));
        outputs->fully_masked = calloc((size_t)(B * S), 1);
        if (!outputs->final_normed || !outputs->head || !outputs->gradients ||
            !outputs->fully_masked) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "out of memory (reference outputs of %s)", c->name);
        }
    }
    if (status == CPPARITY_OK) {
        status = reference_model_final_normed_whole(&model, outputs->final_normed, error);
    }
    if (status == CPPARITY_OK) {
        memcpy(outputs->head, reference_model_head(&model), (size_t)(V * D) * sizeof(double));
        memcpy(outputs->gradients, model.gradients,
               (size_t)model.parameter_table.total * sizeof(double));
        /* a query row with lse = −∞ in any layer has no key there: its logits are don't-care */
        const int64_t H = c->model.num_attention_heads;
        for (int64_t l = 0; l < c->model.num_hidden_layers; l++) {
            const double *lse = model.activations + model.layer[l].lse;
            for (int64_t b = 0; b < B; b++) {
                for (int64_t t = 0; t < S; t++) {
                    if (lse[b * H * S + t] == -INFINITY) {
                        outputs->fully_masked[b * S + t] = 1;
                    }
                }
            }
        }
        outputs->parameter_table = model.parameter_table; /* taken over from the model */
        memset(&model.parameter_table, 0, sizeof model.parameter_table);
    }
    reference_model_free(&model);
    cpparity_batch_free(&batch);
    outputs->seconds = monotonic_seconds() - start;
    return status;
}

static cpparity_status compute(reference_outputs *outputs, const cpparity_case *c, uint64_t seed,
                               const reference_team *team, cpparity_error *error) {
    return compute_with(outputs, c, &c->model, 0, seed, team, error);
}

cpparity_status reference_outputs_compute_variant(
    reference_outputs *outputs, const cpparity_case *c, const cpparity_model_config *config,
    unsigned features_off, uint64_t seed, const reference_team *team, cpparity_error *error) {
    memset(outputs, 0, sizeof *outputs);
    const cpparity_status status =
        compute_with(outputs, c, config, features_off, seed, team, error);
    outputs->seed = seed;
    if (status != CPPARITY_OK) {
        reference_outputs_free(outputs);
    }
    return status;
}

/* The LM head's weight [V, D] of the case's fixture: lm_head.weight, or the embedding when tied
 * (the store keeps no weights: they are a pure function of the seed). */
static void fill_head(double *head, const cpparity_tensor_table *table, const cpparity_case *c,
                      uint64_t seed) {
    const cpparity_tensor_entry *entry = cpparity_tensor_table_find(
        table, c->model.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    for (int64_t i = 0; entry != NULL && i < entry->count; i++) {
        head[i] = fixture_parameter_value(seed, entry, i);
    }
}

void reference_outputs_logits_block(const reference_outputs *outputs, int64_t block, double *out) {
    const row_blocks blocks = row_blocks_of(outputs->batch, outputs->seq_len);
    const row_block at = row_blocks_at(&blocks, block);
    lm_head_logits_rows(out, outputs->final_normed + at.flat * outputs->hidden, outputs->head,
                        at.end - at.begin, outputs->hidden, outputs->vocab);
}

/* Reads (c, seed)'s outputs from the cache's directory into outputs: true when an intact entry
 * was there; a damaged one is counted and described. */
static bool load_stored(reference_cache *cache, const cpparity_case *c, uint64_t seed,
                        reference_outputs *outputs) {
    const int64_t B = c->batch_size, S = c->seq_len, V = c->model.vocab_size;
    const int64_t D = c->model.hidden_size;
    cpparity_error error;
    if (cpparity_model_parameter_table(&c->model, &outputs->parameter_table, &error) !=
        CPPARITY_OK) {
        return false;
    }
    outputs->final_normed = malloc((size_t)(B * S * D) * sizeof(double));
    outputs->head = malloc((size_t)(V * D) * sizeof(double));
    outputs->gradients = malloc((size_t)outputs->parameter_table.total * sizeof(double) + 1);
    outputs->fully_masked = calloc((size_t)(B * S), 1);
    reference_store_entry entry = {B,
                                   S,
                                   D,
                                   outputs->parameter_table.total,
                                   0.0,
                                   outputs->final_normed,
                                   outputs->gradients,
                                   outputs->fully_masked};
    const reference_store_key key = reference_store_key_of(c, seed);
    char why[CPPARITY_ERROR_TEXT] = "";
    const bool found = outputs->final_normed != NULL && outputs->head != NULL &&
                       outputs->gradients != NULL && outputs->fully_masked != NULL &&
                       reference_store_load(cache->directory, &key, &entry, why, sizeof why);
    if (found) {
        outputs->batch = B;
        outputs->seq_len = S;
        outputs->vocab = V;
        outputs->hidden = D;
        outputs->loss = entry.loss;
        fill_head(outputs->head, &outputs->parameter_table, c, seed);
        cache->reused++;
        return true;
    }
    if (why[0] != '\0') {
        cache->rejected++;
        snprintf(cache->warning, sizeof cache->warning,
                 "%.900s; not trusted: computed again and replaced", why);
    }
    reference_outputs_free(outputs);
    return false;
}

/* Writes freshly computed outputs to the cache's directory (a failure is a warning). */
static void store(reference_cache *cache, const cpparity_case *c, uint64_t seed,
                  const reference_outputs *outputs) {
    const reference_store_entry entry = {
        outputs->batch, outputs->seq_len,      outputs->hidden,    outputs->parameter_table.total,
        outputs->loss,  outputs->final_normed, outputs->gradients, outputs->fully_masked};
    const reference_store_key key = reference_store_key_of(c, seed);
    cpparity_error error;
    if (reference_store_save(cache->directory, &key, &entry, &error) == CPPARITY_OK) {
        cache->stored++;
    } else {
        snprintf(cache->warning, sizeof cache->warning, "%.900s (the run goes on without it)",
                 error.message);
    }
}

cpparity_status reference_cache_get(reference_cache *cache, int64_t case_index,
                                    const cpparity_case *c, uint64_t seed,
                                    const reference_outputs **outputs, int *computed_now,
                                    cpparity_error *error) {
    for (int64_t i = 0; i < cache->count; i++) {
        if (cache->entries[i].case_index == case_index && cache->entries[i].seed == seed) {
            *outputs = &cache->entries[i];
            *computed_now = 0;
            return CPPARITY_OK;
        }
    }
    reference_outputs fresh;
    memset(&fresh, 0, sizeof fresh);
    const bool loaded = cache->directory != NULL && load_stored(cache, c, seed, &fresh);
    cpparity_status status = CPPARITY_OK;
    if (!loaded && cache->summon != NULL) { /* the team's other ranks join the computation */
        status = cache->summon(cache->summon_context, c, seed, error);
    }
    if (status == CPPARITY_OK && !loaded) {
        status = compute(&fresh, c, seed, cache->team, error);
        cache->computed += status == CPPARITY_OK;
    }
    if (status != CPPARITY_OK) {
        reference_outputs_free(&fresh);
        return status;
    }
    fresh.case_index = case_index; /* after load_stored, which may clear what it filled */
    fresh.seed = seed;
    if (!loaded && cache->directory != NULL) {
        store(cache, c, seed, &fresh);
    }
    reference_outputs *grown =
        realloc(cache->entries, (size_t)(cache->count + 1) * sizeof *cache->entries);
    if (grown == NULL) {
        reference_outputs_free(&fresh);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (reference cache)");
    }
    cache->entries = grown;
    cache->entries[cache->count] = fresh;
    *outputs = &cache->entries[cache->count++];
    *computed_now = loaded ? 0 : 1;
    return CPPARITY_OK;
}

/* The reference's logits of a row block from the final norm's output of the rows [first_row, ...)
 * and the LM head: the same function, so the same bits, as reference_outputs_logits_block. */
typedef struct rows_logits {
    const double *normed; /* (rows held, D) */
    int64_t first_row;    /* the flattened row of normed's first */
    const double *head;   /* (V, D) */
    row_blocks blocks;
    int64_t hidden, vocab;
} rows_logits;

static void rows_logits_block(const void *context, int64_t block, double *out) {
    const rows_logits *r = context;
    const row_block at = row_blocks_at(&r->blocks, block);
    lm_head_logits_rows(out, r->normed + (at.flat - r->first_row) * r->hidden, r->head,
                        at.end - at.begin, r->hidden, r->vocab);
}

/* Rank 0 (reference given) sends every other rank of team the final norm's rows of its blocks,
 * a block at a time; *mine (malloc'd, rows held × D) gets this rank's (rank 0: NULL, it reads
 * the reference's), *first_row the flattened row of its first. Alone, nothing is sent. */
static cpparity_status send_final_normed(const reference_outputs *reference,
                                         const row_blocks *blocks, int64_t hidden,
                                         const reference_team *team, double **mine,
                                         int64_t *first_row, cpparity_error *error) {
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    int64_t end_row = 0;
    row_blocks_rows(blocks, row_blocks_first(blocks, size, rank),
                    row_blocks_first(blocks, size, rank + 1), first_row, &end_row);
    const int64_t widest = row_blocks_widest(blocks);
    *mine = rank > 0 ? malloc((size_t)((end_row - *first_row) * hidden + 1) * sizeof **mine) : NULL;
    double *piece = size > 1 ? malloc((size_t)(widest * hidden + 1) * sizeof *piece) : NULL;
    cpparity_status status = (rank == 0 || *mine != NULL) && (size == 1 || piece != NULL)
                                 ? CPPARITY_OK
                                 : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                                      "out of memory (the final norm's rows of "
                                                      "the naive baseline's blocks)");
    for (int64_t index = 0; status == CPPARITY_OK && index < blocks->count; index++) {
        const int64_t owner = row_blocks_owner(blocks, size, index);
        if (owner == 0) { /* rank 0 reads its own from the reference */
            continue;
        }
        const row_block at = row_blocks_at(blocks, index);
        const int64_t count = (at.end - at.begin) * hidden;
        if (rank == 0) {
            memcpy(piece, reference->final_normed + at.flat * hidden,
                   (size_t)count * sizeof *piece);
        }
        status = team->operations->broadcast(team->context, piece, count, 0, error);
        if (status == CPPARITY_OK && rank == owner) {
            memcpy(*mine + (at.flat - *first_row) * hidden, piece, (size_t)count * sizeof *piece);
        }
    }
    free(piece);
    return status;
}

/* The naive baseline of the case in dtype, from the inputs and weights the fixtures give, against
 * the reference's logits, which each rank makes for its own blocks from the LM head and the final
 * norm's rows; in this process (team NULL: every block, the reference given) or spread over team
 * (rank 0 passing the reference and sending the others their rows, the others NULL). */
static cpparity_status compute_naive(naive_outputs *naive, const reference_outputs *reference,
                                     const cpparity_case *c, uint64_t seed, cpparity_dtype dtype,
                                     const reference_team *team, cpparity_error *error) {
    cpparity_batch batch = {0};
    cpparity_tensor_table table = {0};
    double *weights = NULL, *normed = NULL;
    cpparity_status status = fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, seed, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameter_table(&c->model, &table, error);
    }
    if (status == CPPARITY_OK) {
        weights = malloc((size_t)table.total * sizeof *weights);
        if (weights == NULL) {
            status =
                cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                   "out of memory (weights of the naive baseline of %s)", c->name);
        }
    }
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(weights, &table, seed);
        const cpparity_tensor_entry *head = cpparity_tensor_table_find(
            &table, c->model.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
        rows_logits rows = {NULL,
                            0,
                            weights + (head != NULL ? head->offset : 0),
                            row_blocks_of(c->batch_size, c->seq_len),
                            c->model.hidden_size,
                            c->model.vocab_size};
        status = send_final_normed(reference, &rows.blocks, rows.hidden, team, &normed,
                                   &rows.first_row, error);
        /* rank 0 holds every row (its first row is 0) */
        rows.normed = reference_team_rank(team) == 0 ? reference->final_normed : normed;
        const naive_reference_logits logits = {rows_logits_block, &rows};
        if (status == CPPARITY_OK) {
            status = naive_model_run_spread(&c->model, &batch, &table, weights, dtype, &logits,
                                            team, naive, error);
        }
    }
    free(normed);
    free(weights);
    cpparity_tensor_table_free(&table);
    cpparity_batch_free(&batch);
    return status;
}

cpparity_status reference_cache_get_with_naive(reference_cache *cache, int64_t case_index,
                                               const cpparity_case *c, uint64_t seed,
                                               cpparity_dtype dtype,
                                               const reference_outputs **outputs,
                                               double *seconds_now, cpparity_error *error) {
    int computed_now = 0;
    *seconds_now = 0.0;
    cpparity_status status =
        reference_cache_get(cache, case_index, c, seed, outputs, &computed_now, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    reference_outputs *entry = (reference_outputs *)*outputs;
    *seconds_now = computed_now ? entry->seconds : 0.0;
    if (!entry->naive_ready[dtype]) {
        status = compute_naive(&entry->naive[dtype], entry, c, seed, dtype, NULL, error);
        if (status != CPPARITY_OK) {
            return status;
        }
        entry->naive_ready[dtype] = true;
        *seconds_now += entry->naive[dtype].seconds;
    }
    return CPPARITY_OK;
}

cpparity_status reference_cache_spread_naive(reference_cache *cache, int64_t case_index,
                                             const cpparity_case *c, uint64_t seed,
                                             cpparity_dtype dtype, const reference_team *team,
                                             cpparity_error *error) {
    reference_outputs *entry = NULL;
    for (int64_t i = 0; i < cache->count && entry == NULL; i++) {
        if (cache->entries[i].case_index == case_index && cache->entries[i].seed == seed) {
            entry = &cache->entries[i];
        }
    }
    if (entry == NULL || entry->naive_ready[dtype]) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "the naive baseline of case '%s' spread: its reference is %s",
                                  c->name, entry == NULL ? "not cached" : "already there");
    }
    const cpparity_status status =
        compute_naive(&entry->naive[dtype], entry, c, seed, dtype, team, error);
    entry->naive_ready[dtype] = status == CPPARITY_OK;
    return status;
}

bool reference_cache_has(const reference_cache *cache, int64_t case_index, uint64_t seed,
                         int dtype) {
    for (int64_t i = 0; i < cache->count; i++) {
        if (cache->entries[i].case_index == case_index && cache->entries[i].seed == seed) {
            return dtype < 0 || cache->entries[i].naive_ready[dtype];
        }
    }
    return false;
}

cpparity_status reference_naive_share(const cpparity_case *c, uint64_t seed, cpparity_dtype dtype,
                                      const reference_team *team, cpparity_error *error) {
    naive_outputs naive;
    const cpparity_status status = compute_naive(&naive, NULL, c, seed, dtype, team, error);
    naive_outputs_free(&naive);
    return status;
}

cpparity_status reference_outputs_share(const cpparity_case *c, uint64_t seed,
                                        const reference_team *team, cpparity_error *error) {
    reference_outputs outputs;
    memset(&outputs, 0, sizeof outputs);
    const cpparity_status status = compute(&outputs, c, seed, team, error);
    reference_outputs_free(&outputs);
    return status;
}

void reference_cache_free(reference_cache *cache) {
    for (int64_t i = 0; i < cache->count; i++) {
        reference_outputs_free(&cache->entries[i]);
    }
    free(cache->entries);
    const reference_cache settings = *cache; /* the settings outlive the entries */
    memset(cache, 0, sizeof *cache);
    cache->directory = settings.directory;
    cache->team = settings.team;
    cache->summon = settings.summon;
    cache->summon_context = settings.summon_context;
}
