/*
 * kernel_cpu.c — the built-in CPU float32 attention kernel ("cpu-f32"), behind kernel.h (see
 * kernel_cpu.h).
 *
 * Tiled like FlashAttention: for each tile of queries, key tiles are classified by
 * mask_classify_tile (empty tiles skipped, the predicate evaluated only in partial tiles), and
 * each query row merges tile after tile into an online softmax (online_softmax.h). Arithmetic is
 * float32, as in the implementation under test; results are deterministic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernel_cpu.h"
#include "distributed/mask_predicate.h"
#include "distributed/online_softmax.h"

enum { TILE = 32 };

/* Offsets of token t, head h in a [B, S, heads, Dh] tensor. */
static int64_t at(const cpparity_attention_dims *d, int64_t heads, int64_t b, int64_t t,
                  int64_t h) {
    return ((b * d->seq_len + t) * heads + h) * d->head_dim;
}

static float dot(const float *a, const float *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        sum += a[i] * b[i];
    }
    return sum;
}

static int check_dims(const cpparity_attention_dims *d, const cpparity_mask_description *mask,
                      char *error, size_t capacity) {
    if (d->heads < 1 || d->kv_heads < 1 || d->head_dim < 1 || d->heads % d->kv_heads != 0 ||
        d->batch != mask->batch || d->seq_len != mask->seq_len) {
        snprintf(error, capacity,
                 "cpu-f32 kernel: inconsistent sizes (B=%lld S=%lld H=%lld Hkv=%lld Dh=%lld, mask "
                 "B=%lld S=%lld)",
                 (long long)d->batch, (long long)d->seq_len, (long long)d->heads,
                 (long long)d->kv_heads, (long long)d->head_dim, (long long)mask->batch,
                 (long long)mask->seq_len);
        return 1;
    }
    return 0;
}

static int cpu_forward(void *context, void *out_data, float *lse, const void *q_data,
                       const void *k_data, const void *v_data,
                       const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                       float scale, void *stream, char *error, size_t capacity) {
    (void)context;
    if (stream != NULL || check_dims(d, mask, error, capacity)) {
        if (stream != NULL) {
            snprintf(error, capacity, "cpu-f32 kernel: a stream was given to a CPU kernel");
        }
        return 1;
    }
    float *out = out_data;
    const float *q = q_data, *k = k_data, *v = v_data;
    const int64_t S = d->seq_len, Dh = d->head_dim, group = d->heads / d->kv_heads;
    float *accumulator = malloc((size_t)(2 * Dh) * sizeof(float));
    if (accumulator == NULL) {
        snprintf(error, capacity, "cpu-f32 kernel: out of memory");
        return 1;
    }
    float *tile_accumulator = accumulator + Dh;
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t q0 = 0; q0 < S; q0 += TILE) {
            const int64_t q1 = q0 + TILE < S ? q0 + TILE : S;
            for (int64_t h = 0; h < d->heads; h++) {
                const int64_t g = h / group;
                for (int64_t t = q0; t < q1; t++) {
                    const float *query = q + at(d, d->heads, b, t, h);
                    online_softmax state = {-INFINITY, 0.0f};
                    memset(accumulator, 0, (size_t)Dh * sizeof(float));
                    for (int64_t k0 = 0; k0 < q1; k0 += TILE) {
                        const int64_t k1 = k0 + TILE < S ? k0 + TILE : S;
                        const int tile = mask_classify_tile(mask, b, q0, q1, k0, k1);
                        if (tile == MASK_TILE_EMPTY) {
                            continue;
                        }
                        float scores[TILE];
                        online_softmax tile_state = {-INFINITY, 0.0f};
                        for (int64_t key = k0; key < k1; key++) {
                            const bool allowed =
                                tile == MASK_TILE_FULL || mask_allowed(mask, b, t, key);
                            scores[key - k0] =
                                allowed ? scale * dot(query, k + at(d, d->kv_heads, b, key, g), Dh)
                                        : -INFINITY;
                            if (scores[key - k0] > tile_state.maximum) {
                                tile_state.maximum = scores[key - k0];
                            }
                        }
                        if (tile_state.maximum == -INFINITY) {
                            continue; /* no allowed key for this row in this tile */
                        }
                        memset(tile_accumulator, 0, (size_t)Dh * sizeof(float));
                        for (int64_t key = k0; key < k1; key++) {
                            if (scores[key - k0] == -INFINITY) {
                                continue;
                            }
                            const float p = expf(scores[key - k0] - tile_state.maximum);
                            tile_state.sum += p;
                            const float *value = v + at(d, d->kv_heads, b, key, g);
                            for (int64_t i = 0; i < Dh; i++) {
                                tile_accumulator[i] += p * value[i];
                            }
                        }
                        float tile_factor;
                        const float factor = online_softmax_merge(&state, tile_state, &tile_factor);
                        for (int64_t i = 0; i < Dh; i++) {
                            accumulator[i] =
                                accumulator[i] * factor + tile_accumulator[i] * tile_factor;
                        }
                    }
                    float *output = out + at(d, d->heads, b, t, h);
                    for (int64_t i = 0; i < Dh; i++) {
                        output[i] = state.sum > 0.0f ? accumulator[i] / state.sum : 0.0f;
                    }
                    lse[(b * d->heads + h) * S + t] = online_softmax_lse(state);
                }
            }
        }
    }
    free(accumulator);
    return 0;
}

static int cpu_backward(void *context, void *dq_data, void *dk_data, void *dv_data,
                        const void *dout_data, const void *q_data, const void *k_data,
                        const void *v_data, const void *out_data, const float *lse,
                        const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                        float scale, void *stream, char *error, size_t capacity) {
    (void)context;
    if (stream != NULL || check_dims(d, mask, error, capacity)) {
        if (stream != NULL) {
            snprintf(error, capacity, "cpu-f32 kernel: a stream was given to a CPU kernel");
        }
        return 1;
    }
    float *dq = dq_data, *dk = dk_data, *dv = dv_data;
    const float *dout = dout_data, *q = q_data, *k = k_data, *v = v_data, *out = out_data;
    const int64_t S = d->seq_len, Dh = d->head_dim, group = d->heads / d->kv_heads;
    memset(dq, 0, (size_t)(d->batch * S * d->heads * Dh) * sizeof(float));
    memset(dk, 0, (size_t)(d->batch * S * d->kv_heads * Dh) * sizeof(float));
    memset(dv, 0, (size_t)(d->batch * S * d->kv_heads * Dh) * sizeof(float));
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t q0 = 0; q0 < S; q0 += TILE) {
            const int64_t q1 = q0 + TILE < S ? q0 + TILE : S;
            for (int64_t h = 0; h < d->heads; h++) {
                const int64_t g = h / group;
                for (int64_t t = q0; t < q1; t++) {
                    const float row_lse = lse[(b * d->heads + h) * S + t];
                    if (row_lse == -INFINITY) {
                        continue; /* fully masked row: no gradient in or out */
                    }
                    const int64_t offset = at(d, d->heads, b, t, h);
                    const float *query = q + offset, *grad_out = dout + offset;
                    const float delta = dot(grad_out, out + offset, Dh);
                    for (int64_t k0 = 0; k0 < q1; k0 += TILE) {
                        const int64_t k1 = k0 + TILE < S ? k0 + TILE : S;
                        const int tile = mask_classify_tile(mask, b, q0, q1, k0, k1);
                        if (tile == MASK_TILE_EMPTY) {
                            continue;
                        }
                        for (int64_t key = k0; key < k1; key++) {
                            if (tile != MASK_TILE_FULL && !mask_allowed(mask, b, t, key)) {
                                continue;
                            }
                            const int64_t kv = at(d, d->kv_heads, b, key, g);
                            const float p = expf(scale * dot(query, k + kv, Dh) - row_lse);
                            const float ds = p * (dot(grad_out, v + kv, Dh) - delta);
                            for (int64_t i = 0; i < Dh; i++) {
                                dq[offset + i] += scale * ds * k[kv + i];
                                dk[kv + i] += scale * ds * query[i];
                                dv[kv + i] += p * grad_out[i];
                            }
                        }
                    }
                }
            }
        }
    }
    return 0;
}

static const cpparity_attention_kernel cpu_f32_kernel = {
    .abi_version = CPPARITY_KERNEL_ABI_VERSION,
    .struct_size = sizeof(cpparity_attention_kernel),
    .name = "cpu-f32",
    .version = "1",
    .device = CPPARITY_KERNEL_DEVICE_CPU,
    .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
    .deterministic = 1,
    .context = NULL,
    .forward = cpu_forward,
    .backward = cpu_backward,
};

const cpparity_attention_kernel *cpparity_cpu_f32_kernel(void) {
    return &cpu_f32_kernel;
}
