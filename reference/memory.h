/*
 * memory.h — what the float64 reference holds at most, worked out from a case's sizes before
 * anything is allocated (for the harness's memory estimate, harness/running/memory_estimate.h).
 * Every figure is in bytes and follows the reference's own allocations; the caller adds what it
 * allocates itself (the batch it builds, the outputs it copies out).
 *
 * With N = B·S tokens, P parameters, e = REFERENCE_MASK_DEFAULT_BLOCK, T threads and A the saved
 * activations per token — Dh (rotary tables) + nL·(4D + 2 + 2H·Dh + 2Hkv·Dh + H + 3F) + 2D + 3
 * (the final norm's input, rstd and output, the logits' log-sum-exp and the loss term): nothing
 * of size N·V, the logits are never held whole (lm_head.c):
 *   model (reference_model_init to reference_model_free): parameters and gradients 16P,
 *     activations 8·N·A, the parameter and activation tables, and every layer's mask (mask.c:
 *     17 bytes a token, +8 chunked, + 8B(S+1) + 8B), built by forward;
 *   forward, on top: a projection 8ND and the larger share of one attention's tile scratch (per
 *     reference thread, reference_threads() at the time of the estimate, at most one per work
 *     item: 8(e² + 4e·Dh + 5e) + e² and the bands, 64-byte aligned; in one process, where the
 *     items go by (b, key/value head), each also copies its keys and values, 16·S·Dh, and the
 *     mixed blocks are found once, at most 4 a query tile: memory.c, attention_bytes) plus one
 *     row block's logits and a row of exponentials per thread, 8·256·V + 8TV (counted together);
 *   backward, on top: the activation gradients 8N(3D + 3F + 2H·Dh + 2Hkv·Dh) and the larger of
 *     one attention backward (tile scratch 8(2e² + 6e·Dh) + e² and the bands per thread, the same
 *     copies and mixed blocks, delta 8·B·H·S, N bytes) and the LM head's vocabulary chunk
 *     8·N·min(V, LM_HEAD_CHUNK);
 *   features_off, on top while forward builds the masks with a feature off (the discrimination
 *     check): an all-valid mask N and one-document positions 8N.
 * Not counted: the mask's block lists and other allocations that do not grow with the sizes.
 */
#ifndef CPPARITY_REFERENCE_MEMORY_H
#define CPPARITY_REFERENCE_MEMORY_H

#include <stdint.h>

#include "common/error.h"
#include "common/model_config.h"

typedef struct reference_memory {
    int64_t model;              /* held from init to free, the masks included */
    int64_t forward;            /* on top of model during forward */
    int64_t backward;           /* on top of model during backward */
    int64_t features_off;       /* on top of model while masks are built with a feature off */
    int64_t masks;              /* every layer's mask (of model) */
    int64_t attention_backward; /* one attention backward call alone (of backward) */
    int64_t logits_forward;     /* the forward's row block of logits and its scratch (of forward) */
    int64_t logits_backward;    /* the backward's vocabulary chunk of logits (of backward) */
    int64_t gather_final;       /* spread: gathering the final norm's output whole, on top of
                                   model and of what the caller keeps (0 in one process) */
} reference_memory;

/* The memory of the reference model of config for batches of batch × seq_len tokens into
 * *memory. CPPARITY_ERROR_INPUT naming the size when one does not fit int64 (memory zeroed). */
cpparity_status reference_memory_estimate(const cpparity_model_config *config, int64_t batch,
                                          int64_t seq_len, reference_memory *memory,
                                          cpparity_error *error);

/* The same for rank `rank` (0 .. ranks − 1) of a team of `ranks` (team.h; 1: the figures
 * above): its n tokens instead of N, but whole on every rank each layer's lse (8·nL·N·H) and,
 * on top, the attention's whole-shaped buffers — forward the
 * queries, outputs, keys and values, 16N(H + Hkv)·Dh, and the larger of a gather's scratch
 * (8·n·width·(ranks + 1)), the tiles' scratch and the lse's share (8nH + 8NH and a gather's
 * scratch); backward dq, dk, dv and the five gathered tensors, 8N(4H + 4Hkv)·Dh, and the larger of
 * a gather's scratch and the tiles' scratch — the LM head's chunk handed on (16·min(V,
 * LM_HEAD_CHUNK)·D), and gather_final. */
cpparity_status reference_memory_estimate_spread(const cpparity_model_config *config, int64_t batch,
                                                 int64_t seq_len, int64_t ranks, int64_t rank,
                                                 reference_memory *memory, cpparity_error *error);

#endif
