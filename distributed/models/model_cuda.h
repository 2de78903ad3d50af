/*
 * model_cuda.h — the CUDA model under test: distributed/models/model_f32.h's model (docs/model.md,
 * Ulysses context parallelism, same sharding, mask, loss, gradient all-reduce and bf16 storage
 * points) with parameters, activations and gradients in device memory and the math on the GPU.
 * CUDA code only (include from .cu files); the harness reaches it through
 * distributed/models/implementation_cuda.cu.
 *
 * The simplest faithful port of the CPU path: every matrix product is cublasSgemm on float32
 * buffers, float32 compute, pedantic math mode (no TF32, no atomics); with bf16 storage those
 * buffers hold bfloat16-rounded values (rounded at model_f32.h's storage points by
 * layers_cuda.h's cuda_round_bf16, the same round-to-nearest-even as bfloat16.h), exactly as the
 * CPU does. The small layers are layers_cuda.h's kernels; attention goes through the setup's
 * CUDA float32 kernel (kernel.h, device pointers, this instance's stream), for bf16 storage too,
 * on the rounded values. The mask is rebuilt on the host (mask_description.h) from the gathered
 * attention_mask and position_ids; the kernel gets that compact description.
 *
 * Ring attention (the `ring` algorithm, model_cuda_ring.cu): each rank keeps its own q, k, v with
 * every head; ring.c runs the steps on them through device operations (gathers, the log-sum-exp
 * merge, scatter-adds, the kernel's block calls, the device shift below), so the CPU and the GPU
 * share the choice of steps, rows and order. Hybrid U×R (Ulysses inside groups of U consecutive
 * ranks, ring across the R groups): the CP group is split as the CPU model splits it
 * (model_f32.c), the all-to-alls run on the Ulysses group, the ring on the ring group, with each
 * ring member holding its Ulysses group's tokens and H/U heads, and the loss, mask and gradient
 * collectives on the whole CP group.
 *
 * Streams and handles: each instance owns one cudaStream_t and one cuBLAS handle bound to it;
 * all its work is enqueued there, so ranks sharing a device (local communicator threads) never
 * share a stream, a handle or a buffer. cuBLAS is opened when the first instance is made
 * (cublas_library.h), so runs on CPU ranks never load it. The instance runs on the device current
 * when it was created (made current again at every call).
 *
 * Collectives: each runs on one cuda_group (the CP group, or a hybrid's Ulysses or ring group).
 * With the "nccl" communicator device pointers and the stream go straight to the
 * communicator. Local ranks (threads of this process, each with its own stream, handle and
 * buffers) that all run on one device exchange device to device: the host communicator swaps
 * buffer pointers, each rank copies (all-to-all) or sums in rank order (all-reduce) from the
 * others' buffers on its own stream, and all wait until every rank has read. This is how cp > 1
 * runs on one GPU. Otherwise ("mpi", or local ranks on several devices) the data is staged
 * through a pinned host buffer (cudaMemcpyAsync to the host, stream synchronize, the host
 * collective, cudaMemcpyAsync back).
 *
 * Deterministic: no atomics anywhere (layers_cuda.h), fixed reduction trees, cuBLAS with one
 * handle on one stream; the same inputs give the same bits. Built with -fmad=false
 * (distributed/CMakeLists.txt): every product and sum rounds on its own, as in the CPU code, so
 * element-wise kernels give the CPU's bits where their math functions agree.
 */
#ifndef CPPARITY_DISTRIBUTED_MODEL_CUDA_H
#define CPPARITY_DISTRIBUTED_MODEL_CUDA_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

extern "C" {
#include "common/batch.h"
#include "common/case.h"
#include "common/error.h"
#include "common/model_config.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "distributed/models/activation_layout.h"
#include "distributed/comm/comm.h"
#include "distributed/kernels/kernel.h"
#include "distributed/models/layer_attention.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/models/model_f32.h" /* f32_model_shape: what a model is made for */
#include "distributed/cp/ring.h"
#include "distributed/cp/shard.h"
}

#include "distributed/models/cublas_library.h" /* extern "C" itself: cublas_v2.h is C++ here */
#include "distributed/models/layers_cuda.h"

/* Offsets in the device activations of one layer's saved tensors: the CPU model's layout
 * (activation_layout.h). */
typedef model_layer_activations cuda_layer_activations;

/* Device buffers of the backward, reused layer after layer (model_f32_backward.c's scratch). */
typedef struct cuda_backward_buffers {
    float *stream, *residual, *normed; /* [N, D] */
    float *swiglu, *gate, *up;         /* [N, F] */
    float *attention, *q;              /* [N, H·Dh] */
    float *k, *v;                      /* [N, Hkv·Dh] */
    float *sequence_out, *sequence_q;  /* [B, S, Hl, Dh] */
    float *sequence_k, *sequence_v;    /* [B, S, Hkvl, Dh] */
    float *logits;                     /* [N, V] */
} cuda_backward_buffers;

/* A communicator the model's device collectives run on: the whole CP group, or a hybrid's Ulysses
 * group or ring (split from it). Whether its ranks share this device is found at its first device
 * collective, which all its ranks reach at the same point of the step. */
typedef struct cuda_group {
    cpparity_comm *comm;                     /* the CP group (borrowed) or a split (owned) */
    bool owned;                              /* made by cpparity_comm_split: freed with the model */
    bool shared_device_known, shared_device; /* local ranks all on this device */
    int64_t *peer_pointers;                  /* host [comm->size]: the ranks' buffers */
} cuda_group;

typedef struct cuda_model {
    cpparity_model_config config;            /* validated copy */
    cpparity_dtype dtype;                    /* float32, or bfloat16 at the storage points */
    int64_t batch;                           /* B */
    shard_layout shard;                      /* S, padded S, L, cp, rank, layout */
    cpparity_algorithm_choice algorithm;     /* ulysses, ring or hybrid U×R */
    bool ring;                               /* ring attention runs (ring, or hybrid's ring) */
    int64_t ulysses_degree;                  /* the all-to-all's ranks: cp, U (hybrid), 1 (ring) */
    int64_t ring_rows;                       /* rows a ring member holds: L, or U·L (hybrid) */
    int64_t local_heads, local_kv_heads;     /* H / degree; Hkv / degree or 1 (replicated) */
    bool kv_replicated;                      /* the degree is not a divisor of Hkv */
    cpparity_comm *comm;                     /* the CP group (borrowed) */
    cuda_group world;                        /* the CP group: mask, loss and gradients */
    cuda_group split[2];                     /* hybrid: its Ulysses group and ring (owned) */
    cuda_group *ulysses_group;               /* the all-to-alls' group: world, or split[0] */
    cuda_group *ring_group;                  /* the ring's group: world, or split[1] */
    bool device_comm;                        /* comm->kind is "nccl": device pointers */
    const cpparity_attention_kernel *kernel; /* CUDA float32 (borrowed) */
    int device;                              /* the CUDA device of the instance */
    cudaStream_t stream;                     /* all of this instance's work */
    const cublas_library *blas;              /* cuBLAS's functions (loaded on first use) */
    cublasHandle_t cublas;                   /* bound to stream */
    cpparity_tensor_table parameter_table;   /* model.md names */
    cpparity_model_parameters parameter;     /* offsets */
    cpparity_tensor_table activation_table;  /* saved activations */
    cuda_layer_activations layer[CPPARITY_MAX_LAYERS];
    int64_t final_input, final_rstd, final_normed, logits; /* [B,L,D], [B,L], [B,L,D], [B,L,V] */
    mask_storage mask;                                     /* host: over the gathered sequence */
    /* device memory */
    float *parameters;           /* [P] every rank holds all parameters */
    float *gradients;            /* [P] all-reduced: identical on every rank */
    float *activations;          /* activation_table.total */
    int64_t *input_ids, *labels; /* [N] this rank's slice */
    int64_t *positions;          /* [N] its position_ids (rotary) */
    int64_t *sequence_tokens;    /* [cp·L] the token of each row of the sequence after the
                                    all-to-all (rank i's rows at [i·L, (i+1)·L)), for the kernel's
                                    block calls; NULL for the contiguous layout (row = token) */
    int64_t *ring_index;         /* ring: [3·ring_rows] a step's rows and a block's tokens */
    cuda_token_groups groups;    /* the slice's tokens by vocabulary row (device arrays) */
    float *exchange;             /* 2·N·max(H, cp)·Dh: all-to-all send | receive */
    float *repeated;             /* [N, degree, Dh] kv heads repeated to the all-to-all's degree */
    float *projection;           /* [N, D] */
    float *row_loss;             /* [N] token losses */
    float *loss_sum;             /* [1] */
    cuda_backward_buffers grad;  /* backward scratch */
    void *device_staging;        /* nccl only: host data of mask and loss collectives */
    int64_t device_staging_bytes;
    /* host memory */
    float *host_staging;        /* host communicators: pinned, device collectives staged here */
    int64_t host_staging_count; /* floats */
    int64_t *host_groups;       /* [4N + 1]: building the token groups */
    int64_t *ring_tokens;       /* ring: [R·ring_rows] the global token of every member's rows */
    ring_operations ring_device_operations; /* ring: ring.h's operations on this device */
    float loss;                             /* global loss, identical on every rank */
    float loss_sum_local;                   /* Σ token losses over this rank's labels */
    int64_t labels_local;                   /* labeled tokens on this rank */
    int64_t labels_global;                  /* labeled tokens in the whole batch */
    float *reduce_scratch;        /* device: an all-reduce's sum (made at the first use) */
    int64_t reduce_scratch_count; /* floats */
    /* a planted fault (model_cuda_faults.cu; NONE normally) and its buffers */
    cpparity_fault fault;
    float *ordered;               /* device [N, max(H, cp), Dh]: a2a-head-order's head order */
    int64_t *host_rope_positions; /* host [N]: positions-local's rotary positions */
    float *reported_logits;       /* host [N, V]: stale-rank-slice's reported slice */
} cuda_model;

/* Allocates the model (stream, cuBLAS handle, device memory; a hybrid's split groups) for the
 * shape (model_f32.h, the CPU model's: batches of B rows of seq_len tokens sharded over comm by
 * layout, storage dtype, algorithm, and the fault whose groups a hybrid forms at init: planted by
 * cuda_model_set_fault), attention through kernel (CUDA, float32). A layout other than contiguous,
 * and ring attention (alone or in a hybrid), call the kernel's block calls (kernel.h ABI 3), each
 * row named by its token: the kernel must have them. Every rank of comm calls it (a hybrid
 * splits comm). Parameters are zero until cuda_model_load_parameters. Frees what it made on
 * failure. */
cpparity_status cuda_model_init(cuda_model *model, const cpparity_model_config *config,
                                const f32_model_shape *shape, cpparity_comm *comm,
                                const cpparity_attention_kernel *kernel, cpparity_error *error);

/* Writes the tokens of the rows the kernel sees from the shard (again after the
 * zigzag-chunk-swap fault changed it): sequence_tokens for Ulysses, ring_tokens for the ring. */
cpparity_status cuda_model_upload_sequence_tokens(cuda_model *model, cpparity_error *error);

/* Ring attention of layer l (model_cuda_ring.cu): forward from the layer's q, k, v (ring) or its
 * sequence_q, _k, _v (hybrid: after the Ulysses group's all-to-alls) into its sequence_out
 * (rounded at the storage point) and sequence_lse, and for ring alone into attention; backward
 * from grad.attention (ring) or grad.sequence_out (hybrid) into grad.q, grad.k, grad.v (ring) or
 * grad.sequence_q, _k, _v (hybrid). */
cpparity_status cuda_model_ring_forward(cuda_model *model, int64_t l, cpparity_error *error);
cpparity_status cuda_model_ring_backward(cuda_model *model, int64_t l, cpparity_error *error);
/* ring_tokens from the shard as dealt (row r of a hybrid's member m: rank m·U + r / L's token
 * r mod L, as the Ulysses group's all-to-all delivers them), and the device operations bound to
 * this model. */
cpparity_status cuda_model_ring_tokens(cuda_model *model, cpparity_error *error);

/* The kernel's forward and backward on the gathered sequence: a whole-sequence call, or for a
 * layout other than contiguous a block call naming each row's token (sequence_tokens). */
int cuda_model_kernel_forward(cuda_model *model, float *out, float *lse, const float *q,
                              const float *k, const float *v, const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims, float scale, char *message,
                              size_t size);
int cuda_model_kernel_backward(cuda_model *model, float *dq, float *dk, float *dv,
                               const float *dout, const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims, float scale, char *message,
                               size_t size);

/* Every parameter from values (table->total float64 elements), by model.md name and shape,
 * rounded to float32 and then to the storage dtype on the host, copied to the device. */
cpparity_status cuda_model_load_parameters(cuda_model *model, const cpparity_tensor_table *table,
                                           const double *values, cpparity_error *error);

/* Forward on this rank's slice (B × L host tokens, distributed/cp/shard.h): logits, loss. */
cpparity_status cuda_model_forward(cuda_model *model, const cpparity_batch *local,
                                   cpparity_error *error);

/* Backward after forward: every parameter gradient, all-reduced over the group. */
cpparity_status cuda_model_backward(cuda_model *model, cpparity_error *error);

/* Copies count floats from device memory at source into host values (then synchronizes). */
cpparity_status cuda_model_copy_out(cuda_model *model, float *values, const float *source,
                                    int64_t count, cpparity_error *error);

/* Makes the model's device current (every entry point calls it first). */
cpparity_status cuda_model_use_device(const cuda_model *model, cpparity_error *error);

/* Releases everything; safe on a zeroed model and after a failed init. */
void cuda_model_free(cuda_model *model);

/* --- shared by model_cuda.cu, model_cuda_forward.cu and model_cuda_backward.cu ------------- */

/* Rows of the "sequence" tensors (activations and gradients): the whole padded sequence after
 * the all-to-all (Ulysses), a ring member's rows (ring: the rank's own L; hybrid: its Ulysses
 * group's U·L), as in the CPU model. */
int64_t cuda_model_sequence_rows(const cuda_model *model);

/* Rounds count device values at x to the storage dtype (nothing for float32). */
cpparity_status cuda_model_store(cuda_model *model, float *x, int64_t count, cpparity_error *error);

/* out [N, O] = in [N, I] · weightᵀ (cublasSgemm). */
cpparity_status cuda_model_linear_forward(cuda_model *model, float *out, const float *in,
                                          const float *weight, int64_t rows, int64_t in_features,
                                          int64_t out_features, cpparity_error *error);
/* din [N, I] (+= when accumulate, else =) dout · weight;  dweight [O, I] += doutᵀ · in. */
cpparity_status cuda_model_linear_backward(cuda_model *model, float *din, float *dweight,
                                           const float *dout, const float *in, const float *weight,
                                           int64_t rows, int64_t in_features, int64_t out_features,
                                           bool accumulate, cpparity_error *error);

/* Ulysses (ulysses.h) on device buffers: [B, L, heads, Dh] → [B, U·L, heads/U, Dh] and back
 * (U the all-to-all's degree: cp, or a hybrid's U), through model->exchange and the Ulysses
 * group. */
cpparity_status cuda_model_heads_to_sequence(cuda_model *model, float *out, const float *in,
                                             int64_t heads, cpparity_error *error);
cpparity_status cuda_model_sequence_to_heads(cuda_model *model, float *out, const float *in,
                                             int64_t heads, cpparity_error *error);

/* Collectives of the whole CP group. device_*: device buffers (staged through host memory for
 * the host communicators); host_*: host buffers (staged through device memory for nccl). */
cpparity_status cuda_model_all_reduce_device(cuda_model *model, float *values, int64_t count,
                                             cpparity_error *error);
cpparity_status cuda_model_all_reduce_host(cuda_model *model, void *values, int64_t count,
                                           cpparity_element_type type, cpparity_error *error);
cpparity_status cuda_model_all_gather_host(cuda_model *model, const void *send, void *receive,
                                           int64_t count_per_rank, cpparity_element_type type,
                                           cpparity_error *error);
/* The ring shift (comm.h cpparity_shift) of count device floats over the ring group: member r's
 * send into member r + offset's receive (NCCL, device to device between local ranks on one GPU,
 * or staged through the host). */
cpparity_status cuda_model_shift_device(cuda_model *model, const float *send, float *receive,
                                        int64_t count, int offset, cpparity_error *error);

/* The mask description of layer l over model->mask (host arrays), and the kernel's scale, with
 * the model's planted fault (layer_attention.h). */
cpparity_mask_description cuda_model_layer_mask(const cuda_model *model, int64_t l);
float cuda_model_attention_scale(const cuda_model *model);

/* --- planted faults (model_cuda_faults.cu): the CPU model's deviations, at the same places ---- */

/* Plants fault (fault.h) in the model, after init, before the first forward: an input error for
 * the built-in CPU kernel's faults (implementation_cuda.cu refuses them before init), a runtime
 * error when its buffers cannot be allocated. */
cpparity_status cuda_model_set_fault(cuda_model *model, cpparity_fault fault,
                                     cpparity_error *error);
/* a2a-head-order: `in` [N, heads, Dh] reordered into ordered so that the normal packing sends
 * rank j the heads ulysses_sent_head gives. */
cpparity_status cuda_model_fault_order_heads(cuda_model *model, float *ordered, const float *in,
                                             int64_t heads, cpparity_error *error);
/* gqa-kv-mapping, kv-sum-back: ulysses_repeat_kv_mapped and ulysses_sum_repeated_kv_mapped. */
cpparity_status cuda_model_fault_repeat_kv(cuda_model *model, float *out, const float *in,
                                           cpparity_error *error);
cpparity_status cuda_model_fault_sum_repeated_kv(cuda_model *model, float *out, const float *in,
                                                 cpparity_error *error);
/* autopad-truncate: the truncated tokens' logits zeroed. */
cpparity_status cuda_model_fault_truncate_logits(cuda_model *model, cpparity_error *error);
/* stale-rank-slice: reported_logits = the next rank's logits (a collective). */
cpparity_status cuda_model_fault_report_stale_slice(cuda_model *model, cpparity_error *error);
/* grad-not-reduced, grad-reduce-order, grad-scaled-by-cp: the gradient's reduction, deviated. */
cpparity_status cuda_model_fault_reduce_gradients(cuda_model *model, cpparity_error *error);

#endif
