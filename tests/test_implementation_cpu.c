/*
 * test_implementation_cpu.c — the float32 CPU model through the implementation-under-test
 * interface (distributed/models/implementation.h), the only way the harness reaches it: refusals
 * before compute, weights handed over by name, forward on the whole batch with each rank taking its
 * slice, the outputs read back by name, and every misuse refused as bad input. The results are
 * compared with the float64 reference on the same inputs.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/model_parameters.h"
#include "distributed/comm/comm_local.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "reference/model.h"
#include "tests/support/test_models.h"

/* contiguous Ulysses: what these tests run */
#define ULYSSES ((cpparity_algorithm_choice){CPPARITY_ALGORITHM_ULYSSES, 0, 0})

#define SEED 20261201u
#define TIMEOUT 30.0 /* seconds: never reached by a passing test */
#define SEQ_LEN 11   /* not a multiple of 2: rank 1 holds automatic padding */
#define BATCH 2

/* Float32 against float64 on a 2-layer model of width 8: rounding of ~1e-7 per operation over a
 * few hundred operations stays below 1e-5 relative; a wrong slice or a missing all-reduce is
 * off by O(1). */
#define RELATIVE_TOLERANCE 1e-5

/* A sliding then a full layer, and a vocabulary of 13. */
static cpparity_model_config small_config(void) {
    cpparity_model_config config = test_small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_FULL);
    config.vocab_size = 13;
    return config;
}

/* Left padding, two documents, right padding: every mask feature crosses the shard boundary. */
static int64_t lengths_a[] = {4, 5}, lengths_b[] = {9};
static const cpparity_row_layout rows[BATCH] = {{1, 2, lengths_a, 1, false, NULL},
                                                {0, 1, lengths_b, 2, false, NULL}};

/* What the float64 reference gives for the same case. */
typedef struct expected_outputs {
    double loss;       /* the loss */
    double *logits;    /* [B, S, V] */
    double *gradients; /* by the parameter table */
} expected_outputs;

/* Everything one test run shares with its ranks. */
typedef struct shared_run {
    cpparity_model_config config;
    cpparity_batch batch;        /* the whole batch, every rank gets it */
    cpparity_tensor_table table; /* the harness's parameter table */
    double *weights;             /* fixture weights, by table */
    expected_outputs expected;   /* reference */
} shared_run;

static void prepare(shared_run *run) {
    memset(run, 0, sizeof *run);
    run->config = small_config();
    cpparity_error error;
    cr_assert_eq(fixture_batch_build(&run->batch, rows, BATCH, SEQ_LEN, run->config.vocab_size,
                                     SEED, &error),
                 CPPARITY_OK, "%s", error.message);
    cr_assert_eq(cpparity_model_parameter_table(&run->config, &run->table, &error), CPPARITY_OK);
    run->weights = malloc((size_t)run->table.total * sizeof *run->weights);
    cr_assert_not_null(run->weights);
    fixture_fill_parameters(run->weights, &run->table, SEED);
    reference_model model;
    cr_assert_eq(reference_model_init(&model, &run->config, BATCH, SEQ_LEN, &error), CPPARITY_OK);
    memcpy(model.parameters, run->weights, (size_t)run->table.total * sizeof(double));
    cr_assert_eq(reference_model_forward(&model, &run->batch, &error), CPPARITY_OK);
    cr_assert_eq(reference_model_backward(&model, &run->batch, &error), CPPARITY_OK);
    run->expected.loss = model.loss;
    run->expected.logits = test_reference_logits(&model);
    run->expected.gradients = malloc((size_t)run->table.total * sizeof(double));
    memcpy(run->expected.gradients, model.gradients, (size_t)run->table.total * sizeof(double));
    reference_model_free(&model);
}

static void release(shared_run *run) {
    cpparity_batch_free(&run->batch);
    cpparity_tensor_table_free(&run->table);
    free(run->weights);
    free(run->expected.logits);
    free(run->expected.gradients);
}

#define RANK_CHECK(condition, ...)                                                                 \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, __VA_ARGS__);                        \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/* |a − b| <= tolerance·max(1, |b|) */
static bool close_to(double a, double b) {
    return fabs(a - b) <= RELATIVE_TOLERANCE * fmax(1.0, fabs(b));
}

/* Whether x is exactly a bfloat16 value (its low 16 bits are zero). */
static bool is_bfloat16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & 0xffffu) == 0;
}

/* The bfloat16 run against the float64 reference: relative L2 errors, as the harness measures
 * them. Storage in bfloat16 (unit roundoff 2^-9 ≈ 2e-3) at ~20 storage points of a 2-layer
 * model accumulates to ~1e-2; 5e-2 is the bf16 ceiling of docs/tolerances.md, and a dropped
 * rounding, a wrong slice or a missing all-reduce is off by far more or by nothing at all (the
 * bfloat16 check below catches the former). */
#define BF16_RELATIVE_L2 5e-2

static double relative_l2(const float *x, const double *r, int64_t count, const uint8_t *skip) {
    double difference = 0.0, norm = 0.0;
    for (int64_t i = 0; i < count; i++) {
        if (skip == NULL || !skip[i]) {
            difference += (x[i] - r[i]) * (x[i] - r[i]);
            norm += r[i] * r[i];
        }
    }
    return sqrt(difference / (norm > 0.0 ? norm : 1.0));
}

/* One rank of the bfloat16 run: errors within the bf16 ceiling, logits stored as bfloat16,
 * gradients float32 (not all bfloat16 values). */
static cpparity_status bf16_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    shared_run *run = argument;
    const cpparity_implementation *implementation = &cpparity_cpu_implementation;
    const int64_t V = run->config.vocab_size, L = (SEQ_LEN + comm->size - 1) / comm->size;
    const cpparity_implementation_setup setup = {.config = &run->config,
                                                 .batch = BATCH,
                                                 .seq_len = SEQ_LEN,
                                                 .dtype = CPPARITY_DTYPE_BF16,
                                                 .comm = comm,
                                                 .kernel = cpparity_cpu_f32_kernel(),
                                                 .layout = CPPARITY_LAYOUT_CONTIGUOUS,
                                                 .algorithm = ULYSSES,
                                                 .fault = CPPARITY_FAULT_NONE};
    void *instance = NULL;
    float *logits = malloc((size_t)(BATCH * L * V) * sizeof(float));
    double *expected = malloc((size_t)(BATCH * L * V) * sizeof(double));
    uint8_t *skip = calloc((size_t)(BATCH * L * V), 1);
    float *gradients = malloc((size_t)run->table.total * sizeof(float));
    cpparity_status status = implementation->create(&setup, &instance, error);
    if (status == CPPARITY_OK) {
        status = implementation->load_parameters(instance, &run->table, run->weights, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->forward(instance, &run->batch, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->backward(instance, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->read_logits(instance, logits, BATCH * L * V, error);
    }
    RANK_CHECK(status == CPPARITY_OK, "bf16 run: %s", error->message);
    bool all_bfloat16 = true;
    for (int64_t b = 0; b < BATCH; b++) {
        for (int64_t t = 0; t < L; t++) {
            const int64_t position = comm->rank * L + t;
            const bool compared =
                position < SEQ_LEN && run->batch.attention_mask[b * SEQ_LEN + position] == 1;
            for (int64_t v = 0; v < V; v++) {
                const int64_t i = (b * L + t) * V + v;
                skip[i] = !compared;
                expected[i] = compared ? run->expected.logits[(b * SEQ_LEN + position) * V + v] : 0;
                all_bfloat16 = all_bfloat16 && is_bfloat16(logits[i]);
            }
        }
    }
    RANK_CHECK(all_bfloat16, "rank %d: logits are not stored as bfloat16", comm->rank);
    const double logits_error = relative_l2(logits, expected, BATCH * L * V, skip);
    RANK_CHECK(logits_error <= BF16_RELATIVE_L2 && logits_error > 0.0,
               "rank %d: logits relative L2 %.3g (bf16 ceiling %g)", comm->rank, logits_error,
               BF16_RELATIVE_L2);
    bool gradients_bfloat16 = true;
    for (int64_t e = 0; e < run->table.count; e++) {
        const cpparity_tensor_entry *entry = &run->table.entries[e];
        status = implementation->read_gradient(instance, entry->name, gradients + entry->offset,
                                               entry->count, error);
        RANK_CHECK(status == CPPARITY_OK, "read_gradient: %s", error->message);
        const double gradient_error = relative_l2(
            gradients + entry->offset, run->expected.gradients + entry->offset, entry->count, NULL);
        RANK_CHECK(gradient_error <= BF16_RELATIVE_L2, "rank %d: %s relative L2 %.3g (ceiling %g)",
                   comm->rank, entry->name, gradient_error, BF16_RELATIVE_L2);
        for (int64_t i = 0; i < entry->count; i++) {
            gradients_bfloat16 = gradients_bfloat16 && is_bfloat16(gradients[entry->offset + i]);
        }
    }
    RANK_CHECK(!gradients_bfloat16, "gradients must stay float32, all were bfloat16 values");
    status = CPPARITY_OK;
done:
    implementation->destroy(instance);
    free(logits);
    free(expected);
    free(skip);
    free(gradients);
    return status;
}

/* One rank: the whole interface, outputs against the reference. */
static cpparity_status rank_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    shared_run *run = argument;
    const cpparity_implementation *implementation = &cpparity_cpu_implementation;
    const int64_t V = run->config.vocab_size, L = (SEQ_LEN + comm->size - 1) / comm->size;
    const cpparity_implementation_setup setup = {.config = &run->config,
                                                 .batch = BATCH,
                                                 .seq_len = SEQ_LEN,
                                                 .dtype = CPPARITY_DTYPE_F32,
                                                 .comm = comm,
                                                 .kernel = cpparity_cpu_f32_kernel(),
                                                 .layout = CPPARITY_LAYOUT_CONTIGUOUS,
                                                 .algorithm = ULYSSES,
                                                 .fault = CPPARITY_FAULT_NONE};
    void *instance = NULL;
    float *logits = malloc((size_t)(BATCH * L * V) * sizeof(float));
    float *gradient = malloc((size_t)run->table.total * sizeof(float));
    cpparity_status status = implementation->create(&setup, &instance, error);
    RANK_CHECK(status == CPPARITY_OK, "create: %s", error->message);
    status = implementation->load_parameters(instance, &run->table, run->weights, error);
    RANK_CHECK(status == CPPARITY_OK, "load_parameters: %s", error->message);
    status = implementation->forward(instance, &run->batch, error);
    RANK_CHECK(status == CPPARITY_OK, "forward: %s", error->message);
    status = implementation->backward(instance, error);
    RANK_CHECK(status == CPPARITY_OK, "backward: %s", error->message);
    float loss = 0.0f;
    status = implementation->read_loss(instance, &loss, error);
    RANK_CHECK(status == CPPARITY_OK && close_to(loss, run->expected.loss),
               "rank %d: loss %.9g, reference %.9g", comm->rank, loss, run->expected.loss);
    status = implementation->read_logits(instance, logits, BATCH * L * V, error);
    RANK_CHECK(status == CPPARITY_OK, "read_logits: %s", error->message);
    for (int64_t b = 0; b < BATCH; b++) {
        for (int64_t t = 0; t < L; t++) {
            const int64_t position = comm->rank * L + t;
            /* automatic padding, and padding query rows (each padding token is its own
             * document, so they see no key): their logits are don't-care */
            if (position >= SEQ_LEN || run->batch.attention_mask[b * SEQ_LEN + position] == 0) {
                continue;
            }
            for (int64_t v = 0; v < V; v++) {
                const double got = logits[(b * L + t) * V + v];
                const double want = run->expected.logits[(b * SEQ_LEN + position) * V + v];
                RANK_CHECK(close_to(got, want),
                           "rank %d: logit [%lld, %lld, %lld] %.9g, "
                           "reference %.9g",
                           comm->rank, (long long)b, (long long)position, (long long)v, got, want);
            }
        }
    }
    RANK_CHECK(implementation->gradient_count(instance) == run->table.count,
               "gradient_count %lld, table %lld",
               (long long)implementation->gradient_count(instance), (long long)run->table.count);
    for (int64_t e = 0; e < run->table.count; e++) {
        const cpparity_tensor_entry *entry = &run->table.entries[e];
        RANK_CHECK(cpparity_tensor_table_find(&run->table,
                                              implementation->gradient_name(instance, e)) != NULL,
                   "gradient_name %lld is not a model.md name", (long long)e);
        status =
            implementation->read_gradient(instance, entry->name, gradient, entry->count, error);
        RANK_CHECK(status == CPPARITY_OK, "read_gradient %s: %s", entry->name, error->message);
        for (int64_t i = 0; i < entry->count; i++) {
            RANK_CHECK(close_to(gradient[i], run->expected.gradients[entry->offset + i]),
                       "rank %d: %s[%lld] %.9g, reference %.9g", comm->rank, entry->name,
                       (long long)i, gradient[i], run->expected.gradients[entry->offset + i]);
        }
    }
    RANK_CHECK(implementation->gradient_name(instance, run->table.count) == NULL,
               "a name past the last gradient");
    /* misuse: each refused as bad input, the instance unharmed */
    cpparity_error refusal;
    RANK_CHECK(implementation->read_logits(instance, logits, BATCH * L * V - 1, &refusal) ==
                   CPPARITY_ERROR_INPUT,
               "a wrong logits count was accepted");
    RANK_CHECK(implementation->read_gradient(instance, "model.no_such.weight", gradient, 1,
                                             &refusal) == CPPARITY_ERROR_INPUT &&
                   strstr(refusal.message, "model.no_such.weight") != NULL,
               "an unknown gradient name was accepted: %s", refusal.message);
    status = CPPARITY_OK;
done:
    implementation->destroy(instance);
    free(logits);
    free(gradient);
    return status;
}

static void run_ranks(int ranks, shared_run *run) {
    cpparity_status statuses[4];
    cpparity_error errors[4], error;
    cr_assert_eq(comm_local_run(ranks, TIMEOUT, rank_body, run, statuses, errors, &error),
                 CPPARITY_OK, "%s", error.message);
    for (int rank = 0; rank < ranks; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_OK, "seed %u, %d ranks, rank %d: %s", SEED, ranks,
                     rank, errors[rank].message);
    }
}

Test(implementation_cpu, whole_interface__one_two_four_ranks__outputs_equal_float64_reference) {
    shared_run run;
    prepare(&run);
    run_ranks(1, &run);
    run_ranks(2, &run);
    run_ranks(4, &run);
    release(&run);
}

Test(implementation_cpu, bf16_storage__one_two_four_ranks__within_the_bf16_ceiling) {
    shared_run run;
    prepare(&run);
    for (int ranks = 1; ranks <= 4; ranks *= 2) {
        cpparity_status statuses[4];
        cpparity_error errors[4], error;
        cr_assert_eq(comm_local_run(ranks, TIMEOUT, bf16_body, &run, statuses, errors, &error),
                     CPPARITY_OK, "%s", error.message);
        for (int rank = 0; rank < ranks; rank++) {
            cr_assert_eq(statuses[rank], CPPARITY_OK, "seed %u, %d ranks, rank %d: %s", SEED, ranks,
                         rank, errors[rank].message);
        }
    }
    release(&run);
}

Test(implementation_cpu, check__refuses_before_compute_naming_the_constraint) {
    const cpparity_implementation *implementation = &cpparity_cpu_implementation;
    cpparity_model_config config = small_config();
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    cpparity_error error;
    cr_assert_eq(implementation->check(&config, 2, CPPARITY_DTYPE_F32, ULYSSES, kernel, &error),
                 CPPARITY_OK);
    cr_assert_eq(implementation->check(&config, 3, CPPARITY_DTYPE_F32, ULYSSES, kernel, &error),
                 CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "refused: num_attention_heads") != NULL, "%s", error.message);
    cr_assert_eq(implementation->check(&config, 2, CPPARITY_DTYPE_BF16, ULYSSES, kernel, &error),
                 CPPARITY_OK, "%s", error.message);
    cpparity_attention_kernel cuda_kernel = *kernel;
    cuda_kernel.device = CPPARITY_KERNEL_DEVICE_CUDA;
    cr_assert_eq(
        implementation->check(&config, 2, CPPARITY_DTYPE_F32, ULYSSES, &cuda_kernel, &error),
        CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "CPU float32 attention kernel") != NULL, "%s", error.message);
}

/* One rank's misuse of the call order and of the weights. */
static cpparity_status misuse_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    shared_run *run = argument;
    const cpparity_implementation *implementation = &cpparity_cpu_implementation;
    const cpparity_implementation_setup setup = {.config = &run->config,
                                                 .batch = BATCH,
                                                 .seq_len = SEQ_LEN,
                                                 .dtype = CPPARITY_DTYPE_F32,
                                                 .comm = comm,
                                                 .kernel = cpparity_cpu_f32_kernel(),
                                                 .layout = CPPARITY_LAYOUT_CONTIGUOUS,
                                                 .algorithm = ULYSSES,
                                                 .fault = CPPARITY_FAULT_NONE};
    void *instance = NULL;
    cpparity_status status = implementation->create(&setup, &instance, error);
    RANK_CHECK(status == CPPARITY_OK, "create: %s", error->message);
    cpparity_error refusal;
    float loss;
    RANK_CHECK(implementation->backward(instance, &refusal) == CPPARITY_ERROR_INPUT &&
                   strstr(refusal.message, "before forward") != NULL,
               "backward before forward: %s", refusal.message);
    RANK_CHECK(implementation->read_loss(instance, &loss, &refusal) == CPPARITY_ERROR_INPUT,
               "a loss before forward");
    /* weights for a model with one layer fewer: the second layer's are missing */
    cpparity_model_config smaller = run->config;
    smaller.num_hidden_layers = 1;
    cpparity_tensor_table table = {0};
    status = cpparity_model_parameter_table(&smaller, &table, error);
    RANK_CHECK(status == CPPARITY_OK, "parameter table: %s", error->message);
    double *weights = calloc((size_t)table.total, sizeof *weights);
    status = implementation->load_parameters(instance, &table, weights, &refusal);
    free(weights);
    cpparity_tensor_table_free(&table);
    RANK_CHECK(status == CPPARITY_ERROR_INPUT && strstr(refusal.message, "model.layers.1.") != NULL,
               "missing weights accepted: %s", refusal.message);
    cpparity_batch other = {0};
    status = cpparity_batch_allocate(&other, BATCH, SEQ_LEN + 1, error);
    RANK_CHECK(status == CPPARITY_OK, "batch: %s", error->message);
    status = implementation->forward(instance, &other, &refusal);
    cpparity_batch_free(&other);
    RANK_CHECK(status == CPPARITY_ERROR_INPUT, "a batch of another length was accepted");
    status = CPPARITY_OK;
done:
    implementation->destroy(instance);
    return status;
}

Test(implementation_cpu, misuse__call_order_and_missing_weights__input_errors) {
    shared_run run;
    prepare(&run);
    cpparity_status statuses[2];
    cpparity_error errors[2], error;
    cr_assert_eq(comm_local_run(2, TIMEOUT, misuse_body, &run, statuses, errors, &error),
                 CPPARITY_OK, "%s", error.message);
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_eq(statuses[rank], CPPARITY_OK, "rank %d: %s", rank, errors[rank].message);
    }
    release(&run);
}
