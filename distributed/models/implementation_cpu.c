/*
 * implementation_cpu.c — the context-parallel model on CPU ranks (distributed/models/model_f32.h),
 * float32 or bfloat16 storage with float32 arithmetic, behind the implementation interface
 * (distributed/models/implementation.h): one instance holds the model, this rank's slice of the
 * last batch (for backward) and nothing else. The attention kernel computes in float32 on the
 * stored values (bfloat16-rounded q, k, v for bf16); its output is rounded at storage.
 */
#include <stdlib.h>
#include <string.h>

#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/models/model_f32.h"
#include "distributed/models/model_memory.h"
#include "distributed/cp/shard.h"

/* One instance: the model and the slice of the batch forward was given. */
typedef struct cpu_instance {
    f32_model model;                   /* parameters, gradients, activations */
    cpparity_batch local;              /* this rank's B × L tokens of the last forward */
    bool forward_done;                 /* forward ran (backward needs it) */
    bool backward_done;                /* backward ran (gradients are complete) */
    kernel_cpu_options kernel_options; /* a fault planted in the built-in kernel */
    cpparity_attention_kernel kernel;  /* the built-in kernel with those options */
} cpu_instance;

static cpparity_status cpu_check(const cpparity_model_config *config, int64_t cp,
                                 cpparity_dtype dtype, cpparity_algorithm_choice algorithm,
                                 const cpparity_attention_kernel *kernel, cpparity_error *error) {
    if ((int)dtype < 0 || (int)dtype >= CPPARITY_DTYPE_COUNT ||
        !cpparity_cpu_implementation.dtypes[dtype]) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: the cpu implementation has no %s storage",
                                  cpparity_dtype_name(dtype));
    }
    if (kernel == NULL || kernel->device != CPPARITY_KERNEL_DEVICE_CPU ||
        kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: the cpu implementation needs a CPU float32 attention "
                                  "kernel, got %s",
                                  kernel != NULL && kernel->name != NULL ? kernel->name : "none");
    }
    return f32_model_check_parallelism(config, cp, algorithm, kernel, error);
}

/* The self-test's fault (fault.h) in the model and, for the kernel's faults and gqa-kv-mapping,
 * in a copy of the built-in kernel told about it. */
static cpparity_status plant_fault(cpu_instance *made, const cpparity_implementation_setup *setup,
                                   cpparity_error *error) {
    const cpparity_fault fault = setup->fault;
    if ((int)fault < 0 || fault >= CPPARITY_FAULT_COUNT) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no fault number %d", (int)fault);
    }
    if (fault == CPPARITY_FAULT_NONE) {
        return CPPARITY_OK;
    }
    made->kernel_options.fault = fault;
    made->kernel_options.shard_length = made->model.shard.local_len;
    const bool copied =
        kernel_cpu_with_options(&made->kernel, setup->kernel, &made->kernel_options);
    if (cpparity_faults[fault].kernel && !copied) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--inject %s lives in the built-in cpu-f32 kernel; kernel %s "
                                  "cannot have it planted",
                                  cpparity_faults[fault].name, setup->kernel->name);
    }
    if (copied) {
        made->model.kernel = &made->kernel;
    }
    return f32_model_set_fault(&made->model, fault, error);
}

static cpparity_status cpu_create(const cpparity_implementation_setup *setup, void **instance,
                                  cpparity_error *error) {
    *instance = NULL;
    cpparity_status status = cpu_check(setup->config, setup->comm->size, setup->dtype,
                                       setup->algorithm, setup->kernel, error);
    if (status == CPPARITY_OK &&
        ((int)setup->layout < 0 || (int)setup->layout >= CPPARITY_LAYOUT_COUNT ||
         (int)setup->algorithm.kind < 0 ||
         (int)setup->algorithm.kind >= CPPARITY_ALGORITHM_COUNT)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no layout %d or algorithm %d",
                                    (int)setup->layout, (int)setup->algorithm.kind);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    cpu_instance *made = calloc(1, sizeof *made);
    if (made == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (cpu implementation)", setup->comm->rank);
    }
    const f32_model_shape shape = {setup->batch,  setup->seq_len,   setup->dtype,
                                   setup->layout, setup->algorithm, setup->fault};
    status = f32_model_init(&made->model, setup->config, &shape, setup->comm, setup->kernel, error);
    if (status != CPPARITY_OK) {
        free(made);
        return status;
    }
    status = plant_fault(made, setup, error);
    if (status != CPPARITY_OK) {
        f32_model_free(&made->model);
        free(made);
        return status;
    }
    *instance = made;
    return CPPARITY_OK;
}

static cpparity_status cpu_load_parameters(void *instance, const cpparity_tensor_table *table,
                                           const double *values, cpparity_error *error) {
    cpu_instance *self = instance;
    return f32_model_load_parameters(&self->model, table, values, error);
}

static cpparity_status cpu_forward(void *instance, const cpparity_batch *batch,
                                   cpparity_error *error) {
    cpu_instance *self = instance;
    f32_model *model = &self->model;
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
    cpparity_status status = shard_slice_batch(&self->local, batch, &model->shard, error);
    if (status == CPPARITY_OK) { /* every run: the shard faults deviate only when planted */
        shard_inject(&self->local, &model->shard, model->fault);
    }
    if (status == CPPARITY_OK) {
        status = f32_model_forward(model, &self->local, error);
    }
    self->forward_done = status == CPPARITY_OK;
    return status;
}

static cpparity_status cpu_backward(void *instance, cpparity_error *error) {
    cpu_instance *self = instance;
    if (!self->forward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: backward called before forward",
                                  self->model.comm->rank);
    }
    cpparity_status status = f32_model_backward(&self->model, &self->local, error);
    self->backward_done = status == CPPARITY_OK;
    return status;
}

static cpparity_status cpu_read_loss(void *instance, float *loss, cpparity_error *error) {
    cpu_instance *self = instance;
    if (!self->forward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank %d: no loss before forward",
                                  self->model.comm->rank);
    }
    *loss = self->model.loss;
    return CPPARITY_OK;
}

static cpparity_status cpu_read_logits(void *instance, float *logits, int64_t count,
                                       cpparity_error *error) {
    cpu_instance *self = instance;
    const f32_model *model = &self->model;
    const int64_t held = model->batch * model->shard.local_len * model->config.vocab_size;
    if (!self->forward_done || count != held) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: asked for %lld logits, this rank holds %lld%s",
                                  model->comm->rank, (long long)count, (long long)held,
                                  self->forward_done ? "" : " (no forward yet)");
    }
    const int64_t L = model->shard.local_len, V = model->config.vocab_size;
    for (int64_t b = 0; b < model->batch; b++) {
        f32_model_logits_rows(model, b, 0, L, logits + b * L * V);
    }
    return CPPARITY_OK;
}

static cpparity_status cpu_read_logits_rows(void *instance, int64_t batch_row, int64_t row,
                                            int64_t count, float *rows, cpparity_error *error) {
    cpu_instance *self = instance;
    const f32_model *model = &self->model;
    const int64_t L = model->shard.local_len;
    if (!self->forward_done || batch_row < 0 || batch_row >= model->batch || row < 0 || count < 0 ||
        count > L - row) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "rank %d: asked for logits rows [%lld, %lld) of batch row %lld; "
                                  "this rank holds %lld rows of %lld batch rows%s",
                                  model->comm->rank, (long long)row, (long long)(row + count),
                                  (long long)batch_row, (long long)L, (long long)model->batch,
                                  self->forward_done ? "" : " (no forward yet)");
    }
    f32_model_logits_rows(model, batch_row, row, count, rows);
    return CPPARITY_OK;
}

static int64_t cpu_gradient_count(void *instance) {
    const cpu_instance *self = instance;
    return self->model.parameter_table.count;
}

static const char *cpu_gradient_name(void *instance, int64_t index) {
    const cpu_instance *self = instance;
    const cpparity_tensor_table *table = &self->model.parameter_table;
    return index >= 0 && index < table->count ? table->entries[index].name : NULL;
}

static cpparity_status cpu_read_gradient(void *instance, const char *name, float *values,
                                         int64_t count, cpparity_error *error) {
    cpu_instance *self = instance;
    const f32_model *model = &self->model;
    const cpparity_tensor_entry *entry = cpparity_tensor_table_find(&model->parameter_table, name);
    if (entry == NULL || entry->count != count || !self->backward_done) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank %d: gradient %s: %s",
                                  model->comm->rank, name,
                                  entry == NULL          ? "no such parameter"
                                  : !self->backward_done ? "no backward yet"
                                                         : "asked for a different element count");
    }
    memcpy(values, model->gradients + entry->offset, (size_t)count * sizeof(float));
    return CPPARITY_OK;
}

static void cpu_destroy(void *instance) {
    cpu_instance *self = instance;
    if (self == NULL) {
        return;
    }
    f32_model_free(&self->model);
    cpparity_batch_free(&self->local);
    free(self);
}

const cpparity_implementation cpparity_cpu_implementation = {
    .name = "cpu-f32-model",
    .device = "cpu",
    .description = "float32 or bf16-stored model, Ulysses, ring or hybrid context parallelism on "
                   "CPU ranks",
    .dtypes = {[CPPARITY_DTYPE_F32] = true, [CPPARITY_DTYPE_BF16] = true},
    .layouts = {[CPPARITY_LAYOUT_CONTIGUOUS] = true,
                [CPPARITY_LAYOUT_ZIGZAG] = true,
                [CPPARITY_LAYOUT_ROUND_ROBIN] = true},
    .algorithms = {[CPPARITY_ALGORITHM_ULYSSES] = true,
                   [CPPARITY_ALGORITHM_RING] = true,
                   [CPPARITY_ALGORITHM_HYBRID] = true},
    .default_kernel = "cpu-f32",
    .available = NULL, /* wherever cpparity runs */
    .check = cpu_check,
    .estimate = model_memory_cpu,
    .create = cpu_create,
    .load_parameters = cpu_load_parameters,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .read_loss = cpu_read_loss,
    .read_logits = cpu_read_logits,
    .read_logits_rows = cpu_read_logits_rows,
    .gradient_count = cpu_gradient_count,
    .gradient_name = cpu_gradient_name,
    .read_gradient = cpu_read_gradient,
    .destroy = cpu_destroy,
};
