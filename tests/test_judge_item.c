/*
 * test_judge_item.c — the judge's failure paths, fed synthetic outputs: a clean item passes;
 * a gradient that differs on one rank, a NaN in one element, one tensor just over its limit, a
 * missing tensor and a baseline over its ceiling each fail (or error) with their own message;
 * and every default tolerance is pinned, so weakening one fails a test. Then the token layouts
 * (judge_inputs.positions): the reference itself laid out zigzag, round-robin (ranks of unequal
 * length) or contiguous passes, automatic padding and fully masked rows uncompared; two rows of
 * one rank swapped, or a NaN there, fail naming that rank and the global position; positions
 * that do not partition the sequence are bad input.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model_parameters.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/token_layout.h"
#include "harness/judging/tolerance.h"
#include "tests/support/test_models.h"

#define CP 2
#define BATCH 1
#define SEQ 4    /* L = 2 per rank */
#define MAX_CP 4 /* the largest group a test judges */
#define GARBAGE                                                                                    \
    99.0f /* written where nothing is compared (automatic padding, fully masked rows)              \
           */

/* A case, float64 outputs, a naive baseline 1e-7 off, and per-rank outputs: the reference cast to
 * float32, within 6e-8 relative of it, so well inside ratio × 1e-7 + floor 1e-6 (float32
 * defaults). */
typedef struct judged {
    cpparity_case c;
    cpparity_row_layout row;
    int64_t length;
    int64_t cp, batch, seq;      /* group size, B, S */
    reference_outputs reference; /* logits = final_normed · headᵀ with head the identity (D = V) */
    double *expected;            /* [B, S, V] the reference logits: its final_normed */
    naive_outputs naive;
    float losses[MAX_CP];
    float *whole;               /* [B, S, V] the reference cast to float32: the cp = 1 logits */
    float *logits;              /* rank after rank, [B, L_r, V]: contiguous until lay_out */
    float *gradients;           /* [cp][P] */
    int64_t *positions[MAX_CP]; /* after lay_out: each rank's global positions; owned */
    int64_t lengths[MAX_CP];    /* after lay_out: L_r */
    run_item item;
} judged;

static double reference_value(int64_t i) {
    return 0.25 + 0.01 * (double)(i % 37); /* non-zero, varied */
}

/* The implementation's logit of batch row b at global position p: the reference cast to float32,
 * GARBAGE past S or on a fully masked row. */
static float implementation_logit(const judged *j, int64_t b, int64_t p, int64_t v) {
    const reference_outputs *r = &j->reference;
    if (p >= j->seq || r->fully_masked[b * j->seq + p]) {
        return GARBAGE;
    }
    return (float)j->expected[(b * j->seq + p) * r->vocab + v];
}

/* Lays out j->logits in the contiguous layout of ceil(S / cp) positions per rank. */
static void lay_out_contiguous(judged *j) {
    const int64_t V = j->reference.vocab, L = (j->seq + j->cp - 1) / j->cp;
    for (int64_t rank = 0; rank < j->cp; rank++) {
        for (int64_t b = 0; b < j->batch; b++) {
            for (int64_t t = 0; t < L; t++) {
                for (int64_t v = 0; v < V; v++) {
                    j->logits[((rank * j->batch + b) * L + t) * V + v] =
                        implementation_logit(j, b, rank * L + t, v);
                }
            }
        }
    }
}

static void prepare_sized(judged *j, int64_t cp, int64_t batch, int64_t seq) {
    memset(j, 0, sizeof *j);
    cr_assert(cp <= MAX_CP);
    j->cp = cp;
    j->batch = batch;
    j->seq = seq;
    cpparity_case *c = &j->c;
    snprintf(c->name, sizeof c->name, "judged");
    c->model = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    c->seq_len = seq;
    c->batch_size = batch;
    j->length = seq;
    j->row = (cpparity_row_layout){0, 1, &j->length, 0, false, NULL};
    c->rows = &j->row;
    for (int d = 0; d < CPPARITY_DTYPE_COUNT; d++) {
        for (int k = 0; k < CPPARITY_KIND_COUNT; k++) {
            c->tolerances[d][k] =
                cpparity_tolerance_default((cpparity_dtype)d, (cpparity_tensor_kind)k);
        }
    }
    reference_outputs *r = &j->reference;
    const int64_t V = c->model.vocab_size;
    cpparity_error error;
    cr_assert_eq(cpparity_model_parameter_table(&c->model, &r->parameter_table, &error),
                 CPPARITY_OK);
    const int64_t P = r->parameter_table.total, logits = batch * seq * V;
    const int64_t padded = (seq + cp - 1) / cp * cp;
    r->batch = batch;
    r->seq_len = seq;
    r->vocab = V;
    r->hidden = V;
    r->loss = 2.5;
    r->final_normed = malloc((size_t)logits * sizeof(double));
    r->head = calloc((size_t)(V * V), sizeof(double));
    r->gradients = malloc((size_t)P * sizeof(double));
    r->fully_masked = calloc((size_t)(batch * seq), 1);
    j->expected = r->final_normed;
    for (int64_t v = 0; v < V; v++) {
        r->head[v * V + v] = 1.0; /* logits = final_normed exactly: x·1 + 0·others */
    }
    j->naive.gradients = malloc((size_t)P * sizeof(float));
    j->naive.logits_error = calloc((size_t)(batch * seq), sizeof(double));
    j->naive.logits_norm = calloc((size_t)(batch * seq), sizeof(double));
    j->naive.logits_nonfinite = calloc((size_t)(batch * seq), 1);
    j->whole = malloc((size_t)logits * sizeof(float));
    /* room for any layout of the padded sequence (a multiple of 2·cp at most 2·cp − 1 over S) */
    j->logits = malloc((size_t)(batch * (padded + 2 * cp) * V) * sizeof(float));
    j->gradients = malloc((size_t)(cp * P) * sizeof(float));
    for (int64_t i = 0; i < logits; i++) {
        j->expected[i] = reference_value(i);
        const double naive = (double)(float)(j->expected[i] * (1.0 + 1e-7));
        j->naive.logits_error[i / V] += (naive - j->expected[i]) * (naive - j->expected[i]);
        j->naive.logits_norm[i / V] += j->expected[i] * j->expected[i];
        j->whole[i] = (float)j->expected[i];
    }
    for (int64_t i = 0; i < P; i++) {
        r->gradients[i] = reference_value(i + 5);
        j->naive.gradients[i] = (float)(r->gradients[i] * (1.0 + 1e-7));
    }
    j->naive.loss = (float)(r->loss * (1.0 + 1e-7));
    for (int64_t rank = 0; rank < cp; rank++) {
        j->losses[rank] = (float)r->loss;
        for (int64_t i = 0; i < P; i++) {
            j->gradients[rank * P + i] = (float)r->gradients[i];
        }
    }
    lay_out_contiguous(j);
    memset(&j->item, 0, sizeof j->item);
    j->item.source = c;
    j->item.cp = cp;
    j->item.dtype = CPPARITY_DTYPE_F32;
    j->item.worst_tensor = -1;
}

static void prepare(judged *j) {
    prepare_sized(j, CP, BATCH, SEQ);
}

/* Marks batch row b's query at position p fully masked (j->whole keeps its reference value, the
 * layouts write GARBAGE there); call before lay_out. */
static void mask_fully(judged *j, int64_t b, int64_t p) {
    j->reference.fully_masked[b * j->seq + p] = 1;
    lay_out_contiguous(j);
}

/* Gives every rank its positions under layout (padded_len: Sp) and lays out j->logits rank after
 * rank, [B, L_r, V], in that order. */
static void lay_out(judged *j, const token_layout *layout) {
    const int64_t V = j->reference.vocab;
    float *out = j->logits;
    for (int64_t rank = 0; rank < j->cp; rank++) {
        cpparity_error error;
        cr_assert_eq(token_layout_count(layout, rank, &j->lengths[rank], &error), CPPARITY_OK, "%s",
                     error.message);
        const int64_t L = j->lengths[rank];
        j->positions[rank] = malloc((size_t)(L > 0 ? L : 1) * sizeof(int64_t));
        cr_assert_eq(token_layout_fill(layout, rank, j->positions[rank], &error), CPPARITY_OK);
        for (int64_t b = 0; b < j->batch; b++) {
            for (int64_t t = 0; t < L; t++) {
                for (int64_t v = 0; v < V; v++) {
                    *out++ = implementation_logit(j, b, j->positions[rank][t], v);
                }
            }
        }
    }
}

/* rank's logits, [B, L_r, V], inside j->logits after lay_out. */
static float *rank_logits(judged *j, int64_t rank) {
    float *logits = j->logits;
    for (int64_t q = 0; q < rank; q++) {
        logits += j->batch * j->lengths[q] * j->reference.vocab;
    }
    return logits;
}

/* Judges j's item, with the positions of lay_out when there are some, after a cp = 1 item (the
 * reference cast to float32, contiguous) whose errors fill the cp = 1 table: the CP-only check
 * then holds whenever the naive rule does. Returns judge_item's status. */
static cpparity_status judge_status(judged *j, cpparity_error *error) {
    baseline_table baselines = {0};
    run_item cp1 = j->item;
    cp1.cp = 1;
    cp1.is_baseline = true;
    const judge_memory_logits whole = {j->whole, 1, j->batch, j->reference.vocab, NULL, j->seq};
    judge_inputs in = {.reference = &j->reference,
                       .naive = &j->naive,
                       .losses = j->losses,
                       .logits = judge_logits_in_memory(&whole),
                       .gradients = j->gradients,
                       .local_len = j->seq,
                       .store = RUN_STORE_METRICS};
    cr_assert_eq(judge_item(&cp1, 0, &in, &baselines, error), CPPARITY_OK, "%s", error->message);
    cr_assert_eq(baseline_table_add(&baselines, 0, &cp1, error), CPPARITY_OK);
    in.local_len = (j->seq + j->cp - 1) / j->cp;
    judge_memory_logits laid = {j->logits, j->cp, j->batch, j->reference.vocab, NULL, in.local_len};
    if (j->positions[0] != NULL) {
        in.positions = (const int64_t *const *)j->positions;
        in.lengths = j->lengths;
        laid.lengths = j->lengths;
    }
    in.logits = judge_logits_in_memory(&laid);
    const cpparity_status status = judge_item(&j->item, 0, &in, &baselines, error);
    run_item_free_tensors(&cp1);
    baseline_table_free(&baselines);
    return status;
}

static void judge(judged *j) {
    cpparity_error error;
    cr_assert_eq(judge_status(j, &error), CPPARITY_OK, "%s", error.message);
}

static void release(judged *j) {
    run_item_free_tensors(&j->item);
    free(j->reference.final_normed);
    free(j->reference.head);
    free(j->reference.gradients);
    free(j->reference.fully_masked);
    cpparity_tensor_table_free(&j->reference.parameter_table);
    naive_outputs_free(&j->naive);
    free(j->whole);
    free(j->logits);
    free(j->gradients);
    for (int64_t rank = 0; rank < MAX_CP; rank++) {
        free(j->positions[rank]);
    }
}

static void expect(judged *j, run_outcome outcome, const char *text) {
    judge(j);
    cr_assert_eq(j->item.outcome, outcome, "outcome %s: %s", run_outcome_name(j->item.outcome),
                 j->item.message);
    cr_assert(strstr(j->item.message, text) != NULL, "message '%s' lacks '%s'", j->item.message,
              text);
    for (int64_t i = 0; i < j->item.tensor_count; i++) { /* judged with --store metrics */
        cr_assert_null(j->item.tensors[i].values, "--store metrics kept %s",
                       j->item.tensors[i].name);
    }
    release(j);
}

Test(judge_item, clean_outputs__pass_with_every_tensor_counted) {
    judged j;
    prepare(&j);
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    cr_assert_eq(j.item.tensor_count, j.item.tensors_expected);
    cr_assert(j.item.gradients_identical);
    release(&j);
}

Test(judge_item, gradient_differs_on_one_rank__fails_saying_so) {
    judged j;
    prepare(&j);
    const int64_t P = j.reference.parameter_table.total;
    /* one ulp on rank 1: within every tolerance, but not bit-identical */
    j.gradients[P + 3] = nextafterf(j.gradients[P + 3], INFINITY);
    expect(&j, RUN_FAIL, "gradients differ between ranks after the all-reduce");
}

Test(judge_item, nan_in_one_logit__fails_naming_non_finite_values) {
    judged j;
    prepare(&j);
    j.logits[7] = NAN;
    expect(&j, RUN_FAIL, "logits rank 0");
}

Test(judge_item, one_tensor_just_over_its_limit__fails_naming_it_and_the_rule) {
    judged j;
    prepare(&j);
    /* the loss on rank 1 off by 1e-5 relative: over 2 × 1e-7 + 1e-6 */
    j.losses[1] = (float)(j.reference.loss * (1.0 + 1e-5));
    expect(&j, RUN_FAIL, "1 tensor failed; worst: loss rank 1: error");
}

Test(judge_item, baseline_over_its_ceiling__error_saying_the_baseline_is_out_of_bounds) {
    judged j;
    prepare(&j);
    j.naive.loss = (float)(j.reference.loss * (1.0 + 1e-3)); /* over the f32 ceiling 1e-4 */
    expect(&j, RUN_ERROR, "the naive baseline errs 1.00e-03 on loss, over its ceiling 1.00e-04");
}

Test(judge_item, defaults__pinned) {
    /* docs/tolerances.md's table: weakening any default must fail here */
    const struct {
        cpparity_dtype dtype;
        cpparity_tensor_kind kind;
        double ratio, floor, ceiling;
    } expected[] = {
        {CPPARITY_DTYPE_F32, CPPARITY_KIND_LOSS, 2, 1e-6, 1e-4},
        {CPPARITY_DTYPE_F32, CPPARITY_KIND_LOGITS, 2, 1e-6, 1e-4},
        {CPPARITY_DTYPE_F32, CPPARITY_KIND_GRADS, 3, 1e-6, 1e-4},
        {CPPARITY_DTYPE_BF16, CPPARITY_KIND_LOSS, 2, 1e-2, 5e-2},
        {CPPARITY_DTYPE_BF16, CPPARITY_KIND_LOGITS, 2, 1e-2, 5e-2},
        {CPPARITY_DTYPE_BF16, CPPARITY_KIND_GRADS, 3, 1e-2, 1e-1},
    };
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        const cpparity_tolerance t =
            cpparity_tolerance_default(expected[i].dtype, expected[i].kind);
        cr_assert(t.ratio == expected[i].ratio && t.floor == expected[i].floor &&
                      t.ceiling == expected[i].ceiling,
                  "%s %s: ratio %g floor %g ceiling %g", cpparity_dtype_name(expected[i].dtype),
                  cpparity_tensor_kind_name(expected[i].kind), t.ratio, t.floor, t.ceiling);
        cr_assert(t.ratio_origin == CPPARITY_ORIGIN_DEFAULT &&
                  t.floor_origin == CPPARITY_ORIGIN_DEFAULT &&
                  t.ceiling_origin == CPPARITY_ORIGIN_DEFAULT);
    }
}

/* The logits record of rank in j's item. */
static const tensor_record *logits_record(const judged *j, int rank) {
    for (int64_t i = 0; i < j->item.tensor_count; i++) {
        const tensor_record *record = &j->item.tensors[i];
        if (record->kind == CPPARITY_KIND_LOGITS && record->rank == rank) {
            return record;
        }
    }
    cr_assert_fail("no logits record for rank %d", rank);
    return NULL;
}

/* Swaps rows t1 and t2 of rank's logits in every batch row (logits in the wrong order). */
static void swap_rows(judged *j, int rank, int64_t t1, int64_t t2) {
    const int64_t V = j->reference.vocab, L = j->lengths[rank];
    float *logits = rank_logits(j, rank);
    for (int64_t b = 0; b < j->batch; b++) {
        for (int64_t v = 0; v < V; v++) {
            const float kept = logits[(b * L + t1) * V + v];
            logits[(b * L + t1) * V + v] = logits[(b * L + t2) * V + v];
            logits[(b * L + t2) * V + v] = kept;
        }
    }
}

/* A failing item whose worst tensor is rank's logits, at one of the two given global positions,
 * which the message names. */
static void expect_failure_at(judged *j, int rank, int64_t p1, int64_t p2) {
    judge(j);
    cr_assert_eq(j->item.outcome, RUN_FAIL, "%s", j->item.message);
    const tensor_record *record = logits_record(j, rank);
    cr_assert(!record->decision.passed);
    cr_assert(record->worst[1] == p1 || record->worst[1] == p2,
              "worst at position %lld, expected %lld or %lld", (long long)record->worst[1],
              (long long)p1, (long long)p2);
    char where[96];
    snprintf(where, sizeof where, "logits rank %d batch row %lld position %lld vocab", rank,
             (long long)record->worst[0], (long long)record->worst[1]);
    cr_assert(strstr(j->item.message, where) != NULL, "message '%s' lacks '%s'", j->item.message,
              where);
    for (int r = 0; r < j->cp; r++) { /* only that rank's logits fail */
        cr_assert(r == rank || logits_record(j, r)->decision.passed, "logits rank %d failed", r);
    }
}

Test(judge_item, zigzag_reference_itself__passes_padding_and_masked_rows_uncompared) {
    judged j;
    prepare_sized(&j, 2, 2, 7); /* padded to 8 = 2·cp chunks of 2: rank 0 {0,1,6,7} */
    mask_fully(&j, 1, 2);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 8, 2, 0});
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    const int64_t V = j.reference.vocab;
    /* position 7 in both batch rows (automatic padding) and batch row 1's position 2: GARBAGE */
    cr_assert_eq(j.item.logits_excluded, 2 * V + V);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(logits_record(&j, r)->shape[1], 4);
    }
    /* rank 0's rows are not consecutive; rank 1's chunks 1 and 2 are: {2, 3, 4, 5} */
    cr_assert_eq(logits_record(&j, 0)->position_offset, -1);
    cr_assert_eq(logits_record(&j, 1)->position_offset, 2);
    /* the results file records rank 0's positions, and the item names the layout */
    const int64_t *positions = logits_record(&j, 0)->positions;
    cr_assert_not_null(positions);
    cr_assert(positions[0] == 0 && positions[1] == 1 && positions[2] == 6 && positions[3] == 7);
    cr_assert_null(logits_record(&j, 1)->positions, "consecutive rows: the offset says it all");
    cr_assert_str_eq(j.item.token_layout, "zigzag");
    /* the profile is in the rank's row order: rank 0's row 3 is position 7, compared nowhere */
    const double *profile = logits_record(&j, 0)->position_error;
    cr_assert(isnan(profile[3]));
    for (int t = 0; t < 3; t++) {
        /* the reference cast to float32: under 2^-24 relative, at most 6e-8 */
        cr_assert(profile[t] < 1e-7, "row %d: %g", t, profile[t]);
    }
    release(&j);
}

Test(judge_item, round_robin_reference_itself__passes_at_cp_4_and_with_unequal_ranks) {
    judged j;
    prepare_sized(&j, 4, 2, 7); /* chunks of 1 padded to 8: rank r holds {r, r + 4} */
    mask_fully(&j, 0, 5);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ROUND_ROBIN, 8, 4, 1});
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    cr_assert_str_eq(j.item.token_layout, "round-robin");
    release(&j);

    prepare_sized(&j, 3, 2, 7); /* chunks of 2 padded to 8: {0,1,6,7}, {2,3}, {4,5} */
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ROUND_ROBIN, 8, 3, 2});
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    const int64_t lengths[] = {4, 2, 2}, offsets[] = {-1, 2, 4};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(logits_record(&j, r)->shape[1], lengths[r]);
        /* consecutive rows keep position_offset: their profile is indexed by position − it */
        cr_assert_eq(logits_record(&j, r)->position_offset, offsets[r], "rank %d", r);
    }
    release(&j);
}

Test(judge_item, explicit_contiguous_positions__judged_as_without_positions) {
    judged plain, explicit;
    prepare_sized(&plain, 2, 2, 7);
    prepare_sized(&explicit, 2, 2, 7);
    mask_fully(&plain, 0, 1);
    mask_fully(&explicit, 0, 1);
    plain.logits[5] += 1e-3f; /* rank 0, batch row 0, position 0: a visible error */
    lay_out(&explicit, &(token_layout){TOKEN_LAYOUT_CONTIGUOUS, 8, 2, 0});
    explicit.logits[5] += 1e-3f;
    judge(&plain);
    judge(&explicit);
    cr_assert_eq(plain.item.outcome, explicit.item.outcome);
    cr_assert_str_eq(plain.item.message, explicit.item.message);
    cr_assert_eq(plain.item.logits_excluded, explicit.item.logits_excluded);
    for (int r = 0; r < 2; r++) {
        const tensor_record *a = logits_record(&plain, r), *b = logits_record(&explicit, r);
        cr_assert(a->metrics.relative_l2 == b->metrics.relative_l2, "rank %d", r);
        cr_assert(a->baseline_error == b->baseline_error);
        cr_assert_eq(a->position_offset, 4 * r);
        cr_assert_eq(b->position_offset, 4 * r);
        cr_assert(a->positions == NULL && b->positions == NULL, "consecutive: no positions kept");
        cr_assert_arr_eq(a->worst, b->worst, sizeof a->worst);
    }
    cr_assert_str_eq(plain.item.token_layout, "contiguous");
    cr_assert_str_eq(explicit.item.token_layout, "contiguous");
    release(&plain);
    release(&explicit);
}

Test(judge_item, zigzag_two_rows_of_one_rank_swapped__fails_naming_rank_and_global_position) {
    judged j;
    prepare_sized(&j, 2, 2, 8);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 8, 2, 0}); /* rank 1: {2, 3, 4, 5} */
    swap_rows(&j, 1, 1, 2);                                     /* positions 3 and 4 */
    expect_failure_at(&j, 1, 3, 4);
    const double *profile = logits_record(&j, 1)->position_error;
    /* rows 1 and 2 hold other rows' logits, off by tenths (reference_value steps 0.01 over
     * 0.25 … 0.61); rows 0 and 3 only by float32 rounding, under 2^-24 relative */
    cr_assert(profile[1] > 1e-3 && profile[2] > 1e-3, "%g %g", profile[1], profile[2]);
    cr_assert(profile[0] < 1e-7 && profile[3] < 1e-7, "%g %g", profile[0], profile[3]);
    release(&j);
}

Test(judge_item, round_robin_two_rows_of_one_rank_swapped__fails_naming_rank_and_global_position) {
    judged j;
    prepare_sized(&j, 4, 1, 8);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ROUND_ROBIN, 8, 4, 1}); /* rank 2: {2, 6} */
    swap_rows(&j, 2, 0, 1);
    expect_failure_at(&j, 2, 2, 6);
    release(&j);
}

Test(judge_item, nan_in_a_zigzag_rank__names_its_global_position) {
    judged j;
    prepare_sized(&j, 2, 2, 8);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 8, 2, 0}); /* rank 0: {0, 1, 6, 7} */
    const int64_t V = j.reference.vocab;
    rank_logits(&j, 0)[(1 * 4 + 2) * V + 3] = NAN; /* batch row 1, row 2 = position 6, vocab 3 */
    expect(&j, RUN_FAIL, "logits rank 0");
    prepare_sized(&j, 2, 2, 8);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 8, 2, 0});
    rank_logits(&j, 0)[(1 * 4 + 2) * V + 3] = NAN;
    char text[96];
    snprintf(text, sizeof text,
             "1 non-finite value (first at index %lld: batch row 1 position 6 "
             "vocab 3)",
             (long long)((1 * 4 + 2) * V + 3));
    expect(&j, RUN_FAIL, text);
}

Test(judge_item, positions_not_a_partition__bad_input_naming_the_problem) {
    judged j;
    prepare_sized(&j, 2, 1, 4);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 4, 2, 0}); /* {0, 3}, {1, 2} */
    j.positions[1][1] = 3;
    cpparity_error error;
    cr_assert_eq(judge_status(&j, &error), CPPARITY_ERROR_INPUT);
    cr_assert_str_eq(error.message,
                     "position 3 is held twice: by rank 0 row 1 and by rank 1 row 1");
    release(&j);

    prepare_sized(&j, 2, 1, 4);
    lay_out(&j, &(token_layout){TOKEN_LAYOUT_ZIGZAG, 4, 2, 0});
    j.lengths[1] = 1; /* rank 1 drops position 2 */
    cr_assert_eq(judge_status(&j, &error), CPPARITY_ERROR_INPUT);
    cr_assert_str_eq(error.message, "the ranks hold 3 positions, fewer than the sequence's 4");
    release(&j);
}

Test(judge_item,
     nan_and_a_larger_finite_error_in_one_gradient__names_the_nan_and_shows_its_tensor) {
    judged j;
    prepare(&j);
    const cpparity_tensor_entry *entry = &j.reference.parameter_table.entries[0];
    const int64_t P = j.reference.parameter_table.total;
    cr_assert(entry->count > 9 && entry->rank == 2);
    for (int r = 0; r < j.cp; r++) { /* the same on every rank: only this tensor fails */
        j.gradients[r * P + entry->offset + 2] *= 3.0f; /* the largest finite error */
        j.gradients[r * P + entry->offset + 9] = NAN;   /* and a non-finite value after it */
    }
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_FAIL, "%s", j.item.message);
    /* the failure is named where the first non-finite value is, not the largest finite error */
    char where[160];
    snprintf(where, sizeof where, "grads/%s rank 0 row %lld column %lld", entry->name,
             (long long)(9 / entry->shape[1]), (long long)(9 % entry->shape[1]));
    cr_assert(strstr(j.item.message, where) != NULL, "'%s' lacks '%s'", j.item.message, where);
    /* and the item's line (its worst tensor) shows a failing tensor */
    cr_assert_geq(j.item.worst_tensor, 0);
    cr_assert(!j.item.tensors[j.item.worst_tensor].decision.passed, "worst tensor %s passed",
              j.item.tensors[j.item.worst_tensor].name);
    release(&j);
}

/* The contiguous layout with several batch rows and S not divisible by cp: cp 4, B 3, S 10 pads
 * to 12, so rank 3 holds positions 9, 10, 11 of each row and compares position 9 only (10 and 11
 * are automatic padding), less batch row 2's position 9, fully masked. Values in the padding are
 * never compared; an error at a compared position of the last rank fails naming it. */
Test(judge_item, contiguous_auto_padding_several_rows__last_rank_counts_only_real_positions) {
    judged j;
    prepare_sized(&j, 4, 3, 10);
    mask_fully(&j, 2, 9);
    const int64_t V = j.reference.vocab, L = 3;
    float *last = j.logits + 3 * 3 * L * V; /* rank 3: [B = 3, L = 3, V] */
    last[(1 * L + 1) * V + 4] = 1e6f;       /* batch row 1, position 10 */
    judge(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    const int64_t compared[4] = {3 * 3 * V, 3 * 3 * V, 3 * 3 * V, 2 * V};
    for (int r = 0; r < 4; r++) {
        const tensor_record *record = logits_record(&j, r);
        cr_assert_eq(record->metrics.compared, compared[r], "rank %d compared %lld", r,
                     (long long)record->metrics.compared);
        cr_assert_eq(record->metrics.compared + record->metrics.excluded, 3 * L * V);
    }
    /* 2 padded positions in each of 3 rows, and the fully masked one */
    cr_assert_eq(j.item.logits_excluded, 2 * 3 * V + V);
    release(&j);

    prepare_sized(&j, 4, 3, 10);
    last = j.logits + 3 * 3 * L * V;
    last[(0 * L + 0) * V + 2] += 1e-2f; /* batch row 0, position 9, vocab 2 */
    expect(&j, RUN_FAIL, "logits rank 3 batch row 0 position 9 vocab 2");
}

/* A record too large to keep whole under --store failures (B·L·V past JUDGE_STORE_WHOLE_LOGITS)
 * keeps the window of its rank's rows around the failing element: the block of positions it is
 * in, values and reference, with the window saying which rows; a passing record keeps nothing. */
/* A cp = 1 item of one row of S positions and vocabulary V, too large to keep whole: logits =
 * normed · headᵀ with D = 1 (every logit one product, exact in the test too), the implementation's
 * logits the reference cast to float32, a naive error of 1e-7 on every position; release() frees
 * it (its whole and positions stay NULL). */
static void prepare_long(judged *j, int64_t S, int64_t V) {
    memset(j, 0, sizeof *j);
    j->cp = 1;
    j->batch = 1;
    j->seq = S;
    cpparity_case *c = &j->c;
    snprintf(c->name, sizeof c->name, "long");
    c->model = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    c->model.vocab_size = V;
    c->seq_len = S;
    c->batch_size = 1;
    j->length = S;
    j->row = (cpparity_row_layout){0, 1, &j->length, 0, false, NULL};
    c->rows = &j->row;
    for (int d = 0; d < CPPARITY_DTYPE_COUNT; d++) {
        for (int k = 0; k < CPPARITY_KIND_COUNT; k++) {
            c->tolerances[d][k] =
                cpparity_tolerance_default((cpparity_dtype)d, (cpparity_tensor_kind)k);
        }
    }
    /* logits = normed · headᵀ with D = 1: every logit one product, exact in the test too */
    reference_outputs *r = &j->reference;
    cpparity_error error;
    cr_assert_eq(cpparity_model_parameter_table(&c->model, &r->parameter_table, &error),
                 CPPARITY_OK);
    const int64_t P = r->parameter_table.total;
    r->batch = 1;
    r->seq_len = S;
    r->vocab = V;
    r->hidden = 1;
    r->loss = 2.5;
    r->final_normed = malloc(S * sizeof(double));
    r->head = malloc(V * sizeof(double));
    r->gradients = malloc((size_t)P * sizeof(double));
    r->fully_masked = calloc(S, 1);
    for (int64_t t = 0; t < S; t++) {
        r->final_normed[t] = 1.0 + 0.01 * (double)(t % 13);
    }
    for (int64_t v = 0; v < V; v++) {
        r->head[v] = 0.5 + 0.001 * (double)(v % 97);
    }
    j->naive.gradients = malloc((size_t)P * sizeof(float));
    j->naive.logits_error = calloc(S, sizeof(double));
    j->naive.logits_norm = calloc(S, sizeof(double));
    j->naive.logits_nonfinite = calloc(S, 1);
    j->logits = malloc((size_t)S * V * sizeof(float));
    j->whole = NULL;
    j->gradients = malloc((size_t)P * sizeof(float));
    for (int64_t t = 0; t < S; t++) {
        for (int64_t v = 0; v < V; v++) {
            const double logit = r->final_normed[t] * r->head[v];
            j->logits[t * V + v] = (float)logit;
            j->naive.logits_norm[t] += logit * logit;
        }
        j->naive.logits_error[t] = 1e-14 * j->naive.logits_norm[t]; /* a naive error of 1e-7 */
    }
    for (int64_t i = 0; i < P; i++) {
        r->gradients[i] = reference_value(i + 5);
        j->naive.gradients[i] = (float)(r->gradients[i] * (1.0 + 1e-7));
        j->gradients[i] = (float)r->gradients[i];
    }
    j->naive.loss = (float)(r->loss * (1.0 + 1e-7));
    j->losses[0] = (float)r->loss;
}

/* Judges prepare_long's item (its logits as they are now) under --store failures. */
static void judge_long(judged *j) {
    cpparity_case *c = &j->c;
    reference_outputs *r = &j->reference;
    const int64_t S = c->seq_len, V = c->model.vocab_size;
    cpparity_error error;
    j->item.source = c;
    j->item.cp = 1;
    j->item.dtype = CPPARITY_DTYPE_F32;
    j->item.is_baseline = true;
    j->item.worst_tensor = -1;
    const judge_memory_logits memory = {j->logits, 1, 1, V, NULL, S};
    const judge_inputs in = {.reference = r,
                             .naive = &j->naive,
                             .losses = j->losses,
                             .logits = judge_logits_in_memory(&memory),
                             .gradients = j->gradients,
                             .local_len = S,
                             .store = RUN_STORE_FAILURES};
    cr_assert_eq(judge_item(&j->item, 0, &in, NULL, &error), CPPARITY_OK, "%s", error.message);
}

Test(judge_item, long_logits_failing_under_store_failures__keep_the_window_around_the_error) {
    enum { S = 2048, V = 2100, PLANTED_ROW = 1500, PLANTED_VOCAB = 7 };
    cr_assert_gt((int64_t)S * V, JUDGE_STORE_WHOLE_LOGITS, "the record must be too large");
    judged j;
    prepare_long(&j, S, V);
    j.logits[PLANTED_ROW * V + PLANTED_VOCAB] += 0.5f;
    judge_long(&j);
    cr_assert_eq(j.item.outcome, RUN_FAIL, "%s", j.item.message);
    const tensor_record *record = logits_record(&j, 0);
    cr_assert(!record->decision.passed);
    cr_assert(record->worst[1] == PLANTED_ROW && record->worst[2] == PLANTED_VOCAB,
              "worst at position %lld vocab %lld", (long long)record->worst[1],
              (long long)record->worst[2]);
    /* the window: the block of positions [1280, 1536) holding position 1500 */
    cr_assert_eq(record->window[0], 0);
    cr_assert_eq(record->window[1], 1280);
    cr_assert_eq(record->window[2], 256);
    cr_assert_not_null(record->values);
    const int64_t at = (PLANTED_ROW - 1280) * V + PLANTED_VOCAB;
    cr_assert(record->values[at] == j.logits[PLANTED_ROW * V + PLANTED_VOCAB]);
    cr_assert(record->reference[at] ==
              j.reference.final_normed[PLANTED_ROW] * j.reference.head[PLANTED_VOCAB]);
    int64_t shape[4], count = 0;
    cr_assert_eq(tensor_record_stored_shape(record, shape, &count), 3);
    cr_assert(shape[0] == 1 && shape[1] == 256 && shape[2] == V && count == 256 * V);
    for (int64_t i = 0; i < j.item.tensor_count; i++) { /* passing tensors keep nothing */
        const tensor_record *kept = &j.item.tensors[i];
        cr_assert(!kept->decision.passed || kept->values == NULL, "%s kept its values", kept->name);
    }
    release(&j);
}

/* One element of the last position off by 5e-4 (logits about 0.6): the whole tensor's error,
 * 5e-4 / ‖r‖ ≈ 4e-7, is under its limit 1.2e-6 (2 × naive 1e-7 + floor 1e-6), and would pass
 * alone; that position's own error, 5e-4 / ‖r_p‖ ≈ 1.8e-5, is fifteen times its limit. The
 * per-position rule fails it, naming the position, the batch row and the vocabulary id. */
Test(judge_item, one_element_of_a_long_sequence__fails_by_the_per_position_rule) {
    enum { S = 2048, V = 2100, PLANTED_VOCAB = 2099 };
    judged j;
    prepare_long(&j, S, V);
    j.logits[(S - 1) * V + PLANTED_VOCAB] += 5e-4f;
    judge_long(&j);
    const tensor_record *record = logits_record(&j, 0);
    cr_assert_lt(record->metrics.relative_l2, record->decision.limit,
                 "the whole tensor must pass on its own: %.3g vs %.3g", record->metrics.relative_l2,
                 record->decision.limit);
    cr_assert_eq(j.item.outcome, RUN_FAIL, "%s", j.item.message);
    cr_assert(!record->decision.passed);
    cr_assert(strstr(j.item.message, "per position: 2047 errs") != NULL, "%s", j.item.message);
    /* each position's own limit is kept (the results file's limits@rank<r>): the planted one's
     * is the limit the failure names, and only that position is over its own */
    cr_assert_not_null(record->position_limit);
    const cpparity_tolerance *t = &record->tolerance;
    cr_assert_eq(record->position_limit[S - 1],
                 t->ratio * record->position_worst_baseline + t->floor);
    for (int64_t p = 0; p < S; p++) {
        cr_assert_eq(record->position_error[p] > record->position_limit[p], p == S - 1,
                     "position %lld: error %.3g, its limit %.3g", (long long)p,
                     record->position_error[p], record->position_limit[p]);
    }
    cr_assert(record->worst[0] == 0 && record->worst[1] == S - 1 &&
                  record->worst[2] == PLANTED_VOCAB,
              "worst at batch row %lld, position %lld, vocab %lld", (long long)record->worst[0],
              (long long)record->worst[1], (long long)record->worst[2]);
    release(&j);
}

/* The same sequence unchanged: every position within its own limit, nothing fails. */
Test(judge_item, long_sequence_of_the_reference__passes_the_per_position_rule) {
    judged j;
    prepare_long(&j, 2048, 2100);
    judge_long(&j);
    cr_assert_eq(j.item.outcome, RUN_PASS, "%s", j.item.message);
    const tensor_record *record = logits_record(&j, 0);
    cr_assert(record->position_checked);
    cr_assert_not_null(record->position_limit);
    for (int64_t p = 0; p < 2048; p++) { /* every position compared, each within its own limit */
        cr_assert(record->position_limit[p] >= record->tolerance.floor &&
                      record->position_error[p] <= record->position_limit[p],
                  "position %lld: error %.3g, its limit %.3g", (long long)p,
                  record->position_error[p], record->position_limit[p]);
    }
    release(&j);
}
