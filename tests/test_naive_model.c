/*
 * test_naive_model.c — the straightforward same-dtype baseline (harness/judging/naive_model.h):
 * in float32 it agrees with the float64 reference to float32 rounding (and is not secretly
 * float64); in bf16 its stored logits are bfloat16 and its errors stay under the bf16 ceiling;
 * and the implementation under test on the same case errs no more than the policy allows
 * relative to it (docs/tolerances.md), in both dtypes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/model_parameters.h"
#include "common/row_blocks.h"
#include "distributed/comm/comm_local.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "harness/judging/naive_model.h"
#include "harness/judging/tolerance.h"
#include "reference/model.h"
#include "tests/support/test_models.h"

#define SEED 77u
#define SEQ_LEN 13
#define BATCH 2

/* Left padding, packed documents, right padding. */
static int64_t lengths_a[] = {5, 4}, lengths_b[] = {3, 8};
static const cpparity_row_layout rows[BATCH] = {{2, 2, lengths_a, 2, false, NULL},
                                                {0, 2, lengths_b, 2, true, NULL}};

/* The case: a model, its batch, weights and float64 outputs. */
typedef struct naive_case {
    cpparity_model_config config;
    cpparity_batch batch;
    cpparity_tensor_table table;
    double *weights;
    double loss;       /* reference */
    double *logits;    /* reference [B, S, V] */
    double *gradients; /* reference, by table */
} naive_case;

static void prepare(naive_case *c) {
    memset(c, 0, sizeof *c);
    c->config = test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED);
    cpparity_error error;
    cr_assert_eq(
        fixture_batch_build(&c->batch, rows, BATCH, SEQ_LEN, c->config.vocab_size, SEED, &error),
        CPPARITY_OK, "%s", error.message);
    cr_assert_eq(cpparity_model_parameter_table(&c->config, &c->table, &error), CPPARITY_OK);
    c->weights = malloc((size_t)c->table.total * sizeof *c->weights);
    fixture_fill_parameters(c->weights, &c->table, SEED);
    reference_model model;
    cr_assert_eq(reference_model_init(&model, &c->config, BATCH, SEQ_LEN, &error), CPPARITY_OK);
    memcpy(model.parameters, c->weights, (size_t)c->table.total * sizeof(double));
    cr_assert_eq(reference_model_forward(&model, &c->batch, &error), CPPARITY_OK, "%s",
                 error.message);
    cr_assert_eq(reference_model_backward(&model, &c->batch, &error), CPPARITY_OK);
    const int64_t logits = BATCH * SEQ_LEN * c->config.vocab_size;
    c->loss = model.loss;
    c->logits = malloc((size_t)logits * sizeof(double));
    c->gradients = malloc((size_t)c->table.total * sizeof(double));
    const row_blocks blocks = row_blocks_of(BATCH, SEQ_LEN);
    for (int64_t k = 0; k < blocks.count; k++) { /* the logits one row block at a time */
        reference_model_logits_block(
            &model, k, c->logits + row_blocks_at(&blocks, k).flat * c->config.vocab_size);
    }
    memcpy(c->gradients, model.gradients, (size_t)c->table.total * sizeof(double));
    reference_model_free(&model);
}

static void release(naive_case *c) {
    cpparity_batch_free(&c->batch);
    cpparity_tensor_table_free(&c->table);
    free(c->weights);
    free(c->logits);
    free(c->gradients);
}

/* Relative L2 error of x against r over count elements; logits of padding query rows (their own
 * document: they see no key) are skipped when row_mask is given. */
static double relative_l2(const float *x, const double *r, int64_t count, const int8_t *row_mask,
                          int64_t row_width) {
    double difference = 0.0, norm = 0.0;
    for (int64_t i = 0; i < count; i++) {
        if (row_mask != NULL && row_mask[i / row_width] == 0) {
            continue;
        }
        difference += (x[i] - r[i]) * (x[i] - r[i]);
        norm += r[i] * r[i];
    }
    return sqrt(difference / norm);
}

/* The worst relative L2 error over the loss, the logits and each gradient. */
typedef struct errors {
    double loss, logits, gradients; /* gradients: the worst tensor */
} errors;

/* The worst errors, the logits' given (the baseline measures its own). */
static errors errors_with(const naive_case *c, float loss, double logits, const float *gradients) {
    errors e;
    e.loss = fabs(loss - c->loss) / fabs(c->loss);
    e.logits = logits;
    e.gradients = 0.0;
    for (int64_t t = 0; t < c->table.count; t++) {
        const cpparity_tensor_entry *entry = &c->table.entries[t];
        const double error = relative_l2(gradients + entry->offset, c->gradients + entry->offset,
                                         entry->count, NULL, 1);
        e.gradients = error > e.gradients ? error : e.gradients;
    }
    return e;
}

static errors errors_of(const naive_case *c, float loss, const float *logits,
                        const float *gradients) {
    return errors_with(c, loss,
                       relative_l2(logits, c->logits, BATCH * SEQ_LEN * c->config.vocab_size,
                                   c->batch.attention_mask, c->config.vocab_size),
                       gradients);
}

/* The reference's logits of a row block, from the case's whole array. */
static void reference_block(const void *context, int64_t block, double *out) {
    const naive_case *c = context;
    const row_blocks blocks = row_blocks_of(BATCH, SEQ_LEN);
    const row_block at = row_blocks_at(&blocks, block);
    const int64_t V = c->config.vocab_size;
    memcpy(out, c->logits + at.flat * V, (size_t)((at.end - at.begin) * V) * sizeof *out);
}

static errors naive_errors(const naive_case *c, cpparity_dtype dtype, naive_outputs *outputs) {
    cpparity_error error;
    const naive_reference_logits reference = {reference_block, c};
    cr_assert_eq(naive_model_run(&c->config, &c->batch, &c->table, c->weights, dtype, &reference,
                                 outputs, &error),
                 CPPARITY_OK, "%s", error.message);
    /* its logits' error from what it kept per token, over the tokens of real queries */
    double difference = 0.0, norm = 0.0;
    for (int64_t n = 0; n < BATCH * SEQ_LEN; n++) {
        cr_assert_eq(outputs->logits_nonfinite[n], 0, "token %lld", (long long)n);
        if (c->batch.attention_mask[n] != 0) {
            difference += outputs->logits_error[n];
            norm += outputs->logits_norm[n];
        }
    }
    return errors_with(c, outputs->loss, sqrt(difference / norm), outputs->gradients);
}

Test(naive_model, float32__agrees_with_float64_to_float32_rounding) {
    naive_case c;
    prepare(&c);
    naive_outputs outputs;
    const errors e = naive_errors(&c, CPPARITY_DTYPE_F32, &outputs);
    /* float32 (unit roundoff 6e-8) over sums of at most a few dozen terms: errors of 1e-7 to
     * 1e-6; 1e-5 leaves an order of magnitude, and a wrong layer is off by O(1). Strictly above 0:
     * a float64 computation would match to 1e-15 and make every limit meaningless. */
    cr_assert(e.loss < 1e-5 && e.logits < 1e-5 && e.gradients < 1e-5,
              "seed %u: loss %.3g logits %.3g gradients %.3g", SEED, e.loss, e.logits, e.gradients);
    cr_assert(e.logits > 1e-9 && e.gradients > 1e-9, "seed %u: errors %.3g %.3g look like float64",
              SEED, e.logits, e.gradients);
    naive_outputs_free(&outputs);
    release(&c);
}

Test(naive_model, bf16__rounds_at_its_storage_points_within_the_bf16_ceiling) {
    naive_case c;
    prepare(&c);
    naive_outputs outputs;
    const errors e = naive_errors(&c, CPPARITY_DTYPE_BF16, &outputs);
    /* The bf16 ceilings of docs/tolerances.md (the baseline must stay under them); bfloat16
     * storage (unit roundoff 3.9e-3) at ~20 points lands near 1e-2 on logits, up to ~5e-2 on
     * dq/dk-fed gradients. Above 1e-3: the rounding really happened. */
    const double logits_ceiling =
        cpparity_tolerance_default(CPPARITY_DTYPE_BF16, CPPARITY_KIND_LOGITS).ceiling;
    const double grads_ceiling =
        cpparity_tolerance_default(CPPARITY_DTYPE_BF16, CPPARITY_KIND_GRADS).ceiling;
    cr_assert(e.logits < logits_ceiling && e.gradients < grads_ceiling && e.logits > 1e-3,
              "seed %u: logits %.3g gradients %.3g", SEED, e.logits, e.gradients);
    naive_outputs_free(&outputs);
    release(&c);
}

/* What the implementation under test gives on one rank. */
typedef struct implementation_run {
    const naive_case *c;
    cpparity_dtype dtype;
    float loss;
    float *logits;
    float *gradients;
} implementation_run;

static cpparity_status implementation_body(cpparity_comm *comm, void *argument,
                                           cpparity_error *error) {
    implementation_run *run = argument;
    const cpparity_implementation *implementation = &cpparity_cpu_implementation;
    const cpparity_implementation_setup setup = {&run->c->config,
                                                 BATCH,
                                                 SEQ_LEN,
                                                 run->dtype,
                                                 comm,
                                                 cpparity_cpu_f32_kernel(),
                                                 CPPARITY_FAULT_NONE,
                                                 CPPARITY_LAYOUT_CONTIGUOUS,
                                                 {CPPARITY_ALGORITHM_ULYSSES, 0, 0}};
    void *instance = NULL;
    cpparity_status status = implementation->create(&setup, &instance, error);
    if (status == CPPARITY_OK) {
        status = implementation->load_parameters(instance, &run->c->table, run->c->weights, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->forward(instance, &run->c->batch, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->backward(instance, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->read_loss(instance, &run->loss, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->read_logits(instance, run->logits,
                                             BATCH * SEQ_LEN * run->c->config.vocab_size, error);
    }
    for (int64_t t = 0; status == CPPARITY_OK && t < run->c->table.count; t++) {
        const cpparity_tensor_entry *entry = &run->c->table.entries[t];
        status = implementation->read_gradient(instance, entry->name,
                                               run->gradients + entry->offset, entry->count, error);
    }
    implementation->destroy(instance);
    return status;
}

/* The policy at cp = 1 in both dtypes: the implementation under test against the naive
 * baseline, with the default ratios and floors of docs/tolerances.md. */
Test(naive_model, implementation_at_cp_1__within_the_default_policy_of_the_baseline) {
    naive_case c;
    prepare(&c);
    const cpparity_dtype dtypes[] = {CPPARITY_DTYPE_F32, CPPARITY_DTYPE_BF16};
    const double floors[] = {1e-6, 1e-2}; /* the default floors, float32 and bf16 */
    for (int i = 0; i < 2; i++) {
        naive_outputs outputs;
        const errors naive = naive_errors(&c, dtypes[i], &outputs);
        implementation_run run = {
            &c, dtypes[i], 0.0f,
            malloc((size_t)(BATCH * SEQ_LEN * c.config.vocab_size) * sizeof(float)),
            malloc((size_t)c.table.total * sizeof(float))};
        cpparity_status statuses[1];
        cpparity_error errors_[1], error;
        cr_assert_eq(comm_local_run(1, 30.0, implementation_body, &run, statuses, errors_, &error),
                     CPPARITY_OK);
        cr_assert_eq(statuses[0], CPPARITY_OK, "%s", errors_[0].message);
        const errors implementation = errors_of(&c, run.loss, run.logits, run.gradients);
        cr_assert_leq(implementation.logits, 2.0 * naive.logits + floors[i],
                      "%s: logits %.3g vs naive %.3g", cpparity_dtype_name(dtypes[i]),
                      implementation.logits, naive.logits);
        cr_assert_leq(implementation.gradients, 3.0 * naive.gradients + floors[i],
                      "%s: gradients %.3g vs naive %.3g", cpparity_dtype_name(dtypes[i]),
                      implementation.gradients, naive.gradients);
        free(run.logits);
        free(run.gradients);
        naive_outputs_free(&outputs);
    }
    release(&c);
}
