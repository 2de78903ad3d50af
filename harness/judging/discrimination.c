/* discrimination.c — reference runs with one mask feature off (see discrimination.h). */
#include "harness/judging/discrimination.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/row_blocks.h"
#include "reference/model.h"

/* ‖a − b‖ / ‖b‖ over count elements (absolute when ‖b‖ = 0). */
static double relative_change(const double *a, const double *b, int64_t count) {
    double difference = 0.0, norm = 0.0;
    for (int64_t i = 0; i < count; i++) {
        difference += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return norm > 0.0 ? sqrt(difference / norm) : sqrt(difference);
}

/* *largest = the largest relative change of loss, compared logits and any gradient between two
 * runs; the logits one row block at a time. CPPARITY_ERROR_RUNTIME when out of memory for a
 * block's logits. */
static cpparity_status largest_change(const reference_outputs *changed,
                                      const reference_outputs *normal, double *largest,
                                      cpparity_error *error) {
    double change = relative_change(&changed->loss, &normal->loss, 1);
    const int64_t V = normal->vocab, S = normal->seq_len;
    const row_blocks blocks = row_blocks_of(normal->batch, S);
    const int64_t widest = row_blocks_widest(&blocks);
    double *changed_logits = malloc((size_t)(widest * V + 1) * sizeof *changed_logits);
    double *normal_logits = malloc((size_t)(widest * V + 1) * sizeof *normal_logits);
    if (changed_logits == NULL || normal_logits == NULL) {
        free(changed_logits);
        free(normal_logits);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the logits of a row block, discrimination)");
    }
    double difference = 0.0, norm = 0.0;
    for (int64_t k = 0; k < blocks.count; k++) {
        const row_block block = row_blocks_at(&blocks, k);
        reference_outputs_logits_block(changed, k, changed_logits);
        reference_outputs_logits_block(normal, k, normal_logits);
        for (int64_t t = block.begin; t < block.end; t++) {
            if (normal->fully_masked[block.batch_row * S + t]) {
                continue; /* logits there are not compared, so their change cannot be seen */
            }
            for (int64_t v = 0; v < V; v++) {
                const int64_t i = (t - block.begin) * V + v;
                difference +=
                    (changed_logits[i] - normal_logits[i]) * (changed_logits[i] - normal_logits[i]);
                norm += normal_logits[i] * normal_logits[i];
            }
        }
    }
    free(changed_logits);
    free(normal_logits);
    const double logit_change = norm > 0.0 ? sqrt(difference / norm) : sqrt(difference);
    change = logit_change > change ? logit_change : change;
    for (int64_t e = 0; e < normal->parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &normal->parameter_table.entries[e];
        const double gradient_change = relative_change(
            changed->gradients + entry->offset, normal->gradients + entry->offset, entry->count);
        change = gradient_change > change ? gradient_change : change;
    }
    *largest = change;
    return CPPARITY_OK;
}

static cpparity_status append_record(run_results *results, const cpparity_case *checked,
                                     const char *feature, double change, double threshold,
                                     cpparity_error *error) {
    discrimination_record *grown =
        realloc(results->discrimination,
                (size_t)(results->discrimination_count + 1) * sizeof *results->discrimination);
    if (grown == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    results->discrimination = grown;
    discrimination_record *record = &grown[results->discrimination_count++];
    memset(record, 0, sizeof *record);
    record->source = checked;
    snprintf(record->feature, sizeof record->feature, "%s", feature);
    record->change = change;
    record->threshold = threshold;
    record->discriminating = change >= threshold;
    return CPPARITY_OK;
}

/* One rerun: a feature the case uses, switched off. */
typedef struct variant {
    const char *name;
    cpparity_model_config config; /* the case's, with the feature's layers made full */
    unsigned features_off;        /* REFERENCE_WITHOUT_* */
} variant;

enum { VARIANT_COUNT = 4 };

/* The reruns of checked, in the order they are made and reported: *count of them. */
static void variants_of(const cpparity_case *checked, variant variants[VARIANT_COUNT], int *count) {
    const cpparity_model_config *config = &checked->model;
    bool sliding = false, chunked = false, documents = false, padding = false;
    for (int64_t l = 0; l < config->num_hidden_layers; l++) {
        sliding |= config->layer_types[l] == CPPARITY_LAYER_SLIDING;
        chunked |= config->layer_types[l] == CPPARITY_LAYER_CHUNKED;
    }
    for (int64_t b = 0; b < checked->batch_size; b++) {
        documents |= checked->rows[b].document_count > 1;
        padding |= checked->rows[b].left_padding > 0 || checked->rows[b].right_padding > 0;
    }
    const struct {
        bool used;
        const char *name;
        cpparity_layer_type from; /* layers of this type become full attention */
        unsigned features_off;
    } table[VARIANT_COUNT] = {
        {sliding, "window", CPPARITY_LAYER_SLIDING, 0},
        {chunked, "chunks", CPPARITY_LAYER_CHUNKED, 0},
        {documents, "documents", CPPARITY_LAYER_FULL, REFERENCE_WITHOUT_DOCUMENTS},
        {padding, "padding", CPPARITY_LAYER_FULL, REFERENCE_WITHOUT_PADDING},
    };
    *count = 0;
    for (int v = 0; v < VARIANT_COUNT; v++) {
        if (!table[v].used) {
            continue;
        }
        variant *made = &variants[(*count)++];
        made->name = table[v].name;
        made->config = *config;
        made->features_off = table[v].features_off;
        for (int64_t l = 0; l < config->num_hidden_layers; l++) {
            if (table[v].from != CPPARITY_LAYER_FULL &&
                made->config.layer_types[l] == table[v].from) {
                made->config.layer_types[l] = CPPARITY_LAYER_FULL;
            }
        }
    }
}

int discrimination_reruns(const cpparity_case *checked) {
    variant variants[VARIANT_COUNT];
    int count = 0;
    variants_of(checked, variants, &count);
    return count;
}

/* Each rerun of checked, on team (NULL: alone); with results, its record appended there (the
 * change against normal, threshold 10 × threshold_limit), without, nothing kept (a team's other
 * ranks: discrimination_share). */
static cpparity_status rerun_each(run_results *results, const cpparity_case *checked,
                                  const reference_outputs *normal, uint64_t seed,
                                  double threshold_limit, const reference_team *team,
                                  cpparity_error *error) {
    variant variants[VARIANT_COUNT];
    int count = 0;
    variants_of(checked, variants, &count);
    cpparity_status status = CPPARITY_OK;
    for (int v = 0; v < count && status == CPPARITY_OK; v++) {
        reference_outputs changed;
        status = reference_outputs_compute_variant(&changed, checked, &variants[v].config,
                                                   variants[v].features_off, seed, team, error);
        double change = 0.0;
        if (status == CPPARITY_OK && results != NULL) {
            status = largest_change(&changed, normal, &change, error);
        }
        if (status == CPPARITY_OK && results != NULL) {
            status = append_record(results, checked, variants[v].name, change,
                                   10.0 * threshold_limit, error);
        }
        reference_outputs_free(&changed);
    }
    return status;
}

cpparity_status discrimination_check(run_results *results, const cpparity_case *checked,
                                     const reference_outputs *normal, uint64_t seed,
                                     double threshold_limit, const reference_team *team,
                                     cpparity_error *error) {
    return rerun_each(results, checked, normal, seed, threshold_limit, team, error);
}

cpparity_status discrimination_share(const cpparity_case *checked, uint64_t seed,
                                     const reference_team *team, cpparity_error *error) {
    return rerun_each(NULL, checked, NULL, seed, 0.0, team, error);
}
