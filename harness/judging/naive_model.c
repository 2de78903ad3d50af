/*
 * naive_model.c — the straightforward same-dtype baseline (see naive_model.h): the model of
 * docs/model.md in float32 sums in index order (naive_products.h), attention row by row with a
 * two-pass softmax (naive_attention.h), bfloat16 rounding at the storage points for bf16.
 * Backward adds into zeroed gradients, layer by layer in reverse, as the reference does. The
 * logits go one row block at a time (common/row_blocks.h), compared with the reference's as they
 * are made, and made again for the backward: the same bits, never the whole [B, S, V].
 */
#include "harness/judging/naive_model.h"

#include "common/row_blocks.h"
#include "harness/judging/naive_attention.h"
#include "harness/judging/naive_exponential.h"
#include "harness/judging/naive_products.h"
#include "harness/judging/naive_team.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "common/model_parameters.h"
#include "common/monotonic_clock.h"
#include "reference/mask.h"
#include "reference/memory.h"
#include "reference/threads.h"

/* --- storage ---------------------------------------------------------------------------- */

/* x rounded to the nearest bfloat16 (ties to even; NaN kept), as docs/model.md defines the
 * storage: written here again so that the baseline shares no code with distributed/. */
static float round_bfloat16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return x;
    }
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Rounds count stored values to dtype (nothing for float32). */
static void store(cpparity_dtype dtype, float *x, int64_t count) {
    if (dtype != CPPARITY_DTYPE_BF16) {
        return;
    }
    for (int64_t i = 0; i < count; i++) {
        x[i] = round_bfloat16(x[i]);
    }
}

/* --- layers, float32, sums in index order -------------------------------------------------- */

/* out = weight ⊙ in / sqrt(mean(in²) + eps) per row; rstd saves the scale. */
static void rmsnorm_forward(float *out, float *rstd, const float *in, const float *weight,
                            int64_t rows, int64_t dim, float eps) {
    for (int64_t n = 0; n < rows; n++) {
        float squares = 0.0f;
        for (int64_t i = 0; i < dim; i++) {
            squares += in[n * dim + i] * in[n * dim + i];
        }
        rstd[n] = 1.0f / sqrtf(squares / (float)dim + eps);
        for (int64_t i = 0; i < dim; i++) {
            out[n * dim + i] = in[n * dim + i] * rstd[n] * weight[i];
        }
    }
}

/* din += d rmsnorm / d in · dout; dweight += d rmsnorm / d weight · dout. */
static void rmsnorm_backward(float *din, float *dweight, const float *dout, const float *in,
                             const float *weight, const float *rstd, int64_t rows, int64_t dim) {
    for (int64_t n = 0; n < rows; n++) {
        const float *x = in + n * dim, *g = dout + n * dim;
        float dot = 0.0f;
        for (int64_t i = 0; i < dim; i++) {
            dot += g[i] * weight[i] * x[i];
        }
        const float correction = dot * rstd[n] * rstd[n] * rstd[n] / (float)dim;
        for (int64_t i = 0; i < dim; i++) {
            din[n * dim + i] += g[i] * weight[i] * rstd[n] - x[i] * correction;
            dweight[i] += g[i] * x[i] * rstd[n];
        }
    }
}

/* x (N, heads, Dh) rotated by +angle (sign 1) or −angle (sign −1), "half" layout. */
static void rope(float *x, const float *cosines, const float *sines, int64_t rows, int64_t heads,
                 int64_t head_dim, float sign) {
    const int64_t half = head_dim / 2;
    for (int64_t n = 0; n < rows; n++) {
        for (int64_t h = 0; h < heads; h++) {
            float *head = x + (n * heads + h) * head_dim;
            for (int64_t i = 0; i < half; i++) {
                const float a = head[i], b = head[i + half];
                const float c = cosines[n * half + i], s = sign * sines[n * half + i];
                head[i] = a * c - b * s;
                head[i + half] = b * c + a * s;
            }
        }
    }
}

/* --- the model ---------------------------------------------------------------------------- */

enum {
    HEAD_CHUNK = 4096, /* vocabulary ids per group of the LM head's backward */
    WEIGHT_BAND = 256, /* weight rows per group of a linear layer's weight gradient */
};

/* One layer's saved values, of the tokens held here (lse whole-shaped: every query's). */
typedef struct naive_layer {
    float *input, *input_rstd, *input_normed;  /* (n,D), (n), (n,D) */
    float *q, *k, *v, *attention, *lse;        /* (n,H,Dh), (n,Hkv,Dh) ×2, (n,H,Dh), (B,H,S) */
    float *residual, *post_rstd, *post_normed; /* (n,D), (n), (n,D) */
    float *gate, *up, *swiglu;                 /* (n,F) ×3 */
} naive_layer;

/* Everything one run holds. A rank of a team of R holds the row blocks [first_block, end_block)
 * (row_blocks_first), the flattened rows [first_row, first_row + rows): n = rows tokens; one
 * process holds every block. */
typedef struct naive_run {
    const cpparity_model_config *config;
    cpparity_dtype dtype;
    int64_t batch, seq_len, tokens;                 /* B, S, N = B·S */
    row_blocks blocks;                              /* the logits' row blocks */
    const reference_team *team;                     /* NULL: one process */
    int64_t first_block, end_block;                 /* the blocks held here */
    int64_t first_row, rows;                        /* the tokens held here */
    int64_t *rank_rows;                             /* (team size) the tokens each rank holds */
    cpparity_model_parameters at;                   /* parameter offsets */
    float *weights;                                 /* every parameter, rounded to dtype */
    naive_layer layers[CPPARITY_MAX_LAYERS];        /* saved values */
    float *final_input, *final_rstd, *final_normed; /* (n,D), (n), (n,D) */
    float *logits_lse;                              /* (n) log Σ exp of each token's logits */
    float *loss_terms;                              /* (n) each token's cross-entropy term */
    float *logits;                                  /* (widest block, V): one row block's */
    double *reference;                              /* (widest block, V): the reference's */
    float *cosines, *sines;                         /* (n, Dh/2) */
    reference_mask masks[CPPARITY_MAX_LAYERS];
    float **buffers; /* every float allocation above, for release */
    int64_t buffer_count, buffer_capacity;
    int64_t labels; /* labels != −100 in the batch */
    bool failed;    /* a product found no scratch here: the run goes on with the other ranks'
                       exchanges and fails at the end, on every rank */
} naive_run;

/* A zeroed float buffer of count elements kept for release; NULL when out of memory. */
static float *buffer(naive_run *run, int64_t count) {
    if (run->buffer_count == run->buffer_capacity) {
        const int64_t capacity = run->buffer_capacity * 2 + 32;
        float **grown = realloc(run->buffers, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            return NULL;
        }
        run->buffers = grown;
        run->buffer_capacity = capacity;
    }
    float *made = calloc((size_t)(count > 0 ? count : 1), sizeof *made);
    if (made != NULL) {
        run->buffers[run->buffer_count++] = made;
    }
    return made;
}

static void run_free(naive_run *run) {
    for (int64_t i = 0; i < run->buffer_count; i++) {
        free(run->buffers[i]);
    }
    free(run->buffers);
    for (int64_t l = 0; l < CPPARITY_MAX_LAYERS; l++) {
        reference_mask_free(&run->masks[l]);
    }
    free(run->reference);
    free(run->weights);
    free(run->rank_rows);
}

/* Allocates the saved values of every layer; false when out of memory. */
static bool allocate(naive_run *run) {
    const cpparity_model_config *c = run->config;
    const int64_t n = run->rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const int64_t V = c->vocab_size;
    bool ok = true;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        naive_layer *a = &run->layers[l];
        float **fields[] = {&a->input,    &a->input_rstd, &a->input_normed, &a->q,
                            &a->k,        &a->v,          &a->attention,    &a->lse,
                            &a->residual, &a->post_rstd,  &a->post_normed,  &a->gate,
                            &a->up,       &a->swiglu};
        const int64_t sizes[] = {
            n * D,           n,     n * D, n * H * Dh, n * Hkv * Dh, n * Hkv * Dh, n * H * Dh,
            run->tokens * H, n * D, n,     n * D,      n * F,        n * F,        n * F};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            *fields[i] = buffer(run, sizes[i]);
            ok = ok && *fields[i] != NULL;
        }
    }
    run->final_input = buffer(run, n * D);
    run->final_rstd = buffer(run, n);
    run->final_normed = buffer(run, n * D);
    run->logits_lse = buffer(run, n);
    run->loss_terms = buffer(run, n);
    const int64_t widest = row_blocks_widest(&run->blocks);
    run->logits = buffer(run, widest * V);
    run->reference = malloc((size_t)(widest * V + 1) * sizeof *run->reference);
    run->cosines = buffer(run, n * (Dh / 2));
    run->sines = buffer(run, n * (Dh / 2));
    return ok && run->final_input && run->final_rstd && run->final_normed && run->logits_lse &&
           run->loss_terms && run->logits && run->reference && run->cosines && run->sines;
}

/* The residual add: out = a + b. */
static void add(float *out, const float *a, const float *b, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        out[i] = a[i] + b[i];
    }
}

static cpparity_status out_of_memory(cpparity_error *error, const char *what) {
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "naive baseline: out of memory (%s)",
                              what);
}

/* A whole-shaped copy (N, width) of `mine` (n, width): every rank's rows gathered, or (alone)
 * mine itself. *whole is malloc'd unless it is mine. */
static cpparity_status whole_of(naive_run *run, const float *mine, int64_t width, float **whole,
                                cpparity_error *error) {
    if (reference_team_size(run->team) == 1) {
        *whole = (float *)mine;
        return CPPARITY_OK;
    }
    *whole = malloc((size_t)(run->tokens * width + 1) * sizeof **whole);
    if (*whole == NULL) {
        return out_of_memory(error, "a gathered activation");
    }
    return naive_team_gather_rows(run->team, mine, run->rank_rows, width, *whole, error);
}

/* A zeroed whole-shaped buffer (N, width), with this rank's rows of mine (n, width) in place when
 * `copy`; alone, mine itself. */
static cpparity_status whole_shaped(naive_run *run, float *mine, int64_t width, bool copy,
                                    float **whole, cpparity_error *error) {
    if (reference_team_size(run->team) == 1) {
        *whole = mine;
        return CPPARITY_OK;
    }
    *whole = calloc((size_t)(run->tokens * width + 1), sizeof **whole);
    if (*whole == NULL) {
        return out_of_memory(error, "an attention buffer");
    }
    if (copy) {
        memcpy(*whole + run->first_row * width, mine, (size_t)(run->rows * width) * sizeof **whole);
    }
    return CPPARITY_OK;
}

/* Frees what whole_of or whole_shaped made (nothing when it is mine). */
static void whole_free(float *whole, const float *mine) {
    if (whole != mine) {
        free(whole);
    }
}

/* This rank's rows of whole (N, width) into mine (n, width); nothing when they are the same. */
static void rows_out(const naive_run *run, float *mine, const float *whole, int64_t width) {
    if (whole != mine) {
        memcpy(mine, whole + run->first_row * width, (size_t)(run->rows * width) * sizeof *mine);
    }
}

/* Every rank's entries of lse (B, H, S), whole on every rank: the keys' gradients read every
 * query's. */
static cpparity_status lse_share(naive_run *run, float *lse, cpparity_error *error) {
    if (reference_team_size(run->team) == 1) {
        return CPPARITY_OK;
    }
    const int64_t S = run->seq_len, H = run->config->num_attention_heads;
    float *mine = malloc((size_t)(run->rows * H + 1) * sizeof *mine);
    float *whole = malloc((size_t)(run->tokens * H + 1) * sizeof *whole);
    cpparity_status status =
        mine != NULL && whole != NULL ? CPPARITY_OK : out_of_memory(error, "the lse");
    for (int64_t n = 0; status == CPPARITY_OK && n < run->rows; n++) {
        const int64_t b = (run->first_row + n) / S, t = (run->first_row + n) % S;
        for (int64_t h = 0; h < H; h++) {
            mine[n * H + h] = lse[(b * H + h) * S + t];
        }
    }
    if (status == CPPARITY_OK) {
        status = naive_team_gather_rows(run->team, mine, run->rank_rows, H, whole, error);
    }
    for (int64_t n = 0; status == CPPARITY_OK && n < run->tokens; n++) {
        for (int64_t h = 0; h < H; h++) {
            lse[((n / S) * H + h) * S + n % S] = whole[n * H + h];
        }
    }
    free(mine);
    free(whole);
    return status;
}

/* Layer l's attention of the queries held here, over every rank's keys and values. */
static cpparity_status attention_forward(naive_run *run, int64_t l, cpparity_error *error) {
    const cpparity_model_config *c = run->config;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    naive_layer *a = &run->layers[l];
    const naive_attention_shape shape = {run->batch, run->seq_len, H, Hkv, Dh};
    float *q = NULL, *k = NULL, *v = NULL, *out = NULL;
    cpparity_status status = whole_shaped(run, a->q, H * Dh, true, &q, error);
    if (status == CPPARITY_OK) {
        status = whole_shaped(run, a->attention, H * Dh, false, &out, error);
    }
    if (status == CPPARITY_OK) {
        status = whole_of(run, a->k, Hkv * Dh, &k, error);
    }
    if (status == CPPARITY_OK) {
        status = whole_of(run, a->v, Hkv * Dh, &v, error);
    }
    if (status == CPPARITY_OK) {
        status = naive_float_attention_forward_rows(out, a->lse, q, k, v, &run->masks[l], shape,
                                                    1.0f / sqrtf((float)Dh), run->first_row,
                                                    run->first_row + run->rows, error);
    }
    if (status == CPPARITY_OK) {
        rows_out(run, a->attention, out, H * Dh);
        status = lse_share(run, a->lse, error);
    }
    whole_free(q, a->q);
    whole_free(out, a->attention);
    whole_free(k, a->k);
    whole_free(v, a->v);
    return status;
}

/* The layers, up to the final norm's output, for the tokens held here. */
static cpparity_status forward(naive_run *run, const cpparity_batch *batch, float *projection,
                               cpparity_error *error) {
    const cpparity_model_config *c = run->config;
    const int64_t n = run->rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const float *w = run->weights;
    const float eps = (float)c->rms_norm_eps;
    for (int64_t i = 0; i < n; i++) {
        memcpy(run->layers[0].input + i * D,
               w + run->at.embed_tokens + batch->input_ids[run->first_row + i] * D,
               (size_t)D * sizeof(float));
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t l = 0; l < c->num_hidden_layers && status == CPPARITY_OK; l++) {
        naive_layer *a = &run->layers[l];
        const cpparity_layer_parameters *p = &run->at.layers[l];
        float *out = l + 1 < c->num_hidden_layers ? run->layers[l + 1].input : run->final_input;
        rmsnorm_forward(a->input_normed, a->input_rstd, a->input, w + p->input_layernorm, n, D,
                        eps);
        store(run->dtype, a->input_normed, n * D);
        bool ok = naive_linear_forward(a->q, a->input_normed, w + p->q_proj, n, D, H * Dh) &&
                  naive_linear_forward(a->k, a->input_normed, w + p->k_proj, n, D, Hkv * Dh) &&
                  naive_linear_forward(a->v, a->input_normed, w + p->v_proj, n, D, Hkv * Dh);
        store(run->dtype, a->q, n * H * Dh);
        store(run->dtype, a->k, n * Hkv * Dh);
        store(run->dtype, a->v, n * Hkv * Dh);
        rope(a->q, run->cosines, run->sines, n, H, Dh, 1.0f);
        rope(a->k, run->cosines, run->sines, n, Hkv, Dh, 1.0f);
        store(run->dtype, a->q, n * H * Dh);
        store(run->dtype, a->k, n * Hkv * Dh);
        /* every rank takes part in the exchanges, whatever happened here */
        status = attention_forward(run, l, error);
        if (status != CPPARITY_OK) {
            break;
        }
        store(run->dtype, a->attention, n * H * Dh);
        ok = ok && naive_linear_forward(projection, a->attention, w + p->o_proj, n, H * Dh, D);
        store(run->dtype, projection, n * D);
        add(a->residual, a->input, projection, n * D);
        store(run->dtype, a->residual, n * D);
        rmsnorm_forward(a->post_normed, a->post_rstd, a->residual, w + p->post_attention_layernorm,
                        n, D, eps);
        store(run->dtype, a->post_normed, n * D);
        ok = ok && naive_linear_forward(a->gate, a->post_normed, w + p->gate_proj, n, D, F) &&
             naive_linear_forward(a->up, a->post_normed, w + p->up_proj, n, D, F);
        store(run->dtype, a->gate, n * F);
        store(run->dtype, a->up, n * F);
        for (int64_t i = 0; i < n * F; i++) {
            a->swiglu[i] = a->gate[i] / (1.0f + expf(-a->gate[i])) * a->up[i];
        }
        store(run->dtype, a->swiglu, n * F);
        ok = ok && naive_linear_forward(projection, a->swiglu, w + p->down_proj, n, F, D);
        store(run->dtype, projection, n * D);
        add(out, a->residual, projection, n * D);
        store(run->dtype, out, n * D);
        run->failed |= !ok;
    }
    if (status == CPPARITY_OK) {
        rmsnorm_forward(run->final_normed, run->final_rstd, run->final_input, w + run->at.norm, n,
                        D, eps);
        store(run->dtype, run->final_normed, n * D);
    }
    return status;
}

/* The LM head's input of block `index` (held here): its rows of the final norm's output. */
static const float *block_normed(const naive_run *run, const row_block *block) {
    return run->final_normed + (block->flat - run->first_row) * run->config->hidden_size;
}

/* The logits of row block `index` into run->logits, stored in the dtype: the same bits every
 * time. false when out of memory. */
static bool block_logits(naive_run *run, int64_t index, row_block *block) {
    const int64_t D = run->config->hidden_size, V = run->config->vocab_size;
    *block = row_blocks_at(&run->blocks, index);
    const int64_t rows = block->end - block->begin;
    const bool ok = naive_linear_forward(run->logits, block_normed(run, block),
                                         run->weights + run->at.lm_head, rows, D, V);
    store(run->dtype, run->logits, rows * V);
    return ok;
}

/* log Σ exp of a row of logits, shifted by its maximum (the sum in index order); the row is
 * left holding the exponentials. */
static float log_sum_exp(float *row, int64_t count) {
    float maximum = row[0];
    for (int64_t i = 1; i < count; i++) {
        maximum = row[i] > maximum ? row[i] : maximum;
    }
    naive_exponential(row, row, count, maximum);
    float sum = 0.0f;
    for (int64_t i = 0; i < count; i++) {
        sum += row[i];
    }
    return maximum + logf(sum);
}

/* Token i's (of those held here) logits row against the reference's: Σ (x − r)² and Σ r² over the
 * entries where both are finite, and whether some entry is not. */
static void compare_row(naive_outputs *outputs, int64_t i, const float *row, const double *expected,
                        int64_t count) {
    double difference = 0.0, norm = 0.0;
    uint8_t nonfinite = 0;
    for (int64_t v = 0; v < count; v++) {
        const double x = (double)row[v], r = expected[v];
        if (!isfinite(x) || !isfinite(r)) {
            nonfinite = 1;
            continue;
        }
        difference += (x - r) * (x - r);
        norm += r * r;
    }
    outputs->logits_error[i] = difference;
    outputs->logits_norm[i] = norm;
    outputs->logits_nonfinite[i] = nonfinite;
}

/* The loss's sum, continued over the tokens held here in token order (a chain over the ranks). */
typedef struct loss_step {
    const naive_run *run;
    const cpparity_batch *batch;
    float sum;
} loss_step;

static void loss_add(void *context) {
    loss_step *step = context;
    const naive_run *run = step->run;
    for (int64_t i = 0; i < run->rows; i++) {
        if (step->batch->labels[run->first_row + i] != CPPARITY_IGNORE_INDEX) {
            step->sum += run->loss_terms[i];
        }
    }
}

/* The LM head's forward, row block by row block: each token's log-sum-exp, its loss term, the
 * loss (the terms summed in token order) and the logits' error against the reference's same
 * block, for the tokens held here (outputs' per-token arrays: this rank's rows). */
static cpparity_status head_forward(naive_run *run, const cpparity_batch *batch,
                                    const naive_reference_logits *reference, naive_outputs *outputs,
                                    cpparity_error *error) {
    const int64_t V = run->config->vocab_size;
    for (int64_t index = run->first_block; index < run->end_block; index++) {
        row_block block;
        run->failed |= !block_logits(run, index, &block);
        if (reference != NULL) {
            reference->block(reference->context, index, run->reference);
        }
        for (int64_t t = 0; t < block.end - block.begin; t++) {
            const int64_t n = block.flat + t, i = n - run->first_row;
            float *row = run->logits + t * V;
            if (reference != NULL) {
                compare_row(outputs, i, row, run->reference + t * V, V);
            }
            const int64_t label = batch->labels[n];
            const float labelled = label != CPPARITY_IGNORE_INDEX ? row[label] : 0.0f;
            run->logits_lse[i] = log_sum_exp(row, V); /* the row now holds exponentials */
            if (label != CPPARITY_IGNORE_INDEX) {
                run->loss_terms[i] = run->logits_lse[i] - labelled;
            }
        }
    }
    loss_step step = {run, batch, 0.0f};
    cpparity_status status = naive_team_chain(run->team, &step.sum, 1, loss_add, &step, error);
    if (status == CPPARITY_OK) {
        status = naive_team_from_last(run->team, &step.sum, 1, error);
    }
    outputs->loss = step.sum / (float)run->labels;
    return status;
}

/* Gradient buffers of one layer, reused in reverse order. */
typedef struct naive_gradients {
    float *stream, *residual, *normed, *swiglu, *gate, *up, *attention, *q, *k, *v;
} naive_gradients;

/* A linear layer's weight gradient, a sum over every rank's tokens: bands of WEIGHT_BAND weight
 * rows handed from rank to rank, each continuing the sum (naive_product_resume) where the rank
 * before stopped, the last rank ending it. */
typedef struct weight_step {
    naive_run *run;
    float *dweight;
    const float *dout, *in;
    int64_t in_features, out_features;
    bool ok;
} weight_step;

static float *band_values(void *context, int64_t band, int64_t *count) {
    weight_step *w = context;
    const int64_t first = band * WEIGHT_BAND;
    const int64_t rows =
        w->out_features - first < WEIGHT_BAND ? w->out_features - first : WEIGHT_BAND;
    *count = rows * w->in_features;
    return w->dweight + first * w->in_features;
}

static void band_add(void *context, int64_t band) {
    weight_step *w = context;
    int64_t count = 0;
    float *values = band_values(w, band, &count);
    const int64_t first = band * WEIGHT_BAND, rows = count / w->in_features;
    w->ok = w->ok && naive_product_resume(values, w->in_features,
                                          (naive_matrix){w->dout + first, 1, w->out_features},
                                          (naive_matrix){w->in, w->in_features, 1}, rows,
                                          w->in_features, w->run->rows);
    if (reference_team_rank(w->run->team) == reference_team_size(w->run->team) - 1) {
        naive_product_finish(values, count);
    }
}

/* din (this rank's rows) and dweight (a sum over every rank's) of a linear layer; dweight is zero
 * before (each weight is used once). */
static cpparity_status linear_backward(naive_run *run, float *din, float *dweight,
                                       const float *dout, const float *in, const float *weight,
                                       int64_t in_features, int64_t out_features,
                                       cpparity_error *error) {
    weight_step w = {
        run,
        dweight,
        dout,
        in,
        in_features,
        out_features,
        naive_linear_input_gradient(din, dout, weight, run->rows, in_features, out_features)};
    const cpparity_status status =
        naive_team_pipeline(run->team, (out_features + WEIGHT_BAND - 1) / WEIGHT_BAND, band_values,
                            band_add, &w, error);
    run->failed |= !w.ok;
    return status;
}

/* An RMSNorm's backward: din of this rank's rows, dweight continued over the ranks in order. */
typedef struct rmsnorm_step {
    float *din, *dweight;
    const float *dout, *in, *weight, *rstd;
    int64_t rows, dim;
} rmsnorm_step;

static void rmsnorm_add(void *context) {
    const rmsnorm_step *r = context;
    rmsnorm_backward(r->din, r->dweight, r->dout, r->in, r->weight, r->rstd, r->rows, r->dim);
}

static cpparity_status rmsnorm_spread(const naive_run *run, rmsnorm_step step,
                                      cpparity_error *error) {
    return naive_team_chain(run->team, step.dweight, step.dim, rmsnorm_add, &step, error);
}

/* The LM head's backward by groups of HEAD_CHUNK vocabulary ids, handed from rank to rank: for
 * each block held here, the group's logits made again, dlogits = softmax − onehot (scaled by the
 * label count), the head's gradient rows += dlogitsᵀ · normed (block after block) and dnormed's
 * sum over the vocabulary continued (naive_product_resume; ended after the last group). */
typedef struct head_step {
    naive_run *run;
    const cpparity_batch *batch;
    float *dnormed, *g, *chunk; /* chunk: (widest block, HEAD_CHUNK) */
    bool ok;
} head_step;

static float *head_values(void *context, int64_t group, int64_t *count) {
    head_step *h = context;
    const int64_t V = h->run->config->vocab_size, D = h->run->config->hidden_size;
    const int64_t first = group * HEAD_CHUNK;
    *count = (V - first < HEAD_CHUNK ? V - first : HEAD_CHUNK) * D;
    return h->g + h->run->at.lm_head + first * D;
}

static void head_add(void *context, int64_t group) {
    head_step *h = context;
    naive_run *run = h->run;
    const int64_t V = run->config->vocab_size, D = run->config->hidden_size;
    const int64_t first = group * HEAD_CHUNK,
                  columns = V - first < HEAD_CHUNK ? V - first : HEAD_CHUNK;
    const float per_label = 1.0f / (float)run->labels;
    const float *weight = run->weights + run->at.lm_head + first * D;
    for (int64_t index = run->first_block; index < run->end_block && h->ok; index++) {
        const row_block block = row_blocks_at(&run->blocks, index);
        const int64_t rows = block.end - block.begin;
        const float *normed = block_normed(run, &block);
        h->ok = naive_linear_forward(h->chunk, normed, weight, rows, D, columns);
        store(run->dtype, h->chunk, rows * columns);
        for (int64_t t = 0; t < rows; t++) {
            const int64_t n = block.flat + t;
            float *row = h->chunk + t * columns;
            const int64_t label = h->batch->labels[n];
            if (label == CPPARITY_IGNORE_INDEX) {
                memset(row, 0, (size_t)columns * sizeof *row);
                continue;
            }
            naive_exponential(row, row, columns, run->logits_lse[n - run->first_row]);
            for (int64_t v = 0; v < columns; v++) {
                row[v] = row[v] * per_label;
            }
            if (label >= first && label < first + columns) {
                row[label - first] -= per_label;
            }
        }
        h->ok = h->ok &&
                naive_product_resume(h->dnormed + (block.flat - run->first_row) * D, D,
                                     (naive_matrix){h->chunk, columns, 1},
                                     (naive_matrix){weight, D, 1}, rows, D, columns) &&
                naive_linear_weight_gradient(h->g + run->at.lm_head + first * D, h->chunk, normed,
                                             rows, D, columns);
    }
}

static cpparity_status head_backward(naive_run *run, const cpparity_batch *batch, float *dnormed,
                                     float *g, cpparity_error *error) {
    const int64_t V = run->config->vocab_size;
    const int64_t widest = row_blocks_widest(&run->blocks);
    head_step h = {run,
                   batch,
                   dnormed,
                   g,
                   malloc((size_t)(widest * (V < HEAD_CHUNK ? V : HEAD_CHUNK) + 1) * sizeof(float)),
                   true};
    h.ok = h.chunk != NULL;
    const cpparity_status status = naive_team_pipeline(run->team, (V + HEAD_CHUNK - 1) / HEAD_CHUNK,
                                                       head_values, head_add, &h, error);
    free(h.chunk);
    naive_product_finish(dnormed, run->rows * run->config->hidden_size);
    run->failed |= !h.ok;
    return status;
}

/* Layer l's attention backward for the queries and keys held here, over every rank's queries,
 * keys, values, outputs and output gradients; d->q, d->k, d->v are zero before. */
static cpparity_status attention_backward(naive_run *run, int64_t l, naive_gradients *d,
                                          cpparity_error *error) {
    const cpparity_model_config *c = run->config;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const naive_layer *a = &run->layers[l];
    const naive_attention_shape shape = {run->batch, run->seq_len, H, Hkv, Dh};
    enum { Q, K, V, OUT, DOUT, DQ, DK, DV, TENSORS };
    float *mine[TENSORS] = {a->q, a->k, a->v, a->attention, d->attention, d->q, d->k, d->v};
    const int64_t widths[TENSORS] = {H * Dh, Hkv * Dh, Hkv * Dh, H * Dh,
                                     H * Dh, H * Dh,   Hkv * Dh, Hkv * Dh};
    float *whole[TENSORS] = {NULL};
    cpparity_status status = CPPARITY_OK;
    for (int i = 0; i < TENSORS && status == CPPARITY_OK; i++) {
        status = i < DQ ? whole_of(run, mine[i], widths[i], &whole[i], error)
                        : whole_shaped(run, mine[i], widths[i], false, &whole[i], error);
    }
    if (status == CPPARITY_OK) {
        status = naive_float_attention_backward_rows(
            whole[DQ], whole[DK], whole[DV], whole[DOUT], whole[Q], whole[K], whole[V], whole[OUT],
            a->lse, &run->masks[l], shape, 1.0f / sqrtf((float)Dh), run->first_row,
            run->first_row + run->rows, error);
    }
    if (status == CPPARITY_OK) {
        rows_out(run, d->q, whole[DQ], H * Dh);
        rows_out(run, d->k, whole[DK], Hkv * Dh);
        rows_out(run, d->v, whole[DV], Hkv * Dh);
    }
    for (int i = 0; i < TENSORS; i++) {
        whole_free(whole[i], mine[i]);
    }
    return status;
}

static cpparity_status layer_backward(naive_run *run, int64_t l, naive_gradients *d, float *g,
                                      cpparity_error *error) {
    const cpparity_model_config *c = run->config;
    const int64_t n = run->rows, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const float *w = run->weights;
    const naive_layer *a = &run->layers[l];
    const cpparity_layer_parameters *p = &run->at.layers[l];
    memcpy(d->residual, d->stream, (size_t)(n * D) * sizeof(float));
    memset(d->swiglu, 0, (size_t)(n * F) * sizeof(float));
    cpparity_status status = linear_backward(run, d->swiglu, g + p->down_proj, d->stream, a->swiglu,
                                             w + p->down_proj, F, D, error);
    for (int64_t i = 0; i < n * F; i++) {
        const float sigma = 1.0f / (1.0f + expf(-a->gate[i]));
        const float silu = a->gate[i] * sigma;
        d->up[i] = d->swiglu[i] * silu;
        d->gate[i] = d->swiglu[i] * a->up[i] * (sigma + silu * (1.0f - sigma));
    }
    memset(d->normed, 0, (size_t)(n * D) * sizeof(float));
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->normed, g + p->gate_proj, d->gate, a->post_normed,
                                 w + p->gate_proj, D, F, error);
    }
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->normed, g + p->up_proj, d->up, a->post_normed,
                                 w + p->up_proj, D, F, error);
    }
    if (status == CPPARITY_OK) {
        status = rmsnorm_spread(run,
                                (rmsnorm_step){d->residual, g + p->post_attention_layernorm,
                                               d->normed, a->residual,
                                               w + p->post_attention_layernorm, a->post_rstd, n, D},
                                error);
    }
    memcpy(d->stream, d->residual, (size_t)(n * D) * sizeof(float));
    memset(d->attention, 0, (size_t)(n * H * Dh) * sizeof(float));
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->attention, g + p->o_proj, d->residual, a->attention,
                                 w + p->o_proj, H * Dh, D, error);
    }
    memset(d->q, 0, (size_t)(n * H * Dh) * sizeof(float));
    memset(d->k, 0, (size_t)(n * Hkv * Dh) * sizeof(float));
    memset(d->v, 0, (size_t)(n * Hkv * Dh) * sizeof(float));
    if (status == CPPARITY_OK) {
        status = attention_backward(run, l, d, error);
    }
    rope(d->q, run->cosines, run->sines, n, H, Dh, -1.0f);
    rope(d->k, run->cosines, run->sines, n, Hkv, Dh, -1.0f);
    memset(d->normed, 0, (size_t)(n * D) * sizeof(float));
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->normed, g + p->q_proj, d->q, a->input_normed,
                                 w + p->q_proj, D, H * Dh, error);
    }
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->normed, g + p->k_proj, d->k, a->input_normed,
                                 w + p->k_proj, D, Hkv * Dh, error);
    }
    if (status == CPPARITY_OK) {
        status = linear_backward(run, d->normed, g + p->v_proj, d->v, a->input_normed,
                                 w + p->v_proj, D, Hkv * Dh, error);
    }
    if (status == CPPARITY_OK) {
        status =
            rmsnorm_spread(run,
                           (rmsnorm_step){d->stream, g + p->input_layernorm, d->normed, a->input,
                                          w + p->input_layernorm, a->input_rstd, n, D},
                           error);
    }
    return status;
}

/* The embedding's gradient adds every token's row in token order: on the last rank, which holds
 * every other sum so far (tied, the LM head's), from every rank's rows; then every rank gets the
 * gradients. */
static cpparity_status embedding_backward(naive_run *run, const cpparity_batch *batch,
                                          const float *stream, float *g, int64_t total,
                                          cpparity_error *error) {
    const int64_t D = run->config->hidden_size;
    float *whole = NULL;
    cpparity_status status = whole_of(run, stream, D, &whole, error);
    const int size = reference_team_size(run->team);
    if (status == CPPARITY_OK && reference_team_rank(run->team) == size - 1) {
        for (int64_t n = 0; n < run->tokens; n++) {
            for (int64_t i = 0; i < D; i++) {
                g[run->at.embed_tokens + batch->input_ids[n] * D + i] += whole[n * D + i];
            }
        }
    }
    whole_free(whole, stream);
    if (status == CPPARITY_OK) {
        status = naive_team_from_last(run->team, g, total, error);
    }
    return status;
}

static cpparity_status backward(naive_run *run, const cpparity_batch *batch, naive_gradients *d,
                                float *g, int64_t total, cpparity_error *error) {
    const cpparity_model_config *c = run->config;
    const int64_t n = run->rows, D = c->hidden_size;
    cpparity_status status = head_backward(run, batch, d->normed, g, error);
    if (status == CPPARITY_OK) {
        status =
            rmsnorm_spread(run,
                           (rmsnorm_step){d->stream, g + run->at.norm, d->normed, run->final_input,
                                          run->weights + run->at.norm, run->final_rstd, n, D},
                           error);
    }
    for (int64_t l = c->num_hidden_layers - 1; l >= 0 && status == CPPARITY_OK; l--) {
        status = layer_backward(run, l, d, g, error);
    }
    if (status == CPPARITY_OK) {
        status = embedding_backward(run, batch, d->stream, g, total, error);
    }
    return status;
}

/* Rotary tables (n, Dh/2) of the tokens held here: angles in float64, stored as float32. */
static void rope_tables(naive_run *run, const cpparity_batch *batch) {
    const int64_t half = run->config->head_dim / 2;
    for (int64_t n = 0; n < run->rows; n++) {
        for (int64_t i = 0; i < half; i++) {
            const double frequency =
                pow(run->config->rope_theta, -(double)(2 * i) / (double)run->config->head_dim);
            const double angle = (double)batch->position_ids[run->first_row + n] * frequency;
            run->cosines[n * half + i] = (float)cos(angle);
            run->sines[n * half + i] = (float)sin(angle);
        }
    }
}

/* The per-token arrays of outputs (this rank's rows) made whole [B, S] on every rank. */
static cpparity_status outputs_whole(const naive_run *run, naive_outputs *outputs,
                                     cpparity_error *error) {
    if (reference_team_size(run->team) == 1) {
        return CPPARITY_OK;
    }
    const int64_t n = run->rows, N = run->tokens;
    double *mine = malloc((size_t)(3 * n + 1) * sizeof *mine);
    double *whole = malloc((size_t)(3 * N + 1) * sizeof *whole);
    double *error_whole = malloc((size_t)(N + 1) * sizeof *error_whole);
    double *norm_whole = malloc((size_t)(N + 1) * sizeof *norm_whole);
    uint8_t *nonfinite_whole = malloc((size_t)N + 1);
    cpparity_status status = mine && whole && error_whole && norm_whole && nonfinite_whole
                                 ? CPPARITY_OK
                                 : out_of_memory(error, "the per-token errors");
    for (int64_t i = 0; status == CPPARITY_OK && i < n; i++) {
        mine[3 * i] = outputs->logits_error[i];
        mine[3 * i + 1] = outputs->logits_norm[i];
        mine[3 * i + 2] = outputs->logits_nonfinite[i];
    }
    if (status == CPPARITY_OK) {
        status = reference_team_gather_rows(run->team, mine, run->rank_rows, 3, whole, error);
    }
    if (status == CPPARITY_OK) {
        for (int64_t i = 0; i < N; i++) {
            error_whole[i] = whole[3 * i];
            norm_whole[i] = whole[3 * i + 1];
            nonfinite_whole[i] = whole[3 * i + 2] != 0.0;
        }
        free(outputs->logits_error);
        free(outputs->logits_norm);
        free(outputs->logits_nonfinite);
        outputs->logits_error = error_whole;
        outputs->logits_norm = norm_whole;
        outputs->logits_nonfinite = nonfinite_whole;
        error_whole = norm_whole = NULL;
        nonfinite_whole = NULL;
    }
    free(mine);
    free(whole);
    free(error_whole);
    free(norm_whole);
    free(nonfinite_whole);
    return status;
}

/* Whether a product failed on any rank: the run fails on every rank then. */
static cpparity_status agree_on_failure(const naive_run *run, cpparity_error *error) {
    const int size = reference_team_size(run->team);
    bool failed = run->failed;
    cpparity_status status = CPPARITY_OK;
    if (size > 1) {
        const double mine = run->failed ? 1.0 : 0.0;
        double *every = malloc((size_t)size * sizeof *every);
        int64_t *ones = malloc((size_t)size * sizeof *ones);
        status = every != NULL && ones != NULL ? CPPARITY_OK
                                               : out_of_memory(error, "the ranks' verdicts");
        for (int r = 0; status == CPPARITY_OK && r < size; r++) {
            ones[r] = 1;
        }
        if (status == CPPARITY_OK) {
            status = reference_team_gather_rows(run->team, &mine, ones, 1, every, error);
        }
        for (int r = 0; status == CPPARITY_OK && r < size; r++) {
            failed |= every[r] != 0.0;
        }
        free(every);
        free(ones);
    }
    if (status == CPPARITY_OK && failed) {
        status = out_of_memory(error, "a product's scratch, on one of the ranks");
    }
    return status;
}

/* Where the ranks of team hold their blocks; false when out of memory. */
static bool place(naive_run *run, const reference_team *team) {
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    run->team = team;
    run->rank_rows = malloc((size_t)size * sizeof *run->rank_rows);
    if (run->rank_rows == NULL) {
        return false;
    }
    for (int r = 0; r < size; r++) {
        int64_t first = 0, end = 0;
        row_blocks_rows(&run->blocks, row_blocks_first(&run->blocks, size, r),
                        row_blocks_first(&run->blocks, size, r + 1), &first, &end);
        run->rank_rows[r] = end - first;
        if (r == rank) {
            run->first_row = first;
            run->rows = end - first;
        }
    }
    run->first_block = row_blocks_first(&run->blocks, size, rank);
    run->end_block = row_blocks_first(&run->blocks, size, rank + 1);
    return true;
}

cpparity_status naive_model_run(const cpparity_model_config *config, const cpparity_batch *batch,
                                const cpparity_tensor_table *table, const double *values,
                                cpparity_dtype dtype, const naive_reference_logits *reference,
                                naive_outputs *outputs, cpparity_error *error) {
    return naive_model_run_spread(config, batch, table, values, dtype, reference, NULL, outputs,
                                  error);
}

cpparity_status
naive_model_run_spread(const cpparity_model_config *config, const cpparity_batch *batch,
                       const cpparity_tensor_table *table, const double *values,
                       cpparity_dtype dtype, const naive_reference_logits *reference,
                       const reference_team *team, naive_outputs *outputs, cpparity_error *error) {
    memset(outputs, 0, sizeof *outputs);
    const double start = monotonic_seconds();
    naive_run run;
    memset(&run, 0, sizeof run);
    run.config = config;
    run.dtype = dtype;
    run.batch = batch->batch;
    run.seq_len = batch->seq_len;
    run.tokens = batch->batch * batch->seq_len;
    run.blocks = row_blocks_of(batch->batch, batch->seq_len);
    /* every check before the first exchange gives the same answer on every rank */
    cpparity_status status = cpparity_model_config_validate(config, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameters_locate(config, table, &run.at, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t N = run.tokens, D = config->hidden_size, F = config->intermediate_size;
    const int64_t H = config->num_attention_heads, Hkv = config->num_key_value_heads;
    const int64_t Dh = config->head_dim;
    for (int64_t n = 0; n < N; n++) {
        run.labels += batch->labels[n] != CPPARITY_IGNORE_INDEX;
    }
    if (run.labels == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "naive baseline: the batch has no valid label");
    }
    /* memory that is not there on one rank makes its exchanges fail on the others (the
     * communicator's deadline); a rank never leaves the exchanges early on its own */
    run.weights = malloc((size_t)table->total * sizeof *run.weights);
    float *projection = NULL;
    naive_gradients d = {0};
    bool ok = run.weights != NULL && place(&run, team) && allocate(&run);
    const int64_t n = run.rows;
    if (ok) {
        projection = buffer(&run, n * D);
        float **fields[] = {&d.stream, &d.residual,  &d.normed, &d.swiglu, &d.gate,
                            &d.up,     &d.attention, &d.q,      &d.k,      &d.v};
        const int64_t sizes[] = {n * D, n * D,      n * D,      n * F,        n * F,
                                 n * F, n * H * Dh, n * H * Dh, n * Hkv * Dh, n * Hkv * Dh};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            *fields[i] = buffer(&run, sizes[i]);
            ok = ok && *fields[i] != NULL;
        }
        outputs->gradients = calloc((size_t)table->total, sizeof(float));
        outputs->logits_error = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        outputs->logits_norm = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        outputs->logits_nonfinite = calloc((size_t)(n > 0 ? n : 1), 1);
        ok = ok && projection != NULL && outputs->gradients != NULL &&
             outputs->logits_error != NULL && outputs->logits_norm != NULL &&
             outputs->logits_nonfinite != NULL;
    }
    if (ok) {
        for (int64_t i = 0; i < table->total; i++) {
            run.weights[i] = (float)values[i];
        }
        store(dtype, run.weights, table->total);
    }
    for (int64_t l = 0; ok && l < config->num_hidden_layers && status == CPPARITY_OK; l++) {
        status = reference_mask_init(&run.masks[l], run.batch, run.seq_len, batch->attention_mask,
                                     batch->position_ids, cpparity_model_layer(config, l),
                                     REFERENCE_MASK_DEFAULT_BLOCK, error);
    }
    if (!ok && status == CPPARITY_OK) {
        status = out_of_memory(error, "its activations");
    }
    if (status == CPPARITY_OK) {
        rope_tables(&run, batch);
        status = forward(&run, batch, projection, error);
    }
    if (status == CPPARITY_OK) {
        status = head_forward(&run, batch, reference, outputs, error);
    }
    if (status == CPPARITY_OK) {
        status = backward(&run, batch, &d, outputs->gradients, table->total, error);
    }
    if (status == CPPARITY_OK) {
        status = outputs_whole(&run, outputs, error);
    }
    if (status == CPPARITY_OK) {
        status = agree_on_failure(&run, error);
    }
    if (status == CPPARITY_OK) {
        outputs->dtype = dtype;
        outputs->seconds = monotonic_seconds() - start;
    }
    run_free(&run);
    if (status != CPPARITY_OK) {
        naive_outputs_free(outputs);
    }
    return status;
}

void naive_outputs_free(naive_outputs *outputs) {
    if (outputs == NULL) {
        return;
    }
    free(outputs->gradients);
    free(outputs->logits_error);
    free(outputs->logits_norm);
    free(outputs->logits_nonfinite);
    memset(outputs, 0, sizeof *outputs);
}

cpparity_status naive_model_memory(const cpparity_model_config *config, int64_t batch,
                                   int64_t seq_len, int64_t *peak, int64_t *kept,
                                   cpparity_error *error) {
    return naive_model_memory_spread(config, batch, seq_len, 1, 0, peak, kept, error);
}

cpparity_status naive_model_memory_spread(const cpparity_model_config *config, int64_t batch,
                                          int64_t seq_len, int64_t ranks, int64_t rank,
                                          int64_t *peak, int64_t *kept, cpparity_error *error) {
    *peak = *kept = 0;
    reference_memory masks; /* the masks are the reference's (reference_mask_init) */
    cpparity_status status = reference_memory_estimate(config, batch, seq_len, &masks, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    cpparity_sizer s = CPPARITY_SIZER_START;
    const int64_t D = config->hidden_size, F = config->intermediate_size, V = config->vocab_size;
    const int64_t H = config->num_attention_heads, L = config->num_hidden_layers;
    const int64_t q = CPPARITY_PRODUCT(&s, "the baseline's heads", H, config->head_dim);
    const int64_t kv =
        CPPARITY_PRODUCT(&s, "the baseline's heads", config->num_key_value_heads, config->head_dim);
    cpparity_tensor_table table = {0};
    if (cpparity_model_parameter_table(config, &table, error) != CPPARITY_OK) {
        return error->status;
    }
    const int64_t P = table.total;
    cpparity_tensor_table_free(&table);
    const int64_t N = CPPARITY_PRODUCT(&s, "the tokens B x S", batch, seq_len);
    /* the tokens this rank holds (place()): its row blocks' */
    const row_blocks blocks = row_blocks_of(batch, seq_len);
    const int64_t spread = ranks > 1 ? ranks : 1;
    int64_t first = 0, end = 0;
    row_blocks_rows(&blocks, row_blocks_first(&blocks, spread, rank),
                    row_blocks_first(&blocks, spread, rank + 1), &first, &end);
    const int64_t n = end - first;
    /* allocate(): per layer and token held 13 saved values (input, normed, residual,
     * post-normed: D; two rstd; q and attention; k and v; gate, up, swiglu: F), then the final
     * norm's input, rstd and output, the logits' log-sum-exp and loss terms and the rotary tables
     * (Dh/2 each); per layer the lse of every query (B, H, S) */
    const int64_t per_layer = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's values", 4, D),
                                           2, CPPARITY_PRODUCT(&s, "the baseline's values", 2, q),
                                           CPPARITY_PRODUCT(&s, "the baseline's values", 2, kv),
                                           CPPARITY_PRODUCT(&s, "the baseline's values", 3, F));
    const int64_t saved = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "the baseline's values", L, per_layer),
        CPPARITY_PRODUCT(&s, "the baseline's values", 2, D), 3, config->head_dim / 2 * 2);
    const int64_t lse = CPPARITY_PRODUCT(&s, "the baseline's lse", 4, L, N, H);
    /* naive_model_run: the projection and the gradient of every activation (naive_gradients) */
    const int64_t gradients =
        CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's backward", 3, D),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 3, F),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 2, q),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 2, kv));
    /* one row block's logits (float32) and the reference's (float64), and the LM head's
     * backward's group of HEAD_CHUNK ids of a block */
    const int64_t block = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "a row block's logits", 12, row_blocks_widest(&blocks), V),
        CPPARITY_PRODUCT(&s, "a group of a row block's logits", 4, row_blocks_widest(&blocks),
                         V < HEAD_CHUNK ? V : HEAD_CHUNK));
    /* naive_attention.c: its spans and per thread a 64 × S table (with a product's scratch);
     * naive_products.c: per thread a tile and a panel (320 KiB). Never both at once: the larger */
    const int64_t threads = reference_threads();
    const int64_t attention_bytes =
        naive_attention_memory(batch, seq_len, config->head_dim, threads);
    if (attention_bytes < 0) {
        cpparity_sizer_fail(&s, "the baseline's attention");
    }
    const int64_t products = CPPARITY_PRODUCT(&s, "the baseline's products", threads, 320 * 1024);
    int64_t scratch = attention_bytes > products ? attention_bytes : products;
    if (spread > 1) {
        /* spread: the attention's whole-shaped tensors (the backward's: q, out, dout, dq; k, v,
         * dk, dv) and a gather's float64 pieces (naive_team.c, 64 columns), or the embedding's
         * gathered stream (N, D); the reference's final norm rows of the blocks held (8nD, from
         * reference_cache.c; rank 0 reads the reference's) and one block of them in flight */
        const int64_t whole =
            CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's gathered attention", 16, N, q),
                         CPPARITY_PRODUCT(&s, "the baseline's gathered attention", 16, N, kv),
                         CPPARITY_PRODUCT(&s, "a gather's pieces", 8 * 64, N + n));
        const int64_t stream = CPPARITY_PRODUCT(&s, "the gathered stream", 4, N, D);
        scratch = CPPARITY_SUM(
            &s, scratch, whole > stream ? whole : stream,
            CPPARITY_PRODUCT(&s, "the reference's final norm rows", rank > 0 ? 8 : 0, n, D),
            CPPARITY_PRODUCT(&s, "a block of them", 8, D, row_blocks_widest(&blocks)));
    }
    *kept = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's per-token errors", 17, N),
                         CPPARITY_PRODUCT(&s, "the gradients", 4, P));
    *peak = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "the baseline's weights", 4, P),
        CPPARITY_PRODUCT(&s, "the baseline's activations", 4, n, saved), lse, masks.masks, block,
        scratch, CPPARITY_PRODUCT(&s, "the baseline's projection", 4, n, D),
        CPPARITY_PRODUCT(&s, "the baseline's backward", 4, n, gradients), *kept,
        CPPARITY_PRODUCT(&s, "the baseline's buffer list", 8, 16 * config->num_hidden_layers + 48));
    if (!s.ok) {
        *peak = *kept = 0;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s", s.what);
    }
    return CPPARITY_OK;
}
