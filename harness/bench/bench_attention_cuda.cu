/*
 * bench_attention_cuda.cu — `cpparity-bench-attention`: times a CUDA attention kernel of the
 * registry (distributed/kernels/kernel_cuda.h) forward and forward+backward on one shape and mask,
 * and prints one JSON object per line (the fields of `cpparity bench reference --json`, plus `pass`
 * and `implementation`), for harness/bench/torch_attention.py to put side by side with PyTorch in
 * the same run (scripts/device-check.sh). A program, not a test: run it on a GPU.
 *
 *   cpparity-bench-attention [--kernel cuda-bf16] [--seq-len 4096] [--heads 16]
 *                            [--head-dim 128] [--mask causal|sliding|chunked|packed]
 *                            [--window 1024] [--chunk 2048] [--documents 16] [--repeats 5]
 *
 * TFLOP/s count allowed (query, key) pairs only: forward 4·Dh flops per pair and head (q·k and
 * p·v), forward+backward 14·Dh (the forward, q·k again, dv, dp, dq, dk), FlashAttention's
 * convention. Seconds are the median of --repeats timed calls after one warm-up call. Exit 0
 * after printing, 2 on a bad flag, 3 when there is no device or the kernel fails.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/device/bfloat16.h"
#include "distributed/kernels/kernel.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"

typedef struct bench_options {
    const char *kernel;
    const char *mask;
    int64_t seq_len, heads, head_dim, window, chunk, documents;
    int repeats;
} bench_options;

static int parse(bench_options *o, int argc, char **argv) {
    *o = (bench_options){"cuda-bf16", "causal", 4096, 16, 128, 1024, 2048, 16, 5};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "cpparity-bench-attention: %s needs a value\n", flag);
            return 2;
        }
        const char *value = argv[++i];
        char *end = NULL;
        const long long number = strtoll(value, &end, 10);
        const int numeric = end != value && *end == '\0' && number >= 1;
        if (strcmp(flag, "--kernel") == 0) {
            o->kernel = value;
        } else if (strcmp(flag, "--mask") == 0) {
            o->mask = value;
        } else if (numeric && strcmp(flag, "--seq-len") == 0) {
            o->seq_len = number;
        } else if (numeric && strcmp(flag, "--heads") == 0) {
            o->heads = number;
        } else if (numeric && strcmp(flag, "--head-dim") == 0) {
            o->head_dim = number;
        } else if (numeric && strcmp(flag, "--window") == 0) {
            o->window = number;
        } else if (numeric && strcmp(flag, "--chunk") == 0) {
            o->chunk = number;
        } else if (numeric && strcmp(flag, "--documents") == 0) {
            o->documents = number;
        } else if (numeric && strcmp(flag, "--repeats") == 0) {
            o->repeats = (int)number;
        } else {
            fprintf(stderr, "cpparity-bench-attention: bad flag or value: %s %s\n", flag, value);
            return 2;
        }
    }
    const char *masks[] = {"causal", "sliding", "chunked", "packed"};
    for (int m = 0; m < 4; m++) {
        if (strcmp(o->mask, masks[m]) == 0) {
            return 0;
        }
    }
    fprintf(stderr,
            "cpparity-bench-attention: --mask %s: expected causal, sliding, chunked or "
            "packed\n",
            o->mask);
    return 2;
}

/* The mask inputs of one row: packed rows restart positions at each of `documents` documents. */
static void mask_inputs(const bench_options *o, int8_t *attention_mask, int64_t *position_ids) {
    const int packed = strcmp(o->mask, "packed") == 0;
    const int64_t length = packed ? (o->seq_len + o->documents - 1) / o->documents : o->seq_len;
    for (int64_t t = 0; t < o->seq_len; t++) {
        attention_mask[t] = 1;
        position_ids[t] = t % length;
    }
}

/* Allowed pairs of the row, by the shared predicate (the definition the kernels implement). */
static double allowed_pairs(const cpparity_mask_description *mask, int64_t seq_len) {
    double pairs = 0.0;
    for (int64_t q = 0; q < seq_len; q++) {
        for (int64_t k = 0; k <= q; k++) {
            pairs += mask_allowed(mask, 0, q, k) ? 1.0 : 0.0;
        }
    }
    return pairs;
}

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define BENCH_CUDA(call)                                                                           \
    do {                                                                                           \
        const cudaError_t bench_code_ = (call);                                                    \
        if (bench_code_ != cudaSuccess) {                                                          \
            fprintf(stderr, "cpparity-bench-attention: %s failed: %s (%s:%d)\n", #call,            \
                    cudaGetErrorString(bench_code_), __FILE__, __LINE__);                          \
            return 3;                                                                              \
        }                                                                                          \
    } while (0)

/* Fills count elements of the kernel's element type with values in [-1, 1). */
static void fill_random(void *host, int64_t count, int bf16, uint64_t *state) {
    for (int64_t i = 0; i < count; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        const float value = (float)((*state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        if (bf16) {
            ((uint16_t *)host)[i] = bf16_from_float(value);
        } else {
            ((float *)host)[i] = value;
        }
    }
}

int main(int argc, char **argv) {
    bench_options o;
    const int parsed = parse(&o, argc, argv);
    if (parsed != 0) {
        return parsed;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        fprintf(stderr, "cpparity-bench-attention: no CUDA device\n");
        return 3;
    }
    const cpparity_attention_kernel *kernel = kernel_registry_find(o.kernel);
    if (kernel == NULL || kernel->device != CPPARITY_KERNEL_DEVICE_CUDA) {
        fprintf(stderr, "cpparity-bench-attention: --kernel %s: no such CUDA kernel\n", o.kernel);
        return 2;
    }
    const int bf16 = kernel->dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16;
    const size_t element = bf16 ? sizeof(uint16_t) : sizeof(float);
    const int64_t S = o.seq_len, H = o.heads, Dh = o.head_dim, count = S * H * Dh;

    int8_t *attention_mask = (int8_t *)malloc((size_t)S);
    int64_t *position_ids = (int64_t *)malloc((size_t)S * sizeof(int64_t));
    void *host = malloc((size_t)count * element);
    if (attention_mask == NULL || position_ids == NULL || host == NULL) {
        fprintf(stderr, "cpparity-bench-attention: out of memory\n");
        return 3;
    }
    mask_inputs(&o, attention_mask, position_ids);
    mask_storage storage;
    cpparity_error error;
    if (mask_storage_build(&storage, 1, S, attention_mask, position_ids, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity-bench-attention: %s\n", error.message);
        return 3;
    }
    cpparity_attention_layer layer = {CPPARITY_LAYER_FULL, o.window, o.chunk,
                                      CPPARITY_CHUNK_ORIGIN_ROW};
    if (strcmp(o.mask, "sliding") == 0) {
        layer.type = CPPARITY_LAYER_SLIDING;
    } else if (strcmp(o.mask, "chunked") == 0) {
        layer.type = CPPARITY_LAYER_CHUNKED;
    }
    const cpparity_mask_description mask = mask_storage_describe(&storage, layer);
    const cpparity_attention_dims dims = {1, S, H, H, Dh};
    const double pairs = allowed_pairs(&mask, S);

    void *buffers[8]; /* q k v out dout dq dk dv */
    float *lse = NULL;
    uint64_t state = 20261201;
    for (int b = 0; b < 8; b++) {
        BENCH_CUDA(cudaMalloc(&buffers[b], (size_t)count * element));
        fill_random(host, count, bf16, &state);
        BENCH_CUDA(cudaMemcpy(buffers[b], host, (size_t)count * element, cudaMemcpyHostToDevice));
    }
    BENCH_CUDA(cudaMalloc((void **)&lse, (size_t)(H * S) * sizeof(float)));
    cudaEvent_t start, stop;
    BENCH_CUDA(cudaEventCreate(&start));
    BENCH_CUDA(cudaEventCreate(&stop));
    const float scale = 1.0f / sqrtf((float)Dh);
    char message[512] = "";
    double *seconds = (double *)calloc((size_t)o.repeats, sizeof(double));
    const char *passes[2] = {"forward", "forward+backward"};
    for (int p = 0; p < 2; p++) {
        for (int r = -1; r < o.repeats; r++) { /* r = -1: the warm-up call */
            BENCH_CUDA(cudaEventRecord(start, NULL));
            int failed =
                kernel->forward(kernel->context, buffers[3], lse, buffers[0], buffers[1],
                                buffers[2], &mask, &dims, scale, NULL, message, sizeof message);
            if (!failed && p == 1) {
                failed =
                    kernel->backward(kernel->context, buffers[5], buffers[6], buffers[7],
                                     buffers[4], buffers[0], buffers[1], buffers[2], buffers[3],
                                     lse, &mask, &dims, scale, NULL, message, sizeof message);
            }
            if (failed) {
                fprintf(stderr, "cpparity-bench-attention: %s: %s\n", kernel->name, message);
                return 3;
            }
            BENCH_CUDA(cudaEventRecord(stop, NULL));
            BENCH_CUDA(cudaEventSynchronize(stop));
            float milliseconds = 0.0f;
            BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
            if (r >= 0) {
                seconds[r] = milliseconds / 1000.0;
            }
        }
        qsort(seconds, (size_t)o.repeats, sizeof *seconds, compare_doubles);
        const double median = seconds[o.repeats / 2];
        const double flops = (p == 0 ? 4.0 : 14.0) * pairs * (double)(H * Dh);
        printf("{\"what\": \"attention\", \"implementation\": \"%s\", \"pass\": \"%s\", "
               "\"mask\": \"%s\", \"batch\": 1, \"seq\": %lld, \"heads\": %lld, \"head_dim\": "
               "%lld, \"threads\": 0, \"allowed_pairs\": %.0f, \"seconds\": %.6e, \"gflops\": "
               "%.3f, \"tflops\": %.4f}\n",
               kernel->name, passes[p], o.mask, (long long)S, (long long)H, (long long)Dh, pairs,
               median, flops / median / 1e9, flops / median / 1e12);
        fflush(stdout);
    }
    for (int b = 0; b < 8; b++) {
        cudaFree(buffers[b]);
    }
    cudaFree(lse);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    mask_storage_free(&storage);
    free(seconds);
    free(host);
    free(attention_mask);
    free(position_ids);
    return 0;
}
