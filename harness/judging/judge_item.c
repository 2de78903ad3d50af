/* judge_item.c — comparing an item's outputs with the reference and deciding it (see
 * judge_item.h). */
#include "harness/judging/judge_item.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/judging/compare.h"
#include "common/row_blocks.h"
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

/* Where one rank's rows are: how many and the global position of each. */
typedef struct rank_rows {
    int64_t length;           /* L_r */
    const int64_t *positions; /* (L_r) global positions; NULL: consecutive from first */
    int64_t first;            /* positions NULL: the global position of row 0 */
} rank_rows;

/* The rows rank r holds under in (judge_item.h: contiguous when in->positions is NULL). */
static rank_rows rows_of(const judge_inputs *in, int64_t r) {
    rank_rows rows = {in->local_len, NULL, r * in->local_len};
    if (in->positions != NULL) {
        rows.length = in->lengths[r];
        rows.positions = in->positions[r];
        rows.first = -1;
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

/* The positions of in checked as judge_item.h requires; *held_out receives how many the ranks
 * hold (Sp). */
static cpparity_status check_positions(const judge_inputs *in, int64_t cp, int64_t seq_len,
                                       int64_t *held_out, cpparity_error *error) {
    *held_out = cp * in->local_len;
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

/* --- the logits, one block of positions at a time ----------------------------------------- */

/* One rank's logits record while the walk runs. */
typedef struct rank_logits {
    tensor_record *record;
    rank_rows rows;
    compare_accumulator metrics;
    double *profile_error, *profile_norm; /* (L_r) per row over batch rows and vocabulary */
    int64_t *profile_count;               /* (L_r) compared elements per row */
    double *naive_profile_error;          /* (L_r) the baseline's Σ (x − r)² per row, over the
                                             same elements as profile_norm */
    double *profile_worst;                /* (L_r) the row's largest |x − r| */
    int64_t *profile_worst_at;            /* (L_r) where: b·V + v */
    double naive_error, naive_norm;       /* the baseline's sums on the compared tokens */
    bool naive_nonfinite;                 /* a real token of the rank is not finite there */
    bool whole;                           /* values kept whole (record->values, ->reference) */
    bool windowed;                        /* values kept as a window (record->window) */
    int64_t named;                        /* the named element when the window was last kept */
    int64_t *block_rows;                  /* (≤ edge) the rank's rows in the current block */
    int64_t block_row_count;
} rank_logits;

/* Everything the walk holds: O(block·V) for the values, O(Sp) for the maps. */
typedef struct logits_walk {
    const judge_inputs *in;
    const reference_outputs *reference;
    int64_t cp, batch, seq_len, vocab, padded;
    row_blocks blocks; /* of the padded sequence */
    row_blocks reference_blocks;
    int64_t *owner, *row; /* (Sp) the rank and row holding each position */
    float *values;        /* (edge, V) the block's logits, by position */
    float *staging;       /* (edge, V) one run of a rank's rows as read */
    double *expected;     /* (edge, V) the reference's logits of the block */
    rank_logits *ranks;   /* (cp) */
} logits_walk;

static void walk_free(logits_walk *walk) {
    for (int64_t r = 0; walk->ranks != NULL && r < walk->cp; r++) {
        free(walk->ranks[r].profile_error);
        free(walk->ranks[r].profile_norm);
        free(walk->ranks[r].profile_count);
        free(walk->ranks[r].naive_profile_error);
        free(walk->ranks[r].profile_worst);
        free(walk->ranks[r].profile_worst_at);
        free(walk->ranks[r].block_rows);
    }
    free(walk->ranks);
    free(walk->owner);
    free(walk->row);
    free(walk->values);
    free(walk->staging);
    free(walk->expected);
}

static cpparity_status walk_start(logits_walk *walk, const judge_inputs *in, int64_t cp,
                                  int64_t padded, cpparity_error *error) {
    const reference_outputs *ref = in->reference;
    memset(walk, 0, sizeof *walk);
    walk->in = in;
    walk->reference = ref;
    walk->cp = cp;
    walk->batch = ref->batch;
    walk->seq_len = ref->seq_len;
    walk->vocab = ref->vocab;
    walk->padded = padded;
    walk->blocks = row_blocks_of(ref->batch, padded);
    walk->reference_blocks = row_blocks_of(ref->batch, ref->seq_len);
    const int64_t edge = row_blocks_widest(&walk->blocks), V = ref->vocab;
    walk->owner = malloc((size_t)(padded + 1) * sizeof *walk->owner);
    walk->row = malloc((size_t)(padded + 1) * sizeof *walk->row);
    walk->values = malloc((size_t)(edge * V + 1) * sizeof *walk->values);
    walk->staging = malloc((size_t)(edge * V + 1) * sizeof *walk->staging);
    walk->expected = malloc((size_t)(edge * V + 1) * sizeof *walk->expected);
    walk->ranks = calloc((size_t)cp, sizeof *walk->ranks);
    bool ok =
        walk->owner && walk->row && walk->values && walk->staging && walk->expected && walk->ranks;
    for (int64_t r = 0; ok && r < cp; r++) {
        rank_logits *rank = &walk->ranks[r];
        rank->rows = rows_of(in, r);
        const size_t length = (size_t)(rank->rows.length + 1);
        rank->profile_error = calloc(length, sizeof *rank->profile_error);
        rank->profile_norm = calloc(length, sizeof *rank->profile_norm);
        rank->profile_count = calloc(length, sizeof *rank->profile_count);
        rank->naive_profile_error = calloc(length, sizeof *rank->naive_profile_error);
        rank->profile_worst = calloc(length, sizeof *rank->profile_worst);
        rank->profile_worst_at = calloc(length, sizeof *rank->profile_worst_at);
        rank->block_rows = malloc((size_t)(edge + 1) * sizeof *rank->block_rows);
        ok = rank->profile_error && rank->profile_norm && rank->profile_count &&
             rank->naive_profile_error && rank->profile_worst && rank->profile_worst_at &&
             rank->block_rows;
        for (int64_t t = 0; ok && t < rank->rows.length; t++) {
            const int64_t position = row_position(&rank->rows, t);
            walk->owner[position] = r;
            walk->row[position] = t;
        }
    }
    return ok ? CPPARITY_OK
              : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (comparison)");
}

/* The implementation's rows of block into walk->values, by position: each rank's rows in the
 * block read in runs of consecutive rows. */
static cpparity_status read_block(logits_walk *walk, const row_block *block,
                                  cpparity_error *error) {
    const int64_t V = walk->vocab;
    for (int64_t r = 0; r < walk->cp; r++) {
        walk->ranks[r].block_row_count = 0;
    }
    for (int64_t p = block->begin; p < block->end; p++) {
        rank_logits *rank = &walk->ranks[walk->owner[p]];
        rank->block_rows[rank->block_row_count++] = walk->row[p];
    }
    const judge_logits *source = &walk->in->logits;
    for (int64_t r = 0; r < walk->cp; r++) {
        const rank_logits *rank = &walk->ranks[r];
        for (int64_t i = 0; i < rank->block_row_count;) {
            int64_t count = 1; /* a run of consecutive rows, in increasing order */
            while (i + count < rank->block_row_count &&
                   rank->block_rows[i + count] == rank->block_rows[i] + count) {
                count++;
            }
            const cpparity_status status =
                source->read(source->context, r, block->batch_row, rank->block_rows[i], count,
                             walk->staging, error);
            if (status != CPPARITY_OK) {
                return status;
            }
            for (int64_t j = 0; j < count; j++) {
                const int64_t position = row_position(&rank->rows, rank->block_rows[i + j]);
                memcpy(walk->values + (position - block->begin) * V, walk->staging + j * V,
                       (size_t)V * sizeof *walk->values);
            }
            i += count;
        }
    }
    return CPPARITY_OK;
}

/* Keeps rank's rows of the current block as its record's window (the element a failure names
 * moved into this block). Rows that are not consecutive keep only the named element's row. */
static void keep_window(logits_walk *walk, rank_logits *rank, const row_block *block) {
    tensor_record *record = rank->record;
    const int64_t V = walk->vocab, L = rank->rows.length;
    const int64_t named = named_element(&rank->metrics.metrics);
    const int64_t named_row = named / V % (L > 0 ? L : 1);
    int64_t first = rank->block_rows[0], count = rank->block_row_count;
    for (int64_t i = 1; i < count; i++) {
        if (rank->block_rows[i] != first + i) {
            first = named_row;
            count = 1;
            break;
        }
    }
    free(record->values);
    free(record->reference);
    record->values = malloc((size_t)(count * V) * sizeof *record->values);
    record->reference = malloc((size_t)(count * V) * sizeof *record->reference);
    if (record->values == NULL || record->reference == NULL) {
        free(record->values);
        free(record->reference);
        record->values = NULL;
        record->reference = NULL;
        record->window[2] = 0;
        return;
    }
    for (int64_t j = 0; j < count; j++) {
        const int64_t position = row_position(&rank->rows, first + j);
        const bool real = position < walk->seq_len;
        memcpy(record->values + j * V, walk->values + (position - block->begin) * V,
               (size_t)V * sizeof *record->values);
        for (int64_t v = 0; v < V; v++) {
            record->reference[j * V + v] =
                real ? walk->expected[(position - block->begin) * V + v] : 0.0;
        }
    }
    record->window[0] = block->batch_row;
    record->window[1] = first;
    record->window[2] = count;
    rank->named = named;
}

/* Compares one block: every position's row against the reference's, into its rank's record. */
static void compare_block(logits_walk *walk, const row_block *block) {
    const reference_outputs *ref = walk->reference;
    const naive_outputs *naive = walk->in->naive;
    const int64_t V = walk->vocab, S = walk->seq_len, b = block->batch_row;
    for (int64_t p = block->begin; p < block->end; p++) {
        rank_logits *rank = &walk->ranks[walk->owner[p]];
        const int64_t t = walk->row[p], L = rank->rows.length;
        const bool real = p < S;
        /* fully masked query rows: logits are "don't care" (masks.md), not compared */
        const bool compared = real && !ref->fully_masked[b * S + p];
        const float *x = walk->values + (p - block->begin) * V;
        const double *r = walk->expected + (p - block->begin) * V;
        const int64_t base = (b * L + t) * V;
        double error = 0.0, norm = 0.0, worst = -1.0;
        int64_t worst_at = 0;
        for (int64_t v = 0; v < V; v++) {
            const double expected = real ? r[v] : 0.0;
            compare_add(&rank->metrics, base + v, (double)x[v], expected, compared);
            if (compared) {
                const double difference = (double)x[v] - expected;
                error += difference * difference;
                norm += expected * expected;
                if (fabs(difference) > worst) { /* ties: the smaller vocabulary id */
                    worst = fabs(difference);
                    worst_at = v;
                }
            }
        }
        if (compared) {
            if (rank->profile_count[t] == 0 || worst > rank->profile_worst[t]) {
                rank->profile_worst[t] = worst;
                rank->profile_worst_at[t] = b * V + worst_at;
            }
            rank->profile_error[t] += error;
            rank->profile_norm[t] += norm;
            rank->profile_count[t] += V;
            rank->naive_error += naive->logits_error[b * S + p];
            rank->naive_norm += naive->logits_norm[b * S + p];
            rank->naive_profile_error[t] += naive->logits_error[b * S + p];
        }
        rank->naive_nonfinite |= real && naive->logits_nonfinite[b * S + p];
        if (rank->whole) {
            memcpy(rank->record->values + base, x, (size_t)V * sizeof *x);
            for (int64_t v = 0; v < V; v++) {
                rank->record->reference[base + v] = real ? r[v] : 0.0;
            }
        }
    }
    for (int64_t r = 0; r < walk->cp; r++) {
        rank_logits *rank = &walk->ranks[r];
        if (rank->windowed && rank->block_row_count > 0 &&
            named_element(&rank->metrics.metrics) != rank->named &&
            named_element(&rank->metrics.metrics) >= 0) {
            keep_window(walk, rank, block);
        }
    }
}

/* The rank's record from its walk: metrics, the baseline's error, profile, worst coordinates. */
static void finish_rank(rank_logits *rank, run_item *item) {
    tensor_record *record = rank->record;
    compare_finish(&rank->metrics, &record->metrics);
    record->baseline_error = rank->naive_nonfinite           ? NAN
                             : record->metrics.compared == 0 ? 0.0
                             : rank->naive_norm > 0.0
                                 ? sqrt(rank->naive_error) / sqrt(rank->naive_norm)
                                 : sqrt(rank->naive_error);
    item->logits_excluded += record->metrics.excluded;
    int64_t worst[3] = {0, 0, 0};
    const int64_t named = named_element(&record->metrics);
    if (named >= 0) {
        compare_coordinates(named, 3, record->shape, worst);
    }
    const int64_t L = rank->rows.length;
    record->worst[0] = worst[0];
    record->worst[1] = L > 0 ? row_position(&rank->rows, worst[1]) : 0;
    record->worst[2] = worst[2];
    record->position_error = malloc((size_t)(L > 0 ? L : 1) * sizeof *record->position_error);
    record->position_limit = malloc((size_t)(L > 0 ? L : 1) * sizeof *record->position_limit);
    /* each position's error (the profile) and the per-position rule: the position furthest over
     * (or nearest to) its own limit, the baseline's error taken on the same elements */
    const cpparity_tolerance *tolerance = &record->tolerance;
    double furthest = -1.0;
    for (int64_t t = 0; t < L; t++) {
        const double norm = rank->profile_norm[t];
        const double error =
            norm > 0.0 ? sqrt(rank->profile_error[t]) / sqrt(norm) : sqrt(rank->profile_error[t]);
        if (record->position_error != NULL) {
            record->position_error[t] = rank->profile_count[t] == 0 ? NAN : error;
        }
        if (record->position_limit != NULL) {
            record->position_limit[t] = NAN;
        }
        if (rank->profile_count[t] == 0 || rank->naive_nonfinite) {
            continue;
        }
        const double naive = norm > 0.0 ? sqrt(rank->naive_profile_error[t]) / sqrt(norm)
                                        : sqrt(rank->naive_profile_error[t]);
        const double limit = tolerance->ratio * naive + tolerance->floor;
        if (record->position_limit != NULL) {
            record->position_limit[t] = limit;
        }
        const double over = error / limit;
        if (over > furthest || isnan(over)) {
            furthest = isnan(over) ? INFINITY : over;
            record->position_checked = true;
            record->position_worst = row_position(&rank->rows, t);
            record->position_worst_error = error;
            record->position_worst_baseline = naive;
            record->position_worst_element[0] = rank->profile_worst_at[t] / record->shape[2];
            record->position_worst_element[1] = rank->profile_worst_at[t] % record->shape[2];
        }
    }
}

/* The logits records of every rank, their values read one block of positions at a time. The
 * walk covers every block even when a read fails (the source may move rows between ranks and
 * must stay in step); the first error is returned. */
static cpparity_status compare_logits(run_item *item, const judge_inputs *in, int64_t padded,
                                      cpparity_error *error) {
    const cpparity_case *c = item->source;
    const int64_t cp = item->cp, B = c->batch_size, V = c->model.vocab_size;
    logits_walk walk;
    cpparity_status status = walk_start(&walk, in, cp, padded, error);
    for (int64_t r = 0; status == CPPARITY_OK && r < cp; r++) {
        rank_logits *rank = &walk.ranks[r];
        const int64_t L = rank->rows.length;
        rank->record =
            add_record(item, "logits", CPPARITY_KIND_LOGITS, (int)r, 3, (int64_t[]){B, L, V});
        rank->record->position_offset = consecutive_offset(&rank->rows);
        if (rank->record->position_offset < 0 && L > 0) { /* the results file records them */
            rank->record->positions = malloc((size_t)L * sizeof *rank->record->positions);
            if (rank->record->positions == NULL) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
                break;
            }
            memcpy(rank->record->positions, rank->rows.positions,
                   (size_t)L * sizeof *rank->record->positions);
        }
        compare_begin(&rank->metrics, B * L * V);
        rank->named = -2;
        const bool small = B * L * V <= JUDGE_STORE_WHOLE_LOGITS;
        rank->whole = in->store == RUN_STORE_ALL || (in->store == RUN_STORE_FAILURES && small);
        rank->windowed = in->store == RUN_STORE_FAILURES && !small;
        if (rank->whole) {
            rank->record->values = malloc((size_t)(B * L * V + 1) * sizeof(float));
            rank->record->reference = malloc((size_t)(B * L * V + 1) * sizeof(double));
            if (rank->record->values == NULL || rank->record->reference == NULL) {
                status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "out of memory (the stored logits of rank %lld)",
                                            (long long)r);
            }
        }
    }
    const judge_logits *source = &in->logits;
    for (int64_t k = 0; k < walk.blocks.count; k++) {
        const row_block block = row_blocks_at(&walk.blocks, k);
        cpparity_error ignored;
        cpparity_error *why = status == CPPARITY_OK ? error : &ignored;
        cpparity_status step = source->begin_block != NULL
                                   ? source->begin_block(source->context, &block, why)
                                   : CPPARITY_OK;
        if (step != CPPARITY_OK || status != CPPARITY_OK) {
            status = status != CPPARITY_OK ? status : step;
            continue; /* the other blocks are still walked: the source stays in step */
        }
        status = read_block(&walk, &block, error);
        if (status == CPPARITY_OK && block.begin < walk.seq_len) {
            reference_outputs_logits_block(
                walk.reference,
                row_blocks_containing(&walk.reference_blocks, block.batch_row, block.begin),
                walk.expected);
        }
        if (status == CPPARITY_OK) {
            compare_block(&walk, &block);
        }
    }
    for (int64_t r = 0; status == CPPARITY_OK && r < cp; r++) {
        finish_rank(&walk.ranks[r], item);
    }
    walk_free(&walk);
    return status;
}

static cpparity_status compare_all(run_item *item, const judge_inputs *in, cpparity_error *error) {
    const reference_outputs *ref = in->reference;
    const int64_t cp = item->cp;
    const int64_t P = ref->parameter_table.total;
    int64_t held = 0;
    cpparity_status status = check_positions(in, cp, ref->seq_len, &held, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const token_layout_kind layout =
        in->positions == NULL ? TOKEN_LAYOUT_CONTIGUOUS
                              : token_layout_recognise(held, cp, in->positions, in->lengths, NULL);
    snprintf(item->token_layout, sizeof item->token_layout, "%s", token_layout_kind_name(layout));
    item->tensors_expected = cp * (2 + ref->parameter_table.count);
    item->tensors = calloc((size_t)item->tensors_expected, sizeof *item->tensors);
    if (!item->tensors) {
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
    status = compare_logits(item, in, held, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    item->gradients_identical = true;
    for (int64_t e = 0; e < ref->parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &ref->parameter_table.entries[e];
        char name[CPPARITY_RECORD_NAME];
        snprintf(name, sizeof name, "grads/%s", entry->name);
        const double *reference_gradient = ref->gradients + entry->offset;
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
    return CPPARITY_OK;
}

/* The per-position rule (docs/tolerances.md): a logits tensor that passes as a whole still fails
 * when one position's logits err more than the rule allows against the baseline's error on that
 * same position, so that an error in a few elements is not averaged away over a long sequence.
 * The failure names that position and its largest error's batch row and vocabulary id. */
static void decide_position(tensor_record *record) {
    if (!record->decision.passed || !record->position_checked) {
        return;
    }
    const cpparity_tolerance *t = &record->tolerance;
    const double limit = t->ratio * record->position_worst_baseline + t->floor;
    if (record->position_worst_error <= limit) {
        return;
    }
    record->decision.passed = false;
    record->worst[0] = record->position_worst_element[0];
    record->worst[1] = record->position_worst;
    record->worst[2] = record->position_worst_element[1];
    snprintf(record->decision.reason, sizeof record->decision.reason,
             "per position: %lld errs %.2e > limit %.2e = %g x naive %.2e + floor %.2e",
             (long long)record->position_worst, record->position_worst_error, limit, t->ratio,
             record->position_worst_baseline, t->floor);
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
        decide_position(record);
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
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        char *reason = record->decision.reason;
        const size_t length = strlen(reason);
        if (record->kind != CPPARITY_KIND_LOGITS || record->decision.passed ||
            record->metrics.first_nonfinite < 0 || strstr(reason, "non-finite value") == NULL ||
            length == 0 || reason[length - 1] != ')') {
            continue;
        }
        const rank_rows rows = rows_of(in, record->rank);
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
            record->window[2] = 0;
        }
    }
}

/* Stores the values of failing gradients (the logits kept theirs while they were compared). */
static void keep_failures(run_item *item, const judge_inputs *in) {
    const int64_t P = in->reference->parameter_table.total;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        tensor_record *record = &item->tensors[i];
        if (record->decision.passed || record->values != NULL ||
            record->kind != CPPARITY_KIND_GRADS) {
            continue;
        }
        const cpparity_tensor_entry *entry = cpparity_tensor_table_find(
            &in->reference->parameter_table, record->name + strlen("grads/"));
        if (entry != NULL) {
            keep_values(record, in->gradients + record->rank * P + entry->offset,
                        in->reference->gradients + entry->offset, entry->count);
        }
    }
}

static cpparity_status memory_read(void *context, int64_t rank, int64_t batch_row, int64_t row,
                                   int64_t count, float *rows, cpparity_error *error) {
    (void)error;
    const judge_memory_logits *m = context;
    const float *at = m->logits;
    for (int64_t r = 0; r < rank; r++) {
        at += m->batch * (m->lengths != NULL ? m->lengths[r] : m->local_len) * m->vocab;
    }
    const int64_t L = m->lengths != NULL ? m->lengths[rank] : m->local_len;
    memcpy(rows, at + (batch_row * L + row) * m->vocab, (size_t)(count * m->vocab) * sizeof *rows);
    return CPPARITY_OK;
}

judge_logits judge_logits_in_memory(const judge_memory_logits *memory) {
    const judge_logits source = {NULL, memory_read, (void *)memory};
    return source;
}

/* The items at cp > 1 of a case whose cp = 1 run was left out: each tensor says the naive rule
 * alone decided it, and a passing item says why (a failing one names its worst tensor). */
static void note_cp1_not_run(run_item *item, const char *why) {
    for (int64_t i = 0; i < item->tensor_count; i++) {
        compare_decision *decision = &item->tensors[i].decision;
        const size_t length = strlen(decision->reason);
        snprintf(decision->reason + length, sizeof decision->reason - length,
                 " (naive rule alone: cp 1 not run)");
    }
    if (item->outcome == RUN_PASS) {
        snprintf(item->message, sizeof item->message,
                 "%.700s: the CP-only check was not made; the naive rule decided every tensor",
                 why);
    }
}

cpparity_status judge_item(run_item *item, int64_t case_index, const judge_inputs *in,
                           const baseline_table *baselines, cpparity_error *error) {
    cpparity_status status = compare_all(item, in, error);
    if (in->cp1_not_run != NULL) {
        baselines = NULL; /* no cp = 1 errors to check against: said, never silent */
    }
    if (status == CPPARITY_OK) {
        decide_tensors(item, case_index, baselines);
        locate_nonfinite_logits(item, in);
        decide_outcome(item);
        if (in->cp1_not_run != NULL) {
            note_cp1_not_run(item, in->cp1_not_run);
        }
        if (in->store == RUN_STORE_FAILURES) {
            keep_failures(item, in); /* --store all kept everything, --store metrics keeps none */
        }
        trim_stored(item, in->store);
    }
    return status;
}
