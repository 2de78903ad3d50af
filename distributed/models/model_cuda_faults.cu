/* model_cuda_faults.cu — the self-test's faults (common/fault.h) in the CUDA model, at the same
 * places and with the same deviations as the CPU model (see model_cuda.h). The faults of the
 * mask, the layer's description and scale, the shard and the loss are host code shared with the
 * CPU model (mask_description.h, layer_attention.h, shard.h) or a few host lines; those that
 * rearrange device data (the all-to-all's head order, the kv repeat and its sum, the gradient's
 * reduction, the reported slice) copy it to the host, run the CPU model's own function on it
 * (ulysses.h) and copy it back: slow, exact, and only ever run with a fault planted. */
#include "distributed/models/model_cuda.h"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "distributed/cp/ulysses.h"
}

#include "distributed/device/cuda_check.h"

cpparity_status cuda_model_set_fault(cuda_model *model, cpparity_fault fault,
                                     cpparity_error *error) {
    if ((int)fault < 0 || fault >= CPPARITY_FAULT_COUNT) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no fault number %d", (int)fault);
    }
    if (cpparity_faults[fault].kernel) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: fault %s lives in the built-in cpu-f32 kernel",
                                  cpparity_faults[fault].name);
    }
    model->fault = fault;
    if (fault == CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP) { /* the dealing itself (shard.h), before the
                                                        first slice; the kernel's rows follow it */
        model->shard.fault = fault;
        const cpparity_status status = cuda_model_use_device(model, error);
        if (status != CPPARITY_OK) {
            return status;
        }
        return cuda_model_upload_sequence_tokens(model, error);
    }
    const int64_t N = model->batch * model->shard.local_len;
    if (fault == CPPARITY_FAULT_POSITIONS_LOCAL && model->host_rope_positions == NULL) {
        model->host_rope_positions = (int64_t *)malloc((size_t)N * sizeof(int64_t));
        if (model->host_rope_positions == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "rank %d: out of memory (fault %s)", model->comm->rank,
                                      cpparity_fault_name(fault));
        }
        for (int64_t i = 0; i < N; i++) {
            model->host_rope_positions[i] = i % model->shard.local_len; /* restarted per shard */
        }
    }
    if (fault == CPPARITY_FAULT_A2A_HEAD_ORDER && model->ordered == NULL) {
        const int64_t H = model->config.num_attention_heads, cp = model->shard.cp;
        const int64_t widest = H > cp ? H : cp; /* cp: at least a hybrid's U */
        const cpparity_status status = cuda_model_use_device(model, error);
        if (status != CPPARITY_OK) {
            return status;
        }
        CUDA_CHECK(cudaMalloc(&model->ordered,
                              (size_t)(N * widest * model->config.head_dim) * sizeof(float)),
                   error, "allocating device memory (fault a2a-head-order)");
    }
    if (fault == CPPARITY_FAULT_STALE_RANK_SLICE && model->reported_logits == NULL) {
        model->reported_logits =
            (float *)calloc((size_t)(N * model->config.vocab_size), sizeof(float));
        if (model->reported_logits == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "rank %d: out of memory (fault %s)", model->comm->rank,
                                      cpparity_fault_name(fault));
        }
    }
    return CPPARITY_OK;
}

/* count floats of host memory to the device, on the model's stream, waited for (the way back
 * is cuda_model_copy_out). */
static cpparity_status to_device(cuda_model *model, float *device, const float *host, int64_t count,
                                 cpparity_error *error) {
    CUDA_CHECK(cudaMemcpyAsync(device, host, (size_t)count * sizeof(float), cudaMemcpyHostToDevice,
                               model->stream),
               error, "copying host data to the device (a planted fault)");
    CUDA_CHECK(cudaStreamSynchronize(model->stream), error, "a planted fault's copy");
    return CPPARITY_OK;
}

/* Two host buffers of first and second floats, or an error. */
static cpparity_status host_buffers(const cuda_model *model, float **first, int64_t first_count,
                                    float **second, int64_t second_count, cpparity_error *error) {
    *first = (float *)malloc((size_t)first_count * sizeof(float));
    *second = (float *)malloc((size_t)second_count * sizeof(float));
    if (*first == NULL || *second == NULL) {
        free(*first);
        free(*second);
        *first = *second = NULL;
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (fault %s)", model->comm->rank,
                                  cpparity_fault_name(model->fault));
    }
    return CPPARITY_OK;
}

cpparity_status cuda_model_fault_order_heads(cuda_model *model, float *ordered, const float *in,
                                             int64_t heads, cpparity_error *error) {
    /* the all-to-all's degree: cp, or a hybrid's U (its Ulysses group packs) */
    const int64_t N = model->batch * model->shard.local_len, degree = model->ulysses_degree;
    const int64_t Dh = model->config.head_dim, local_heads = heads / degree;
    float *host_in = NULL, *host_out = NULL;
    cpparity_status status =
        host_buffers(model, &host_in, N * heads * Dh, &host_out, N * heads * Dh, error);
    if (status == CPPARITY_OK) {
        status = cuda_model_copy_out(model, host_in, in, N * heads * Dh, error);
    }
    /* the normal packing sends block j = heads [j·H/degree, (j+1)·H/degree) of `ordered`: put
     * there the heads the CPU model's faulty packing sends to rank j of the Ulysses group */
    for (int64_t token = 0; status == CPPARITY_OK && token < N; token++) {
        for (int64_t j = 0; j < degree; j++) {
            for (int64_t i = 0; i < local_heads; i++) {
                const int64_t head = ulysses_sent_head(j, i, heads, degree, model->fault);
                memcpy(host_out + (token * heads + j * local_heads + i) * Dh,
                       host_in + (token * heads + head) * Dh, (size_t)Dh * sizeof(float));
            }
        }
    }
    if (status == CPPARITY_OK) {
        status = to_device(model, ordered, host_out, N * heads * Dh, error);
    }
    free(host_in);
    free(host_out);
    return status;
}

/* A CPU model function of the kv repeat (ulysses.h) applied to device data through the host:
 * in [N, in_heads, Dh] to out [N, out_heads, Dh]. */
typedef void (*kv_function)(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                            int64_t cp, int64_t head_dim, cpparity_fault fault);

static cpparity_status kv_through_host(cuda_model *model, float *out, int64_t out_heads,
                                       const float *in, int64_t in_heads, kv_function function,
                                       cpparity_error *error) {
    const int64_t N = model->batch * model->shard.local_len, degree = model->ulysses_degree;
    const int64_t Hkv = model->config.num_key_value_heads, Dh = model->config.head_dim;
    float *host_in = NULL, *host_out = NULL;
    cpparity_status status =
        host_buffers(model, &host_in, N * in_heads * Dh, &host_out, N * out_heads * Dh, error);
    if (status == CPPARITY_OK) {
        status = cuda_model_copy_out(model, host_in, in, N * in_heads * Dh, error);
    }
    if (status == CPPARITY_OK) {
        function(host_out, host_in, N, Hkv, degree, Dh, model->fault);
        status = to_device(model, out, host_out, N * out_heads * Dh, error);
    }
    free(host_in);
    free(host_out);
    return status;
}

cpparity_status cuda_model_fault_repeat_kv(cuda_model *model, float *out, const float *in,
                                           cpparity_error *error) {
    return kv_through_host(model, out, model->ulysses_degree, in, model->config.num_key_value_heads,
                           ulysses_repeat_kv_mapped, error);
}

cpparity_status cuda_model_fault_sum_repeated_kv(cuda_model *model, float *out, const float *in,
                                                 cpparity_error *error) {
    return kv_through_host(model, out, model->config.num_key_value_heads, in, model->ulysses_degree,
                           ulysses_sum_repeated_kv_mapped, error);
}

cpparity_status cuda_model_fault_truncate_logits(cuda_model *model, cpparity_error *error) {
    const int64_t L = model->shard.local_len, V = model->config.vocab_size;
    const int64_t kept = shard_truncated_length(&model->shard);
    for (int64_t b = 0; b < model->batch; b++) {
        for (int64_t t = 0; t < L; t++) {
            if (shard_position(&model->shard, model->shard.rank, t) >= kept) { /* no logits */
                CUDA_CHECK(cudaMemsetAsync(model->activations + model->logits + (b * L + t) * V, 0,
                                           (size_t)V * sizeof(float), model->stream),
                           error, "zeroing a truncated token's logits (fault autopad-truncate)");
            }
        }
    }
    return CPPARITY_OK;
}

/* Every rank's count device floats at device, gathered into host_all [cp, count]. */
static cpparity_status gather_to_host(cuda_model *model, float *host_all, const float *device,
                                      int64_t count, cpparity_error *error) {
    const int64_t cp = model->shard.cp;
    if (model->device_comm) {
        float *gathered = NULL;
        CUDA_CHECK(cudaMalloc(&gathered, (size_t)(cp * count) * sizeof(float)), error,
                   "allocating a planted fault's all-gather");
        cpparity_status status = cpparity_all_gather(
            model->comm, device, gathered, count, CPPARITY_FLOAT32, (void *)model->stream, error);
        if (status == CPPARITY_OK) {
            status = cuda_model_copy_out(model, host_all, gathered, cp * count, error);
        }
        (void)cudaStreamSynchronize(model->stream);
        (void)cudaFree(gathered);
        return status;
    }
    float *mine = (float *)malloc((size_t)count * sizeof(float));
    if (mine == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (fault %s)", model->comm->rank,
                                  cpparity_fault_name(model->fault));
    }
    cpparity_status status = cuda_model_copy_out(model, mine, device, count, error);
    if (status == CPPARITY_OK) {
        status =
            cpparity_all_gather(model->comm, mine, host_all, count, CPPARITY_FLOAT32, NULL, error);
    }
    free(mine);
    return status;
}

cpparity_status cuda_model_fault_report_stale_slice(cuda_model *model, cpparity_error *error) {
    const int64_t slice = model->batch * model->shard.local_len * model->config.vocab_size;
    const int64_t cp = model->shard.cp;
    float *all = (float *)malloc((size_t)(cp * slice) * sizeof(float));
    if (all == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "rank %d: out of memory",
                                  model->comm->rank);
    }
    cpparity_status status =
        gather_to_host(model, all, model->activations + model->logits, slice, error);
    if (status == CPPARITY_OK) { /* the next rank's slice, as the CPU model reports it */
        memcpy(model->reported_logits, all + (model->shard.rank + 1) % cp * slice,
               (size_t)slice * sizeof(float));
    }
    free(all);
    return status;
}

cpparity_status cuda_model_fault_reduce_gradients(cuda_model *model, cpparity_error *error) {
    const int64_t total = model->parameter_table.total, cp = model->shard.cp;
    if (model->fault == CPPARITY_FAULT_GRAD_NOT_REDUCED) {
        return CPPARITY_OK;
    }
    float *all = NULL, *summed = NULL;
    cpparity_status status = host_buffers(model, &all, cp * total, &summed, total, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (model->fault == CPPARITY_FAULT_GRAD_REDUCE_ORDER) { /* summed from this rank on */
        status = gather_to_host(model, all, model->gradients, total, error);
        for (int64_t i = 0; status == CPPARITY_OK && i < total; i++) {
            float sum = 0.0f;
            for (int64_t r = 0; r < cp; r++) {
                sum += all[((model->shard.rank + r) % cp) * total + i];
            }
            summed[i] = sum;
        }
    } else { /* grad-scaled-by-cp: summed, then averaged as data parallelism would */
        status = cuda_model_all_reduce_device(model, model->gradients, total, error);
        if (status == CPPARITY_OK) {
            status = cuda_model_copy_out(model, summed, model->gradients, total, error);
        }
        for (int64_t i = 0; status == CPPARITY_OK && i < total; i++) {
            summed[i] /= (float)cp;
        }
    }
    if (status == CPPARITY_OK) {
        status = to_device(model, model->gradients, summed, total, error);
    }
    free(all);
    free(summed);
    return status;
}
