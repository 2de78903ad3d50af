/*
 * gpu_mask_predicate.cu — the per-thread mask logic of distributed/kernels/mask_predicate.h,
 * compiled by nvcc and run on the GPU, must agree with the same header compiled for the host, pair
 * by pair, on padded and packed rows for every layer type. Skips (exit 77, with the reason) when
 * the machine has no CUDA device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/device/cuda_check.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"

enum { SKIPPED = 77, BATCH = 2, LENGTH = 37 };

/* allowed[(b·S + q)·S + k] = mask_allowed(b, q, k), one thread per pair. */
__global__ void evaluate(cpparity_mask_description mask, unsigned char *allowed) {
    const int64_t pair = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t S = mask.seq_len;
    if (pair >= mask.batch * S * S) {
        return;
    }
    const int64_t b = pair / (S * S), q = pair / S % S, k = pair % S;
    allowed[pair] = mask_allowed(&mask, b, q, k) ? 1 : 0;
}

/* Copies count elements of size bytes to a new device buffer. */
static cpparity_status to_device(void **device, const void *host, size_t bytes,
                                 cpparity_error *error) {
    CUDA_CHECK(cudaMalloc(device, bytes), error, "allocating a mask array");
    CUDA_CHECK(cudaMemcpy(*device, host, bytes, cudaMemcpyHostToDevice), error,
               "copying a mask array");
    return CPPARITY_OK;
}

/* Runs one layer on the device and counts pairs that differ from the host. */
static cpparity_status compare_layer(const mask_storage *storage, cpparity_attention_layer layer,
                                     int64_t *mismatches, cpparity_error *error) {
    const int64_t S = storage->seq_len, pairs = storage->batch * S * S;
    const size_t tokens = (size_t)(storage->batch * S);
    cpparity_mask_description device_mask = mask_storage_describe(storage, layer);
    const cpparity_mask_description host_mask = device_mask;
    void *document = NULL, *start = NULL, *valid = NULL, *padding = NULL, *allowed = NULL,
         *position = NULL;
    cpparity_status status = to_device(&document, storage->document, tokens * 8, error);
    if (status == CPPARITY_OK) {
        status = to_device(&start, storage->document_start, tokens * 8, error);
    }
    if (status == CPPARITY_OK) {
        status = to_device(&valid, storage->key_valid, tokens, error);
    }
    if (status == CPPARITY_OK) {
        status = to_device(&padding, storage->left_padding, (size_t)storage->batch * 8, error);
    }
    if (status == CPPARITY_OK) {
        status = to_device(&position, storage->position, tokens * 8, error);
    }
    unsigned char *result = (unsigned char *)malloc((size_t)pairs);
    if (status == CPPARITY_OK && cudaMalloc(&allowed, (size_t)pairs) != cudaSuccess) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "CUDA: allocating results");
    }
    if (status == CPPARITY_OK) {
        device_mask.document = (const int64_t *)document;
        device_mask.document_start = (const int64_t *)start;
        device_mask.key_valid = (const int8_t *)valid;
        device_mask.left_padding = (const int64_t *)padding;
        device_mask.position = (const int64_t *)position;
        evaluate<<<(unsigned)((pairs + 127) / 128), 128>>>(device_mask, (unsigned char *)allowed);
        const cudaError_t launched = cudaGetLastError();
        const cudaError_t finished = cudaDeviceSynchronize();
        if (launched != cudaSuccess || finished != cudaSuccess) {
            status = cpparity_error_set(
                error, CPPARITY_ERROR_RUNTIME, "CUDA: kernel failed: %s",
                cudaGetErrorString(launched != cudaSuccess ? launched : finished));
        }
    }
    if (status == CPPARITY_OK &&
        cudaMemcpy(result, allowed, (size_t)pairs, cudaMemcpyDeviceToHost) != cudaSuccess) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "CUDA: copying results back");
    }
    for (int64_t pair = 0; status == CPPARITY_OK && pair < pairs; pair++) {
        const int64_t b = pair / (S * S), q = pair / S % S, k = pair % S;
        *mismatches += result[pair] != (mask_allowed(&host_mask, b, q, k) ? 1 : 0);
    }
    free(result);
    cudaFree(document);
    cudaFree(start);
    cudaFree(valid);
    cudaFree(padding);
    cudaFree(position);
    cudaFree(allowed);
    return status;
}

int main(void) {
    int devices = 0;
    const cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0) {
        printf("SKIPPED: no CUDA device here (cudaGetDeviceCount: %s)\n",
               found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
        return SKIPPED;
    }
    /* row 0: 3 left padding, documents 10, 1, 20 starting at positions 0, 4 and 6 (mid-stream:
     * the position and document chunk grids differ), then 3 right padding; row 1: one document */
    int8_t attention_mask[BATCH * LENGTH];
    int64_t position_ids[BATCH * LENGTH];
    const int64_t lengths[] = {10, 1, 20}, starts[] = {0, 4, 6};
    int64_t t = 0;
    for (int i = 0; i < 3; i++, t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
    for (int d = 0; d < 3; d++) {
        for (int64_t i = 0; i < lengths[d]; i++, t++) {
            attention_mask[t] = 1;
            position_ids[t] = starts[d] + i;
        }
    }
    for (; t < LENGTH; t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
    for (int64_t i = 0; i < LENGTH; i++, t++) {
        attention_mask[t] = 1;
        position_ids[t] = i;
    }
    mask_storage storage;
    cpparity_error error;
    if (mask_storage_build(&storage, BATCH, LENGTH, attention_mask, position_ids, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "gpu_mask_predicate: %s\n", error.message);
        return 3;
    }
    const cpparity_attention_layer layers[] = {
        {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 3, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
        {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_POSITION},
    };
    int failed = 0, passed = 0;
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
        int64_t mismatches = 0;
        if (compare_layer(&storage, layers[l], &mismatches, &error) != CPPARITY_OK) {
            fprintf(stderr, "gpu_mask_predicate: layer %zu: %s\n", l, error.message);
            mask_storage_free(&storage);
            return 3;
        }
        if (mismatches > 0) {
            fprintf(stderr, "gpu_mask_predicate: layer type %d: %lld pairs differ from the host\n",
                    (int)layers[l].type, (long long)mismatches);
            failed++;
        } else {
            passed++;
        }
    }
    mask_storage_free(&storage);
    printf("gpu_mask_predicate: %d passed, %d failed\n", passed, failed);
    return failed > 0 ? 1 : 0;
}
