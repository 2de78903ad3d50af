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
#include "harness/judging/naive_products.h"

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

/* One layer's saved values. */
typedef struct naive_layer {
    float *input, *input_rstd, *input_normed;  /* (N,D), (N), (N,D) */
    float *q, *k, *v, *attention, *lse;        /* (N,H,Dh), (N,Hkv,Dh) ×2, (N,H,Dh), (B,H,S) */
    float *residual, *post_rstd, *post_normed; /* (N,D), (N), (N,D) */
    float *gate, *up, *swiglu;                 /* (N,F) ×3 */
} naive_layer;

/* Everything one run holds. */
typedef struct naive_run {
    const cpparity_model_config *config;
    cpparity_dtype dtype;
    int64_t batch, seq_len, tokens;                 /* B, S, N = B·S */
    row_blocks blocks;                              /* the logits' row blocks */
    cpparity_model_parameters at;                   /* parameter offsets */
    float *weights;                                 /* every parameter, rounded to dtype */
    naive_layer layers[CPPARITY_MAX_LAYERS];        /* saved values */
    float *final_input, *final_rstd, *final_normed; /* (N,D), (N), (N,D) */
    float *logits_lse;                              /* (N) log Σ exp of each token's logits */
    float *logits;                                  /* (widest block, V): one row block's */
    double *reference;                              /* (widest block, V): the reference's */
    float *cosines, *sines;                         /* (N, Dh/2) */
    reference_mask masks[CPPARITY_MAX_LAYERS];
    float **buffers; /* every float allocation above, for release */
    int64_t buffer_count, buffer_capacity;
    int64_t labels; /* labels != −100 in the batch */
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
}

/* Allocates the saved values of every layer; false when out of memory. */
static bool allocate(naive_run *run) {
    const cpparity_model_config *c = run->config;
    const int64_t N = run->tokens, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const int64_t V = c->vocab_size;
    bool ok = true;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        naive_layer *a = &run->layers[l];
        float **fields[] = {&a->input,    &a->input_rstd, &a->input_normed, &a->q,
                            &a->k,        &a->v,          &a->attention,    &a->lse,
                            &a->residual, &a->post_rstd,  &a->post_normed,  &a->gate,
                            &a->up,       &a->swiglu};
        const int64_t sizes[] = {N * D,        N,          N * D, N * H * Dh, N * Hkv * Dh,
                                 N * Hkv * Dh, N * H * Dh, N * H, N * D,      N,
                                 N * D,        N * F,      N * F, N * F};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            *fields[i] = buffer(run, sizes[i]);
            ok = ok && *fields[i] != NULL;
        }
    }
    run->final_input = buffer(run, N * D);
    run->final_rstd = buffer(run, N);
    run->final_normed = buffer(run, N * D);
    run->logits_lse = buffer(run, N);
    const int64_t widest = row_blocks_widest(&run->blocks);
    run->logits = buffer(run, widest * V);
    run->reference = malloc((size_t)(widest * V + 1) * sizeof *run->reference);
    run->cosines = buffer(run, N * (Dh / 2));
    run->sines = buffer(run, N * (Dh / 2));
    return ok && run->final_input && run->final_rstd && run->final_normed && run->logits_lse &&
           run->logits && run->reference && run->cosines && run->sines;
}

/* The residual add: out = a + b. */
static void add(float *out, const float *a, const float *b, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        out[i] = a[i] + b[i];
    }
}

/* The layers, up to the final norm's output. false when out of memory. */
static bool forward(naive_run *run, const cpparity_batch *batch, float *projection) {
    const cpparity_model_config *c = run->config;
    const int64_t N = run->tokens, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const float *w = run->weights;
    const float eps = (float)c->rms_norm_eps, scale = 1.0f / sqrtf((float)Dh);
    const naive_attention_shape shape = {run->batch, run->seq_len, H, Hkv, Dh};
    for (int64_t n = 0; n < N; n++) {
        memcpy(run->layers[0].input + n * D, w + run->at.embed_tokens + batch->input_ids[n] * D,
               (size_t)D * sizeof(float));
    }
    bool ok = true;
    for (int64_t l = 0; l < c->num_hidden_layers && ok; l++) {
        naive_layer *a = &run->layers[l];
        const cpparity_layer_parameters *p = &run->at.layers[l];
        float *out = l + 1 < c->num_hidden_layers ? run->layers[l + 1].input : run->final_input;
        rmsnorm_forward(a->input_normed, a->input_rstd, a->input, w + p->input_layernorm, N, D,
                        eps);
        store(run->dtype, a->input_normed, N * D);
        ok = naive_linear_forward(a->q, a->input_normed, w + p->q_proj, N, D, H * Dh) &&
             naive_linear_forward(a->k, a->input_normed, w + p->k_proj, N, D, Hkv * Dh) &&
             naive_linear_forward(a->v, a->input_normed, w + p->v_proj, N, D, Hkv * Dh);
        store(run->dtype, a->q, N * H * Dh);
        store(run->dtype, a->k, N * Hkv * Dh);
        store(run->dtype, a->v, N * Hkv * Dh);
        rope(a->q, run->cosines, run->sines, N, H, Dh, 1.0f);
        rope(a->k, run->cosines, run->sines, N, Hkv, Dh, 1.0f);
        store(run->dtype, a->q, N * H * Dh);
        store(run->dtype, a->k, N * Hkv * Dh);
        ok = ok && naive_float_attention_forward(a->attention, a->lse, a->q, a->k, a->v,
                                                 &run->masks[l], shape, scale);
        store(run->dtype, a->attention, N * H * Dh);
        ok = ok && naive_linear_forward(projection, a->attention, w + p->o_proj, N, H * Dh, D);
        store(run->dtype, projection, N * D);
        add(a->residual, a->input, projection, N * D);
        store(run->dtype, a->residual, N * D);
        rmsnorm_forward(a->post_normed, a->post_rstd, a->residual, w + p->post_attention_layernorm,
                        N, D, eps);
        store(run->dtype, a->post_normed, N * D);
        ok = ok && naive_linear_forward(a->gate, a->post_normed, w + p->gate_proj, N, D, F) &&
             naive_linear_forward(a->up, a->post_normed, w + p->up_proj, N, D, F);
        store(run->dtype, a->gate, N * F);
        store(run->dtype, a->up, N * F);
        for (int64_t i = 0; i < N * F; i++) {
            a->swiglu[i] = a->gate[i] / (1.0f + expf(-a->gate[i])) * a->up[i];
        }
        store(run->dtype, a->swiglu, N * F);
        ok = ok && naive_linear_forward(projection, a->swiglu, w + p->down_proj, N, F, D);
        store(run->dtype, projection, N * D);
        add(out, a->residual, projection, N * D);
        store(run->dtype, out, N * D);
    }
    rmsnorm_forward(run->final_normed, run->final_rstd, run->final_input, w + run->at.norm, N, D,
                    eps);
    store(run->dtype, run->final_normed, N * D);
    return ok;
}

/* The logits of row block `index` into run->logits, stored in the dtype: the same bits every
 * time. false when out of memory. */
static bool block_logits(naive_run *run, int64_t index, row_block *block) {
    const int64_t D = run->config->hidden_size, V = run->config->vocab_size;
    *block = row_blocks_at(&run->blocks, index);
    const int64_t rows = block->end - block->begin;
    const bool ok = naive_linear_forward(run->logits, run->final_normed + block->flat * D,
                                         run->weights + run->at.lm_head, rows, D, V);
    store(run->dtype, run->logits, rows * V);
    return ok;
}

/* log Σ exp of a row of logits, shifted by its maximum. */
static float log_sum_exp(const float *row, int64_t count) {
    float maximum = row[0];
    for (int64_t i = 1; i < count; i++) {
        maximum = row[i] > maximum ? row[i] : maximum;
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < count; i++) {
        sum += expf(row[i] - maximum);
    }
    return maximum + logf(sum);
}

/* The LM head's forward, row block by row block: each token's log-sum-exp, the loss (token
 * terms summed in token order) and the logits' error against the reference's same block. */
static bool head_forward(naive_run *run, const cpparity_batch *batch,
                         const naive_reference_logits *reference, naive_outputs *outputs) {
    const int64_t V = run->config->vocab_size;
    float loss_sum = 0.0f;
    for (int64_t index = 0; index < run->blocks.count; index++) {
        row_block block;
        if (!block_logits(run, index, &block)) {
            return false;
        }
        if (reference != NULL) {
            reference->block(reference->context, index, run->reference);
        }
        for (int64_t t = 0; t < block.end - block.begin; t++) {
            const int64_t n = block.flat + t;
            const float *row = run->logits + t * V;
            run->logits_lse[n] = log_sum_exp(row, V);
            if (batch->labels[n] != CPPARITY_IGNORE_INDEX) {
                loss_sum += run->logits_lse[n] - row[batch->labels[n]];
            }
            if (reference == NULL) {
                continue;
            }
            const double *expected = run->reference + t * V;
            double error = 0.0, norm = 0.0;
            uint8_t nonfinite = 0;
            for (int64_t v = 0; v < V; v++) {
                const double x = (double)row[v], r = expected[v];
                if (!isfinite(x) || !isfinite(r)) {
                    nonfinite = 1;
                    continue;
                }
                error += (x - r) * (x - r);
                norm += r * r;
            }
            outputs->logits_error[n] = error;
            outputs->logits_norm[n] = norm;
            outputs->logits_nonfinite[n] = nonfinite;
        }
    }
    outputs->loss = loss_sum / (float)run->labels;
    return true;
}

/* Gradient buffers of one layer, reused in reverse order. */
typedef struct naive_gradients {
    float *stream, *residual, *normed, *swiglu, *gate, *up, *attention, *q, *k, *v;
} naive_gradients;

/* din and dweight of a linear layer (naive_products.h). */
static bool linear_backward(float *din, float *dweight, const float *dout, const float *in,
                            const float *weight, int64_t rows, int64_t in_features,
                            int64_t out_features) {
    return naive_linear_input_gradient(din, dout, weight, rows, in_features, out_features) &&
           naive_linear_weight_gradient(dweight, dout, in, rows, in_features, out_features);
}

/* The LM head's backward, row block by row block: dlogits = softmax − onehot (scaled by the
 * label count) from the logits made again, into dnormed and the head's gradient. */
static bool head_backward(naive_run *run, const cpparity_batch *batch, float *dnormed, float *g) {
    const int64_t D = run->config->hidden_size, V = run->config->vocab_size;
    const float per_label = 1.0f / (float)run->labels;
    for (int64_t index = 0; index < run->blocks.count; index++) {
        row_block block;
        if (!block_logits(run, index, &block)) {
            return false;
        }
        const int64_t rows = block.end - block.begin;
        for (int64_t t = 0; t < rows; t++) {
            const int64_t n = block.flat + t;
            float *row = run->logits + t * V;
            if (batch->labels[n] == CPPARITY_IGNORE_INDEX) {
                memset(row, 0, (size_t)V * sizeof *row);
                continue;
            }
            for (int64_t v = 0; v < V; v++) {
                row[v] = expf(row[v] - run->logits_lse[n]) * per_label;
            }
            row[batch->labels[n]] -= per_label;
        }
        if (!linear_backward(dnormed + block.flat * D, g + run->at.lm_head, run->logits,
                             run->final_normed + block.flat * D, run->weights + run->at.lm_head,
                             rows, D, V)) {
            return false;
        }
    }
    return true;
}

static bool backward(naive_run *run, const cpparity_batch *batch, naive_gradients *d, float *g) {
    const cpparity_model_config *c = run->config;
    const int64_t N = run->tokens, D = c->hidden_size, F = c->intermediate_size;
    const int64_t H = c->num_attention_heads, Hkv = c->num_key_value_heads, Dh = c->head_dim;
    const float *w = run->weights;
    const float scale = 1.0f / sqrtf((float)Dh);
    const naive_attention_shape shape = {run->batch, run->seq_len, H, Hkv, Dh};
    bool ok = head_backward(run, batch, d->normed, g);
    rmsnorm_backward(d->stream, g + run->at.norm, d->normed, run->final_input, w + run->at.norm,
                     run->final_rstd, N, D);
    for (int64_t l = c->num_hidden_layers - 1; l >= 0 && ok; l--) {
        const naive_layer *a = &run->layers[l];
        const cpparity_layer_parameters *p = &run->at.layers[l];
        memcpy(d->residual, d->stream, (size_t)(N * D) * sizeof(float));
        memset(d->swiglu, 0, (size_t)(N * F) * sizeof(float));
        ok = linear_backward(d->swiglu, g + p->down_proj, d->stream, a->swiglu, w + p->down_proj, N,
                             F, D);
        for (int64_t i = 0; i < N * F; i++) {
            const float sigma = 1.0f / (1.0f + expf(-a->gate[i]));
            const float silu = a->gate[i] * sigma;
            d->up[i] = d->swiglu[i] * silu;
            d->gate[i] = d->swiglu[i] * a->up[i] * (sigma + silu * (1.0f - sigma));
        }
        memset(d->normed, 0, (size_t)(N * D) * sizeof(float));
        ok = ok &&
             linear_backward(d->normed, g + p->gate_proj, d->gate, a->post_normed, w + p->gate_proj,
                             N, D, F) &&
             linear_backward(d->normed, g + p->up_proj, d->up, a->post_normed, w + p->up_proj, N, D,
                             F);
        rmsnorm_backward(d->residual, g + p->post_attention_layernorm, d->normed, a->residual,
                         w + p->post_attention_layernorm, a->post_rstd, N, D);
        memcpy(d->stream, d->residual, (size_t)(N * D) * sizeof(float));
        memset(d->attention, 0, (size_t)(N * H * Dh) * sizeof(float));
        ok = ok && linear_backward(d->attention, g + p->o_proj, d->residual, a->attention,
                                   w + p->o_proj, N, H * Dh, D);
        memset(d->q, 0, (size_t)(N * H * Dh) * sizeof(float));
        memset(d->k, 0, (size_t)(N * Hkv * Dh) * sizeof(float));
        memset(d->v, 0, (size_t)(N * Hkv * Dh) * sizeof(float));
        ok = ok &&
             naive_float_attention_backward(d->q, d->k, d->v, d->attention, a->q, a->k, a->v,
                                            a->attention, a->lse, &run->masks[l], shape, scale);
        rope(d->q, run->cosines, run->sines, N, H, Dh, -1.0f);
        rope(d->k, run->cosines, run->sines, N, Hkv, Dh, -1.0f);
        memset(d->normed, 0, (size_t)(N * D) * sizeof(float));
        ok = ok &&
             linear_backward(d->normed, g + p->q_proj, d->q, a->input_normed, w + p->q_proj, N, D,
                             H * Dh) &&
             linear_backward(d->normed, g + p->k_proj, d->k, a->input_normed, w + p->k_proj, N, D,
                             Hkv * Dh) &&
             linear_backward(d->normed, g + p->v_proj, d->v, a->input_normed, w + p->v_proj, N, D,
                             Hkv * Dh);
        rmsnorm_backward(d->stream, g + p->input_layernorm, d->normed, a->input,
                         w + p->input_layernorm, a->input_rstd, N, D);
    }
    for (int64_t n = 0; n < N && ok; n++) {
        for (int64_t i = 0; i < D; i++) {
            g[run->at.embed_tokens + batch->input_ids[n] * D + i] += d->stream[n * D + i];
        }
    }
    return ok;
}

/* Rotary tables (N, Dh/2): angles in float64, stored as float32. */
static void rope_tables(naive_run *run, const cpparity_batch *batch) {
    const int64_t half = run->config->head_dim / 2;
    for (int64_t n = 0; n < run->tokens; n++) {
        for (int64_t i = 0; i < half; i++) {
            const double frequency =
                pow(run->config->rope_theta, -(double)(2 * i) / (double)run->config->head_dim);
            const double angle = (double)batch->position_ids[n] * frequency;
            run->cosines[n * half + i] = (float)cos(angle);
            run->sines[n * half + i] = (float)sin(angle);
        }
    }
}

cpparity_status naive_model_run(const cpparity_model_config *config, const cpparity_batch *batch,
                                const cpparity_tensor_table *table, const double *values,
                                cpparity_dtype dtype, const naive_reference_logits *reference,
                                naive_outputs *outputs, cpparity_error *error) {
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
    run.weights = malloc((size_t)table->total * sizeof *run.weights);
    float *projection = NULL;
    naive_gradients d = {0};
    bool ok = run.weights != NULL && allocate(&run);
    if (ok) {
        projection = buffer(&run, N * D);
        float **fields[] = {&d.stream, &d.residual,  &d.normed, &d.swiglu, &d.gate,
                            &d.up,     &d.attention, &d.q,      &d.k,      &d.v};
        const int64_t sizes[] = {N * D, N * D,      N * D,      N * F,        N * F,
                                 N * F, N * H * Dh, N * H * Dh, N * Hkv * Dh, N * Hkv * Dh};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            *fields[i] = buffer(&run, sizes[i]);
            ok = ok && *fields[i] != NULL;
        }
        outputs->gradients = calloc((size_t)table->total, sizeof(float));
        outputs->logits_error = calloc((size_t)(N > 0 ? N : 1), sizeof(double));
        outputs->logits_norm = calloc((size_t)(N > 0 ? N : 1), sizeof(double));
        outputs->logits_nonfinite = calloc((size_t)(N > 0 ? N : 1), 1);
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
    if (ok && status == CPPARITY_OK) {
        rope_tables(&run, batch);
        ok = forward(&run, batch, projection) && head_forward(&run, batch, reference, outputs) &&
             backward(&run, batch, &d, outputs->gradients);
    }
    if (!ok && status == CPPARITY_OK) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "naive baseline: out of memory");
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
    *peak = *kept = 0;
    reference_memory masks; /* the masks are the reference's (reference_mask_init) */
    cpparity_status status = reference_memory_estimate(config, batch, seq_len, &masks, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    cpparity_sizer s = CPPARITY_SIZER_START;
    const int64_t D = config->hidden_size, F = config->intermediate_size, V = config->vocab_size;
    const int64_t q =
        CPPARITY_PRODUCT(&s, "the baseline's heads", config->num_attention_heads, config->head_dim);
    const int64_t kv =
        CPPARITY_PRODUCT(&s, "the baseline's heads", config->num_key_value_heads, config->head_dim);
    cpparity_tensor_table table = {0};
    if (cpparity_model_parameter_table(config, &table, error) != CPPARITY_OK) {
        return error->status;
    }
    const int64_t P = table.total;
    cpparity_tensor_table_free(&table);
    const int64_t N = CPPARITY_PRODUCT(&s, "the tokens B x S", batch, seq_len);
    /* allocate(): per layer 14 saved values (input, normed, residual, post-normed: D; two rstd;
     * q and attention; k and v; lse: H; gate, up, swiglu: F), then the final norm's input, rstd
     * and output, the logits' log-sum-exp and the rotary tables (Dh/2 each) */
    const int64_t per_layer = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's values", 4, D),
                                           2, CPPARITY_PRODUCT(&s, "the baseline's values", 2, q),
                                           CPPARITY_PRODUCT(&s, "the baseline's values", 2, kv),
                                           config->num_attention_heads,
                                           CPPARITY_PRODUCT(&s, "the baseline's values", 3, F));
    const int64_t saved = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "the baseline's values", config->num_hidden_layers, per_layer),
        CPPARITY_PRODUCT(&s, "the baseline's values", 2, D), 2, config->head_dim / 2 * 2);
    /* naive_model_run: the projection and the gradient of every activation (naive_gradients) */
    const int64_t gradients =
        CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's backward", 3, D),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 3, F),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 2, q),
                     CPPARITY_PRODUCT(&s, "the baseline's backward", 2, kv));
    /* one row block's logits (float32) and the reference's (float64) */
    const row_blocks blocks = row_blocks_of(batch, seq_len);
    const int64_t block =
        CPPARITY_PRODUCT(&s, "a row block's logits", 12, row_blocks_widest(&blocks), V);
    /* naive_attention.c: its spans and per thread two 64 × S tables (with a product's scratch);
     * naive_products.c: per thread a tile and a panel (320 KiB). Never both at once: the larger */
    const int64_t threads = reference_threads();
    const int64_t attention_bytes = naive_attention_memory(batch, seq_len, threads);
    if (attention_bytes < 0) {
        cpparity_sizer_fail(&s, "the baseline's attention");
    }
    const int64_t products = CPPARITY_PRODUCT(&s, "the baseline's products", threads, 320 * 1024);
    const int64_t scratch = attention_bytes > products ? attention_bytes : products;
    *kept = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the baseline's per-token errors", 17, N),
                         CPPARITY_PRODUCT(&s, "the gradients", 4, P));
    *peak = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "the baseline's weights", 4, P),
        CPPARITY_PRODUCT(&s, "the baseline's activations", 4, N, saved), masks.masks, block,
        scratch, CPPARITY_PRODUCT(&s, "the baseline's projection", 4, N, D),
        CPPARITY_PRODUCT(&s, "the baseline's backward", 4, N, gradients), *kept,
        CPPARITY_PRODUCT(&s, "the baseline's buffer list", 8, 16 * config->num_hidden_layers + 48));
    if (!s.ok) {
        *peak = *kept = 0;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s", s.what);
    }
    return CPPARITY_OK;
}
