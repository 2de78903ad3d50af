/* judge_item.c — comparing an item's outputs with the reference and deciding it (see
 * judge_item.h). */
#include "harness/judging/judge_item.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/judging/compare.h"
#include "harness/judging/token_layout.h"

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

/* Where one rank's rows are: how many, the global position of each, and its logits. */
typedef struct rank_rows {
    int64_t length;           /* L_r */
    const int64_t *positions; /* (L_r) global positions; NULL: consecutive from first */
    int64_t first;            /* positions NULL: the global position of row 0 */
    const float *logits;      /* [B, L_r, V] the rank's logits in in->logits */
} rank_rows;

/* The rows rank r holds under in (judge_item.h: contiguous when in->positions is NULL). */
static rank_rows rows_of(const judge_inputs *in, int64_t r, int64_t batch, int64_t vocab) {
    rank_rows rows = {in->local_len, NULL, r * in->local_len, in->logits};
    if (in->positions == NULL) {
        rows.logits += r * batch * in->local_len * vocab;
        return rows;
    }
    rows.length = in->lengths[r];
    rows.positions = in->positions[r];
    rows.first = -1;
    for (int64_t q = 0; q < r; q++) {
        rows.logits += batch * in->lengths[q] * vocab;
    }
    return rows;
}

static int64_t row_position(const rank_rows *rows, int64_t t) {
    return rows->positions != NULL ? rows->positions[t] : rows->first + t;
}

/* The global position of the rank's row 0 when its rows are consecutive positions, else −1
 * (tensor_record.position_offset; judge_item.h). */
static int64_t consecutive_offset(const rank_rows *rows) {
    if (rows->positions == NULL) {
        return rows->first;
    }
    for (int64_t t = 1; t < rows->length; t++) {
        if (rows->positions[t] != rows->positions[0] + t) {
            return -1;
        }
    }
    return rows->length > 0 ? rows->positions[0] : -1;
}

/* The reference logits at a rank's rows, [B, L_r, V]; positions past S (automatic padding) are
 * 0. When include is not NULL it marks the compared elements: real positions whose query row is
 * not fully masked. */
static void reference_logits_rows(double *slice, uint8_t *include, const reference_outputs *ref,
                                  const rank_rows *rows) {
    const int64_t B = ref->batch, S = ref->seq_len, V = ref->vocab, L = rows->length;
    const double *logits = ref->logits;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < L; t++) {
            const int64_t position = row_position(rows, t);
            const bool real = position < S;
            /* fully masked query rows: logits are "don't care" (masks.md), not compared */
            const bool compared = real && !ref->fully_masked[b * S + position];
            for (int64_t v = 0; v < V; v++) {
                const int64_t i = (b * L + t) * V + v;
                slice[i] = real ? logits[(b * S + position) * V + v] : 0.0;
                if (include != NULL) {
                    include[i] = compared ? 1 : 0;
                }
            }
        }
    }
}

/* The naive baseline's logits at the same rows, [B, L_r, V]; positions past S are 0. */
static void naive_logits_rows(float *slice, const naive_outputs *naive, int64_t batch,
                              int64_t seq_len, int64_t vocab, const rank_rows *rows) {
    const int64_t L = rows->length;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t t = 0; t < L; t++) {
            const int64_t position = row_position(rows, t);
            for (int64_t v = 0; v < vocab; v++) {
                slice[(b * L + t) * vocab + v] =
                    position < seq_len ? naive->logits[(b * seq_len + position) * vocab + v] : 0.0f;
            }
        }
    }
}

/* The logits error along a rank's rows [B, L, V]: per row, ‖x − r‖₂ / ‖r‖₂ over the batch
 * rows and vocabulary of the included elements (‖x − r‖₂ where ‖r‖₂ is 0; NaN where nothing is
 * included), summed in float64 in index order. NULL when out of memory (the profile is optional:
 * the verdict never depends on it). */
static double *position_profile(const float *x, const double *r, const uint8_t *include,
                                int64_t batch, int64_t length, int64_t vocab) {
    double *profile = malloc((size_t)(length > 0 ? length : 1) * sizeof *profile);
    for (int64_t p = 0; profile != NULL && p < length; p++) {
        double error = 0.0, norm = 0.0;
        int64_t compared = 0;
        for (int64_t b = 0; b < batch; b++) {
            const int64_t base = (b * length + p) * vocab;
            for (int64_t v = 0; v < vocab; v++) {
                if (include == NULL || include[base + v]) {
                    const double difference = (double)x[base + v] - r[base + v];
                    error += difference * difference;
                    norm += r[base + v] * r[base + v];
                    compared++;
                }
            }
        }
        profile[p] = compared == 0 ? NAN : norm > 0.0 ? sqrt(error) / sqrt(norm) : sqrt(error);
    }
    return profile;
}

/* The element a failure names (record->worst): the first non-finite one when there is one, else
 * the largest finite error; −1 when there is neither. */
static int64_t named_element(const compare_metrics *metrics) {
    return metrics->first_nonfinite >= 0 ? metrics->first_nonfinite : metrics->worst_index;
}

/* The naive baseline's relative L2 error on the elements a record compares. */
static double naive_error(const float *naive, const double *reference, int64_t count,
                          const uint8_t *include) {
    compare_metrics metrics;
    compare_float32(&metrics, naive, reference, count, include);
    return metrics.nonfinite > 0 ? NAN : metrics.relative_l2;
}

/* The positions of in checked as judge_item.h requires (nothing to check when contiguous);
 * *held_out receives how many the ranks hold (0 when contiguous). */
static cpparity_status check_positions(const judge_inputs *in, int64_t cp, int64_t seq_len,
                                       int64_t *held_out, cpparity_error *error) {
    *held_out = 0;
    if (in->positions == NULL) {
        return CPPARITY_OK;
    }
    int64_t held = 0;
    for (int64_t r = 0; r < cp; r++) {
        if (in->lengths[r] < 0) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank %lld holds %lld rows",
                                      (long long)r, (long long)in->lengths[r]);
        }
        held += in->lengths[r];
    }
    if (held < seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "the ranks hold %lld positions, fewer than the sequence's %lld",
                                  (long long)held, (long long)seq_len);
    }
    *held_out = held;
    return token_layout_check_partition(held, cp, in->positions, in->lengths, error);
}

static cpparity_status compare_all(run_item *item, const judge_inputs *in, cpparity_error *error) {
    const reference_outputs *ref = in->reference;
    const cpparity_case *c = item->source;
    const int64_t cp = item->cp, B = c->batch_size;
    const int64_t V = c->model.vocab_size, P = ref->parameter_table.total;
    int64_t held = 0;
    cpparity_status status = check_positions(in, cp, ref->seq_len, &held, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const token_layout_kind layout =
        in->positions == NULL ? TOKEN_LAYOUT_CONTIGUOUS
                              : token_layout_recognise(held, cp, in->positions, in->lengths, NULL);
    snprintf(item->token_layout, sizeof item->token_layout, "%s", token_layout_kind_name(layout));
    int64_t longest = 1; /* the largest rank's logits, for the scratch slices */
    for (int64_t r = 0; r < cp; r++) {
        const int64_t length = rows_of(in, r, B, V).length;
        longest = B * length * V > longest ? B * length * V : longest;
    }
    item->tensors_expected = cp * (2 + ref->parameter_table.count);
    item->tensors = calloc((size_t)item->tensors_expected, sizeof *item->tensors);
    double *reference_slice = malloc((size_t)longest * sizeof(double));
    float *naive_slice = malloc((size_t)longest * sizeof(float));
    uint8_t *include = malloc((size_t)longest);
    double *reference_gradient = NULL;
    if (!item->tensors || !reference_slice || !naive_slice || !include) {
        free(reference_slice);
        free(naive_slice);
        free(include);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (comparison)");
    }
    const naive_outputs *naive = in->naive;
    const double naive_loss_error = naive_error(&naive->loss, &ref->loss, 1, NULL);
    const bool keep_all = in->store == RUN_STORE_ALL;
    for (int64_t r = 0; r < cp; r++) {
        const double loss = in->losses[r];
        tensor_record *record = add_record(item, "loss", CPPARITY_KIND_LOSS, (int)r, 0, NULL);
        compare_float64(&record->metrics, &loss, &ref->loss, 1, NULL);
        record->baseline_error = naive_loss_error;
        if (keep_all || in->store == RUN_STORE_FAILURES) {
            keep_values(record, &in->losses[r], &ref->loss, 1);
        }
    }
    for (int64_t r = 0; r < cp; r++) {
        const rank_rows rows = rows_of(in, r, B, V);
        const int64_t L = rows.length, slice = B * L * V;
        reference_logits_rows(reference_slice, include, ref, &rows);
        tensor_record *record =
            add_record(item, "logits", CPPARITY_KIND_LOGITS, (int)r, 3, (int64_t[]){B, L, V});
        record->position_offset = consecutive_offset(&rows);
        if (record->position_offset < 0 && L > 0) { /* the results file records them */
            record->positions = malloc((size_t)L * sizeof *record->positions);
            if (record->positions == NULL) {
                free(reference_slice);
                free(naive_slice);
                free(include);
                return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
            }
            memcpy(record->positions, rows.positions, (size_t)L * sizeof *record->positions);
        }
        compare_float32(&record->metrics, rows.logits, reference_slice, slice, include);
        naive_logits_rows(naive_slice, naive, B, ref->seq_len, V, &rows);
        record->baseline_error = naive_error(naive_slice, reference_slice, slice, include);
        item->logits_excluded += record->metrics.excluded;
        int64_t worst[3] = {0, 0, 0};
        const int64_t named = named_element(&record->metrics);
        if (named >= 0) {
            compare_coordinates(named, 3, record->shape, worst);
        }
        record->worst[0] = worst[0];
        record->worst[1] = L > 0 ? row_position(&rows, worst[1]) : 0;
        record->worst[2] = worst[2];
        record->position_error = position_profile(rows.logits, reference_slice, include, B, L, V);
        if (keep_all) {
            keep_values(record, rows.logits, reference_slice, slice);
        }
    }
    item->gradients_identical = true;
    for (int64_t e = 0; e < ref->parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &ref->parameter_table.entries[e];
        char name[CPPARITY_RECORD_NAME];
        snprintf(name, sizeof name, "grads/%s", entry->name);
        reference_gradient = ref->gradients + entry->offset;
        const double naive_gradient_error =
            naive_error(naive->gradients + entry->offset, reference_gradient, entry->count, NULL);
        for (int64_t r = 0; r < cp; r++) {
            const float *gradient = in->gradients + r * P + entry->offset;
            tensor_record *record =
                add_record(item, name, CPPARITY_KIND_GRADS, (int)r, entry->rank, entry->shape);
            compare_float32(&record->metrics, gradient, reference_gradient, entry->count, NULL);
            record->baseline_error = naive_gradient_error;
            if (named_element(&record->metrics) >= 0) {
                compare_coordinates(named_element(&record->metrics), entry->rank, entry->shape,
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
    free(naive_slice);
    free(include);
    return CPPARITY_OK;
}

/* Decides every tensor of a finished item with compare_decide (the naive baseline's error on
 * the same elements; for cp > 1 also the tensor's error at cp = 1). */
static void decide_tensors(run_item *item, int64_t case_index, const baseline_table *baselines) {
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        record->cp1_error = NAN;
        if (!item->is_baseline && baselines != NULL) {
            const baseline_entry *entry =
                baseline_table_find(baselines, case_index, item->dtype, record->name);
            record->cp1_error = entry != NULL ? entry->error : NAN;
        }
        record->decision = compare_decide(&record->metrics, record->baseline_error,
                                          record->cp1_error, &record->tolerance);
        if (!item->is_baseline && baselines != NULL && isnan(record->cp1_error)) {
            record->decision.passed = false;
            snprintf(record->decision.reason, sizeof record->decision.reason,
                     "no error at cp 1 for this tensor (the CP-only check needs it)");
        }
    }
}

/* The item's outcome, worst tensor and message from its decided tensors. A baseline over its
 * ceiling makes the item an ERROR: the harness, not the implementation, is then at fault. */
static void decide_outcome(run_item *item) {
    item->worst_ratio = 0.0;
    item->worst_tensor = -1;
    int64_t failures = 0, first_failure = -1, out_of_bounds = -1;
    double failure_ratio = 0.0; /* of first_failure: the worst failing tensor */
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        if (out_of_bounds < 0 && !(record->baseline_error <= record->tolerance.ceiling)) {
            out_of_bounds = i;
        }
        const double ratio = tensor_record_deciding_limit(record).ratio;
        if (!record->decision.passed) { /* a non-finite one (NaN ratio) first, else the largest */
            failures++;
            if (first_failure < 0 ||
                (!isnan(failure_ratio) && (isnan(ratio) || ratio > failure_ratio))) {
                first_failure = i;
                failure_ratio = ratio;
            }
        }
        if (item->worst_tensor < 0 || ratio > item->worst_ratio || isnan(ratio)) {
            item->worst_ratio = ratio;
            item->worst_tensor = i;
        }
    }
    if (first_failure >= 0) { /* a failing item shows a failing tensor, never a passing one */
        item->worst_tensor = first_failure;
        item->worst_ratio = failure_ratio;
    }
    if (out_of_bounds >= 0) {
        const tensor_record *record = &item->tensors[out_of_bounds];
        item->outcome = RUN_ERROR;
        item->error_status = CPPARITY_ERROR_RUNTIME;
        snprintf(item->message, sizeof item->message,
                 "the naive baseline errs %.2e on %s, over its ceiling %.2e (%s): the baseline "
                 "itself is out of bounds, so this run cannot be judged; raise the ceiling if "
                 "that error is expected",
                 record->baseline_error, record->name, record->tolerance.ceiling,
                 cpparity_tolerance_origin_name(record->tolerance.ceiling_origin));
        return;
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

void judge_item_decide(run_item *item, int64_t case_index, const baseline_table *baselines) {
    decide_tensors(item, case_index, baselines);
    decide_outcome(item);
}

/* Adds where a failing logits record's first non-finite value is, by batch row, global position
 * and vocabulary id, to its reason "… (first at index i)": the flat index alone is local to the
 * rank's rows. */
static void locate_nonfinite_logits(run_item *item, const judge_inputs *in) {
    const int64_t B = item->source->batch_size, V = item->source->model.vocab_size;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        char *reason = record->decision.reason;
        const size_t length = strlen(reason);
        if (record->kind != CPPARITY_KIND_LOGITS || record->decision.passed ||
            record->metrics.first_nonfinite < 0 || strstr(reason, "non-finite value") == NULL ||
            length == 0 || reason[length - 1] != ')') {
            continue;
        }
        const rank_rows rows = rows_of(in, record->rank, B, V);
        int64_t at[3];
        compare_coordinates(record->metrics.first_nonfinite, 3, record->shape, at);
        snprintf(reason + length - 1, sizeof record->decision.reason - (length - 1),
                 ": batch row %lld position %lld vocab %lld)", (long long)at[0],
                 (long long)row_position(&rows, at[1]), (long long)at[2]);
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
static void keep_failures(run_item *item, const judge_inputs *in) {
    const int64_t B = item->source->batch_size;
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
            const rank_rows rows = rows_of(in, record->rank, B, V);
            const int64_t slice = B * rows.length * V;
            double *reference = malloc((size_t)(slice > 0 ? slice : 1) * sizeof(double));
            if (reference != NULL) {
                reference_logits_rows(reference, NULL, in->reference, &rows);
                keep_values(record, rows.logits, reference, slice);
            }
            free(reference);
        }
    }
}

cpparity_status judge_item(run_item *item, int64_t case_index, const judge_inputs *in,
                           const baseline_table *baselines, cpparity_error *error) {
    cpparity_status status = compare_all(item, in, error);
    if (status == CPPARITY_OK) {
        decide_tensors(item, case_index, baselines);
        locate_nonfinite_logits(item, in);
        decide_outcome(item);
        if (in->store == RUN_STORE_FAILURES) {
            keep_failures(item, in); /* --store all kept everything, --store metrics keeps none */
        }
        trim_stored(item, in->store);
    }
    return status;
}
