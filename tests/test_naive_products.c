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
