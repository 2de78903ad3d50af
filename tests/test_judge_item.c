/*
 * test_judge_item.c — the judge's failure paths, fed synthetic outputs: a clean item passes;
 * a gradient that differs on one rank, a NaN in one element, one tensor just over its limit, a
 * missing tensor and a baseline over its ceiling each fail (or error) with their own message;
 * and every default tolerance is pinned, so weakening one fails a test.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model_parameters.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/tolerance.h"
#include "tests/support/test_models.h"

#define CP 2
#define BATCH 1
#define SEQ 4 /* L = 2 per rank */

/* A case, float64 outputs, a naive baseline 1e-7 off, and per-rank outputs 1e-7 off too: well
 * inside ratio × 1e-7 + floor 1e-6 (float32 defaults). */
typedef struct judged {
    cpparity_case c;
    cpparity_row_layout row;
    int64_t length;
    reference_outputs reference;
    naive_outputs naive;
    float losses[CP];
    float *logits;    /* [CP][B, L, V] */
    float *gradients; /* [CP][P] */
    run_item item;
} judged;

static double reference_value(int64_t i) {
    return 0.25 + 0.01 * (double)(i % 37); /* non-zero, varied */
}

static void prepare(judged *j) {
    memset(j, 0, sizeof *j);
    cpparity_case *c = &j->c;
    snprintf(c->name, sizeof c->name, "judged");
    c->model = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    c->seq_len = SEQ;
    c->batch_size = BATCH;
    j->length = SEQ;
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
    const int64_t P = r->parameter_table.total, logits = BATCH * SEQ * V;
    r->batch = BATCH;
    r->seq_len = SEQ;
    r->vocab = V;
    r->loss = 2.5;
    r->logits = malloc((size_t)logits * sizeof(double));
    r->gradients = malloc((size_t)P * sizeof(double));
    r->fully_masked = calloc((size_t)(BATCH * SEQ), 1);
    j->naive.logits = malloc((size_t)logits * sizeof(float));
    j->naive.gradients = malloc((size_t)P * sizeof(float));
    j->logits = malloc((size_t)logits * sizeof(float)); /* CP slices of L = S / CP each */
    j->gradients = malloc((size_t)(CP * P) * sizeof(float));
    for (int64_t i = 0; i < logits; i++) {
        r->logits[i] = reference_value(i);
        j->naive.logits[i] = (float)(r->logits[i] * (1.0 + 1e-7));
    }
    for (int64_t i = 0; i < P; i++) {
        r->gradients[i] = reference_value(i + 5);
        j->naive.gradients[i] = (float)(r->gradients[i] * (1.0 + 1e-7));
    }
    j->naive.loss = (float)(r->loss * (1.0 + 1e-7));
    const int64_t L = SEQ / CP;
    for (int rank = 0; rank < CP; rank++) {
        j->losses[rank] = (float)r->loss;
        for (int64_t t = 0; t < L; t++) {
            for (int64_t v = 0; v < V; v++) {
                j->logits[(rank * L + t) * V + v] = (float)r->logits[(rank * L + t) * V + v];
            }
        }
        for (int64_t i = 0; i < P; i++) {
            j->gradients[rank * P + i] = (float)r->gradients[i];
        }
    }
    memset(&j->item, 0, sizeof j->item);
    j->item.source = c;
    j->item.cp = CP;
    j->item.dtype = CPPARITY_DTYPE_F32;
    j->item.worst_tensor = -1;
}

/* Judges j's item with a cp = 1 table holding each tensor's own naive error (so the CP-only
 * check holds whenever the naive rule does). */
static void judge(judged *j) {
    baseline_table baselines = {0};
    run_item cp1 = j->item;
    cp1.cp = 1;
    cp1.is_baseline = true;
    cpparity_error error;
    /* B = 1: the cp = 1 slice is the whole sequence, the concatenation of the CP slices */
    judge_inputs in = {&j->reference, &j->naive, j->losses,        j->logits,
                       j->gradients,  SEQ,       RUN_STORE_METRICS};
    cr_assert_eq(judge_item(&cp1, 0, &in, &baselines, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(baseline_table_add(&baselines, 0, &cp1, &error), CPPARITY_OK);
    in.local_len = SEQ / CP;
    cr_assert_eq(judge_item(&j->item, 0, &in, &baselines, &error), CPPARITY_OK, "%s",
                 error.message);
    run_item_free_tensors(&cp1);
    baseline_table_free(&baselines);
}

static void release(judged *j) {
    run_item_free_tensors(&j->item);
    free(j->reference.logits);
    free(j->reference.gradients);
    free(j->reference.fully_masked);
    cpparity_tensor_table_free(&j->reference.parameter_table);
    naive_outputs_free(&j->naive);
    free(j->logits);
    free(j->gradients);
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
