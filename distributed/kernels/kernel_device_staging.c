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

#include "distributed/kernels/kernel_call.h" /* the guard regions' size and pattern */

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

static int staged_forward(void *context, void *out, float *lse, const void *q, const void *k,
                          const void *v, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale, void *stream,
                          char *message, size_t size) {
    (void)stream; /* host buffers: no stream of the caller's */
    const staging *s = (const staging *)context;
    const int64_t rows = dims->batch * dims->seq_len * dims->heads;
    const int64_t key = dims->batch * dims->seq_len * dims->kv_heads * dims->head_dim;
    staged_tensor tensors[5] = {
        {"q", (float *)q, rows * dims->head_dim, false, NULL},
        {"k", (float *)k, key, false, NULL},
        {"v", (float *)v, key, false, NULL},
        {"out", (float *)out, rows * dims->head_dim, true, NULL},
        {"lse", lse, rows, true, NULL},
    };
    int result = stage_in(tensors, 5, s, message, size);
    if (result == 0) {
        kernel_call_begin(s->kernel); /* until the call has finished on the device */
        result = s->kernel->forward(s->kernel->context, inner(&tensors[3]), inner(&tensors[4]),
                                    inner(&tensors[0]), inner(&tensors[1]), inner(&tensors[2]),
                                    mask, dims, scale, (void *)s->stream, message, size);
        result = finish_call(result, s, message, size);
        kernel_call_end(s->kernel);
    }
    if (result == 0) {
        result = stage_out(tensors, 5, s, "forward", message, size);
    }
    free_device(tensors, 5);
    return result;
}

static int staged_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                           const void *q, const void *k, const void *v, const void *out,
                           const float *lse, const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims, float scale, void *stream,
                           char *message, size_t size) {
    (void)stream;
    const staging *s = (const staging *)context;
    const int64_t rows = dims->batch * dims->seq_len * dims->heads;
    const int64_t query = rows * dims->head_dim;
    const int64_t key = dims->batch * dims->seq_len * dims->kv_heads * dims->head_dim;
    staged_tensor tensors[9] = {
        {"dout", (float *)dout, query, false, NULL}, {"q", (float *)q, query, false, NULL},
        {"k", (float *)k, key, false, NULL},         {"v", (float *)v, key, false, NULL},
        {"out", (float *)out, query, false, NULL},   {"lse", (float *)lse, rows, false, NULL},
        {"dq", (float *)dq, query, true, NULL},      {"dk", (float *)dk, key, true, NULL},
        {"dv", (float *)dv, key, true, NULL},
    };
    int result = stage_in(tensors, 9, s, message, size);
    if (result == 0) {
        kernel_call_begin(s->kernel);
        result = s->kernel->backward(s->kernel->context, inner(&tensors[6]), inner(&tensors[7]),
                                     inner(&tensors[8]), inner(&tensors[0]), inner(&tensors[1]),
                                     inner(&tensors[2]), inner(&tensors[3]), inner(&tensors[4]),
                                     inner(&tensors[5]), mask, dims, scale, (void *)s->stream,
                                     message, size);
        result = finish_call(result, s, message, size);
        kernel_call_end(s->kernel);
    }
    if (result == 0) {
        result = stage_out(tensors, 9, s, "backward", message, size);
    }
    free_device(tensors, 9);
    return result;
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
