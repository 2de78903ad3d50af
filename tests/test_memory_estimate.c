/*
 * test_memory_estimate.c — the memory estimate of a run (harness/running/memory_estimate.h):
 * --max-memory's sizes, the memory this machine has (MemAvailable and cgroup limits, from fake
 * files), the estimate of each part against what the code really allocates (every malloc of this
 * program is counted, below), the job's rounds, and the refusal memory_check_plan gives.
 */
#define _GNU_SOURCE /* malloc_usable_size */
#include <cblas.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/batch.h"
#include "distributed/comm/comm_local.h"
#include "distributed/models/implementation.h"
#include "distributed/models/model_memory.h"
#include "distributed/kernels/kernel_cpu.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_cache.h"
#include "fixtures/parameter_fixture.h"
#include "harness/judging/naive_attention.h"
#include "harness/judging/reference_cache.h"
#include "reference/threads.h"
#include "harness/running/memory_estimate.h"
#include "harness/running/run.h"
#include "harness/running/run_item.h"
#include "harness/running/reference_team_comm.h"
#include "harness/running/run_plan.h"
#include "reference/model.h"
#include "tests/support/test_files.h"
#include "tests/support/test_models.h"

/* contiguous Ulysses: the algorithm these estimates are made for */
#define ULYSSES ((cpparity_algorithm_choice){CPPARITY_ALGORITHM_ULYSSES, 0, 0})

#define TIMEOUT 60.0 /* seconds: never reached by a passing test */
#define MIB ((int64_t)1 << 20)
#define GIB ((int64_t)1 << 30)

/* --- counting every allocation ---------------------------------------------------------------- */

/* AddressSanitizer replaces malloc itself: the sanitized copy cannot count, and skips. */
#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNTING 0
#endif
#endif
#ifndef COUNTING
#define COUNTING 1
#endif

static _Atomic int64_t live_bytes, peak_bytes;

#if COUNTING
/* glibc's allocator under its own names: these wrappers replace malloc, calloc, realloc and
 * free for the whole program (glibc supports replacing them) and count the usable bytes. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static void grow(int64_t bytes) {
    const int64_t now = atomic_fetch_add(&live_bytes, bytes) + bytes;
    int64_t seen = atomic_load(&peak_bytes);
    while (now > seen && !atomic_compare_exchange_weak(&peak_bytes, &seen, now)) {
    }
}

void *malloc(size_t size) {
    void *made = __libc_malloc(size);
    if (made != NULL) {
        grow((int64_t)malloc_usable_size(made));
    }
    return made;
}

void *calloc(size_t count, size_t size) {
    void *made = __libc_calloc(count, size);
    if (made != NULL) {
        grow((int64_t)malloc_usable_size(made));
    }
    return made;
}

void *realloc(void *pointer, size_t size) {
    const int64_t before = pointer != NULL ? (int64_t)malloc_usable_size(pointer) : 0;
    void *made = __libc_realloc(pointer, size);
    if (made != NULL) {
        grow((int64_t)malloc_usable_size(made) - before);
    } else if (size == 0) {
        grow(-before);
    }
    return made;
}

/* The reference's per-thread scratch is aligned (reference/parallel.c). */
void *aligned_alloc(size_t alignment, size_t size) {
    void *made = __libc_memalign(alignment, size);
    if (made != NULL) {
        grow((int64_t)malloc_usable_size(made));
    }
    return made;
}

void *memalign(size_t alignment, size_t size) {
    return aligned_alloc(alignment, size);
}

int posix_memalign(void **pointer, size_t alignment, size_t size) {
    void *made = aligned_alloc(alignment, size);
    if (made == NULL) {
        return ENOMEM;
    }
    *pointer = made;
    return 0;
}

void free(void *pointer) {
    if (pointer != NULL) {
        atomic_fetch_sub(&live_bytes, (int64_t)malloc_usable_size(pointer));
    }
    __libc_free(pointer);
}
#endif

/* Skips a test that counts allocations where they cannot be counted; call it first. */
static void require_counting(void) {
    if (!COUNTING) {
        cr_skip_test("AddressSanitizer replaces malloc: allocations cannot be counted here (the "
                     "plain copy of this test counts them)");
    }
}

/* Starts a measurement: the peak restarts from what is live now, which is returned. */
static int64_t measure_start(void) {
    openblas_set_num_threads(1); /* as cpparity run does: threaded sgemm mallocs per call */
    const int64_t now = atomic_load(&live_bytes);
    atomic_store(&peak_bytes, now);
    return now;
}

/* What the code measured since measure_start allocated at most on top of what was live. */
static int64_t measure_peak(int64_t start) {
    return atomic_load(&peak_bytes) - start;
}

/* The estimate of a part may exceed the measured peak by at most 5 %: the parts are the code's
 * own sizes, summed phase by phase, and the only slack is where the estimate takes a bound (a
 * phase's largest buffer, every reference thread's scratch); measured here within 0.3 %. It may
 * fall short by at most 32 KiB: what it leaves out on purpose does not grow with the sizes here —
 * small structs and the allocator's rounding of every block (16 bytes for a small one, up to a
 * 4 KiB page for the few large ones, which are mapped); measured here at most 14.4 KiB. */
#define OVER_FRACTION 0.05
#define UNDER_BYTES (32 * 1024)

/* expect_close, the estimate allowed `over` bytes more on top (a bound the test says why). */
static void expect_close_over(const char *what, int64_t estimate, int64_t measured, int64_t over) {
    cr_log_info("%s: estimate %lld B, allocated at most %lld B (ratio %.3f)", what,
                (long long)estimate, (long long)measured, (double)estimate / (double)measured);
    cr_expect(estimate >= measured - UNDER_BYTES,
              "%s: the estimate %lld B is under the %lld B really allocated", what,
              (long long)estimate, (long long)measured);
    cr_expect(estimate <= (int64_t)((1.0 + OVER_FRACTION) * (double)measured) + UNDER_BYTES + over,
              "%s: the estimate %lld B is far over the %lld B really allocated", what,
              (long long)estimate, (long long)measured);
}

static void expect_close(const char *what, int64_t estimate, int64_t measured) {
    expect_close_over(what, estimate, measured, 0);
}

/* --- a suite on disk ------------------------------------------------------------------------ */

/* Sizes where the arrays dominate (MiB) and the untracked bits (KiB) do not: padding, packing,
 * a sliding and a chunked layer (block lists, chunk ids), GQA, and cp 2. */
#define MEDIUM_DEFAULTS                                                                            \
    "defaults:\n"                                                                                  \
    "  model: {vocab_size: 300, hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 4,\n"  \
    "          num_key_value_heads: 2, head_dim: 8, intermediate_size: 48,\n"                      \
    "          layer_types: [full_attention, sliding_attention, chunked_attention],\n"             \
    "          sliding_window: 9, attention_chunk_size: 16}\n"                                     \
    "  seq_len: 96\n"                                                                              \
    "  rows:\n"                                                                                    \
    "    - {left_padding: 5, documents: [40, 51]}\n"                                               \
    "    - {documents: [90], right_padding: 6}\n"                                                  \
    "  dtypes: [f32]\n"                                                                            \
    "  seed: 5\n"

static const char medium_suite[] =
    MEDIUM_DEFAULTS "cases:\n"
                    "  - name: medium\n"
                    "    cp: [2]\n"
                    "  - name: wide\n"
                    "    model: {hidden_size: 64, intermediate_size: 96, vocab_size: 500}\n"
                    "    cp: [1]\n";

typedef struct planned_suite {
    char folder[64];
    char path[128];
    run_options options;
    run_plan plan;
} planned_suite;

/* Writes text as a suite and builds its plan on local ranks, with max_memory (1 TiB when 0) and
 * only the cases pattern matches (every case when NULL). */
static cpparity_status plan_cases(planned_suite *suite, const char *text, int64_t max_memory,
                                  const char *pattern, cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    test_write_suite(suite->folder, sizeof suite->folder, suite->path, sizeof suite->path, text);
    suite->options.suites[0] = suite->path;
    suite->options.suite_count = 1;
    if (pattern != NULL) {
        suite->options.patterns[0] = pattern;
        suite->options.pattern_count = 1;
    }
    suite->options.store = RUN_STORE_FAILURES;
    suite->options.timeout_seconds = TIMEOUT;
    suite->options.comm = "local";
    suite->options.device = "cpu";
    suite->options.max_memory = max_memory > 0 ? max_memory : (int64_t)1 << 40;
    cpparity_status status = run_plan_build(&suite->plan, &suite->options, error);
    if (status == CPPARITY_OK) { /* as command_run.c does, on the cpu implementation */
        status = memory_check_plan(&suite->plan, &suite->options, &cpparity_cpu_implementation,
                                   NULL, error);
        if (status != CPPARITY_OK) {
            run_plan_free(&suite->plan);
        }
    }
    return status;
}

static cpparity_status plan_suite(planned_suite *suite, const char *text, int64_t max_memory,
                                  cpparity_error *error) {
    return plan_cases(suite, text, max_memory, NULL, error);
}

static void suite_remove(planned_suite *suite) {
    unlink(suite->path);
    rmdir(suite->folder);
}

static memory_setting local_setting(int64_t ranks) {
    memory_setting setting;
    memset(&setting, 0, sizeof setting);
    setting.implementation = &cpparity_cpu_implementation;
    setting.ranks = ranks;
    setting.store = RUN_STORE_FAILURES;
    setting.fault = CPPARITY_FAULT_NONE;
    return setting;
}

/* --- sizes in text -------------------------------------------------------------------------- */

Test(memory_size, flags_values__parse_as_multiples_of_1024) {
    const struct {
        const char *text;
        int64_t bytes;
    } good[] = {
        {"4096", 4096},
        {"1", 1},
        {"512M", 512 * MIB},
        {"24G", 24 * GIB},
        {"1.5GiB", GIB + GIB / 2},
        {"2gb", 2 * GIB},
        {"0.5K", 512},
        {"3KiB", 3072},
        {"7b", 7},
        {"1T", GIB * 1024},
        {"2P", GIB * 1024 * 1024 * 2},
        {"2.25m", 2 * MIB + MIB / 4},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        int64_t bytes = -1;
        cr_expect(memory_size_parse(good[i].text, &bytes), "'%s' must parse", good[i].text);
        cr_expect_eq(bytes, good[i].bytes, "'%s': %lld bytes, expected %lld", good[i].text,
                     (long long)bytes, (long long)good[i].bytes);
    }
}

Test(memory_size, bad_values__are_refused) {
    const char *bad[] = {"",
                         "G",
                         "-1",
                         "0",
                         "0.4",
                         "1.",
                         ".5G",
                         "1.5x",
                         "1GG",
                         "1 G",
                         "1Gi",
                         "1iB",
                         "8E",
                         "inf",
                         "nan",
                         "0x10",
                         "1e3",
                         "9000P",
                         "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t bytes = 42;
        cr_expect(!memory_size_parse(bad[i], &bytes), "'%s' must be refused", bad[i]);
        cr_expect_eq(bytes, 42, "'%s': a refused value leaves the result alone", bad[i]);
    }
    int64_t bytes = 0;
    cr_expect(!memory_size_parse(NULL, &bytes));
}

Test(memory_size, format__picks_the_unit) {
    char text[32];
    memory_size_format(17, text, sizeof text);
    cr_expect_str_eq(text, "17 B");
    memory_size_format(1024, text, sizeof text);
    cr_expect_str_eq(text, "1.0 KiB");
    memory_size_format(GIB + GIB / 2, text, sizeof text);
    cr_expect_str_eq(text, "1.5 GiB");
    memory_size_format(INT64_MAX, text, sizeof text);
    cr_expect_str_eq(text, "8.0 EiB");
}

/* --- the memory this machine has ------------------------------------------------------------ */

/* Writes root + path (creating its folders) with text. */
static void fake_file(const char *root, const char *path, const char *text) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", root, path);
    for (char *slash = strchr(full + strlen(root) + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(full, 0755);
        *slash = '/';
    }
    FILE *file = fopen(full, "w");
    cr_assert_not_null(file, "%s", full);
    fputs(text, file);
    fclose(file);
}

static void remove_tree(const char *root) {
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    cr_assert_eq(system(command), 0);
}

static const char meminfo[] = "MemTotal:       33554432 kB\n"
                              "MemFree:         1048576 kB\n"
                              "MemAvailable:   16777216 kB\n"; /* 16 GiB */

Test(memory_available, meminfo_alone__gives_mem_available) {
    char root[64], source[MEMORY_TEXT];
    test_make_folder(root, sizeof root);
    fake_file(root, "/proc/meminfo", meminfo);
    int64_t bytes = 0;
    cr_assert(memory_available(root, &bytes, source, sizeof source));
    cr_expect_eq(bytes, 16 * GIB);
    cr_expect_str_eq(source, "MemAvailable of this machine");
    remove_tree(root);
}

Test(memory_available, without_meminfo__is_unknown) {
    char root[64], source[MEMORY_TEXT];
    test_make_folder(root, sizeof root);
    int64_t bytes = 0;
    cr_expect(!memory_available(root, &bytes, source, sizeof source));
    remove_tree(root);
}

Test(memory_available, cgroup_v2_limit__leaves_max_minus_current) {
    char root[64], source[MEMORY_TEXT];
    test_make_folder(root, sizeof root);
    fake_file(root, "/proc/meminfo", meminfo);
    fake_file(root, "/proc/self/cgroup", "0::/job/step\n");
    fake_file(root, "/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
    fake_file(root, "/sys/fs/cgroup/job/step/memory.max", "max\n");
    fake_file(root, "/sys/fs/cgroup/job/step/memory.current", "1073741824\n");
    fake_file(root, "/sys/fs/cgroup/job/memory.max", "4294967296\n"); /* the parent: 4 GiB */
    fake_file(root, "/sys/fs/cgroup/job/memory.current", "1073741824\n");
    int64_t bytes = 0;
    cr_assert(memory_available(root, &bytes, source, sizeof source));
    cr_expect_eq(bytes, 3 * GIB, "the parent's limit less its use: %lld", (long long)bytes);
    cr_expect(strstr(source, "memory.max - memory.current") != NULL &&
                  strstr(source, "/sys/fs/cgroup/job") != NULL,
              "%s", source);
    /* no limit anywhere: MemAvailable */
    fake_file(root, "/sys/fs/cgroup/job/memory.max", "max\n");
    cr_assert(memory_available(root, &bytes, source, sizeof source));
    cr_expect_eq(bytes, 16 * GIB);
    remove_tree(root);
}

Test(memory_available, cgroup_v2_hybrid_and_v1__smallest_room_wins) {
    char root[64], source[MEMORY_TEXT];
    test_make_folder(root, sizeof root);
    fake_file(root, "/proc/meminfo", meminfo);
    fake_file(root, "/proc/self/cgroup",
              "9:name=systemd:/\n4:cpu,memory:/docker/abc\n0::/docker/abc\n");
    /* hybrid: v2 under unified/ without a limit; v1 memory limit 2 GiB, 512 MiB used */
    fake_file(root, "/sys/fs/cgroup/unified/docker/abc/memory.max", "max\n");
    fake_file(root, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
    fake_file(root, "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "536870912\n");
    int64_t bytes = 0;
    cr_assert(memory_available(root, &bytes, source, sizeof source));
    cr_expect_eq(bytes, GIB + GIB / 2, "%lld", (long long)bytes);
    cr_expect(strstr(source, "memory.limit_in_bytes") != NULL, "%s", source);
    /* v1's "no limit" (2^63 rounded down to a page) is no limit */
    fake_file(root, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
              "9223372036854771712\n");
    cr_assert(memory_available(root, &bytes, source, sizeof source));
    cr_expect_eq(bytes, 16 * GIB);
    cr_expect_str_eq(source, "MemAvailable of this machine");
    remove_tree(root);
}

Test(memory_limit, given_or_default__says_where_it_came_from) {
    char root[64];
    test_make_folder(root, sizeof root);
    fake_file(root, "/proc/meminfo", meminfo); /* 16 GiB available */
    memory_limit limit;
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    memory_limit_resolve(24 * GIB, true, root, &limit);
    cr_expect_eq(limit.bytes, 24 * GIB, "--max-memory is per process, never divided");
    cr_expect_str_eq(limit.source, "--max-memory");
    memory_limit_resolve(0, true, root, &limit);
    cr_expect_eq(limit.bytes, 4 * GIB, "MPI: the node's memory shared by its 4 ranks");
    cr_expect_str_eq(limit.source, "--max-memory not given; default: MemAvailable of this machine "
                                   "/ 4 node-local MPI ranks (OMPI_COMM_WORLD_LOCAL_SIZE)");
    memory_limit_resolve(0, false, root, &limit);
    cr_expect_eq(limit.bytes, 16 * GIB, "local ranks share one process: nothing to divide");
    cr_expect_str_eq(limit.source, "--max-memory not given; default: MemAvailable of this machine");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    setenv("MPI_LOCALNRANKS", "2", 1); /* MPICH's name */
    memory_limit_resolve(0, true, root, &limit);
    cr_expect_eq(limit.bytes, 8 * GIB);
    unsetenv("MPI_LOCALNRANKS");
    memory_limit_resolve(0, true, root, &limit);
    cr_expect_eq(limit.bytes, 16 * GIB, "no node-local count known: the whole machine");
    remove_tree(root);
    memory_limit_resolve(0, false, "/nonexistent-root", &limit);
    cr_expect_eq(limit.bytes, INT64_MAX, "no MemAvailable and no --max-memory: no limit");
    cr_expect(strstr(limit.source, "could not be read") != NULL, "%s", limit.source);
}

/* --- each part against what the code allocates ---------------------------------------------- */

/* --- the cuda implementation's pinned staging -------------------------------------------------
 * Its host memory cannot be counted here (no GPU, and the CUDA runtime's own is not counted), so
 * its one large host buffer is checked against the sizes model_cuda.cu's allocate() gives it: a
 * host communicator adds exactly 4 bytes × the largest host collective, which a communicator on
 * the device (nccl) does not stage. */

/* The cuda estimate of one rank for algorithm at cp ranks, staged or on the device. */
static int64_t cuda_estimate(const cpparity_model_config *config, int64_t batch, int64_t seq_len,
                             int64_t cp, cpparity_algorithm_choice algorithm, bool on_device) {
    const cpparity_implementation_estimate setup = {.config = config,
                                                    .batch = batch,
                                                    .seq_len = seq_len,
                                                    .cp = cp,
                                                    .dtype = CPPARITY_DTYPE_F32,
                                                    .layout = CPPARITY_LAYOUT_CONTIGUOUS,
                                                    .algorithm = algorithm,
                                                    .comm_on_device = on_device};
    int64_t bytes = 0;
    cpparity_error error;
    int64_t kept = 0;
    cr_assert_eq(model_memory_cuda(&setup, &bytes, &kept, &error), CPPARITY_OK, "%s",
                 error.message);
    return bytes;
}

Test(memory_estimate, cuda_staging__holds_the_largest_host_collective_of_each_algorithm) {
    /* H = Hkv = 8 heads of 16 over a width of 8: the attention tensors dwarf the ~9k parameters,
     * so the staging is an attention collective, and the ring's block (k, v, dk, dv with every kv
     * head) outgrows the Ulysses all-to-all */
    cpparity_model_config config = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    config.num_attention_heads = 8;
    config.num_key_value_heads = 8;
    config.head_dim = 16;
    cpparity_error error;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_OK, "%s", error.message);
    const int64_t B = 2, S = 1024, H = 8, Hkv = 8, Dh = 16;
    const struct {
        int64_t cp;
        cpparity_algorithm_choice algorithm;
        int64_t floats; /* model_cuda.cu's host_staging_count */
    } expected[] = {
        /* Ulysses: an all-to-all's send and receive, 2·Nl·max(H, cp)·Dh with Nl = B·S/2 */
        {2, ULYSSES, 2 * (B * S / 2) * H * Dh},
        /* ring: k, v, dk, dv of the rank's L = S/2 rows, sent and received: 8·B·L·Hkv·Dh */
        {2, (cpparity_algorithm_choice){CPPARITY_ALGORITHM_RING, 0, 0}, 8 * B * (S / 2) * Hkv * Dh},
        /* hybrid 2x2: the ring's members hold U·L = 2·S/4 rows and Hkv/U heads, larger than the
         * pair's all-to-all 2·(B·S/4)·H·Dh */
        {4, (cpparity_algorithm_choice){CPPARITY_ALGORITHM_HYBRID, 2, 2},
         8 * B * (2 * S / 4) * (Hkv / 2) * Dh},
    };
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        const int64_t staged =
            cuda_estimate(&config, B, S, expected[i].cp, expected[i].algorithm, false);
        const int64_t on_device =
            cuda_estimate(&config, B, S, expected[i].cp, expected[i].algorithm, true);
        cr_expect_eq(staged - on_device, 4 * expected[i].floats,
                     "case %zu: the staging adds %lld bytes, model_cuda.cu allocates %lld", i,
                     (long long)(staged - on_device), (long long)(4 * expected[i].floats));
    }
}

Test(memory_estimate, reference_baseline_and_rerun__are_what_they_allocate) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const cpparity_case *c = suite.plan.cases[0];
    const memory_setting setting = local_setting(2);
    memory_item item;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_item(c, 1, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES,
                                   &setting, &item, what, sizeof what),
              "%s", what);

    reference_cache cache = {0};
    const reference_outputs *outputs = NULL;
    int computed = 0;
    const int64_t before = measure_start();
    cr_assert_eq(reference_cache_get(&cache, 0, c, c->seed, &outputs, &computed, &error),
                 CPPARITY_OK, "%s", error.message);
    expect_close("the float64 reference", item.reference, measure_peak(before));

    double seconds = 0.0;
    const int64_t cached = measure_start();
    cr_assert_eq(reference_cache_get_with_naive(&cache, 0, c, c->seed, CPPARITY_DTYPE_F32, &outputs,
                                                &seconds, &error),
                 CPPARITY_OK, "%s", error.message);
    expect_close("the naive baseline", item.baseline, measure_peak(cached));
    expect_close("the cache's outputs", item.reference_kept + item.baseline_kept,
                 atomic_load(&live_bytes) - before);
    reference_cache_free(&cache);

    /* discrimination.c: the batch and a reference model, forward and backward */
    const int64_t rerun = measure_start();
    cpparity_batch batch = {0};
    reference_model model = {0};
    cr_assert_eq(fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                     c->model.vocab_size, c->seed, &error),
                 CPPARITY_OK);
    cr_assert_eq(reference_model_init(&model, &c->model, c->batch_size, c->seq_len, &error),
                 CPPARITY_OK);
    fixture_fill_parameters(model.parameters, &model.parameter_table, c->seed);
    model.mask_features_off = REFERENCE_WITHOUT_DOCUMENTS;
    cr_assert_eq(reference_model_forward(&model, &batch, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(reference_model_backward(&model, &batch, &error), CPPARITY_OK, "%s",
                 error.message);
    expect_close("the discrimination rerun", item.discrimination, measure_peak(rerun));
    reference_model_free(&model);
    cpparity_batch_free(&batch);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* A reference spread over local ranks (run.c spread_references): rank 0 keeps it in its cache,
 * the others share the work. */
typedef struct spread_job {
    const cpparity_case *c;
    reference_cache cache; /* rank 0's */
} spread_job;

static cpparity_status spread_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_job *job = argument;
    const reference_team team = reference_team_of_comm(comm);
    if (comm->rank != 0) {
        return reference_outputs_share(job->c, job->c->seed, &team, error);
    }
    job->cache.team = &team;
    const reference_outputs *outputs = NULL;
    int computed = 0;
    const cpparity_status status =
        reference_cache_get(&job->cache, 0, job->c, job->c->seed, &outputs, &computed, error);
    job->cache.team = NULL;
    return status;
}

/* What body allocates at most on `ranks` local ranks, each of which must succeed. The ranks run
 * in step (every exchange is a collective): their peaks add up. */
static int64_t measure_spread(int ranks, comm_local_body body, spread_job *job) {
    cpparity_status statuses[3];
    cpparity_error error;
    const int64_t before = measure_start();
    cr_assert_eq(comm_local_run(ranks, TIMEOUT, body, job, statuses, NULL, &error), CPPARITY_OK,
                 "%s", error.message);
    const int64_t measured = measure_peak(before);
    for (int r = 0; r < ranks; r++) {
        cr_assert_eq(statuses[r], CPPARITY_OK);
    }
    return measured;
}

Test(memory_estimate, a_reference_spread_over_local_ranks__is_what_its_ranks_allocate) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const cpparity_case *c = suite.plan.cases[0];
    for (int ranks = 2; ranks <= 3; ranks++) {
        const memory_setting setting = local_setting(ranks);
        memory_item item;
        char what[MEMORY_TEXT];
        cr_assert(memory_estimate_item(c, 1, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS,
                                       ULYSSES, &setting, &item, what, sizeof what),
                  "%s", what);
        cr_assert(run_spreads_reference(c, ranks, true)); /* processes: spread */
        cr_assert(!run_spreads_reference(c, ranks, false), "local ranks keep it on one rank");
        spread_job job = {.c = c};
        const int64_t measured = measure_spread(ranks, spread_body, &job);
        char name[64];
        snprintf(name, sizeof name, "the reference spread over %d local ranks", ranks);
        expect_close(name, item.reference_spread_all, measured);
        cr_expect_lt(item.reference_spread, item.reference,
                     "a rank's share %lld B is not under one process's %lld B",
                     (long long)item.reference_spread, (long long)item.reference);
        reference_cache_free(&job.cache);
    }
    cr_expect(!run_spreads_reference(c, 1, true), "one rank computes the reference alone");
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* The naive baseline spread over local ranks after its reference (run.c spread_baselines): rank
 * 0 keeps it in its cache beside the reference. */
static cpparity_status baseline_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_job *job = argument;
    const reference_team team = reference_team_of_comm(comm);
    if (comm->rank != 0) {
        return reference_naive_share(job->c, job->c->seed, CPPARITY_DTYPE_F32, &team, error);
    }
    return reference_cache_spread_naive(&job->cache, 0, job->c, job->c->seed, CPPARITY_DTYPE_F32,
                                        &team, error);
}

Test(memory_estimate, a_baseline_spread_over_local_ranks__is_what_its_ranks_allocate) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const cpparity_case *c = suite.plan.cases[0];
    for (int ranks = 2; ranks <= 3; ranks++) {
        const memory_setting setting = local_setting(ranks);
        memory_item item;
        char what[MEMORY_TEXT];
        cr_assert(memory_estimate_item(c, 1, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS,
                                       ULYSSES, &setting, &item, what, sizeof what),
                  "%s", what);
        spread_job job = {.c = c};
        const reference_outputs *outputs = NULL;
        int computed = 0;
        cr_assert_eq(reference_cache_get(&job.cache, 0, c, c->seed, &outputs, &computed, &error),
                     CPPARITY_OK, "%s", error.message);
        const int64_t measured = measure_spread(ranks, baseline_body, &job);
        char name[64];
        snprintf(name, sizeof name, "the naive baseline spread over %d local ranks", ranks);
        /* over by 5 % as every part, and by at most each rank's per-thread scratch (the naive
         * attention's, which holds a product's 320 KiB: naive_attention.c, naive_products.c):
         * the estimate bounds it with every thread, but a rank's products here (weight bands of
         * 256 rows of 32 inputs, one batch row's attention) have fewer work items than
         * threads, so fewer threads allocate it. A fixed amount per thread, which grows with
         * the sizes only through the attention's one 64 × S score table */
        const int64_t thread_scratch =
            naive_attention_memory(c->batch_size, c->seq_len, c->model.head_dim, 1) -
            naive_attention_memory(c->batch_size, c->seq_len, c->model.head_dim, 0);
        const int64_t scratch = (int64_t)ranks * reference_threads() *
                                (thread_scratch > 320 * 1024 ? thread_scratch : 320 * 1024);
        expect_close_over(name, item.baseline_spread_all, measured, scratch);
        cr_expect_lt(item.baseline_spread, item.baseline,
                     "a rank's share %lld B is not under one process's %lld B",
                     (long long)item.baseline_spread, (long long)item.baseline);
        reference_cache_free(&job.cache);
    }
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* One item on local ranks with the reference already cached (run_item_execute). */
typedef struct item_job {
    run_plan *plan;
    const run_options *options;
    int64_t index;
    reference_cache *cache;
    run_item item; /* rank 0's verdict */
} item_job;

static cpparity_status item_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    item_job *job = argument;
    const run_target target = {&cpparity_cpu_implementation, cpparity_cpu_f32_kernel(),
                               CPPARITY_FAULT_NONE};
    baseline_table baselines = {0};
    run_item item;
    cpparity_status status = run_item_execute(comm, 0, job->plan, job->index, job->options, &target,
                                              &baselines, job->cache, &item, error);
    if (comm->rank == 0) {
        job->item = item;
    }
    return status;
}

static void free_tensors(run_item *item) {
    for (int64_t t = 0; t < item->tensor_count; t++) {
        free(item->tensors[t].values);
        free(item->tensors[t].reference);
    }
    free(item->tensors);
}

/* Runs plan item `index` on its cp local ranks with the reference already cached, and checks that
 * the item's estimate is what it allocated at its peak. */
static void expect_item_close(planned_suite *suite, int64_t index) {
    const run_plan_item *planned = &suite->plan.items[index];
    const cpparity_case *c = suite->plan.cases[planned->case_index];
    const int64_t cp = planned->cp;
    cpparity_error error;
    run_plan_set_ranks(&suite->plan, (int)cp, &cpparity_cpu_implementation);
    memory_setting setting = local_setting(cp);
    reference_cache cache = {0};
    double seconds = 0.0;
    const reference_outputs *outputs = NULL;
    cr_assert_eq(reference_cache_get_with_naive(&cache, planned->case_index, c, c->seed,
                                                CPPARITY_DTYPE_F32, &outputs, &seconds, &error),
                 CPPARITY_OK);
    /* metrics only: an item at cp > 1 runs without the cp = 1 errors of a whole pass, so its
     * CP-only check fails, and --store failures would then keep its tensors */
    run_options options = suite->options;
    options.store = RUN_STORE_METRICS;
    setting.store = RUN_STORE_METRICS;
    item_job job = {.plan = &suite->plan, .options = &options, .index = index, .cache = &cache};
    memory_item item;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_item(c, cp, CPPARITY_DTYPE_F32, planned->layout, planned->algorithm,
                                   &setting, &item, what, sizeof what),
              "%s", what);
    cpparity_status statuses[8];
    cr_assert_leq(cp, 8);
    fixture_parameter_cache_clear(); /* an earlier item's copy would hide this one's */
    const int64_t before = measure_start();
    cr_assert_eq(comm_local_run((int)cp, TIMEOUT, item_body, &job, statuses, NULL, &error),
                 CPPARITY_OK, "%s", error.message);
    const int64_t measured = measure_peak(before);
    cr_assert_eq(statuses[0], CPPARITY_OK);
    cr_expect(job.item.outcome == (cp == 1 ? RUN_PASS : RUN_FAIL), "cp %lld: %s", (long long)cp,
              job.item.message);
    /* the ranks compute, then the root judges with every rank's outputs still held; the
     * process keeps one copy of the weights for the next item */
    const int64_t computing = cp * item.implementation + item.parameter_cache;
    const int64_t judging =
        cp * item.rank_outputs + item.judging + item.stored + item.parameter_cache;
    char label[128];
    snprintf(label, sizeof label, "an item at cp %lld, %s layout, %s", (long long)cp,
             cpparity_layout_name(planned->layout),
             planned->algorithm.kind == CPPARITY_ALGORITHM_ULYSSES ? "ulysses"
             : planned->algorithm.kind == CPPARITY_ALGORITHM_RING  ? "ring"
                                                                   : "hybrid");
    cr_log_info("%s: computing %lld judging %lld (rank_outputs %lld, implementation %lld own %lld "
                "kept %lld)",
                label, (long long)computing, (long long)judging, (long long)item.rank_outputs,
                (long long)item.implementation, (long long)item.implementation_own,
                (long long)item.implementation_kept);
    expect_close(label, computing > judging ? computing : judging, measured);
    free_tensors(&job.item);
    reference_cache_free(&cache);
}

Test(memory_estimate, implementation_and_judging__are_what_an_item_allocates) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    for (int64_t cp = 1; cp <= 2; cp++) {
        int64_t index = -1;
        for (int64_t i = 0; i < suite.plan.item_count; i++) {
            if (suite.plan.items[i].case_index == 0 && suite.plan.items[i].cp == cp) {
                index = i;
            }
        }
        cr_assert_geq(index, 0);
        expect_item_close(&suite, index);
    }
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* The medium case under ring attention (ring.c's buffers and row lists, the ring's tokens) on
 * both layouts at cp 2 and 4, and under hybrid 2x2 at cp 4 (a ring member holds its Ulysses
 * pair's rows: twice the ring's buffers per head, half the heads). */
static const char ring_suite[] = MEDIUM_DEFAULTS "cases:\n"
                                                 "  - name: ring\n"
                                                 "    cp: [2, 4]\n"
                                                 "    layouts: [contiguous, zigzag]\n"
                                                 "    algorithms: [ring, hybrid:2x2]\n";

Test(memory_estimate, ring_and_hybrid_items__are_what_they_allocate) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, ring_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    int measured[CPPARITY_ALGORITHM_COUNT] = {0};
    for (int64_t i = 0; i < suite.plan.item_count; i++) {
        if (suite.plan.items[i].cp > 1) {
            expect_item_close(&suite, i);
            measured[suite.plan.items[i].algorithm.kind]++;
        }
    }
    /* ring at cp 2 and 4 on both layouts; hybrid 2x2 at cp 4 on both */
    cr_expect_eq(measured[CPPARITY_ALGORITHM_RING], 4);
    cr_expect_eq(measured[CPPARITY_ALGORITHM_HYBRID], 2);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* A whole pass (run.c run_pass) on local ranks, each with its own cache. */
typedef struct pass_job {
    run_plan *plan;
    const run_options *options;
    run_results results; /* rank 0's */
    int64_t computed[4]; /* each rank's cache: references computed there (as the team's rank 0) */
    int64_t shared[4];   /* and shares of other ranks' references */
} pass_job;

static cpparity_status pass_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    pass_job *job = argument;
    const run_target target = {&cpparity_cpu_implementation, cpparity_cpu_f32_kernel(),
                               CPPARITY_FAULT_NONE};
    reference_cache cache = {0};
    run_results mine;
    memset(&mine, 0, sizeof mine);
    cpparity_status status = run_pass(comm, job->plan, job->options, &target, &cache, false,
                                      comm->rank == 0 ? &job->results : &mine, error);
    job->computed[comm->rank] = cache.computed;
    job->shared[comm->rank] = cache.shared;
    run_results_free(&mine);
    reference_cache_free(&cache);
    return status;
}

Test(memory_estimate, a_pass_on_two_local_ranks__stays_within_the_job_estimate) {
    require_counting();
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    run_plan_set_ranks(&suite.plan, 2, &cpparity_cpu_implementation);
    memory_setting setting = local_setting(2);
    setting.selftest = true; /* a pass alone: no discrimination phase */
    memory_total totals[8];
    memory_discrimination discrimination;
    int64_t overflow = -1;
    char what[MEMORY_TEXT];
    cr_assert_leq(suite.plan.item_count, 8);
    cr_assert_eq(memory_estimate_job(suite.plan.cases, suite.plan.case_count, suite.plan.items,
                                     suite.plan.item_count, &setting, totals, &discrimination,
                                     &overflow, what, sizeof what, &error),
                 CPPARITY_OK);
    int64_t estimate = 0;
    for (int64_t i = 0; i < suite.plan.item_count; i++) {
        estimate = totals[i].bytes > estimate ? totals[i].bytes : estimate;
    }
    pass_job job = {.plan = &suite.plan, .options = &suite.options};
    cpparity_status statuses[2];
    const int64_t before = measure_start();
    cr_assert_eq(comm_local_run(2, TIMEOUT, pass_body, &job, statuses, NULL, &error), CPPARITY_OK);
    const int64_t measured = measure_peak(before);
    cr_assert(statuses[0] == CPPARITY_OK && statuses[1] == CPPARITY_OK);
    for (int64_t i = 0; i < job.results.item_count; i++) {
        cr_expect_eq(job.results.items[i].outcome, RUN_PASS, "%s", job.results.items[i].message);
    }
    cr_log_info("a pass: job estimate %lld B, allocated at most %lld B (ratio %.3f)",
                (long long)estimate, (long long)measured, (double)estimate / (double)measured);
    cr_expect(estimate >= measured - UNDER_BYTES,
              "the job estimate %lld B is under the %lld B "
              "the pass allocated",
              (long long)estimate, (long long)measured);
    /* at most 2×: the estimate lets every concurrent item peak at once (the two cases' cp = 1
     * items with their references, an upper bound), which the threads rarely do */
    cr_expect(estimate <= 2 * measured,
              "the job estimate %lld B is over twice the %lld B the "
              "pass allocated",
              (long long)estimate, (long long)measured);
    run_results_free(&job.results);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* run.c spread_references: local ranks share one process, so they do not spread the reference
 * (run_plan.h run_spreads_reference): each case's home rank (its index modulo the ranks)
 * computes it alone and shares in none (mpi/run-spreads-the-reference checks the spread). */
Test(run_pass, two_local_ranks__keep_each_reference_on_its_home_rank) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    run_plan_set_ranks(&suite.plan, 2, &cpparity_cpu_implementation);
    cr_assert_eq(suite.plan.case_count, 2);
    pass_job job = {.plan = &suite.plan, .options = &suite.options};
    cpparity_status statuses[2];
    cr_assert_eq(comm_local_run(2, TIMEOUT, pass_body, &job, statuses, NULL, &error), CPPARITY_OK);
    cr_assert(statuses[0] == CPPARITY_OK && statuses[1] == CPPARITY_OK);
    for (int64_t i = 0; i < job.results.item_count; i++) {
        cr_expect_eq(job.results.items[i].outcome, RUN_PASS, "%s", job.results.items[i].message);
    }
    /* case 0 ("medium") is rank 0's, case 1 ("wide") rank 1's: each computed once, alone */
    for (int rank = 0; rank < 2; rank++) {
        cr_expect_eq(job.computed[rank], 1, "rank %d computed %lld references", rank,
                     (long long)job.computed[rank]);
        cr_expect_eq(job.shared[rank], 0, "rank %d shared in %lld other references", rank,
                     (long long)job.shared[rank]);
    }
    run_results_free(&job.results);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* --- the job's rounds ----------------------------------------------------------------------- */

/* The plan index of case `name` at cp. */
static int64_t item_of(const run_plan *plan, const char *name, int64_t cp) {
    for (int64_t i = 0; i < plan->item_count; i++) {
        if (strcmp(plan->cases[plan->items[i].case_index]->name, name) == 0 &&
            plan->items[i].cp == cp) {
            return i;
        }
    }
    cr_assert_fail("no item %s at cp %lld", name, (long long)cp);
    return -1;
}

static void estimate_job(const run_plan *plan, const memory_setting *setting, memory_total *totals,
                         memory_discrimination *discrimination) {
    int64_t overflow = -1;
    char what[MEMORY_TEXT];
    cpparity_error error;
    cr_assert_eq(memory_estimate_job(plan->cases, plan->case_count, plan->items, plan->item_count,
                                     setting, totals, discrimination, &overflow, what, sizeof what,
                                     &error),
                 CPPARITY_OK);
    cr_assert_eq(overflow, -1, "%s", what);
}

Test(memory_job, concurrent_groups_add_up_in_one_process__not_across_processes) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const run_plan *plan = &suite.plan;
    const int64_t medium_1 = item_of(plan, "medium", 1), medium_2 = item_of(plan, "medium", 2);
    const int64_t wide_1 = item_of(plan, "wide", 1);
    memory_setting setting = local_setting(2);
    memory_item wide;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_item(plan->cases[1], 1, CPPARITY_DTYPE_F32,
                                   CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES, &setting, &wide, what,
                                   sizeof what));
    const int64_t wide_alone = wide.reference + wide.implementation; /* at least its own peak */
    memory_total totals[8];
    memory_discrimination discrimination;

    /* local: cases 0 and 1 have home ranks 0 and 1, so their cp = 1 items share round 0 */
    estimate_job(plan, &setting, totals, &discrimination);
    cr_expect(totals[medium_1].planned && totals[medium_2].planned && totals[wide_1].planned);
    cr_expect_gt(totals[medium_1].reference, 0, "the first item computes the reference");
    cr_expect_eq(totals[medium_2].reference, 0, "later items find it cached");
    cr_expect_geq(totals[medium_1].others, wide_alone,
                  "wide runs beside medium in one process: %lld < %lld",
                  (long long)totals[medium_1].others, (long long)wide_alone);
    memory_item medium;
    cr_assert(memory_estimate_item(plan->cases[0], 2, CPPARITY_DTYPE_F32,
                                   CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES, &setting, &medium, what,
                                   sizeof what));
    cr_expect_geq(totals[medium_2].others, medium.reference_kept + medium.baseline_kept,
                  "cp 2 runs beside the cached outputs of its case");
    cr_expect_eq(totals[medium_2].ranks, 2, "both ranks of the group are threads here");
    cr_expect_geq(discrimination.case_index, 0, "padding and windows: a discrimination rerun");

    /* MPI: each rank its own process; wide's round-0 item is in another process */
    setting.ranks_are_processes = true;
    estimate_job(plan, &setting, totals, &discrimination);
    cr_expect_lt(totals[medium_1].others, wide_alone, "other processes are not counted: %lld",
                 (long long)totals[medium_1].others);
    cr_expect_eq(totals[medium_2].ranks, 1);

    /* one local rank: cp 2 is not planned; a selftest has no discrimination */
    setting = local_setting(1);
    setting.selftest = true;
    estimate_job(plan, &setting, totals, &discrimination);
    cr_expect(!totals[medium_2].planned && totals[medium_2].bytes == 0);
    cr_expect_eq(discrimination.case_index, -1);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

Test(memory_job, faults_and_store_all__add_their_buffers) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const cpparity_case *c = suite.plan.cases[0];
    memory_setting setting = local_setting(2);
    memory_item clean, faulty, stored;
    char what[MEMORY_TEXT];
    cr_assert(memory_estimate_item(c, 2, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES,
                                   &setting, &clean, what, sizeof what));
    setting.fault = CPPARITY_FAULT_STALE_RANK_SLICE;
    cr_assert(memory_estimate_item(c, 2, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES,
                                   &setting, &faulty, what, sizeof what));
    const int64_t logits = c->batch_size * (c->seq_len / 2) * c->model.vocab_size;
    cr_expect_geq(faulty.implementation, clean.implementation + 4 * logits,
                  "stale-rank-slice keeps a copy of the slice");
    cr_expect_gt(faulty.stored, clean.stored, "--store failures keeps the failing tensors");
    setting.fault = CPPARITY_FAULT_NONE;
    setting.store = RUN_STORE_ALL;
    cr_assert(memory_estimate_item(c, 2, CPPARITY_DTYPE_F32, CPPARITY_LAYOUT_CONTIGUOUS, ULYSSES,
                                   &setting, &stored, what, sizeof what));
    cr_expect_geq(stored.stored, clean.stored + 12 * 2 * logits,
                  "--store all keeps every rank's logits with their float64 reference");
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

/* --- refusals ------------------------------------------------------------------------------- */

static const char huge_suite[] =
    "defaults:\n"
    "  model: {vocab_size: 16, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2,\n"
    "          num_key_value_heads: 2, head_dim: 4, intermediate_size: 8}\n"
    "  cp: [1]\n"
    "cases:\n"
    "  - name: long-sequence\n"
    "    seq_len: 1000000000\n"
    "    rows: [{documents: [1000000000]}]\n"
    "  - name: overflowing-vocabulary\n"
    "    model: {vocab_size: 4611686018427387904}\n"
    "    seq_len: 4\n"
    "    rows: [{documents: [4]}]\n";

Test(memory_plan, over_the_limit__is_refused_with_the_case_estimate_and_limit) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, MIB, &error), CPPARITY_ERROR_INPUT);
    char where[160];
    snprintf(where, sizeof where, "%s:", suite.path);
    cr_expect(strstr(error.message, where) == error.message, "names the file: %s", error.message);
    cr_expect(strstr(error.message, "case '") && strstr(error.message, "needs about ") &&
                  strstr(error.message, " per process (") &&
                  strstr(error.message, "but the limit is 1.0 MiB (--max-memory)"),
              "%s", error.message);
    suite_remove(&suite);
    cr_assert_eq(plan_suite(&suite, medium_suite, GIB, &error), CPPARITY_OK, "%s", error.message);
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}

Test(memory_plan, sizes_that_overflow_or_cannot_fit__are_refused_naming_the_case) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, huge_suite, 0, &error), CPPARITY_ERROR_INPUT);
    cr_expect(
        strstr(error.message, "case 'overflowing-vocabulary': cp 1 f32: its sizes overflow") &&
            strstr(error.message, "model.embed_tokens.weight"),
        "%s", error.message);
    suite_remove(&suite);
    /* 1e9 tokens fit int64, but their activations alone (some 130 float64 values a token in the
     * reference) are terabytes */
    cr_assert_eq(plan_cases(&suite, huge_suite, (int64_t)1 << 40, "long-sequence", &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "case 'long-sequence': cp 1 f32 needs about ") &&
                  strstr(error.message, "TiB per process (reference ") &&
                  strstr(error.message, "but the limit is 1.0 TiB (--max-memory)"),
              "%s", error.message);
    suite_remove(&suite);
}

Test(memory_case, list_estimate__is_the_largest_item_or_an_overflow) {
    planned_suite suite;
    cpparity_error error;
    cr_assert_eq(plan_suite(&suite, medium_suite, 0, &error), CPPARITY_OK, "%s", error.message);
    const cpparity_case *c = suite.plan.cases[0];
    int64_t bytes = 0;
    char what[MEMORY_TEXT];
    bool known = false;
    cr_assert(
        memory_estimate_case(c, &cpparity_cpu_implementation, &bytes, &known, what, sizeof what),
        "%s", what);
    cr_expect(known, "the cpu implementation declares its estimate");
    /* alone on 2 local ranks (its least rank count): the largest item of that job */
    memory_setting setting = local_setting(2);
    run_plan_item items[RUN_PLAN_CASE_ITEMS];
    memory_total totals[RUN_PLAN_CASE_ITEMS];
    memory_discrimination discrimination;
    int64_t overflow = -1;
    const int64_t count = run_plan_case_items(c, 0, &suite.options, items);
    cr_assert_eq(memory_estimate_job(&c, 1, items, count, &setting, totals, &discrimination,
                                     &overflow, what, sizeof what, &error),
                 CPPARITY_OK);
    int64_t largest = discrimination.bytes;
    for (int64_t i = 0; i < count; i++) {
        largest = totals[i].bytes > largest ? totals[i].bytes : largest;
    }
    cr_expect_eq(bytes, largest);
    cr_expect_gt(bytes, MIB, "medium holds MiBs");
    run_plan_free(&suite.plan);
    suite_remove(&suite);
}
