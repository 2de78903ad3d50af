/* kernel_registry.c — attention kernels by name (see kernel_registry.h). */
#include "distributed/kernels/kernel_registry.h"

#include "distributed/kernels/kernel_cpu.h"
#ifdef CPPARITY_HAVE_CUDA_KERNELS
#include "distributed/kernels/kernel_cuda.h"
#endif

#include <pthread.h>
#include <stddef.h>
#include <string.h>

/* The built-in kernels, registered before anything else. */
static const cpparity_attention_kernel *(*const built_in[])(void) = {
    cpparity_cpu_f32_kernel,
    cpparity_cpu_f32_small_tile_kernel,
    cpparity_cpu_f32_plain_loops_kernel,
#ifdef CPPARITY_HAVE_CUDA_KERNELS /* built with CUDA: distributed/kernels/kernel_cuda.cu */
    cpparity_cuda_f32_kernel,
    cpparity_cuda_bf16_kernel,
#endif
};

static const cpparity_attention_kernel *registered[KERNEL_REGISTRY_CAPACITY];
static int registered_count;
static pthread_once_t built_in_once = PTHREAD_ONCE_INIT;

/* Puts the built-in kernels first (run once, through pthread_once). */
static void add_built_in(void) {
    for (size_t i = 0; i < sizeof built_in / sizeof *built_in; i++) {
        registered[registered_count++] = built_in[i]();
    }
}

/* Makes sure the built-in kernels are registered, whichever thread asks first. */
static void register_built_in(void) {
    pthread_once(&built_in_once, add_built_in);
}

int kernel_registry_count(void) {
    register_built_in();
    return registered_count;
}

const cpparity_attention_kernel *kernel_registry_at(int index) {
    register_built_in();
    return index >= 0 && index < registered_count ? registered[index] : NULL;
}

const cpparity_attention_kernel *kernel_registry_find(const char *name) {
    register_built_in();
    for (int i = 0; name != NULL && i < registered_count; i++) {
        if (strcmp(registered[i]->name, name) == 0) {
            return registered[i];
        }
    }
    return NULL;
}

bool kernel_registry_is_built_in(const cpparity_attention_kernel *kernel) {
    for (size_t i = 0; i < sizeof built_in / sizeof *built_in; i++) {
        if (built_in[i]() == kernel) {
            return true;
        }
    }
    return false;
}

const char *kernel_device_name(const cpparity_attention_kernel *kernel) {
    if (kernel == NULL) {
        return "unknown";
    }
    return kernel->device == CPPARITY_KERNEL_DEVICE_CPU    ? "cpu"
           : kernel->device == CPPARITY_KERNEL_DEVICE_CUDA ? "cuda"
                                                           : "unknown";
}

cpparity_status kernel_registry_add(const cpparity_attention_kernel *kernel,
                                    cpparity_error *error) {
    register_built_in();
    if (kernel == NULL || kernel->name == NULL || kernel->name[0] == '\0' ||
        kernel->forward == NULL || kernel->backward == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: a kernel needs a name, forward and backward");
    }
    if (kernel->abi_version < CPPARITY_KERNEL_ABI_OLDEST ||
        kernel->abi_version > CPPARITY_KERNEL_ABI_VERSION) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: kernel %s speaks ABI version %u, this cpparity "
                                  "speaks %u to %u",
                                  kernel->name, kernel->abi_version, CPPARITY_KERNEL_ABI_OLDEST,
                                  CPPARITY_KERNEL_ABI_VERSION);
    }
    /* ABI 3's block calls are optional (an ABI 2 source recompiled against today's kernel.h
     * leaves both NULL: whole-sequence calls only, kernel_has_block_calls false), but come in
     * pairs, and an ABI 3 descriptor has room for them */
    if (kernel->abi_version >= 3u && kernel->struct_size < CPPARITY_KERNEL_ABI3_STRUCT_SIZE) {
        return cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "kernel registry: kernel %s speaks ABI 3 but declares struct_size %u, smaller than "
            "ABI 3's %zu (which ends with forward_block and backward_block)",
            kernel->name, kernel->struct_size, (size_t)CPPARITY_KERNEL_ABI3_STRUCT_SIZE);
    }
    if (kernel->abi_version >= 3u &&
        (kernel->forward_block == NULL) != (kernel->backward_block == NULL)) {
        return cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "kernel registry: kernel %s speaks ABI 3 and sets %s but not %s (block calls are "
            "optional: both, or neither for whole-sequence calls only)",
            kernel->name, kernel->forward_block != NULL ? "forward_block" : "backward_block",
            kernel->forward_block != NULL ? "backward_block" : "forward_block");
    }
    /* fields appended to ABI 2 later (workspace_bytes) are optional: read where struct_size
     * covers them (kernel_support.h) */
    if (kernel->struct_size < CPPARITY_KERNEL_ABI2_STRUCT_SIZE) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: kernel %s declares struct_size %u, smaller "
                                  "than ABI %u's %zu (built against an older cpparity/kernel.h?)",
                                  kernel->name, kernel->struct_size, CPPARITY_KERNEL_ABI_OLDEST,
                                  (size_t)CPPARITY_KERNEL_ABI2_STRUCT_SIZE);
    }
    if ((kernel->capabilities & ~CPPARITY_KERNEL_CAPABILITY_BITS) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: kernel %s declares capability bits 0x%x "
                                  "unknown to ABI %u",
                                  kernel->name,
                                  kernel->capabilities & ~CPPARITY_KERNEL_CAPABILITY_BITS,
                                  kernel->abi_version);
    }
    if (kernel->head_dim_count < 0 || kernel->head_dim_count > 64 ||
        (kernel->head_dim_count > 0 && kernel->head_dims == NULL)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: kernel %s declares %d head dims%s (0 to 64 "
                                  "expected, listed in head_dims)",
                                  kernel->name, (int)kernel->head_dim_count,
                                  kernel->head_dims == NULL ? " but no list" : "");
    }
    for (int32_t i = 0; i < kernel->head_dim_count; i++) {
        if (kernel->head_dims[i] < 1 || kernel->head_dims[i] > 4096) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "kernel registry: kernel %s declares head dim %d (1 to "
                                      "4096 expected)",
                                      kernel->name, (int)kernel->head_dims[i]);
        }
    }
    if ((kernel->device != CPPARITY_KERNEL_DEVICE_CPU &&
         kernel->device != CPPARITY_KERNEL_DEVICE_CUDA) ||
        (kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32 &&
         kernel->dtype != CPPARITY_KERNEL_DTYPE_BFLOAT16)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: kernel %s has device %d and dtype %d; the ABI "
                                  "knows devices 0 (cpu), 1 (cuda) and dtypes 0 (float32), 1 "
                                  "(bfloat16)",
                                  kernel->name, (int)kernel->device, (int)kernel->dtype);
    }
    if (kernel_registry_find(kernel->name) != NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "kernel registry: a kernel called %s is already registered",
                                  kernel->name);
    }
    if (registered_count == KERNEL_REGISTRY_CAPACITY) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "kernel registry: full (%d kernels)",
                                  KERNEL_REGISTRY_CAPACITY);
    }
    registered[registered_count++] = kernel;
    return CPPARITY_OK;
}
