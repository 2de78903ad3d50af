/* model_cuda_ring.cu — ring attention in the CUDA model (see model_cuda.h): ring.c's steps, rows,
 * merges, sums and shifts, on device buffers through ring.h's operations. The operations copy the
 * host index arrays ring.c chooses (a step's rows, a block's tokens) into the model's ring_index
 * on its stream, run the gathers, scatter-adds and the log-sum-exp merge (ring_merge.h, the same
 * __host__ __device__ code as the CPU's) as kernels of one thread per element or row, call the
 * CUDA kernel's block calls with device token arrays, and move the travelling blocks with the
 * model's device shift (NCCL, device to device between local ranks on one GPU, or staged through
 * the host). No atomics: every element is written by one thread, in ring.c's fixed order of
 * steps, so a run gives the same bits again. */
#include "distributed/models/model_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "distributed/cp/ring_merge.h"
#include "distributed/kernels/kernel_call.h"
}

#include "distributed/device/cuda_check.h"

/* Threads per block of the kernels below, and the most blocks (the loops stride over the rest). */
static const int64_t RING_THREADS = 256, RING_MOST_BLOCKS = 4096;

static int blocks_for(int64_t count) {
    const int64_t blocks = (count + RING_THREADS - 1) / RING_THREADS;
    return (int)(blocks < 1 ? 1 : blocks > RING_MOST_BLOCKS ? RING_MOST_BLOCKS : blocks);
}

__global__ static void fill_kernel(float *to, float value, int64_t count) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        to[i] = value;
    }
}

/* to [B, count, width] = rows of from [B, L, width]; one thread per element of to. */
__global__ static void gather_rows_kernel(float *to, const float *from, int64_t batch, int64_t L,
                                          int64_t width, const int64_t *rows, int64_t count) {
    const int64_t total = batch * count * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i % width, r = (i / width) % count, b = i / (width * count);
        to[i] = from[(b * L + rows[r]) * width + e];
    }
}

/* rows of to [B, L, width] += from [B, count, width]; one thread per element of from (the rows
 * are distinct: no two threads write one element). */
__global__ static void scatter_add_rows_kernel(float *to, const float *from, int64_t batch,
                                               int64_t L, int64_t width, const int64_t *rows,
                                               int64_t count) {
    const int64_t total = batch * count * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i % width, r = (i / width) % count, b = i / (width * count);
        to[(b * L + rows[r]) * width + e] += from[i];
    }
}

/* to [P, count] = columns rows of from [P, L]. */
__global__ static void gather_lse_kernel(float *to, const float *from, int64_t planes, int64_t L,
                                         const int64_t *rows, int64_t count) {
    const int64_t total = planes * count;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        to[i] = from[(i / count) * L + rows[i % count]];
    }
}

/* ring_merge_row for every (b, h, i); one thread per row of head_dim values. */
__global__ static void merge_rows_kernel(float *out, float *lse, const float *part_out,
                                         const float *part_lse, int64_t batch, int64_t L,
                                         int64_t heads, int64_t head_dim, const int64_t *rows,
                                         int64_t count, cpparity_fault fault) {
    const int64_t total = batch * heads * count;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t % count, h = (t / count) % heads, b = t / (count * heads);
        const int64_t row = rows[i];
        ring_merge_row(out + ((b * L + row) * heads + h) * head_dim,
                       &lse[(b * heads + h) * L + row],
                       part_out + ((b * count + i) * heads + h) * head_dim,
                       part_lse[(b * heads + h) * count + i], head_dim, fault);
    }
}

/* The slots of model->ring_index (ring_rows entries each): a step's rows, a block's query and key
 * tokens. */
enum { SLOT_ROWS = 0, SLOT_QUERY_TOKENS = 1, SLOT_KEY_TOKENS = 2 };

/* count host int64 values into slot `slot` of ring_index, on the stream (ordered before the
 * kernel that reads them and after the one that read the slot before). */
static cpparity_status upload_index(cuda_model *model, int slot, const int64_t *host, int64_t count,
                                    const int64_t **device, cpparity_error *error) {
    if (count > model->ring_rows) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: ring attention: %lld rows past the %lld of a member",
                                  model->comm->rank, (long long)count, (long long)model->ring_rows);
    }
    int64_t *to = model->ring_index + slot * model->ring_rows;
    CUDA_CHECK(cudaMemcpyAsync(to, host, (size_t)count * sizeof(int64_t), cudaMemcpyHostToDevice,
                               model->stream),
               error, "copying a ring step's rows to the device");
    *device = to;
    return CPPARITY_OK;
}

/* Whether the kernel just launched on the stream started; what names it. */
static cpparity_status launched(const char *what, cpparity_error *error) {
    CUDA_CHECK(cudaGetLastError(), error, what);
    return CPPARITY_OK;
}

/* --- ring.h's operations on the model's device memory -------------------------------------- */

static void *device_allocate(void *context, size_t bytes) {
    (void)context;
    void *memory = NULL;
    return cudaMalloc(&memory, bytes > 0 ? bytes : 1) == cudaSuccess ? memory : NULL;
}

static void device_release(void *context, void *memory) {
    (void)context;
    (void)cudaFree(memory); /* waits for the device's work on it first */
}

static cpparity_status device_copy(void *context, float *to, const float *from, int64_t count,
                                   cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    CUDA_CHECK(cudaMemcpyAsync(to, from, (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                               model->stream),
               error, "copying a ring buffer");
    return CPPARITY_OK;
}

static cpparity_status device_fill(void *context, float *to, float value, int64_t count,
                                   cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    fill_kernel<<<blocks_for(count), (int)RING_THREADS, 0, model->stream>>>(to, value, count);
    return launched("filling a ring buffer", error);
}

static cpparity_status device_gather_rows(void *context, float *to, const float *from,
                                          int64_t batch, int64_t L, int64_t width,
                                          const int64_t *rows, int64_t count,
                                          cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    const int64_t *on_device = NULL;
    const cpparity_status status = upload_index(model, SLOT_ROWS, rows, count, &on_device, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    gather_rows_kernel<<<blocks_for(batch * count * width), (int)RING_THREADS, 0, model->stream>>>(
        to, from, batch, L, width, on_device, count);
    return launched("gathering a ring step's rows", error);
}

static cpparity_status device_scatter_add_rows(void *context, float *to, const float *from,
                                               int64_t batch, int64_t L, int64_t width,
                                               const int64_t *rows, int64_t count,
                                               cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    const int64_t *on_device = NULL;
    const cpparity_status status = upload_index(model, SLOT_ROWS, rows, count, &on_device, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    scatter_add_rows_kernel<<<blocks_for(batch * count * width), (int)RING_THREADS, 0,
                              model->stream>>>(to, from, batch, L, width, on_device, count);
    return launched("adding a ring step's gradients into their rows", error);
}

static cpparity_status device_gather_lse(void *context, float *to, const float *from,
                                         int64_t planes, int64_t L, const int64_t *rows,
                                         int64_t count, cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    const int64_t *on_device = NULL;
    const cpparity_status status = upload_index(model, SLOT_ROWS, rows, count, &on_device, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    gather_lse_kernel<<<blocks_for(planes * count), (int)RING_THREADS, 0, model->stream>>>(
        to, from, planes, L, on_device, count);
    return launched("gathering a ring step's log-sum-exp", error);
}

static cpparity_status device_merge_rows(void *context, float *out, float *lse,
                                         const float *part_out, const float *part_lse,
                                         int64_t batch, int64_t L, int64_t heads, int64_t head_dim,
                                         const int64_t *rows, int64_t count, cpparity_fault fault,
                                         cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    const int64_t *on_device = NULL;
    const cpparity_status status = upload_index(model, SLOT_ROWS, rows, count, &on_device, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    merge_rows_kernel<<<blocks_for(batch * heads * count), (int)RING_THREADS, 0, model->stream>>>(
        out, lse, part_out, part_lse, batch, L, heads, head_dim, on_device, count, fault);
    return launched("merging a ring step's output (log-sum-exp)", error);
}

static cpparity_status device_shift(void *context, cpparity_comm *comm, const float *send,
                                    float *receive, int64_t count, int offset,
                                    cpparity_error *error) {
    cuda_model *model = (cuda_model *)context;
    (void)comm; /* the model's ring group, which model_ring gave ring.c */
    return cuda_model_shift_device(model, send, receive, count, offset, error);
}

/* The block with its tokens on the device (slots 1 and 2 of ring_index). */
static cpparity_status device_block(cuda_model *model, const cpparity_attention_block *block,
                                    cpparity_attention_block *on_device, cpparity_error *error) {
    *on_device = *block;
    cpparity_status status = upload_index(model, SLOT_QUERY_TOKENS, block->query_index,
                                          block->query_len, &on_device->query_index, error);
    if (status == CPPARITY_OK) {
        status = upload_index(model, SLOT_KEY_TOKENS, block->key_index, block->key_len,
                              &on_device->key_index, error);
    }
    return status;
}

static int device_forward_block(void *context, const cpparity_attention_kernel *kernel, float *out,
                                float *lse, const float *q, const float *k, const float *v,
                                const cpparity_mask_description *mask,
                                const cpparity_attention_dims *dims,
                                const cpparity_attention_block *block, float scale, char *message,
                                size_t size) {
    cuda_model *model = (cuda_model *)context;
    cpparity_attention_block on_device;
    cpparity_error error = {};
    if (device_block(model, block, &on_device, &error) != CPPARITY_OK) {
        snprintf(message, size, "%s", error.message);
        return 1;
    }
    kernel_call_begin(kernel); /* the threading contract (kernel_call.h) */
    const int failed =
        kernel->forward_block(kernel->context, out, lse, q, k, v, mask, dims, &on_device, scale,
                              (void *)model->stream, message, size);
    kernel_call_end(kernel);
    return failed;
}

static int device_backward_block(void *context, const cpparity_attention_kernel *kernel, float *dq,
                                 float *dk, float *dv, const float *dout, const float *q,
                                 const float *k, const float *v, const float *out, const float *lse,
                                 const cpparity_mask_description *mask,
                                 const cpparity_attention_dims *dims,
                                 const cpparity_attention_block *block, float scale, char *message,
                                 size_t size) {
    cuda_model *model = (cuda_model *)context;
    cpparity_attention_block on_device;
    cpparity_error error = {};
    if (device_block(model, block, &on_device, &error) != CPPARITY_OK) {
        snprintf(message, size, "%s", error.message);
        return 1;
    }
    kernel_call_begin(kernel);
    const int failed =
        kernel->backward_block(kernel->context, dq, dk, dv, dout, q, k, v, out, lse, mask, dims,
                               &on_device, scale, (void *)model->stream, message, size);
    kernel_call_end(kernel);
    return failed;
}

static const ring_operations device_operations = {
    NULL, /* the model, set per instance (cuda_model_ring_setup) */
    device_allocate,
    device_release,
    device_copy,
    device_fill,
    device_gather_rows,
    device_scatter_add_rows,
    device_gather_lse,
    device_merge_rows,
    device_shift,
    device_forward_block,
    device_backward_block,
};

/* --- the model's ring ----------------------------------------------------------------------- */

cpparity_status cuda_model_ring_tokens(cuda_model *model, cpparity_error *error) {
    const int64_t members = model->ring_group->comm->size, rows = model->ring_rows;
    const int64_t L = model->shard.local_len, U = model->ulysses_degree;
    if (model->ring_tokens == NULL) {
        model->ring_tokens = (int64_t *)malloc((size_t)(members * rows) * sizeof(int64_t));
        if (model->ring_tokens == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "rank %d: out of memory (ring tokens)", model->comm->rank);
        }
    }
    /* the shards as dealt: member m's row r is rank m·U + r / L's token r mod L (ring: U = 1,
     * the member's own shard; hybrid: its Ulysses group's ranks one after the other) */
    for (int64_t member = 0; member < members; member++) {
        for (int64_t row = 0; row < rows; row++) {
            model->ring_tokens[member * rows + row] =
                shard_position(&model->shard, member * U + row / L, row % L);
        }
    }
    model->ring_device_operations = device_operations;
    model->ring_device_operations.context = model;
    return CPPARITY_OK;
}

/* The ring of the model's ring group: every member's rows, the heads a member holds (every head
 * for ring, H/U for a hybrid), the device operations. */
static ring_setup model_ring(cuda_model *model) {
    ring_setup ring;
    memset(&ring, 0, sizeof ring);
    ring.comm = model->ring_group->comm;
    ring.rows = model->ring_rows;
    ring.tokens = model->ring_tokens;
    ring.kernel = model->kernel;
    ring.batch = model->batch;
    ring.heads = model->local_heads;
    ring.kv_heads = model->local_kv_heads;
    ring.head_dim = model->config.head_dim;
    ring.fault = model->fault;
    ring.operations = &model->ring_device_operations;
    return ring;
}

cpparity_status cuda_model_ring_forward(cuda_model *model, int64_t l, cpparity_error *error) {
    const cuda_layer_activations *a = &model->layer[l];
    const bool hybrid = model->algorithm.kind == CPPARITY_ALGORITHM_HYBRID;
    float *act = model->activations;
    const ring_setup ring = model_ring(model);
    const cpparity_mask_description mask = cuda_model_layer_mask(model, l);
    const int64_t count =
        model->batch * model->ring_rows * model->local_heads * model->config.head_dim;
    /* hybrid: the Ulysses group's tokens and this rank's heads, after its all-to-alls */
    cpparity_status status = ring_attention_forward(
        &ring, act + a->sequence_out, act + a->sequence_lse, act + (hybrid ? a->sequence_q : a->q),
        act + (hybrid ? a->sequence_k : a->k), act + (hybrid ? a->sequence_v : a->v), &mask,
        cuda_model_attention_scale(model), error);
    if (status == CPPARITY_OK) {
        status = cuda_model_store(model, act + a->sequence_out, count, error);
    }
    if (status != CPPARITY_OK || hybrid) { /* hybrid: the caller's all-to-all takes it back */
        return status;
    }
    /* the rank's own tokens with every head: the attention output as it is */
    CUDA_CHECK(cudaMemcpyAsync(act + a->attention, act + a->sequence_out,
                               (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                               model->stream),
               error, "copying the ring's output");
    return CPPARITY_OK;
}

cpparity_status cuda_model_ring_backward(cuda_model *model, int64_t l, cpparity_error *error) {
    const cuda_layer_activations *a = &model->layer[l];
    const bool hybrid = model->algorithm.kind == CPPARITY_ALGORITHM_HYBRID;
    const float *act = model->activations;
    const cuda_backward_buffers *d = &model->grad;
    const ring_setup ring = model_ring(model);
    const cpparity_mask_description mask = cuda_model_layer_mask(model, l);
    return ring_attention_backward(
        &ring, hybrid ? d->sequence_q : d->q, hybrid ? d->sequence_k : d->k,
        hybrid ? d->sequence_v : d->v, hybrid ? d->sequence_out : d->attention,
        act + (hybrid ? a->sequence_q : a->q), act + (hybrid ? a->sequence_k : a->k),
        act + (hybrid ? a->sequence_v : a->v), act + a->sequence_out, act + a->sequence_lse, &mask,
        cuda_model_attention_scale(model), error);
}
