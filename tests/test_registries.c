/*
 * test_registries.c — the seams the harness chooses from by name: the kernel registry (built-in
 * kernels, adding one, refusing broken ones), the implementation registry (by device) and the
 * communicator backends (by name, detection).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/comm/comm_launch.h"
#include "distributed/models/implementation_registry.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_call.h"
#include "distributed/kernels/kernel_support.h"

/* A kernel that is never called: registration only looks at the descriptor. */
static int never_forward(void *context, void *out, float *lse, const void *q, const void *k,
                         const void *v, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, float scale, void *stream,
                         char *error, size_t capacity) {
    (void)context, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)mask, (void)dims;
    (void)scale, (void)stream, (void)error, (void)capacity;
    return 1;
}

static int never_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                          const void *q, const void *k, const void *v, const void *out,
                          const float *lse, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale, void *stream,
                          char *error, size_t capacity) {
    (void)context, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v;
    (void)out, (void)lse, (void)mask, (void)dims, (void)scale, (void)stream, (void)error;
    (void)capacity;
    return 1;
}

/* A well-formed descriptor called name (copied into a static slot: the registry borrows it). */
static cpparity_attention_kernel test_kernel(const char *name) {
    cpparity_attention_kernel kernel = {
        .abi_version = 2u, /* whole-sequence calls only: nothing of ABI 3 to fill */
        .struct_size = sizeof(cpparity_attention_kernel),
        .name = name,
        .version = "0",
        .device = CPPARITY_KERNEL_DEVICE_CPU,
        .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
        .deterministic = 1,
        .forward = never_forward,
        .backward = never_backward,
    };
    return kernel;
}

Test(kernel_registry, built_in__cpu_f32_first__found_by_name) {
    cr_assert_geq(kernel_registry_count(), 1);
    cr_assert_eq(kernel_registry_at(0), cpparity_cpu_f32_kernel());
    cr_assert_eq(kernel_registry_find("cpu-f32"), cpparity_cpu_f32_kernel());
    cr_assert_null(kernel_registry_find("no-such-kernel"));
    cr_assert_null(kernel_registry_at(-1));
    cr_assert_null(kernel_registry_at(kernel_registry_count()));
    cr_assert_str_eq(kernel_device_name(cpparity_cpu_f32_kernel()), "cpu");
}

Test(kernel_registry, deterministic__declared_by_the_capability_bit_alone) {
    /* ABI 1's field says one thing, the capability bit another: the bit decides, both ways */
    cpparity_attention_kernel field_only = test_kernel("field-only");
    field_only.deterministic = 1;
    field_only.capabilities =
        CPPARITY_KERNEL_SUPPORTS_ALL & ~CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC;
    cr_assert(!kernel_declares_deterministic(&field_only));
    cpparity_attention_kernel bit_only = test_kernel("bit-only");
    bit_only.deterministic = 0;
    bit_only.capabilities = CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC;
    cr_assert(kernel_declares_deterministic(&bit_only));
    cr_assert(kernel_declares_deterministic(cpparity_cpu_f32_kernel()), "built-ins declare it");
}

Test(kernel_registry, add__valid_kernel__listed_after_built_in_and_found) {
    static cpparity_attention_kernel added;
    added = test_kernel("test-added");
    const int before = kernel_registry_count();
    cpparity_error error;
    cr_assert_eq(kernel_registry_add(&added, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(kernel_registry_count(), before + 1);
    cr_assert_eq(kernel_registry_at(before), &added);
    cr_assert_eq(kernel_registry_find("test-added"), &added);
}

Test(kernel_registry, add__broken_descriptors__input_errors_naming_why) {
    static cpparity_attention_kernel kernels[5];
    const char *expected[5] = {"ABI version", "already registered", "needs a name", "needs a name",
                               "device"};
    kernels[0] = test_kernel("test-old-abi");
    kernels[0].abi_version = CPPARITY_KERNEL_ABI_VERSION + 1;
    kernels[1] = test_kernel("cpu-f32"); /* the built-in kernel's name */
    kernels[2] = test_kernel("");
    kernels[3] = test_kernel("test-no-backward");
    kernels[3].backward = NULL;
    kernels[4] = test_kernel("test-bad-device");
    kernels[4].device = 7;
    const int before = kernel_registry_count();
    for (int i = 0; i < 5; i++) {
        cpparity_error error;
        cpparity_error_clear(&error);
        cr_assert_eq(kernel_registry_add(&kernels[i], &error), CPPARITY_ERROR_INPUT, "kernel %d",
                     i);
        cr_assert(strstr(error.message, expected[i]) != NULL, "kernel %d: %s", i, error.message);
    }
    cpparity_error error;
    cr_assert_eq(kernel_registry_add(NULL, &error), CPPARITY_ERROR_INPUT);
    cr_assert_eq(kernel_registry_count(), before, "a refused kernel was registered");
}

/* A block call that is never called either (ABI 3's forward_block and backward_block). */
static int never_forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                               const void *v, const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims,
                               const cpparity_attention_block *block, float scale, void *stream,
                               char *error, size_t capacity) {
    (void)block;
    return never_forward(context, out, lse, q, k, v, mask, dims, scale, stream, error, capacity);
}

static int never_backward_block(void *context, void *dq, void *dk, void *dv, const void *dout,
                                const void *q, const void *k, const void *v, const void *out,
                                const float *lse, const cpparity_mask_description *mask,
                                const cpparity_attention_dims *dims,
                                const cpparity_attention_block *block, float scale, void *stream,
                                char *error, size_t capacity) {
    (void)block;
    return never_backward(context, dq, dk, dv, dout, q, k, v, out, lse, mask, dims, scale, stream,
                          error, capacity);
}

Test(kernel_registry, add__abi3_without_block_calls__accepted_as_whole_sequence_only) {
    /* an ABI 2 source recompiled against today's kernel.h: abi_version the header's, struct_size
     * its sizeof, forward_block and backward_block left NULL (optional at ABI 3) */
    static cpparity_attention_kernel recompiled;
    recompiled = test_kernel("test-abi3-no-blocks");
    recompiled.abi_version = CPPARITY_KERNEL_ABI_VERSION;
    cr_assert_eq(CPPARITY_KERNEL_ABI_VERSION, 3u, "update this test for the new ABI version");
    cr_assert_null(recompiled.forward_block);
    cr_assert_null(recompiled.backward_block);
    cpparity_error error;
    cpparity_error_clear(&error);
    cr_assert_eq(kernel_registry_add(&recompiled, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_eq(kernel_registry_find("test-abi3-no-blocks"), &recompiled);
    cr_assert_not(kernel_has_block_calls(&recompiled), "both NULL: no block calls, like ABI 2");
    /* with both set it has them; the built-in kernels do */
    cpparity_attention_kernel both = recompiled;
    both.forward_block = never_forward_block;
    both.backward_block = never_backward_block;
    cr_assert(kernel_has_block_calls(&both));
    cr_assert(kernel_has_block_calls(cpparity_cpu_f32_kernel()));
}

Test(kernel_registry, add__abi3_with_one_block_call__refused_naming_the_missing_one) {
    static cpparity_attention_kernel kernels[3];
    const char *expected[3] = {"sets forward_block but not backward_block",
                               "sets backward_block but not forward_block", "smaller than ABI 3's"};
    for (int i = 0; i < 3; i++) {
        kernels[i] = test_kernel(i == 0   ? "test-abi3-forward-block-only"
                                 : i == 1 ? "test-abi3-backward-block-only"
                                          : "test-abi3-too-short");
        kernels[i].abi_version = CPPARITY_KERNEL_ABI_VERSION;
    }
    kernels[0].forward_block = never_forward_block;
    kernels[1].backward_block = never_backward_block;
    /* an ABI 3 descriptor ends with its (optional) block calls: it must have room for them */
    kernels[2].struct_size = (uint32_t)CPPARITY_KERNEL_ABI2_STRUCT_SIZE;
    const int before = kernel_registry_count();
    for (int i = 0; i < 3; i++) {
        cpparity_error error;
        cpparity_error_clear(&error);
        cr_assert_eq(kernel_registry_add(&kernels[i], &error), CPPARITY_ERROR_INPUT, "kernel %d",
                     i);
        cr_assert(strstr(error.message, expected[i]) != NULL, "kernel %d: %s", i, error.message);
        cr_assert(strstr(error.message, "ABI 2") == NULL, "kernel %d: %s", i, error.message);
    }
    cr_assert_eq(kernel_registry_count(), before, "a refused kernel was registered");
}

Test(kernel_registry, add__until_full__refused_with_the_capacity) {
    static cpparity_attention_kernel kernels[KERNEL_REGISTRY_CAPACITY];
    static char names[KERNEL_REGISTRY_CAPACITY][32];
    cpparity_error error;
    int added = 0;
    for (int i = 0; i < KERNEL_REGISTRY_CAPACITY; i++) {
        snprintf(names[i], sizeof names[i], "test-fill-%d", i);
        kernels[i] = test_kernel(names[i]);
        if (kernel_registry_add(&kernels[i], &error) != CPPARITY_OK) {
            cr_assert(strstr(error.message, "full") != NULL, "%s", error.message);
            break;
        }
        added++;
    }
    cr_assert_eq(kernel_registry_count(), KERNEL_REGISTRY_CAPACITY);
    cr_assert_lt(added, KERNEL_REGISTRY_CAPACITY, "the built-in kernels take slots too");
}

Test(implementation_registry, cpu__found_by_device__describes_itself) {
    const cpparity_implementation *cpu = implementation_registry_for_device("cpu");
    cr_assert_eq(cpu, &cpparity_cpu_implementation);
    cr_assert_str_eq(cpu->device, "cpu");
    cr_assert(cpu->dtypes[CPPARITY_DTYPE_F32]);
    cr_assert(cpu->dtypes[CPPARITY_DTYPE_BF16], "bf16 storage runs on the CPU implementation");
    cr_assert_not_null(kernel_registry_find(cpu->default_kernel));
    cr_assert_null(implementation_registry_for_device("tpu"));
    cr_assert_null(implementation_registry_for_device(NULL));
    for (int i = 0; i < implementation_registry_count(); i++) {
        const cpparity_implementation *implementation = implementation_registry_at(i);
        cr_assert(implementation->check && implementation->create &&
                      implementation->load_parameters && implementation->forward &&
                      implementation->backward && implementation->read_loss &&
                      implementation->read_logits && implementation->gradient_count &&
                      implementation->gradient_name && implementation->read_gradient &&
                      implementation->destroy,
                  "implementation %s lacks a function", implementation->name);
    }
}

Test(comm_backends, local_always__mpi_when_built__detected_from_the_environment) {
    const cpparity_comm_backend *local = comm_backend_find("local");
    cr_assert_not_null(local);
    cr_assert_not(local->ranks_from_launcher);
    cr_assert_null(comm_backend_find("carrier-pigeon"));
    const cpparity_comm_backend *mpi = comm_backend_find("mpi");
#ifdef CPPARITY_TEST_HAVE_MPI
    cr_assert_not_null(mpi, "built with MPI but no mpi backend");
    cr_assert(mpi->ranks_from_launcher);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    unsetenv("PMIX_RANK");
    cr_assert_eq(comm_backend_detect(), local);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    cr_assert_eq(comm_backend_detect(), mpi, "mpirun's environment must select mpi");
    unsetenv("OMPI_COMM_WORLD_SIZE");
#else
    cr_assert_null(mpi);
    cr_assert_eq(comm_backend_detect(), local);
#endif
}

/* The job of comm_local_launch: each rank returns its own exit code. */
static int rank_code(cpparity_comm *world, void *argument) {
    (void)argument;
    return world->rank == 2 ? 1 : 0;
}

Test(comm_backends, local_launch__largest_exit_code_of_the_ranks) {
    const cpparity_comm_backend *local = comm_backend_find("local");
    int code = -1;
    cpparity_error error;
    cr_assert_eq(local->launch(4, 10.0, rank_code, NULL, &code, &error), CPPARITY_OK, "%s",
                 error.message);
    cr_assert_eq(code, 1, "rank 2's code 1 must win over the others' 0");
    cr_assert_eq(local->launch(0, 10.0, rank_code, NULL, &code, &error), CPPARITY_ERROR_INPUT);
}

/* The threading contract (include/cpparity/kernel.h): a kernel that does not declare
 * CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS is never inside two calls at once, whichever threads
 * call it; one that does may be. The kernel below counts the calls it is inside and sleeps a
 * little in each, so overlapping calls, when allowed, are all but certain. */
static atomic_int inside, most_inside;

static int counting_forward(void *context, void *out, float *lse, const void *q, const void *k,
                            const void *v, const cpparity_mask_description *mask,
                            const cpparity_attention_dims *dims, float scale, void *stream,
                            char *error, size_t capacity) {
    (void)context, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)mask, (void)dims;
    (void)scale, (void)stream, (void)error, (void)capacity;
    const int now = atomic_fetch_add(&inside, 1) + 1;
    for (int seen = atomic_load(&most_inside); now > seen;) {
        atomic_compare_exchange_weak(&most_inside, &seen, now);
    }
    nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL); /* 2 ms inside the call */
    atomic_fetch_sub(&inside, 1);
    return 0;
}

static void *call_forward(void *argument) {
    const cpparity_attention_kernel *kernel = argument;
    const cpparity_attention_dims dims = {1, 1, 1, 1, 1};
    float out[1], lse[1];
    char message[128];
    for (int call = 0; call < 5; call++) {
        kernel_call_forward(kernel, out, lse, NULL, NULL, NULL, NULL, &dims, 1.0f, message,
                            sizeof message);
    }
    return NULL;
}

/* The most calls of kernel seen at once when 4 threads call it 5 times each. */
static int most_at_once(const cpparity_attention_kernel *kernel) {
    atomic_store(&inside, 0);
    atomic_store(&most_inside, 0);
    pthread_t threads[4];
    for (int t = 0; t < 4; t++) {
        cr_assert_eq(pthread_create(&threads[t], NULL, call_forward, (void *)kernel), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
    }
    return atomic_load(&most_inside);
}

Test(kernel_call, threading_contract__serialised_unless_concurrent_calls_declared) {
    static cpparity_attention_kernel serial, concurrent; /* the registry's built-in check reads
                                                            only addresses */
    serial = test_kernel("serial");
    serial.forward = counting_forward;
    serial.capabilities = CPPARITY_KERNEL_SUPPORTS_ALL & ~CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS;
    cr_assert_eq(most_at_once(&serial), 1, "calls of a kernel without the bit overlapped");
    concurrent = serial;
    concurrent.capabilities = CPPARITY_KERNEL_SUPPORTS_ALL;
    /* 4 threads, 2 ms inside each call: overlapping unless something serialises them */
    cr_assert_gt(most_at_once(&concurrent), 1,
                 "a kernel declaring concurrent calls was serialised");
}
