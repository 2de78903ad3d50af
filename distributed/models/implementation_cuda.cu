/*
 * implementation_cuda.cu — the context-parallel model on CUDA ranks
 * (distributed/models/model_cuda.h), float32 or bfloat16 storage with float32 arithmetic, behind
 * the implementation interface (distributed/models/implementation.h): one instance holds the model
 * (its own stream, cuBLAS handle and device buffers), this rank's slice of the last batch and
 * nothing else. Attention runs through a CUDA float32 kernel, on bfloat16-rounded q, k, v for bf16,
 * as on the CPU. Ulysses under every layout: contiguous through whole-sequence kernel calls, zigzag
 * and round-robin through the kernel's block calls on the gathered sequence in rank order
 * (model_cuda.h); ring attention through ring.c's steps on device operations
 * (model_cuda_ring.cu); hybrid U×R as both, the all-to-alls on Ulysses groups split from the CP
 * group and the ring across them. It plants the self-test's faults of the model, shard,
 * all-to-all, ring, loss and reduction as the CPU implementation does (model_cuda_faults.cu,
 * ring.c, and the hybrid's groups at init); those inside the built-in CPU
 * kernel do not apply to a CUDA kernel and are refused. C linkage, so that the registry (C) finds
 * cpparity_cuda_implementation.
 */
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/fault.h"
#include "distributed/models/implementation.h"
#include "distributed/models/model_f32.h" /* f32_model_check_parallelism: the same constraints */
#include "distributed/models/model_memory.h"
#include "distributed/cp/shard.h"

extern const cpparity_implementation cpparity_cuda_implementation;
}

#include "distributed/models/cublas_library.h" /* extern "C" itself: cublas_v2.h is C++ here */
#include "distributed/models/model_cuda.h"

static_assert(CPPARITY_DTYPE_F32 == 0 && CPPARITY_DTYPE_BF16 == 1 && CPPARITY_DTYPE_COUNT == 2,
              "the dtypes row of the table below is written in this order");

/* One instance: the model and the slice of the batch forward was given. */
typedef struct cuda_instance {
    cuda_model model;     /* device buffers, stream, handle */
    cpparity_batch local; /* this rank's B × L tokens of the last forward (host) */
    bool forward_done;    /* forward ran (backward needs it) */
    bool backward_done;   /* backward ran (gradients are complete) */
} cuda_instance;

/* A CUDA device is visible: never crashes, never prints. */
static bool cuda_available(char *why, size_t size) {
    int devices = 0;
    const cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it: nothing else of this process should see it */
        snprintf(why, size, "no CUDA device: cudaGetDeviceCount returned %s (%s)",
                 cudaGetErrorName(found), cudaGetErrorString(found));
        return false;
    }
    if (devices == 0) {
        snprintf(why, size, "no CUDA device: cudaGetDeviceCount reports 0 devices");
        return false;
    }
    const cublas_library *blas = NULL;
    cpparity_error error = {};
    if (cublas_library_load(&blas, &error) != CPPARITY_OK) {
        snprintf(why, size, "%s", error.message);
        return false;
    }
    return true;
}

static cpparity_status cuda_check(const cpparity_model_config *config, int64_t cp,
                                  cpparity_dtype dtype, cpparity_algorithm_choice algorithm,
                                  const cpparity_attention_kernel *kernel, cpparity_error *error) {
    if ((int)dtype < 0 || (int)dtype >= CPPARITY_DTYPE_COUNT ||
        !cpparity_cuda_implementation.dtypes[dtype]) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: the cuda implementation has no %s storage",
                                  cpparity_dtype_name(dtype));
    }
    if (kernel == NULL || kernel->device != CPPARITY_KERNEL_DEVICE_CUDA ||
        kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: the cuda implementation needs a CUDA float32 attention "
                                  "kernel (bf16 storage too: it attends on the rounded values), "
                                  "got %s",
                                  kernel != NULL && kernel->name != NULL ? kernel->name : "none");
    }
    return f32_model_check_parallelism(config, cp, algorithm, kernel, error);
}

static void cuda_destroy(void *instance);

static cpparity_status cuda_create(const cpparity_implementation_setup *setup, void **instance,
                                   cpparity_error *error) {
    *instance = NULL;
    cpparity_status status = cuda_check(setup->config, setup->comm->size, setup->dtype,
                                        setup->algorithm, setup->kernel, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if ((int)setup->fault < 0 || setup->fault >= CPPARITY_FAULT_COUNT) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no fault number %d",
                                  (int)setup->fault);
    }
    if (implementation_supports_fault(&cpparity_cuda_implementation, setup->fault) !=
        IMPLEMENTATION_FAULT_SUPPORTED) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: fault %s lives in an algorithm the cuda "
                                  "implementation does not run",
                                  cpparity_faults[setup->fault].name);
    }
    if (cpparity_faults[setup->fault].kernel) { /* before any device work */
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: fault %s lives in the built-in cpu-f32 kernel; the "
                                  "cuda implementation runs kernel %s",
                                  cpparity_faults[setup->fault].name, setup->kernel->name);
    }
    cuda_instance *made = (cuda_instance *)calloc(1, sizeof *made);
    if (made == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (cuda implementation)",
                                  setup->comm->rank);
    }
    const f32_model_shape shape = {setup->batch,  setup->seq_len,   setup->dtype,
                                   setup->layout, setup->algorithm, setup->fault};
    status =
        cuda_model_init(&made->model, setup->config, &shape, setup->comm, setup->kernel, error);
    if (status != CPPARITY_OK) {
        free(made);
        return status;
    }
    if (setup->fault != CPPARITY_FAULT_NONE) {
        status = cuda_model_set_fault(&made->model, setup->fault, error);
        if (status != CPPARITY_OK) {
            cuda_destroy(made);
            return status;
        }
    }
    *instance = made;
    return CPPARITY_OK;
}

static cpparity_status cuda_load_parameters(void *instance, const cpparity_tensor_table *table,
                                            const double *values, cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    const cpparity_status status = cuda_model_use_device(&self->model, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    return cuda_model_load_parameters(&self->model, table, values, error);
}

/* Token ids in [0, V) and labels too or −100, over the whole batch: a bad id would read outside
 * the embedding on the device. Every rank has the same batch, so every rank gives the same
 * answer before any collective. */
static cpparity_status check_tokens(const cuda_model *model, const cpparity_batch *batch,
                                    cpparity_error *error) {
    const int64_t V = model->config.vocab_size;
    for (int64_t i = 0; i < batch->batch * batch->seq_len; i++) {
        const int64_t id = batch->input_ids[i], label = batch->labels[i];
        if (id < 0 || id >= V || (label != CPPARITY_IGNORE_INDEX && (label < 0 || label >= V))) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "rank %d: token [%lld, %lld] has id %lld and label %lld; "
                                      "ids lie in [0, %lld), labels too or are -100",
                                      model->comm->rank, (long long)(i / batch->seq_len),
                                      (long long)(i % batch->seq_len), (long long)id,
                                      (long long)label, (long long)V);
        }
    }
    return CPPARITY_OK;
}

static cpparity_status cuda_forward(void *instance, const cpparity_batch *batch,
                                    cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    cuda_model *model = &self->model;
    if (batch->batch != model->batch || batch->seq_len != model->shard.seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: forward got a batch of %lld x %lld tokens, the "
                                  "instance was created for %lld x %lld",
                                  model->comm->rank, (long long)batch->batch,
                                  (long long)batch->seq_len, (long long)model->batch,
                                  (long long)model->shard.seq_len);
    }
    cpparity_batch_free(&self->local);
    self->forward_done = false;
    self->backward_done = false;
    cpparity_status status = check_tokens(model, batch, error);
    if (status == CPPARITY_OK) {
        status = cuda_model_use_device(model, error);
    }
    if (status == CPPARITY_OK) {
        status = shard_slice_batch(&self->local, batch, &model->shard, error);
    }
    if (status == CPPARITY_OK && model->fault != CPPARITY_FAULT_NONE) {
        shard_inject(&self->local, &model->shard, model->fault);
    }
    if (status == CPPARITY_OK) {
        status = cuda_model_forward(model, &self->local, error);
    }
    self->forward_done = status == CPPARITY_OK;
    return status;
}

static cpparity_status cuda_backward(void *instance, cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    if (!self->forward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: backward called before forward",
                                  self->model.comm->rank);
    }
    self->backward_done = false;
    cpparity_status status = cuda_model_use_device(&self->model, error);
    if (status == CPPARITY_OK) {
        status = cuda_model_backward(&self->model, error);
    }
    self->backward_done = status == CPPARITY_OK;
    return status;
}

static cpparity_status cuda_read_loss(void *instance, float *loss, cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    if (!self->forward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank %d: no loss before forward",
                                  self->model.comm->rank);
    }
    *loss = self->model.loss;
    return CPPARITY_OK;
}

static cpparity_status cuda_read_logits(void *instance, float *logits, int64_t count,
                                        cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    cuda_model *model = &self->model;
    const int64_t held = model->batch * model->shard.local_len * model->config.vocab_size;
    if (!self->forward_done || count != held) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: asked for %lld logits, this rank holds %lld%s",
                                  model->comm->rank, (long long)count, (long long)held,
                                  self->forward_done ? "" : " (no forward yet)");
    }
    const cpparity_status status = cuda_model_use_device(model, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (model->reported_logits != NULL) { /* stale-rank-slice: another rank's slice */
        memcpy(logits, model->reported_logits, (size_t)held * sizeof(float));
        return CPPARITY_OK;
    }
    return cuda_model_copy_out(model, logits, model->activations + model->logits, held, error);
}

static int64_t cuda_gradient_count(void *instance) {
    const cuda_instance *self = (const cuda_instance *)instance;
    return self->model.parameter_table.count;
}

static const char *cuda_gradient_name(void *instance, int64_t index) {
    const cuda_instance *self = (const cuda_instance *)instance;
    const cpparity_tensor_table *table = &self->model.parameter_table;
    return index >= 0 && index < table->count ? table->entries[index].name : NULL;
}

static cpparity_status cuda_read_gradient(void *instance, const char *name, float *values,
                                          int64_t count, cpparity_error *error) {
    cuda_instance *self = (cuda_instance *)instance;
    cuda_model *model = &self->model;
    const cpparity_tensor_entry *entry = cpparity_tensor_table_find(&model->parameter_table, name);
    if (entry == NULL || entry->count != count || !self->backward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank %d: gradient %s: %s",
                                  model->comm->rank, name,
                                  entry == NULL          ? "no such parameter"
                                  : !self->backward_done ? "no backward yet"
                                                         : "asked for a different element count");
    }
    const cpparity_status status = cuda_model_use_device(model, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    return cuda_model_copy_out(model, values, model->gradients + entry->offset, count, error);
}

static void cuda_destroy(void *instance) {
    cuda_instance *self = (cuda_instance *)instance;
    if (self == NULL) {
        return;
    }
    cuda_model_free(&self->model);
    cpparity_batch_free(&self->local);
    free(self);
}

const cpparity_implementation cpparity_cuda_implementation = {
    "cuda-model",
    "cuda",
    "float32 or bf16-stored model on a CUDA device (cuBLAS), Ulysses, ring or hybrid context "
    "parallelism",
    {true, true},       /* f32, bf16 */
    {true, true, true}, /* layouts: contiguous, zigzag, round-robin (the latter two through the
                           kernel's block calls: model_cuda.h) */
    {true, true, true}, /* algorithms: Ulysses, ring (model_cuda_ring.cu) and hybrid */
    "cuda-f32",
    cuda_available,
    cuda_check,
    model_memory_cuda, /* host memory only (model_memory.h) */
    cuda_create,
    cuda_load_parameters,
    cuda_forward,
    cuda_backward,
    cuda_read_loss,
    cuda_read_logits,
    NULL, /* read_logits_rows: the slice's logits are kept on the device and read whole */
    cuda_gradient_count,
    cuda_gradient_name,
    cuda_read_gradient,
    cuda_destroy,
    true, /* zigzag and round-robin: the kernel's block calls on the sequence in rank order */
};
