/*
 * model_f32.h — the implementation under test: the float32 model of docs/model.md with context
 * parallelism. Rank r of a cp-sized group holds L tokens of every row, placed by the layout
 * (distributed/cp/shard.h). With Ulysses, around every attention an all-to-all turns [B, L, H, Dh]
 * into [B, S, H/cp, Dh] and back (distributed/cp/ulysses.h), the tokens put in position order
 * between the two; with ring, each rank keeps its queries and all heads while key/value blocks
 * pass round the ring (distributed/cp/ring.h). The mask is rebuilt over the whole sequence
 * from the gathered attention_mask and position_ids (distributed/kernels/mask_description.h);
 * attention runs through a kernel (distributed/kernels/kernel.h). The loss divides the sum of the
 * rank's token losses by the global label count; parameter gradients are all-reduced over the group
 * so that every rank ends with identical bits.
 *
 * Storage dtype. With float32 everything is float32. With bfloat16 the model is mixed precision
 * as in bf16 training: arithmetic, every sum (matrix products, softmax statistics, norms, loss)
 * and every gradient are float32, but each value the model stores is rounded to bfloat16
 * (distributed/device/bfloat16.h) at these points — the storage points:
 *   parameters (on load); per layer: the normed input, q, k and v after the projection and again
 *   after rotary, the attention output (lse stays float32), the o_proj output, the residual
 *   stream after the attention add, the post-attention normed input, gate, up, the SwiGLU
 *   product, the down_proj output, the residual stream after the MLP add; the final normed input
 *   and the logits (made one chunk of tokens at a time, never held for the slice: the loss is
 *   chunked as real frameworks chunk it, model_f32_head.c). The embedding output is a parameter
 * row, already bfloat16. Activation gradients and parameter gradients stay float32 and are
 * all-reduced in float32.
 *
 * It shares definitions with the reference (model config, parameter table) and none of its math.
 * The harness reaches it only through distributed/models/implementation.h (implementation_cpu.c);
 * its weights come from the harness (f32_model_load_parameters), never from fixtures.
 */
#ifndef CPPARITY_DISTRIBUTED_MODEL_F32_H
#define CPPARITY_DISTRIBUTED_MODEL_F32_H

#include <stdbool.h>
#include <stdint.h>

#include "common/batch.h"
#include "common/case.h"
#include "common/error.h"
#include "common/model_config.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "distributed/models/activation_layout.h"
#include "distributed/comm/comm.h"
#include "common/fault.h"
#include "distributed/kernels/kernel.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/cp/ring.h"
#include "distributed/cp/shard.h"

/* Offsets of one layer's saved activations (activation_layout.h, shared with the CUDA model). */
typedef model_layer_activations f32_layer_activations;

typedef struct f32_model {
    cpparity_model_config config;            /* validated copy */
    cpparity_dtype dtype;                    /* storage: float32, or bfloat16 at the storage
                                                points above */
    int64_t batch;                           /* B */
    shard_layout shard;                      /* layout, S, padded S, L, cp, rank */
    cpparity_algorithm_choice algorithm;     /* ulysses: all-to-all around the kernel; ring:
                                                key/value blocks round the ring (ring.h); hybrid
                                                U×R: Ulysses inside groups of U, ring across */
    cpparity_comm *ulysses_comm;             /* the all-to-all's ranks: comm (ulysses), this
                                                rank's group of U (hybrid), NULL (ring) */
    cpparity_comm *ring_comm;                /* the ring: comm (ring), the R ranks at this
                                                rank's place in every group (hybrid), NULL */
    bool owns_split;                         /* hybrid: the two above are the model's own */
    int64_t ulysses_degree;                  /* ranks of ulysses_comm (1 for ring) */
    int64_t ring_rows;                       /* rows a ring member holds: L, or U·L (hybrid) */
    int64_t *ring_tokens;                    /* [ring size × ring_rows] global token of each
                                                row of each member (ring.h); NULL (ulysses) */
    int64_t local_heads;                     /* Hl = H / cp (ring: H; hybrid: H / U) */
    int64_t local_kv_heads;                  /* Hkv / cp (sharded) or 1 (replicated); ring: Hkv;
                                                hybrid: as Ulysses with U for cp */
    bool kv_replicated;                      /* the Ulysses degree is a multiple of Hkv */
    cpparity_comm *comm;                     /* the CP group (borrowed) */
    const cpparity_attention_kernel *kernel; /* borrowed */
    cpparity_tensor_table parameter_table;   /* model.md names */
    cpparity_model_parameters parameter;     /* offsets */
    float *parameters;                       /* every rank holds all parameters */
    float *gradients;                        /* all-reduced: identical on every rank */
    cpparity_tensor_table activation_table;  /* saved activations */
    float *activations;
    f32_layer_activations layer[CPPARITY_MAX_LAYERS];
    int64_t final_input, final_rstd, final_normed; /* [B,L,D], [B,L], [B,L,D] */
    int64_t logits;          /* the layout's saved logits: [B, 0, V], none (model_f32_head.c) */
    mask_storage mask;       /* over the gathered, padded sequence */
    float loss;              /* global loss, identical on every rank */
    float loss_sum;          /* Σ token losses over this rank's labels */
    int64_t labels_local;    /* labeled tokens on this rank */
    int64_t labels_global;   /* labeled tokens in the whole batch */
    cpparity_fault fault;    /* a fault planted for the self-test (fault.h), NONE as built */
    int64_t *rope_positions; /* positions-local only: [B, L] shard-local indices, else NULL */
    float *reported_logits;  /* stale-rank-slice only: the slice reported, else NULL */
} f32_model;

/* Checks that the configuration can run at cp ranks with algorithm, before any compute. The
 * message of a refusal names the constraint (Ulysses: num_attention_heads or num_key_value_heads
 * and cp; hybrid: the same with U, and U·R = cp; ring and hybrid: a kernel without block calls).
 * kernel may be NULL (not checked). */
cpparity_status f32_model_check_parallelism(const cpparity_model_config *config, int64_t cp,
                                            cpparity_algorithm_choice algorithm,
                                            const cpparity_attention_kernel *kernel,
                                            cpparity_error *error);

/* What a model is made for besides its configuration. */
typedef struct f32_model_shape {
    int64_t batch;                       /* B */
    int64_t seq_len;                     /* S of the case */
    cpparity_dtype dtype;                /* storage */
    cpparity_layout layout;              /* who holds what (shard.h) */
    cpparity_algorithm_choice algorithm; /* ulysses, ring or hybrid U×R */
    cpparity_fault fault;                /* the fault to plant (f32_model_set_fault plants it
                                            again; the layout and the hybrid's groups need it
                                            from the start), NONE normally */
} f32_model_shape;

/* Allocates the model for batches of B rows of seq_len tokens sharded over comm by the shape's
 * layout, storing in dtype; parameters are zero until f32_model_load_parameters. */
cpparity_status f32_model_init(f32_model *model, const cpparity_model_config *config,
                               const f32_model_shape *shape, cpparity_comm *comm,
                               const cpparity_attention_kernel *kernel, cpparity_error *error);

/* Rounds count stored values at x to the model's storage dtype (nothing for float32). */
void f32_model_store(const f32_model *model, float *x, int64_t count);

/* Rounds to the storage dtype every parameter of the model from values (table->total float64
 * elements, described by table): each tensor is found by its model.md name and must have the same
 * shape. CPPARITY_ERROR_INPUT naming the parameter when one is missing or misshapen. */
cpparity_status f32_model_load_parameters(f32_model *model, const cpparity_tensor_table *table,
                                          const double *values, cpparity_error *error);

/* Plants fault (fault.h) in the model; call before the first forward, with the fault the shape
 * gave f32_model_init (zigzag-chunk-swap and hybrid-group-across-ring shape the layout and the
 * groups there, at init). Runtime error when the fault's buffers cannot be allocated. */
cpparity_status f32_model_set_fault(f32_model *model, cpparity_fault fault, cpparity_error *error);

/* The mask description of layer l (with the model's planted mask faults). */
cpparity_mask_description f32_model_layer_mask(const f32_model *model, int64_t l);

/* What the model's ring attention calls share (ring.h): its ring, rows, tokens, kernel, heads. */
ring_setup f32_model_ring(const f32_model *model);

/* The softmax scale passed to the kernel: 1/sqrt(head_dim). */
float f32_model_attention_scale(const f32_model *model);

/* The positions rotary embeddings use for this rank's slice: its position_ids. */
const int64_t *f32_model_rope_positions(const f32_model *model, const cpparity_batch *local);

/* Forward on this rank's slice (B × L tokens, distributed/cp/shard.h): logits of the slice, loss.
 */
cpparity_status f32_model_forward(f32_model *model, const cpparity_batch *local,
                                  cpparity_error *error);

/* Backward after forward: gradients of every parameter, all-reduced over the group. */
cpparity_status f32_model_backward(f32_model *model, const cpparity_batch *local,
                                   cpparity_error *error);

/* rows (count × V) = this rank's logits rows [row, row + count) of batch row batch_row, made
 * from the saved final norm's output (model_f32_head.c; with stale-rank-slice, the next rank's
 * rows, gathered at forward). */
void f32_model_logits_rows(const f32_model *model, int64_t batch_row, int64_t row, int64_t count,
                           float *rows);

/* Tokens of one chunk of the LM head (model_f32_head.c). */
#define MODEL_F32_HEAD_ROWS 256

/* The LM head, one chunk of tokens at a time (model_f32_head.c): out (rows × V) = the logits of
 * local tokens [row, row + rows) (flattened b·L + t), stored in the dtype, zero for tokens the
 * autopad-truncate fault drops. */
void f32_head_logits(const f32_model *model, int64_t row, int64_t rows, float *out);

/* The loss sum and labeled token count of this rank (model->loss_sum, labels_local), chunk by
 * chunk. CPPARITY_ERROR_RUNTIME when a chunk's logits cannot be allocated. */
cpparity_status f32_head_forward(f32_model *model, const cpparity_batch *local,
                                 cpparity_error *error);

/* The tokens of one chunk: min(B·L, MODEL_F32_HEAD_ROWS). */
int64_t f32_head_chunk_rows(const f32_model *model);

/* dnormed [B·L, D] = dlogits · lm_head and the head's gradient += dlogitsᵀ · normed, dlogits =
 * (softmax − onehot) · weight made chunk by chunk into logits and dlogits (chunk rows × V each,
 * the caller's: the backward allocates them with its other buffers). */
void f32_head_backward(f32_model *model, const cpparity_batch *local, float weight, float *dnormed,
                       float *logits, float *dlogits);

void f32_model_free(f32_model *model);

#endif
