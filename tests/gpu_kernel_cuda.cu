/*
 * gpu_kernel_cuda.cu — the CUDA attention kernels (distributed/kernels/kernel_cuda.h), "cuda-f32"
 * and "cuda-bf16", forward and backward on the GPU, against the built-in CPU kernel
 * (distributed/kernels/kernel_cpu.h) run on the host on the same inputs: for bf16 the CPU kernel
 * gets the bf16 values widened to float32. Random layouts (left and right padding, packed
 * documents, a row of padding only), every layer type and both chunk origins, GQA and MQA, head
 * dimensions 1 to 256, sequences of 1 to 300 tokens (several tiles, partial last tiles).
 *
 * Every output buffer is filled with NaN before each call (an element the kernel forgets stays
 * NaN and fails), fully masked rows must have out = 0 and lse = −∞, and two calls (the second on
 * a stream of its own) must give identical bits. The backward of both kernels gets the forward
 * outputs of the GPU kernel, so it is compared on identical inputs. One line per configuration,
 * then a summary; exit 0 when everything passed, 1 otherwise, 77 (skipped, with the reason) when
 * the machine has no CUDA device. Last, cuda-f32 must keep masked values (Inf, NaN) out of every
 * output it is not allowed to see (tests/support/masked_values_contract.h).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "distributed/device/bfloat16.h"
#include "distributed/kernels/kernel_cuda.h"
#include "distributed/kernels/mask_description.h"
extern "C" { /* C headers without their own C++ guard */
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_device_staging.h"
#include "distributed/kernels/kernel_registry.h"
#include "tests/support/masked_values_contract.h"
}

enum { SKIPPED = 77 };

/* float32 against float32: the CUDA kernels sum in another order than the CPU kernel (key tiles
 * of 64 instead of 32; dk and dv over the group's heads before the query tiles), contract to
 * fused multiply-adds and use the device's expf (within 2 ulp). That moves results by a few 1e-6
 * of the tensor's largest element in practice and ~1e-5 at worst for the ~900-term sums here;
 * 1e-4 (of the largest element, and of the element itself) keeps a margin and stays far below
 * what one wrong pair, row or head costs (1e-2 and more). */
#define FLOAT32_TOLERANCE 1e-4
/* bf16 outputs are the float32 result rounded to nearest even: off by at most half an ulp, 2^-8
 * of the value (8 significant bits), on top of the float32 differences above. */
#define BFLOAT16_ROUNDING 0.00390625
/* lse is float32 for both dtypes (maximum + log of a float32 sum): about 1e-6 relative; 1e-4 of
 * max(1, |lse|) keeps the same margin as FLOAT32_TOLERANCE. */
#define LSE_TOLERANCE 1e-4

/* Layout of the rows of a configuration (flags). */
enum {
    LEFT_PADDING = 1,  /* random leading padding (up to S/3) */
    RIGHT_PADDING = 2, /* random trailing padding */
    PACKED = 4,        /* random documents of 1 to S/4 tokens instead of one */
    MID_STREAM = 8,    /* documents start at random positions (0 to 9), not at 0 */
    EMPTY_ROW = 8,     /* row 1 is padding only (every query of it fully masked) */
};

typedef struct test_case {
    const char *name;
    int64_t batch, seq_len, heads, kv_heads, head_dim;
    cpparity_attention_layer layer; /* type, window, chunk size, chunk origin */
    unsigned layout;
} test_case;

#define FULL                                                                                       \
    { CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW }
#define SLIDING(w)                                                                                 \
    { CPPARITY_LAYER_SLIDING, (w), 0, CPPARITY_CHUNK_ORIGIN_ROW }
#define CHUNKED(c, origin)                                                                         \
    { CPPARITY_LAYER_CHUNKED, 0, (c), CPPARITY_CHUNK_ORIGIN_##origin }

static const test_case cases[] = {
    {"one-token", 1, 1, 1, 1, 8, FULL, 0},
    {"full-left-padding-gqa", 3, 37, 4, 2, 59, FULL, LEFT_PADDING | EMPTY_ROW},
    {"full-right-padding-mqa", 2, 129, 3, 1, 64, FULL, RIGHT_PADDING},
    {"full-packed-both-paddings", 2, 300, 2, 2, 128, FULL, LEFT_PADDING | RIGHT_PADDING | PACKED},
    {"sliding-w1", 2, 65, 2, 1, 8, SLIDING(1), LEFT_PADDING | RIGHT_PADDING},
    {"sliding-w17-packed-gqa", 2, 200, 6, 2, 64, SLIDING(17), LEFT_PADDING | PACKED},
    {"sliding-w100-mqa", 2, 257, 2, 1, 128, SLIDING(100), RIGHT_PADDING | PACKED},
    {"chunked-row-c24", 2, 150, 4, 4, 59, CHUNKED(24, ROW), LEFT_PADDING | PACKED},
    {"chunked-row-c64-mqa", 2, 300, 4, 1, 64, CHUNKED(64, ROW), LEFT_PADDING | EMPTY_ROW},
    {"chunked-document-c40-gqa", 2, 280, 4, 2, 128, CHUNKED(40, DOCUMENT),
     LEFT_PADDING | RIGHT_PADDING | PACKED},
    {"chunked-document-c7", 2, 100, 2, 1, 8, CHUNKED(7, DOCUMENT), PACKED},
    {"chunked-position-c11-mid-stream", 2, 160, 4, 2, 64, CHUNKED(11, POSITION),
     LEFT_PADDING | PACKED | MID_STREAM},
    {"head-dim-1", 2, 70, 2, 2, 1, FULL, LEFT_PADDING | PACKED},
    {"head-dim-256", 2, 90, 2, 1, 256, SLIDING(40), LEFT_PADDING | PACKED},
};

/* --- inputs ---------------------------------------------------------------------------------- */

/* A 64-bit linear congruential generator (Knuth's MMIX constants); the high bits are used. */
static uint32_t next_random(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 32);
}

static int64_t random_below(uint64_t *state, int64_t bound) {
    return bound > 0 ? (int64_t)(next_random(state) % (uint64_t)bound) : 0;
}

/* Uniform in [-range, range). */
static float random_value(uint64_t *state, float range) {
    return range * ((float)(next_random(state) >> 8) / 8388608.0f - 1.0f);
}

/* attention_mask and position_ids of one row: padding has position 0 (each padding token is its
 * own document), each document counts from 0. */
static void build_row(int8_t *attention_mask, int64_t *position_ids, int64_t S, unsigned layout,
                      bool empty, uint64_t *random) {
    int64_t left = 0, right = 0;
    if (empty) {
        left = S;
    } else {
        if (layout & LEFT_PADDING) {
            left = random_below(random, S / 3 + 1);
        }
        if (layout & RIGHT_PADDING) {
            right = random_below(random, (S - left) / 3 + 1);
        }
    }
    int64_t t = 0;
    for (; t < left; t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
    while (t < S - right) {
        int64_t length = S - right - t;
        if (layout & PACKED) {
            const int64_t longest = 1 + random_below(random, S / 4 > 1 ? S / 4 : 1);
            length = length < longest ? length : longest;
        }
        const int64_t start = (layout & MID_STREAM) ? random_below(random, 10) : 0;
        for (int64_t i = 0; i < length; i++, t++) {
            attention_mask[t] = 1;
            position_ids[t] = start + i;
        }
    }
    for (; t < S; t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
}

/* count values in [-range, range), rounded to bf16 when bf16 (the values both kernels see). */
static void fill_values(float *values, int64_t count, float range, bool bf16, uint64_t *random) {
    for (int64_t i = 0; i < count; i++) {
        const float x = random_value(random, range);
        values[i] = bf16 ? bf16_round(x) : x;
    }
}

/* --- device buffers -------------------------------------------------------------------------- */

static bool cuda_ok(cudaError_t code, const char *what) {
    if (code != cudaSuccess) {
        fprintf(stderr, "gpu_kernel_cuda: CUDA: %s: %s (%s)\n", what, cudaGetErrorName(code),
                cudaGetErrorString(code));
        return false;
    }
    return true;
}

/* Host values to a device tensor of the kernel's dtype (bf16: values must be bf16 already). */
static bool upload(void *device, const float *values, int64_t count, bool bf16) {
    if (!bf16) {
        return cuda_ok(
            cudaMemcpy(device, values, (size_t)count * sizeof(float), cudaMemcpyHostToDevice),
            "copying an input to the device");
    }
    uint16_t *bits = (uint16_t *)malloc((size_t)count * sizeof(uint16_t));
    if (bits == NULL) {
        fprintf(stderr, "gpu_kernel_cuda: out of memory\n");
        return false;
    }
    for (int64_t i = 0; i < count; i++) {
        bits[i] = bf16_from_float(values[i]);
    }
    const bool ok =
        cuda_ok(cudaMemcpy(device, bits, (size_t)count * sizeof(uint16_t), cudaMemcpyHostToDevice),
                "copying an input to the device");
    free(bits);
    return ok;
}

/* The raw bytes of a device tensor of count elements. */
static bool fetch(void *raw, const void *device, int64_t count, bool bf16) {
    const size_t bytes = (size_t)count * (bf16 ? sizeof(uint16_t) : sizeof(float));
    return cuda_ok(cudaMemcpy(raw, device, bytes, cudaMemcpyDeviceToHost), "copying a result back");
}

/* Raw bytes of count elements widened to float32. */
static void widen(float *values, const void *raw, int64_t count, bool bf16) {
    for (int64_t i = 0; i < count; i++) {
        values[i] = bf16 ? bf16_to_float(((const uint16_t *)raw)[i]) : ((const float *)raw)[i];
    }
}

/* NaN in every element (all bits set: a NaN in float32 and in bf16). */
static bool poison(void *device, size_t bytes) {
    return cuda_ok(cudaMemset(device, 0xff, bytes), "filling an output with NaN");
}

/* --- comparison ------------------------------------------------------------------------------ */

/* Largest |gpu − reference| / (absolute · largest |reference| + relative · |reference|) over a
 * tensor: above 1 fails; NaN anywhere gives INFINITY. Reports the first failing element. */
static double worst_ratio(const char *tensor, const float *gpu, const float *reference,
                          int64_t count, double absolute, double relative) {
    double largest = 0.0;
    for (int64_t i = 0; i < count; i++) {
        largest = fmax(largest, fabs((double)reference[i]));
    }
    const double floor_of_scale = 1e-30; /* an all-zero reference still has a bound above 0 */
    double worst = 0.0;
    bool reported = false;
    for (int64_t i = 0; i < count; i++) {
        const double bound =
            absolute * fmax(largest, floor_of_scale) + relative * fabs((double)reference[i]);
        const double difference = fabs((double)gpu[i] - (double)reference[i]);
        const double ratio = difference <= bound ? difference / bound : INFINITY;
        if (!(difference <= bound) && !reported) {
            fprintf(stderr, "    %s[%lld]: gpu %.9g, cpu %.9g (bound %.3g)\n", tensor, (long long)i,
                    (double)gpu[i], (double)reference[i], bound);
            reported = true;
        }
        if (!(ratio <= worst)) {
            worst = ratio;
        }
    }
    return worst;
}

/* lse: −∞ exactly where the reference has it, else within LSE_TOLERANCE · max(1, |lse|). */
static double lse_ratio(const float *gpu, const float *reference, int64_t count) {
    double worst = 0.0;
    bool reported = false;
    for (int64_t i = 0; i < count; i++) {
        double ratio;
        if (reference[i] == -INFINITY || gpu[i] == -INFINITY) {
            ratio = gpu[i] == reference[i] ? 0.0 : INFINITY;
        } else {
            const double bound = LSE_TOLERANCE * fmax(1.0, fabs((double)reference[i]));
            const double difference = fabs((double)gpu[i] - (double)reference[i]);
            ratio = difference <= bound ? difference / bound : INFINITY;
        }
        if (ratio == INFINITY && !reported) {
            fprintf(stderr, "    lse[%lld]: gpu %.9g, cpu %.9g\n", (long long)i, (double)gpu[i],
                    (double)reference[i]);
            reported = true;
        }
        worst = fmax(worst, ratio);
    }
    return worst;
}

/* Fully masked rows (lse = −∞ in the reference) must have out exactly 0; returns how many rows
 * there were, or −1 when one has a non-zero out. out is [B, S, H, Dh], lse [B, H, S]. */
static int64_t check_masked_rows(const float *out, const float *reference_lse,
                                 const cpparity_attention_dims *d) {
    int64_t rows = 0;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t h = 0; h < d->heads; h++) {
            for (int64_t t = 0; t < d->seq_len; t++) {
                if (reference_lse[(b * d->heads + h) * d->seq_len + t] != -INFINITY) {
                    continue;
                }
                rows++;
                const float *row = out + ((b * d->seq_len + t) * d->heads + h) * d->head_dim;
                for (int64_t i = 0; i < d->head_dim; i++) {
                    if (row[i] != 0.0f) {
                        fprintf(stderr, "    out of fully masked row b=%lld h=%lld t=%lld: %g\n",
                                (long long)b, (long long)h, (long long)t, (double)row[i]);
                        return -1;
                    }
                }
            }
        }
    }
    return rows;
}

/* --- one configuration on one kernel --------------------------------------------------------- */

/* Host arrays (float32 values) and device tensors of one configuration. */
typedef struct buffers {
    int64_t q_count, kv_count, rows; /* elements of q (and out, dout, dq), of k (v, dk, dv), rows */
    float *q, *k, *v, *dout;         /* inputs */
    float *out, *lse;                /* GPU forward, widened */
    float *reference_out, *reference_lse;
    float *dq, *dk, *dv; /* GPU backward, widened */
    float *reference_dq, *reference_dk, *reference_dv;
    void *raw, *raw_again; /* raw bytes of the first call's results, of the second call's */
    void *device_q, *device_k, *device_v, *device_dout, *device_out, *device_lse;
    void *device_dq, *device_dk, *device_dv;
} buffers;

static void free_buffers(buffers *b) {
    float *const host[] = {b->q,
                           b->k,
                           b->v,
                           b->dout,
                           b->out,
                           b->lse,
                           b->reference_out,
                           b->reference_lse,
                           b->dq,
                           b->dk,
                           b->dv,
                           b->reference_dq,
                           b->reference_dk,
                           b->reference_dv};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) {
        free(host[i]);
    }
    free(b->raw);
    free(b->raw_again);
    void *const device[] = {b->device_q,    b->device_k,   b->device_v,
                            b->device_dout, b->device_out, b->device_lse,
                            b->device_dq,   b->device_dk,  b->device_dv};
    for (size_t i = 0; i < sizeof device / sizeof *device; i++) {
        cudaFree(device[i]);
    }
    memset(b, 0, sizeof *b);
}

static bool allocate_buffers(buffers *b, const cpparity_attention_dims *d, bool bf16) {
    memset(b, 0, sizeof *b);
    b->q_count = d->batch * d->seq_len * d->heads * d->head_dim;
    b->kv_count = d->batch * d->seq_len * d->kv_heads * d->head_dim;
    b->rows = d->batch * d->heads * d->seq_len;
    const size_t q_floats = (size_t)b->q_count * sizeof(float);
    const size_t kv_floats = (size_t)b->kv_count * sizeof(float);
    const size_t element = bf16 ? sizeof(uint16_t) : sizeof(float);
    b->q = (float *)malloc(q_floats);
    b->k = (float *)malloc(kv_floats);
    b->v = (float *)malloc(kv_floats);
    b->dout = (float *)malloc(q_floats);
    b->out = (float *)malloc(q_floats);
    b->lse = (float *)malloc((size_t)b->rows * sizeof(float));
    b->reference_out = (float *)malloc(q_floats);
    b->reference_lse = (float *)malloc((size_t)b->rows * sizeof(float));
    b->dq = (float *)malloc(q_floats);
    b->dk = (float *)malloc(kv_floats);
    b->dv = (float *)malloc(kv_floats);
    b->reference_dq = (float *)malloc(q_floats);
    b->reference_dk = (float *)malloc(kv_floats);
    b->reference_dv = (float *)malloc(kv_floats);
    /* enough for out and lse, and for dq, dk and dv */
    const size_t raw_bytes = q_floats + 2 * kv_floats + (size_t)b->rows * sizeof(float);
    b->raw = malloc(raw_bytes);
    b->raw_again = malloc(raw_bytes);
    if (!b->q || !b->k || !b->v || !b->dout || !b->out || !b->lse || !b->reference_out ||
        !b->reference_lse || !b->dq || !b->dk || !b->dv || !b->reference_dq || !b->reference_dk ||
        !b->reference_dv || !b->raw || !b->raw_again) {
        fprintf(stderr, "gpu_kernel_cuda: out of memory\n");
        return false;
    }
    return cuda_ok(cudaMalloc(&b->device_q, (size_t)b->q_count * element), "allocating q") &&
           cuda_ok(cudaMalloc(&b->device_k, (size_t)b->kv_count * element), "allocating k") &&
           cuda_ok(cudaMalloc(&b->device_v, (size_t)b->kv_count * element), "allocating v") &&
           cuda_ok(cudaMalloc(&b->device_dout, (size_t)b->q_count * element), "allocating dout") &&
           cuda_ok(cudaMalloc(&b->device_out, (size_t)b->q_count * element), "allocating out") &&
           cuda_ok(cudaMalloc(&b->device_lse, (size_t)b->rows * sizeof(float)), "allocating lse") &&
           cuda_ok(cudaMalloc(&b->device_dq, (size_t)b->q_count * element), "allocating dq") &&
           cuda_ok(cudaMalloc(&b->device_dk, (size_t)b->kv_count * element), "allocating dk") &&
           cuda_ok(cudaMalloc(&b->device_dv, (size_t)b->kv_count * element), "allocating dv");
}

/* What a configuration measured: worst error / tolerance per tensor, masked rows. */
typedef struct case_result {
    double out, lse, dq, dk, dv;
    int64_t masked_rows; /* fully masked query rows (−1: one had a non-zero out) */
    bool identical;      /* two calls gave identical bits */
} case_result;

/* Runs the forward (twice: the second on stream) and the CPU forward, compares. */
static bool run_forward(const cpparity_attention_kernel *kernel, buffers *b,
                        const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                        float scale, cudaStream_t stream, case_result *result) {
    const bool bf16 = kernel->dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16;
    const size_t out_bytes = (size_t)b->q_count * (bf16 ? sizeof(uint16_t) : sizeof(float));
    const size_t lse_bytes = (size_t)b->rows * sizeof(float);
    char message[1024] = "";
    const cpparity_attention_kernel *cpu = cpparity_cpu_f32_kernel();
    if (cpu->forward(cpu->context, b->reference_out, b->reference_lse, b->q, b->k, b->v, mask, d,
                     scale, NULL, message, sizeof message) != 0) {
        fprintf(stderr, "    cpu-f32 forward: %s\n", message);
        return false;
    }
    for (int call = 0; call < 2; call++) {
        char *raw = (char *)(call == 0 ? b->raw : b->raw_again); /* out, then lse */
        if (!poison(b->device_out, out_bytes) || !poison(b->device_lse, lse_bytes) ||
            !cuda_ok(cudaDeviceSynchronize(), "filling the outputs with NaN")) {
            return false;
        }
        if (kernel->forward(kernel->context, b->device_out, (float *)b->device_lse, b->device_q,
                            b->device_k, b->device_v, mask, d, scale, call == 0 ? NULL : stream,
                            message, sizeof message) != 0) {
            fprintf(stderr, "    %s forward: %s\n", kernel->name, message);
            return false;
        }
        if (!fetch(raw, b->device_out, b->q_count, bf16) ||
            !fetch(raw + out_bytes, b->device_lse, b->rows, false)) {
            return false;
        }
    }
    result->identical = memcmp(b->raw, b->raw_again, out_bytes + lse_bytes) == 0;
    widen(b->out, b->raw, b->q_count, bf16);
    widen(b->lse, (const char *)b->raw + out_bytes, b->rows, false);
    const double relative = bf16 ? BFLOAT16_ROUNDING + FLOAT32_TOLERANCE : FLOAT32_TOLERANCE;
    result->out =
        worst_ratio("out", b->out, b->reference_out, b->q_count, FLOAT32_TOLERANCE, relative);
    result->lse = lse_ratio(b->lse, b->reference_lse, b->rows);
    result->masked_rows = check_masked_rows(b->out, b->reference_lse, d);
    return true;
}

/* Runs the backward (twice: the second on stream) and the CPU backward, both on the GPU
 * forward's out and lse, compares. */
static bool run_backward(const cpparity_attention_kernel *kernel, buffers *b,
                         const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                         float scale, cudaStream_t stream, case_result *result) {
    const bool bf16 = kernel->dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16;
    const size_t element = bf16 ? sizeof(uint16_t) : sizeof(float);
    const size_t q_bytes = (size_t)b->q_count * element, kv_bytes = (size_t)b->kv_count * element;
    char message[1024] = "";
    const cpparity_attention_kernel *cpu = cpparity_cpu_f32_kernel();
    if (cpu->backward(cpu->context, b->reference_dq, b->reference_dk, b->reference_dv, b->dout,
                      b->q, b->k, b->v, b->out, b->lse, mask, d, scale, NULL, message,
                      sizeof message) != 0) {
        fprintf(stderr, "    cpu-f32 backward: %s\n", message);
        return false;
    }
    for (int call = 0; call < 2; call++) {
        char *raw = (char *)(call == 0 ? b->raw : b->raw_again); /* dq, dk, dv */
        if (!poison(b->device_dq, q_bytes) || !poison(b->device_dk, kv_bytes) ||
            !poison(b->device_dv, kv_bytes) ||
            !cuda_ok(cudaDeviceSynchronize(), "filling the outputs with NaN")) {
            return false;
        }
        if (kernel->backward(kernel->context, b->device_dq, b->device_dk, b->device_dv,
                             b->device_dout, b->device_q, b->device_k, b->device_v, b->device_out,
                             (const float *)b->device_lse, mask, d, scale,
                             call == 0 ? NULL : stream, message, sizeof message) != 0) {
            fprintf(stderr, "    %s backward: %s\n", kernel->name, message);
            return false;
        }
        if (!fetch(raw, b->device_dq, b->q_count, bf16) ||
            !fetch(raw + q_bytes, b->device_dk, b->kv_count, bf16) ||
            !fetch(raw + q_bytes + kv_bytes, b->device_dv, b->kv_count, bf16)) {
            return false;
        }
    }
    result->identical =
        result->identical && memcmp(b->raw, b->raw_again, q_bytes + 2 * kv_bytes) == 0;
    widen(b->dq, b->raw, b->q_count, bf16);
    widen(b->dk, (const char *)b->raw + q_bytes, b->kv_count, bf16);
    widen(b->dv, (const char *)b->raw + q_bytes + kv_bytes, b->kv_count, bf16);
    const double relative = bf16 ? BFLOAT16_ROUNDING + FLOAT32_TOLERANCE : FLOAT32_TOLERANCE;
    result->dq = worst_ratio("dq", b->dq, b->reference_dq, b->q_count, FLOAT32_TOLERANCE, relative);
    result->dk =
        worst_ratio("dk", b->dk, b->reference_dk, b->kv_count, FLOAT32_TOLERANCE, relative);
    result->dv =
        worst_ratio("dv", b->dv, b->reference_dv, b->kv_count, FLOAT32_TOLERANCE, relative);
    return true;
}

/* One configuration on one kernel: prints its line; true when it passed. */
static bool run_case(const test_case *c, const cpparity_attention_kernel *kernel, uint64_t seed,
                     cudaStream_t stream, int64_t *masked_rows) {
    const bool bf16 = kernel->dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16;
    const cpparity_attention_dims d = {c->batch, c->seq_len, c->heads, c->kv_heads, c->head_dim};
    const int64_t tokens = c->batch * c->seq_len;
    int8_t *attention_mask = (int8_t *)malloc((size_t)tokens);
    int64_t *position_ids = (int64_t *)malloc((size_t)tokens * sizeof(int64_t));
    uint64_t random = seed;
    mask_storage storage;
    memset(&storage, 0, sizeof storage);
    buffers b;
    memset(&b, 0, sizeof b);
    case_result result;
    memset(&result, 0, sizeof result);
    bool ran = attention_mask != NULL && position_ids != NULL;
    if (ran) {
        for (int64_t row = 0; row < c->batch; row++) {
            build_row(attention_mask + row * c->seq_len, position_ids + row * c->seq_len,
                      c->seq_len, c->layout, (c->layout & EMPTY_ROW) && row == 1, &random);
        }
        cpparity_error error;
        if (mask_storage_build(&storage, c->batch, c->seq_len, attention_mask, position_ids,
                               &error) != CPPARITY_OK) {
            fprintf(stderr, "    mask: %s\n", error.message);
            ran = false;
        }
    }
    ran = ran && allocate_buffers(&b, &d, bf16);
    const cpparity_mask_description mask = mask_storage_describe(&storage, c->layer);
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    if (ran) {
        /* q and k in [-2, 2) so that scores spread over several units; v and dout in [-1, 1) */
        fill_values(b.q, b.q_count, 2.0f, bf16, &random);
        fill_values(b.k, b.kv_count, 2.0f, bf16, &random);
        fill_values(b.v, b.kv_count, 1.0f, bf16, &random);
        fill_values(b.dout, b.q_count, 1.0f, bf16, &random);
        ran = upload(b.device_q, b.q, b.q_count, bf16) &&
              upload(b.device_k, b.k, b.kv_count, bf16) &&
              upload(b.device_v, b.v, b.kv_count, bf16) &&
              upload(b.device_dout, b.dout, b.q_count, bf16);
    }
    ran = ran && run_forward(kernel, &b, &mask, &d, scale, stream, &result) &&
          run_backward(kernel, &b, &mask, &d, scale, stream, &result);
    const bool passed = ran && result.identical && result.masked_rows >= 0 && result.out <= 1.0 &&
                        result.lse <= 1.0 && result.dq <= 1.0 && result.dk <= 1.0 &&
                        result.dv <= 1.0;
    printf("%-9s %-26s B=%lld S=%-3lld H=%lld/%lld Dh=%-3lld %s", kernel->name, c->name,
           (long long)c->batch, (long long)c->seq_len, (long long)c->heads, (long long)c->kv_heads,
           (long long)c->head_dim, passed ? "ok  " : "FAIL");
    if (ran) {
        printf("  error/tolerance out %.2g lse %.2g dq %.2g dk %.2g dv %.2g; %lld masked rows%s",
               result.out, result.lse, result.dq, result.dk, result.dv,
               (long long)result.masked_rows,
               result.identical ? "" : "; two calls gave different bits");
        *masked_rows += result.masked_rows > 0 ? result.masked_rows : 0;
    } else {
        printf("  (did not run)");
    }
    printf("\n");
    fflush(stdout);
    free_buffers(&b);
    mask_storage_free(&storage);
    free(attention_mask);
    free(position_ids);
    return passed;
}

/* --- checks of the descriptors and refusals -------------------------------------------------- */

/* Whether the registry holds kernel under name; under the CPU emulation (tests/emulation), whose
 * kernels are not the registry's, whether the registry holds none of that name or a CUDA one. */
static bool registered(const char *name, const cpparity_attention_kernel *kernel) {
#ifdef CPPARITY_CUDA_EMULATION
    const cpparity_attention_kernel *found = kernel_registry_find(name);
    return found == NULL || found->device == kernel->device;
#else
    return kernel_registry_find(name) == kernel;
#endif
}

static bool check_descriptor(const cpparity_attention_kernel *kernel, const char *name,
                             int32_t dtype) {
    const bool ok = kernel != NULL && strcmp(kernel->name, name) == 0 &&
                    kernel->abi_version == CPPARITY_KERNEL_ABI_VERSION &&
                    kernel->struct_size == sizeof(cpparity_attention_kernel) &&
                    strcmp(kernel->version, "1") == 0 &&
                    kernel->device == CPPARITY_KERNEL_DEVICE_CUDA && kernel->dtype == dtype &&
                    kernel->deterministic == 1 && registered(name, kernel);
    printf("%-9s descriptor and registry entry: %s\n", name, ok ? "ok" : "FAIL");
    return ok;
}

/* A head dimension above 256 and H not a multiple of Hkv are refused with a message. */
static bool check_refusals(const cpparity_attention_kernel *kernel) {
    const int64_t document[4] = {0, 0, 0, 0}, start[4] = {0, 0, 0, 0}, padding[1] = {0};
    const int8_t valid[4] = {1, 1, 1, 1};
    cpparity_mask_description mask;
    memset(&mask, 0, sizeof mask);
    mask.batch = 1;
    mask.seq_len = 4;
    mask.document = document;
    mask.document_start = start;
    mask.key_valid = valid;
    mask.left_padding = padding;
    const cpparity_attention_dims too_wide = {1, 4, 1, 1, 257}, uneven = {1, 4, 3, 2, 8};
    char wide_message[1024] = "", uneven_message[1024] = "";
    const int wide = kernel->forward(kernel->context, NULL, NULL, NULL, NULL, NULL, &mask,
                                     &too_wide, 1.0f, NULL, wide_message, sizeof wide_message);
    const int odd =
        kernel->backward(kernel->context, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                         &mask, &uneven, 1.0f, NULL, uneven_message, sizeof uneven_message);
    const bool ok = wide != 0 && strstr(wide_message, "head dimension 257") != NULL && odd != 0 &&
                    strstr(uneven_message, "inconsistent sizes") != NULL;
    printf("%-9s refuses Dh = 257 and H %% Hkv != 0: %s (%s | %s)\n", kernel->name,
           ok ? "ok" : "FAIL", wide_message, uneven_message);
    return ok;
}

int main(void) {
    int devices = 0;
    const cudaError_t found = cudaGetDeviceCount(&devices);
    if (found != cudaSuccess || devices == 0) {
        printf("SKIPPED: no CUDA device here (cudaGetDeviceCount: %s)\n",
               found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
        return SKIPPED;
    }
    const cpparity_attention_kernel *kernels[] = {cpparity_cuda_f32_kernel(),
                                                  cpparity_cuda_bf16_kernel()};
    int passed = 0, failed = 0;
    check_descriptor(kernels[0], "cuda-f32", CPPARITY_KERNEL_DTYPE_FLOAT32) ? passed++ : failed++;
    check_descriptor(kernels[1], "cuda-bf16", CPPARITY_KERNEL_DTYPE_BFLOAT16) ? passed++ : failed++;
    for (int i = 0; i < 2; i++) {
        check_refusals(kernels[i]) ? passed++ : failed++;
    }
    cudaStream_t stream = NULL;
    if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream")) {
        return 1;
    }
    int64_t masked_rows = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int i = 0; i < 2; i++) {
            const uint64_t seed = 0x5eed0000u + c; /* same inputs layout for both kernels */
            run_case(&cases[c], kernels[i], seed, stream, &masked_rows) ? passed++ : failed++;
        }
    }
    cudaStreamDestroy(stream);
    /* masked values cannot change a result: cuda-f32 on host buffers through the staging wrapper
     * (float32 only; cuda-bf16 runs the same loops on the same flags) */
    cpparity_attention_kernel staged;
    memset(&staged, 0, sizeof staged);
    char report[1024] = "";
    if (!kernel_device_staging_wrap(&staged, kernels[0], report, sizeof report)) {
        printf("cuda-f32  masked-values contract: FAIL (cannot stage: %s)\n", report);
        failed++;
    } else {
        const bool kept = masked_values_contract_check(&staged, report, sizeof report);
        printf("cuda-f32  masked-values contract: %s (%s)\n", kept ? "ok" : "FAIL", report);
        kept ? passed++ : failed++;
    }
    kernel_device_staging_release(&staged);
    if (masked_rows == 0) {
        printf("gpu_kernel_cuda: no fully masked row was met (the layouts should make some)\n");
        failed++;
    }
    printf("gpu_kernel_cuda: %d passed, %d failed (%lld fully masked rows checked)\n", passed,
           failed, (long long)masked_rows);
    return failed > 0 ? 1 : 0;
}
