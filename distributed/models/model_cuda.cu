/* model_cuda.cu — storage, set-up, matrix products, all-to-alls and collectives of the CUDA
 * model (see model_cuda.h). */
#include "distributed/models/model_cuda.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "distributed/models/model_f32.h" /* f32_model_check_parallelism: the same constraints */
}

#include "distributed/device/bfloat16.h"
#include "distributed/models/cublas_check.h"
#include "distributed/device/cuda_check.h"
#include "distributed/kernels/kernel_support.h"

int64_t cuda_model_sequence_rows(const cuda_model *model) {
    return model->ring ? model->ring_rows : model->shard.padded_seq_len;
}

/* The saved activations' table and offsets: the CPU model's layout (activation_layout.h). */
static cpparity_status build_activations(cuda_model *model, cpparity_error *error) {
    const activation_layout_sizes sizes = {
        model->batch,       model->shard.local_len, cuda_model_sequence_rows(model),
        model->local_heads, model->local_kv_heads,  model->shard.local_len /* its logits kept */};
    return activation_layout_build(&model->activation_table, model->layer, &model->final_input,
                                   &model->final_rstd, &model->final_normed, &model->logits,
                                   &model->config, &sizes, error);
}

/* cudaMalloc of count elements into *pointer, checked. */
#define ALLOCATE(pointer, count)                                                                   \
    CUDA_CHECK(cudaMalloc(&(pointer), (size_t)(count) * sizeof *(pointer)), error,                 \
               "allocating device memory (" #pointer ")")

/* The stream, the cuBLAS handle and every buffer; the caller frees on failure. */
static cpparity_status allocate(cuda_model *model, cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const int64_t B = model->batch, L = model->shard.local_len, N = B * L;
    const int64_t S = cuda_model_sequence_rows(model), cp = model->shard.cp;
    const int64_t D = c->hidden_size, F = c->intermediate_size, Dh = c->head_dim;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, V = c->vocab_size;
    const int64_t Hl = model->local_heads, Hkvl = model->local_kv_heads;
    const int64_t widest = H > cp ? H : cp, P = model->parameter_table.total;
    CUDA_CHECK(cudaGetDevice(&model->device), error, "finding the current device");
    cudaStream_t stream = NULL;
    CUDA_CHECK(cudaStreamCreate(&stream), error, "creating the instance's stream");
    model->stream = stream;
    const cublas_library *blas = NULL;
    if (cublas_library_load(&blas, error) != CPPARITY_OK) {
        return error->status;
    }
    model->blas = blas;
    cublasHandle_t handle = NULL;
    CUBLAS_CHECK(blas->create(&handle), error, "creating the instance's handle");
    model->cublas = handle;
    CUBLAS_CHECK(blas->set_stream(handle, stream), error, "binding the handle to the stream");
    /* float32 as written: no TF32 or other reduced-precision shortcut */
    CUBLAS_CHECK(blas->set_math_mode(handle, CUBLAS_PEDANTIC_MATH), error, "setting the math mode");
    CUBLAS_CHECK(blas->set_atomics_mode(handle, CUBLAS_ATOMICS_NOT_ALLOWED), error,
                 "forbidding atomics (determinism)");
    ALLOCATE(model->parameters, P);
    ALLOCATE(model->gradients, P);
    ALLOCATE(model->activations, model->activation_table.total);
    ALLOCATE(model->input_ids, N);
    ALLOCATE(model->labels, N);
    ALLOCATE(model->positions, N);
    ALLOCATE(model->groups.ids, N);
    ALLOCATE(model->groups.starts, N + 1);
    ALLOCATE(model->groups.order, N);
    ALLOCATE(model->exchange, 2 * N * widest * Dh);
    ALLOCATE(model->repeated, N * cp * Dh);
    ALLOCATE(model->projection, N * D);
    ALLOCATE(model->row_loss, N);
    ALLOCATE(model->loss_sum, 1);
    cuda_backward_buffers *d = &model->grad;
    ALLOCATE(d->stream, N * D);
    ALLOCATE(d->residual, N * D);
    ALLOCATE(d->normed, N * D);
    ALLOCATE(d->swiglu, N * F);
    ALLOCATE(d->gate, N * F);
    ALLOCATE(d->up, N * F);
    ALLOCATE(d->attention, N * H * Dh);
    ALLOCATE(d->q, N * H * Dh);
    ALLOCATE(d->k, N * Hkv * Dh);
    ALLOCATE(d->v, N * Hkv * Dh);
    ALLOCATE(d->sequence_out, B * S * Hl * Dh);
    ALLOCATE(d->sequence_q, B * S * Hl * Dh);
    ALLOCATE(d->sequence_k, B * S * Hkvl * Dh);
    ALLOCATE(d->sequence_v, B * S * Hkvl * Dh);
    ALLOCATE(d->logits, N * V);
    if (model->ring) {
        ALLOCATE(model->ring_index, 3 * model->ring_rows);
    }
    CUDA_CHECK(cudaMemsetAsync(model->parameters, 0, (size_t)P * sizeof(float), stream), error,
               "zeroing the parameters");
    CUDA_CHECK(cudaMemsetAsync(model->gradients, 0, (size_t)P * sizeof(float), stream), error,
               "zeroing the gradients");
    if (model->device_comm) { /* the largest host collective: position_ids gathered */
        model->device_staging_bytes = (cp + 1) * N * (int64_t)sizeof(int64_t) + 512;
        CUDA_CHECK(cudaMalloc(&model->device_staging, (size_t)model->device_staging_bytes), error,
                   "allocating device staging");
    } else { /* the largest device collective: an all-to-all's send and receive, the ring's
                backward block (k, v, dk, dv of a member's rows) sent and received, or gradients */
        const int64_t exchange =
            model->algorithm.kind != CPPARITY_ALGORITHM_RING ? 2 * N * widest * Dh : 0;
        const int64_t block = model->ring ? 8 * B * model->ring_rows * Hkvl * Dh : 0;
        const int64_t largest = exchange > block ? exchange : block;
        model->host_staging_count = largest > P ? largest : P;
        CUDA_CHECK(
            cudaMallocHost(&model->host_staging, (size_t)model->host_staging_count * sizeof(float)),
            error, "allocating pinned host staging");
    }
    model->host_groups = (int64_t *)malloc((size_t)(4 * N + 1) * sizeof(int64_t));
    if (model->host_groups == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (cuda model)", model->comm->rank);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream), error, "finishing the set-up");
    return CPPARITY_OK;
}

cpparity_status cuda_model_upload_sequence_tokens(cuda_model *model, cpparity_error *error) {
    if (model->ring) {
        return cuda_model_ring_tokens(model, error); /* no all-to-all: the ring's own rows */
    }
    if (model->shard.kind == CPPARITY_LAYOUT_CONTIGUOUS) {
        return CPPARITY_OK; /* row i of the sequence is token i */
    }
    const int64_t cp = model->shard.cp, L = model->shard.local_len;
    int64_t *host = (int64_t *)malloc((size_t)(cp * L) * sizeof(int64_t));
    if (host == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (the sequence's tokens)",
                                  model->comm->rank);
    }
    for (int64_t i = 0; i < cp; i++) {
        for (int64_t t = 0; t < L; t++) {
            host[i * L + t] = shard_position(&model->shard, i, t);
        }
    }
    cudaError_t code = cudaSuccess;
    if (model->sequence_tokens == NULL) {
        code = cudaMalloc((void **)&model->sequence_tokens, (size_t)(cp * L) * sizeof(int64_t));
    }
    if (code == cudaSuccess) {
        code = cudaMemcpy(model->sequence_tokens, host, (size_t)(cp * L) * sizeof(int64_t),
                          cudaMemcpyHostToDevice);
    }
    free(host);
    CUDA_CHECK(code, error, "copying the sequence's tokens to the device");
    return CPPARITY_OK;
}

int cuda_model_kernel_forward(cuda_model *model, float *out, float *lse, const float *q,
                              const float *k, const float *v, const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims, float scale, char *message,
                              size_t size) {
    const cpparity_attention_kernel *kernel = model->kernel;
    if (model->sequence_tokens == NULL) {
        return kernel->forward(kernel->context, out, lse, q, k, v, mask, dims, scale,
                               (void *)model->stream, message, size);
    }
    const cpparity_attention_block block = {dims->seq_len, dims->seq_len, model->sequence_tokens,
                                            model->sequence_tokens};
    return kernel->forward_block(kernel->context, out, lse, q, k, v, mask, dims, &block, scale,
                                 (void *)model->stream, message, size);
}

int cuda_model_kernel_backward(cuda_model *model, float *dq, float *dk, float *dv,
                               const float *dout, const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims, float scale, char *message,
                               size_t size) {
    const cpparity_attention_kernel *kernel = model->kernel;
    if (model->sequence_tokens == NULL) {
        return kernel->backward(kernel->context, dq, dk, dv, dout, q, k, v, out, lse, mask, dims,
                                scale, (void *)model->stream, message, size);
    }
    const cpparity_attention_block block = {dims->seq_len, dims->seq_len, model->sequence_tokens,
                                            model->sequence_tokens};
    return kernel->backward_block(kernel->context, dq, dk, dv, dout, q, k, v, out, lse, mask, dims,
                                  &block, scale, (void *)model->stream, message, size);
}

/* The groups of the model's algorithm and its head counts (model_f32.c's set_up_algorithm).
 * Hybrid U×R: rank r is in Ulysses group r / U (consecutive ranks) at place r mod U; the ring
 * joins the ranks of one place across the R groups (hybrid-group-across-ring forms the groups
 * across the ring dimension instead, r mod R, while the token bookkeeping still assumes
 * consecutive groups). Every rank of comm calls it. */
static cpparity_status set_up_groups(cuda_model *model, cpparity_comm *comm, cpparity_fault fault,
                                     cpparity_error *error) {
    const cpparity_model_config *config = &model->config;
    const cpparity_algorithm_choice *algorithm = &model->algorithm;
    const int64_t cp = comm->size, rank = comm->rank;
    model->world.comm = comm;
    model->ulysses_group = &model->world;
    model->ring_group = &model->world;
    model->ring = algorithm->kind != CPPARITY_ALGORITHM_ULYSSES;
    model->ulysses_degree = algorithm->kind == CPPARITY_ALGORITHM_RING ? 1 : cp;
    if (algorithm->kind == CPPARITY_ALGORITHM_HYBRID) {
        const int64_t U = algorithm->ulysses_degree, R = algorithm->ring_degree;
        const bool across = fault == CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING;
        cpparity_status status = cpparity_comm_split(comm, (int)(across ? rank % R : rank / U),
                                                     (int)rank, &model->split[0].comm, error);
        model->split[0].owned = model->split[0].comm != NULL;
        if (status == CPPARITY_OK) {
            status = cpparity_comm_split(comm, (int)(across ? rank / R : rank % U), (int)rank,
                                         &model->split[1].comm, error);
            model->split[1].owned = model->split[1].comm != NULL;
        }
        if (status != CPPARITY_OK) {
            return status;
        }
        model->ulysses_group = &model->split[0];
        model->ring_group = &model->split[1];
        model->ulysses_degree = U;
    }
    const int64_t degree = model->ulysses_degree; /* ring: 1, every rank keeps every head */
    model->local_heads = config->num_attention_heads / degree;
    model->kv_replicated = config->num_key_value_heads % degree != 0;
    model->local_kv_heads = model->kv_replicated ? 1 : config->num_key_value_heads / degree;
    model->ring_rows = degree * model->shard.local_len;
    return CPPARITY_OK;
}

cpparity_status cuda_model_init(cuda_model *model, const cpparity_model_config *config,
                                const f32_model_shape *shape, cpparity_comm *comm,
                                const cpparity_attention_kernel *kernel, cpparity_error *error) {
    memset(model, 0, sizeof *model);
    const cpparity_layout layout = shape->layout;
    cpparity_status status = cpparity_model_config_validate(config, error);
    if (status == CPPARITY_OK) {
        status = f32_model_check_parallelism(config, comm->size, shape->algorithm, kernel, error);
    }
    if (status == CPPARITY_OK && layout != CPPARITY_LAYOUT_CONTIGUOUS &&
        !kernel_has_block_calls(kernel)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "refused: the %s layout calls the kernel on rows named by "
                                    "token (block calls, kernel ABI 3), which kernel %s lacks",
                                    cpparity_layout_name(layout), kernel->name);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    model->config = *config;
    model->dtype = shape->dtype;
    model->batch = shape->batch;
    model->algorithm = shape->algorithm;
    model->comm = comm;
    model->device_comm = comm->kind != NULL && strcmp(comm->kind, "nccl") == 0;
    model->kernel = kernel;
    model->shard = shard_layout_make(shape->seq_len, comm->size, comm->rank, layout);
    status = set_up_groups(model, comm, shape->fault, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameter_table(config, &model->parameter_table, error);
    }
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameters_locate(config, &model->parameter_table,
                                                  &model->parameter, error);
    }
    if (status == CPPARITY_OK) {
        status = build_activations(model, error);
    }
    if (status == CPPARITY_OK) {
        status = allocate(model, error);
    }
    if (status == CPPARITY_OK) {
        status = cuda_model_upload_sequence_tokens(model, error);
    }
    if (status != CPPARITY_OK) {
        cuda_model_free(model);
    }
    return status;
}

cpparity_status cuda_model_use_device(const cuda_model *model, cpparity_error *error) {
    CUDA_CHECK(cudaSetDevice(model->device), error, "making the instance's device current");
    return CPPARITY_OK;
}

/* Copies the host parameters to the device. */
static cpparity_status upload_parameters(cuda_model *model, const float *host,
                                         cpparity_error *error) {
    const size_t bytes = (size_t)model->parameter_table.total * sizeof(float);
    CUDA_CHECK(
        cudaMemcpyAsync(model->parameters, host, bytes, cudaMemcpyHostToDevice, model->stream),
        error, "copying the parameters to the device");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "copying the parameters");
    return CPPARITY_OK;
}

cpparity_status cuda_model_load_parameters(cuda_model *model, const cpparity_tensor_table *table,
                                           const double *values, cpparity_error *error) {
    const cpparity_tensor_table *own = &model->parameter_table;
    for (int64_t e = 0; e < own->count; e++) { /* every name and shape first: as model_f32.c */
        const cpparity_tensor_entry *entry = &own->entries[e];
        const cpparity_tensor_entry *given = cpparity_tensor_table_find(table, entry->name);
        if (given == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "rank %d: no weights given for parameter %s",
                                      model->comm->rank, entry->name);
        }
        bool same_shape = given->rank == entry->rank && given->count == entry->count;
        for (int d = 0; same_shape && d < entry->rank; d++) {
            same_shape = given->shape[d] == entry->shape[d];
        }
        if (!same_shape || given->offset + given->count > table->total) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "rank %d: the weights given for %s have %lld elements in "
                                      "%d dimensions, the model holds %lld",
                                      model->comm->rank, entry->name, (long long)given->count,
                                      given->rank, (long long)entry->count);
        }
    }
    float *host = (float *)malloc((size_t)own->total * sizeof(float));
    if (host == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (parameters)", model->comm->rank);
    }
    for (int64_t e = 0; e < own->count; e++) {
        const cpparity_tensor_entry *entry = &own->entries[e];
        const cpparity_tensor_entry *given = cpparity_tensor_table_find(table, entry->name);
        for (int64_t i = 0; i < entry->count; i++) {
            const float value = (float)values[given->offset + i];
            host[entry->offset + i] =
                model->dtype == CPPARITY_DTYPE_BF16 ? bf16_round(value) : value;
        }
    }
    const cpparity_status status = upload_parameters(model, host, error);
    free(host);
    return status;
}

cpparity_status cuda_model_copy_out(cuda_model *model, float *values, const float *source,
                                    int64_t count, cpparity_error *error) {
    CUDA_CHECK(cudaMemcpyAsync(values, source, (size_t)count * sizeof(float),
                               cudaMemcpyDeviceToHost, model->stream),
               error, "copying an output to the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "copying an output to the host");
    return CPPARITY_OK;
}

cpparity_status cuda_model_store(cuda_model *model, float *x, int64_t count,
                                 cpparity_error *error) {
    if (model->dtype == CPPARITY_DTYPE_BF16) {
        CUDA_CHECK(cuda_round_bf16(x, count, model->stream), error, "rounding to bfloat16");
    }
    return CPPARITY_OK;
}

/* Row-major out [N, O] = in [N, I] · weightᵀ, seen column-major by cuBLAS: weight is I × O, in
 * is I × N and out is O × N, so out = weightᵀ · in (layers_f32.c's cblas_sgemm, transposed). */
cpparity_status cuda_model_linear_forward(cuda_model *model, float *out, const float *in,
                                          const float *weight, int64_t rows, int64_t in_features,
                                          int64_t out_features, cpparity_error *error) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(model->blas->sgemm(model->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out_features,
                                    (int)rows, (int)in_features, &one, weight, (int)in_features, in,
                                    (int)in_features, &zero, out, (int)out_features),
                 error, "linear forward");
    return CPPARITY_OK;
}

cpparity_status cuda_model_linear_backward(cuda_model *model, float *din, float *dweight,
                                           const float *dout, const float *in, const float *weight,
                                           int64_t rows, int64_t in_features, int64_t out_features,
                                           bool accumulate, cpparity_error *error) {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    /* din [N, I] = dout [N, O] · weight [O, I]: column-major din (I × N) = weight (I × O) · dout
     * (O × N) */
    CUBLAS_CHECK(model->blas->sgemm(model->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)in_features,
                                    (int)rows, (int)out_features, &one, weight, (int)in_features,
                                    dout, (int)out_features, &beta, din, (int)in_features),
                 error, "linear backward (input)");
    /* dweight [O, I] += doutᵀ · in: column-major dweight (I × O) += in (I × N) · doutᵀ (N × O) */
    CUBLAS_CHECK(model->blas->sgemm(model->cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)in_features,
                                    (int)out_features, (int)rows, &one, in, (int)in_features, dout,
                                    (int)out_features, &one, dweight, (int)in_features),
                 error, "linear backward (weight)");
    return CPPARITY_OK;
}

/* --- local ranks on one device: device-to-device ----------------------------------------------
 * Ranks of the local communicator are threads of this process: when they all run on the same
 * device, one rank's device buffers are another's to read. A collective then swaps buffer
 * pointers through the host communicator (an all-gather, which is also the point where every
 * rank's data is ready), copies or adds device to device on the rank's own stream, and waits for
 * every rank to have finished reading before anyone reuses its buffer. Otherwise (mpi, or local
 * ranks on several devices) the data is staged through pinned host memory. */

/* Whether every rank of the group is a thread of this process on this rank's device: asked at
 * the first device collective, which every rank reaches at the same point of the step. */
static cpparity_status find_shared_device(cuda_model *model, cuda_group *group,
                                          cpparity_error *error) {
    if (group->shared_device_known) {
        return CPPARITY_OK;
    }
    group->shared_device_known = true;
    group->shared_device = false;
    cpparity_comm *comm = group->comm;
    if (comm->kind == NULL || strcmp(comm->kind, "local") != 0) {
        return CPPARITY_OK;
    }
    const int64_t size = comm->size;
    group->peer_pointers = (int64_t *)calloc((size_t)size, sizeof(int64_t));
    /* a rank out of memory says device -1: every rank then stages through the host */
    const int64_t mine = group->peer_pointers != NULL ? model->device : -1;
    /* Σ d and Σ d² over the ranks: n·Σd² = (Σd)² exactly when every d is the same (Cauchy–
     * Schwarz), a test every rank evaluates alike on the same sums */
    int64_t sums[2] = {mine, mine * mine};
    const cpparity_status status =
        cpparity_all_reduce_sum(comm, sums, sums, 2, CPPARITY_INT64, NULL, error);
    group->shared_device =
        status == CPPARITY_OK && size * sums[1] == sums[0] * sums[0] && sums[0] >= 0;
    return status;
}

/* Every rank's pointer into the group's peer_pointers, once this rank's stream has finished the
 * data. */
static cpparity_status swap_pointers(cuda_model *model, cuda_group *group, const float *mine,
                                     cpparity_error *error) {
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "finishing a collective's data");
    const int64_t pointer = (int64_t)(intptr_t)mine;
    return cpparity_all_gather(group->comm, &pointer, group->peer_pointers, 1, CPPARITY_INT64, NULL,
                               error);
}

/* Waits until every rank's stream has finished reading the others' buffers. */
static cpparity_status wait_for_readers(cuda_model *model, cuda_group *group,
                                        cpparity_error *error) {
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "reading the other ranks' buffers");
    int64_t token = 0;
    return cpparity_all_reduce_sum(group->comm, &token, &token, 1, CPPARITY_INT64, NULL, error);
}

/* The all-to-all device to device: block i of receive is block `rank` of rank i's send. */
static cpparity_status all_to_all_shared(cuda_model *model, cuda_group *group, const float *send,
                                         float *receive, int64_t count, cpparity_error *error) {
    const int64_t size = group->comm->size, rank = group->comm->rank;
    const int64_t *peers = group->peer_pointers;
    cpparity_status status = swap_pointers(model, group, send, error);
    for (int64_t i = 0; status == CPPARITY_OK && i < size; i++) {
        const float *peer = (const float *)(intptr_t)peers[i];
        const cudaError_t code =
            cudaMemcpyAsync(receive + i * count, peer + rank * count, (size_t)count * sizeof(float),
                            cudaMemcpyDeviceToDevice, model->stream);
        if (code != cudaSuccess) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "CUDA: rank %d: copying rank %lld's block of an "
                                        "all-to-all failed: %s (%s:%d)",
                                        model->comm->rank, (long long)i, cudaGetErrorString(code),
                                        __FILE__, __LINE__);
        }
    }
    /* every rank reaches this point, also after a failed copy: no rank waits alone */
    const cpparity_status waited = wait_for_readers(model, group, error);
    return status != CPPARITY_OK ? status : waited;
}

/* The all-reduce device to device: every rank sums every rank's values in rank order (the same
 * bits everywhere) into its scratch, then, once all have read, takes the sum. */
static cpparity_status all_reduce_shared(cuda_model *model, cuda_group *group, float *values,
                                         int64_t count, cpparity_error *error) {
    const int64_t size = group->comm->size;
    cpparity_status status = CPPARITY_OK;
    if (count > model->reduce_scratch_count) { /* made at the first use, as large as asked */
        if (model->reduce_scratch != NULL) {
            (void)cudaFree(model->reduce_scratch);
        }
        model->reduce_scratch_count = 0;
        if (cudaMalloc(&model->reduce_scratch, (size_t)count * sizeof(float)) != cudaSuccess) {
            model->reduce_scratch = NULL;
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "rank %d: no device memory for an all-reduce's sum of "
                                        "%lld floats",
                                        model->comm->rank, (long long)count);
        } else {
            model->reduce_scratch_count = count;
        }
    }
    const int64_t *peers = group->peer_pointers;
    /* a rank that failed above still swaps and waits: no rank waits alone */
    const cpparity_status swapped = swap_pointers(model, group, values, error);
    status = status != CPPARITY_OK ? status : swapped;
    float *sum = model->reduce_scratch;
    cudaError_t code = cudaSuccess;
    if (status == CPPARITY_OK) {
        code =
            cudaMemcpyAsync(sum, (const float *)(intptr_t)peers[0], (size_t)count * sizeof(float),
                            cudaMemcpyDeviceToDevice, model->stream);
    }
    for (int64_t r = 1; status == CPPARITY_OK && code == cudaSuccess && r < size; r++) {
        code = cuda_add(sum, sum, (const float *)(intptr_t)peers[r], count, model->stream);
    }
    if (status == CPPARITY_OK && code != cudaSuccess) {
        status =
            cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                               "CUDA: rank %d: summing the ranks' values device to device "
                               "failed: %s (%s:%d)",
                               model->comm->rank, cudaGetErrorString(code), __FILE__, __LINE__);
    }
    const cpparity_status waited = wait_for_readers(model, group, error);
    if (status != CPPARITY_OK || waited != CPPARITY_OK) {
        return status != CPPARITY_OK ? status : waited;
    }
    CUDA_CHECK(cudaMemcpyAsync(values, sum, (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                               model->stream),
               error, "taking the all-reduce's sum");
    return CPPARITY_OK;
}

/* An all-to-all of device buffers (count floats per rank) over the Ulysses group. */
static cpparity_status all_to_all_device(cuda_model *model, const float *send, float *receive,
                                         int64_t count, cpparity_error *error) {
    cuda_group *group = model->ulysses_group;
    if (model->device_comm) {
        return cpparity_all_to_all(group->comm, send, receive, count, CPPARITY_FLOAT32,
                                   (void *)model->stream, error);
    }
    const cpparity_status known = find_shared_device(model, group, error);
    if (known != CPPARITY_OK) {
        return known;
    }
    if (group->shared_device) {
        return all_to_all_shared(model, group, send, receive, count, error);
    }
    const int64_t size = group->comm->size;
    if (2 * size * count > model->host_staging_count) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: all-to-all of %lld floats past the staging buffer",
                                  model->comm->rank, (long long)(size * count));
    }
    float *host_send = model->host_staging, *host_receive = model->host_staging + size * count;
    const size_t bytes = (size_t)(size * count) * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(host_send, send, bytes, cudaMemcpyDeviceToHost, model->stream),
               error, "staging an all-to-all on the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "staging an all-to-all on the host");
    const cpparity_status status = cpparity_all_to_all(group->comm, host_send, host_receive, count,
                                                       CPPARITY_FLOAT32, NULL, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cudaMemcpyAsync(receive, host_receive, bytes, cudaMemcpyHostToDevice, model->stream),
               error, "copying an all-to-all's result to the device");
    return CPPARITY_OK;
}

cpparity_status cuda_model_heads_to_sequence(cuda_model *model, float *out, const float *in,
                                             int64_t heads, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, U = model->ulysses_degree;
    const int64_t Dh = model->config.head_dim, block = B * L * (heads / U) * Dh;
    float *send = model->exchange, *receive = model->exchange + U * block;
    if (model->fault == CPPARITY_FAULT_A2A_HEAD_ORDER) {
        const cpparity_status ordered =
            cuda_model_fault_order_heads(model, model->ordered, in, heads, error);
        if (ordered != CPPARITY_OK) {
            return ordered;
        }
        in = model->ordered;
    }
    CUDA_CHECK(cuda_pack_heads_to_sequence(send, in, B, L, heads, Dh, U, model->stream), error,
               "packing heads for the all-to-all");
    const cpparity_status status = all_to_all_device(model, send, receive, block, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_unpack_heads_to_sequence(out, receive, B, L, heads, Dh, U, model->stream),
               error, "unpacking the sequence after the all-to-all");
    return CPPARITY_OK;
}

cpparity_status cuda_model_sequence_to_heads(cuda_model *model, float *out, const float *in,
                                             int64_t heads, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len, U = model->ulysses_degree;
    const int64_t Dh = model->config.head_dim, block = B * L * (heads / U) * Dh;
    float *send = model->exchange, *receive = model->exchange + U * block;
    CUDA_CHECK(cuda_pack_sequence_to_heads(send, in, B, L, heads, Dh, U, model->stream), error,
               "packing the sequence for the all-to-all");
    const cpparity_status status = all_to_all_device(model, send, receive, block, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cuda_unpack_sequence_to_heads(out, receive, B, L, heads, Dh, U, model->stream),
               error, "unpacking heads after the all-to-all");
    return CPPARITY_OK;
}

cpparity_status cuda_model_all_reduce_device(cuda_model *model, float *values, int64_t count,
                                             cpparity_error *error) {
    if (model->device_comm) {
        return cpparity_all_reduce_sum(model->comm, values, values, count, CPPARITY_FLOAT32,
                                       (void *)model->stream, error);
    }
    const cpparity_status known = find_shared_device(model, &model->world, error);
    if (known != CPPARITY_OK) {
        return known;
    }
    if (model->world.shared_device) {
        return all_reduce_shared(model, &model->world, values, count, error);
    }
    if (count > model->host_staging_count) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: all-reduce of %lld floats past the staging buffer",
                                  model->comm->rank, (long long)count);
    }
    const size_t bytes = (size_t)count * sizeof(float);
    CUDA_CHECK(
        cudaMemcpyAsync(model->host_staging, values, bytes, cudaMemcpyDeviceToHost, model->stream),
        error, "staging an all-reduce on the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "staging an all-reduce on the host");
    const cpparity_status status =
        cpparity_all_reduce_sum(model->comm, model->host_staging, model->host_staging, count,
                                CPPARITY_FLOAT32, NULL, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(
        cudaMemcpyAsync(values, model->host_staging, bytes, cudaMemcpyHostToDevice, model->stream),
        error, "copying an all-reduce's result to the device");
    return CPPARITY_OK;
}

/* nccl: the device staging buffer split at a 256-byte boundary after `first` bytes. */
static cpparity_status device_staging_split(cuda_model *model, int64_t first, int64_t second,
                                            char **low, char **high, cpparity_error *error) {
    const int64_t offset = (first + 255) / 256 * 256;
    if (offset + second > model->device_staging_bytes) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: a collective of %lld bytes past the device staging "
                                  "buffer",
                                  model->comm->rank, (long long)(offset + second));
    }
    *low = (char *)model->device_staging;
    *high = *low + offset;
    return CPPARITY_OK;
}

/* The shift device to device between local ranks on one GPU: rank r copies rank r − offset's
 * send into its receive, once every rank's send is ready, and all wait until every rank has read.
 */
static cpparity_status shift_shared(cuda_model *model, cuda_group *group, const float *send,
                                    float *receive, int64_t count, int offset,
                                    cpparity_error *error) {
    const int64_t size = group->comm->size, rank = group->comm->rank;
    const int64_t *peers = group->peer_pointers;
    cpparity_status status = swap_pointers(model, group, send, error);
    const int64_t source = ((rank - offset) % size + size) % size;
    if (status == CPPARITY_OK) {
        const cudaError_t code =
            cudaMemcpyAsync(receive, (const float *)(intptr_t)peers[source],
                            (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice, model->stream);
        if (code != cudaSuccess) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "CUDA: rank %d: copying rank %lld's block of a ring shift "
                                        "failed: %s (%s:%d)",
                                        model->comm->rank, (long long)source,
                                        cudaGetErrorString(code), __FILE__, __LINE__);
        }
    }
    /* every rank reaches this point, also after a failed copy: no rank waits alone */
    const cpparity_status waited = wait_for_readers(model, group, error);
    return status != CPPARITY_OK ? status : waited;
}

cpparity_status cuda_model_shift_device(cuda_model *model, const float *send, float *receive,
                                        int64_t count, int offset, cpparity_error *error) {
    cuda_group *group = model->ring_group;
    if (model->device_comm) {
        return cpparity_shift(group->comm, send, receive, count, CPPARITY_FLOAT32, offset,
                              (void *)model->stream, error);
    }
    const cpparity_status known = find_shared_device(model, group, error);
    if (known != CPPARITY_OK) {
        return known;
    }
    if (group->shared_device) {
        return shift_shared(model, group, send, receive, count, offset, error);
    }
    if (2 * count > model->host_staging_count) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: ring shift of %lld floats past the staging buffer",
                                  model->comm->rank, (long long)count);
    }
    float *host_send = model->host_staging, *host_receive = model->host_staging + count;
    const size_t bytes = (size_t)count * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(host_send, send, bytes, cudaMemcpyDeviceToHost, model->stream),
               error, "staging a ring shift on the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "staging a ring shift on the host");
    const cpparity_status status = cpparity_shift(group->comm, host_send, host_receive, count,
                                                  CPPARITY_FLOAT32, offset, NULL, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cudaMemcpyAsync(receive, host_receive, bytes, cudaMemcpyHostToDevice, model->stream),
               error, "copying a ring shift's block to the device");
    return CPPARITY_OK;
}

cpparity_status cuda_model_all_reduce_host(cuda_model *model, void *values, int64_t count,
                                           cpparity_element_type type, cpparity_error *error) {
    if (!model->device_comm) {
        return cpparity_all_reduce_sum(model->comm, values, values, count, type, NULL, error);
    }
    const int64_t bytes = count * cpparity_element_size(type);
    char *staged = NULL, *unused = NULL;
    cpparity_status status = device_staging_split(model, bytes, 0, &staged, &unused, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(
        cudaMemcpyAsync(staged, values, (size_t)bytes, cudaMemcpyHostToDevice, model->stream),
        error, "staging an all-reduce on the device");
    status = cpparity_all_reduce_sum(model->comm, staged, staged, count, type,
                                     (void *)model->stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(
        cudaMemcpyAsync(values, staged, (size_t)bytes, cudaMemcpyDeviceToHost, model->stream),
        error, "copying an all-reduce's result to the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "finishing an all-reduce");
    return CPPARITY_OK;
}

cpparity_status cuda_model_all_gather_host(cuda_model *model, const void *send, void *receive,
                                           int64_t count_per_rank, cpparity_element_type type,
                                           cpparity_error *error) {
    if (!model->device_comm) {
        return cpparity_all_gather(model->comm, send, receive, count_per_rank, type, NULL, error);
    }
    const int64_t bytes = count_per_rank * cpparity_element_size(type);
    const int64_t gathered = bytes * model->shard.cp;
    char *staged_send = NULL, *staged_receive = NULL;
    cpparity_status status =
        device_staging_split(model, bytes, gathered, &staged_send, &staged_receive, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(
        cudaMemcpyAsync(staged_send, send, (size_t)bytes, cudaMemcpyHostToDevice, model->stream),
        error, "staging an all-gather on the device");
    status = cpparity_all_gather(model->comm, staged_send, staged_receive, count_per_rank, type,
                                 (void *)model->stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    CUDA_CHECK(cudaMemcpyAsync(receive, staged_receive, (size_t)gathered, cudaMemcpyDeviceToHost,
                               model->stream),
               error, "copying an all-gather's result to the host");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "finishing an all-gather");
    return CPPARITY_OK;
}

cpparity_mask_description cuda_model_layer_mask(const cuda_model *model, int64_t l) {
    return layer_attention_mask(&model->mask, &model->config, l, model->fault);
}

float cuda_model_attention_scale(const cuda_model *model) {
    return layer_attention_scale(model->config.head_dim, model->fault);
}

void cuda_model_free(cuda_model *model) {
    if (model->stream != NULL) { /* nothing in flight may touch what is freed below */
        (void)cudaSetDevice(model->device);
        (void)cudaStreamSynchronize(model->stream);
    }
    void *const device[] = {
        model->parameters,      model->gradients,
        model->activations,     model->input_ids,
        model->labels,          model->positions,
        model->sequence_tokens, model->groups.ids,
        model->groups.starts,   model->groups.order,
        model->exchange,        model->repeated,
        model->projection,      model->row_loss,
        model->loss_sum,        model->grad.stream,
        model->grad.residual,   model->grad.normed,
        model->grad.swiglu,     model->grad.gate,
        model->grad.up,         model->grad.attention,
        model->grad.q,          model->grad.k,
        model->grad.v,          model->grad.sequence_out,
        model->grad.sequence_q, model->grad.sequence_k,
        model->grad.sequence_v, model->grad.logits,
        model->device_staging,  model->ordered,
        model->reduce_scratch,  model->ring_index,
    };
    for (size_t i = 0; i < sizeof device / sizeof *device; i++) {
        if (device[i] != NULL) {
            (void)cudaFree(device[i]);
        }
    }
    if (model->host_staging != NULL) {
        (void)cudaFreeHost(model->host_staging);
    }
    if (model->cublas != NULL) {
        (void)model->blas->destroy(model->cublas);
    }
    if (model->stream != NULL) {
        (void)cudaStreamDestroy(model->stream);
    }
    free(model->host_groups);
    free(model->ring_tokens);
    free(model->host_rope_positions);
    free(model->world.peer_pointers);
    for (int g = 0; g < 2; g++) { /* a hybrid's groups, split at init */
        free(model->split[g].peer_pointers);
        if (model->split[g].owned) {
            cpparity_comm_free(model->split[g].comm);
        }
    }
    free(model->reported_logits);
    mask_storage_free(&model->mask);
    cpparity_tensor_table_free(&model->parameter_table);
    cpparity_tensor_table_free(&model->activation_table);
    memset(model, 0, sizeof *model);
}
