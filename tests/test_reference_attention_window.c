/*
 * test_reference_attention_window.c — the float64 reference attention computed one block of
 * tokens at a time (reference_attention_forward_window, _backward_queries_window,
 * _backward_keys_window), each call holding only the tokens its block's allowed pairs reach, gives
 * the same bits as the whole call: out, lse, dq, dk, dv. This is what lets an attention-level
 * item at 131072 tokens hold O(block + window) of the sequence (docs/architecture.md). Bitwise,
 * so no tolerance. Also: the windows a sliding mask needs are narrow, and a window too small is
 * refused rather than read out of bounds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attention.h"
#include "reference/threads.h"
#include "tests/support/attention_fixture.h"

typedef struct outputs {
    double *out, *lse, *dq, *dk, *dv;
} outputs;

static outputs outputs_new(const attention_fixture *f) {
    const reference_attention_shape s = f->shape;
    const int64_t queries = fixture_query_elements(f), keys = fixture_key_elements(f);
    const int64_t rows = s.batch * s.heads * s.seq_len;
    outputs o = {calloc((size_t)queries, sizeof(double)), calloc((size_t)rows, sizeof(double)),
                 calloc((size_t)queries, sizeof(double)), calloc((size_t)keys, sizeof(double)),
                 calloc((size_t)keys, sizeof(double))};
    cr_assert(o.out && o.lse && o.dq && o.dk && o.dv);
    return o;
}

static void outputs_free(outputs *o) {
    free(o->out);
    free(o->lse);
    free(o->dq);
    free(o->dk);
    free(o->dv);
}

/* Tokens [first, end) of every batch row of a (B, S, width) tensor into (B, end − first, width),
 * or back (to_window false). */
static void copy_window(double *window, double *whole, const reference_attention_shape *s,
                        int64_t width, int64_t first, int64_t end, bool to_window) {
    for (int64_t b = 0; b < s->batch; b++) {
        double *in_window = window + b * (end - first) * width;
        double *in_whole = whole + (b * s->seq_len + first) * width;
        const size_t bytes = (size_t)((end - first) * width) * sizeof(double);
        if (bytes > 0) {
            memcpy(to_window ? in_window : in_whole, to_window ? in_whole : in_window, bytes);
        }
    }
}

/* A window tensor of tokens [first, end) of source (B, S, width); caller frees. */
static double *window_of(const double *source, const reference_attention_shape *s, int64_t width,
                         int64_t first, int64_t end) {
    double *window = calloc((size_t)(s->batch * (end - first) * width) + 1, sizeof(double));
    cr_assert(window != NULL);
    copy_window(window, (double *)source, s, width, first, end, true);
    return window;
}

/* The whole computation, then the same one block of `block` tokens at a time. */
static void expect_windows_give_the_same_bits(const attention_fixture *f, int64_t block,
                                              const char *what) {
    const reference_attention_shape s = f->shape;
    const int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
    cpparity_error error;
    outputs whole = outputs_new(f), windowed = outputs_new(f);
    cr_assert_eq(reference_attention_forward(whole.out, whole.lse, f->q, f->k, f->v, &f->mask, s,
                                             f->scale, &error),
                 CPPARITY_OK, "%s", error.message);
    cr_assert_eq(reference_attention_backward(whole.dq, whole.dk, whole.dv, f->dout, f->q, f->k,
                                              f->v, whole.out, whole.lse, &f->mask, s, f->scale,
                                              &error),
                 CPPARITY_OK, "%s", error.message);
    double *delta = calloc((size_t)(s.batch * s.heads * s.seq_len), sizeof(double));
    cr_assert(delta != NULL);
    /* the queries' side, block by block: out, lse, D, dq */
    for (int64_t first = 0; first < s.seq_len; first += block) {
        const int64_t end = first + block < s.seq_len ? first + block : s.seq_len;
        int64_t key_first = 0, key_end = 0;
        cr_assert_eq(
            reference_attention_keys_needed(&f->mask, first, end, &key_first, &key_end, &error),
            CPPARITY_OK, "%s", error.message);
        const reference_attention_window w = {first, end, key_first, key_end, first, end};
        double *q = window_of(f->q, &s, qw, first, end);
        double *dout = window_of(f->dout, &s, qw, first, end);
        double *k = window_of(f->k, &s, kw, key_first, key_end);
        double *v = window_of(f->v, &s, kw, key_first, key_end);
        double *out = window_of(windowed.out, &s, qw, first, end);
        double *dq = window_of(windowed.dq, &s, qw, first, end);
        cr_assert_eq(reference_attention_forward_window(out, windowed.lse, q, k, v, &f->mask, s,
                                                        f->scale, w, &error),
                     CPPARITY_OK, "%s: %s", what, error.message);
        cr_assert_eq(reference_attention_backward_queries_window(dq, delta, dout, q, k, v, out,
                                                                 windowed.lse, &f->mask, s,
                                                                 f->scale, w, &error),
                     CPPARITY_OK, "%s: %s", what, error.message);
        copy_window(out, windowed.out, &s, qw, first, end, false);
        copy_window(dq, windowed.dq, &s, qw, first, end, false);
        free(q), free(dout), free(k), free(v), free(out), free(dq);
    }
    /* the keys' side, from every query's lse and D */
    for (int64_t first = 0; first < s.seq_len; first += block) {
        const int64_t end = first + block < s.seq_len ? first + block : s.seq_len;
        int64_t query_first = 0, query_end = 0;
        cr_assert_eq(reference_attention_queries_needed(&f->mask, first, end, &query_first,
                                                        &query_end, &error),
                     CPPARITY_OK, "%s", error.message);
        const reference_attention_window w = {query_first, query_end, first, end, first, end};
        double *q = window_of(f->q, &s, qw, query_first, query_end);
        double *dout = window_of(f->dout, &s, qw, query_first, query_end);
        double *k = window_of(f->k, &s, kw, first, end);
        double *v = window_of(f->v, &s, kw, first, end);
        double *dk = window_of(windowed.dk, &s, kw, first, end);
        double *dv = window_of(windowed.dv, &s, kw, first, end);
        cr_assert_eq(reference_attention_backward_keys_window(dk, dv, dout, q, k, v, windowed.lse,
                                                              delta, &f->mask, s, f->scale, w,
                                                              &error),
                     CPPARITY_OK, "%s: %s", what, error.message);
        copy_window(dk, windowed.dk, &s, kw, first, end, false);
        copy_window(dv, windowed.dv, &s, kw, first, end, false);
        free(q), free(dout), free(k), free(v), free(dk), free(dv);
    }
    const int64_t queries = fixture_query_elements(f), keys = fixture_key_elements(f);
    const struct {
        const char *name;
        const double *expected, *actual;
        int64_t count;
    } tensors[] = {{"out", whole.out, windowed.out, queries},
                   {"lse", whole.lse, windowed.lse, s.batch * s.heads * s.seq_len},
                   {"dq", whole.dq, windowed.dq, queries},
                   {"dk", whole.dk, windowed.dk, keys},
                   {"dv", whole.dv, windowed.dv, keys}};
    for (size_t t = 0; t < sizeof tensors / sizeof *tensors; t++) {
        int64_t at = -1;
        for (int64_t i = 0; i < tensors[t].count && at < 0; i++) {
            at = memcmp(&tensors[t].expected[i], &tensors[t].actual[i], sizeof(double)) != 0 ? i
                                                                                             : -1;
        }
        cr_expect(at < 0,
                  "%s (type %d W=%lld C=%lld origin %d, S=%lld, tile %lld, block %lld): %s[%lld] "
                  "is %a whole, %a by windows",
                  what, (int)f->layer.type, (long long)f->layer.window,
                  (long long)f->layer.chunk_size, (int)f->layer.chunk_origin, (long long)s.seq_len,
                  (long long)f->mask.block_size, (long long)block, tensors[t].name, (long long)at,
                  at < 0 ? 0.0 : tensors[t].expected[at], at < 0 ? 0.0 : tensors[t].actual[at]);
    }
    free(delta);
    outputs_free(&whole);
    outputs_free(&windowed);
}

/* every mask type; S = 67 with 8-token tiles, padding and packed documents (attention_fixture.h) */
static const cpparity_attention_layer *const every_mask = attention_fixture_every_mask;
static const test_row_layout *const padded_and_packed = attention_fixture_padded_and_packed_67;

Test(reference_attention_window, padding_packed_documents_every_mask__same_bits_as_the_whole_call) {
    const reference_attention_shape shape = {2, 67, 6, 2, 8};
    const int64_t blocks[] = {8, 16, 24, 64}; /* one tile, two, three, all but the last 3 tokens */
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], padded_and_packed, 8, 900 + m);
        for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
            expect_windows_give_the_same_bits(&fixture, blocks[b], "padded and packed");
        }
        attention_fixture_free(&fixture);
    }
}

Test(reference_attention_window, random_layouts_on_two_threads__same_bits_as_the_whole_call) {
    const reference_attention_shape shape = {2, 300, 4, 1, 16};
    reference_set_threads(2);
    for (size_t m = 0; m < ATTENTION_FIXTURE_MASKS; m++) {
        attention_fixture fixture;
        attention_fixture_init(&fixture, shape, every_mask[m], NULL, 16, 920 + m);
        expect_windows_give_the_same_bits(&fixture, 64, "random layouts");
        attention_fixture_free(&fixture);
    }
    reference_set_threads(1);
}

Test(reference_attention_window, sliding_mask__needs_only_the_block_and_its_window) {
    const reference_attention_shape shape = {1, 256, 2, 1, 4};
    const cpparity_attention_layer sliding = {CPPARITY_LAYER_SLIDING, 20, 0,
                                              CPPARITY_CHUNK_ORIGIN_ROW};
    attention_fixture fixture;
    const test_row_layout plain[] = {{0, 1, {256}, 0, {0}}};
    attention_fixture_init(&fixture, shape, sliding, plain, 16, 940);
    cpparity_error error;
    int64_t first = -1, end = -1;
    /* queries [128, 160) reach keys from 128 − 19 = 109: the tile from 96 */
    cr_assert_eq(reference_attention_keys_needed(&fixture.mask, 128, 160, &first, &end, &error),
                 CPPARITY_OK);
    cr_expect(first == 96 && end == 160, "keys [%lld, %lld)", (long long)first, (long long)end);
    /* keys [128, 160) are seen by queries up to 159 + 19 = 178: the tile ending at 192 */
    cr_assert_eq(reference_attention_queries_needed(&fixture.mask, 128, 160, &first, &end, &error),
                 CPPARITY_OK);
    cr_expect(first == 128 && end == 192, "queries [%lld, %lld)", (long long)first, (long long)end);
    /* off the tile edges */
    cr_expect_eq(reference_attention_keys_needed(&fixture.mask, 120, 160, &first, &end, &error),
                 CPPARITY_ERROR_INPUT);
    attention_fixture_free(&fixture);
}

Test(reference_attention_window, a_window_missing_keys_it_reaches__is_refused) {
    const reference_attention_shape shape = {1, 128, 2, 1, 4};
    const cpparity_attention_layer causal = {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW};
    attention_fixture fixture;
    const test_row_layout plain[] = {{0, 1, {128}, 0, {0}}};
    attention_fixture_init(&fixture, shape, causal, plain, 16, 950);
    double *out = calloc(32 * 8, sizeof(double)), *lse = calloc(2 * 128, sizeof(double));
    cpparity_error error;
    /* queries [64, 96) of a causal mask reach keys [0, 96): a window from 32 lacks [0, 32) */
    const reference_attention_window w = {64, 96, 32, 96, 64, 96};
    cr_expect_eq(reference_attention_forward_window(out, lse, fixture.q, fixture.k, fixture.v,
                                                    &fixture.mask, shape, fixture.scale, w, &error),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "need keys [0, 96)") != NULL, "%s", error.message);
    free(out);
    free(lse);
    attention_fixture_free(&fixture);
}
