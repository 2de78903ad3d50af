/* layers_cuda.cu — the small CUDA kernels of the CUDA model (see layers_cuda.h). Each kernel
 * is the loop of distributed/models/layers_f32.c or distributed/cp/ulysses.c it names, one thread
 * per output element (grid-stride), or one block per row where a row is reduced. */
#include "distributed/models/layers_cuda.h"

#include <math.h>
#include <string.h>

#include "distributed/device/bfloat16.h"

#define IGNORE_INDEX (-100) /* CPPARITY_IGNORE_INDEX (common/batch.h) */
#define MAX_BLOCKS 65535    /* grid size cap: the loops stride over the rest */

/* Blocks for count elements at LAYERS_CUDA_BLOCK threads, at least 1, at most MAX_BLOCKS. */
static unsigned element_blocks(int64_t count) {
    const int64_t blocks = (count + LAYERS_CUDA_BLOCK - 1) / LAYERS_CUDA_BLOCK;
    return (unsigned)(blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
}

/* Blocks for one block per row. */
static unsigned row_blocks(int64_t rows) {
    return (unsigned)(rows < 1 ? 1 : rows > MAX_BLOCKS ? MAX_BLOCKS : rows);
}

/* The first element of this thread and the stride of a grid-stride loop. */
#define GRID_LOOP(e, count)                                                                        \
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < (count);                  \
         e += (int64_t)gridDim.x * blockDim.x)

/* The sum of every thread's value in a fixed tree (deterministic); every thread gets it. */
__device__ static float block_sum(float value, float *shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int stride = LAYERS_CUDA_BLOCK / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) {
            shared[threadIdx.x] += shared[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const float result = shared[0];
    __syncthreads(); /* shared is reused by the next reduction */
    return result;
}

/* The largest of every thread's value (the CPU's comparison); every thread gets it. */
__device__ static float block_max(float value, float *shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int stride = LAYERS_CUDA_BLOCK / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) {
            const float other = shared[threadIdx.x + stride];
            shared[threadIdx.x] = other > shared[threadIdx.x] ? other : shared[threadIdx.x];
        }
        __syncthreads();
    }
    const float result = shared[0];
    __syncthreads();
    return result;
}

__global__ static void round_bf16_kernel(float *x, int64_t count) {
    GRID_LOOP(e, count) {
        x[e] = bf16_round(x[e]);
    }
}

cudaError_t cuda_round_bf16(float *x, int64_t count, cudaStream_t stream) {
    round_bf16_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(x, count);
    return cudaGetLastError();
}

__global__ static void add_kernel(float *out, const float *a, const float *b, int64_t count) {
    GRID_LOOP(e, count) {
        out[e] = a[e] + b[e];
    }
}

cudaError_t cuda_add(float *out, const float *a, const float *b, int64_t count,
                     cudaStream_t stream) {
    add_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(out, a, b, count);
    return cudaGetLastError();
}

/* One block per row: rstd from the row's sum of squares, then out. */
__global__ static void rmsnorm_forward_kernel(float *out, float *rstd, const float *in,
                                              const float *weight, int64_t rows, int64_t dim,
                                              float eps) {
    __shared__ float shared[LAYERS_CUDA_BLOCK];
    for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
        const float *x = in + n * dim;
        float partial = 0.0f;
        for (int64_t i = threadIdx.x; i < dim; i += LAYERS_CUDA_BLOCK) {
            partial += x[i] * x[i];
        }
        const float squares = block_sum(partial, shared);
        const float scale = 1.0f / sqrtf(squares / (float)dim + eps);
        if (threadIdx.x == 0) {
            rstd[n] = scale;
        }
        for (int64_t i = threadIdx.x; i < dim; i += LAYERS_CUDA_BLOCK) {
            out[n * dim + i] = x[i] * scale * weight[i];
        }
    }
}

cudaError_t cuda_rmsnorm_forward(float *out, float *rstd, const float *in, const float *weight,
                                 int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
    rmsnorm_forward_kernel<<<row_blocks(rows), LAYERS_CUDA_BLOCK, 0, stream>>>(
        out, rstd, in, weight, rows, dim, eps);
    return cudaGetLastError();
}

/* One block per row: din += g·w·rstd − x·(Σ g·w·x)·rstd³/D. */
__global__ static void rmsnorm_backward_input_kernel(float *din, const float *dout, const float *in,
                                                     const float *weight, const float *rstd,
                                                     int64_t rows, int64_t dim) {
    __shared__ float shared[LAYERS_CUDA_BLOCK];
    for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
        const float *x = in + n * dim, *g = dout + n * dim;
        const float scale = rstd[n];
        float partial = 0.0f;
        for (int64_t i = threadIdx.x; i < dim; i += LAYERS_CUDA_BLOCK) {
            partial += g[i] * weight[i] * x[i];
        }
        const float dot = block_sum(partial, shared);
        const float correction = dot * scale * scale * scale / (float)dim;
        for (int64_t i = threadIdx.x; i < dim; i += LAYERS_CUDA_BLOCK) {
            din[n * dim + i] += g[i] * weight[i] * scale - x[i] * correction;
        }
    }
}

/* One thread per feature: dweight[i] += Σ over rows in order of g·x·rstd. */
__global__ static void rmsnorm_backward_weight_kernel(float *dweight, const float *dout,
                                                      const float *in, const float *rstd,
                                                      int64_t rows, int64_t dim) {
    GRID_LOOP(i, dim) {
        float sum = dweight[i];
        for (int64_t n = 0; n < rows; n++) {
            sum += dout[n * dim + i] * in[n * dim + i] * rstd[n];
        }
        dweight[i] = sum;
    }
}

cudaError_t cuda_rmsnorm_backward(float *din, float *dweight, const float *dout, const float *in,
                                  const float *weight, const float *rstd, int64_t rows, int64_t dim,
                                  cudaStream_t stream) {
    rmsnorm_backward_input_kernel<<<row_blocks(rows), LAYERS_CUDA_BLOCK, 0, stream>>>(
        din, dout, in, weight, rstd, rows, dim);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
        return launched;
    }
    rmsnorm_backward_weight_kernel<<<element_blocks(dim), LAYERS_CUDA_BLOCK, 0, stream>>>(
        dweight, dout, in, rstd, rows, dim);
    return cudaGetLastError();
}

/* One thread per (row, head, i < Dh/2): the pair (i, i + Dh/2) rotated by position · inv_freq. */
__global__ static void rope_kernel(float *x, const int64_t *positions, int64_t rows, int64_t heads,
                                   int64_t head_dim, double theta, int direction) {
    const int64_t half = head_dim / 2;
    GRID_LOOP(e, rows * heads * half) {
        const int64_t i = e % half, h = e / half % heads, n = e / half / heads;
        /* angles in double: float32 positions times frequencies lose digits at large t */
        const double frequency = 1.0 / pow(theta, (double)(2 * i) / (double)head_dim);
        const double angle = (double)positions[n] * frequency;
        const float c = (float)cos(angle), s = (float)direction * (float)sin(angle);
        float *pair = x + (n * heads + h) * head_dim;
        const float first = pair[i], second = pair[i + half];
        pair[i] = first * c - second * s;
        pair[i + half] = second * c + first * s;
    }
}

cudaError_t cuda_rope_apply(float *x, const int64_t *positions, int64_t rows, int64_t heads,
                            int64_t head_dim, double theta, int direction, cudaStream_t stream) {
    rope_kernel<<<element_blocks(rows * heads * (head_dim / 2)), LAYERS_CUDA_BLOCK, 0, stream>>>(
        x, positions, rows, heads, head_dim, theta, direction);
    return cudaGetLastError();
}

__global__ static void swiglu_forward_kernel(float *out, const float *gate, const float *up,
                                             int64_t count) {
    GRID_LOOP(e, count) {
        const float sigma = 1.0f / (1.0f + expf(-gate[e]));
        out[e] = gate[e] * sigma * up[e];
    }
}

cudaError_t cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t count,
                                cudaStream_t stream) {
    swiglu_forward_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(out, gate, up,
                                                                                   count);
    return cudaGetLastError();
}

__global__ static void swiglu_backward_kernel(float *dgate, float *dup, const float *dout,
                                              const float *gate, const float *up, int64_t count) {
    GRID_LOOP(e, count) {
        const float sigma = 1.0f / (1.0f + expf(-gate[e]));
        const float silu = gate[e] * sigma;
        dup[e] = dout[e] * silu;
        dgate[e] = dout[e] * up[e] * (sigma + silu * (1.0f - sigma));
    }
}

cudaError_t cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, int64_t count, cudaStream_t stream) {
    swiglu_backward_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        dgate, dup, dout, gate, up, count);
    return cudaGetLastError();
}

__global__ static void embedding_forward_kernel(float *out, const int64_t *ids, const float *weight,
                                                int64_t rows, int64_t dim) {
    GRID_LOOP(e, rows * dim) {
        const int64_t n = e / dim, i = e % dim;
        out[e] = weight[ids[n] * dim + i];
    }
}

cudaError_t cuda_embedding_forward(float *out, const int64_t *ids, const float *weight,
                                   int64_t rows, int64_t dim, cudaStream_t stream) {
    embedding_forward_kernel<<<element_blocks(rows * dim), LAYERS_CUDA_BLOCK, 0, stream>>>(
        out, ids, weight, rows, dim);
    return cudaGetLastError();
}

int64_t cuda_token_groups_build(int64_t *ids, int64_t *starts, int64_t *order, int64_t *scratch,
                                const int64_t *tokens, int64_t rows) {
    for (int64_t n = 0; n < rows; n++) {
        order[n] = n;
    }
    /* bottom-up merge sort of token indices by id, stable: equal ids keep increasing indices */
    int64_t *from = order, *to = scratch;
    for (int64_t width = 1; width < rows; width *= 2) {
        for (int64_t low = 0; low < rows; low += 2 * width) {
            const int64_t middle = low + width < rows ? low + width : rows;
            const int64_t high = low + 2 * width < rows ? low + 2 * width : rows;
            int64_t a = low, b = middle, k = low;
            while (a < middle && b < high) {
                to[k++] = tokens[from[b]] < tokens[from[a]] ? from[b++] : from[a++];
            }
            while (a < middle) {
                to[k++] = from[a++];
            }
            while (b < high) {
                to[k++] = from[b++];
            }
        }
        int64_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != order) {
        memcpy(order, from, (size_t)rows * sizeof(int64_t));
    }
    int64_t count = 0;
    for (int64_t k = 0; k < rows; k++) {
        if (k == 0 || tokens[order[k]] != tokens[order[k - 1]]) {
            ids[count] = tokens[order[k]];
            starts[count] = k;
            count++;
        }
    }
    starts[count] = rows;
    return count;
}

/* One block per group (vocabulary row), threads over features, the row's tokens in order. */
__global__ static void embedding_backward_kernel(float *dweight, const float *dout,
                                                 const int64_t *ids, const int64_t *starts,
                                                 const int64_t *order, int64_t groups,
                                                 int64_t dim) {
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        float *row = dweight + ids[g] * dim;
        for (int64_t i = threadIdx.x; i < dim; i += LAYERS_CUDA_BLOCK) {
            float sum = row[i];
            for (int64_t k = starts[g]; k < starts[g + 1]; k++) {
                sum += dout[order[k] * dim + i];
            }
            row[i] = sum;
        }
    }
}

cudaError_t cuda_embedding_backward(float *dweight, const float *dout,
                                    const cuda_token_groups *groups, int64_t dim,
                                    cudaStream_t stream) {
    embedding_backward_kernel<<<row_blocks(groups->count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        dweight, dout, groups->ids, groups->starts, groups->order, groups->count, dim);
    return cudaGetLastError();
}

/* log Σ exp over one row, shifted by its maximum, by the whole block (every thread gets it). */
__device__ static float row_log_sum_exp(const float *row, int64_t vocab, float *shared) {
    float maximum = row[0];
    for (int64_t v = threadIdx.x; v < vocab; v += LAYERS_CUDA_BLOCK) {
        maximum = row[v] > maximum ? row[v] : maximum;
    }
    maximum = block_max(maximum, shared);
    float partial = 0.0f;
    for (int64_t v = threadIdx.x; v < vocab; v += LAYERS_CUDA_BLOCK) {
        partial += expf(row[v] - maximum);
    }
    return maximum + logf(block_sum(partial, shared));
}

__global__ static void cross_entropy_rows_kernel(float *row_loss, const float *logits,
                                                 const int64_t *labels, int64_t rows,
                                                 int64_t vocab) {
    __shared__ float shared[LAYERS_CUDA_BLOCK];
    for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
        if (labels[n] == IGNORE_INDEX) { /* uniform over the block */
            if (threadIdx.x == 0) {
                row_loss[n] = 0.0f;
            }
            continue;
        }
        const float *row = logits + n * vocab;
        const float lse = row_log_sum_exp(row, vocab, shared);
        if (threadIdx.x == 0) {
            row_loss[n] = lse - row[labels[n]];
        }
    }
}

/* One thread: the labeled rows' losses summed in row order, as the CPU does. */
__global__ static void sum_labeled_kernel(float *sum, const float *row_loss, const int64_t *labels,
                                          int64_t rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (int64_t n = 0; n < rows; n++) {
            if (labels[n] != IGNORE_INDEX) {
                total += row_loss[n];
            }
        }
        *sum = total;
    }
}

cudaError_t cuda_cross_entropy_sum(float *sum, float *row_loss, const float *logits,
                                   const int64_t *labels, int64_t rows, int64_t vocab,
                                   cudaStream_t stream) {
    cross_entropy_rows_kernel<<<row_blocks(rows), LAYERS_CUDA_BLOCK, 0, stream>>>(
        row_loss, logits, labels, rows, vocab);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
        return launched;
    }
    sum_labeled_kernel<<<1, 1, 0, stream>>>(sum, row_loss, labels, rows);
    return cudaGetLastError();
}

__global__ static void cross_entropy_backward_kernel(float *dlogits, const float *logits,
                                                     const int64_t *labels, int64_t rows,
                                                     int64_t vocab, float scale) {
    __shared__ float shared[LAYERS_CUDA_BLOCK];
    for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
        float *grad = dlogits + n * vocab;
        const int64_t label = labels[n];
        if (label == IGNORE_INDEX) { /* uniform over the block */
            for (int64_t v = threadIdx.x; v < vocab; v += LAYERS_CUDA_BLOCK) {
                grad[v] = 0.0f;
            }
            continue;
        }
        const float *row = logits + n * vocab;
        const float lse = row_log_sum_exp(row, vocab, shared);
        for (int64_t v = threadIdx.x; v < vocab; v += LAYERS_CUDA_BLOCK) {
            float value = expf(row[v] - lse) * scale;
            if (v == label) {
                value -= scale; /* the CPU's grad[label] -= scale */
            }
            grad[v] = value;
        }
    }
}

cudaError_t cuda_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *labels,
                                        int64_t rows, int64_t vocab, float scale,
                                        cudaStream_t stream) {
    cross_entropy_backward_kernel<<<row_blocks(rows), LAYERS_CUDA_BLOCK, 0, stream>>>(
        dlogits, logits, labels, rows, vocab, scale);
    return cudaGetLastError();
}

/* send element e = (j, token, r): block j, token b·L + t, r < Hl·Dh. */
__global__ static void pack_heads_to_sequence_kernel(float *send, const float *in, int64_t tokens,
                                                     int64_t heads, int64_t head_dim, int64_t cp) {
    const int64_t width = heads / cp * head_dim, block = tokens * width;
    GRID_LOOP(e, cp * block) {
        const int64_t j = e / block, token = e % block / width, r = e % width;
        send[e] = in[(token * heads + j * (heads / cp)) * head_dim + r];
    }
}

cudaError_t cuda_pack_heads_to_sequence(float *send, const float *in, int64_t batch,
                                        int64_t local_len, int64_t heads, int64_t head_dim,
                                        int64_t cp, cudaStream_t stream) {
    const int64_t count = batch * local_len * heads * head_dim;
    pack_heads_to_sequence_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        send, in, batch * local_len, heads, head_dim, cp);
    return cudaGetLastError();
}

/* out element e = (b, s, r) of [B, S, Hl·Dh]: from block s / L, token b·L + s % L. */
__global__ static void unpack_heads_to_sequence_kernel(float *out, const float *receive,
                                                       int64_t batch, int64_t local_len,
                                                       int64_t width, int64_t cp) {
    const int64_t seq_len = local_len * cp, block = batch * local_len * width;
    GRID_LOOP(e, batch * seq_len * width) {
        const int64_t b = e / (seq_len * width), s = e / width % seq_len, r = e % width;
        const int64_t i = s / local_len, t = s % local_len;
        out[e] = receive[i * block + (b * local_len + t) * width + r];
    }
}

cudaError_t cuda_unpack_heads_to_sequence(float *out, const float *receive, int64_t batch,
                                          int64_t local_len, int64_t heads, int64_t head_dim,
                                          int64_t cp, cudaStream_t stream) {
    const int64_t count = batch * local_len * heads * head_dim;
    unpack_heads_to_sequence_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        out, receive, batch, local_len, heads / cp * head_dim, cp);
    return cudaGetLastError();
}

/* send element e = (j, b, t, r): in [B, S, Hl·Dh] at position j·L + t. */
__global__ static void pack_sequence_to_heads_kernel(float *send, const float *in, int64_t batch,
                                                     int64_t local_len, int64_t width, int64_t cp) {
    const int64_t seq_len = local_len * cp, block = batch * local_len * width;
    GRID_LOOP(e, cp * block) {
        const int64_t j = e / block, token = e % block / width, r = e % width;
        const int64_t b = token / local_len, t = token % local_len;
        send[e] = in[(b * seq_len + j * local_len + t) * width + r];
    }
}

cudaError_t cuda_pack_sequence_to_heads(float *send, const float *in, int64_t batch,
                                        int64_t local_len, int64_t heads, int64_t head_dim,
                                        int64_t cp, cudaStream_t stream) {
    const int64_t count = batch * local_len * heads * head_dim;
    pack_sequence_to_heads_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        send, in, batch, local_len, heads / cp * head_dim, cp);
    return cudaGetLastError();
}

/* out element e = (token, head, d) of [B·L, heads, Dh]: block head / Hl, local head head % Hl. */
__global__ static void unpack_sequence_to_heads_kernel(float *out, const float *receive,
                                                       int64_t tokens, int64_t heads,
                                                       int64_t head_dim, int64_t cp) {
    const int64_t local_heads = heads / cp, block = tokens * local_heads * head_dim;
    GRID_LOOP(e, tokens * heads * head_dim) {
        const int64_t token = e / (heads * head_dim), head = e / head_dim % heads;
        const int64_t d = e % head_dim;
        const int64_t i = head / local_heads, local = head % local_heads;
        out[e] = receive[i * block + (token * local_heads + local) * head_dim + d];
    }
}

cudaError_t cuda_unpack_sequence_to_heads(float *out, const float *receive, int64_t batch,
                                          int64_t local_len, int64_t heads, int64_t head_dim,
                                          int64_t cp, cudaStream_t stream) {
    const int64_t count = batch * local_len * heads * head_dim;
    unpack_sequence_to_heads_kernel<<<element_blocks(count), LAYERS_CUDA_BLOCK, 0, stream>>>(
        out, receive, batch * local_len, heads, head_dim, cp);
    return cudaGetLastError();
}

__global__ static void repeat_kv_kernel(float *out, const float *in, int64_t tokens,
                                        int64_t kv_heads, int64_t cp, int64_t head_dim) {
    GRID_LOOP(e, tokens * cp * head_dim) {
        const int64_t t = e / (cp * head_dim), j = e / head_dim % cp, d = e % head_dim;
        out[e] = in[(t * kv_heads + j / (cp / kv_heads)) * head_dim + d];
    }
}

cudaError_t cuda_repeat_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                           int64_t cp, int64_t head_dim, cudaStream_t stream) {
    repeat_kv_kernel<<<element_blocks(tokens * cp * head_dim), LAYERS_CUDA_BLOCK, 0, stream>>>(
        out, in, tokens, kv_heads, cp, head_dim);
    return cudaGetLastError();
}

__global__ static void sum_repeated_kv_kernel(float *out, const float *in, int64_t tokens,
                                              int64_t kv_heads, int64_t cp, int64_t head_dim) {
    const int64_t repeats = cp / kv_heads; /* repeats of head g: j in [g·repeats, (g+1)·repeats) */
    GRID_LOOP(e, tokens * kv_heads * head_dim) {
        const int64_t t = e / (kv_heads * head_dim), g = e / head_dim % kv_heads;
        const int64_t d = e % head_dim;
        float sum = 0.0f;
        for (int64_t j = g * repeats; j < (g + 1) * repeats; j++) {
            sum += in[(t * cp + j) * head_dim + d];
        }
        out[e] = sum;
    }
}

cudaError_t cuda_sum_repeated_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                                 int64_t cp, int64_t head_dim, cudaStream_t stream) {
    sum_repeated_kv_kernel<<<element_blocks(tokens * kv_heads * head_dim), LAYERS_CUDA_BLOCK, 0,
                             stream>>>(out, in, tokens, kv_heads, cp, head_dim);
    return cudaGetLastError();
}
