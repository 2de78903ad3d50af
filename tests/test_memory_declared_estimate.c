/*
 * test_memory_declared_estimate.c — the memory estimate adds up what each component declares
 * (harness/running/memory_estimate.h): a toy implementation, built here as a minimal table of
 * distributed/models/implementation.h with an `estimate`, moves an item's estimate by exactly what
 * it declares and gets a case refused naming its share; one without `estimate` is counted for the
 * harness's share alone, and the messages say its own is unknown; a kernel's workspace_bytes
 * (cpparity/kernel.h) reaches the cpu implementation's figure, and is read only where the
 * descriptor's struct_size covers it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "harness/running/memory_estimate.h"
#include "harness/running/run_plan.h"
#include "tests/support/test_files.h"

/* contiguous Ulysses: the algorithm these estimates are made for */
#define ULYSSES ((cpparity_algorithm_choice){CPPARITY_ALGORITHM_ULYSSES, 0, 0})

#define MIB ((int64_t)1 << 20)
#define GIB ((int64_t)1 << 30)
#define TIB ((int64_t)1 << 40)

/* --- a toy implementation: nothing but a declared estimate --------------------------------------
 */

static int64_t toy_bytes;                          /* what the toy declares */
static bool toy_overflows;                         /* the toy reports an overflow instead */
static cpparity_implementation_estimate toy_asked; /* the last setup it was asked about */

static cpparity_status toy_check(const cpparity_model_config *config, int64_t cp,
                                 cpparity_dtype dtype, cpparity_algorithm_choice algorithm,
                                 const cpparity_attention_kernel *kernel, cpparity_error *error) {
    (void)config, (void)cp, (void)dtype, (void)algorithm, (void)kernel, (void)error;
    return CPPARITY_OK;
}

static cpparity_status toy_estimate(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                    int64_t *kept, cpparity_error *error) {
    toy_asked = *setup;
    *bytes = toy_overflows ? 0 : toy_bytes;
    *kept = 0; /* it has no read_logits_rows: nothing is read from it after backward */
    return toy_overflows
               ? cpparity_error_set(error, CPPARITY_ERROR_INPUT, "the toy's tensors of 2^70 floats")
               : CPPARITY_OK;
}

static cpparity_status toy_create(const cpparity_implementation_setup *setup, void **instance,
                                  cpparity_error *error) {
    (void)setup;
    *instance = NULL;
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "refused: a toy computes nothing");
}

static void toy_destroy(void *instance) {
    (void)instance;
}

/* The toy. Only the fields the estimate reads and those every implementation has are set: it
 * is never run. */
static const cpparity_implementation toy = {
    .name = "toy-model",
    .device = "cpu",
    .description = "a table of functions with a declared memory estimate (tests only)",
    .dtypes = {[CPPARITY_DTYPE_F32] = true},
    .layouts = {[CPPARITY_LAYOUT_CONTIGUOUS] = true},
    .algorithms = {[CPPARITY_ALGORITHM_ULYSSES] = true},
    .default_kernel = "cpu-f32",
    .check = toy_check,
    .estimate = toy_estimate,
    .create = toy_create,
    .destroy = toy_destroy,
};

/* The same toy without `estimate`. */
static cpparity_implementation silent_toy(void) {
    cpparity_implementation silent = toy;
    silent.name = "toy-silent";
    silent.estimate = NULL;
    return silent;
}

/* --- a suite on disk ----------------------------------------------------------------------------
 */

/* No padding, packing or windows: no discrimination rerun, so an item is the largest part. */
static const char suite_text[] =
    "defaults:\n"
    "  model: {vocab_size: 300, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,\n"
    "          num_key_value_heads: 2, head_dim: 8, intermediate_size: 48}\n"
    "  seq_len: 64\n"
    "  rows: [{documents: [64]}, {documents: [64]}]\n"
    "  dtypes: [f32]\n"
    "  seed: 5\n"
    "cases:\n"
    "  - name: small\n"
    "    cp: [2]\n";

typedef struct toy_suite {
    char folder[64];
    char path[128];
    run_options options;
    run_plan plan;
} toy_suite;

/* Writes the suite and builds its plan (2 local ranks' worth of items), limit max_memory. */
static void suite_build(toy_suite *suite, int64_t max_memory) {
    memset(suite, 0, sizeof *suite);
    test_write_suite(suite->folder, sizeof suite->folder, suite->path, sizeof suite->path,
                     suite_text);
    suite->options.suites[0] = suite->path;
    suite->options.suite_count = 1;
    suite->options.store = RUN_STORE_FAILURES;
    suite->options.comm = "local";
    suite->options.device = "cpu";
    suite->options.max_memory = max_memory;
    cpparity_error error;
    cr_assert_eq(run_plan_build(&suite->plan, &suite->options, &error), CPPARITY_OK, "%s",
                 error.message);
}

static void suite_remove(toy_suite *suite) {
    run_plan_free(&suite->plan);
    unlink(suite->path);
    rmdir(suite->folder);
}

static memory_setting setting_for(const cpparity_implementation *implementation) {
    memory_setting setting;
    memset(&setting, 0, sizeof setting);
    setting.implementation = implementation;
    setting.ranks = 2;
    setting.store = RUN_STORE_FAILURES;
    setting.fault = CPPARITY_FAULT_NONE;
    return setting;
}

/* The estimate of the suite's case at cp 2 under setting. */
static memory_item item_of(const toy_suite *suite, const memory_setting *setting) {
    memory_item item;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_item(suite->plan.cases[0], 2, CPPARITY_DTYPE_F32,
                                   CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES, setting, &item, what,
                                   sizeof what),
              "%s", what);
    return item;
}

/* --- the implementation's share -----------------------------------------------------------------
 */

Test(declared_estimate, toy_implementation__moves_the_item_by_exactly_what_it_declares) {
    toy_suite suite;
    suite_build(&suite, TIB);
    const memory_setting setting = setting_for(&toy);
    toy_overflows = false;
    toy_bytes = 0;
    const memory_item none = item_of(&suite, &setting);
    toy_bytes = 12345 * MIB + 7;
    const memory_item declared = item_of(&suite, &setting);
    cr_expect_eq(declared.implementation - none.implementation, toy_bytes,
                 "the rank's estimate moves by %lld, the toy declares %lld",
                 (long long)(declared.implementation - none.implementation), (long long)toy_bytes);
    cr_expect_eq(declared.implementation_own, toy_bytes);
    cr_expect(declared.implementation_known);
    cr_expect_eq(declared.reference, none.reference, "the reference is not the toy's");
    cr_expect_eq(declared.baseline, none.baseline);
    cr_expect_eq(declared.judging, none.judging);

    /* what the toy was asked: the case's sizes, the item's cp and dtype, the default kernel */
    const cpparity_case *c = suite.plan.cases[0];
    cr_expect_eq(toy_asked.config, &c->model);
    cr_expect_eq(toy_asked.batch, c->batch_size);
    cr_expect_eq(toy_asked.seq_len, c->seq_len);
    cr_expect_eq(toy_asked.cp, 2);
    cr_expect_eq(toy_asked.dtype, CPPARITY_DTYPE_F32);
    cr_expect_eq(toy_asked.kernel, kernel_registry_find("cpu-f32"));
    cr_expect(toy_asked.fault == CPPARITY_FAULT_NONE && !toy_asked.every_fault);
    cr_expect(!toy_asked.comm_on_device && !toy_asked.comm_gathers_reduce, "local ranks");
    memory_setting mpi = setting;
    mpi.ranks_are_processes = true;
    mpi.selftest = true;
    (void)item_of(&suite, &mpi);
    cr_expect(toy_asked.comm_gathers_reduce && toy_asked.every_fault, "mpi, selftest");

    /* without an estimate: the harness's share alone, and it says so */
    const cpparity_implementation toy_silent = silent_toy();
    const memory_setting silent = setting_for(&toy_silent);
    const memory_item unknown = item_of(&suite, &silent);
    cr_expect(!unknown.implementation_known);
    cr_expect_eq(unknown.implementation_own, 0);
    cr_expect_eq(unknown.implementation, none.implementation, "only what the harness gives");
    suite_remove(&suite);
}

Test(declared_estimate, huge_declared_estimate__refuses_the_case_naming_the_implementation) {
    toy_suite suite;
    suite_build(&suite, GIB);
    toy_overflows = false;
    toy_bytes = TIB;
    cpparity_error error;
    cr_assert_eq(memory_check_plan(&suite.plan, &suite.options, &toy, NULL, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "case 'small': cp ") != NULL &&
                  strstr(error.message, "needs about ") != NULL &&
                  strstr(error.message, "(toy-model's own 1.0 TiB)") != NULL &&
                  strstr(error.message, "but the limit is 1.0 GiB (--max-memory)") != NULL,
              "%s", error.message);
    toy_bytes = MIB; /* the same case with a modest toy fits */
    cr_expect_eq(memory_check_plan(&suite.plan, &suite.options, &toy, NULL, &error), CPPARITY_OK,
                 "%s", error.message);
    suite_remove(&suite);
}

Test(declared_estimate, overflow_reported_by_the_implementation__is_a_refusal_naming_it) {
    toy_suite suite;
    suite_build(&suite, TIB);
    toy_overflows = true;
    cpparity_error error;
    cr_assert_eq(memory_check_plan(&suite.plan, &suite.options, &toy, NULL, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "its sizes overflow") != NULL &&
                  strstr(error.message, "the toy-model implementation's estimate: the toy's "
                                        "tensors of 2^70 floats") != NULL,
              "%s", error.message);
    toy_overflows = false;
    suite_remove(&suite);
}

Test(declared_estimate, no_estimate__refusal_and_list_say_the_share_is_unknown) {
    const cpparity_implementation toy_silent = silent_toy();
    toy_suite suite;
    suite_build(&suite, MIB);
    cpparity_error error;
    cr_assert_eq(memory_check_plan(&suite.plan, &suite.options, &toy_silent, NULL, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "(toy-silent's own share unknown: it declares no estimate)") !=
                  NULL,
              "%s", error.message);
    int64_t silent_bytes = 0, cpu_bytes = 0;
    bool known = true;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_case(suite.plan.cases[0], &toy_silent, &silent_bytes, &known, what,
                                   sizeof what));
    cr_expect(!known, "list marks the figure as a lower bound");
    cr_assert(memory_estimate_case(suite.plan.cases[0], &cpparity_cpu_implementation, &cpu_bytes,
                                   &known, what, sizeof what));
    cr_expect(known);
    cr_expect_lt(silent_bytes, cpu_bytes, "the cpu implementation's own share is counted");
    suite_remove(&suite);
}

/* --- the kernel's workspace ---------------------------------------------------------------------
 */

static int64_t declared_workspace(void *context, const cpparity_attention_dims *dims) {
    (void)context;
    return 1000 * dims->batch * dims->seq_len; /* 1000 bytes a token */
}

static int64_t overflowing_workspace(void *context, const cpparity_attention_dims *dims) {
    (void)context, (void)dims;
    return -1;
}

Test(declared_estimate, kernel_workspace__read_only_where_struct_size_covers_it) {
    cpparity_attention_kernel kernel = *cpparity_cpu_f32_kernel();
    kernel.workspace_bytes = declared_workspace;
    const cpparity_attention_dims dims = {2, 64, 4, 2, 8};
    int64_t bytes = -7;
    cr_assert(kernel_workspace_bytes(&kernel, &dims, &bytes));
    cr_expect_eq(bytes, 1000 * 2 * 64);
    /* an older ABI 2 descriptor ends before workspace_bytes: whatever lies there is not read */
    kernel.struct_size = (uint32_t)CPPARITY_KERNEL_ABI2_STRUCT_SIZE;
    cr_assert(kernel_workspace_bytes(&kernel, &dims, &bytes));
    cr_expect_eq(bytes, 0);
    kernel.struct_size = sizeof kernel;
    kernel.workspace_bytes = overflowing_workspace;
    cr_expect(!kernel_workspace_bytes(&kernel, &dims, &bytes), "-1: the figure overflows");
    kernel.workspace_bytes = NULL;
    cr_assert(kernel_workspace_bytes(&kernel, &dims, &bytes));
    cr_expect_eq(bytes, 0);
    cr_assert(kernel_workspace_bytes(cpparity_cpu_f32_kernel(), &dims, &bytes));
    /* cpu-f32, the larger of its two passes. Forward: an accumulator of Dh floats and an
     * online-softmax state (two floats) for each of the 4 heads × 32 rows of a query tile, two
     * rows' tile sums and two tiles of 32 rows (Dh floats each). Backward: three 32 × 32 tables
     * of floats and one of bytes, five tiles of 32 rows, and δ for the 4 × 32 rows. */
    const int64_t forward = (4 * 32 * (8 + 2) + (2 + 2 * 32) * 8) * (int64_t)sizeof(float);
    const int64_t backward = (3 * 32 * 32 + 5 * 32 * 8 + 4 * 32) * (int64_t)sizeof(float) + 32 * 32;
    cr_expect_eq(bytes, forward > backward ? forward : backward, "cpu-f32: %lld bytes",
                 (long long)bytes);
}

Test(declared_estimate, older_abi2_descriptor__is_registered) {
    static cpparity_attention_kernel older;
    older = *cpparity_cpu_f32_kernel();
    older.name = "test-older-abi2";
    older.abi_version = 2u; /* an ABI 2 plugin built before workspace_bytes */
    older.struct_size = (uint32_t)CPPARITY_KERNEL_ABI2_STRUCT_SIZE;
    cpparity_error error;
    cr_expect_eq(kernel_registry_add(&older, &error), CPPARITY_OK, "%s", error.message);
    older.name = "test-too-small";
    older.struct_size = (uint32_t)CPPARITY_KERNEL_ABI2_STRUCT_SIZE - 8;
    cr_expect_eq(kernel_registry_add(&older, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "smaller than ABI 2") != NULL, "%s", error.message);
}

Test(declared_estimate, kernel_workspace__reaches_the_cpu_implementations_figure) {
    toy_suite suite;
    suite_build(&suite, TIB);
    const cpparity_case *c = suite.plan.cases[0];
    static cpparity_attention_kernel declaring;
    declaring = *cpparity_cpu_f32_kernel();
    declaring.workspace_bytes = declared_workspace;
    memory_setting setting = setting_for(&cpparity_cpu_implementation);
    const memory_item built_in = item_of(&suite, &setting);
    setting.kernel = &declaring;
    const memory_item declared = item_of(&suite, &setting);
    /* the cpu implementation calls the kernel on the gathered sequence: B × S tokens here */
    /* at cp 2 each rank's call holds half the heads (Ulysses' all-to-all) */
    const cpparity_attention_dims dims = {c->batch_size, c->seq_len,
                                          c->model.num_attention_heads / 2,
                                          c->model.num_key_value_heads / 2, c->model.head_dim};
    int64_t own = 0; /* what cpu-f32 itself declares for these sizes */
    cr_assert(kernel_workspace_bytes(cpparity_cpu_f32_kernel(), &dims, &own));
    const int64_t expected = 1000 * c->batch_size * c->seq_len - own;
    cr_expect_eq(declared.implementation - built_in.implementation, expected, "%lld, expected %lld",
                 (long long)(declared.implementation - built_in.implementation),
                 (long long)expected);
    suite_remove(&suite);
}
