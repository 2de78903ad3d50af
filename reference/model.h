/*
 * model.h — the float64 reference model of docs/model.md: forward (logits, loss) and
 * backward (the gradient of the loss with respect to every parameter, by model.md's names).
 *
 * Parameters, gradients and activations are each one allocation described by a table of names
 * and shapes (common/tensor_table.h), so one loop can zero, compare or save all of them. The
 * model owns them; the caller fills `parameters` (e.g. with fixtures/parameter_fixture.h) before
 * the first forward. Attention goes through reference/attention.h with each layer's own mask,
 * rebuilt from the batch at every forward.
 *
 * Loss (masks.md): the sum of the token cross-entropies over labels != −100, divided by the
 * number of such labels in the whole batch. A batch without any valid label is an input error.
 *
 * The logits (B, S, V) are never held whole (docs/architecture.md, "Long context: row blocks"):
 * the model keeps the final norm's output and each token's log-sum-exp, and
 * reference_model_logits_block recomputes the logits of any row block (common/row_blocks.h),
 * bit for bit those the forward computed. Every product over tokens is cut at the row blocks
 * (model_layers.h), so the results are the same bits for every thread count.
 */
#ifndef CPPARITY_REFERENCE_MODEL_H
#define CPPARITY_REFERENCE_MODEL_H

#include <stdint.h>

#include "common/batch.h"
#include "common/error.h"
#include "common/model_config.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "reference/mask.h"
#include "reference/model_layers.h"
#include "reference/team.h"

/* Offsets of one layer's saved activations in the activation storage. */
typedef struct reference_layer_activations {
    int64_t input;        /* (B,S,D) residual stream entering the layer */
    int64_t input_rstd;   /* (B,S) */
    int64_t input_normed; /* (B,S,D) */
    int64_t q;            /* (B,S,H,Dh) after rotary embedding */
    int64_t k;            /* (B,S,Hkv,Dh) after rotary embedding */
    int64_t v;            /* (B,S,Hkv,Dh) */
    int64_t attention;    /* (B,S,H,Dh) attention output before o_proj */
    int64_t lse;          /* (B,H,S) log-sum-exp of each query row */
    int64_t residual;     /* (B,S,D) stream after the attention residual */
    int64_t post_rstd;    /* (B,S) */
    int64_t post_normed;  /* (B,S,D) */
    int64_t gate;         /* (B,S,F) */
    int64_t up;           /* (B,S,F) */
    int64_t swiglu;       /* (B,S,F) silu(gate) ⊙ up */
} reference_layer_activations;

/* Mask features that can be switched off for the discrimination check (tolerances.md §4):
 * the mask is then built as if the batch had no padding (every key valid) or no document
 * boundaries (one document per row). RoPE positions are not affected. */
enum {
    REFERENCE_WITHOUT_PADDING = 1u << 0,   /* attention_mask treated as all ones */
    REFERENCE_WITHOUT_DOCUMENTS = 1u << 1, /* position_ids treated as 0, 1, 2, ... */
};

typedef struct reference_model {
    cpparity_model_config config;           /* validated copy */
    int64_t batch;                          /* B */
    int64_t seq_len;                        /* S */
    cpparity_tensor_table parameter_table;  /* model.md names; also describes gradients */
    cpparity_model_parameters parameter;    /* offsets of every parameter */
    double *parameters;                     /* (parameter_table.total) filled by the caller */
    double *gradients;                      /* (parameter_table.total) set by backward */
    cpparity_tensor_table activation_table; /* names and shapes of the saved activations */
    double *activations;                    /* (activation_table.total) set by forward */
    int64_t rope_cos, rope_sin;             /* (B,S,Dh/2) offsets in activations */
    reference_layer_activations layer[CPPARITY_MAX_LAYERS]; /* offsets in activations */
    int64_t final_input, final_rstd, final_normed;          /* (B,S,D), (B,S), (B,S,D) */
    int64_t logits_lse;  /* (B,S) offset in activations: log Σ_v exp(logits) of each token */
    int64_t token_loss;  /* (B,S) offset: the token's cross-entropy term (0 if ignored) */
    reference_rows rows; /* the batch's row blocks held here: all, or this rank's (team.h) */
    int64_t first_row;   /* the flattened row (b·S + t) of the first token held */
    int64_t local_rows;  /* tokens held: B·S in one process, O(B·S / R) on a rank of R */
    int64_t *rank_rows;  /* (team size) the tokens each rank holds */
    reference_mask masks[CPPARITY_MAX_LAYERS]; /* per layer, built by forward */
    double loss_sum;                           /* Σ token losses over valid labels */
    int64_t valid_labels;                      /* number of labels != −100 in the batch */
    double loss;                               /* loss_sum / valid_labels */
    unsigned mask_features_off;                /* REFERENCE_WITHOUT_* flags; 0 normally */
} reference_model;

/* Validates config and allocates everything for batches of B × S. CPPARITY_ERROR_INPUT for an
 * invalid configuration, CPPARITY_ERROR_RUNTIME when out of memory; model is then empty. */
cpparity_status reference_model_init(reference_model *model, const cpparity_model_config *config,
                                     int64_t batch, int64_t seq_len, cpparity_error *error);

/* The same spread over the ranks of team (reference/team.h; NULL or size 1: this process holds
 * everything): every rank of the team calls this and then forward and backward on the same batch,
 * in the same order; team must outlive the model. Each rank holds its row blocks' activations;
 * loss, gradients and every layer's attention lse come out whole on every rank, the same bits as
 * one process computes (the activations are each rank's rows: final_normed below). */
cpparity_status reference_model_init_spread(reference_model *model,
                                            const cpparity_model_config *config, int64_t batch,
                                            int64_t seq_len, const reference_team *team,
                                            cpparity_error *error);

/* Forward on a batch of the model's B × S: logits, loss_sum, valid_labels and loss. */
cpparity_status reference_model_forward(reference_model *model, const cpparity_batch *batch,
                                        cpparity_error *error);

/* Backward after forward on the same batch: overwrites gradients with d loss / d parameter. */
cpparity_status reference_model_backward(reference_model *model, const cpparity_batch *batch,
                                         cpparity_error *error);

/* The logits of row block `block` of the last forward (common/row_blocks.h, row_blocks_of(B, S)):
 * out (rows of the block, V), bit for bit what the forward computed. The block must be held here
 * (every block in one process). */
void reference_model_logits_block(const reference_model *model, int64_t block, double *out);

/* The final norm's output (local_rows, D) of the last forward: the LM head's input, for the
 * tokens held here (all (B,S,D) in one process). */
const double *reference_model_final_normed(const reference_model *model);

/* Every rank's final norm output, whole (B,S,D), into whole on every rank of the team (a
 * collective; a copy in one process). */
cpparity_status reference_model_final_normed_whole(const reference_model *model, double *whole,
                                                   cpparity_error *error);

/* *whole (B·S, width), malloc'd (the caller frees it) = every rank's rows of `mine` (local_rows,
 * width) in token order: a collective of the model's team, a copy in one process. */
cpparity_status reference_model_gather(const reference_model *model, const double *mine,
                                       int64_t width, double **whole, cpparity_error *error);

/* Tokens rank `rank` of the model's team holds (local_rows on that rank). */
int64_t reference_model_rank_rows(const reference_model *model, int rank);

/* The LM head's weight (V,D): lm_head.weight, or model.embed_tokens.weight when tied. */
const double *reference_model_head(const reference_model *model);

/* Releases everything; safe on a zeroed model. */
void reference_model_free(reference_model *model);

#endif
