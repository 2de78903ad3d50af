/*
 * attention_item.h — an attention-level item (`level: attention`, cases/README.md): the
 * attention kernel called alone, once per layer of the case's model (that layer's type, window,
 * chunk size and origin), over the case's batch layout with all heads, on random q, k, v and
 * dout drawn from seed. Judged like every item (docs/tolerances.md) against the float64
 * reference attention, with the naive same-dtype attention as the baseline:
 *   attention/layers.<l>.out   [B, S, H, Dh]   (logits tolerance)
 *   attention/layers.<l>.lse   [B, H, S]       rows with an allowed key; a fully masked row's lse
 *                                              must be exactly −∞ (logits tolerance)
 *   attention/layers.<l>.dq    [B, S, H, Dh]   (grads tolerance)
 *   attention/layers.<l>.dk, .dv [B, S, Hkv, Dh]
 *   attention/layers.<l>.backward_alone.dq, .dk, .dv   backward given the reference's out and lse
 *   attention/layers.<l>.blocks.out, .lse, .dq, .dk, .dv   a kernel with block calls (ABI 3): its
 *                                              block calls merged (attention_blocks.h)
 * Outputs are filled with NaN before each call (kernel_call.h), so elements a kernel never writes
 * fail as non-finite; a kernel that declares itself deterministic is called twice and must give
 * identical bits. A call the kernel does not support makes the item NOT RUN ("unsupported by
 * kernel"). float32 kernels: a CUDA kernel is staged from host buffers
 * (distributed/kernels/kernel_device_staging.h), its item NOT RUN with the reason when no device is
 * usable; a bfloat16 kernel's item is NOT RUN, saying so.
 */
#ifndef CPPARITY_HARNESS_RUNNING_ATTENTION_ITEM_H
#define CPPARITY_HARNESS_RUNNING_ATTENTION_ITEM_H

#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "results_model/results.h"
#include "distributed/kernels/kernel.h"

/* Which calls of one layer come next (attention_item_observer): the kernel's supports(); its
 * forward and its backward given that forward's out and lse; its backward given the reference's
 * (backward alone); its block calls; the second forward and backward of a kernel declared
 * deterministic. */
typedef enum attention_call_phase {
    ATTENTION_CALL_SUPPORTS,
    ATTENTION_CALL_OWN,
    ATTENTION_CALL_ALONE,
    ATTENTION_CALL_BLOCKS,
    ATTENTION_CALL_AGAIN
} attention_call_phase;

/* Told the layer and phase before each group of calls: for a kernel that replays recorded
 * outputs (harness/running/kernel_replay.h) instead of computing them. */
typedef struct attention_item_observer {
    void (*phase)(void *context, int64_t layer, attention_call_phase phase);
    void *context;
    const char *without_block_calls; /* why a kernel has no block calls, when it is not its ABI
                                        (NULL: the ABI's words) */
} attention_item_observer;

/* Runs and judges item (begun with run_item_begin) for case c; the item's message names the
 * seed of its inputs. CPPARITY_ERROR_RUNTIME only when out of memory or the reference fails. */
cpparity_status attention_item_run(run_item *item, const cpparity_case *c, uint64_t seed,
                                   const cpparity_attention_kernel *kernel, cpparity_error *error);

/* The same, telling observer (NULL: nobody) where the calls are. */
cpparity_status attention_item_run_observed(run_item *item, const cpparity_case *c, uint64_t seed,
                                            const cpparity_attention_kernel *kernel,
                                            const attention_item_observer *observer,
                                            cpparity_error *error);

/* Layer `layer`'s inputs as the item draws them from seed: q and dout [B, S, H, Dh], k and v
 * [B, S, Hkv, Dh] (what `cpparity export` writes for attention-level cases), and their float64
 * copies into wide_* (each may be NULL). */
void attention_item_draw_inputs(const cpparity_case *c, uint64_t seed, int64_t layer, float *q,
                                float *k, float *v, float *dout, double *wide_q, double *wide_k,
                                double *wide_v, double *wide_dout);

/* The inputs of an attention-level item. */
typedef enum attention_input {
    ATTENTION_INPUT_Q,
    ATTENTION_INPUT_K,
    ATTENTION_INPUT_V,
    ATTENTION_INPUT_DOUT
} attention_input;

/* The tokens [first, end) of every batch row of layer `layer`'s input (q, dout: [B, end − first,
 * H, Dh]; k, v: [B, end − first, Hkv, Dh]), each element the value attention_item_draw_inputs
 * gives it in the whole tensor; and its float64 copy into wide (may be NULL). */
void attention_item_draw_tokens(const cpparity_case *c, uint64_t seed, int64_t layer,
                                attention_input input, int64_t first, int64_t end, float *values,
                                double *wide);

/* Records per layer, in this order: out, lse, dq, dk, dv, then backward_alone.dq, .dk, .dv
 * (and the block calls' five when judged). */
#define ATTENTION_ITEM_RECORDS_PER_LAYER 8

/* Appends record `attention/layers.<layer>.<what>` to item: its metrics against the reference,
 * the naive baseline's error on the same elements, the case's tolerance for kind, its shape and
 * where it is worst (its first non-finite element, else its largest error). */
void attention_item_add_record(run_item *item, const cpparity_case *c, int64_t layer,
                               const char *what, cpparity_tensor_kind kind, int shape_rank,
                               const int64_t *shape, const compare_metrics *metrics,
                               double baseline_error);

/* Marks a decided record failed for a reason the metrics cannot show: format takes two long
 * longs. */
void attention_item_fail_record(tensor_record *record, const char *format, long long a,
                                long long b);

/* The item's outcome and message again after attention_item_fail_record (records per_layer per
 * layer, in the order above): what the failing records blame (forward, backward, backward
 * alone, block calls), how many failed, the first one named where it is. */
void attention_item_refresh_outcome(run_item *item, int64_t per_layer);

/* The elements of case c's q (and out, dq, dout), k (and v, dk, dv) and lse into *query, *key and
 * *rows; CPPARITY_ERROR_INPUT naming the case when they overflow int64. */
cpparity_status attention_item_sizes(const cpparity_case *c, int64_t *query, int64_t *key,
                                     int64_t *rows, cpparity_error *error);

/* The scale the kernel is called with: the float32 1/sqrt(head_dim). */
float attention_item_scale(const cpparity_case *c);

/* The seed attention-level items draw their inputs from when --seed is not given: fresh for
 * each run (from the system's random source), mixed with the case's own seed. */
uint64_t attention_item_fresh_seed(uint64_t case_seed);

#endif
