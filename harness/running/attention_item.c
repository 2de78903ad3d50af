/* attention_item.c — one attention kernel judged alone (see attention_item.h). */
#include "harness/running/attention_item.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/checked_size.h"
#include "distributed/kernels/kernel_call.h"
#include "distributed/kernels/kernel_device_staging.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/kernels/mask_description.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/random.h"
#include "harness/judging/compare.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/naive_attention.h"
#include "harness/running/attention_blocks.h"
#include "reference/attention.h"
#include "reference/mask.h"

/* per layer: out, lse, dq, dk, dv of the kernel's own calls, then dq, dk, dv of its backward
 * given the reference's out and lse ("backward_alone") */
#define TENSORS_PER_LAYER ATTENTION_ITEM_RECORDS_PER_LAYER
#define CALLED_TENSORS 5 /* the first five: what the kernel's own forward and backward gave */
/* then, for a kernel with block calls (ABI 3), the merged out and lse and the summed dq, dk, dv of
 * its block calls (attention_blocks.h) */
#define BLOCK_TENSORS 5
/* How the reasons of failures the metrics cannot show begin: verdict() sorts records by them. */
#define CONCURRENT_REASON "a concurrent call"
#define DETERMINISM_REASON "declared deterministic"

/* One draw per process, which every item of a run shares (items of local ranks run on several
 * threads: drawn once through pthread_once). */
static uint64_t fresh;
static pthread_once_t fresh_once = PTHREAD_ONCE_INIT;

static void draw_fresh(void) {
    FILE *source = fopen("/dev/urandom", "rb");
    if (source == NULL || fread(&fresh, sizeof fresh, 1, source) != 1) {
        fresh = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid();
    }
    if (source != NULL) {
        fclose(source);
    }
}

uint64_t attention_item_fresh_seed(uint64_t case_seed) {
    pthread_once(&fresh_once, draw_fresh);
    /* below 2^53, so that the seed prints and reads back exactly everywhere */
    return (fresh ^ (case_seed * 0xbf58476d1ce4e5b9u)) & (((uint64_t)1 << 53) - 1);
}

/* Everything one layer's calls use. */
typedef struct attention_buffers {
    float *q, *k, *v, *dout;               /* inputs */
    float *out, *lse, *dq, *dk, *dv;       /* the kernel's outputs */
    float *again[5];                       /* a second call's outputs (determinism) */
    float *rounded_out, *rounded_lse;      /* the reference's out and lse rounded to float32 */
    float *alone_dq, *alone_dk, *alone_dv; /* backward given those */
    float *naive_alone_dq, *naive_alone_dk, *naive_alone_dv;
    float *block_out, *block_lse, *block_dq, *block_dk, *block_dv; /* the block calls' */
    float *naive_out, *naive_lse, *naive_dq, *naive_dk, *naive_dv;
    double *wide_q, *wide_k, *wide_v, *wide_dout; /* the same inputs in float64 */
    double *ref_out, *ref_lse, *ref_dq, *ref_dk, *ref_dv;
    uint8_t *include; /* lse rows compared */
    float *lse_compared;
    double *ref_lse_compared;
} attention_buffers;

static void buffers_free(attention_buffers *b) {
    void *all[] = {b->q,
                   b->k,
                   b->v,
                   b->dout,
                   b->out,
                   b->lse,
                   b->dq,
                   b->dk,
                   b->dv,
                   b->again[0],
                   b->again[1],
                   b->again[2],
                   b->again[3],
                   b->again[4],
                   b->rounded_out,
                   b->rounded_lse,
                   b->alone_dq,
                   b->alone_dk,
                   b->alone_dv,
                   b->naive_alone_dq,
                   b->naive_alone_dk,
                   b->naive_alone_dv,
                   b->block_out,
                   b->block_lse,
                   b->block_dq,
                   b->block_dk,
                   b->block_dv,
                   b->naive_out,
                   b->naive_lse,
                   b->naive_dq,
                   b->naive_dk,
                   b->naive_dv,
                   b->wide_q,
                   b->wide_k,
                   b->wide_v,
                   b->wide_dout,
                   b->ref_out,
                   b->ref_lse,
                   b->ref_dq,
                   b->ref_dk,
                   b->ref_dv,
                   b->include,
                   b->lse_compared,
                   b->ref_lse_compared};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
    memset(b, 0, sizeof *b);
}

static bool buffers_allocate(attention_buffers *b, int64_t query, int64_t key, int64_t rows) {
#define ALLOCATE(field, count) (b->field = calloc((size_t)(count) + 1, sizeof *b->field)) != NULL
    bool ok = ALLOCATE(q, query) && ALLOCATE(k, key) && ALLOCATE(v, key) && ALLOCATE(dout, query) &&
              ALLOCATE(out, query) && ALLOCATE(lse, rows) && ALLOCATE(dq, query) &&
              ALLOCATE(dk, key) && ALLOCATE(dv, key) && ALLOCATE(naive_out, query) &&
              ALLOCATE(naive_lse, rows) && ALLOCATE(naive_dq, query) && ALLOCATE(naive_dk, key) &&
              ALLOCATE(naive_dv, key) && ALLOCATE(wide_q, query) && ALLOCATE(wide_k, key) &&
              ALLOCATE(wide_v, key) && ALLOCATE(wide_dout, query) && ALLOCATE(ref_out, query) &&
              ALLOCATE(ref_lse, rows) && ALLOCATE(ref_dq, query) && ALLOCATE(ref_dk, key) &&
              ALLOCATE(ref_dv, key) && ALLOCATE(include, rows) && ALLOCATE(lse_compared, rows) &&
              ALLOCATE(ref_lse_compared, rows) && ALLOCATE(rounded_out, query) &&
              ALLOCATE(rounded_lse, rows) && ALLOCATE(alone_dq, query) && ALLOCATE(alone_dk, key) &&
              ALLOCATE(alone_dv, key) && ALLOCATE(naive_alone_dq, query) &&
              ALLOCATE(naive_alone_dk, key) && ALLOCATE(naive_alone_dv, key) &&
              ALLOCATE(block_out, query) && ALLOCATE(block_lse, rows) &&
              ALLOCATE(block_dq, query) && ALLOCATE(block_dk, key) && ALLOCATE(block_dv, key);
#undef ALLOCATE
    const int64_t counts[5] = {query, rows, query, key, key};
    for (int i = 0; ok && i < 5; i++) {
        b->again[i] = calloc((size_t)counts[i] + 1, sizeof *b->again[i]);
        ok = b->again[i] != NULL;
    }
    return ok;
}

/* The amplitude of each input's values, and the elements of one token (of every head). */
static double input_amplitude(attention_input input) {
    return input == ATTENTION_INPUT_V || input == ATTENTION_INPUT_DOUT ? 1.0 : 2.0;
}

static const char *input_name(attention_input input) {
    static const char *const names[] = {"q", "k", "v", "dout"};
    return names[input];
}

void attention_item_draw_tokens(const cpparity_case *c, uint64_t seed, int64_t layer,
                                attention_input input, int64_t first, int64_t end, float *values,
                                double *wide) {
    const cpparity_model_config *m = &c->model;
    const int64_t heads = input == ATTENTION_INPUT_K || input == ATTENTION_INPUT_V
                              ? m->num_key_value_heads
                              : m->num_attention_heads;
    const int64_t width = heads * m->head_dim, S = c->seq_len, tokens = end - first;
    const uint64_t layer_seed = seed + (uint64_t)layer * 0x9e3779b97f4a7c15u;
    const uint64_t stream = fixture_stream(input_name(input));
    const double amplitude = input_amplitude(input);
    for (int64_t b = 0; b < c->batch_size; b++) {
        for (int64_t i = 0; i < tokens * width; i++) {
            /* the element's flat index in the whole [B, S, heads, Dh] tensor: the same value */
            const int64_t index = (b * S + first) * width + i, at = b * tokens * width + i;
            values[at] = (float)(amplitude * fixture_uniform(layer_seed, stream, (uint64_t)index));
            if (wide != NULL) {
                wide[at] = values[at];
            }
        }
    }
}

void attention_item_draw_inputs(const cpparity_case *c, uint64_t seed, int64_t layer, float *q,
                                float *k, float *v, float *dout, double *wide_q, double *wide_k,
                                double *wide_v, double *wide_dout) {
    const int64_t S = c->seq_len;
    attention_item_draw_tokens(c, seed, layer, ATTENTION_INPUT_Q, 0, S, q, wide_q);
    attention_item_draw_tokens(c, seed, layer, ATTENTION_INPUT_K, 0, S, k, wide_k);
    attention_item_draw_tokens(c, seed, layer, ATTENTION_INPUT_V, 0, S, v, wide_v);
    attention_item_draw_tokens(c, seed, layer, ATTENTION_INPUT_DOUT, 0, S, dout, wide_dout);
}

cpparity_status attention_item_sizes(const cpparity_case *c, int64_t *query, int64_t *key,
                                     int64_t *rows, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len;
    if (!cpparity_elements_checked((int64_t[]){B, S, m->num_attention_heads, m->head_dim}, 4,
                                   query) ||
        !cpparity_elements_checked((int64_t[]){B, S, m->num_key_value_heads, m->head_dim}, 4,
                                   key) ||
        !cpparity_elements_checked((int64_t[]){B, S, m->num_attention_heads}, 3, rows)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "case %s: attention sizes overflow 64-bit counts", c->name);
    }
    return CPPARITY_OK;
}

float attention_item_scale(const cpparity_case *c) {
    return (float)(1.0 / sqrt((double)c->model.head_dim));
}

/* Tells the observer, if any, which calls come next. */
static void observe(const attention_item_observer *observer, int64_t layer,
                    attention_call_phase phase) {
    if (observer != NULL && observer->phase != NULL) {
        observer->phase(observer->context, layer, phase);
    }
}

void attention_item_add_record(run_item *item, const cpparity_case *c, int64_t layer,
                               const char *what, cpparity_tensor_kind kind, int shape_rank,
                               const int64_t *shape, const compare_metrics *metrics,
                               double baseline_error) {
    tensor_record *record = &item->tensors[item->tensor_count++];
    memset(record, 0, sizeof *record);
    snprintf(record->name, sizeof record->name, "attention/layers.%lld.%s", (long long)layer, what);
    record->kind = kind;
    record->shape_rank = shape_rank;
    for (int d = 0; d < shape_rank; d++) {
        record->shape[d] = shape[d];
    }
    record->metrics = *metrics;
    record->baseline_error = baseline_error;
    record->cp1_error = NAN;
    record->tolerance = c->tolerances[item->dtype][kind];
    for (int d = 0; d < 4; d++) {
        record->worst[d] = -1;
    }
    /* a non-finite value is named where it first is, before any finite error */
    if (record->metrics.first_nonfinite >= 0) {
        compare_coordinates(record->metrics.first_nonfinite, shape_rank, shape, record->worst);
    } else if (record->metrics.worst_index >= 0) {
        compare_coordinates(record->metrics.worst_index, shape_rank, shape, record->worst);
    }
}

/* Appends one record: its metrics against the reference, the naive baseline's error on the same
 * elements. */
static void add_record(run_item *item, const cpparity_case *c, int64_t layer, const char *what,
                       cpparity_tensor_kind kind, int shape_rank, const int64_t *shape,
                       const float *x, const float *naive, const double *reference,
                       const uint8_t *include) {
    int64_t count = 1;
    for (int d = 0; d < shape_rank; d++) {
        count *= shape[d];
    }
    compare_metrics metrics, naive_metrics;
    compare_float32(&metrics, x, reference, count, include);
    compare_float32(&naive_metrics, naive, reference, count, include);
    attention_item_add_record(item, c, layer, what, kind, shape_rank, shape, &metrics,
                              naive_metrics.relative_l2);
}

/* Marks a decided record failed for a reason the metrics cannot show. */
void attention_item_fail_record(tensor_record *record, const char *format, long long a,
                                long long b) {
    record->decision.passed = false;
    snprintf(record->decision.reason, sizeof record->decision.reason, format, a, b);
}

/* What the failing records blame, into text: the kernel's forward (out, lse), its backward given
 * the reference's out and lse (backward alone), its backward only on its own forward, and apart
 * from those, calls made at once that change the result and second calls that change it. */
static void verdict(const run_item *item, int64_t per_layer, char *text, size_t size) {
    bool forward = false, own_backward = false, alone = false, concurrent = false, second = false;
    bool forward_block = false, backward_block = false;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->decision.passed) {
            continue;
        }
        if (strncmp(record->decision.reason, CONCURRENT_REASON, strlen(CONCURRENT_REASON)) == 0) {
            concurrent = true;
            continue;
        }
        if (strncmp(record->decision.reason, DETERMINISM_REASON, strlen(DETERMINISM_REASON)) == 0) {
            second = true;
            continue;
        }
        const int64_t t = i % per_layer;
        forward = forward || t < 2;
        own_backward = own_backward || (t >= 2 && t < CALLED_TENSORS);
        alone = alone || (t >= CALLED_TENSORS && t < TENSORS_PER_LAYER);
        forward_block = forward_block || (t >= TENSORS_PER_LAYER && t < TENSORS_PER_LAYER + 2);
        backward_block = backward_block || t >= TENSORS_PER_LAYER + 2;
    }
    const char *calls =
        forward && alone ? "forward wrong, backward wrong (it fails given the reference's out and "
                           "lse too)"
        : forward        ? "forward wrong (backward right given the reference's out and lse)"
        : alone ? "backward wrong (forward right; backward fails given the reference's out and "
                  "lse)"
        : own_backward ? "backward wrong only on its own forward (forward within tolerance, "
                         "backward right given the reference's out and lse)"
                       : "";
    const char *blocks = forward_block && backward_block ? "forward_block and backward_block wrong"
                         : forward_block ? "forward_block wrong (merged by log-sum-exp)"
                         : backward_block
                             ? "backward_block wrong (given the reference's out and lse)"
                             : "";
    char whole[384];
    snprintf(whole, sizeof whole, "%s%s%s", calls,
             calls[0] != '\0' && blocks[0] != '\0'   ? "; block calls: "
             : calls[0] == '\0' && blocks[0] != '\0' ? "whole-sequence calls right; block calls: "
                                                     : "",
             blocks);
    calls = whole;
    snprintf(text, size, "%s%s%s%s%s", calls, concurrent && calls[0] != '\0' ? "; " : "",
             concurrent ? "not safe to call concurrently (calls made at once change the result)"
                        : "",
             second && (concurrent || calls[0] != '\0') ? "; " : "",
             second ? "not deterministic (a second call changes the result)" : "");
}

/* The item's outcome and message again, after attention_item_fail_record: the verdict, the
 * failures and the first failing tensor. */
void attention_item_refresh_outcome(run_item *item, int64_t per_layer) {
    int64_t failures = 0, first = -1;
    for (int64_t i = 0; i < item->tensor_count; i++) {
        if (!item->tensors[i].decision.passed) {
            failures++;
            first = first < 0 ? i : first;
        }
    }
    if (failures == 0 || item->outcome == RUN_ERROR) {
        return;
    }
    item->outcome = RUN_FAIL;
    if (item->worst_tensor < 0 || item->tensors[item->worst_tensor].decision.passed) {
        item->worst_tensor = first; /* the item line shows a failing tensor */
    }
    char where[256];
    run_item_describe_worst(item, &item->tensors[first], where, sizeof where);
    /* kept from the message: the layers not claimed, the seed of the inputs */
    char seed[CPPARITY_MESSAGE_TEXT / 2];
    const char *kept = strstr(item->message, "not claimed by kernel");
    kept = kept != NULL ? kept : strstr(item->message, "inputs from seed");
    snprintf(seed, sizeof seed, "%s%s", kept != NULL ? "; " : "", kept != NULL ? kept : "");
    char blamed[512];
    verdict(item, per_layer, blamed, sizeof blamed);
    snprintf(item->message, sizeof item->message, "%s: %lld tensor%s failed; worst: %s: %s", blamed,
             (long long)failures, failures == 1 ? "" : "s", where,
             item->tensors[first].decision.reason);
    const size_t used = strlen(item->message);
    snprintf(item->message + used, sizeof item->message - used, "%s", seed);
}

/* Elements where two outputs differ bitwise; the first at *first. */
static int64_t differences(const float *a, const float *b, int64_t count, int64_t *first) {
    int64_t found = 0;
    *first = -1;
    for (int64_t i = 0; i < count; i++) {
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
            *first = *first < 0 ? i : *first;
            found++;
        }
    }
    return found;
}

/* What one layer's calls showed that the metrics cannot: fully masked rows whose lse is not −∞,
 * and, for a kernel declared deterministic, elements a second call changed (out, lse, dq, dk,
 * dv). */
typedef struct layer_checks {
    int64_t masked_wrong;        /* fully masked rows with lse other than −∞ */
    int64_t first_masked[3];     /* the first: batch row, head, position */
    int64_t differing[5];        /* per tensor: elements a second call changed */
    int64_t first_difference[5]; /* per tensor: flat index of the first, −1 if none */
    /* concurrent calls (a kernel declaring CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS) */
    bool concurrent;                 /* the calls were made */
    int64_t concurrent_differing[5]; /* deterministic: elements that differ from serial */
    int64_t first_concurrent[5];     /* the first, −1 if none */
    double concurrent_error[5];      /* otherwise: the largest error against float64 */
    int64_t concurrent_nonfinite[5]; /* non-finite values in any concurrent output */
    char concurrent_failure[256];    /* a concurrent call that returned an error */
    /* block calls (ABI 3) */
    int64_t empty_wrong;          /* block rows with lse −∞ and out other than 0 */
    int64_t first_empty_wrong[4]; /* the first: batch row, position, head, dim */
    int64_t block_masked_wrong;   /* fully masked rows whose merged lse is not −∞ */
    int64_t first_block_masked[3];
} layer_checks;

#define CONCURRENT_THREADS 4 /* calls at once: more than the ranks of most local runs */
#define CONCURRENT_WORDING "4 threads at once" /* the end of a concurrency failure's reason */

/* Holds the threads until every one has started (or starting failed: then none calls). */
typedef struct start_gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    bool open, abandoned;
} start_gate;

/* One thread's calls of the concurrency check: the same forward and backward as the serial ones,
 * into its own outputs. */
typedef struct concurrent_call {
    const cpparity_attention_kernel *kernel;
    const cpparity_mask_description *mask;
    const cpparity_attention_dims *dims;
    const attention_buffers *inputs;
    float scale;
    start_gate *start; /* every thread calls at the same moment */
    float *outputs[5]; /* out, lse, dq, dk, dv */
    int failed;
    char message[256];
} concurrent_call;

static void *concurrent_main(void *argument) {
    concurrent_call *call = argument;
    const attention_buffers *b = call->inputs;
    pthread_mutex_lock(&call->start->lock);
    while (!call->start->open) {
        pthread_cond_wait(&call->start->opened, &call->start->lock);
    }
    const bool abandoned = call->start->abandoned;
    pthread_mutex_unlock(&call->start->lock);
    if (abandoned) {
        return NULL;
    }
    call->failed = kernel_call_forward(call->kernel, call->outputs[0], call->outputs[1], b->q, b->k,
                                       b->v, call->mask, call->dims, call->scale, call->message,
                                       sizeof call->message) != 0 ||
                   kernel_call_backward(call->kernel, call->outputs[2], call->outputs[3],
                                        call->outputs[4], b->dout, b->q, b->k, b->v,
                                        call->outputs[0], call->outputs[1], call->mask, call->dims,
                                        call->scale, call->message, sizeof call->message) != 0;
    return NULL;
}

/* The kernel's calls made from CONCURRENT_THREADS threads at once, each compared with the serial
 * call: bit for bit for a kernel declared deterministic, else against float64 (the largest error
 * kept for the decision). Returns false when out of memory or a thread could not start. */
static bool check_concurrent(const cpparity_attention_kernel *kernel,
                             const cpparity_mask_description *mask,
                             const cpparity_attention_dims *dims, float scale,
                             const attention_buffers *b, const int64_t counts[5],
                             layer_checks *checks) {
    concurrent_call calls[CONCURRENT_THREADS];
    memset(calls, 0, sizeof calls);
    start_gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
    bool ok = true;
    for (int t = 0; t < CONCURRENT_THREADS; t++) {
        calls[t] = (concurrent_call){kernel, mask, dims, b, scale, &start, {NULL}, 0, ""};
        for (int o = 0; o < 5; o++) {
            calls[t].outputs[o] = calloc((size_t)counts[o] + 1, sizeof(float));
            ok = ok && calls[t].outputs[o] != NULL;
        }
    }
    pthread_t threads[CONCURRENT_THREADS];
    int started = 0;
    for (; ok && started < CONCURRENT_THREADS; started++) {
        if (pthread_create(&threads[started], NULL, concurrent_main, &calls[started]) != 0) {
            ok = false;
            break;
        }
    }
    pthread_mutex_lock(&start.lock);
    start.open = true;
    start.abandoned = !ok;
    pthread_cond_broadcast(&start.opened);
    pthread_mutex_unlock(&start.lock);
    for (int t = 0; t < started; t++) {
        pthread_join(threads[t], NULL);
    }
    const float *serial[5] = {b->out, b->lse, b->dq, b->dk, b->dv};
    const double *reference[5] = {b->ref_out, b->ref_lse, b->ref_dq, b->ref_dk, b->ref_dv};
    const bool deterministic = kernel_declares_deterministic(kernel);
    checks->concurrent = ok;
    for (int o = 0; ok && o < 5; o++) {
        checks->first_concurrent[o] = -1;
        for (int t = 0; t < CONCURRENT_THREADS; t++) {
            if (calls[t].failed) {
                snprintf(checks->concurrent_failure, sizeof checks->concurrent_failure, "%s",
                         calls[t].message);
                continue;
            }
            if (deterministic && checks->concurrent_differing[o] == 0) {
                checks->concurrent_differing[o] = differences(
                    serial[o], calls[t].outputs[o], counts[o], &checks->first_concurrent[o]);
            }
            if (!deterministic) { /* lse: the rows compared (fully masked rows are checked once) */
                compare_metrics metrics;
                compare_float32(&metrics, calls[t].outputs[o], reference[o], counts[o],
                                o == 1 ? b->include : NULL);
                if (o == 1) {
                    metrics.nonfinite = 0;
                    for (int64_t r = 0; r < counts[o]; r++) {
                        metrics.nonfinite += b->include[r] && !isfinite(calls[t].outputs[o][r]);
                    }
                }
                checks->concurrent_error[o] = metrics.relative_l2 > checks->concurrent_error[o]
                                                  ? metrics.relative_l2
                                                  : checks->concurrent_error[o];
                checks->concurrent_nonfinite[o] += metrics.nonfinite;
            }
        }
    }
    for (int t = 0; t < CONCURRENT_THREADS; t++) {
        for (int o = 0; o < 5; o++) {
            free(calls[t].outputs[o]);
        }
    }
    return ok;
}

/* One layer: the kernel's calls, the reference's, the naive baseline's, and the records. */
static cpparity_status run_layer(run_item *item, const cpparity_case *c, int64_t layer,
                                 uint64_t seed, const cpparity_attention_kernel *kernel,
                                 const cpparity_batch *batch, const mask_storage *storage,
                                 attention_buffers *b, bool concurrent,
                                 const attention_item_observer *observer, layer_checks *checks,
                                 char *unsupported, size_t unsupported_size,
                                 cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len, H = m->num_attention_heads,
                  Hkv = m->num_key_value_heads, Dh = m->head_dim;
    const int64_t query = B * S * H * Dh, key = B * S * Hkv * Dh, rows = B * H * S;
    const cpparity_attention_layer attention_layer = cpparity_model_layer(m, layer);
    const cpparity_mask_description mask = mask_storage_describe(storage, attention_layer);
    const cpparity_attention_dims dims = {B, S, H, Hkv, Dh};
    observe(observer, layer, ATTENTION_CALL_SUPPORTS);
    if (!kernel_supports_call(kernel, &mask, &dims, unsupported, unsupported_size)) {
        return CPPARITY_OK; /* the caller reports the item NOT RUN */
    }
    unsupported[0] = '\0';
    attention_item_draw_inputs(c, seed, layer, b->q, b->k, b->v, b->dout, b->wide_q, b->wide_k,
                               b->wide_v, b->wide_dout);
    const float scale = attention_item_scale(c);
    char message[512] = "";
    observe(observer, layer, ATTENTION_CALL_OWN);
    if (kernel_call_forward(kernel, b->out, b->lse, b->q, b->k, b->v, &mask, &dims, scale, message,
                            sizeof message) != 0 ||
        kernel_call_backward(kernel, b->dq, b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out, b->lse,
                             &mask, &dims, scale, message, sizeof message) != 0) {
        item->outcome = RUN_ERROR;
        item->error_status = CPPARITY_ERROR_RUNTIME;
        snprintf(item->message, sizeof item->message, "layer %lld: %s", (long long)layer, message);
        return CPPARITY_OK;
    }
    /* the float64 reference, from the mask's definition, on the same (widened) inputs */
    reference_mask reference = {0};
    cpparity_status status =
        reference_mask_init(&reference, B, S, batch->attention_mask, batch->position_ids,
                            attention_layer, REFERENCE_MASK_DEFAULT_BLOCK, error);
    const reference_attention_shape shape = {B, S, H, Hkv, Dh};
    memset(b->ref_dq, 0, (size_t)query * sizeof *b->ref_dq);
    memset(b->ref_dk, 0, (size_t)key * sizeof *b->ref_dk);
    memset(b->ref_dv, 0, (size_t)key * sizeof *b->ref_dv);
    if (status == CPPARITY_OK) {
        status = reference_attention_forward(b->ref_out, b->ref_lse, b->wide_q, b->wide_k,
                                             b->wide_v, &reference, shape, scale, error);
    }
    if (status == CPPARITY_OK) {
        status = reference_attention_backward(b->ref_dq, b->ref_dk, b->ref_dv, b->wide_dout,
                                              b->wide_q, b->wide_k, b->wide_v, b->ref_out,
                                              b->ref_lse, &reference, shape, scale, error);
    }
    if (status == CPPARITY_OK) { /* the naive same-dtype baseline */
        const naive_attention_shape naive_shape = {B, S, H, Hkv, Dh};
        memset(b->naive_dq, 0, (size_t)query * sizeof *b->naive_dq);
        memset(b->naive_dk, 0, (size_t)key * sizeof *b->naive_dk);
        memset(b->naive_dv, 0, (size_t)key * sizeof *b->naive_dv);
        bool computed = naive_float_attention_forward(b->naive_out, b->naive_lse, b->q, b->k, b->v,
                                                      &reference, naive_shape, scale) &&
                        naive_float_attention_backward(
                            b->naive_dq, b->naive_dk, b->naive_dv, b->dout, b->q, b->k, b->v,
                            b->naive_out, b->naive_lse, &reference, naive_shape, scale);
        /* backward alone: given the reference's out and lse rounded to float32 (a fully masked
         * row: out 0, lse −∞), the kernel and the naive baseline alike */
        for (int64_t i = 0; i < query; i++) {
            b->rounded_out[i] = (float)b->ref_out[i];
        }
        for (int64_t r = 0; r < rows; r++) {
            b->rounded_lse[r] = (float)b->ref_lse[r];
        }
        memset(b->naive_alone_dq, 0, (size_t)query * sizeof *b->naive_alone_dq);
        memset(b->naive_alone_dk, 0, (size_t)key * sizeof *b->naive_alone_dk);
        memset(b->naive_alone_dv, 0, (size_t)key * sizeof *b->naive_alone_dv);
        computed = computed &&
                   naive_float_attention_backward(
                       b->naive_alone_dq, b->naive_alone_dk, b->naive_alone_dv, b->dout, b->q, b->k,
                       b->v, b->rounded_out, b->rounded_lse, &reference, naive_shape, scale);
        if (!computed) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "out of memory (the naive attention's scratch)");
        }
    }
    reference_mask_free(&reference);
    if (status != CPPARITY_OK) {
        return status;
    }
    observe(observer, layer, ATTENTION_CALL_ALONE);
    if (kernel_call_backward(kernel, b->alone_dq, b->alone_dk, b->alone_dv, b->dout, b->q, b->k,
                             b->v, b->rounded_out, b->rounded_lse, &mask, &dims, scale, message,
                             sizeof message) != 0) {
        item->outcome = RUN_ERROR;
        item->error_status = CPPARITY_ERROR_RUNTIME;
        snprintf(item->message, sizeof item->message,
                 "layer %lld: backward given the reference's out and lse: %s", (long long)layer,
                 message);
        return CPPARITY_OK;
    }
    memset(checks, 0, sizeof *checks);
    /* the block calls: the same inputs cut into blocks, backward given the reference's out and
     * lse rounded (attention_blocks.h) */
    const bool blocks = kernel_has_block_calls(kernel);
    attention_block_outputs block = {
        b->block_out, b->block_lse, b->block_dq, b->block_dk, b->block_dv, 0, {-1, -1, -1, -1}};
    const attention_block_inputs block_inputs = {b->q, b->dout,        b->k,
                                                 b->v, b->rounded_out, b->rounded_lse};
    observe(observer, layer, ATTENTION_CALL_BLOCKS);
    if (blocks && attention_blocks_call(kernel, &mask, &dims, scale, &block_inputs, &block, message,
                                        sizeof message) != 0) {
        item->outcome = RUN_ERROR;
        item->error_status = CPPARITY_ERROR_RUNTIME;
        snprintf(item->message, sizeof item->message, "layer %lld: block calls: %s",
                 (long long)layer, message);
        return CPPARITY_OK;
    }
    checks->empty_wrong = block.empty_wrong;
    memcpy(checks->first_empty_wrong, block.first_empty_wrong, sizeof block.first_empty_wrong);
    /* lse: rows with an allowed key are compared; a fully masked row must hold exactly −∞ */
    int64_t first_masked_wrong = -1, first_block_masked = -1;
    for (int64_t r = 0; r < rows; r++) {
        const bool masked = isinf(b->ref_lse[r]) && b->ref_lse[r] < 0;
        b->include[r] = !masked;
        b->lse_compared[r] = masked ? 0.0f : b->lse[r];
        b->ref_lse_compared[r] = masked ? 0.0 : b->ref_lse[r];
        b->naive_lse[r] = masked ? 0.0f : b->naive_lse[r];
        if (masked && !(isinf(b->lse[r]) && b->lse[r] < 0)) {
            checks->masked_wrong++;
            first_masked_wrong = first_masked_wrong < 0 ? r : first_masked_wrong;
        }
        if (blocks && masked && !(isinf(b->block_lse[r]) && b->block_lse[r] < 0)) {
            checks->block_masked_wrong++;
            first_block_masked = first_block_masked < 0 ? r : first_block_masked;
        }
        b->block_lse[r] = masked ? 0.0f : b->block_lse[r];
    }
    const int64_t query_shape[4] = {B, S, H, Dh}, key_shape[4] = {B, S, Hkv, Dh};
    const int64_t lse_shape[3] = {B, H, S};
    add_record(item, c, layer, "out", CPPARITY_KIND_LOGITS, 4, query_shape, b->out, b->naive_out,
               b->ref_out, NULL);
    add_record(item, c, layer, "lse", CPPARITY_KIND_LOGITS, 3, lse_shape, b->lse_compared,
               b->naive_lse, b->ref_lse_compared, b->include);
    add_record(item, c, layer, "dq", CPPARITY_KIND_GRADS, 4, query_shape, b->dq, b->naive_dq,
               b->ref_dq, NULL);
    add_record(item, c, layer, "dk", CPPARITY_KIND_GRADS, 4, key_shape, b->dk, b->naive_dk,
               b->ref_dk, NULL);
    add_record(item, c, layer, "dv", CPPARITY_KIND_GRADS, 4, key_shape, b->dv, b->naive_dv,
               b->ref_dv, NULL);
    add_record(item, c, layer, "backward_alone.dq", CPPARITY_KIND_GRADS, 4, query_shape,
               b->alone_dq, b->naive_alone_dq, b->ref_dq, NULL);
    add_record(item, c, layer, "backward_alone.dk", CPPARITY_KIND_GRADS, 4, key_shape, b->alone_dk,
               b->naive_alone_dk, b->ref_dk, NULL);
    add_record(item, c, layer, "backward_alone.dv", CPPARITY_KIND_GRADS, 4, key_shape, b->alone_dv,
               b->naive_alone_dv, b->ref_dv, NULL);
    if (blocks) { /* the naive baseline: the whole-sequence calls' (the same arithmetic) */
        add_record(item, c, layer, "blocks.out", CPPARITY_KIND_LOGITS, 4, query_shape, b->block_out,
                   b->naive_out, b->ref_out, NULL);
        add_record(item, c, layer, "blocks.lse", CPPARITY_KIND_LOGITS, 3, lse_shape, b->block_lse,
                   b->naive_lse, b->ref_lse_compared, b->include);
        add_record(item, c, layer, "blocks.dq", CPPARITY_KIND_GRADS, 4, query_shape, b->block_dq,
                   b->naive_alone_dq, b->ref_dq, NULL);
        add_record(item, c, layer, "blocks.dk", CPPARITY_KIND_GRADS, 4, key_shape, b->block_dk,
                   b->naive_alone_dk, b->ref_dk, NULL);
        add_record(item, c, layer, "blocks.dv", CPPARITY_KIND_GRADS, 4, key_shape, b->block_dv,
                   b->naive_alone_dv, b->ref_dv, NULL);
    }
    if (checks->masked_wrong > 0) {
        compare_coordinates(first_masked_wrong, 3, lse_shape, checks->first_masked);
    }
    if (checks->block_masked_wrong > 0) {
        compare_coordinates(first_block_masked, 3, lse_shape, checks->first_block_masked);
    }
    const int64_t counts[5] = {query, rows, query, key, key}; /* out, lse, dq, dk, dv */
    if (kernel_declares_deterministic(kernel)) { /* a second call must give the same bits */
        observe(observer, layer, ATTENTION_CALL_AGAIN);
        kernel_call_forward(kernel, b->again[0], b->again[1], b->q, b->k, b->v, &mask, &dims, scale,
                            message, sizeof message);
        kernel_call_backward(kernel, b->again[2], b->again[3], b->again[4], b->dout, b->q, b->k,
                             b->v, b->again[0], b->again[1], &mask, &dims, scale, message,
                             sizeof message);
        const float *first_call[5] = {b->out, b->lse, b->dq, b->dk, b->dv};
        for (int t = 0; t < 5; t++) {
            checks->differing[t] =
                differences(first_call[t], b->again[t], counts[t], &checks->first_difference[t]);
        }
    }
    if (concurrent && (kernel->capabilities & CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS) != 0 &&
        !check_concurrent(kernel, &mask, &dims, scale, b, counts, checks)) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "case %s: out of memory or threads for the concurrent calls",
                                  c->name);
    }
    return CPPARITY_OK;
}

/* The item with a kernel that takes host buffers (a CPU kernel, or a CUDA one staged). */
static cpparity_status run_on_host(run_item *item, const cpparity_case *c, uint64_t seed,
                                   const cpparity_attention_kernel *kernel, bool concurrent,
                                   const attention_item_observer *observer, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len;
    int64_t query = 0, key = 0, rows = 0;
    if (attention_item_sizes(c, &query, &key, &rows, error) != CPPARITY_OK) {
        return CPPARITY_ERROR_INPUT;
    }
    /* records per layer: the whole-sequence calls', then the block calls' when it has them */
    const int64_t per_layer =
        TENSORS_PER_LAYER + (kernel_has_block_calls(kernel) ? BLOCK_TENSORS : 0);
    item->tensors_expected = per_layer * m->num_hidden_layers;
    item->gradients_identical = true; /* one call, no ranks to agree */
    item->tensors = calloc((size_t)item->tensors_expected, sizeof *item->tensors);
    cpparity_batch batch = {0};
    mask_storage storage = {0};
    attention_buffers b;
    memset(&b, 0, sizeof b);
    cpparity_status status =
        item->tensors != NULL && buffers_allocate(&b, query, key, rows)
            ? CPPARITY_OK
            : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "case %s: out of memory", c->name);
    if (status == CPPARITY_OK) {
        status = fixture_batch_build(&batch, c->rows, B, S, m->vocab_size, c->seed, error);
    }
    if (status == CPPARITY_OK) {
        status =
            mask_storage_build(&storage, B, S, batch.attention_mask, batch.position_ids, error);
    }
    /* each layer the kernel claims runs; the others are listed as not claimed */
    char not_claimed[CPPARITY_MESSAGE_TEXT] = "";
    int64_t ran = 0; /* layers run: their records and checks, in order */
    layer_checks checks[CPPARITY_MAX_LAYERS];
    memset(checks, 0, sizeof checks);
    for (int64_t layer = 0;
         status == CPPARITY_OK && layer < m->num_hidden_layers && item->outcome != RUN_ERROR;
         layer++) {
        char unsupported[512] = "";
        status = run_layer(item, c, layer, seed, kernel, &batch, &storage, &b, concurrent, observer,
                           &checks[ran], unsupported, sizeof unsupported, error);
        if (unsupported[0] == '\0') {
            ran++;
            continue;
        }
        const size_t used = strlen(not_claimed);
        snprintf(not_claimed + used, sizeof not_claimed - used, "%slayer %lld (%s): %s",
                 used > 0 ? "; " : "", (long long)layer,
                 cpparity_layer_type_name(cpparity_model_layer(m, layer).type), unsupported);
    }
    buffers_free(&b);
    mask_storage_free(&storage);
    cpparity_batch_free(&batch);
    item->tensors_expected = per_layer * ran;
    if (status == CPPARITY_OK && item->outcome != RUN_ERROR && ran == 0) {
        item->outcome = RUN_NOT_CLAIMED; /* the kernel declares it lacks what every layer needs */
        snprintf(item->message, sizeof item->message, "not claimed by kernel %s: %.900s",
                 kernel->name, not_claimed);
        return CPPARITY_OK;
    }
    if (status != CPPARITY_OK || item->outcome == RUN_ERROR) {
        if (item->outcome == RUN_ERROR) {
            char text[CPPARITY_MESSAGE_TEXT];
            snprintf(text, sizeof text, "%s", item->message);
            snprintf(item->message, sizeof item->message, "%.900s; inputs from seed %llu", text,
                     (unsigned long long)seed);
        }
        return status;
    }
    judge_item_decide(item, -1, NULL);
    if (not_claimed[0] != '\0') { /* the layers that did not run, and why */
        const size_t used = strlen(item->message);
        snprintf(item->message + used, sizeof item->message - used,
                 "%snot claimed by kernel %s, so not run: %.600s", used > 0 ? "; " : "",
                 kernel->name, not_claimed);
    }
    if (!kernel_has_block_calls(kernel)) { /* what was not judged, and why */
        const size_t used = strlen(item->message);
        if (observer != NULL && observer->without_block_calls != NULL) {
            snprintf(item->message + used, sizeof item->message - used,
                     "%sblock calls not judged: %s", used > 0 ? "; " : "",
                     observer->without_block_calls);
        } else if (kernel->abi_version < 3u) {
            snprintf(item->message + used, sizeof item->message - used,
                     "%sblock calls not judged: kernel %s speaks ABI %u, which has none",
                     used > 0 ? "; " : "", kernel->name, (unsigned)kernel->abi_version);
        } else { /* ABI 3, block calls left NULL: they are optional */
            snprintf(item->message + used, sizeof item->message - used,
                     "%sblock calls not judged: kernel %s has none (forward_block/backward_block "
                     "NULL), only its whole-sequence calls were",
                     used > 0 ? "; " : "", kernel->name);
        }
    }
    snprintf(item->message + strlen(item->message), sizeof item->message - strlen(item->message),
             "%sinputs from seed %llu (rerun with --seed %llu)",
             item->message[0] != '\0' ? "; " : "", (unsigned long long)seed,
             (unsigned long long)seed);
    /* what the metrics cannot show: records are per_layer per layer, in call order */
    for (int64_t i = 0; i < item->tensor_count; i++) {
        const layer_checks *check = &checks[i / per_layer];
        const int t = (int)(i % per_layer);
        tensor_record *record = &item->tensors[i];
        if (t == TENSORS_PER_LAYER && check->empty_wrong > 0) { /* blocks.out */
            memcpy(record->worst, check->first_empty_wrong, sizeof check->first_empty_wrong);
            attention_item_fail_record(
                record,
                "%lld block rows with no allowed key have out other than 0 (first: head "
                "%lld at the position named; such a row has out = 0, lse = -inf)",
                (long long)check->empty_wrong, (long long)check->first_empty_wrong[2]);
        }
        if (t == TENSORS_PER_LAYER + 1 && check->block_masked_wrong > 0) { /* blocks.lse */
            memcpy(record->worst, check->first_block_masked, sizeof check->first_block_masked);
            attention_item_fail_record(
                record,
                "%lld fully masked rows have a merged lse other than -inf (first: head "
                "%lld at the position named; every block of such a row has lse = -inf)",
                (long long)check->block_masked_wrong, (long long)check->first_block_masked[1]);
        }
        if (t >= CALLED_TENSORS) {
            continue; /* backward alone and the block calls: the metrics say everything else */
        }
        if (t == 1 && check->masked_wrong > 0) {
            record->worst[0] = check->first_masked[0];
            record->worst[1] = check->first_masked[1];
            record->worst[2] = check->first_masked[2];
            attention_item_fail_record(
                record,
                "%lld fully masked rows have lse other than -inf (first: head %lld at "
                "the position named; a fully masked row has out = 0, lse = -inf)",
                (long long)check->masked_wrong, (long long)check->first_masked[1]);
        }
        if (check->concurrent_differing[t] > 0) { /* named where the first changed element is */
            compare_coordinates(check->first_concurrent[t], record->shape_rank, record->shape,
                                record->worst);
            attention_item_fail_record(
                record,
                CONCURRENT_REASON " changed the result: %lld elements differ from the "
                                  "serial call (first at flat index %lld; " CONCURRENT_WORDING ")",
                (long long)check->concurrent_differing[t], (long long)check->first_concurrent[t]);
        } else if (check->concurrent && (check->concurrent_nonfinite[t] > 0 ||
                                         check->concurrent_error[t] > record->decision.limit)) {
            char reason[sizeof record->decision.reason];
            snprintf(reason, sizeof reason,
                     CONCURRENT_REASON " changed the result: error %.2e > limit %.2e, %lld "
                                       "non-finite (" CONCURRENT_WORDING ")",
                     check->concurrent_error[t], record->decision.limit,
                     (long long)check->concurrent_nonfinite[t]);
            record->decision.passed = false;
            snprintf(record->decision.reason, sizeof record->decision.reason, "%s", reason);
        } else if (t == 0 && check->concurrent_failure[0] != '\0') {
            record->decision.passed = false;
            snprintf(record->decision.reason, sizeof record->decision.reason,
                     CONCURRENT_REASON " failed (" CONCURRENT_WORDING "): %.100s",
                     check->concurrent_failure);
        }
        if (check->differing[t] > 0) { /* named where the first changed element is */
            compare_coordinates(check->first_difference[t], record->shape_rank, record->shape,
                                record->worst);
            attention_item_fail_record(
                record,
                DETERMINISM_REASON ", but a second call changed %lld elements "
                                   "(first at flat index %lld)",
                (long long)check->differing[t], (long long)check->first_difference[t]);
        }
    }
    attention_item_refresh_outcome(item, per_layer);
    return CPPARITY_OK;
}

cpparity_status attention_item_run(run_item *item, const cpparity_case *c, uint64_t seed,
                                   const cpparity_attention_kernel *kernel, cpparity_error *error) {
    return attention_item_run_observed(item, c, seed, kernel, NULL, error);
}

cpparity_status attention_item_run_observed(run_item *item, const cpparity_case *c, uint64_t seed,
                                            const cpparity_attention_kernel *kernel,
                                            const attention_item_observer *observer,
                                            cpparity_error *error) {
    if (kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32 || item->dtype != CPPARITY_DTYPE_F32) {
        item->outcome = RUN_NOT_RUN;
        snprintf(item->message, sizeof item->message,
                 "attention-level cases run float32 kernels in this version (kernel %s is %s %s, "
                 "the item %s)",
                 kernel->name, kernel_device_name(kernel),
                 kernel->dtype == CPPARITY_KERNEL_DTYPE_FLOAT32 ? "float32" : "bfloat16",
                 cpparity_dtype_name(item->dtype));
        return CPPARITY_OK;
    }
    if (kernel->device != CPPARITY_KERNEL_DEVICE_CUDA) {
        return run_on_host(item, c, seed, kernel, true, observer, error);
    }
    cpparity_attention_kernel staged;
    char why[512] = "";
    if (!kernel_device_staging_wrap(&staged, kernel, why, sizeof why)) {
        item->outcome = RUN_NOT_RUN;
        snprintf(item->message, sizeof item->message, "%s", why);
        return CPPARITY_OK;
    }
    /* a CUDA kernel's calls share the staging's stream: they are not made concurrently here */
    const cpparity_status status = run_on_host(item, c, seed, &staged, false, observer, error);
    kernel_device_staging_release(&staged);
    return status;
}
