/*
 * test_naive_products.c — the naive baseline's float32 products (harness/judging/naive_products.h)
 * are the textbook sums they claim to be: every element equal, bit for bit, to one accumulator
 * adding the products in increasing contraction index (fused where the CPU fuses), then stored or
 * added once; for the three products of a linear layer, at sizes that are not multiples of any
 * tile (rows, columns, depth past one panel), and the same bits at 1 and 3 threads.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/judging/naive_products.h"
#include "tests/support/naive_replay.h"
#include "reference/threads.h"

#define N 67  /* rows: one tile and a part, and a remainder below four */
#define I 300 /* in features: past one 256-deep panel */
#define O 35  /* out features: two 16-wide micro-tiles and a part */

static void expect_same(const float *got, const float *want, int64_t count, const char *what) {
    for (int64_t i = 0; i < count; i++) {
        cr_assert(memcmp(&got[i], &want[i], sizeof got[i]) == 0, "%s: element %lld is %a, not %a",
                  what, (long long)i, (double)got[i], (double)want[i]);
    }
}

Test(naive_products, linear_products__are_the_textbook_sums_bit_for_bit) {
    float *in = naive_replay_filled(N * I, 1), *weight = naive_replay_filled(O * I, 2),
          *dout = naive_replay_filled(N * O, 3);
    float *out = malloc(N * O * sizeof(float)), *want = malloc(N * I * O * sizeof(float));
    /* forward: out[n][o] = Σ_i in[n][i] · weight[o][i] */
    cr_assert(naive_linear_forward(out, in, weight, N, I, O));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; o < O; o++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < I; i++) {
                acc = naive_replay_step(acc, in[n * I + i], weight[o * I + i]);
            }
            want[n * O + o] = acc;
        }
    }
    expect_same(out, want, N * O, "forward");
    /* input gradient: din[n][i] += Σ_o dout[n][o] · weight[o][i], onto a non-zero din */
    float *din = naive_replay_filled(N * I, 4);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t i = 0; i < I; i++) {
            float acc = 0.0f;
            for (int64_t o = 0; o < O; o++) {
                acc = naive_replay_step(acc, dout[n * O + o], weight[o * I + i]);
            }
            want[n * I + i] = din[n * I + i] + acc;
        }
    }
    cr_assert(naive_linear_input_gradient(din, dout, weight, N, I, O));
    expect_same(din, want, N * I, "input gradient");
    /* weight gradient: dweight[o][i] += Σ_n dout[n][o] · in[n][i] */
    float *dweight = naive_replay_filled(O * I, 5);
    for (int64_t o = 0; o < O; o++) {
        for (int64_t i = 0; i < I; i++) {
            float acc = 0.0f;
            for (int64_t n = 0; n < N; n++) {
                acc = naive_replay_step(acc, dout[n * O + o], in[n * I + i]);
            }
            want[o * I + i] = dweight[o * I + i] + acc;
        }
    }
    cr_assert(naive_linear_weight_gradient(dweight, dout, in, N, I, O));
    expect_same(dweight, want, O * I, "weight gradient");
    free(in);
    free(weight);
    free(dout);
    free(out);
    free(want);
    free(din);
    free(dweight);
}

/* want (rows × columns) = start + Σ_k left[r][k] · right[k][c] over k in [k0, k1) (left of row
 * stride I), the
 * documented order continued from start (0 or the values given). */
static void replay(float *want, const float *start, const float *left, const float *right,
                   int64_t rows, int64_t columns, int64_t k0, int64_t k1) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < columns; c++) {
            float acc = start != NULL ? start[r * columns + c] : 0.0f;
            for (int64_t k = k0; k < k1; k++) {
                acc = naive_replay_step(acc, left[r * I + k], right[k * columns + c]);
            }
            want[r * columns + c] = acc;
        }
    }
}

/* A product within one panel (every whole micro-tile read from and written to the result
 * directly), one resumed in two parts (the second from the first's partial sums), and products
 * over no contraction index. */
Test(naive_products, single_panel_resumed_and_empty_products__are_the_textbook_sums) {
    enum { R = 67, C = 48, K = 100 }; /* C: three whole micro-tiles; K: within one panel */
    float *left = naive_replay_filled(R * I, 8), *right = naive_replay_filled(I * C, 9);
    float *got = naive_replay_filled(R * C, 10), *want = malloc(R * C * sizeof(float));
    const naive_matrix l = {left, I, 1}, r = {right, C, 1};
    cr_assert(naive_product(got, C, l, r, R, C, K, false));
    replay(want, NULL, left, right, R, C, 0, K);
    expect_same(got, want, R * C, "one panel");
    /* resumed: indices [0, 137) then [137, I) (the second part crosses a panel's edge), ended
     * with naive_product_finish: the sum over [0, I) in one go, from 0 */
    float *start = naive_replay_filled(R * C, 11);
    memcpy(got, start, R * C * sizeof(float));
    cr_assert(naive_product_resume(got, C, l, r, R, C, 137));
    replay(want, start, left, right, R, C, 0, 137);
    expect_same(got, want, R * C, "resumed, first part");
    memset(got, 0, R * C * sizeof(float));
    cr_assert(naive_product_resume(got, C, l, r, R, C, 137));
    cr_assert(naive_product_resume(got, C, (naive_matrix){left + 137, I, 1},
                                   (naive_matrix){right + 137 * C, C, 1}, R, C, I - 137));
    naive_product_finish(got, R * C);
    replay(want, NULL, left, right, R, C, 0, I);
    expect_same(got, want, R * C, "resumed in two parts");
    /* no contraction index: a set gives zeros, an add or a resume leaves the result */
    memcpy(got, start, R * C * sizeof(float));
    cr_assert(naive_product(got, C, l, r, R, C, 0, true));
    expect_same(got, start, R * C, "empty add");
    cr_assert(naive_product_resume(got, C, l, r, R, C, 0));
    expect_same(got, start, R * C, "empty resume");
    cr_assert(naive_product(got, C, l, r, R, C, 0, false));
    for (int64_t i = 0; i < R * C; i++) {
        cr_assert(got[i] == 0.0f && !signbit(got[i]), "empty set: element %lld is %a", (long long)i,
                  (double)got[i]);
    }
    free(left);
    free(right);
    free(got);
    free(want);
    free(start);
}

Test(naive_products, thread_count__same_bits) {
    float *in = naive_replay_filled(N * I, 6), *weight = naive_replay_filled(O * I, 7);
    float *one = malloc(N * O * sizeof(float)), *three = malloc(N * O * sizeof(float));
    reference_set_threads(1);
    cr_assert(naive_linear_forward(one, in, weight, N, I, O));
    reference_set_threads(3);
    cr_assert(naive_linear_forward(three, in, weight, N, I, O));
    reference_set_threads(1);
    expect_same(three, one, N * O, "3 threads against 1");
    free(in);
    free(weight);
    free(one);
    free(three);
}
