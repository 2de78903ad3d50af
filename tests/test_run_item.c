/*
 * test_run_item.c — the harness side of the implementation-under-test seam: one run item with
 * the clean CPU implementation passes, and implementations that break the interface's contract
 * in the ways a real one could (a gradient missing or extra, no logits, a wrong loss, a failing
 * create, an unexpected refusal) get the verdict and the message that localise the fault —
 * never a pass, never a crash.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distributed/comm/comm_local.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "harness/running/run_item.h"
#include "tests/support/test_files.h"

#define TIMEOUT 30.0 /* seconds: never reached by a passing test */

static const char suite_text[] =
    "cases:\n"
    "  - name: small\n"
    "    model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2,\n"
    "            num_key_value_heads: 1, head_dim: 4, intermediate_size: 12}\n"
    "    seq_len: 8\n"
    "    rows: [{left_padding: 1, documents: [3, 4]}]\n"
    "    cp: [1]\n";

/* --- implementations that break the contract, each built on the clean CPU one ------------- */

static const cpparity_implementation *const clean = &cpparity_cpu_implementation;

static int64_t one_fewer_count(void *instance) {
    return clean->gradient_count(instance) - 1;
}
static cpparity_status missing_norm_gradient(void *instance, const char *name, float *values,
                                             int64_t count, cpparity_error *error) {
    if (strcmp(name, "model.norm.weight") == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "gradient %s: not kept", name);
    }
    return clean->read_gradient(instance, name, values, count, error);
}

static int64_t one_more_count(void *instance) {
    return clean->gradient_count(instance) + 1;
}
static const char *extra_name(void *instance, int64_t index) {
    return index == clean->gradient_count(instance) ? "model.extra.weight"
                                                    : clean->gradient_name(instance, index);
}

static cpparity_status no_logits(void *instance, float *logits, int64_t count,
                                 cpparity_error *error) {
    (void)instance, (void)logits, (void)count;
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "logits were not kept");
}

static cpparity_status no_logits_rows(void *instance, int64_t batch_row, int64_t row, int64_t count,
                                      float *rows, cpparity_error *error) {
    (void)instance, (void)batch_row, (void)row, (void)count, (void)rows;
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rows were not kept");
}

static cpparity_status loss_plus_one(void *instance, float *loss, cpparity_error *error) {
    cpparity_status status = clean->read_loss(instance, loss, error);
    *loss += 1.0f;
    return status;
}

static cpparity_status create_fails(const cpparity_implementation_setup *setup, void **instance,
                                    cpparity_error *error) {
    (void)setup;
    *instance = NULL;
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "device memory exhausted");
}

static cpparity_status refuse_all(const cpparity_model_config *config, int64_t cp,
                                  cpparity_dtype dtype, cpparity_algorithm_choice algorithm,
                                  const cpparity_attention_kernel *kernel, cpparity_error *error) {
    (void)config, (void)cp, (void)dtype, (void)algorithm, (void)kernel;
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "refused: nothing runs here");
}

/* --- running one item ------------------------------------------------------------------- */

typedef struct item_test {
    run_plan plan;                          /* the suite's one case at cp 1 */
    run_options options;                    /* defaults */
    cpparity_implementation implementation; /* under test */
    run_item item;                          /* the verdict (rank 0) */
    cpparity_error error;                   /* a communicator failure */
    cpparity_status status;                 /* of run_item_execute */
} item_test;

static cpparity_status item_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)error;
    item_test *test = argument;
    const run_target target = {&test->implementation, cpparity_cpu_f32_kernel(),
                               CPPARITY_FAULT_NONE};
    baseline_table baselines = {0};
    reference_cache cache = {0};
    test->status = run_item_execute(comm, 0, &test->plan, 0, &test->options, &target, &baselines,
                                    &cache, &test->item, &test->error);
    reference_cache_free(&cache);
    return CPPARITY_OK;
}

/* Writes text as a suite in a new folder (its path into folder and path) and builds the plan
 * of options, with the test's defaults. */
static void plan_from_text(run_plan *plan, run_options *options, const char *text, char *folder,
                           size_t folder_size, char *path, size_t path_size) {
    test_make_folder(folder, folder_size);
    snprintf(path, path_size, "%s/suite.yaml", folder);
    FILE *file = fopen(path, "w");
    cr_assert_not_null(file);
    fputs(text, file);
    fclose(file);
    options->suites[0] = path;
    options->suite_count = 1;
    options->store = RUN_STORE_FAILURES;
    options->timeout_seconds = TIMEOUT;
    cpparity_error error;
    cr_assert_eq(run_plan_build(plan, options, &error), CPPARITY_OK, "%s", error.message);
}

/* Runs the suite's cp = 1 item with implementation on one local rank; the caller frees the
 * item's tensors (run_item_free_tensors) and the plan. */
static void run_one(item_test *test, const cpparity_implementation *implementation) {
    memset(test, 0, sizeof *test);
    char folder[64], path[128];
    plan_from_text(&test->plan, &test->options, suite_text, folder, sizeof folder, path,
                   sizeof path);
    cpparity_error error;
    cr_assert_eq(test->plan.item_count, 1);
    test->implementation = *implementation;
    run_plan_set_ranks(&test->plan, 1, &test->implementation);
    cpparity_status statuses[1];
    cr_assert_eq(comm_local_run(1, TIMEOUT, item_body, test, statuses, NULL, &error), CPPARITY_OK,
                 "%s", error.message);
    cr_assert_eq(test->status, CPPARITY_OK, "%s", test->error.message);
    unlink(path);
    rmdir(folder);
}

static void finish(item_test *test) {
    run_item_free_tensors(&test->item);
    run_plan_free(&test->plan);
}

Test(run_item, clean_implementation__passes_with_every_tensor_counted) {
    item_test test;
    run_one(&test, clean);
    cr_assert_eq(test.item.outcome, RUN_PASS, "%s", test.item.message);
    cr_assert_eq(test.item.tensor_count, test.item.tensors_expected);
    cr_assert(test.item.gradients_identical);
    finish(&test);
}

/* Expects outcome, for ERROR items the error status (the exit code it leads to), and a message
 * containing text. */
static void expect_outcome(const cpparity_implementation *broken, run_outcome outcome,
                           cpparity_status status, const char *text) {
    item_test test;
    run_one(&test, broken);
    cr_assert_eq(test.item.outcome, outcome, "outcome %s, message: %s",
                 run_outcome_name(test.item.outcome), test.item.message);
    if (outcome == RUN_ERROR) {
        cr_assert_eq(test.item.error_status, (int32_t)status, "error status %d: %s",
                     (int)test.item.error_status, test.item.message);
    }
    cr_assert(strstr(test.item.message, text) != NULL, "message '%s' lacks '%s'", test.item.message,
              text);
    finish(&test);
}

static void expect_verdict(const cpparity_implementation *broken, run_outcome outcome,
                           const char *text) {
    expect_outcome(broken, outcome, CPPARITY_OK, text);
}

static void expect_error(const cpparity_implementation *broken, cpparity_status status,
                         const char *text) {
    expect_outcome(broken, RUN_ERROR, status, text);
}

Test(run_item, missing_gradient__fails_naming_it) {
    cpparity_implementation broken = *clean;
    broken.gradient_count = one_fewer_count;
    broken.read_gradient = missing_norm_gradient;
    expect_verdict(&broken, RUN_FAIL, "rank 0: missing gradient: gradient model.norm.weight");
}

Test(run_item, extra_gradient__fails_naming_it) {
    cpparity_implementation broken = *clean;
    broken.gradient_count = one_more_count;
    broken.gradient_name = extra_name;
    expect_verdict(&broken, RUN_FAIL, "an unexpected extra gradient: model.extra.weight");
}

Test(run_item, no_logits__fails_saying_so) {
    cpparity_implementation broken = *clean;
    broken.read_logits = no_logits;
    broken.read_logits_rows = NULL; /* the whole slice is read at once */
    expect_verdict(&broken, RUN_FAIL, "no logits slice: logits were not kept");
}

Test(run_item, no_logits_rows__fails_naming_the_rank_and_why) {
    cpparity_implementation broken = *clean;
    broken.read_logits_rows = no_logits_rows;
    expect_verdict(&broken, RUN_FAIL, ": logits rows unreadable: rows were not kept");
}

Test(run_item, wrong_loss__fails_on_the_loss_tensor) {
    cpparity_implementation broken = *clean;
    broken.read_loss = loss_plus_one;
    expect_verdict(&broken, RUN_FAIL, "worst: loss rank 0");
}

Test(run_item, failing_create__runtime_error_with_the_implementations_message) {
    cpparity_implementation broken = *clean;
    broken.create = create_fails;
    expect_error(&broken, CPPARITY_ERROR_RUNTIME, "device memory exhausted"); /* exit code 3 */
}

Test(run_item, unexpected_refusal__bad_input_with_the_refusal) {
    cpparity_implementation broken = *clean;
    broken.check = refuse_all;
    expect_error(&broken, CPPARITY_ERROR_INPUT, "refused: nothing runs here"); /* exit code 2 */
}

/* --- a layout that needs the kernel's block calls ------------------------------------------ */

static const char zigzag_suite_text[] =
    "cases:\n"
    "  - name: zigzag\n"
    "    model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2,\n"
    "            num_key_value_heads: 2, head_dim: 4, intermediate_size: 12}\n"
    "    seq_len: 8\n"
    "    rows: [{left_padding: 1, documents: [3, 4]}]\n"
    "    cp: [2]\n"
    "    layouts: [zigzag]\n";

/* The zigzag item at cp 2 on two local ranks, each rank's item its own. */
typedef struct layout_test {
    run_plan plan;
    run_options options;
    cpparity_implementation implementation;
    cpparity_attention_kernel kernel;
    run_item items[2];
    cpparity_error errors[2];
    cpparity_status statuses[2];
    int64_t index; /* the zigzag item's */
} layout_test;

static cpparity_status layout_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)error;
    layout_test *test = argument;
    const run_target target = {&test->implementation, &test->kernel, CPPARITY_FAULT_NONE};
    baseline_table baselines = {0};
    reference_cache cache = {0};
    test->statuses[comm->rank] =
        run_item_execute(comm, 0, &test->plan, test->index, &test->options, &target, &baselines,
                         &cache, &test->items[comm->rank], &test->errors[comm->rank]);
    reference_cache_free(&cache);
    return CPPARITY_OK;
}

/* Runs the zigzag item with the CPU implementation, told (or not) that its layouts need block
 * calls, and the CPU kernel as an ABI 2 kernel (no block calls); returns root's outcome. */
static run_outcome run_zigzag_without_block_calls(bool layouts_need_block_calls, int64_t *compared,
                                                  char *message, size_t size) {
    layout_test *test = calloc(1, sizeof *test);
    cr_assert_not_null(test);
    char folder[64], path[128];
    plan_from_text(&test->plan, &test->options, zigzag_suite_text, folder, sizeof folder, path,
                   sizeof path);
    cpparity_error error;
    for (int64_t i = 0; i < test->plan.item_count; i++) { /* the cp 2 item (not cp 1's baseline) */
        test->index = test->plan.items[i].cp == 2 ? i : test->index;
    }
    cr_assert_eq(test->plan.items[test->index].layout, CPPARITY_LAYOUT_ZIGZAG);
    test->implementation = *clean;
    test->implementation.layouts_need_block_calls = layouts_need_block_calls;
    test->kernel = *cpparity_cpu_f32_kernel();
    test->kernel.abi_version = 2u; /* an ABI 2 kernel: whole-sequence calls only */
    test->kernel.forward_block = NULL;
    test->kernel.backward_block = NULL;
    run_plan_set_ranks(&test->plan, 2, &test->implementation);
    cpparity_status statuses[2];
    cr_assert_eq(comm_local_run(2, TIMEOUT, layout_body, test, statuses, NULL, &error), CPPARITY_OK,
                 "%s", error.message);
    cr_assert(test->statuses[0] == CPPARITY_OK && test->statuses[1] == CPPARITY_OK, "%s",
              test->errors[0].message);
    const run_outcome outcome = test->items[0].outcome;
    *compared = test->items[0].tensor_count;
    snprintf(message, size, "%s", test->items[0].message);
    for (int r = 0; r < 2; r++) {
        run_item_free_tensors(&test->items[r]);
    }
    run_plan_free(&test->plan);
    free(test);
    unlink(path);
    rmdir(folder);
    return outcome;
}

Test(run_item, layout_needing_block_calls_with_an_abi2_kernel__is_not_claimed_saying_why) {
    char message[CPPARITY_MESSAGE_TEXT];
    int64_t compared = 0;
    /* the cuda implementation's case: zigzag goes through the kernel's block calls */
    cr_assert_eq(run_zigzag_without_block_calls(true, &compared, message, sizeof message),
                 RUN_NOT_CLAIMED, "%s", message);
    cr_assert_eq(compared, 0);
    cr_assert(strstr(message, "has no block calls (the layout zigzag needs ABI 3's") != NULL, "%s",
              message);
    /* the CPU implementation's: zigzag Ulysses reorders the sequence, whole-sequence calls, and
     * the item runs and is judged (its verdict needs cp 1's baselines, which this test has not) */
    cr_assert_neq(run_zigzag_without_block_calls(false, &compared, message, sizeof message),
                  RUN_NOT_CLAIMED, "%s", message);
    cr_assert_gt(compared, 0, "%s", message);
}
