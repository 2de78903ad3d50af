/* attention_stream.c — an attention-level item by query blocks over ranks (see attention_stream.h).
 */
#include "harness/running/attention_stream.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "common/monotonic_clock.h"
#include "fixtures/batch_fixture.h"
#include "harness/judging/compare.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/naive_attention.h"
#include "harness/running/attention_item.h"
#include "distributed/kernels/kernel_call.h"
#include "distributed/kernels/kernel_device_staging.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/kernels/mask_description.h"
#include "reference/attention.h"
#include "reference/mask.h"
#include "reference/threads.h"

enum { RECORDS = ATTENTION_ITEM_RECORDS_PER_LAYER };
/* the records of a layer, in attention_item.h's order */
enum { T_OUT, T_LSE, T_DQ, T_DK, T_DV, T_ALONE_DQ, T_ALONE_DK, T_ALONE_DV };

/* What one rank found of one layer: each tensor's metrics, the kernel's and the naive
 * baseline's; the fully masked rows whose lse is not −∞; its failure, if any. Plain bytes: sent to
 * the team's rank 0 as they are. */
typedef struct layer_findings {
    compare_accumulator kernel[RECORDS], naive[RECORDS];
    int64_t masked_wrong;     /* rows with no allowed key whose lse is not −∞ */
    int64_t first_masked;     /* the first: flat index into lse [B, H, S], −1 when none */
    double reference_seconds; /* in the float64 reference (merged: the slowest rank's) */
    int32_t failed;           /* 1: message says what */
    char message[480];
} layer_findings;

/* Everything a rank holds for one layer. */
typedef struct stream {
    cpparity_comm *team;
    const cpparity_case *c;
    uint64_t seed;
    int64_t layer;
    const cpparity_attention_kernel *kernel;
    int64_t block, blocks; /* tokens per block; blocks of the sequence */
    int64_t B, S, H, Hkv, Dh, query_width, key_width;
    float scale;
    const reference_mask *reference;
    cpparity_mask_description mask;
    cpparity_attention_dims dims;
    int64_t *first_token, *end_token; /* (team size) the tokens each rank owns */
    int64_t own_first, own_end;
    /* (B, H, S), every query once the queries' side is done */
    double *reference_lse, *reference_delta;
    float *naive_lse, *naive_delta, *naive_alone_delta, *rounded_lse;
    /* the kernel's dk and dv shares summed (float64), its own backward's and backward alone's:
     * [B, own_end − sum_first, Hkv, Dh] each, the keys its queries reach or a later rank's do */
    int64_t sum_first;
    double *sums[4];
    layer_findings found;
} stream;

static void *grab(int64_t count, size_t size) {
    return count >= 0 ? calloc((size_t)count + 1, size) : NULL;
}

static void fail(stream *st, const char *format, ...) {
    if (st->found.failed) {
        return; /* the first failure is the one named */
    }
    st->found.failed = 1;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(st->found.message, sizeof st->found.message, format, arguments);
    va_end(arguments);
}

/* The blocks rank r of size owns, as tokens. */
static void owned_tokens(int64_t blocks, int64_t block, int64_t S, int r, int size, int64_t *first,
                         int64_t *end) {
    const int64_t first_block = blocks * r / size, end_block = blocks * (r + 1) / size;
    *first = first_block * block < S ? first_block * block : S;
    *end = end_block * block < S ? end_block * block : S;
}

/* The tokens [first, end) of every row of a (rows, S) array to or from (rows, end − first). */
static void pack_tokens(char *packed, char *whole, size_t element, int64_t rows, int64_t S,
                        int64_t first, int64_t end, int64_t stride, bool to_packed) {
    for (int64_t row = 0; row < rows; row++) {
        char *in_whole = whole + (size_t)(row * S + first) * element;
        char *in_packed = packed + (size_t)(row * stride) * element;
        const size_t bytes = (size_t)(end - first) * element;
        if (bytes > 0) {
            memcpy(to_packed ? in_packed : in_whole, to_packed ? in_whole : in_packed, bytes);
        }
    }
}

/* Every rank's tokens of a (B·H, S) array to every rank. */
static cpparity_status exchange_rows(stream *st, void *array, size_t element,
                                     cpparity_error *error) {
    const int size = st->team->size;
    if (size == 1) {
        return CPPARITY_OK;
    }
    int64_t widest = 0;
    for (int r = 0; r < size; r++) {
        widest = st->end_token[r] - st->first_token[r] > widest
                     ? st->end_token[r] - st->first_token[r]
                     : widest;
    }
    const int64_t rows = st->B * st->H, per_rank = rows * widest * (int64_t)element;
    char *send = grab(per_rank, 1), *received = grab(per_rank * size, 1);
    cpparity_status status =
        send == NULL || received == NULL
            ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                 "out of memory (%lld bytes to hand every query's lse on)",
                                 (long long)(per_rank * (size + 1)))
            : CPPARITY_OK;
    if (status == CPPARITY_OK) {
        if (array != NULL) { /* NULL: this rank failed; it still takes part */
            pack_tokens(send, array, element, rows, st->S, st->own_first, st->own_end, widest,
                        true);
        }
        status =
            cpparity_all_gather(st->team, send, received, per_rank, CPPARITY_INT8, NULL, error);
    }
    for (int r = 0; status == CPPARITY_OK && array != NULL && r < size; r++) {
        pack_tokens(received + (size_t)(r * per_rank), array, element, rows, st->S,
                    st->first_token[r], st->end_token[r], widest, false);
    }
    free(send);
    free(received);
    return status;
}

/* The kernel's dk and dv sums of keys an earlier rank owns, handed down the ranks, the last rank
 * first, each added onto the next one's: the owner ends with every query's share. */
static cpparity_status hand_sums_down(stream *st, const int64_t *sum_first, cpparity_error *error) {
    const int size = st->team->size, rank = st->team->rank;
    const int64_t per_token = st->B * st->key_width;
    cpparity_status status = CPPARITY_OK;
    for (int sender = size - 1; status == CPPARITY_OK && sender > 0; sender--) {
        const int64_t tokens = st->first_token[sender] - sum_first[sender];
        if (tokens <= 0) {
            continue;
        }
        const int64_t count = 4 * per_token * tokens;
        double *send = grab(count, sizeof(double)), *received = grab(count, sizeof(double));
        if (send == NULL || received == NULL) {
            free(send);
            free(received);
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "out of memory (%lld values of dk and dv to hand down)",
                                      (long long)count);
        }
        const bool holds = !st->found.failed; /* a rank that failed sends zeros, adds nothing */
        if (rank == sender &&
            holds) { /* keys [sum_first, own_first) of each sum, [4][B][tokens][width] */
            const int64_t held = st->own_end - st->sum_first;
            for (int s = 0; s < 4; s++) {
                for (int64_t b = 0; b < st->B; b++) {
                    memcpy(send + (s * st->B + b) * tokens * st->key_width,
                           st->sums[s] + (b * held) * st->key_width,
                           (size_t)(tokens * st->key_width) * sizeof(double));
                }
            }
        }
        status = cpparity_shift(st->team, send, received, count, CPPARITY_FLOAT64, -1, NULL, error);
        if (status == CPPARITY_OK && rank == sender - 1 && holds) {
            const int64_t held = st->own_end - st->sum_first;
            const int64_t offset = sum_first[sender] - st->sum_first;
            for (int s = 0; s < 4; s++) {
                for (int64_t b = 0; b < st->B; b++) {
                    double *into = st->sums[s] + (b * held + offset) * st->key_width;
                    const double *from = received + (s * st->B + b) * tokens * st->key_width;
                    for (int64_t i = 0; i < tokens * st->key_width; i++) {
                        into[i] += from[i];
                    }
                }
            }
        }
        free(send);
        free(received);
    }
    return status;
}

/* The inputs of a window: q and dout of the queries [q0, q1), k and v of the keys [k0, k1), each
 * in float32 and float64. */
static void draw_window(const stream *st, int64_t q0, int64_t q1, int64_t k0, int64_t k1, float *q,
                        double *wide_q, float *dout, double *wide_dout, float *k, double *wide_k,
                        float *v, double *wide_v) {
    attention_item_draw_tokens(st->c, st->seed, st->layer, ATTENTION_INPUT_Q, q0, q1, q, wide_q);
    attention_item_draw_tokens(st->c, st->seed, st->layer, ATTENTION_INPUT_DOUT, q0, q1, dout,
                               wide_dout);
    attention_item_draw_tokens(st->c, st->seed, st->layer, ATTENTION_INPUT_K, k0, k1, k, wide_k);
    attention_item_draw_tokens(st->c, st->seed, st->layer, ATTENTION_INPUT_V, k0, k1, v, wide_v);
}

/* The query side of one block [t0, t1) whose allowed pairs reach the keys [k0, k1). */
static void query_block(stream *st, int64_t t0, int64_t t1, int64_t k0, int64_t k1) {
    const int64_t B = st->B, S = st->S, H = st->H, Dh = st->Dh, QW = st->query_width,
                  KW = st->key_width;
    const int64_t Sq = t1 - t0, Sk = k1 - k0, Q = B * Sq * QW, K = B * Sk * KW, L = B * H * Sq;
    float *q = grab(Q, 4), *dout = grab(Q, 4), *k = grab(K, 4), *v = grab(K, 4);
    double *wide_q = grab(Q, 8), *wide_dout = grab(Q, 8), *wide_k = grab(K, 8),
           *wide_v = grab(K, 8);
    double *ref_out = grab(Q, 8), *ref_dq = grab(Q, 8);
    float *naive_out = grab(Q, 4), *naive_dq = grab(Q, 4), *naive_alone_dq = grab(Q, 4);
    float *rounded_out = grab(Q, 4), *out = grab(Q, 4), *dq = grab(Q, 4), *alone_dq = grab(Q, 4);
    float *lse = grab(L, 4), *given_lse = grab(L, 4);
    float *parts[4] = {grab(K, 4), grab(K, 4), grab(K, 4), grab(K, 4)};
    int64_t *query_index = grab(Sq, 8), *key_index = grab(Sk, 8);
    void *all[] = {
        q,        dout,     k,           v,         wide_q,    wide_dout,      wide_k,
        wide_v,   ref_out,  ref_dq,      naive_out, naive_dq,  naive_alone_dq, rounded_out,
        out,      dq,       alone_dq,    lse,       given_lse, parts[0],       parts[1],
        parts[2], parts[3], query_index, key_index};
    bool allocated = true;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        allocated &= all[i] != NULL;
    }
    cpparity_error error;
    char message[512] = "";
    const reference_attention_shape shape = {B, S, H, st->Hkv, Dh};
    const naive_attention_shape naive_shape = {B, S, H, st->Hkv, Dh};
    const reference_attention_window window = {t0, t1, k0, k1, t0, t1};
    const naive_attention_window naive_window = {t0, t1, k0, k1, t0, t1};
    if (!allocated) {
        fail(st, "out of memory for the query block [%lld, %lld) (%lld tokens, keys [%lld, %lld))",
             (long long)t0, (long long)t1, (long long)Sq, (long long)k0, (long long)k1);
        goto done;
    }
    draw_window(st, t0, t1, k0, k1, q, wide_q, dout, wide_dout, k, wide_k, v, wide_v);
    /* the float64 reference and the naive baseline, by windows */
    const double started = monotonic_seconds();
    const bool reference_ok =
        reference_attention_forward_window(ref_out, st->reference_lse, wide_q, wide_k, wide_v,
                                           st->reference, shape, st->scale, window,
                                           &error) == CPPARITY_OK &&
        reference_attention_backward_queries_window(
            ref_dq, st->reference_delta, wide_dout, wide_q, wide_k, wide_v, ref_out,
            st->reference_lse, st->reference, shape, st->scale, window, &error) == CPPARITY_OK;
    st->found.reference_seconds += monotonic_seconds() - started;
    if (!reference_ok ||
        naive_float_attention_forward_window(naive_out, st->naive_lse, q, k, v, st->reference,
                                             naive_shape, st->scale, naive_window,
                                             &error) != CPPARITY_OK ||
        naive_float_attention_backward_queries_window(
            naive_dq, st->naive_delta, dout, q, k, v, naive_out, st->naive_lse, st->reference,
            naive_shape, st->scale, naive_window, &error) != CPPARITY_OK) {
        fail(st, "the query block [%lld, %lld): %s", (long long)t0, (long long)t1, error.message);
        goto done;
    }
    /* backward alone: given the reference's out and lse rounded to float32 */
    for (int64_t i = 0; i < Q; i++) {
        rounded_out[i] = (float)ref_out[i];
    }
    for (int64_t bh = 0; bh < B * H; bh++) {
        for (int64_t i = 0; i < Sq; i++) {
            st->rounded_lse[bh * S + t0 + i] = (float)st->reference_lse[bh * S + t0 + i];
            given_lse[bh * Sq + i] = st->rounded_lse[bh * S + t0 + i];
        }
    }
    if (naive_float_attention_backward_queries_window(
            naive_alone_dq, st->naive_alone_delta, dout, q, k, v, rounded_out, st->rounded_lse,
            st->reference, naive_shape, st->scale, naive_window, &error) != CPPARITY_OK) {
        fail(st, "the query block [%lld, %lld): %s", (long long)t0, (long long)t1, error.message);
        goto done;
    }
    /* the kernel: one block call over every key its queries reach */
    for (int64_t i = 0; i < Sq; i++) {
        query_index[i] = t0 + i;
    }
    for (int64_t j = 0; j < Sk; j++) {
        key_index[j] = k0 + j;
    }
    const cpparity_attention_block call = {Sq, Sk, query_index, key_index};
    if (kernel_call_forward_block(st->kernel, out, lse, q, k, v, &st->mask, &st->dims, &call,
                                  st->scale, message, sizeof message) != 0 ||
        kernel_call_backward_block(st->kernel, dq, parts[0], parts[1], dout, q, k, v, out, lse,
                                   &st->mask, &st->dims, &call, st->scale, message,
                                   sizeof message) != 0) {
        fail(st, "queries [%lld, %lld), keys [%lld, %lld): %s", (long long)t0, (long long)t1,
             (long long)k0, (long long)k1, message);
        goto done;
    }
    if (kernel_call_backward_block(st->kernel, alone_dq, parts[2], parts[3], dout, q, k, v,
                                   rounded_out, given_lse, &st->mask, &st->dims, &call, st->scale,
                                   message, sizeof message) != 0) {
        fail(st,
             "queries [%lld, %lld), keys [%lld, %lld): backward given the reference's out and "
             "lse: %s",
             (long long)t0, (long long)t1, (long long)k0, (long long)k1, message);
        goto done;
    }
    /* compared at their flat index in the whole tensors */
    layer_findings *f = &st->found;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < Sq; i++) {
            for (int64_t e = 0; e < QW; e++) {
                const int64_t at = (b * Sq + i) * QW + e, index = (b * S + t0 + i) * QW + e;
                compare_add(&f->kernel[T_OUT], index, out[at], ref_out[at], true);
                compare_add(&f->naive[T_OUT], index, naive_out[at], ref_out[at], true);
                compare_add(&f->kernel[T_DQ], index, dq[at], ref_dq[at], true);
                compare_add(&f->naive[T_DQ], index, naive_dq[at], ref_dq[at], true);
                compare_add(&f->kernel[T_ALONE_DQ], index, alone_dq[at], ref_dq[at], true);
                compare_add(&f->naive[T_ALONE_DQ], index, naive_alone_dq[at], ref_dq[at], true);
            }
        }
    }
    /* lse: rows with an allowed key are compared; a fully masked row must hold exactly −∞ */
    for (int64_t bh = 0; bh < B * H; bh++) {
        for (int64_t i = 0; i < Sq; i++) {
            const int64_t index = bh * S + t0 + i;
            const double r = st->reference_lse[index];
            const bool masked = isinf(r) && r < 0;
            const float x = lse[bh * Sq + i];
            compare_add(&f->kernel[T_LSE], index, masked ? 0.0 : x, masked ? 0.0 : r, !masked);
            compare_add(&f->naive[T_LSE], index, masked ? 0.0 : st->naive_lse[index],
                        masked ? 0.0 : r, !masked);
            if (masked && !(isinf(x) && x < 0)) {
                f->first_masked =
                    f->masked_wrong == 0 || index < f->first_masked ? index : f->first_masked;
                f->masked_wrong++;
            }
        }
    }
    /* the kernel's dk and dv shares onto its keys' sums */
    const int64_t held = st->own_end - st->sum_first;
    for (int s = 0; s < 4; s++) {
        for (int64_t b = 0; b < B; b++) {
            double *into = st->sums[s] + (b * held + k0 - st->sum_first) * KW;
            const float *from = parts[s] + b * Sk * KW;
            for (int64_t i = 0; i < Sk * KW; i++) {
                into[i] += from[i];
            }
        }
    }
done:
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
}

/* The key side of one block [k0, k1) whose keys the queries [q0, q1) reach. */
static void key_block(stream *st, int64_t k0, int64_t k1, int64_t q0, int64_t q1) {
    const int64_t B = st->B, S = st->S, QW = st->query_width, KW = st->key_width;
    const int64_t Sq = q1 - q0, Sk = k1 - k0, Q = B * Sq * QW, K = B * Sk * KW;
    float *q = grab(Q, 4), *dout = grab(Q, 4), *k = grab(K, 4), *v = grab(K, 4);
    double *wide_q = grab(Q, 8), *wide_dout = grab(Q, 8), *wide_k = grab(K, 8),
           *wide_v = grab(K, 8);
    double *ref_dk = grab(K, 8), *ref_dv = grab(K, 8);
    float *naive[4] = {grab(K, 4), grab(K, 4), grab(K, 4), grab(K, 4)};
    void *all[] = {q,      dout,   k,      v,        wide_q,   wide_dout, wide_k,
                   wide_v, ref_dk, ref_dv, naive[0], naive[1], naive[2],  naive[3]};
    bool allocated = true;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        allocated &= all[i] != NULL;
    }
    cpparity_error error;
    const reference_attention_shape shape = {B, S, st->H, st->Hkv, st->Dh};
    const naive_attention_shape naive_shape = {B, S, st->H, st->Hkv, st->Dh};
    const reference_attention_window window = {q0, q1, k0, k1, k0, k1};
    const naive_attention_window naive_window = {q0, q1, k0, k1, k0, k1};
    if (!allocated) {
        fail(st, "out of memory for the key block [%lld, %lld) (queries [%lld, %lld))",
             (long long)k0, (long long)k1, (long long)q0, (long long)q1);
        goto done;
    }
    draw_window(st, q0, q1, k0, k1, q, wide_q, dout, wide_dout, k, wide_k, v, wide_v);
    const double started = monotonic_seconds();
    const bool reference_ok =
        reference_attention_backward_keys_window(
            ref_dk, ref_dv, wide_dout, wide_q, wide_k, wide_v, st->reference_lse,
            st->reference_delta, st->reference, shape, st->scale, window, &error) == CPPARITY_OK;
    st->found.reference_seconds += monotonic_seconds() - started;
    if (!reference_ok ||
        naive_float_attention_backward_keys_window(
            naive[0], naive[1], dout, q, k, v, st->naive_lse, st->naive_delta, st->reference,
            naive_shape, st->scale, naive_window, &error) != CPPARITY_OK ||
        naive_float_attention_backward_keys_window(
            naive[2], naive[3], dout, q, k, v, st->rounded_lse, st->naive_alone_delta,
            st->reference, naive_shape, st->scale, naive_window, &error) != CPPARITY_OK) {
        fail(st, "the key block [%lld, %lld): %s", (long long)k0, (long long)k1, error.message);
        goto done;
    }
    /* the kernel's sums, rounded to float32 as a whole-sequence call's outputs are */
    const int tensors[4] = {T_DK, T_DV, T_ALONE_DK, T_ALONE_DV};
    const double *reference[4] = {ref_dk, ref_dv, ref_dk, ref_dv};
    const int64_t held = st->own_end - st->sum_first;
    for (int s = 0; s < 4; s++) {
        for (int64_t b = 0; b < B; b++) {
            const double *sum = st->sums[s] + (b * held + k0 - st->sum_first) * KW;
            for (int64_t i = 0; i < Sk * KW; i++) {
                const int64_t at = b * Sk * KW + i, index = (b * S + k0) * KW + i;
                compare_add(&st->found.kernel[tensors[s]], index, (double)(float)sum[i],
                            reference[s][at], true);
                compare_add(&st->found.naive[tensors[s]], index, naive[s][at], reference[s][at],
                            true);
            }
        }
    }
done:
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
}

/* One layer on this rank; its findings in st->found. Errors returned are the communicator's. */
static cpparity_status run_layer(stream *st, cpparity_error *error) {
    const int size = st->team->size, rank = st->team->rank;
    const int64_t B = st->B, S = st->S, H = st->H, rows = B * H * S;
    st->reference_lse = grab(rows, 8);
    st->reference_delta = grab(rows, 8);
    st->naive_lse = grab(rows, 4);
    st->naive_delta = grab(rows, 4);
    st->naive_alone_delta = grab(rows, 4);
    st->rounded_lse = grab(rows, 4);
    const int64_t first_block = st->blocks * rank / size,
                  end_block = st->blocks * (rank + 1) / size;
    const int64_t own_blocks = end_block - first_block;
    int64_t *reach = grab(2 * own_blocks, 8), *sum_first = grab(size, 8);
    cpparity_error local;
    if (st->reference_lse == NULL || st->reference_delta == NULL || st->naive_lse == NULL ||
        st->naive_delta == NULL || st->naive_alone_delta == NULL || st->rounded_lse == NULL ||
        reach == NULL || sum_first == NULL) {
        fail(st, "out of memory (the lse and D of %lld rows)", (long long)rows);
    }
    /* the keys each of this rank's query blocks reaches, and the keys its sums cover */
    int64_t lowest = st->own_first;
    for (int64_t i = 0; !st->found.failed && i < own_blocks; i++) {
        const int64_t t0 = (first_block + i) * st->block;
        const int64_t t1 = t0 + st->block < S ? t0 + st->block : S;
        if (reference_attention_keys_needed(st->reference, t0, t1, &reach[2 * i], &reach[2 * i + 1],
                                            &local) != CPPARITY_OK) {
            fail(st, "%s", local.message);
            break;
        }
        if (reach[2 * i] >= reach[2 * i + 1]) { /* no allowed pair: the block's own tokens */
            reach[2 * i] = t0;
            reach[2 * i + 1] = t1;
        }
        lowest = reach[2 * i] < lowest ? reach[2 * i] : lowest;
    }
    cpparity_status status =
        cpparity_all_gather(st->team, &lowest, sum_first, 1, CPPARITY_INT64, NULL, error);
    for (int r = size - 2; status == CPPARITY_OK && r >= 0; r--) {
        sum_first[r] = sum_first[r + 1] < sum_first[r] ? sum_first[r + 1] : sum_first[r];
    }
    if (status == CPPARITY_OK) {
        st->sum_first = sum_first[rank];
        for (int s = 0; s < 4; s++) {
            st->sums[s] = grab(B * (st->own_end - st->sum_first) * st->key_width, 8);
            if (st->sums[s] == NULL) {
                fail(st, "out of memory (the dk and dv sums of keys [%lld, %lld))",
                     (long long)st->sum_first, (long long)st->own_end);
            }
        }
    }
    for (int64_t i = 0; status == CPPARITY_OK && !st->found.failed && i < own_blocks; i++) {
        const int64_t t0 = (first_block + i) * st->block;
        const int64_t t1 = t0 + st->block < S ? t0 + st->block : S;
        query_block(st, t0, t1, reach[2 * i], reach[2 * i + 1]);
    }
    /* every query's lse and D to every rank; the kernel's sums to the keys' owners */
    if (status == CPPARITY_OK) {
        status = exchange_rows(st, st->reference_lse, sizeof(double), error);
    }
    if (status == CPPARITY_OK) {
        status = exchange_rows(st, st->reference_delta, sizeof(double), error);
    }
    if (status == CPPARITY_OK) {
        status = exchange_rows(st, st->naive_lse, sizeof(float), error);
    }
    if (status == CPPARITY_OK) {
        status = exchange_rows(st, st->naive_delta, sizeof(float), error);
    }
    if (status == CPPARITY_OK) {
        status = exchange_rows(st, st->naive_alone_delta, sizeof(float), error);
    }
    if (status == CPPARITY_OK) {
        status = hand_sums_down(st, sum_first, error);
    }
    for (int64_t i = 0; status == CPPARITY_OK && !st->found.failed && i < rows; i++) {
        st->rounded_lse[i] = (float)st->reference_lse[i];
    }
    for (int64_t i = 0; status == CPPARITY_OK && !st->found.failed && i < own_blocks; i++) {
        const int64_t k0 = (first_block + i) * st->block;
        const int64_t k1 = k0 + st->block < S ? k0 + st->block : S;
        int64_t q0 = 0, q1 = 0;
        if (reference_attention_queries_needed(st->reference, k0, k1, &q0, &q1, &local) !=
            CPPARITY_OK) {
            fail(st, "%s", local.message);
            break;
        }
        key_block(st, k0, k1, q0, q1);
    }
    free(reach);
    free(sum_first);
    for (int s = 0; s < 4; s++) {
        free(st->sums[s]);
        st->sums[s] = NULL;
    }
    free(st->reference_lse);
    free(st->reference_delta);
    free(st->naive_lse);
    free(st->naive_delta);
    free(st->naive_alone_delta);
    free(st->rounded_lse);
    return status;
}

/* One record of the layer from the merged metrics. */
static void add_record(run_item *item, const cpparity_case *c, int64_t layer, const char *what,
                       cpparity_tensor_kind kind, int shape_rank, const int64_t *shape,
                       const compare_accumulator *kernel, const compare_accumulator *naive) {
    compare_metrics metrics, naive_metrics;
    compare_finish(kernel, &metrics);
    compare_finish(naive, &naive_metrics);
    attention_item_add_record(item, c, layer, what, kind, shape_rank, shape, &metrics,
                              naive_metrics.relative_l2);
}

static void begin_findings(layer_findings *f, const cpparity_case *c) {
    memset(f, 0, sizeof *f);
    const cpparity_model_config *m = &c->model;
    const int64_t N = c->batch_size * c->seq_len;
    const int64_t query = N * m->num_attention_heads * m->head_dim;
    const int64_t key = N * m->num_key_value_heads * m->head_dim;
    const int64_t counts[RECORDS] = {query, N * m->num_attention_heads, query, key, key, query, key,
                                     key};
    for (int t = 0; t < RECORDS; t++) {
        compare_begin(&f->kernel[t], counts[t]);
        compare_begin(&f->naive[t], counts[t]);
    }
    f->first_masked = -1;
}

/* Every rank's findings merged on rank 0, in rank order, into *merged; *failed (every rank) says
 * whether a rank failed, and merged->message (rank 0) which one and how. */
static cpparity_status merge_findings(cpparity_comm *team, const layer_findings *own,
                                      layer_findings *merged, bool *failed, cpparity_error *error) {
    int64_t any = own->failed, total = 0;
    cpparity_status status =
        cpparity_all_reduce_sum(team, &any, &total, 1, CPPARITY_INT64, NULL, error);
    void *received = NULL;
    int64_t *sizes = grab(team->size, sizeof *sizes);
    if (status == CPPARITY_OK && sizes == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    if (status == CPPARITY_OK) {
        status = cpparity_gather_bytes(team, own, sizeof *own, &received, sizes, 0, error);
    }
    *failed = total > 0;
    if (status == CPPARITY_OK && team->rank == 0) {
        const layer_findings *all = received;
        *merged = all[0];
        for (int r = 0; r < team->size; r++) {
            if (r > 0) {
                for (int t = 0; t < RECORDS; t++) {
                    compare_merge(&merged->kernel[t], &all[r].kernel[t]);
                    compare_merge(&merged->naive[t], &all[r].naive[t]);
                }
                if (all[r].masked_wrong > 0 &&
                    (merged->masked_wrong == 0 || all[r].first_masked < merged->first_masked)) {
                    merged->first_masked = all[r].first_masked;
                }
                merged->masked_wrong += all[r].masked_wrong;
                merged->reference_seconds = all[r].reference_seconds > merged->reference_seconds
                                                ? all[r].reference_seconds
                                                : merged->reference_seconds;
            }
        }
        merged->failed = 0;
        for (int r = 0; r < team->size && !merged->failed; r++) {
            if (all[r].failed) { /* the lowest rank that failed is named */
                char message[sizeof merged->message];
                snprintf(message, sizeof message, "rank %d: %.440s", r, all[r].message);
                memcpy(merged->message, message, sizeof message);
                merged->failed = 1;
            }
        }
    }
    free(received);
    free(sizes);
    return status;
}

/* The item on host buffers (a CPU kernel, or a CUDA one staged). */
static cpparity_status run_on_host(cpparity_comm *team, run_item *item, const cpparity_case *c,
                                   uint64_t seed, const cpparity_attention_kernel *kernel,
                                   int64_t block, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len;
    const bool root = team->rank == 0;
    stream st = {.team = team,
                 .c = c,
                 .seed = seed,
                 .kernel = kernel,
                 .block = block,
                 .blocks = (S + block - 1) / block,
                 .B = B,
                 .S = S,
                 .H = m->num_attention_heads,
                 .Hkv = m->num_key_value_heads,
                 .Dh = m->head_dim,
                 .query_width = m->num_attention_heads * m->head_dim,
                 .key_width = m->num_key_value_heads * m->head_dim,
                 .scale = attention_item_scale(c),
                 .dims = {B, S, m->num_attention_heads, m->num_key_value_heads, m->head_dim}};
    st.first_token = grab(team->size, 8);
    st.end_token = grab(team->size, 8);
    if (root) {
        item->tensors_expected = RECORDS * m->num_hidden_layers;
        item->gradients_identical = true; /* the gradients are not held by ranks: none to agree */
        item->tensors = calloc((size_t)item->tensors_expected + 1, sizeof *item->tensors);
    }
    cpparity_batch batch = {0};
    mask_storage storage = {0};
    cpparity_error local;
    bool failed = st.first_token == NULL || st.end_token == NULL || (root && item->tensors == NULL);
    char failure[CPPARITY_MESSAGE_TEXT] = "";
    if (failed) {
        snprintf(failure, sizeof failure, "out of memory");
    }
    if (!failed && (fixture_batch_build(&batch, c->rows, B, S, m->vocab_size, c->seed, &local) !=
                        CPPARITY_OK ||
                    mask_storage_build(&storage, B, S, batch.attention_mask, batch.position_ids,
                                       &local) != CPPARITY_OK)) {
        failed = true;
        snprintf(failure, sizeof failure, "%s", local.message);
    }
    for (int r = 0; !failed && r < team->size; r++) {
        owned_tokens(st.blocks, block, S, r, team->size, &st.first_token[r], &st.end_token[r]);
    }
    if (!failed) {
        st.own_first = st.first_token[team->rank];
        st.own_end = st.end_token[team->rank];
    }
    /* a failure before the layers on any rank is every rank's */
    int64_t setup_failed = failed, setups_failed = 0;
    cpparity_status agreed = cpparity_all_reduce_sum(team, &setup_failed, &setups_failed, 1,
                                                     CPPARITY_INT64, NULL, error);
    if (agreed != CPPARITY_OK) {
        mask_storage_free(&storage);
        cpparity_batch_free(&batch);
        free(st.first_token);
        free(st.end_token);
        return agreed;
    }
    if (setups_failed > 0 && !failed) {
        failed = true;
        snprintf(failure, sizeof failure, "another rank could not set the item up (out of memory)");
    }
    char not_claimed[CPPARITY_MESSAGE_TEXT] = "";
    int64_t ran = 0, ran_layer[CPPARITY_MAX_LAYERS];
    layer_findings merged[CPPARITY_MAX_LAYERS];
    cpparity_status status = CPPARITY_OK;
    for (int64_t layer = 0; !failed && status == CPPARITY_OK && layer < m->num_hidden_layers;
         layer++) {
        const cpparity_attention_layer attention_layer = cpparity_model_layer(m, layer);
        st.layer = layer;
        st.mask = mask_storage_describe(&storage, attention_layer);
        char unsupported[512] = "";
        if (!kernel_supports_call(kernel, &st.mask, &st.dims, unsupported, sizeof unsupported)) {
            const size_t used = strlen(not_claimed);
            snprintf(not_claimed + used, sizeof not_claimed - used, "%slayer %lld (%s): %s",
                     used > 0 ? "; " : "", (long long)layer,
                     cpparity_layer_type_name(attention_layer.type), unsupported);
            continue;
        }
        reference_mask reference = {0};
        begin_findings(&st.found, c);
        if (reference_mask_init(&reference, B, S, batch.attention_mask, batch.position_ids,
                                attention_layer, REFERENCE_MASK_DEFAULT_BLOCK,
                                &local) != CPPARITY_OK) {
            fail(&st, "%s", local.message);
        }
        st.reference = &reference;
        status = run_layer(&st, error);
        reference_mask_free(&reference);
        if (status == CPPARITY_OK) {
            status = merge_findings(team, &st.found, &merged[ran], &failed, error);
        }
        if (status == CPPARITY_OK && failed && root) {
            snprintf(failure, sizeof failure, "layer %lld: %.900s", (long long)layer,
                     merged[ran].message);
        }
        ran_layer[ran++] = layer;
    }
    mask_storage_free(&storage);
    cpparity_batch_free(&batch);
    free(st.first_token);
    free(st.end_token);
    if (status != CPPARITY_OK || !root) {
        return status;
    }
    if (failed) {
        item->outcome = RUN_ERROR;
        item->error_status = CPPARITY_ERROR_RUNTIME;
        snprintf(item->message, sizeof item->message, "%.900s; inputs from seed %llu", failure,
                 (unsigned long long)seed);
        return CPPARITY_OK;
    }
    if (ran == 0) { /* the kernel declares it lacks what every layer needs */
        item->outcome = RUN_NOT_CLAIMED;
        snprintf(item->message, sizeof item->message, "not claimed by kernel %s: %.900s",
                 kernel->name, not_claimed);
        return CPPARITY_OK;
    }
    /* the records, in the whole item's order */
    for (int64_t i = 0; i < ran; i++) {
        const int64_t layer = ran_layer[i];
        const layer_findings *f = &merged[i];
        const int64_t query_shape[4] = {B, S, st.H, st.Dh}, key_shape[4] = {B, S, st.Hkv, st.Dh};
        const int64_t lse_shape[3] = {B, st.H, S};
        add_record(item, c, layer, "out", CPPARITY_KIND_LOGITS, 4, query_shape, &f->kernel[T_OUT],
                   &f->naive[T_OUT]);
        add_record(item, c, layer, "lse", CPPARITY_KIND_LOGITS, 3, lse_shape, &f->kernel[T_LSE],
                   &f->naive[T_LSE]);
        add_record(item, c, layer, "dq", CPPARITY_KIND_GRADS, 4, query_shape, &f->kernel[T_DQ],
                   &f->naive[T_DQ]);
        add_record(item, c, layer, "dk", CPPARITY_KIND_GRADS, 4, key_shape, &f->kernel[T_DK],
                   &f->naive[T_DK]);
        add_record(item, c, layer, "dv", CPPARITY_KIND_GRADS, 4, key_shape, &f->kernel[T_DV],
                   &f->naive[T_DV]);
        add_record(item, c, layer, "backward_alone.dq", CPPARITY_KIND_GRADS, 4, query_shape,
                   &f->kernel[T_ALONE_DQ], &f->naive[T_ALONE_DQ]);
        add_record(item, c, layer, "backward_alone.dk", CPPARITY_KIND_GRADS, 4, key_shape,
                   &f->kernel[T_ALONE_DK], &f->naive[T_ALONE_DK]);
        add_record(item, c, layer, "backward_alone.dv", CPPARITY_KIND_GRADS, 4, key_shape,
                   &f->kernel[T_ALONE_DV], &f->naive[T_ALONE_DV]);
    }
    item->tensors_expected = item->tensor_count;
    for (int64_t i = 0; i < ran; i++) { /* the slowest rank's, layer after layer */
        item->reference_seconds += merged[i].reference_seconds;
    }
    judge_item_decide(item, -1, NULL);
    for (int64_t i = 0; i < ran; i++) {
        const layer_findings *f = &merged[i];
        tensor_record *record = &item->tensors[i * RECORDS + T_LSE];
        if (f->masked_wrong > 0) {
            const int64_t lse_shape[3] = {B, st.H, S};
            compare_coordinates(f->first_masked, 3, lse_shape, record->worst);
            attention_item_fail_record(
                record,
                "%lld fully masked rows have lse other than -inf (first: head %lld at the "
                "position named; a fully masked row has out = 0, lse = -inf)",
                (long long)f->masked_wrong, (long long)record->worst[1]);
        }
    }
    const size_t used = strlen(item->message);
    snprintf(item->message + used, sizeof item->message - used,
             "%sby query blocks of %lld tokens on %d rank%s (the kernel's block calls; its "
             "whole-sequence calls, a second call and concurrent calls are not made at this "
             "length)%s%.500s; inputs from seed %llu (rerun with --seed %llu)",
             used > 0 ? "; " : "", (long long)block, team->size, team->size == 1 ? "" : "s",
             not_claimed[0] != '\0' ? "; not claimed by kernel, so not run: " : "", not_claimed,
             (unsigned long long)seed, (unsigned long long)seed);
    attention_item_refresh_outcome(item, RECORDS);
    return CPPARITY_OK;
}

cpparity_status attention_stream_run(cpparity_comm *team, run_item *item, const cpparity_case *c,
                                     uint64_t seed, const cpparity_attention_kernel *kernel,
                                     int64_t block, cpparity_error *error) {
    const bool root = team->rank == 0;
    /* what every rank decides alike, before any collective */
    const char *why = NULL;
    char text[CPPARITY_MESSAGE_TEXT] = "";
    if (kernel->dtype != CPPARITY_KERNEL_DTYPE_FLOAT32 || item->dtype != CPPARITY_DTYPE_F32) {
        snprintf(text, sizeof text,
                 "attention-level cases run float32 kernels in this version (kernel %s is %s %s, "
                 "the item %s)",
                 kernel->name, kernel_device_name(kernel),
                 kernel->dtype == CPPARITY_KERNEL_DTYPE_FLOAT32 ? "float32" : "bfloat16",
                 cpparity_dtype_name(item->dtype));
        why = text;
    } else if (!kernel_has_block_calls(kernel)) {
        snprintf(text, sizeof text,
                 "by query blocks of %lld tokens (the whole sequence does not fit, or "
                 "--query-block asks for it), which needs a kernel with block calls: kernel %s "
                 "has none (ABI %u%s)",
                 (long long)block, kernel->name, (unsigned)kernel->abi_version,
                 kernel->abi_version >= 3u ? ", forward_block/backward_block NULL" : "");
        why = text;
    }
    if (why != NULL) {
        if (root) {
            item->outcome = RUN_NOT_RUN;
            snprintf(item->message, sizeof item->message, "%s", why);
        } else {
            memset(item, 0, sizeof *item);
        }
        return CPPARITY_OK;
    }
    if (!root) {
        memset(item, 0, sizeof *item);
    }
    if (kernel->device != CPPARITY_KERNEL_DEVICE_CUDA) {
        return run_on_host(team, item, c, seed, kernel, block, error);
    }
    cpparity_attention_kernel staged;
    char staging[512] = "";
    const bool wrapped = kernel_device_staging_wrap(&staged, kernel, staging, sizeof staging);
    int64_t usable = wrapped, everywhere = 0;
    cpparity_status status =
        cpparity_all_reduce_sum(team, &usable, &everywhere, 1, CPPARITY_INT64, NULL, error);
    if (status == CPPARITY_OK && everywhere == team->size) {
        status = run_on_host(team, item, c, seed, &staged, block, error);
    } else if (status == CPPARITY_OK && root) {
        item->outcome = RUN_NOT_RUN;
        snprintf(item->message, sizeof item->message, "%s",
                 wrapped ? "the CUDA kernel is not usable on every rank" : staging);
    }
    if (wrapped) {
        kernel_device_staging_release(&staged);
    }
    return status;
}

int64_t attention_stream_memory(const cpparity_case *c, int64_t block, int64_t ranks) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len;
    const int64_t QW = m->num_attention_heads * m->head_dim;
    const int64_t KW = m->num_key_value_heads * m->head_dim;
    /* the reach of a block: what its allowed pairs can touch beyond it, at most (documents and
     * padding only narrow it) */
    int64_t reach = 0;
    for (int64_t l = 0; l < m->num_hidden_layers; l++) {
        const cpparity_attention_layer layer = cpparity_model_layer(m, l);
        const int64_t span = layer.type == CPPARITY_LAYER_SLIDING   ? layer.window
                             : layer.type == CPPARITY_LAYER_CHUNKED ? layer.chunk_size
                                                                    : S;
        /* rounded out to the reference's tiles on both sides */
        const int64_t tiles = (span + 2 * REFERENCE_MASK_DEFAULT_BLOCK);
        reach = tiles > reach ? tiles : reach;
    }
    reach = reach < S ? reach : S;
    const int64_t Bq = block < S ? block : S;
    const int64_t window = Bq + reach < S ? Bq + reach : S; /* keys (or queries) of a block */
    const int64_t blocks = (S + Bq - 1) / Bq, per_rank = (blocks + ranks - 1) / ranks * Bq;
    const int64_t own = per_rank < S ? per_rank : S;
    const int64_t held = own + reach < S ? own + reach : S; /* the keys a rank's sums cover */
    int64_t total = 0;
    bool ok = true;
#define TERM(...)                                                                                  \
    ok = ok &&                                                                                     \
         cpparity_elements_checked((int64_t[]){__VA_ARGS__},                                       \
                                   (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),      \
                                   &term) &&                                                       \
         cpparity_add_checked(total, term, &total)
    int64_t term = 0;
    /* whole (B, H, S): two float64 and four float32 arrays, and a gather's send and receive */
    TERM(B, m->num_attention_heads, S, 16 + 16 + 16);
    /* the kernel's sums (4 float64) and the chain's send and receive of the part handed down */
    TERM(B, held, KW, 4 * 8);
    TERM(B, reach, KW, 2 * 4 * 8);
    /* the query side of a block: q and dout (float and double), out, dq: ref 2 double, naive 3,
     * rounded 1 and kernel 3 float; k and v of its window (float and double) and the kernel's
     * 4 float shares; lse of the block twice */
    int64_t query_side = 0, key_side = 0;
    ok =
        ok &&
        cpparity_elements_checked((int64_t[]){B, Bq, QW, 2 * 12 + 2 * 8 + 7 * 4}, 4, &query_side) &&
        cpparity_elements_checked((int64_t[]){B, window, KW, 2 * 12 + 4 * 4}, 4, &term) &&
        cpparity_add_checked(query_side, term, &query_side) &&
        cpparity_elements_checked((int64_t[]){B, m->num_attention_heads, Bq, 2 * 4}, 4, &term) &&
        cpparity_add_checked(query_side, term, &query_side);
    /* the key side: q and dout of the queries that reach its block (float and double), k and v,
     * the reference's dk and dv and the baseline's four */
    ok = ok && cpparity_elements_checked((int64_t[]){B, window, QW, 2 * 12}, 4, &key_side) &&
         cpparity_elements_checked((int64_t[]){B, Bq, KW, 2 * 12 + 2 * 8 + 4 * 4}, 4, &term) &&
         cpparity_add_checked(key_side, term, &key_side);
    /* one side lives at a time; the baseline's per-thread tables span the window */
    ok = ok && cpparity_add_checked(total, query_side > key_side ? query_side : key_side, &total);
    TERM(reference_threads(), 2 * 64 + 1, window, 4);
    /* the batch and the masks: the kernel's 17 bytes a token, the reference's a few */
    TERM(B, S, 17 + 32);
#undef TERM
    return ok ? total : -1;
}
