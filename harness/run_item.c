/* run_item.c — one (case, cp, dtype) run, its comparison and verdict (see run_item.h). */
#include "run_item.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/model_f32.h"
#include "distributed/shard.h"
#include "fixtures/batch_fixture.h"
#include "harness/monotonic_clock.h"
#include "harness/reference_cache.h"

/* ---------------------------------------------------------------------------------------- */
/* baseline table                                                                           */

cpparity_status baseline_table_add(baseline_table *table, int64_t case_index, const run_item *item,
                                   cpparity_error *error) {
    baseline_entry *grown = realloc(table->entries, (size_t)(table->count + item->tensor_count) *
                                                        sizeof *table->entries);
    if (grown == NULL && item->tensor_count > 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (baselines)");
    }
    table->entries = grown;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->rank != 0) {
            continue;
        }
        baseline_entry *entry = &table->entries[table->count++];
        memset(entry, 0, sizeof *entry);
        entry->case_index = case_index;
        entry->dtype = (int32_t)item->dtype;
        snprintf(entry->name, sizeof entry->name, "%s", record->name);
        entry->error = record->metrics.relative_l2;
    }
    return CPPARITY_OK;
}

const baseline_entry *baseline_table_find(const baseline_table *table, int64_t case_index,
                                          cpparity_dtype dtype, const char *name) {
    for (int64_t i = 0; i < table->count; i++) {
        const baseline_entry *entry = &table->entries[i];
        if (entry->case_index == case_index && entry->dtype == (int32_t)dtype &&
            strcmp(entry->name, name) == 0) {
            return entry;
        }
    }
    return NULL;
}

void baseline_table_free(baseline_table *table) {
    free(table->entries);
    memset(table, 0, sizeof *table);
}

/* ---------------------------------------------------------------------------------------- */
/* describing where                                                                         */

void run_item_describe_worst(const run_item *item, const tensor_record *record, char *text,
                             size_t size) {
    const int64_t head_dim = item->source->model.head_dim;
    if (record->kind == CPPARITY_KIND_LOSS) {
        snprintf(text, size, "%s rank %d", record->name, record->rank);
    } else if (record->kind == CPPARITY_KIND_LOGITS) {
        snprintf(text, size, "%s rank %d batch row %lld position %lld vocab %lld", record->name,
                 record->rank, (long long)record->worst[0], (long long)record->worst[1],
                 (long long)record->worst[2]);
    } else if (record->shape_rank == 2) {
        char head[48] = "";
        if (strstr(record->name, "q_proj") || strstr(record->name, "k_proj") ||
            strstr(record->name, "v_proj")) {
            snprintf(head, sizeof head, " (head %lld)", (long long)(record->worst[0] / head_dim));
        } else if (strstr(record->name, "o_proj")) {
            snprintf(head, sizeof head, " (head %lld)", (long long)(record->worst[1] / head_dim));
        }
        snprintf(text, size, "%s rank %d row %lld column %lld%s", record->name, record->rank,
                 (long long)record->worst[0], (long long)record->worst[1], head);
    } else {
        snprintf(text, size, "%s rank %d feature %lld", record->name, record->rank,
                 (long long)record->worst[0]);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* the implementation under test on every rank                                              */

typedef struct distributed_outputs {
    float loss;       /* this rank's loss (identical on every rank) */
    float *logits;    /* [B, L, V] this rank's slice, owned */
    float *gradients; /* all parameters after the all-reduce, owned */
    int64_t parameter_count;
    double seconds;
} distributed_outputs;

static cpparity_status run_distributed(cpparity_comm *group, const cpparity_case *c, uint64_t seed,
                                       const cpparity_attention_kernel *kernel,
                                       distributed_outputs *outputs, cpparity_error *error) {
    memset(outputs, 0, sizeof *outputs);
    cpparity_batch full = {0}, local = {0};
    f32_model model = {0};
    const double start = monotonic_seconds();
    cpparity_status status = fixture_batch_build(&full, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, seed, error);
    const shard_layout layout = shard_layout_make(c->seq_len, group->size, group->rank);
    if (status == CPPARITY_OK) {
        status = shard_slice_batch(&local, &full, &layout, error);
    }
    if (status == CPPARITY_OK) {
        status = f32_model_init(&model, &c->model, c->batch_size, c->seq_len, seed, group, kernel,
                                error);
    }
    if (status == CPPARITY_OK) {
        status = f32_model_forward(&model, &local, error);
    }
    if (status == CPPARITY_OK) {
        status = f32_model_backward(&model, &local, error);
    }
    if (status == CPPARITY_OK) {
        const int64_t logits = c->batch_size * layout.local_len * c->model.vocab_size;
        outputs->loss = model.loss;
        outputs->parameter_count = model.parameter_table.total;
        outputs->logits = malloc((size_t)logits * sizeof(float));
        outputs->gradients = malloc((size_t)outputs->parameter_count * sizeof(float));
        if (!outputs->logits || !outputs->gradients) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        } else {
            memcpy(outputs->logits, f32_model_logits(&model), (size_t)logits * sizeof(float));
            memcpy(outputs->gradients, model.gradients,
                   (size_t)outputs->parameter_count * sizeof(float));
        }
    }
    outputs->seconds = monotonic_seconds() - start;
    f32_model_free(&model);
    fixture_batch_free(&local);
    fixture_batch_free(&full);
    return status;
}

/* ---------------------------------------------------------------------------------------- */
/* comparison on the group's first rank                                                     */

/* Appends a record; its values/reference are copied only when keep is set. */
static tensor_record *add_record(run_item *item, const char *name, cpparity_tensor_kind kind,
                                 int rank, int shape_rank, const int64_t *shape) {
    tensor_record *record = &item->tensors[item->tensor_count++];
    memset(record, 0, sizeof *record);
    snprintf(record->name, sizeof record->name, "%s", name);
    record->kind = kind;
    record->rank = rank;
    record->shape_rank = shape_rank;
    for (int d = 0; d < shape_rank; d++) {
        record->shape[d] = shape[d];
    }
    record->tolerance = item->source->tolerances[item->dtype][kind];
    record->decision.limit = NAN;
    return record;
}

/* Keeps copies of the compared values for the results file. */
static void keep_values(tensor_record *record, const float *values, const double *reference,
                        int64_t count) {
    record->values = malloc((size_t)count * sizeof(float));
    record->reference = malloc((size_t)count * sizeof(double));
    if (record->values != NULL && record->reference != NULL) {
        memcpy(record->values, values, (size_t)count * sizeof(float));
        memcpy(record->reference, reference, (size_t)count * sizeof(double));
    } else {
        free(record->values);
        free(record->reference);
        record->values = NULL;
        record->reference = NULL;
    }
}

/* The reference logits of the slice [offset, offset + L) of every row, [B, L, V]; positions
 * past S (automatic padding) are 0. When include is not NULL it marks the compared elements:
 * real positions whose query row is not fully masked. */
static void reference_logits_slice(double *slice, uint8_t *include, const reference_outputs *ref,
                                   int64_t local_len, int64_t offset) {
    const int64_t B = ref->batch, S = ref->seq_len, V = ref->vocab;
    const double *logits = ref->logits;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < local_len; t++) {
            const int64_t position = offset + t;
            const bool real = position < S;
            /* fully masked query rows: logits are "don't care" (masks.md), not compared */
            const bool compared = real && !ref->fully_masked[b * S + position];
            for (int64_t v = 0; v < V; v++) {
                const int64_t i = (b * local_len + t) * V + v;
                slice[i] = real ? logits[(b * S + position) * V + v] : 0.0;
                if (include != NULL) {
                    include[i] = compared ? 1 : 0;
                }
            }
        }
    }
}

typedef struct comparison_inputs {
    const reference_outputs *reference;
    const float *losses;    /* [cp] */
    const float *logits;    /* [cp][B, L, V] */
    const float *gradients; /* [cp][P] */
    shard_layout layout;    /* of rank 0 (offset recomputed per rank) */
    run_store store;
} comparison_inputs;

static cpparity_status compare_all(run_item *item, const comparison_inputs *in,
                                   cpparity_error *error) {
    const reference_outputs *ref = in->reference;
    const cpparity_case *c = item->source;
    const int64_t cp = item->cp, B = c->batch_size, L = in->layout.local_len;
    const int64_t V = c->model.vocab_size, P = ref->parameter_table.total;
    const int64_t slice = B * L * V;
    item->tensors_expected = cp * (2 + ref->parameter_table.count);
    item->tensors = calloc((size_t)item->tensors_expected, sizeof *item->tensors);
    double *reference_slice = malloc((size_t)slice * sizeof(double));
    uint8_t *include = malloc((size_t)slice);
    double *reference_gradient = NULL;
    if (!item->tensors || !reference_slice || !include) {
        free(reference_slice);
        free(include);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (comparison)");
    }
    const bool keep_all = in->store == RUN_STORE_ALL;
    for (int64_t r = 0; r < cp; r++) {
        const double loss = in->losses[r];
        tensor_record *record = add_record(item, "loss", CPPARITY_KIND_LOSS, (int)r, 0, NULL);
        compare_float64(&record->metrics, &loss, &ref->loss, 1, NULL);
        if (keep_all || in->store == RUN_STORE_FAILURES) {
            keep_values(record, &in->losses[r], &ref->loss, 1);
        }
    }
    for (int64_t r = 0; r < cp; r++) {
        const int64_t offset = r * L;
        reference_logits_slice(reference_slice, include, ref, L, offset);
        tensor_record *record =
            add_record(item, "logits", CPPARITY_KIND_LOGITS, (int)r, 3, (int64_t[]){B, L, V});
        record->position_offset = offset;
        compare_float32(&record->metrics, in->logits + r * slice, reference_slice, slice, include);
        item->logits_excluded += record->metrics.excluded;
        int64_t worst[3] = {0, 0, 0};
        if (record->metrics.worst_index >= 0) {
            compare_coordinates(record->metrics.worst_index, 3, record->shape, worst);
        }
        record->worst[0] = worst[0];
        record->worst[1] = worst[1] + offset;
        record->worst[2] = worst[2];
        if (keep_all) {
            keep_values(record, in->logits + r * slice, reference_slice, slice);
        }
    }
    item->gradients_identical = true;
    for (int64_t e = 0; e < ref->parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &ref->parameter_table.entries[e];
        char name[112];
        snprintf(name, sizeof name, "grads/%s", entry->name);
        reference_gradient = ref->gradients + entry->offset;
        for (int64_t r = 0; r < cp; r++) {
            const float *gradient = in->gradients + r * P + entry->offset;
            tensor_record *record =
                add_record(item, name, CPPARITY_KIND_GRADS, (int)r, entry->rank, entry->shape);
            compare_float32(&record->metrics, gradient, reference_gradient, entry->count, NULL);
            if (record->metrics.worst_index >= 0) {
                compare_coordinates(record->metrics.worst_index, entry->rank, entry->shape,
                                    record->worst);
            }
            if (r > 0 && memcmp(gradient, in->gradients + entry->offset,
                                (size_t)entry->count * sizeof(float)) != 0) {
                item->gradients_identical = false;
            }
            if (keep_all) {
                keep_values(record, gradient, reference_gradient, entry->count);
            }
        }
    }
    free(reference_slice);
    free(include);
    return CPPARITY_OK;
}

/* Decides every tensor of a finished item (the ceiling for cp = 1, ratio × baseline + floor
 * otherwise) and the item's outcome. */
static void run_item_decide(run_item *item, int64_t case_index, const baseline_table *baselines) {
    item->worst_ratio = 0.0;
    item->worst_tensor = -1;
    int64_t failures = 0, first_failure = -1;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        double baseline_error = NAN;
        if (!item->is_baseline) {
            const baseline_entry *entry =
                baseline_table_find(baselines, case_index, item->dtype, record->name);
            baseline_error = entry != NULL ? entry->error : NAN;
        }
        record->baseline_error = item->is_baseline ? record->metrics.relative_l2 : baseline_error;
        record->decision =
            compare_decide(&record->metrics, baseline_error, &record->tolerance, item->is_baseline);
        if (!item->is_baseline && isnan(baseline_error)) {
            record->decision.passed = false;
            snprintf(record->decision.reason, sizeof record->decision.reason,
                     "no baseline error at cp 1 for this tensor");
        }
        const double ratio = record->decision.limit > 0.0
                                 ? record->metrics.relative_l2 / record->decision.limit
                                 : (record->metrics.relative_l2 > 0.0 ? INFINITY : 0.0);
        if (!record->decision.passed) {
            failures++;
            if (first_failure < 0 || ratio > item->worst_ratio) {
                first_failure = i;
            }
        }
        if (item->worst_tensor < 0 || ratio > item->worst_ratio || isnan(ratio)) {
            item->worst_ratio = ratio;
            item->worst_tensor = i;
        }
    }
    if (failures > 0 || item->tensor_count != item->tensors_expected ||
        !item->gradients_identical) {
        item->outcome = RUN_FAIL;
        if (failures > 0) {
            const tensor_record *record = &item->tensors[first_failure];
            char where[256];
            run_item_describe_worst(item, record, where, sizeof where);
            snprintf(item->message, sizeof item->message, "%lld tensor%s failed; worst: %s: %s",
                     (long long)failures, failures == 1 ? "" : "s", where, record->decision.reason);
        } else if (item->tensor_count != item->tensors_expected) {
            snprintf(item->message, sizeof item->message, "compared %lld tensors, expected %lld",
                     (long long)item->tensor_count, (long long)item->tensors_expected);
        } else {
            snprintf(item->message, sizeof item->message,
                     "gradients differ between ranks after the all-reduce");
        }
    } else {
        item->outcome = RUN_PASS;
    }
}

/* Drops stored values of passing tensors under --store failures. */
static void trim_stored(run_item *item, run_store store) {
    if (store != RUN_STORE_FAILURES) {
        return;
    }
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        if (record->decision.passed) {
            free(record->values);
            free(record->reference);
            record->values = NULL;
            record->reference = NULL;
        }
    }
}

/* Stores the values of failing gradients and logits (only scalars were kept so far). */
static void keep_failures(run_item *item, const comparison_inputs *in) {
    const int64_t B = item->source->batch_size, L = in->layout.local_len;
    const int64_t V = item->source->model.vocab_size, P = in->reference->parameter_table.total;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        if (record->decision.passed || record->values != NULL) {
            continue;
        }
        if (record->kind == CPPARITY_KIND_GRADS) {
            const cpparity_tensor_entry *entry = cpparity_tensor_table_find(
                &in->reference->parameter_table, record->name + strlen("grads/"));
            if (entry != NULL) {
                keep_values(record, in->gradients + record->rank * P + entry->offset,
                            in->reference->gradients + entry->offset, entry->count);
            }
        } else if (record->kind == CPPARITY_KIND_LOGITS) {
            const int64_t slice = B * L * V;
            double *reference = malloc((size_t)slice * sizeof(double));
            if (reference != NULL) {
                reference_logits_slice(reference, NULL, in->reference, L, record->position_offset);
            }
            if (reference != NULL) {
                keep_values(record, in->logits + record->rank * slice, reference, slice);
            }
            free(reference);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */

/* Gathers `bytes` from every rank of group into a malloc'd array on root (NULL elsewhere).
 * On root, *mismatch (when not NULL) is the first rank whose contribution was not `bytes`
 * long, or −1. */
static cpparity_status gather(cpparity_comm *group, int root, const void *data, int64_t bytes,
                              void **received, int *mismatch, cpparity_error *error) {
    int64_t *sizes = calloc((size_t)group->size, sizeof *sizes);
    if (sizes == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    cpparity_status status =
        cpparity_gather_bytes(group, data, bytes, received, sizes, root, error);
    if (mismatch != NULL) {
        *mismatch = -1;
        for (int r = 0; status == CPPARITY_OK && group->rank == root && r < group->size; r++) {
            if (sizes[r] != bytes && *mismatch < 0) {
                *mismatch = r;
            }
        }
    }
    free(sizes);
    return status;
}

cpparity_status run_item_execute(cpparity_comm *group, int root, const run_plan *plan,
                                 int64_t index, const run_options *options,
                                 const cpparity_attention_kernel *kernel,
                                 const baseline_table *baselines, reference_cache *cache,
                                 run_item *item, cpparity_error *error) {
    const run_plan_item *planned = &plan->items[index];
    const cpparity_case *c = plan->cases[planned->case_index];
    memset(item, 0, sizeof *item);
    item->source = c;
    snprintf(item->suite_path, sizeof item->suite_path, "%s",
             plan->case_suite[planned->case_index]);
    item->cp = planned->cp;
    item->dtype = planned->dtype;
    item->is_baseline = planned->is_baseline;
    item->worst_tensor = -1;
    item->padded_seq_len = shard_layout_make(c->seq_len, planned->cp, 0).padded_seq_len;

    /* refusals come before any compute, identically on every rank */
    cpparity_error refusal;
    if (f32_model_check_parallelism(&c->model, planned->cp, &refusal) != CPPARITY_OK) {
        if (group->rank == root) {
            const bool expected = c->expect_refuse && strstr(refusal.message, c->refusal) != NULL;
            item->outcome = expected ? RUN_REFUSED : c->expect_refuse ? RUN_FAIL : RUN_ERROR;
            item->error_status = CPPARITY_ERROR_INPUT; /* refused unexpectedly: bad input */
            snprintf(item->message, sizeof item->message, "%.700s%s%.200s%s", refusal.message,
                     expected || !c->expect_refuse ? "" : " (expected the refusal to contain '",
                     expected || !c->expect_refuse ? "" : c->refusal,
                     expected || !c->expect_refuse ? "" : "')");
        } else {
            memset(item, 0, sizeof *item);
        }
        return CPPARITY_OK;
    }

    distributed_outputs outputs;
    cpparity_error local_error;
    cpparity_error_clear(&local_error);
    cpparity_status local_status =
        run_distributed(group, c, planned->seed, kernel, &outputs, &local_error);
    cpparity_status agreed;
    cpparity_status status = cpparity_agree_status(group, local_status, &agreed, error);
    if (status != CPPARITY_OK) {
        free(outputs.logits);
        free(outputs.gradients);
        return status;
    }
    void *messages = NULL;
    if (agreed != CPPARITY_OK) {
        /* every rank's message reaches rank 0, which reports the first one */
        status = gather(group, root, local_error.message, (int64_t)sizeof local_error.message,
                        &messages, NULL, error);
        if (status == CPPARITY_OK && group->rank == root) {
            const char *first = "";
            for (int r = 0; r < group->size && first[0] == '\0'; r++) {
                first = (const char *)messages + (size_t)r * sizeof local_error.message;
            }
            item->outcome = RUN_ERROR;
            item->error_status = (int32_t)agreed;
            snprintf(item->message, sizeof item->message, "%s", first);
        }
        free(messages);
        free(outputs.logits);
        free(outputs.gradients);
        if (group->rank != root) {
            memset(item, 0, sizeof *item);
        }
        return status;
    }
    if (c->expect_refuse && group->rank == root) {
        item->outcome = RUN_FAIL;
        snprintf(item->message, sizeof item->message,
                 "expected a refusal containing '%s', but cp %lld ran", c->refusal,
                 (long long)planned->cp);
    }

    const shard_layout layout = shard_layout_make(c->seq_len, group->size, group->rank);
    const int64_t slice = c->batch_size * layout.local_len * c->model.vocab_size;
    void *losses = NULL, *logits = NULL, *gradients = NULL;
    int mismatch = -1;
    status = gather(group, root, &outputs.loss, sizeof(float), &losses, NULL, error);
    if (status == CPPARITY_OK) {
        status = gather(group, root, outputs.logits, slice * (int64_t)sizeof(float), &logits, NULL,
                        error);
    }
    if (status == CPPARITY_OK) {
        /* every rank must deliver one value per parameter: a missing or extra gradient is a
         * failure, never silently realigned */
        status =
            gather(group, root, outputs.gradients, outputs.parameter_count * (int64_t)sizeof(float),
                   &gradients, &mismatch, error);
    }
    free(outputs.logits);
    free(outputs.gradients);
    if (status == CPPARITY_OK && group->rank == root && mismatch >= 0) {
        item->outcome = RUN_FAIL;
        snprintf(item->message, sizeof item->message,
                 "rank %d delivered a different number of gradient values than rank %d: a "
                 "missing or extra parameter gradient",
                 mismatch, root);
    }
    if (status == CPPARITY_OK && group->rank == root && !c->expect_refuse && mismatch < 0) {
        item->seconds = outputs.seconds;
        const reference_outputs *reference = NULL;
        int computed_now = 0;
        cpparity_error reference_error;
        const cpparity_status reference_status =
            reference_cache_get(cache, planned->case_index, c, planned->seed, &reference,
                                &computed_now, &reference_error);
        /* the reference's time is counted once, for the item that computed it */
        item->reference_seconds =
            reference_status == CPPARITY_OK && computed_now ? reference->seconds : 0.0;
        if (reference_status != CPPARITY_OK) {
            item->outcome = RUN_ERROR;
            item->error_status = (int32_t)reference_status;
            snprintf(item->message, sizeof item->message, "reference: %.1000s",
                     reference_error.message);
        } else if (outputs.parameter_count != reference->parameter_table.total) {
            item->outcome = RUN_FAIL;
            snprintf(item->message, sizeof item->message,
                     "the implementation has %lld gradient values, the reference %lld: a missing "
                     "or extra parameter gradient",
                     (long long)outputs.parameter_count,
                     (long long)reference->parameter_table.total);
        } else {
            const comparison_inputs in = {reference, losses, logits,
                                          gradients, layout, options->store};
            status = compare_all(item, &in, error);
            if (status == CPPARITY_OK) {
                run_item_decide(item, planned->case_index, baselines);
                keep_failures(item, &in);
                trim_stored(item, options->store);
            }
        }
    }
    free(losses);
    free(logits);
    free(gradients);
    if (group->rank != root) {
        memset(item, 0, sizeof *item);
    }
    return status;
}
