/* kernel_device_staging.c — a CUDA float32 kernel called on host buffers (see
 * kernel_device_staging.h). Without CUDA in the build, wrap says so and does nothing else. */
#include "distributed/kernels/kernel_device_staging.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CPPARITY_HAVE_CUDA_RUNTIME

bool kernel_device_staging_wrap(cpparity_attention_kernel *wrapper,
                                const cpparity_attention_kernel *cuda_kernel, char *why,
                                size_t size) {
    memset(wrapper, 0, sizeof *wrapper);
    snprintf(why, size, "this cpparity was built without CUDA (kernel %s is a CUDA kernel)",
             cuda_kernel->name);
    return false;
}

void kernel_device_staging_release(cpparity_attention_kernel *wrapper) {
    (void)wrapper;
}

#else

#include <cuda_runtime.h>

#include "distributed/kernels/block_rows.h"
#include "distributed/kernels/kernel_call.h" /* the guard regions' size and pattern */
#include "distributed/kernels/kernel_support.h"

typedef struct staging {
    const cpparity_attention_kernel *kernel; /* the CUDA kernel (borrowed) */
    cudaStream_t stream;
} staging;

/* One tensor of a call: the host array, its element count, whether the kernel writes it, and its
 * device copy (outputs: KERNEL_CALL_GUARD + count + KERNEL_CALL_GUARD floats). */
typedef struct staged_tensor {
    const char *name;
    float *host;
    int64_t count;
    bool output;
    float *device;
} staged_tensor;

static float *inner(const staged_tensor *tensor) {
    return tensor->output ? tensor->device + KERNEL_CALL_GUARD : tensor->device;
}

/* Reports a failed CUDA call into message; 1. */
static int cuda_failure(cudaError_t code, const char *what, const staging *s, char *message,
                        size_t size) {
    snprintf(message, size, "CUDA: %s for kernel %s failed: %s (%s)", what, s->kernel->name,
             cudaGetErrorName(code), cudaGetErrorString(code));
    return 1;
}

/* Allocates and fills every device copy: inputs and outputs' contents from the host, outputs'
 * guards with the pattern. 0, or 1 with message. */
static int stage_in(staged_tensor *tensors, int count, const staging *s, char *message,
                    size_t size) {
    float guards[KERNEL_CALL_GUARD];
    for (int i = 0; i < KERNEL_CALL_GUARD; i++) {
        guards[i] = kernel_call_guard_value();
    }
    for (int t = 0; t < count; t++) {
        staged_tensor *tensor = &tensors[t];
        const int64_t floats = tensor->count + (tensor->output ? 2 * KERNEL_CALL_GUARD : 0);
        cudaError_t code = cudaMalloc((void **)&tensor->device, (size_t)floats * sizeof(float));
        if (code != cudaSuccess) {
            tensor->device = NULL;
            return cuda_failure(code, "allocating device memory", s, message, size);
        }
        code = cudaMemcpyAsync(inner(tensor), tensor->host, (size_t)tensor->count * sizeof(float),
                               cudaMemcpyHostToDevice, s->stream);
        if (code == cudaSuccess && tensor->output) {
            code = cudaMemcpyAsync(tensor->device, guards, KERNEL_CALL_GUARD * sizeof(float),
                                   cudaMemcpyHostToDevice, s->stream);
        }
        if (code == cudaSuccess && tensor->output) {
            code = cudaMemcpyAsync(tensor->device + KERNEL_CALL_GUARD + tensor->count, guards,
                                   KERNEL_CALL_GUARD * sizeof(float), cudaMemcpyHostToDevice,
                                   s->stream);
        }
        if (code != cudaSuccess) {
            return cuda_failure(code, "copying to the device", s, message, size);
        }
    }
    const cudaError_t code = cudaStreamSynchronize(s->stream);
    return code != cudaSuccess ? cuda_failure(code, "copying to the device", s, message, size) : 0;
}

/* Copies the outputs home and checks their device guards. 0, or 1 with message. */
static int stage_out(staged_tensor *tensors, int count, const staging *s, const char *call,
                     char *message, size_t size) {
    for (int t = 0; t < count; t++) {
        staged_tensor *tensor = &tensors[t];
        if (!tensor->output) {
            continue;
        }
        float before[KERNEL_CALL_GUARD], after[KERNEL_CALL_GUARD];
        cudaError_t code =
            cudaMemcpy(before, tensor->device, sizeof before, cudaMemcpyDeviceToHost);
        if (code == cudaSuccess) {
            code = cudaMemcpy(after, tensor->device + KERNEL_CALL_GUARD + tensor->count,
                              sizeof after, cudaMemcpyDeviceToHost);
        }
        if (code == cudaSuccess) {
            code = cudaMemcpy(tensor->host, inner(tensor), (size_t)tensor->count * sizeof(float),
                              cudaMemcpyDeviceToHost);
        }
        if (code != cudaSuccess) {
            return cuda_failure(code, "copying from the device", s, message, size);
        }
        const int64_t overwritten_before =
            kernel_call_guards_overwritten(before, KERNEL_CALL_GUARD);
        const int64_t overwritten_after = kernel_call_guards_overwritten(after, KERNEL_CALL_GUARD);
        if (overwritten_before + overwritten_after > 0) {
            snprintf(message, size,
                     "kernel %s %s wrote out of bounds of %s on the device (%lld elements): %lld "
                     "of the %d floats before it and %lld of the %d after it were overwritten",
                     s->kernel->name, call, tensor->name, (long long)tensor->count,
                     (long long)overwritten_before, KERNEL_CALL_GUARD, (long long)overwritten_after,
                     KERNEL_CALL_GUARD);
            return 1;
        }
    }
    return 0;
}

static void free_device(staged_tensor *tensors, int count) {
    for (int t = 0; t < count; t++) {
        if (tensors[t].device != NULL) {
            (void)cudaFree(tensors[t].device);
        }
    }
}

/* The kernel's own result, or the stream's error once it has finished. */
static int finish_call(int result, const staging *s, char *message, size_t size) {
    const cudaError_t code = cudaStreamSynchronize(s->stream);
    if (result != 0) {
        return result;
    }
    return code != cudaSuccess ? cuda_failure(code, "running the kernel", s, message, size) : 0;
}

/* A block call's index arrays on the device (kernel.h: a CUDA kernel reads them there), or NULL
 * for a whole-sequence call. Freed by release_indexes. 0, or 1 with message. */
typedef struct staged_indexes {
    cpparity_attention_block block; /* the block with device index arrays */
    int64_t *device;                /* query_len + key_len tokens */
} staged_indexes;

static int stage_indexes(staged_indexes *staged, const cpparity_attention_block *block,
                         const staging *s, char *message, size_t size) {
    memset(staged, 0, sizeof *staged);
    if (block == NULL) {
        return 0;
    }
    staged->block = *block;
    const int64_t count = block->query_len + block->key_len;
    cudaError_t code = cudaMalloc((void **)&staged->device, (size_t)(count + 1) * sizeof(int64_t));
    if (code != cudaSuccess) {
        staged->device = NULL;
        return cuda_failure(code, "allocating the block's index arrays", s, message, size);
    }
    code = cudaMemcpy(staged->device, block->query_index,
                      (size_t)block->query_len * sizeof(int64_t), cudaMemcpyHostToDevice);
    if (code == cudaSuccess) {
        code = cudaMemcpy(staged->device + block->query_len, block->key_index,
                          (size_t)block->key_len * sizeof(int64_t), cudaMemcpyHostToDevice);
    }
    staged->block.query_index = staged->device;
    staged->block.key_index = staged->device + block->query_len;
    return code != cudaSuccess
               ? cuda_failure(code, "copying the block's index arrays", s, message, size)
               : 0;
}

static void release_indexes(staged_indexes *staged) {
    if (staged->device != NULL) {
        (void)cudaFree(staged->device);
    }
}

/* forward (block NULL) or forward_block on staged copies of the host buffers. */
static int staged_forward_rows(const staging *s, void *out, float *lse, const void *q,
                               const void *k, const void *v, const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims,
                               const cpparity_attention_block *block, float scale, char *message,
                               size_t size) {
    const int64_t rows = dims->batch * block_query_rows(dims, block) * dims->heads;
    const int64_t key = dims->batch * block_key_rows(dims, block) * dims->kv_heads * dims->head_dim;
    staged_tensor tensors[5] = {
        {"q", (float *)q, rows * dims->head_dim, false, NULL},
        {"k", (float *)k, key, false, NULL},
        {"v", (float *)v, key, false, NULL},
        {"out", (float *)out, rows * dims->head_dim, true, NULL},
        {"lse", lse, rows, true, NULL},
    };
    staged_indexes indexes;
    int result = stage_indexes(&indexes, block, s, message, size);
    if (result == 0) {
        result = stage_in(tensors, 5, s, message, size);
    }
    if (result == 0) {
        kernel_call_begin(s->kernel); /* until the call has finished on the device */
        void *const context = s->kernel->context;
        result =
            block == NULL
                ? s->kernel->forward(context, inner(&tensors[3]), inner(&tensors[4]),
                                     inner(&tensors[0]), inner(&tensors[1]), inner(&tensors[2]),
                                     mask, dims, scale, (void *)s->stream, message, size)
                : s->kernel->forward_block(context, inner(&tensors[3]), inner(&tensors[4]),
                                           inner(&tensors[0]), inner(&tensors[1]),
                                           inner(&tensors[2]), mask, dims, &indexes.block, scale,
                                           (void *)s->stream, message, size);
        result = finish_call(result, s, message, size);
        kernel_call_end(s->kernel);
    }
    if (result == 0) {
        result =
            stage_out(tensors, 5, s, block == NULL ? "forward" : "forward_block", message, size);
    }
    free_device(tensors, 5);
    release_indexes(&indexes);
    return result;
}

/* backward (block NULL) or backward_block on staged copies of the host buffers. */
static int staged_backward_rows(const staging *s, void *dq, void *dk, void *dv, const void *dout,
                                const void *q, const void *k, const void *v, const void *out,
                                const float *lse, const cpparity_mask_description *mask,
                                const cpparity_attention_dims *dims,
                                const cpparity_attention_block *block, float scale, char *message,
                                size_t size) {
    const int64_t rows = dims->batch * block_query_rows(dims, block) * dims->heads;
    const int64_t query = rows * dims->head_dim;
    const int64_t key = dims->batch * block_key_rows(dims, block) * dims->kv_heads * dims->head_dim;
    staged_tensor tensors[9] = {
        {"dout", (float *)dout, query, false, NULL}, {"q", (float *)q, query, false, NULL},
        {"k", (float *)k, key, false, NULL},         {"v", (float *)v, key, false, NULL},
        {"out", (float *)out, query, false, NULL},   {"lse", (float *)lse, rows, false, NULL},
        {"dq", (float *)dq, query, true, NULL},      {"dk", (float *)dk, key, true, NULL},
        {"dv", (float *)dv, key, true, NULL},
    };
    staged_indexes indexes;
    int result = stage_indexes(&indexes, block, s, message, size);
    if (result == 0) {
        result = stage_in(tensors, 9, s, message, size);
    }
    if (result == 0) {
        kernel_call_begin(s->kernel);
        void *const context = s->kernel->context;
        result = block == NULL
                     ? s->kernel->backward(
                           context, inner(&tensors[6]), inner(&tensors[7]), inner(&tensors[8]),
                           inner(&tensors[0]), inner(&tensors[1]), inner(&tensors[2]),
                           inner(&tensors[3]), inner(&tensors[4]), inner(&tensors[5]), mask, dims,
                           scale, (void *)s->stream, message, size)
                     : s->kernel->backward_block(
                           context, inner(&tensors[6]), inner(&tensors[7]), inner(&tensors[8]),
                           inner(&tensors[0]), inner(&tensors[1]), inner(&tensors[2]),
                           inner(&tensors[3]), inner(&tensors[4]), inner(&tensors[5]), mask, dims,
                           &indexes.block, scale, (void *)s->stream, message, size);
        result = finish_call(result, s, message, size);
        kernel_call_end(s->kernel);
    }
    if (result == 0) {
        result =
            stage_out(tensors, 9, s, block == NULL ? "backward" : "backward_block", message, size);
    }
    free_device(tensors, 9);
    release_indexes(&indexes);
    return result;
}

static int staged_forward(void *context, void *out, float *lse, const void *q, const void *k,
                          const void *v, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale, void *stream,
                          char *message, size_t size) {
    (void)stream; /* host buffers: no stream of the caller's */
    return staged_forward_rows((const staging *)context, out, lse, q, k, v, mask, dims, NULL, scale,
                               message, size);
}

static int staged_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                           const void *q, const void *k, const void *v, const void *out,
                           const float *lse, const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims, float scale, void *stream,
                           char *message, size_t size) {
    (void)stream;
    return staged_backward_rows((const staging *)context, dq, dk, dv, dout, q, k, v, out, lse, mask,
                                dims, NULL, scale, message, size);
}

static int staged_forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                                const void *v, const cpparity_mask_description *mask,
                                const cpparity_attention_dims *dims,
                                const cpparity_attention_block *block, float scale, void *stream,
                                char *message, size_t size) {
    (void)stream;
    return staged_forward_rows((const staging *)context, out, lse, q, k, v, mask, dims, block,
                               scale, message, size);
}

static int staged_backward_block(void *context, void *dq, void *dk, void *dv, const void *dout,
                                 const void *q, const void *k, const void *v, const void *out,
                                 const float *lse, const cpparity_mask_description *mask,
                                 const cpparity_attention_dims *dims,
                                 const cpparity_attention_block *block, float scale, void *stream,
                                 char *message, size_t size) {
    (void)stream;
    return staged_backward_rows((const staging *)context, dq, dk, dv, dout, q, k, v, out, lse, mask,
                                dims, block, scale, message, size);
}

static int staged_supports(void *context, const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims, char *why, size_t size) {
    const staging *s = (const staging *)context;
    return s->kernel->supports(s->kernel->context, mask, dims, why, size);
}

bool kernel_device_staging_wrap(cpparity_attention_kernel *wrapper,
                                const cpparity_attention_kernel *cuda_kernel, char *why,
                                size_t size) {
    memset(wrapper, 0, sizeof *wrapper);
    if (cuda_kernel->device != CPPARITY_KERNEL_DEVICE_CUDA ||
        cuda_kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32) {
        snprintf(why, size, "kernel %s is not a CUDA float32 kernel", cuda_kernel->name);
        return false;
    }
    int devices = 0;
    cudaError_t code = cudaGetDeviceCount(&devices);
    if (code != cudaSuccess || devices == 0) {
        (void)cudaGetLastError(); /* clear it: nothing else of this process should see it */
        snprintf(why, size, "no CUDA device for kernel %s: %s", cuda_kernel->name,
                 code != cudaSuccess ? cudaGetErrorString(code) : "cudaGetDeviceCount reports 0");
        return false;
    }
    staging *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(why, size, "out of memory (staging kernel %s)", cuda_kernel->name);
        return false;
    }
    s->kernel = cuda_kernel;
    code = cudaStreamCreate(&s->stream);
    if (code != cudaSuccess) {
        snprintf(why, size, "CUDA: creating a stream for kernel %s failed: %s", cuda_kernel->name,
                 cudaGetErrorString(code));
        free(s);
        return false;
    }
    *wrapper = *cuda_kernel;
    wrapper->device = CPPARITY_KERNEL_DEVICE_CPU; /* host buffers, staged */
    wrapper->context = s;
    wrapper->forward = staged_forward;
    wrapper->backward = staged_backward;
    wrapper->supports = cuda_kernel->supports != NULL ? staged_supports : NULL;
    wrapper->workspace_bytes = NULL; /* a CUDA kernel's workspace is device memory */
    /* block calls staged too (their index arrays copied to the device), or none */
    const bool blocks = kernel_has_block_calls(cuda_kernel);
    wrapper->forward_block = blocks ? staged_forward_block : NULL;
    wrapper->backward_block = blocks ? staged_backward_block : NULL;
    return true;
}

void kernel_device_staging_release(cpparity_attention_kernel *wrapper) {
    staging *s = (staging *)wrapper->context;
    if (wrapper->forward == staged_forward && s != NULL) {
        (void)cudaStreamDestroy(s->stream);
        free(s);
    }
    memset(wrapper, 0, sizeof *wrapper);
}

#endif
