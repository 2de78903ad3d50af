/*
 * kernel_cuda.cu — the built-in CUDA attention kernels "cuda-f32" and "cuda-bf16" behind kernel.h
 * (see kernel_cuda.h).
 *
 * FlashAttention-style, in plain SIMT code, correctness and determinism first. Tensor cores are
 * not used yet: for bf16 they are the next step, once the device check has measured this version.
 *
 * - Forward: one block of THREADS threads per (batch row, query head, query tile). The block
 *   stages its query tile in shared memory, then walks the key tiles of KEY_TILE keys that
 *   causality allows, staging each K and V tile in shared memory. mask_classify_tile
 *   (mask_predicate.h, the code the CPU kernel runs) classifies each (query tile, key tile):
 *   EMPTY tiles are skipped, FULL ones need no predicate, PARTIAL ones evaluate mask_allowed per
 *   pair. Each query row merges tile after tile into its online softmax (online_softmax.h), as
 *   kernel_cpu.c does; the output accumulator stays in shared memory. A row with no allowed key
 *   gets out = 0 and lse = −∞.
 * - Backward, without atomics: delta[b, h, t] = Σ dout·out (one thread per row); dq (one block
 *   per query tile, looping over key tiles); dk and dv (one block per kv head and key tile,
 *   looping over the query heads of its group, then over the query tiles, in increasing order).
 *   Probabilities are recomputed from lse; rows with lse = −∞ contribute nothing. Every element
 *   of dq, dk and dv is written (overwritten), zeros included.
 * - Tiles: query tiles (and both tiles of the dk/dv kernel) have 64 rows up to Dh = 64, 32 up to
 *   128 and 16 up to 256, so a block's shared memory (staged tiles, accumulators, scores; at most
 *   182 KiB, the dq kernel at Dh = 256) fits the 227 KiB an H100/H200 block may have. Staged
 *   tiles have an odd row stride (Dh | 1), so threads reading one column of different rows hit
 *   different banks.
 * - Masked pairs are skipped, never multiplied by a probability of 0: each tile keeps a flag per
 *   (query, key) pair, and every sum (P·V, dS·K, P·dO, dS·Q) reads only the allowed ones, as
 *   kernel_cpu.c does, so a masked key's or query's values (Inf or NaN included) cannot change a
 *   bit of any other element (the kernel contract, tests/support/masked_values_contract.h).
 * - Arithmetic: float32 throughout; bf16 tensors are widened when loaded and rounded to nearest
 *   even when stored (bfloat16.h). lse is float32 for both dtypes.
 * - Block calls (ABI 3, ring attention's): the same kernels on Sq query rows and Sk key rows,
 *   each named by its token through device index arrays (block_rows.h, the code kernel_cpu.c
 *   runs): the mask and the tile classification read tokens, the tensors are indexed by row. A
 *   tile whose rows are not consecutive tokens is PARTIAL (or EMPTY when every key comes after
 *   every query), and a block call walks every key tile (whole-sequence calls stop at the
 *   diagonal).
 * - Determinism: every output element is written by one thread of one block, and every sum runs
 *   in a fixed order (keys in increasing order; for dk and dv heads of the group, then query
 *   tiles, then rows, in increasing order), so two calls give identical bits.
 *
 * The mask description's arrays are host memory: each call copies them to device memory taken
 * with cudaMallocAsync on the caller's stream (the backward also takes delta there) and frees
 * them with cudaFreeAsync at the end of the call, then waits for the stream. A call therefore
 * returns with its work finished: errors of the kernels are reported by the call that caused
 * them, and the caller may release the host arrays at once. Every CUDA runtime call goes through
 * CUDA_CHECK (cuda_check.h); every launch is followed by a checked cudaGetLastError.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common/error.h"
#include "distributed/device/bfloat16.h"
#include "distributed/device/cuda_check.h"
#include "distributed/kernels/block_rows.h"
#include "distributed/kernels/kernel_cuda.h"
#include "distributed/kernels/mask_predicate.h"
#include "distributed/kernels/online_softmax.h"

enum {
    THREADS = 256,     /* threads of every block */
    KEY_TILE = 64,     /* keys per tile of the forward and dq kernels */
    MAX_HEAD_DIM = 256 /* the largest Dh these kernels take (shared memory is sized from Dh) */
};

/* What one launch hands its kernel (by value). */
typedef struct device_problem {
    cpparity_mask_description mask; /* its arrays in device memory */
    int64_t batch;                  /* B */
    int64_t seq_len;                /* S: the mask's */
    int64_t query_len;              /* Sq: rows of q, out, dout, dq, lse (S but in a block call) */
    int64_t key_len;                /* Sk: rows of k, v, dk, dv (S but in a block call) */
    const int64_t *query_index;     /* [Sq] token of each query row, device; NULL: the identity */
    const int64_t *key_index;       /* [Sk] token of each key row, device; NULL: the identity */
    int64_t heads;                  /* H */
    int64_t kv_heads;               /* Hkv */
    int64_t group;                  /* H / Hkv: query heads per kv head */
    int32_t head_dim;               /* Dh, at most MAX_HEAD_DIM */
    int32_t stride;                 /* floats between rows of a staged tile: Dh | 1 (odd) */
    int32_t query_rows;             /* rows of a query tile */
    int32_t key_rows;               /* rows of a key tile */
    int64_t query_tiles;            /* ceil(Sq / query_rows) */
    int64_t key_tiles;              /* ceil(Sk / key_rows) */
    float scale;                    /* softmax scale */
    int32_t bfloat16;               /* 1: q, k, v, out, dout, dq, dk, dv hold bfloat16 bits */
} device_problem;

/* --- shared memory: one layout per kernel, computed by the same code on host and device ---- */

/* Hands out consecutive arrays of a block's shared memory: offsets in floats, and pointers when
 * base is set (on the device; on the host base is NULL and only the size counts). */
typedef struct shared_cursor {
    float *base;
    size_t used; /* floats handed out so far */
} shared_cursor;

static __host__ __device__ float *shared_take(shared_cursor *cursor, size_t count) {
    float *taken = cursor->base != NULL ? cursor->base + cursor->used : NULL;
    cursor->used += count;
    return taken;
}

/* count one-byte flags, in whole floats of the same shared memory. */
static __host__ __device__ unsigned char *shared_take_flags(shared_cursor *cursor, size_t count) {
    return (unsigned char *)shared_take(cursor, (count + sizeof(float) - 1) / sizeof(float));
}

/* Shared arrays of the forward kernel. */
typedef struct forward_shared {
    float *query;           /* [query_rows, stride] */
    float *key;             /* [key_rows, stride] */
    float *value;           /* [key_rows, stride] */
    float *accumulator;     /* [query_rows, Dh]: Σ p·v under the row's running maximum */
    float *scores;          /* [query_rows, key_rows]: scores, then exp(score − tile maximum) */
    unsigned char *allowed; /* [query_rows, key_rows]: 1 where the pair takes part */
    float *maximum;         /* [query_rows]: online softmax maximum */
    float *sum;             /* [query_rows]: online softmax sum */
    float *factor;          /* [query_rows]: rescale of the accumulator for this tile */
    float *tile_factor;     /* [query_rows]: rescale of this tile's sum; 0 = nothing to add */
} forward_shared;

static __host__ __device__ forward_shared forward_shared_of(const device_problem *p,
                                                            shared_cursor *cursor) {
    const size_t queries = (size_t)p->query_rows, keys = (size_t)p->key_rows;
    forward_shared s;
    s.query = shared_take(cursor, queries * (size_t)p->stride);
    s.key = shared_take(cursor, keys * (size_t)p->stride);
    s.value = shared_take(cursor, keys * (size_t)p->stride);
    s.accumulator = shared_take(cursor, queries * (size_t)p->head_dim);
    s.scores = shared_take(cursor, queries * keys);
    s.allowed = shared_take_flags(cursor, queries * keys);
    s.maximum = shared_take(cursor, queries);
    s.sum = shared_take(cursor, queries);
    s.factor = shared_take(cursor, queries);
    s.tile_factor = shared_take(cursor, queries);
    return s;
}

/* Shared arrays of the dq kernel. */
typedef struct query_gradient_shared {
    float *query;           /* [query_rows, stride] */
    float *grad_out;        /* [query_rows, stride] */
    float *key;             /* [key_rows, stride] */
    float *value;           /* [key_rows, stride] */
    float *accumulator;     /* [query_rows, Dh]: dq */
    float *dscores;         /* [query_rows, key_rows]: ds = p·(dout·v − delta) */
    unsigned char *allowed; /* [query_rows, key_rows]: 1 where the pair takes part */
    float *row_lse;         /* [query_rows] */
    float *row_delta;       /* [query_rows] */
} query_gradient_shared;

static __host__ __device__ query_gradient_shared query_gradient_shared_of(const device_problem *p,
                                                                          shared_cursor *cursor) {
    const size_t queries = (size_t)p->query_rows, keys = (size_t)p->key_rows;
    query_gradient_shared s;
    s.query = shared_take(cursor, queries * (size_t)p->stride);
    s.grad_out = shared_take(cursor, queries * (size_t)p->stride);
    s.key = shared_take(cursor, keys * (size_t)p->stride);
    s.value = shared_take(cursor, keys * (size_t)p->stride);
    s.accumulator = shared_take(cursor, queries * (size_t)p->head_dim);
    s.dscores = shared_take(cursor, queries * keys);
    s.allowed = shared_take_flags(cursor, queries * keys);
    s.row_lse = shared_take(cursor, queries);
    s.row_delta = shared_take(cursor, queries);
    return s;
}

/* Shared arrays of the dk/dv kernel. */
typedef struct key_value_gradient_shared {
    float *key;               /* [key_rows, stride] */
    float *value;             /* [key_rows, stride] */
    float *key_accumulator;   /* [key_rows, Dh]: dk */
    float *value_accumulator; /* [key_rows, Dh]: dv */
    float *query;             /* [query_rows, stride] */
    float *grad_out;          /* [query_rows, stride] */
    float *probabilities;     /* [query_rows, key_rows]: p */
    float *dscores;           /* [query_rows, key_rows]: ds */
    unsigned char *allowed;   /* [query_rows, key_rows]: 1 where the pair takes part */
    float *row_lse;           /* [query_rows] */
    float *row_delta;         /* [query_rows] */
} key_value_gradient_shared;

static __host__ __device__ key_value_gradient_shared
key_value_gradient_shared_of(const device_problem *p, shared_cursor *cursor) {
    const size_t queries = (size_t)p->query_rows, keys = (size_t)p->key_rows;
    key_value_gradient_shared s;
    s.key = shared_take(cursor, keys * (size_t)p->stride);
    s.value = shared_take(cursor, keys * (size_t)p->stride);
    s.key_accumulator = shared_take(cursor, keys * (size_t)p->head_dim);
    s.value_accumulator = shared_take(cursor, keys * (size_t)p->head_dim);
    s.query = shared_take(cursor, queries * (size_t)p->stride);
    s.grad_out = shared_take(cursor, queries * (size_t)p->stride);
    s.probabilities = shared_take(cursor, queries * keys);
    s.dscores = shared_take(cursor, queries * keys);
    s.allowed = shared_take_flags(cursor, queries * keys);
    s.row_lse = shared_take(cursor, queries);
    s.row_delta = shared_take(cursor, queries);
    return s;
}

/* --- device helpers ------------------------------------------------------------------------ */

/* Element index of a tensor as float32 (bf16 widened exactly). */
static __device__ float load_element(const void *tensor, int64_t index, int32_t bfloat16) {
    return bfloat16 ? bf16_to_float(((const uint16_t *)tensor)[index])
                    : ((const float *)tensor)[index];
}

/* Stores value at element index (bf16: rounded to nearest even). */
static __device__ void store_element(void *tensor, int64_t index, float value, int32_t bfloat16) {
    if (bfloat16) {
        ((uint16_t *)tensor)[index] = bf16_from_float(value);
    } else {
        ((float *)tensor)[index] = value;
    }
}

/* Offset of row t, head h in a [B, length, heads, Dh] tensor (kernel_cpu.c's at()): length is
 * query_len for q, out, dout, dq and key_len for k, v, dk, dv. */
static __device__ int64_t token_offset(const device_problem *p, int64_t length, int64_t heads,
                                       int64_t b, int64_t t, int64_t h) {
    return ((b * length + t) * heads + h) * p->head_dim;
}

/* Index of query head h, query row t of row b in a [B, H, Sq] array (lse, delta). */
static __device__ int64_t row_index(const device_problem *p, int64_t b, int64_t h, int64_t t) {
    return (b * p->heads + h) * p->query_len + t;
}

/* Whether query row r and key row c of batch row b may attend: the mask on their tokens. */
static __device__ bool pair_allowed(const device_problem *p, int64_t b, int64_t r, int64_t c) {
    return mask_allowed(&p->mask, b, block_token(p->query_index, r), block_token(p->key_index, c));
}

/* Stages rows [first, first + count) of head h of a [B, length, heads, Dh] tensor into tile
 * ([rows, stride]), zeros in rows count.. rows − 1. */
static __device__ void stage_rows(float *tile, const void *tensor, const device_problem *p,
                                  int64_t length, int64_t heads, int64_t b, int64_t h,
                                  int64_t first, int32_t count, int32_t rows) {
    const int32_t Dh = p->head_dim;
    for (int32_t e = (int32_t)threadIdx.x; e < rows * Dh; e += (int32_t)blockDim.x) {
        const int32_t r = e / Dh, d = e % Dh;
        tile[r * p->stride + d] =
            r < count ? load_element(tensor, token_offset(p, length, heads, b, first + r, h) + d,
                                     p->bfloat16)
                      : 0.0f;
    }
}

/* Σ a[i]·b[i], i in increasing order (kernel_cpu.c's dot). */
static __device__ float shared_dot(const float *a, const float *b, int32_t n) {
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        sum += a[i] * b[i];
    }
    return sum;
}

/* The class of query rows [q0, q1) × key rows [k0, k1) of row b (mask_predicate.h on their
 * tokens, block_rows.h), computed by thread 0 and returned to every thread. Every thread of the
 * block calls it: it synchronizes first (so the previous tile's shared arrays and class are no
 * longer in use), then after the write. */
static __device__ int classify_tile(const device_problem *p, int *shared_class, int64_t b,
                                    int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
    __syncthreads();
    if (threadIdx.x == 0) {
        *shared_class =
            block_classify_rows(&p->mask, p->query_index, p->key_index, b, q0, q1, k0, k1);
    }
    __syncthreads();
    return *shared_class;
}

/* --- kernels ------------------------------------------------------------------------------- */

/* out and lse; block (b, h, query tile) = blockIdx.x split as [B, H, query_tiles]. */
__global__ void __launch_bounds__(THREADS)
    attention_forward(device_problem p, void *out, float *lse, const void *q, const void *k,
                      const void *v) {
    extern __shared__ float shared_memory[];
    __shared__ int tile_class;
    shared_cursor cursor = {shared_memory, 0};
    const forward_shared s = forward_shared_of(&p, &cursor);
    const int32_t Dh = p.head_dim, QT = p.query_rows, KT = p.key_rows;
    const int32_t thread = (int32_t)threadIdx.x, threads = (int32_t)blockDim.x;
    const int64_t block = (int64_t)blockIdx.x;
    const int64_t tile = block % p.query_tiles;
    const int64_t h = block / p.query_tiles % p.heads;
    const int64_t b = block / p.query_tiles / p.heads;
    const int64_t g = h / p.group; /* the kv head query head h reads */
    const int64_t q0 = tile * QT, q1 = q0 + QT < p.query_len ? q0 + QT : p.query_len;
    const int32_t rows = (int32_t)(q1 - q0);
    const int64_t key_end = block_key_rows_scanned(p.query_index, p.key_index, p.key_len, q1);

    stage_rows(s.query, q, &p, p.query_len, p.heads, b, h, q0, rows, QT);
    for (int32_t e = thread; e < QT * Dh; e += threads) {
        s.accumulator[e] = 0.0f;
    }
    for (int32_t r = thread; r < QT; r += threads) {
        s.maximum[r] = -INFINITY;
        s.sum[r] = 0.0f;
    }
    for (int64_t k0 = 0; k0 < key_end; k0 += KT) {
        const int64_t k1 = k0 + KT < p.key_len ? k0 + KT : p.key_len;
        const int32_t keys = (int32_t)(k1 - k0);
        const int kind = classify_tile(&p, &tile_class, b, q0, q1, k0, k1);
        if (kind == MASK_TILE_EMPTY) {
            continue;
        }
        stage_rows(s.key, k, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
        stage_rows(s.value, v, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
        __syncthreads();
        /* scores of allowed pairs, −∞ elsewhere; which pairs are allowed */
        for (int32_t pair = thread; pair < QT * KT; pair += threads) {
            const int32_t r = pair / KT, c = pair % KT;
            float score = -INFINITY;
            const bool allowed = r < rows && c < keys &&
                                 (kind == MASK_TILE_FULL || pair_allowed(&p, b, q0 + r, k0 + c));
            if (allowed) {
                score = p.scale * shared_dot(s.query + r * p.stride, s.key + c * p.stride, Dh);
            }
            s.scores[pair] = score;
            s.allowed[pair] = allowed;
        }
        __syncthreads();
        /* per row: the tile's softmax state, merged into the row's (one thread per row) */
        for (int32_t r = thread; r < rows; r += threads) {
            float *row = s.scores + r * KT;
            online_softmax tile_state = {-INFINITY, 0.0f};
            for (int32_t c = 0; c < keys; c++) {
                if (row[c] > tile_state.maximum) {
                    tile_state.maximum = row[c];
                }
            }
            if (tile_state.maximum == -INFINITY) {
                s.factor[r] = 1.0f; /* no allowed key for this row in this tile */
                s.tile_factor[r] = 0.0f;
                continue;
            }
            for (int32_t c = 0; c < keys; c++) {
                row[c] = row[c] == -INFINITY ? 0.0f : expf(row[c] - tile_state.maximum);
                tile_state.sum += row[c];
            }
            online_softmax state = {s.maximum[r], s.sum[r]};
            float tile_factor;
            s.factor[r] = online_softmax_merge(&state, tile_state, &tile_factor);
            s.tile_factor[r] = tile_factor;
            s.maximum[r] = state.maximum;
            s.sum[r] = state.sum;
        }
        __syncthreads();
        /* accumulator = accumulator · factor + (Σ_c p·v) · tile_factor. A tile_factor of 0 adds
         * nothing and then factor is 1 (the maximum did not change), so such rows are skipped. */
        for (int32_t e = thread; e < rows * Dh; e += threads) {
            const int32_t r = e / Dh, d = e % Dh;
            if (s.tile_factor[r] == 0.0f) {
                continue;
            }
            const float *probability = s.scores + r * KT;
            const unsigned char *allowed = s.allowed + r * KT;
            float tile_sum = 0.0f;
            for (int32_t c = 0; c < keys; c++) {
                if (allowed[c]) { /* a masked value, even Inf or NaN, cannot reach the sum */
                    tile_sum += probability[c] * s.value[c * p.stride + d];
                }
            }
            s.accumulator[e] = s.accumulator[e] * s.factor[r] + tile_sum * s.tile_factor[r];
        }
    }
    __syncthreads();
    for (int32_t e = thread; e < rows * Dh; e += threads) {
        const int32_t r = e / Dh, d = e % Dh;
        const float value = s.sum[r] > 0.0f ? s.accumulator[e] / s.sum[r] : 0.0f;
        store_element(out, token_offset(&p, p.query_len, p.heads, b, q0 + r, h) + d, value,
                      p.bfloat16);
    }
    for (int32_t r = thread; r < rows; r += threads) {
        const online_softmax state = {s.maximum[r], s.sum[r]};
        lse[row_index(&p, b, h, q0 + r)] = online_softmax_lse(state);
    }
}

/* delta[b, h, t] = Σ_d dout·out; one thread per row of the [B, S, H] rows. */
__global__ void __launch_bounds__(THREADS)
    attention_backward_delta(device_problem p, float *delta, const void *dout, const void *out) {
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.batch * p.query_len * p.heads) {
        return;
    }
    const int64_t h = row % p.heads, t = row / p.heads % p.query_len,
                  b = row / p.heads / p.query_len;
    const int64_t first = row * p.head_dim; /* = token_offset(b, t, h) */
    float sum = 0.0f;
    for (int32_t d = 0; d < p.head_dim; d++) {
        sum += load_element(dout, first + d, p.bfloat16) * load_element(out, first + d, p.bfloat16);
    }
    delta[row_index(&p, b, h, t)] = sum;
}

/* dq; block (b, h, query tile) = blockIdx.x split as [B, H, query_tiles]. */
__global__ void __launch_bounds__(THREADS)
    attention_backward_query(device_problem p, void *dq, const void *dout, const void *q,
                             const void *k, const void *v, const float *lse, const float *delta) {
    extern __shared__ float shared_memory[];
    __shared__ int tile_class;
    shared_cursor cursor = {shared_memory, 0};
    const query_gradient_shared s = query_gradient_shared_of(&p, &cursor);
    const int32_t Dh = p.head_dim, QT = p.query_rows, KT = p.key_rows;
    const int32_t thread = (int32_t)threadIdx.x, threads = (int32_t)blockDim.x;
    const int64_t block = (int64_t)blockIdx.x;
    const int64_t tile = block % p.query_tiles;
    const int64_t h = block / p.query_tiles % p.heads;
    const int64_t b = block / p.query_tiles / p.heads;
    const int64_t g = h / p.group;
    const int64_t q0 = tile * QT, q1 = q0 + QT < p.query_len ? q0 + QT : p.query_len;
    const int32_t rows = (int32_t)(q1 - q0);
    const int64_t key_end = block_key_rows_scanned(p.query_index, p.key_index, p.key_len, q1);

    stage_rows(s.query, q, &p, p.query_len, p.heads, b, h, q0, rows, QT);
    stage_rows(s.grad_out, dout, &p, p.query_len, p.heads, b, h, q0, rows, QT);
    for (int32_t e = thread; e < QT * Dh; e += threads) {
        s.accumulator[e] = 0.0f;
    }
    for (int32_t r = thread; r < QT; r += threads) {
        s.row_lse[r] = r < rows ? lse[row_index(&p, b, h, q0 + r)] : -INFINITY;
        s.row_delta[r] = r < rows ? delta[row_index(&p, b, h, q0 + r)] : 0.0f;
    }
    for (int64_t k0 = 0; k0 < key_end; k0 += KT) {
        const int64_t k1 = k0 + KT < p.key_len ? k0 + KT : p.key_len;
        const int32_t keys = (int32_t)(k1 - k0);
        const int kind = classify_tile(&p, &tile_class, b, q0, q1, k0, k1);
        if (kind == MASK_TILE_EMPTY) {
            continue;
        }
        stage_rows(s.key, k, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
        stage_rows(s.value, v, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
        __syncthreads();
        /* ds = p·(dout·v − delta), p = exp(scale·q·k − lse); 0 for pairs that are not allowed
         * and for fully masked rows (lse = −∞) */
        for (int32_t pair = thread; pair < QT * KT; pair += threads) {
            const int32_t r = pair / KT, c = pair % KT;
            float dscore = 0.0f;
            const bool allowed = r < rows && c < keys && s.row_lse[r] != -INFINITY &&
                                 (kind == MASK_TILE_FULL || pair_allowed(&p, b, q0 + r, k0 + c));
            if (allowed) {
                const float probability =
                    expf(p.scale * shared_dot(s.query + r * p.stride, s.key + c * p.stride, Dh) -
                         s.row_lse[r]);
                dscore = probability *
                         (shared_dot(s.grad_out + r * p.stride, s.value + c * p.stride, Dh) -
                          s.row_delta[r]);
            }
            s.dscores[pair] = dscore;
            s.allowed[pair] = allowed;
        }
        __syncthreads();
        /* dq += scale · ds · k over the allowed keys, key after key (kernel_cpu.c's order) */
        for (int32_t e = thread; e < rows * Dh; e += threads) {
            const int32_t r = e / Dh, d = e % Dh;
            const float *dscore = s.dscores + r * KT;
            const unsigned char *allowed = s.allowed + r * KT;
            float sum = s.accumulator[e];
            for (int32_t c = 0; c < keys; c++) {
                if (allowed[c]) {
                    sum += p.scale * dscore[c] * s.key[c * p.stride + d];
                }
            }
            s.accumulator[e] = sum;
        }
    }
    __syncthreads();
    for (int32_t e = thread; e < rows * Dh; e += threads) {
        const int32_t r = e / Dh, d = e % Dh;
        store_element(dq, token_offset(&p, p.query_len, p.heads, b, q0 + r, h) + d,
                      s.accumulator[e], p.bfloat16);
    }
}

/* dk and dv; block (b, kv head g, key tile) = blockIdx.x split as [B, Hkv, key_tiles]. */
__global__ void __launch_bounds__(THREADS)
    attention_backward_key_value(device_problem p, void *dk, void *dv, const void *dout,
                                 const void *q, const void *k, const void *v, const float *lse,
                                 const float *delta) {
    extern __shared__ float shared_memory[];
    __shared__ int tile_class;
    shared_cursor cursor = {shared_memory, 0};
    const key_value_gradient_shared s = key_value_gradient_shared_of(&p, &cursor);
    const int32_t Dh = p.head_dim, QT = p.query_rows, KT = p.key_rows;
    const int32_t thread = (int32_t)threadIdx.x, threads = (int32_t)blockDim.x;
    const int64_t block = (int64_t)blockIdx.x;
    const int64_t tile = block % p.key_tiles;
    const int64_t g = block / p.key_tiles % p.kv_heads;
    const int64_t b = block / p.key_tiles / p.kv_heads;
    const int64_t k0 = tile * KT, k1 = k0 + KT < p.key_len ? k0 + KT : p.key_len;
    const int32_t keys = (int32_t)(k1 - k0);
    const int64_t first_query = block_first_query_row(p.query_index, p.key_index, k0, QT);

    stage_rows(s.key, k, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
    stage_rows(s.value, v, &p, p.key_len, p.kv_heads, b, g, k0, keys, KT);
    for (int32_t e = thread; e < KT * Dh; e += threads) {
        s.key_accumulator[e] = 0.0f;
        s.value_accumulator[e] = 0.0f;
    }
    /* query heads g·group .. g·group + group − 1 read kv head g; in a whole-sequence call
     * queries before k0 see none of these keys, so the query tiles start at the one holding k0
     * (block_rows.h; a block call takes every query tile) */
    for (int64_t j = 0; j < p.group; j++) {
        const int64_t h = g * p.group + j;
        for (int64_t q0 = first_query; q0 < p.query_len; q0 += QT) {
            const int64_t q1 = q0 + QT < p.query_len ? q0 + QT : p.query_len;
            const int32_t rows = (int32_t)(q1 - q0);
            const int kind = classify_tile(&p, &tile_class, b, q0, q1, k0, k1);
            if (kind == MASK_TILE_EMPTY) {
                continue;
            }
            stage_rows(s.query, q, &p, p.query_len, p.heads, b, h, q0, rows, QT);
            stage_rows(s.grad_out, dout, &p, p.query_len, p.heads, b, h, q0, rows, QT);
            for (int32_t r = thread; r < QT; r += threads) {
                s.row_lse[r] = r < rows ? lse[row_index(&p, b, h, q0 + r)] : -INFINITY;
                s.row_delta[r] = r < rows ? delta[row_index(&p, b, h, q0 + r)] : 0.0f;
            }
            __syncthreads();
            for (int32_t pair = thread; pair < QT * KT; pair += threads) {
                const int32_t r = pair / KT, c = pair % KT;
                float probability = 0.0f, dscore = 0.0f;
                const bool allowed =
                    r < rows && c < keys && s.row_lse[r] != -INFINITY &&
                    (kind == MASK_TILE_FULL || pair_allowed(&p, b, q0 + r, k0 + c));
                if (allowed) {
                    probability = expf(
                        p.scale * shared_dot(s.query + r * p.stride, s.key + c * p.stride, Dh) -
                        s.row_lse[r]);
                    dscore = probability *
                             (shared_dot(s.grad_out + r * p.stride, s.value + c * p.stride, Dh) -
                              s.row_delta[r]);
                }
                s.probabilities[pair] = probability;
                s.dscores[pair] = dscore;
                s.allowed[pair] = allowed;
            }
            __syncthreads();
            /* dv += p · dout, dk += scale · ds · q over the allowed queries, query row after
             * query row */
            for (int32_t e = thread; e < keys * Dh; e += threads) {
                const int32_t c = e / Dh, d = e % Dh;
                float key_sum = s.key_accumulator[e], value_sum = s.value_accumulator[e];
                for (int32_t r = 0; r < rows; r++) {
                    if (!s.allowed[r * KT + c]) {
                        continue; /* a masked query's values, even Inf or NaN, add nothing */
                    }
                    value_sum += s.probabilities[r * KT + c] * s.grad_out[r * p.stride + d];
                    key_sum += p.scale * s.dscores[r * KT + c] * s.query[r * p.stride + d];
                }
                s.key_accumulator[e] = key_sum;
                s.value_accumulator[e] = value_sum;
            }
        }
    }
    __syncthreads();
    for (int32_t e = thread; e < keys * Dh; e += threads) {
        const int32_t c = e / Dh, d = e % Dh;
        const int64_t at = token_offset(&p, p.key_len, p.kv_heads, b, k0 + c, g) + d;
        store_element(dk, at, s.key_accumulator[e], p.bfloat16);
        store_element(dv, at, s.value_accumulator[e], p.bfloat16);
    }
}

/* --- host side ----------------------------------------------------------------------------- */

/* Device memory one call takes and gives back (NULL: not taken). */
typedef struct call_scratch {
    void *document;       /* [B, S] int64 */
    void *document_start; /* [B, S] int64 */
    void *key_valid;      /* [B, S] int8 */
    void *left_padding;   /* [B] int64 */
    void *position;       /* [B, S] int64 (chunks counted in positions only) */
    void *delta;          /* [B, H, S] float (backward) */
} call_scratch;

/* Rows of the tiles that shrink as Dh grows (the query tiles; both tiles of the dk/dv kernel),
 * so that a block's shared memory stays within what one block may have (see the top comment). */
static int32_t tile_rows(int64_t head_dim) {
    return head_dim <= 64 ? 64 : head_dim <= 128 ? 32 : 16;
}

/* The problem a launch hands its kernel, with tiles of query_rows × key_rows; block NULL for a
 * whole-sequence call (its index arrays are device memory, kernel.h). */
static device_problem problem_of(const cpparity_mask_description *device_mask,
                                 const cpparity_attention_dims *d,
                                 const cpparity_attention_block *block, float scale, int32_t dtype,
                                 int32_t query_rows, int32_t key_rows) {
    device_problem p;
    memset(&p, 0, sizeof p);
    p.mask = *device_mask;
    p.batch = d->batch;
    p.seq_len = d->seq_len;
    p.query_len = block_query_rows(d, block);
    p.key_len = block_key_rows(d, block);
    p.query_index = block != NULL ? block->query_index : NULL;
    p.key_index = block != NULL ? block->key_index : NULL;
    p.heads = d->heads;
    p.kv_heads = d->kv_heads;
    p.group = d->heads / d->kv_heads;
    p.head_dim = (int32_t)d->head_dim;
    p.stride = (int32_t)d->head_dim | 1;
    p.query_rows = query_rows;
    p.key_rows = key_rows;
    p.query_tiles = (p.query_len + query_rows - 1) / query_rows;
    p.key_tiles = (p.key_len + key_rows - 1) / key_rows;
    p.scale = scale;
    p.bfloat16 = dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16;
    return p;
}

/* A call with no row to write: no batch row, or neither queries nor keys (a block with keys but
 * no query still overwrites its dk and dv with zeros). */
static bool nothing_to_compute(const cpparity_attention_dims *d,
                               const cpparity_attention_block *block) {
    return d->batch == 0 || (block_query_rows(d, block) == 0 && block_key_rows(d, block) == 0);
}

/* Everything kernel_cpu.c's check_dims checks, plus what these kernels need: Dh at most
 * MAX_HEAD_DIM, tensors and the mask arrays the layer reads present, a block's index arrays
 * present (their tokens are device memory: not read here), a launchable grid. */
static cpparity_status check_call(const cpparity_attention_dims *d,
                                  const cpparity_mask_description *mask,
                                  const cpparity_attention_block *block, const void *const *tensors,
                                  int tensor_count, cpparity_error *error) {
    if (d == NULL || mask == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no sizes or no mask description");
    }
    if (d->batch < 0 || d->seq_len < 0 || d->heads < 1 || d->kv_heads < 1 || d->head_dim < 1 ||
        d->heads % d->kv_heads != 0 || d->batch != mask->batch || d->seq_len != mask->seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "inconsistent sizes (B=%lld S=%lld H=%lld Hkv=%lld Dh=%lld, mask "
                                  "B=%lld S=%lld)",
                                  (long long)d->batch, (long long)d->seq_len, (long long)d->heads,
                                  (long long)d->kv_heads, (long long)d->head_dim,
                                  (long long)mask->batch, (long long)mask->seq_len);
    }
    if (d->head_dim > MAX_HEAD_DIM) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "head dimension %lld is larger than the %d this kernel supports",
                                  (long long)d->head_dim, MAX_HEAD_DIM);
    }
    if (block != NULL && (block->query_len < 0 || block->key_len < 0 ||
                          (block->query_len > 0 && block->query_index == NULL) ||
                          (block->key_len > 0 && block->key_index == NULL))) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "a block of %lld query rows and %lld key rows without their "
                                  "index arrays",
                                  (long long)block->query_len, (long long)block->key_len);
    }
    if (nothing_to_compute(d, block)) {
        return CPPARITY_OK;
    }
    for (int i = 0; i < tensor_count; i++) {
        if (tensors[i] == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "tensor argument %d is NULL",
                                      i + 1);
        }
    }
    const bool chunked = mask->layer_type == 2;
    if (mask->layer_type < 0 || mask->layer_type > 2 ||
        (mask->layer_type == 1 && mask->window < 1) ||
        (chunked && (mask->chunk_size < 1 || mask->chunk_origin < 0 || mask->chunk_origin > 2))) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "mask description with layer type %d, window %lld, chunk size "
                                  "%lld, chunk origin %d",
                                  (int)mask->layer_type, (long long)mask->window,
                                  (long long)mask->chunk_size, (int)mask->chunk_origin);
    }
    if (mask->document == NULL || mask->key_valid == NULL ||
        (chunked && mask->chunk_origin == 1 && mask->document_start == NULL) ||
        (chunked && mask->chunk_origin == 0 && mask->left_padding == NULL) ||
        (chunked && mask->chunk_origin == 2 && mask->position == NULL)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "the mask description lacks an array its layer reads");
    }
    const int64_t rows = tile_rows(d->head_dim);
    const int64_t longest = block_query_rows(d, block) > block_key_rows(d, block)
                                ? block_query_rows(d, block)
                                : block_key_rows(d, block);
    const int64_t blocks = d->batch * d->heads * ((longest + rows - 1) / rows);
    if (blocks > INT32_MAX || d->batch * longest * d->heads / THREADS + 1 > INT32_MAX) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "too large for one launch (B=%lld S=%lld H=%lld)",
                                  (long long)d->batch, (long long)d->seq_len, (long long)d->heads);
    }
    return CPPARITY_OK;
}

/* Copies bytes of host to new device memory taken on stream (left NULL when host is NULL). */
static cpparity_status copy_to_device(void **device, const void *host, size_t bytes,
                                      cudaStream_t stream, cpparity_error *error) {
    if (host == NULL || bytes == 0) {
        return CPPARITY_OK;
    }
    void *memory = NULL;
    CUDA_CHECK(cudaMallocAsync(&memory, bytes, stream), error,
               "allocating device memory for the mask description");
    *device = memory;
    CUDA_CHECK(cudaMemcpyAsync(memory, host, bytes, cudaMemcpyHostToDevice, stream), error,
               "copying the mask description to the device");
    return CPPARITY_OK;
}

/* The mask description with its arrays copied to the device (into scratch). */
static cpparity_status copy_mask(cpparity_mask_description *device_mask, call_scratch *scratch,
                                 const cpparity_mask_description *mask, cudaStream_t stream,
                                 cpparity_error *error) {
    const size_t tokens = (size_t)(mask->batch * mask->seq_len);
    cpparity_status status =
        copy_to_device(&scratch->document, mask->document, tokens * sizeof(int64_t), stream, error);
    if (status == CPPARITY_OK) {
        status = copy_to_device(&scratch->document_start, mask->document_start,
                                tokens * sizeof(int64_t), stream, error);
    }
    if (status == CPPARITY_OK) {
        status = copy_to_device(&scratch->key_valid, mask->key_valid, tokens * sizeof(int8_t),
                                stream, error);
    }
    if (status == CPPARITY_OK) {
        status = copy_to_device(&scratch->left_padding, mask->left_padding,
                                (size_t)mask->batch * sizeof(int64_t), stream, error);
    }
    if (status == CPPARITY_OK && mask->layer_type == 2 && mask->chunk_origin == 2) {
        status = copy_to_device(&scratch->position, mask->position, tokens * sizeof(int64_t),
                                stream, error);
    }
    *device_mask = *mask;
    device_mask->position = (const int64_t *)scratch->position;
    device_mask->document = (const int64_t *)scratch->document;
    device_mask->document_start = (const int64_t *)scratch->document_start;
    device_mask->key_valid = (const int8_t *)scratch->key_valid;
    device_mask->left_padding = (const int64_t *)scratch->left_padding;
    return status;
}

/* Lets kernel take bytes of dynamic shared memory, or says the device cannot give them. The
 * kernel's limit is set to all the device allows, whatever bytes is: the same value on every
 * call, so calls from several threads (ranks) with different head dimensions cannot lower it
 * under one another's launch. */
static cpparity_status allow_shared_memory(const void *kernel, size_t bytes, const char *what,
                                           cpparity_error *error) {
    int device = 0, largest = 0;
    struct cudaFuncAttributes attributes;
    CUDA_CHECK(cudaGetDevice(&device), error, "finding the current device");
    CUDA_CHECK(cudaDeviceGetAttribute(&largest, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
               error, "asking the shared memory a block may have");
    CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel), error, what);
    const int available = largest - (int)attributes.sharedSizeBytes; /* after static shared */
    if (available < 0 || bytes > (size_t)available) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "the %s kernel needs %zu bytes of dynamic shared memory per "
                                  "block at this head dimension; device %d allows %d",
                                  what, bytes, device, available);
    }
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, available),
               error, what);
    return CPPARITY_OK;
}

/* Gives one scratch allocation back on stream. */
static cpparity_status free_on_stream(void *device, cudaStream_t stream, cpparity_error *error) {
    if (device != NULL) {
        CUDA_CHECK(cudaFreeAsync(device, stream), error, "freeing device scratch memory");
    }
    return CPPARITY_OK;
}

/* Waits for the call's work on stream. */
static cpparity_status wait_for_stream(cudaStream_t stream, cpparity_error *error) {
    CUDA_CHECK(cudaStreamSynchronize(stream), error, "waiting for the attention kernels");
    return CPPARITY_OK;
}

/* Frees the scratch and waits for the stream, whatever status is; returns status, or the first
 * failure of these steps when status was CPPARITY_OK (its message then in error). */
static cpparity_status finish_call(call_scratch *scratch, cudaStream_t stream,
                                   cpparity_status status, cpparity_error *error) {
    void *const taken[] = {scratch->document,     scratch->document_start, scratch->key_valid,
                           scratch->left_padding, scratch->position,       scratch->delta};
    cpparity_error failure;
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        const cpparity_status freed = free_on_stream(taken[i], stream, &failure);
        if (status == CPPARITY_OK && freed != CPPARITY_OK) {
            status = freed;
            *error = failure;
        }
    }
    memset(scratch, 0, sizeof *scratch);
    const cpparity_status waited = wait_for_stream(stream, &failure);
    if (status == CPPARITY_OK && waited != CPPARITY_OK) {
        status = waited;
        *error = failure;
    }
    return status;
}

/* Puts the kernel's name before the message; 0 on success, 1 on failure (kernel.h). */
static int report(const char *name, cpparity_status status, const cpparity_error *failure,
                  char *error, size_t capacity) {
    if (status == CPPARITY_OK) {
        return 0;
    }
    if (error != NULL && capacity > 0) {
        snprintf(error, capacity, "%s kernel: %s", name, failure->message);
    }
    return 1;
}

/* Copies the mask, launches the forward kernel. */
static cpparity_status
forward_on_device(call_scratch *scratch, void *out, float *lse, const void *q, const void *k,
                  const void *v, const cpparity_mask_description *mask,
                  const cpparity_attention_dims *d, const cpparity_attention_block *block,
                  float scale, int32_t dtype, cudaStream_t stream, cpparity_error *error) {
    cpparity_mask_description device_mask;
    cpparity_status status = copy_mask(&device_mask, scratch, mask, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const device_problem problem =
        problem_of(&device_mask, d, block, scale, dtype, tile_rows(d->head_dim), KEY_TILE);
    shared_cursor size = {NULL, 0};
    (void)forward_shared_of(&problem, &size);
    const size_t shared_bytes = size.used * sizeof(float);
    status = allow_shared_memory((const void *)attention_forward, shared_bytes, "attention forward",
                                 error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const unsigned blocks = (unsigned)(problem.batch * problem.heads * problem.query_tiles);
    if (blocks == 0) {
        return CPPARITY_OK; /* a block without query rows: nothing to write */
    }
    attention_forward<<<blocks, THREADS, shared_bytes, stream>>>(problem, out, lse, q, k, v);
    CUDA_CHECK(cudaGetLastError(), error, "launching the attention forward kernel");
    return CPPARITY_OK;
}

/* Copies the mask, takes delta, launches the three backward kernels. */
static cpparity_status
backward_on_device(call_scratch *scratch, void *dq, void *dk, void *dv, const void *dout,
                   const void *q, const void *k, const void *v, const void *out, const float *lse,
                   const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                   const cpparity_attention_block *block, float scale, int32_t dtype,
                   cudaStream_t stream, cpparity_error *error) {
    cpparity_mask_description device_mask;
    cpparity_status status = copy_mask(&device_mask, scratch, mask, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t rows = d->batch * block_query_rows(d, block) * d->heads;
    void *delta = NULL;
    CUDA_CHECK(cudaMallocAsync(&delta, (size_t)(rows + 1) * sizeof(float), stream), error,
               "allocating delta");
    scratch->delta = delta;

    const int32_t tile = tile_rows(d->head_dim);
    const device_problem query_problem =
        problem_of(&device_mask, d, block, scale, dtype, tile, KEY_TILE);
    const device_problem key_problem = problem_of(&device_mask, d, block, scale, dtype, tile, tile);
    shared_cursor query_size = {NULL, 0}, key_size = {NULL, 0};
    (void)query_gradient_shared_of(&query_problem, &query_size);
    (void)key_value_gradient_shared_of(&key_problem, &key_size);
    const size_t query_bytes = query_size.used * sizeof(float);
    const size_t key_bytes = key_size.used * sizeof(float);
    status = allow_shared_memory((const void *)attention_backward_query, query_bytes,
                                 "attention backward dq", error);
    if (status == CPPARITY_OK) {
        status = allow_shared_memory((const void *)attention_backward_key_value, key_bytes,
                                     "attention backward dk/dv", error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }

    /* a block may have query rows without keys or keys without query rows: a grid with no block
     * is not launched (what it would write does not exist) */
    const unsigned delta_blocks = (unsigned)((rows + THREADS - 1) / THREADS);
    if (delta_blocks > 0) {
        attention_backward_delta<<<delta_blocks, THREADS, 0, stream>>>(query_problem,
                                                                       (float *)delta, dout, out);
        CUDA_CHECK(cudaGetLastError(), error, "launching the delta kernel");
    }

    const unsigned query_blocks =
        (unsigned)(query_problem.batch * query_problem.heads * query_problem.query_tiles);
    if (query_blocks > 0) {
        attention_backward_query<<<query_blocks, THREADS, query_bytes, stream>>>(
            query_problem, dq, dout, q, k, v, lse, (const float *)delta);
        CUDA_CHECK(cudaGetLastError(), error, "launching the dq kernel");
    }

    const unsigned key_blocks =
        (unsigned)(key_problem.batch * key_problem.kv_heads * key_problem.key_tiles);
    if (key_blocks > 0) {
        attention_backward_key_value<<<key_blocks, THREADS, key_bytes, stream>>>(
            key_problem, dk, dv, dout, q, k, v, lse, (const float *)delta);
        CUDA_CHECK(cudaGetLastError(), error, "launching the dk/dv kernel");
    }
    return CPPARITY_OK;
}

/* A forward call; block NULL for a whole-sequence call. */
static int forward_call(const char *name, int32_t dtype, void *out, float *lse, const void *q,
                        const void *k, const void *v, const cpparity_mask_description *mask,
                        const cpparity_attention_dims *dims, const cpparity_attention_block *block,
                        float scale, void *stream, char *error, size_t capacity) {
    cpparity_error failure;
    cpparity_error_clear(&failure);
    const void *const tensors[] = {out, lse, q, k, v};
    cpparity_status status = check_call(dims, mask, block, tensors, 5, &failure);
    if (status != CPPARITY_OK || nothing_to_compute(dims, block)) {
        return report(name, status, &failure, error, capacity);
    }
    const cudaStream_t cuda_stream = (cudaStream_t)stream;
    call_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    status = forward_on_device(&scratch, out, lse, q, k, v, mask, dims, block, scale, dtype,
                               cuda_stream, &failure);
    status = finish_call(&scratch, cuda_stream, status, &failure);
    return report(name, status, &failure, error, capacity);
}

/* A backward call; block NULL for a whole-sequence call. */
static int backward_call(const char *name, int32_t dtype, void *dq, void *dk, void *dv,
                         const void *dout, const void *q, const void *k, const void *v,
                         const void *out, const float *lse, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, const cpparity_attention_block *block,
                         float scale, void *stream, char *error, size_t capacity) {
    cpparity_error failure;
    cpparity_error_clear(&failure);
    const void *const tensors[] = {dq, dk, dv, dout, q, k, v, out, lse};
    cpparity_status status = check_call(dims, mask, block, tensors, 9, &failure);
    if (status != CPPARITY_OK || nothing_to_compute(dims, block)) {
        return report(name, status, &failure, error, capacity);
    }
    const cudaStream_t cuda_stream = (cudaStream_t)stream;
    call_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    status = backward_on_device(&scratch, dq, dk, dv, dout, q, k, v, out, lse, mask, dims, block,
                                scale, dtype, cuda_stream, &failure);
    status = finish_call(&scratch, cuda_stream, status, &failure);
    return report(name, status, &failure, error, capacity);
}

static int cuda_f32_forward(void *context, void *out, float *lse, const void *q, const void *k,
                            const void *v, const cpparity_mask_description *mask,
                            const cpparity_attention_dims *dims, float scale, void *stream,
                            char *error, size_t capacity) {
    (void)context;
    return forward_call("cuda-f32", CPPARITY_KERNEL_DTYPE_FLOAT32, out, lse, q, k, v, mask, dims,
                        NULL, scale, stream, error, capacity);
}

static int cuda_f32_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                             const void *q, const void *k, const void *v, const void *out,
                             const float *lse, const cpparity_mask_description *mask,
                             const cpparity_attention_dims *dims, float scale, void *stream,
                             char *error, size_t capacity) {
    (void)context;
    return backward_call("cuda-f32", CPPARITY_KERNEL_DTYPE_FLOAT32, dq, dk, dv, dout, q, k, v, out,
                         lse, mask, dims, NULL, scale, stream, error, capacity);
}

static int cuda_bf16_forward(void *context, void *out, float *lse, const void *q, const void *k,
                             const void *v, const cpparity_mask_description *mask,
                             const cpparity_attention_dims *dims, float scale, void *stream,
                             char *error, size_t capacity) {
    (void)context;
    return forward_call("cuda-bf16", CPPARITY_KERNEL_DTYPE_BFLOAT16, out, lse, q, k, v, mask, dims,
                        NULL, scale, stream, error, capacity);
}

static int cuda_bf16_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                              const void *q, const void *k, const void *v, const void *out,
                              const float *lse, const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims, float scale, void *stream,
                              char *error, size_t capacity) {
    (void)context;
    return backward_call("cuda-bf16", CPPARITY_KERNEL_DTYPE_BFLOAT16, dq, dk, dv, dout, q, k, v,
                         out, lse, mask, dims, NULL, scale, stream, error, capacity);
}

/* Block calls (ABI 3): the same kernels, rows named by the block's device index arrays. */
#define CUDA_BLOCK_CALLS(suffix, name, dtype)                                                      \
    static int cuda_##suffix##_forward_block(                                                      \
        void *context, void *out, float *lse, const void *q, const void *k, const void *v,         \
        const cpparity_mask_description *mask, const cpparity_attention_dims *dims,                \
        const cpparity_attention_block *block, float scale, void *stream, char *error,             \
        size_t capacity) {                                                                         \
        (void)context;                                                                             \
        return forward_call(name, dtype, out, lse, q, k, v, mask, dims, block, scale, stream,      \
                            error, capacity);                                                      \
    }                                                                                              \
    static int cuda_##suffix##_backward_block(                                                     \
        void *context, void *dq, void *dk, void *dv, const void *dout, const void *q,              \
        const void *k, const void *v, const void *out, const float *lse,                           \
        const cpparity_mask_description *mask, const cpparity_attention_dims *dims,                \
        const cpparity_attention_block *block, float scale, void *stream, char *error,             \
        size_t capacity) {                                                                         \
        (void)context;                                                                             \
        return backward_call(name, dtype, dq, dk, dv, dout, q, k, v, out, lse, mask, dims, block,  \
                             scale, stream, error, capacity);                                      \
    }

CUDA_BLOCK_CALLS(f32, "cuda-f32", CPPARITY_KERNEL_DTYPE_FLOAT32)
CUDA_BLOCK_CALLS(bf16, "cuda-bf16", CPPARITY_KERNEL_DTYPE_BFLOAT16)

/* Fields in kernel.h's order: abi_version, struct_size, name, version, device, dtype,
 * deterministic, context, forward, backward, capabilities, head_dim_count, head_dims, supports,
 * workspace_bytes (NULL: their scratch is device memory, which the host memory estimate does not
 * count), forward_block, backward_block (ABI 3). */
static const cpparity_attention_kernel cuda_f32_kernel = {
    CPPARITY_KERNEL_ABI_VERSION,
    sizeof(cpparity_attention_kernel),
    "cuda-f32",
    "1",
    CPPARITY_KERNEL_DEVICE_CUDA,
    CPPARITY_KERNEL_DTYPE_FLOAT32,
    1,
    NULL,
    cuda_f32_forward,
    cuda_f32_backward,
    CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,
    0,
    NULL,
    NULL,
    NULL,
    cuda_f32_forward_block,
    cuda_f32_backward_block,
};

static const cpparity_attention_kernel cuda_bf16_kernel = {
    CPPARITY_KERNEL_ABI_VERSION,
    sizeof(cpparity_attention_kernel),
    "cuda-bf16",
    "1",
    CPPARITY_KERNEL_DEVICE_CUDA,
    CPPARITY_KERNEL_DTYPE_BFLOAT16,
    1,
    NULL,
    cuda_bf16_forward,
    cuda_bf16_backward,
    CPPARITY_KERNEL_SUPPORTS_ALL | CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION,
    0,
    NULL,
    NULL,
    NULL,
    cuda_bf16_forward_block,
    cuda_bf16_backward_block,
};

const cpparity_attention_kernel *cpparity_cuda_f32_kernel(void) {
    return &cuda_f32_kernel;
}

const cpparity_attention_kernel *cpparity_cuda_bf16_kernel(void) {
    return &cuda_bf16_kernel;
}
