/* kernel_call.c — poisoned, guarded kernel calls (see kernel_call.h). */
#include "distributed/kernels/kernel_call.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "distributed/kernels/block_rows.h"
#include "distributed/kernels/kernel_registry.h"

static void poison(float *values, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        values[i] = NAN;
    }
}

/* One output of a call: where it goes, and the guarded buffer the kernel writes. */
typedef struct guarded_output {
    const char *name;
    float *destination;
    int64_t count;
    float *buffer; /* KERNEL_CALL_GUARD + count + KERNEL_CALL_GUARD floats; NULL when unguarded */
} guarded_output;

/* Points the kernel at poisoned outputs: the destinations themselves for a built-in kernel, else
 * guarded copies. false when out of memory. */
static bool prepare(guarded_output *outputs, int count, bool guarded) {
    const float guard = kernel_call_guard_value();
    for (int o = 0; o < count; o++) {
        guarded_output *output = &outputs[o];
        output->buffer = NULL;
        if (!guarded) {
            poison(output->destination, output->count);
            continue;
        }
        output->buffer =
            malloc((size_t)(output->count + 2 * KERNEL_CALL_GUARD) * sizeof *output->buffer);
        if (output->buffer == NULL) {
            return false;
        }
        for (int64_t i = 0; i < KERNEL_CALL_GUARD; i++) {
            output->buffer[i] = guard;
            output->buffer[KERNEL_CALL_GUARD + output->count + i] = guard;
        }
        poison(output->buffer + KERNEL_CALL_GUARD, output->count);
    }
    return true;
}

static float *target(const guarded_output *output) {
    return output->buffer != NULL ? output->buffer + KERNEL_CALL_GUARD : output->destination;
}

/* After the call: checks every guard (bitwise) and copies the outputs home. Non-zero with message
 * when a guard was overwritten. */
static int finish(const cpparity_attention_kernel *kernel, const char *call,
                  guarded_output *outputs, int count, char *message, size_t size) {
    int failed = 0;
    for (int o = 0; o < count && failed == 0; o++) {
        const guarded_output *output = &outputs[o];
        if (output->buffer == NULL) {
            continue;
        }
        const int64_t before = kernel_call_guards_overwritten(output->buffer, KERNEL_CALL_GUARD);
        const int64_t after = kernel_call_guards_overwritten(
            output->buffer + KERNEL_CALL_GUARD + output->count, KERNEL_CALL_GUARD);
        if (before + after > 0) {
            snprintf(message, size,
                     "kernel %s %s wrote out of bounds of %s (%lld elements): %lld of the %d "
                     "floats before it and %lld of the %d after it were overwritten",
                     kernel->name, call, output->name, (long long)output->count, (long long)before,
                     KERNEL_CALL_GUARD, (long long)after, KERNEL_CALL_GUARD);
            failed = 1;
        } else {
            memcpy(output->destination, output->buffer + KERNEL_CALL_GUARD,
                   (size_t)output->count * sizeof *output->buffer);
        }
    }
    for (int o = 0; o < count; o++) {
        free(outputs[o].buffer);
    }
    return failed;
}

/* Calls to kernels that do not declare CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS, one at a time
 * (the threading contract of include/cpparity/kernel.h). */
static pthread_mutex_t serial_calls = PTHREAD_MUTEX_INITIALIZER;

static bool serialised(const cpparity_attention_kernel *kernel) {
    return (kernel->capabilities & CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS) == 0;
}

void kernel_call_begin(const cpparity_attention_kernel *kernel) {
    if (serialised(kernel)) {
        pthread_mutex_lock(&serial_calls);
    }
}

void kernel_call_end(const cpparity_attention_kernel *kernel) {
    if (serialised(kernel)) {
        pthread_mutex_unlock(&serial_calls);
    }
}

/* A forward, whole-sequence (block NULL) or block call, outputs poisoned and guarded. */
static int call_forward(const cpparity_attention_kernel *kernel, float *out, float *lse,
                        const float *q, const float *k, const float *v,
                        const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                        const cpparity_attention_block *block, float scale, char *message,
                        size_t size) {
    const int64_t rows = dims->batch * block_query_rows(dims, block) * dims->heads;
    guarded_output outputs[2] = {{"out", out, rows * dims->head_dim, NULL},
                                 {"lse", lse, rows, NULL}};
    const char *call = block != NULL ? "forward_block" : "forward";
    const bool guarded = !kernel_registry_is_built_in(kernel);
    if (!prepare(outputs, 2, guarded)) {
        finish(kernel, call, outputs, 2, message, size);
        snprintf(message, size, "out of memory for the guarded outputs of kernel %s", kernel->name);
        return 1;
    }
    if (guarded) {
        interrupt_enter_foreign_code(kernel->name, call);
    }
    kernel_call_begin(kernel);
    const int result =
        block != NULL
            ? kernel->forward_block(kernel->context, target(&outputs[0]), target(&outputs[1]), q, k,
                                    v, mask, dims, block, scale, NULL, message, size)
            : kernel->forward(kernel->context, target(&outputs[0]), target(&outputs[1]), q, k, v,
                              mask, dims, scale, NULL, message, size);
    kernel_call_end(kernel);
    if (guarded) {
        interrupt_leave_foreign_code();
    }
    const int guards =
        finish(kernel, call, outputs, 2, result != 0 ? NULL : message, result != 0 ? 0 : size);
    return result != 0 ? result : guards;
}

/* A backward, whole-sequence (block NULL) or block call, outputs poisoned and guarded. */
static int call_backward(const cpparity_attention_kernel *kernel, float *dq, float *dk, float *dv,
                         const float *dout, const float *q, const float *k, const float *v,
                         const float *out, const float *lse, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, const cpparity_attention_block *block,
                         float scale, char *message, size_t size) {
    const int64_t query =
        dims->batch * block_query_rows(dims, block) * dims->heads * dims->head_dim;
    const int64_t key = dims->batch * block_key_rows(dims, block) * dims->kv_heads * dims->head_dim;
    guarded_output outputs[3] = {
        {"dq", dq, query, NULL}, {"dk", dk, key, NULL}, {"dv", dv, key, NULL}};
    const char *call = block != NULL ? "backward_block" : "backward";
    const bool guarded = !kernel_registry_is_built_in(kernel);
    if (!prepare(outputs, 3, guarded)) {
        finish(kernel, call, outputs, 3, message, size);
        snprintf(message, size, "out of memory for the guarded outputs of kernel %s", kernel->name);
        return 1;
    }
    if (guarded) {
        interrupt_enter_foreign_code(kernel->name, call);
    }
    kernel_call_begin(kernel);
    const int result =
        block != NULL
            ? kernel->backward_block(kernel->context, target(&outputs[0]), target(&outputs[1]),
                                     target(&outputs[2]), dout, q, k, v, out, lse, mask, dims,
                                     block, scale, NULL, message, size)
            : kernel->backward(kernel->context, target(&outputs[0]), target(&outputs[1]),
                               target(&outputs[2]), dout, q, k, v, out, lse, mask, dims, scale,
                               NULL, message, size);
    kernel_call_end(kernel);
    if (guarded) {
        interrupt_leave_foreign_code();
    }
    const int guards =
        finish(kernel, call, outputs, 3, result != 0 ? NULL : message, result != 0 ? 0 : size);
    return result != 0 ? result : guards;
}

int kernel_call_forward(const cpparity_attention_kernel *kernel, float *out, float *lse,
                        const float *q, const float *k, const float *v,
                        const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                        float scale, char *message, size_t size) {
    return call_forward(kernel, out, lse, q, k, v, mask, dims, NULL, scale, message, size);
}

int kernel_call_backward(const cpparity_attention_kernel *kernel, float *dq, float *dk, float *dv,
                         const float *dout, const float *q, const float *k, const float *v,
                         const float *out, const float *lse, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, float scale, char *message,
                         size_t size) {
    return call_backward(kernel, dq, dk, dv, dout, q, k, v, out, lse, mask, dims, NULL, scale,
                         message, size);
}

int kernel_call_forward_block(const cpparity_attention_kernel *kernel, float *out, float *lse,
                              const float *q, const float *k, const float *v,
                              const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims,
                              const cpparity_attention_block *block, float scale, char *message,
                              size_t size) {
    return call_forward(kernel, out, lse, q, k, v, mask, dims, block, scale, message, size);
}

int kernel_call_backward_block(const cpparity_attention_kernel *kernel, float *dq, float *dk,
                               float *dv, const float *dout, const float *q, const float *k,
                               const float *v, const float *out, const float *lse,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims,
                               const cpparity_attention_block *block, float scale, char *message,
                               size_t size) {
    return call_backward(kernel, dq, dk, dv, dout, q, k, v, out, lse, mask, dims, block, scale,
                         message, size);
}
