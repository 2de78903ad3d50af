/*
 * layers_cuda.h — the small CUDA kernels of the CUDA model (distributed/models/model_cuda.h): the
 * layers of distributed/models/layers_f32.h ported to the device, the bfloat16 storage rounding
 * (distributed/device/bfloat16.h's host/device function) and the packing around Ulysses'
 * all-to-alls (distributed/cp/ulysses.c). Matrix products are not here: the model calls cuBLAS.
 *
 * Every pointer is device memory; every function enqueues its work on `stream` and returns
 * cudaGetLastError() (the launch's error, or an earlier asynchronous one). Rows are a rank's
 * local tokens (N = B·L) and every layout is the one of layers_f32.h and ulysses.h.
 *
 * Deterministic: no atomics. Each output element is written by one thread; sums over a row run
 * in a fixed tree inside one block of LAYERS_CUDA_BLOCK threads; sums across rows (weight
 * gradients of RMSNorm, the embedding's gradient, the loss) run in row order in one thread, the
 * order of the CPU code. The same inputs give the same bits.
 *
 * Backward functions ADD into weight gradients and, like layers_f32.h, rmsnorm's ADDS into din;
 * the others OVERWRITE their input gradients.
 */
#ifndef CPPARITY_DISTRIBUTED_LAYERS_CUDA_H
#define CPPARITY_DISTRIBUTED_LAYERS_CUDA_H

#include <cuda_runtime.h>
#include <stdint.h>

/* Threads of every block; row reductions are trees over this many partial sums. */
#define LAYERS_CUDA_BLOCK 256

/* x = bf16_round(x), count elements. */
cudaError_t cuda_round_bf16(float *x, int64_t count, cudaStream_t stream);

/* out = a + b, count elements (out may be a or b). */
cudaError_t cuda_add(float *out, const float *a, const float *b, int64_t count,
                     cudaStream_t stream);

/* out [N, D] = weight ⊙ in · rstd, rstd [N] = 1/sqrt(mean(in²) + eps). */
cudaError_t cuda_rmsnorm_forward(float *out, float *rstd, const float *in, const float *weight,
                                 int64_t rows, int64_t dim, float eps, cudaStream_t stream);
/* din += (input gradient); dweight += Σ over rows, in row order, of dout ⊙ in · rstd. */
cudaError_t cuda_rmsnorm_backward(float *din, float *dweight, const float *dout, const float *in,
                                  const float *weight, const float *rstd, int64_t rows, int64_t dim,
                                  cudaStream_t stream);

/* Rotary embedding in place on x [N, heads, Dh] at positions [N] (angles in double, as on the
 * CPU); direction −1 applies the inverse rotation (the backward). */
cudaError_t cuda_rope_apply(float *x, const int64_t *positions, int64_t rows, int64_t heads,
                            int64_t head_dim, double theta, int direction, cudaStream_t stream);

/* out = silu(gate) ⊙ up;  backward writes dgate and dup. */
cudaError_t cuda_swiglu_forward(float *out, const float *gate, const float *up, int64_t count,
                                cudaStream_t stream);
cudaError_t cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, int64_t count, cudaStream_t stream);

/* out [N, D] = weight rows of ids [N]. */
cudaError_t cuda_embedding_forward(float *out, const int64_t *ids, const float *weight,
                                   int64_t rows, int64_t dim, cudaStream_t stream);

/* The tokens of a batch grouped by vocabulary row, for the embedding's backward without
 * atomics: group g holds row ids[g] and the tokens order[starts[g] .. starts[g+1]), increasing.
 * Built on the host from the token ids (cuda_token_groups_build), then copied to the device. */
typedef struct cuda_token_groups {
    int64_t count;   /* groups: distinct ids */
    int64_t *ids;    /* [count] vocabulary row of each group */
    int64_t *starts; /* [count + 1] */
    int64_t *order;  /* [N] token indices, by group, increasing inside a group */
} cuda_token_groups;

/* Fills host arrays ids (capacity N), starts (N + 1) and order (N) from token ids [N] and
 * returns the number of groups. scratch holds N int64 values. */
int64_t cuda_token_groups_build(int64_t *ids, int64_t *starts, int64_t *order, int64_t *scratch,
                                const int64_t *tokens, int64_t rows);

/* dweight rows += dout rows of their tokens, one block per group, tokens in increasing order
 * (the CPU's order); groups holds device arrays. */
cudaError_t cuda_embedding_backward(float *dweight, const float *dout,
                                    const cuda_token_groups *groups, int64_t dim,
                                    cudaStream_t stream);

/* row_loss [N] = log Σ exp(logits row) − logit of the label on labeled rows, 0 elsewhere; then
 * *sum (one float) = Σ of row_loss over labeled rows in row order. labels in [0, V) or −100. */
cudaError_t cuda_cross_entropy_sum(float *sum, float *row_loss, const float *logits,
                                   const int64_t *labels, int64_t rows, int64_t vocab,
                                   cudaStream_t stream);
/* dlogits = (softmax − onehot) · scale on labeled rows, 0 elsewhere. */
cudaError_t cuda_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *labels,
                                        int64_t rows, int64_t vocab, float scale,
                                        cudaStream_t stream);

/* Ulysses (ulysses.h), for `heads` heads over cp ranks, Hl = heads / cp, block = B·L·Hl·Dh:
 * heads → sequence: send [cp][B, L, Hl, Dh] block j = heads [j·Hl, (j+1)·Hl) of in [B, L, heads,
 * Dh]; out [B, L·cp, Hl, Dh] from receive [cp][B, L, Hl, Dh] (block i = positions [i·L,
 * (i+1)·L)). sequence → heads: the inverse pair. */
cudaError_t cuda_pack_heads_to_sequence(float *send, const float *in, int64_t batch,
                                        int64_t local_len, int64_t heads, int64_t head_dim,
                                        int64_t cp, cudaStream_t stream);
cudaError_t cuda_unpack_heads_to_sequence(float *out, const float *receive, int64_t batch,
                                          int64_t local_len, int64_t heads, int64_t head_dim,
                                          int64_t cp, cudaStream_t stream);
cudaError_t cuda_pack_sequence_to_heads(float *send, const float *in, int64_t batch,
                                        int64_t local_len, int64_t heads, int64_t head_dim,
                                        int64_t cp, cudaStream_t stream);
cudaError_t cuda_unpack_sequence_to_heads(float *out, const float *receive, int64_t batch,
                                          int64_t local_len, int64_t heads, int64_t head_dim,
                                          int64_t cp, cudaStream_t stream);

/* out [T, cp, Dh]: repeat j = in head j / (cp / kv_heads) of in [T, kv_heads, Dh]. */
cudaError_t cuda_repeat_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                           int64_t cp, int64_t head_dim, cudaStream_t stream);
/* out [T, kv_heads, Dh] = Σ, repeats in increasing order from 0, of in [T, cp, Dh]. */
cudaError_t cuda_sum_repeated_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                                 int64_t cp, int64_t head_dim, cudaStream_t stream);

#endif
