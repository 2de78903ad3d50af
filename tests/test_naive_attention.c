/*
 * test_naive_attention.c — the naive baseline's float32 attention
 * (harness/judging/naive_attention.h) computes the sums its header documents, bit for bit: a scalar
 * replay of that order (whole rows, a plain softmax, one accumulator per sum, fused where
 * naive_products fuses) gives the same out, lse, dq, dk and dv, on a batch with left and right
 * padding, packed documents, grouped heads, a length that is not a multiple of the 64-row blocks
 * and a head size that is not one of the 16-wide micro-tiles, for causal, sliding-window and
 * chunked masks; and the same bits on 1 and 3 threads. The comparison is exact (no tolerance): the
 * order is the contract.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/judging/naive_attention.h"
#include "harness/judging/naive_products.h"
#include "tests/support/naive_replay.h"
#include "reference/attention.h"
#include "reference/mask.h"
#include "reference/threads.h"

#define B 2
#define S 330 /* five 64-row blocks and a part */
#define H 4
#define HKV 2
#define DH 24 /* one 16-wide micro-tile and a part */

static const naive_attention_shape shape = {B, S, H, HKV, DH};

/* Row 0: 10 tokens of left padding, then documents of 70 tokens. Row 1: one document of S − 30
 * tokens, then 30 of right padding: its blocks reach more than the 256 tokens of the other side
 * that the backward takes at once (naive_attention.h), so its sums are resumed. */
static void make_mask(reference_mask *mask, cpparity_attention_layer layer) {
    int8_t attention_mask[B * S];
    int64_t position_ids[B * S];
    for (int64_t t = 0; t < S; t++) {
        attention_mask[t] = t >= 10;
        position_ids[t] = t < 10 ? 0 : (t - 10) % 70;
        attention_mask[S + t] = t < S - 30;
        position_ids[S + t] = t < S - 30 ? t : 0;
    }
    cpparity_error error;
    cr_assert_eq(reference_mask_init(mask, B, S, attention_mask, position_ids, layer, 64, &error),
                 CPPARITY_OK, "%s", error.message);
}

static int64_t query_at(int64_t b, int64_t t, int64_t h) {
    return ((b * S + t) * H + h) * DH;
}

static int64_t key_at(int64_t b, int64_t t, int64_t kv) {
    return ((b * S + t) * HKV + kv) * DH;
}

static float score(const float *q, const float *k, int64_t b, int64_t t, int64_t h, int64_t key) {
    float acc = 0.0f;
    for (int64_t d = 0; d < DH; d++) {
        acc =
            naive_replay_step(acc, q[query_at(b, t, h) + d], k[key_at(b, key, h / (H / HKV)) + d]);
    }
    return acc;
}

typedef struct tensors {
    float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
} tensors;

static tensors make_tensors(void) {
    const int64_t Q = B * S * H * DH, K = B * S * HKV * DH;
    tensors x = {
        naive_replay_filled(Q, 1), naive_replay_filled(K, 2), naive_replay_filled(K, 3),
        naive_replay_filled(Q, 4), naive_replay_filled(Q, 5), naive_replay_filled(B * H * S, 6),
        naive_replay_filled(Q, 7), naive_replay_filled(K, 8), naive_replay_filled(K, 9)};
    return x;
}

static void free_tensors(tensors *x) {
    free(x->q);
    free(x->k);
    free(x->v);
    free(x->dout);
    free(x->out);
    free(x->lse);
    free(x->dq);
    free(x->dk);
    free(x->dv);
}

/* The documented order, key by key and query by query. */
static void replay(tensors *want, const tensors *in, const reference_mask *mask, float scale) {
    float *p = malloc(S * sizeof *p);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < S; t++) {
                float maximum = -INFINITY, sum = 0.0f;
                for (int64_t key = 0; key < S; key++) {
                    p[key] = reference_mask_allowed(mask, b, t, key)
                                 ? scale * score(in->q, in->k, b, t, h, key)
                                 : -INFINITY;
                    maximum = p[key] > maximum ? p[key] : maximum;
                }
                float *out = want->out + query_at(b, t, h);
                if (maximum == -INFINITY) {
                    memset(out, 0, DH * sizeof *out);
                    want->lse[(b * H + h) * S + t] = -INFINITY;
                    continue;
                }
                for (int64_t key = 0; key < S; key++) {
                    p[key] = p[key] == -INFINITY ? 0.0f : naive_replay_exp(p[key], maximum);
                    sum += p[key];
                }
                for (int64_t d = 0; d < DH; d++) {
                    float acc = 0.0f;
                    for (int64_t key = 0; key < S; key++) {
                        if (reference_mask_allowed(mask, b, t, key)) {
                            acc = naive_replay_step(acc, p[key] / sum,
                                                    in->v[key_at(b, key, h / (H / HKV)) + d]);
                        }
                    }
                    out[d] = acc;
                }
                want->lse[(b * H + h) * S + t] = maximum + logf(sum);
            }
        }
    }
    free(p);
}

/* ds' of (b, t, h, key) and p, from the saved out and lse of `in`. */
static float score_gradient(const tensors *in, const reference_mask *mask, float scale, int64_t b,
                            int64_t t, int64_t h, int64_t key, float *p) {
    const float lse = in->lse[(b * H + h) * S + t];
    *p = 0.0f;
    if (!reference_mask_allowed(mask, b, t, key) || lse == -INFINITY) {
        return 0.0f;
    }
    *p = naive_replay_exp(scale * score(in->q, in->k, b, t, h, key), lse);
    float dp = 0.0f, delta = 0.0f;
    for (int64_t d = 0; d < DH; d++) {
        dp = naive_replay_step(dp, in->dout[query_at(b, t, h) + d],
                               in->v[key_at(b, key, h / (H / HKV)) + d]);
        delta += in->dout[query_at(b, t, h) + d] * in->out[query_at(b, t, h) + d];
    }
    return *p == 0.0f ? 0.0f : scale * (*p * (dp - delta)); /* an underflow gives 0 */
}

static void replay_backward(tensors *want, const tensors *in, const reference_mask *mask,
                            float scale) {
    float p = 0.0f;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < S; t++) {
            for (int64_t h = 0; h < H; h++) {
                for (int64_t d = 0; d < DH; d++) {
                    float acc = 0.0f;
                    for (int64_t key = 0; key < S; key++) {
                        const float ds = score_gradient(in, mask, scale, b, t, h, key, &p);
                        if (reference_mask_allowed(mask, b, t, key)) {
                            acc = naive_replay_step(acc, ds,
                                                    in->k[key_at(b, key, h / (H / HKV)) + d]);
                        }
                    }
                    want->dq[query_at(b, t, h) + d] += acc;
                }
            }
        }
        for (int64_t key = 0; key < S; key++) {
            for (int64_t kv = 0; kv < HKV; kv++) {
                for (int64_t h = kv * (H / HKV); h < (kv + 1) * (H / HKV); h++) {
                    for (int64_t d = 0; d < DH; d++) {
                        float dk = 0.0f, dv = 0.0f;
                        for (int64_t t = 0; t < S; t++) {
                            const float ds = score_gradient(in, mask, scale, b, t, h, key, &p);
                            if (reference_mask_allowed(mask, b, t, key)) {
                                dv = naive_replay_step(dv, p, in->dout[query_at(b, t, h) + d]);
                                dk = naive_replay_step(dk, ds, in->q[query_at(b, t, h) + d]);
                            }
                        }
                        want->dk[key_at(b, key, kv) + d] += dk;
                        want->dv[key_at(b, key, kv) + d] += dv;
                    }
                }
            }
        }
    }
}

static void expect_same(const float *got, const float *want, int64_t count, const char *what,
                        const char *mask_name) {
    for (int64_t i = 0; i < count; i++) {
        cr_assert(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                  "%s mask, %s: element %lld is %a, the documented order gives %a", mask_name, what,
                  (long long)i, (double)got[i], (double)want[i]);
    }
}

static void check_layer(cpparity_attention_layer layer, const char *name) {
    reference_mask mask;
    make_mask(&mask, layer);
    const float scale = 1.0f / sqrtf((float)DH);
    const int64_t Q = B * S * H * DH, K = B * S * HKV * DH;
    tensors got = make_tensors(), want = make_tensors();
    cr_assert(
        naive_float_attention_forward(got.out, got.lse, got.q, got.k, got.v, &mask, shape, scale));
    replay(&want, &got, &mask, scale);
    expect_same(got.out, want.out, Q, "out", name);
    expect_same(got.lse, want.lse, B * H * S, "lse", name);
    cr_assert(naive_float_attention_backward(got.dq, got.dk, got.dv, got.dout, got.q, got.k, got.v,
                                             got.out, got.lse, &mask, shape, scale));
    replay_backward(&want, &got, &mask, scale);
    expect_same(got.dq, want.dq, Q, "dq (added to its value)", name);
    expect_same(got.dk, want.dk, K, "dk (added to its value)", name);
    expect_same(got.dv, want.dv, K, "dv (added to its value)", name);
    free_tensors(&got);
    free_tensors(&want);
    reference_mask_free(&mask);
}

Test(naive_attention, causal_rows_are_the_documented_sums_bit_for_bit) {
    check_layer((cpparity_attention_layer){CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
                "causal");
}

Test(naive_attention, sliding_window_rows_are_the_documented_sums_bit_for_bit) {
    check_layer(
        (cpparity_attention_layer){CPPARITY_LAYER_SLIDING, 37, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        "sliding W=37");
}

Test(naive_attention, chunked_rows_are_the_documented_sums_bit_for_bit) {
    check_layer(
        (cpparity_attention_layer){CPPARITY_LAYER_CHUNKED, 0, 50, CPPARITY_CHUNK_ORIGIN_ROW},
        "chunked C=50");
}

Test(naive_attention, same_bits_on_one_and_three_threads) {
    reference_mask mask;
    make_mask(&mask,
              (cpparity_attention_layer){CPPARITY_LAYER_SLIDING, 90, 0, CPPARITY_CHUNK_ORIGIN_ROW});
    const float scale = 0.2f;
    const int64_t Q = B * S * H * DH, K = B * S * HKV * DH;
    tensors runs[2];
    const int threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        reference_set_threads(threads[i]);
        runs[i] = make_tensors();
        tensors *x = &runs[i];
        cr_assert(
            naive_float_attention_forward(x->out, x->lse, x->q, x->k, x->v, &mask, shape, scale));
        cr_assert(naive_float_attention_backward(x->dq, x->dk, x->dv, x->dout, x->q, x->k, x->v,
                                                 x->out, x->lse, &mask, shape, scale));
    }
    reference_set_threads(1);
    cr_assert(memcmp(runs[0].out, runs[1].out, (size_t)Q * sizeof(float)) == 0, "out differs");
    cr_assert(memcmp(runs[0].lse, runs[1].lse, (size_t)(B * H * S) * sizeof(float)) == 0,
              "lse differs");
    cr_assert(memcmp(runs[0].dq, runs[1].dq, (size_t)Q * sizeof(float)) == 0, "dq differs");
    cr_assert(memcmp(runs[0].dk, runs[1].dk, (size_t)K * sizeof(float)) == 0, "dk differs");
    cr_assert(memcmp(runs[0].dv, runs[1].dv, (size_t)K * sizeof(float)) == 0, "dv differs");
    free_tensors(&runs[0]);
    free_tensors(&runs[1]);
    reference_mask_free(&mask);
}

/* Tokens [first, end) of every batch row of a (B, S, width) tensor into (B, end − first, width),
 * or back (to_window false). */
static void copy_window(float *window, float *whole, int64_t width, int64_t first, int64_t end,
                        bool to_window) {
    for (int64_t b = 0; b < B; b++) {
        float *in_window = window + b * (end - first) * width;
        float *in_whole = whole + (b * S + first) * width;
        const size_t bytes = (size_t)((end - first) * width) * sizeof(float);
        memcpy(to_window ? in_window : in_whole, to_window ? in_whole : in_window, bytes);
    }
}

static float *window_of(const float *whole, int64_t width, int64_t first, int64_t end) {
    float *window = calloc((size_t)(B * (end - first) * width) + 1, sizeof(float));
    cr_assert(window != NULL);
    copy_window(window, (float *)whole, width, first, end, true);
    return window;
}

/* Long context: one 64-token block at a time, each call holding only the tokens the block's
 * allowed pairs reach (reference_attention_keys_needed / _queries_needed), gives the same bits as
 * the whole call. */
static void check_windows(cpparity_attention_layer layer, const char *name) {
    reference_mask mask;
    make_mask(&mask, layer);
    const float scale = 1.0f / sqrtf((float)DH);
    const int64_t Q = B * S * H * DH, K = B * S * HKV * DH, QW = H * DH, KW = HKV * DH;
    tensors whole = make_tensors(), windowed = make_tensors();
    cr_assert(naive_float_attention_forward(whole.out, whole.lse, whole.q, whole.k, whole.v, &mask,
                                            shape, scale));
    cr_assert(naive_float_attention_backward(whole.dq, whole.dk, whole.dv, whole.dout, whole.q,
                                             whole.k, whole.v, whole.out, whole.lse, &mask, shape,
                                             scale));
    float *delta = calloc(B * H * S, sizeof(float));
    cpparity_error error;
    for (int pass = 0; pass < 2; pass++) { /* the queries' side, then the keys' */
        for (int64_t first = 0; first < S; first += 64) {
            const int64_t end = first + 64 < S ? first + 64 : S;
            int64_t other_first = 0, other_end = 0;
            cr_assert_eq(pass == 0 ? reference_attention_keys_needed(
                                         &mask, first, end, &other_first, &other_end, &error)
                                   : reference_attention_queries_needed(
                                         &mask, first, end, &other_first, &other_end, &error),
                         CPPARITY_OK, "%s", error.message);
            const int64_t qf = pass == 0 ? first : other_first, qe = pass == 0 ? end : other_end;
            const int64_t kf = pass == 0 ? other_first : first, ke = pass == 0 ? other_end : end;
            const naive_attention_window w = {qf, qe, kf, ke, first, end};
            float *q = window_of(whole.q, QW, qf, qe), *dout = window_of(whole.dout, QW, qf, qe);
            float *k = window_of(whole.k, KW, kf, ke), *v = window_of(whole.v, KW, kf, ke);
            if (pass == 0) {
                float *out = window_of(windowed.out, QW, qf, qe);
                float *dq = window_of(windowed.dq, QW, qf, qe);
                cr_assert_eq(naive_float_attention_forward_window(out, windowed.lse, q, k, v, &mask,
                                                                  shape, scale, w, &error),
                             CPPARITY_OK, "%s", error.message);
                cr_assert_eq(naive_float_attention_backward_queries_window(dq, delta, dout, q, k, v,
                                                                           out, windowed.lse, &mask,
                                                                           shape, scale, w, &error),
                             CPPARITY_OK, "%s", error.message);
                copy_window(out, windowed.out, QW, qf, qe, false);
                copy_window(dq, windowed.dq, QW, qf, qe, false);
                free(out), free(dq);
            } else {
                float *dk = window_of(windowed.dk, KW, kf, ke);
                float *dv = window_of(windowed.dv, KW, kf, ke);
                cr_assert_eq(naive_float_attention_backward_keys_window(dk, dv, dout, q, k, v,
                                                                        windowed.lse, delta, &mask,
                                                                        shape, scale, w, &error),
                             CPPARITY_OK, "%s", error.message);
                copy_window(dk, windowed.dk, KW, kf, ke, false);
                copy_window(dv, windowed.dv, KW, kf, ke, false);
                free(dk), free(dv);
            }
            free(q), free(dout), free(k), free(v);
        }
    }
    cr_expect(memcmp(whole.out, windowed.out, (size_t)Q * sizeof(float)) == 0, "%s: out", name);
    cr_expect(memcmp(whole.lse, windowed.lse, (size_t)(B * H * S) * sizeof(float)) == 0, "%s: lse",
              name);
    cr_expect(memcmp(whole.dq, windowed.dq, (size_t)Q * sizeof(float)) == 0, "%s: dq", name);
    cr_expect(memcmp(whole.dk, windowed.dk, (size_t)K * sizeof(float)) == 0, "%s: dk", name);
    cr_expect(memcmp(whole.dv, windowed.dv, (size_t)K * sizeof(float)) == 0, "%s: dv", name);
    /* a window without the keys its queries reach is refused, not read out of bounds */
    const naive_attention_window short_window = {64, 128, 64, 128, 64, 128};
    if (layer.type != CPPARITY_LAYER_CHUNKED) {
        cr_expect_eq(naive_float_attention_forward_window(windowed.out, windowed.lse, whole.q,
                                                          whole.k, whole.v, &mask, shape, scale,
                                                          short_window, &error),
                     CPPARITY_ERROR_INPUT, "%s", name);
    }
    free(delta);
    free_tensors(&whole);
    free_tensors(&windowed);
    reference_mask_free(&mask);
}

Test(naive_attention, by_windows_of_64_tokens__same_bits_as_the_whole_call) {
    check_windows((cpparity_attention_layer){CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
                  "causal");
    check_windows(
        (cpparity_attention_layer){CPPARITY_LAYER_SLIDING, 37, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        "sliding W=37");
    check_windows(
        (cpparity_attention_layer){CPPARITY_LAYER_CHUNKED, 0, 50, CPPARITY_CHUNK_ORIGIN_ROW},
        "chunked C=50");
}
