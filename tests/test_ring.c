/*
 * test_ring.c — ring attention (distributed/cp/ring.h) and what it stands on: the layouts of
 * distributed/cp/shard.h (zigzag, round-robin, and the reorder between rank order and position
 * order), the log-sum-exp merge (ring_merge.h), the CPU kernel's block calls (kernel.h ABI 3), and
 * ring attention itself on 1 to 4 local ranks against the kernel's whole-sequence call, with the
 * blocks a causal mask lets it skip.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/comm/comm_local.h"
#include "distributed/cp/ring.h"
#include "distributed/cp/ring_merge.h"
#include "distributed/cp/shard.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/mask_description.h"
#include "tests/support/attention_fixture.h"

/* Ring and block results against the whole-sequence call, both float32 from the same inputs:
 * they differ only in the order of float32 sums (a merge per block instead of per tile), a few
 * roundings of 6e-8 on values of order 1; a wrong block, a wrong merge or a lost step is order
 * 1e-1. */
#define BLOCK_TOLERANCE 2e-5

static const cpparity_layout all_layouts[] = {CPPARITY_LAYOUT_CONTIGUOUS, CPPARITY_LAYOUT_ZIGZAG,
                                              CPPARITY_LAYOUT_ROUND_ROBIN};

Test(shard_layouts, every_layout__partitions_a_minimally_padded_sequence) {
    const int64_t lengths[] = {1, 5, 16, 17, 23};
    for (size_t k = 0; k < 3; k++) {
        for (size_t s = 0; s < sizeof lengths / sizeof *lengths; s++) {
            for (int64_t cp = 1; cp <= 4; cp++) {
                const cpparity_layout kind = all_layouts[k];
                const int64_t S = lengths[s];
                const shard_layout layout = shard_layout_make(S, cp, 0, kind);
                const int64_t Sp = layout.padded_seq_len, L = layout.local_len;
                const int64_t multiple = kind == CPPARITY_LAYOUT_ZIGZAG ? 2 * cp : cp;
                cr_expect(Sp >= S && Sp - S < multiple && Sp % multiple == 0 && Sp == L * cp,
                          "layout %d S %lld cp %lld: padded to %lld", (int)kind, (long long)S,
                          (long long)cp, (long long)Sp);
                char *seen = calloc((size_t)Sp, 1);
                for (int64_t r = 0; r < cp; r++) {
                    const shard_layout mine = shard_layout_make(S, cp, r, kind);
                    cr_expect_eq(mine.offset, shard_position(&layout, r, 0));
                    for (int64_t t = 0; t < L; t++) {
                        const int64_t position = shard_position(&layout, r, t);
                        cr_assert(position >= 0 && position < Sp && !seen[position],
                                  "layout %d cp %lld: rank %lld row %lld at %lld", (int)kind,
                                  (long long)cp, (long long)r, (long long)t, (long long)position);
                        seen[position] = 1;
                        if (t > 0) { /* rows in increasing position order */
                            cr_expect_gt(position, shard_position(&layout, r, t - 1));
                        }
                    }
                }
                free(seen);
            }
        }
    }
}

Test(shard_layouts, zigzag_and_round_robin__deal_the_documented_positions) {
    /* zigzag, S 8, cp 2: chunks of 2; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2 */
    const shard_layout zigzag = shard_layout_make(8, 2, 0, CPPARITY_LAYOUT_ZIGZAG);
    const int64_t zigzag_expected[2][4] = {{0, 1, 6, 7}, {2, 3, 4, 5}};
    /* round-robin, S 9, cp 3: token t on rank t mod 3 */
    const shard_layout round_robin = shard_layout_make(9, 3, 0, CPPARITY_LAYOUT_ROUND_ROBIN);
    const int64_t round_robin_expected[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
    for (int64_t r = 0; r < 2; r++) {
        for (int64_t t = 0; t < 4; t++) {
            cr_expect_eq(shard_position(&zigzag, r, t), zigzag_expected[r][t]);
        }
    }
    for (int64_t r = 0; r < 3; r++) {
        for (int64_t t = 0; t < 3; t++) {
            cr_expect_eq(shard_position(&round_robin, r, t), round_robin_expected[r][t]);
        }
    }
    /* zigzag of S 5 at cp 2 pads to 8: the padding is the tail of chunk 3, on rank 0 */
    const shard_layout padded = shard_layout_make(5, 2, 0, CPPARITY_LAYOUT_ZIGZAG);
    cr_expect_eq(padded.padded_seq_len, 8);
    cr_expect_eq(shard_position(&padded, 0, 3), 7);
}

Test(shard_layouts, zigzag_chunk_swap_fault__deals_rank_1_its_chunks_in_the_wrong_order) {
    shard_layout layout = shard_layout_make(8, 2, 0, CPPARITY_LAYOUT_ZIGZAG);
    layout.fault = CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP;
    cr_expect_eq(shard_position(&layout, 0, 0), 0, "rank 0 as it should be");
    cr_expect_eq(shard_position(&layout, 1, 0), 4, "rank 1's second chunk first");
    cr_expect_eq(shard_position(&layout, 1, 2), 2);
}

Test(shard_layouts, reorder__moves_rank_order_to_position_order_and_back) {
    for (size_t k = 0; k < 3; k++) {
        const shard_layout layout = shard_layout_make(12, 3, 0, all_layouts[k]);
        const int64_t B = 2, W = 3, Sp = layout.padded_seq_len, L = layout.local_len;
        float *values = malloc((size_t)(B * Sp * W) * sizeof(float));
        float *scratch = malloc((size_t)(B * Sp * W) * sizeof(float));
        for (int64_t b = 0; b < B; b++) { /* rank order: row i·L + t is rank i's row t */
            for (int64_t i = 0; i < 3; i++) {
                for (int64_t t = 0; t < L; t++) {
                    for (int64_t w = 0; w < W; w++) {
                        values[((b * Sp + i * L + t) * W) + w] =
                            (float)(1000 * b + 10 * shard_position(&layout, i, t) + w);
                    }
                }
            }
        }
        shard_reorder(&layout, values, B, W, scratch, true);
        for (int64_t b = 0; b < B; b++) {
            for (int64_t p = 0; p < Sp; p++) {
                for (int64_t w = 0; w < W; w++) {
                    cr_assert_eq(values[(b * Sp + p) * W + w], (float)(1000 * b + 10 * p + w),
                                 "layout %d: position %lld", (int)all_layouts[k], (long long)p);
                }
            }
        }
        shard_reorder(&layout, values, B, W, scratch, false);
        for (int64_t i = 0; i < 3; i++) {
            cr_expect_eq(values[(i * L) * W], (float)(10 * shard_position(&layout, i, 0)));
        }
        free(values);
        free(scratch);
    }
}

/* The softmax output and lse of scores[first, last) over values (Dh 3), in float32. */
static void partial_softmax(float *out, float *lse, const float *scores, const float (*values)[3],
                            int first, int last) {
    float maximum = -INFINITY, sum = 0.0f;
    for (int i = first; i < last; i++) {
        maximum = scores[i] > maximum ? scores[i] : maximum;
    }
    memset(out, 0, 3 * sizeof *out);
    for (int i = first; i < last; i++) {
        const float p = expf(scores[i] - maximum);
        sum += p;
        for (int d = 0; d < 3; d++) {
            out[d] += p * values[i][d];
        }
    }
    for (int d = 0; d < 3; d++) {
        out[d] /= sum;
    }
    *lse = maximum + logf(sum);
}

Test(ring_merge, two_blocks_merged__equal_the_softmax_over_both) {
    const float scores[8] = {0.3f, -1.2f, 2.5f, 0.0f, 1.1f, -0.4f, 3.0f, 0.7f};
    const float values[8][3] = {{1, 2, 3}, {-1, 0, 1}, {0.5f, 0.5f, 0}, {2, -2, 1},
                                {0, 1, 0}, {3, 0, -1}, {1, 1, 1},       {-2, 0.5f, 2}};
    float whole[3], whole_lse, first[3], first_lse, second[3], second_lse;
    partial_softmax(whole, &whole_lse, scores, values, 0, 8);
    partial_softmax(first, &first_lse, scores, values, 0, 3);
    partial_softmax(second, &second_lse, scores, values, 3, 8);
    /* merged from an empty start, as a ring step does: out 0, lse −∞ */
    float out[3] = {0, 0, 0}, lse = -INFINITY;
    ring_merge_row(out, &lse, first, first_lse, 3, CPPARITY_FAULT_NONE);
    for (int d = 0; d < 3; d++) {
        cr_expect_eq(out[d], first[d], "an empty side weighs nothing");
    }
    ring_merge_row(out, &lse, second, second_lse, 3, CPPARITY_FAULT_NONE);
    /* float32 softmax over 8 terms: a few roundings of 6e-8 */
    for (int d = 0; d < 3; d++) {
        cr_expect_float_eq(out[d], whole[d], 1e-6, "out[%d] %g vs %g", d, out[d], whole[d]);
    }
    cr_expect_float_eq(lse, whole_lse, 1e-6);
    /* a block with no allowed key changes nothing; two of them leave out 0, lse −∞ */
    const float nothing[3] = {0, 0, 0};
    ring_merge_row(out, &lse, nothing, -INFINITY, 3, CPPARITY_FAULT_NONE);
    cr_expect_float_eq(out[0], whole[0], 1e-6);
    float empty[3] = {0, 0, 0}, empty_lse = -INFINITY;
    ring_merge_row(empty, &empty_lse, nothing, -INFINITY, 3, CPPARITY_FAULT_NONE);
    cr_expect(empty[0] == 0.0f && isinf(empty_lse) && empty_lse < 0);
    /* each planted merge fault moves the output far past float32 noise (order 1e-1) */
    const cpparity_fault faults[] = {CPPARITY_FAULT_RING_MERGE_MAX,
                                     CPPARITY_FAULT_RING_MERGE_STEP_LSE};
    for (size_t f = 0; f < 2; f++) {
        float wrong[3] = {0, 0, 0}, wrong_lse = -INFINITY;
        ring_merge_row(wrong, &wrong_lse, first, first_lse, 3, faults[f]);
        ring_merge_row(wrong, &wrong_lse, second, second_lse, 3, faults[f]);
        double difference = 0.0;
        for (int d = 0; d < 3; d++) {
            difference += fabs((double)wrong[d] - whole[d]);
        }
        cr_expect_gt(difference, 1e-2, "fault %s changed the output by %g only",
                     cpparity_fault_name(faults[f]), difference);
    }
}

/* One attention problem in float32, with its whole-sequence results from the CPU kernel. */
typedef struct problem {
    attention_fixture fixture;
    mask_storage storage;
    cpparity_mask_description mask;
    cpparity_attention_dims dims;
    float scale;
    float *q, *k, *v, *dout;              /* inputs */
    float *out, *lse, *dq, *dk, *dv;      /* the whole-sequence call's results */
    int64_t query_elements, key_elements; /* per whole tensor */
} problem;

static float *rounded(const double *values, int64_t count) {
    float *result = malloc((size_t)count * sizeof(float));
    for (int64_t i = 0; i < count; i++) {
        result[i] = (float)values[i];
    }
    return result;
}

/* rows: NULL for random padding and documents from the seed. */
static void problem_init_rows(problem *p, cpparity_attention_layer layer,
                              const test_row_layout *rows, uint64_t seed) {
    const reference_attention_shape shape = {2, 24, 4, 2, 8};
    attention_fixture_init(&p->fixture, shape, layer, rows, 4, seed);
    cr_assert_eq(mask_storage_build(&p->storage, shape.batch, shape.seq_len,
                                    p->fixture.attention_mask, p->fixture.position_ids, NULL),
                 CPPARITY_OK);
    p->mask = mask_storage_describe(&p->storage, layer);
    p->dims = (cpparity_attention_dims){shape.batch, shape.seq_len, shape.heads, shape.kv_heads,
                                        shape.head_dim};
    p->scale = (float)p->fixture.scale;
    p->query_elements = fixture_query_elements(&p->fixture);
    p->key_elements = fixture_key_elements(&p->fixture);
    p->q = rounded(p->fixture.q, p->query_elements);
    p->k = rounded(p->fixture.k, p->key_elements);
    p->v = rounded(p->fixture.v, p->key_elements);
    p->dout = rounded(p->fixture.dout, p->query_elements);
    p->out = malloc((size_t)p->query_elements * sizeof(float));
    p->lse = malloc((size_t)(shape.batch * shape.heads * shape.seq_len) * sizeof(float));
    p->dq = malloc((size_t)p->query_elements * sizeof(float));
    p->dk = malloc((size_t)p->key_elements * sizeof(float));
    p->dv = malloc((size_t)p->key_elements * sizeof(float));
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    char message[256] = "";
    cr_assert_eq(kernel->forward(kernel->context, p->out, p->lse, p->q, p->k, p->v, &p->mask,
                                 &p->dims, p->scale, NULL, message, sizeof message),
                 0, "%s", message);
    cr_assert_eq(kernel->backward(kernel->context, p->dq, p->dk, p->dv, p->dout, p->q, p->k, p->v,
                                  p->out, p->lse, &p->mask, &p->dims, p->scale, NULL, message,
                                  sizeof message),
                 0, "%s", message);
}

static void problem_init(problem *p, cpparity_attention_layer layer, uint64_t seed) {
    problem_init_rows(p, layer, NULL, seed);
}

static void problem_free(problem *p) {
    float *buffers[] = {p->q, p->k, p->v, p->dout, p->out, p->lse, p->dq, p->dk, p->dv};
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
        free(buffers[i]);
    }
    mask_storage_free(&p->storage);
    attention_fixture_free(&p->fixture);
}

/* Rows `index` (count) of [B, S, width] into [B, count, width]. */
static void take_rows(float *to, const float *from, int64_t B, int64_t S, int64_t width,
                      const int64_t *index, int64_t count) {
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < count; i++) {
            memcpy(to + (b * count + i) * width, from + (b * S + index[i]) * width,
                   (size_t)width * sizeof(float));
        }
    }
}

/* The largest difference between rows `index` of whole [B, S, width] and part [B, count, width]. */
static double rows_difference(const float *whole, const float *part, int64_t B, int64_t S,
                              int64_t width, const int64_t *index, int64_t count) {
    double largest = 0.0;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < count; i++) {
            for (int64_t w = 0; w < width; w++) {
                const double difference = fabs((double)whole[(b * S + index[i]) * width + w] -
                                               part[(b * count + i) * width + w]);
                largest = difference > largest ? difference : largest;
            }
        }
    }
    return largest;
}

static const cpparity_attention_layer block_layers[] = {
    {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
};

Test(kernel_cpu_blocks, zigzag_blocks_merged__equal_the_whole_sequence_call) {
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    for (size_t l = 0; l < sizeof block_layers / sizeof *block_layers; l++) {
        problem p;
        problem_init(&p, block_layers[l], 40 + l);
        const int64_t B = p.dims.batch, S = p.dims.seq_len, H = p.dims.heads;
        const int64_t Hkv = p.dims.kv_heads, Dh = p.dims.head_dim, cp = 3;
        const shard_layout layout = shard_layout_make(S, cp, 0, CPPARITY_LAYOUT_ZIGZAG);
        const int64_t L = layout.local_len;
        int64_t index[3][8];
        for (int64_t r = 0; r < cp; r++) {
            for (int64_t t = 0; t < L; t++) {
                index[r][t] = shard_position(&layout, r, t);
            }
        }
        float *q = malloc((size_t)(B * L * H * Dh) * sizeof(float));
        float *dout = malloc((size_t)(B * L * H * Dh) * sizeof(float));
        float *out_rows = malloc((size_t)(B * L * H * Dh) * sizeof(float));
        float *block_out = malloc((size_t)(B * L * H * Dh) * sizeof(float));
        float *block_lse = malloc((size_t)(B * H * L) * sizeof(float));
        float *lse_rows = malloc((size_t)(B * H * L) * sizeof(float));
        float *k = malloc((size_t)(B * L * Hkv * Dh) * sizeof(float));
        float *v = malloc((size_t)(B * L * Hkv * Dh) * sizeof(float));
        float *dq = malloc((size_t)(B * L * H * Dh) * sizeof(float));
        float *dk = malloc((size_t)(B * L * Hkv * Dh) * sizeof(float));
        float *dv = malloc((size_t)(B * L * Hkv * Dh) * sizeof(float));
        float *dq_sum = calloc((size_t)(B * L * H * Dh), sizeof(float));
        float *dk_sum = calloc((size_t)(cp * B * L * Hkv * Dh), sizeof(float));
        float *dv_sum = calloc((size_t)(cp * B * L * Hkv * Dh), sizeof(float));
        char message[256] = "";
        for (int64_t r = 0; r < cp; r++) {
            take_rows(q, p.q, B, S, H * Dh, index[r], L);
            take_rows(dout, p.dout, B, S, H * Dh, index[r], L);
            take_rows(out_rows, p.out, B, S, H * Dh, index[r], L);
            for (int64_t bh = 0; bh < B * H; bh++) {
                for (int64_t t = 0; t < L; t++) {
                    lse_rows[bh * L + t] = p.lse[bh * S + index[r][t]];
                }
            }
            float *merged = calloc((size_t)(B * L * H * Dh), sizeof(float));
            float *merged_lse = malloc((size_t)(B * H * L) * sizeof(float));
            for (int64_t i = 0; i < B * H * L; i++) {
                merged_lse[i] = -INFINITY;
            }
            memset(dq_sum, 0, (size_t)(B * L * H * Dh) * sizeof(float));
            for (int64_t s = 0; s < cp; s++) {
                take_rows(k, p.k, B, S, Hkv * Dh, index[s], L);
                take_rows(v, p.v, B, S, Hkv * Dh, index[s], L);
                const cpparity_attention_block block = {L, L, index[r], index[s]};
                cr_assert_eq(kernel->forward_block(kernel->context, block_out, block_lse, q, k, v,
                                                   &p.mask, &p.dims, &block, p.scale, NULL, message,
                                                   sizeof message),
                             0, "%s", message);
                for (int64_t b = 0; b < B; b++) {
                    for (int64_t h = 0; h < H; h++) {
                        for (int64_t t = 0; t < L; t++) {
                            ring_merge_row(merged + ((b * L + t) * H + h) * Dh,
                                           &merged_lse[(b * H + h) * L + t],
                                           block_out + ((b * L + t) * H + h) * Dh,
                                           block_lse[(b * H + h) * L + t], Dh, CPPARITY_FAULT_NONE);
                        }
                    }
                }
                /* backward with the whole call's out and lse: the block's share of dq, dk, dv */
                cr_assert_eq(kernel->backward_block(kernel->context, dq, dk, dv, dout, q, k, v,
                                                    out_rows, lse_rows, &p.mask, &p.dims, &block,
                                                    p.scale, NULL, message, sizeof message),
                             0, "%s", message);
                for (int64_t i = 0; i < B * L * H * Dh; i++) {
                    dq_sum[i] += dq[i];
                }
                for (int64_t i = 0; i < B * L * Hkv * Dh; i++) {
                    dk_sum[s * B * L * Hkv * Dh + i] += dk[i];
                    dv_sum[s * B * L * Hkv * Dh + i] += dv[i];
                }
            }
            const double out_difference = rows_difference(p.out, merged, B, S, H * Dh, index[r], L);
            cr_expect_leq(out_difference, BLOCK_TOLERANCE, "layer %zu rank %lld: out off by %g", l,
                          (long long)r, out_difference);
            const double dq_difference = rows_difference(p.dq, dq_sum, B, S, H * Dh, index[r], L);
            cr_expect_leq(dq_difference, BLOCK_TOLERANCE, "layer %zu rank %lld: dq off by %g", l,
                          (long long)r, dq_difference);
            for (int64_t i = 0; i < B * H * L; i++) {
                const float expected = lse_rows[i];
                cr_expect(isinf(expected) ? merged_lse[i] == expected
                                          : fabsf(merged_lse[i] - expected) <= BLOCK_TOLERANCE,
                          "layer %zu rank %lld: lse %lld is %g, the whole call's %g", l,
                          (long long)r, (long long)i, merged_lse[i], expected);
            }
            free(merged);
            free(merged_lse);
        }
        for (int64_t s = 0; s < cp; s++) {
            const double dk_difference =
                rows_difference(p.dk, dk_sum + s * B * L * Hkv * Dh, B, S, Hkv * Dh, index[s], L);
            const double dv_difference =
                rows_difference(p.dv, dv_sum + s * B * L * Hkv * Dh, B, S, Hkv * Dh, index[s], L);
            cr_expect_leq(dk_difference, BLOCK_TOLERANCE, "layer %zu: dk of rank %lld off by %g", l,
                          (long long)s, dk_difference);
            cr_expect_leq(dv_difference, BLOCK_TOLERANCE, "layer %zu: dv of rank %lld off by %g", l,
                          (long long)s, dv_difference);
        }
        float *buffers[] = {q, dout, out_rows, block_out, block_lse, lse_rows, k,
                            v, dq,   dk,       dv,        dq_sum,    dk_sum,   dv_sum};
        for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
            free(buffers[i]);
        }
        problem_free(&p);
    }
}

Test(kernel_cpu_blocks, identity_block__is_the_whole_sequence_call_bit_for_bit) {
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    problem p;
    problem_init(&p, block_layers[1], 7);
    const int64_t S = p.dims.seq_len;
    int64_t *index = malloc((size_t)S * sizeof *index);
    for (int64_t t = 0; t < S; t++) {
        index[t] = t;
    }
    float *out = malloc((size_t)p.query_elements * sizeof(float));
    float *lse = malloc((size_t)(p.dims.batch * p.dims.heads * S) * sizeof(float));
    const cpparity_attention_block block = {S, S, index, index};
    char message[256] = "";
    cr_assert_eq(kernel->forward_block(kernel->context, out, lse, p.q, p.k, p.v, &p.mask, &p.dims,
                                       &block, p.scale, NULL, message, sizeof message),
                 0, "%s", message);
    cr_expect_eq(memcmp(out, p.out, (size_t)p.query_elements * sizeof(float)), 0);
    /* a row outside the sequence is refused with the row named */
    index[3] = S;
    cr_expect_neq(kernel->forward_block(kernel->context, out, lse, p.q, p.k, p.v, &p.mask, &p.dims,
                                        &block, p.scale, NULL, message, sizeof message),
                  0);
    cr_expect(strstr(message, "query row 3 is token 24, outside [0, 24)") != NULL, "%s", message);
    free(index);
    free(out);
    free(lse);
    problem_free(&p);
}

/* Block calls counted per rank (each rank is a thread of comm_local). */
static _Thread_local int64_t block_calls;

static int counting_forward_block(void *context, void *out, float *lse, const void *q,
                                  const void *k, const void *v,
                                  const cpparity_mask_description *mask,
                                  const cpparity_attention_dims *dims,
                                  const cpparity_attention_block *block, float scale, void *stream,
                                  char *error, size_t capacity) {
    block_calls++;
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    return kernel->forward_block(context, out, lse, q, k, v, mask, dims, block, scale, stream,
                                 error, capacity);
}

/* --- "far" memory: what a device is to ring.c ------------------------------------------------
 * Tensors handed to ring.c at addresses FAR past where they are: any direct read or write by
 * ring.c faults (a non-canonical or unmapped address), and only the operations below, which
 * move each address back before calling the host's, reach the data. The CUDA model relies on
 * exactly that: ring.c touches its tensors only through ring_operations. */
#define FAR ((uintptr_t)1 << 46)

static void *far_of(const void *near) {
    return near == NULL ? NULL : (void *)((uintptr_t)near + FAR);
}

static void *near_of(const void *far) {
    return far == NULL ? NULL : (void *)((uintptr_t)far - FAR);
}

static _Atomic int64_t far_operations_called; /* any operation, any rank */

static void far_called(void) {
    atomic_fetch_add_explicit(&far_operations_called, 1, memory_order_relaxed);
}

static void *far_allocate(void *context, size_t bytes) {
    far_called();
    return far_of(ring_host_operations.allocate(context, bytes));
}

static void far_release(void *context, void *memory) {
    far_called();
    ring_host_operations.release(context, near_of(memory));
}

static cpparity_status far_copy(void *context, float *to, const float *from, int64_t count,
                                cpparity_error *error) {
    far_called();
    return ring_host_operations.copy(context, near_of(to), near_of(from), count, error);
}

static cpparity_status far_fill(void *context, float *to, float value, int64_t count,
                                cpparity_error *error) {
    far_called();
    return ring_host_operations.fill(context, near_of(to), value, count, error);
}

static cpparity_status far_gather_rows(void *context, float *to, const float *from, int64_t batch,
                                       int64_t L, int64_t width, const int64_t *rows, int64_t count,
                                       cpparity_error *error) {
    far_called();
    return ring_host_operations.gather_rows(context, near_of(to), near_of(from), batch, L, width,
                                            rows, count, error);
}

static cpparity_status far_scatter_add_rows(void *context, float *to, const float *from,
                                            int64_t batch, int64_t L, int64_t width,
                                            const int64_t *rows, int64_t count,
                                            cpparity_error *error) {
    far_called();
    return ring_host_operations.scatter_add_rows(context, near_of(to), near_of(from), batch, L,
                                                 width, rows, count, error);
}

static cpparity_status far_gather_lse(void *context, float *to, const float *from, int64_t planes,
                                      int64_t L, const int64_t *rows, int64_t count,
                                      cpparity_error *error) {
    far_called();
    return ring_host_operations.gather_lse(context, near_of(to), near_of(from), planes, L, rows,
                                           count, error);
}

static cpparity_status far_merge_rows(void *context, float *out, float *lse, const float *part_out,
                                      const float *part_lse, int64_t batch, int64_t L,
                                      int64_t heads, int64_t head_dim, const int64_t *rows,
                                      int64_t count, cpparity_fault fault, cpparity_error *error) {
    far_called();
    return ring_host_operations.merge_rows(context, near_of(out), near_of(lse), near_of(part_out),
                                           near_of(part_lse), batch, L, heads, head_dim, rows,
                                           count, fault, error);
}

static cpparity_status far_shift(void *context, cpparity_comm *comm, const float *send,
                                 float *receive, int64_t count, int offset, cpparity_error *error) {
    far_called();
    return ring_host_operations.shift(context, comm, near_of(send), near_of(receive), count, offset,
                                      error);
}

static int far_forward_block(void *context, const cpparity_attention_kernel *kernel, float *out,
                             float *lse, const float *q, const float *k, const float *v,
                             const cpparity_mask_description *mask,
                             const cpparity_attention_dims *dims,
                             const cpparity_attention_block *block, float scale, char *message,
                             size_t size) {
    far_called();
    return ring_host_operations.forward_block(context, kernel, near_of(out), near_of(lse),
                                              near_of(q), near_of(k), near_of(v), mask, dims, block,
                                              scale, message, size);
}

static int far_backward_block(void *context, const cpparity_attention_kernel *kernel, float *dq,
                              float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *out, const float *lse,
                              const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims,
                              const cpparity_attention_block *block, float scale, char *message,
                              size_t size) {
    far_called();
    return ring_host_operations.backward_block(context, kernel, near_of(dq), near_of(dk),
                                               near_of(dv), near_of(dout), near_of(q), near_of(k),
                                               near_of(v), near_of(out), near_of(lse), mask, dims,
                                               block, scale, message, size);
}

static const ring_operations far_operations = {
    .context = NULL,
    .allocate = far_allocate,
    .release = far_release,
    .copy = far_copy,
    .fill = far_fill,
    .gather_rows = far_gather_rows,
    .scatter_add_rows = far_scatter_add_rows,
    .gather_lse = far_gather_lse,
    .merge_rows = far_merge_rows,
    .shift = far_shift,
    .forward_block = far_forward_block,
    .backward_block = far_backward_block,
};

/* One ring run on local ranks: shared inputs, every rank's rows of the outputs. */
typedef struct ring_run {
    const problem *p;
    cpparity_layout layout;
    cpparity_fault fault;
    const cpparity_attention_kernel *kernel;
    bool far;                  /* tensors at far addresses, moved through far_operations */
    float *out, *dq, *dk, *dv; /* [B, Sp, ...] by global position, written by their owner */
    int64_t calls[8];          /* forward block calls of each rank */
} ring_run;

static cpparity_status ring_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    ring_run *run = argument;
    const problem *p = run->p;
    const int64_t B = p->dims.batch, S = p->dims.seq_len, H = p->dims.heads;
    const int64_t Hkv = p->dims.kv_heads, Dh = p->dims.head_dim;
    shard_layout layout = shard_layout_make(S, comm->size, comm->rank, run->layout);
    layout.fault = run->fault;
    const int64_t L = layout.local_len;
    /* every member's tokens; this rank's are its shard's positions */
    int64_t *tokens = malloc((size_t)(comm->size * L) * sizeof *tokens);
    for (int64_t r = 0; r < comm->size; r++) {
        for (int64_t t = 0; t < L; t++) {
            tokens[r * L + t] = shard_position(&layout, r, t);
        }
    }
    const int64_t *index = tokens + comm->rank * L;
    const size_t query = (size_t)(B * L * H * Dh), key = (size_t)(B * L * Hkv * Dh);
    float *q = malloc(query * sizeof(float)), *dout = malloc(query * sizeof(float));
    float *k = malloc(key * sizeof(float)), *v = malloc(key * sizeof(float));
    float *out = malloc(query * sizeof(float)), *dq = malloc(query * sizeof(float));
    float *lse = malloc((size_t)(B * H * L) * sizeof(float));
    float *dk = malloc(key * sizeof(float)), *dv = malloc(key * sizeof(float));
    take_rows(q, p->q, B, S, H * Dh, index, L);
    take_rows(dout, p->dout, B, S, H * Dh, index, L);
    take_rows(k, p->k, B, S, Hkv * Dh, index, L);
    take_rows(v, p->v, B, S, Hkv * Dh, index, L);
    const ring_setup ring = {comm, L,   tokens, run->kernel, B,
                             H,    Hkv, Dh,     run->fault,  run->far ? &far_operations : NULL};
    /* far: ring.c gets every tensor at an address it cannot touch directly */
#define GIVEN(x) (run->far ? (float *)far_of(x) : (x))
    block_calls = 0;
    cpparity_status status = ring_attention_forward(&ring, GIVEN(out), GIVEN(lse), GIVEN(q),
                                                    GIVEN(k), GIVEN(v), &p->mask, p->scale, error);
    run->calls[comm->rank] = block_calls;
    if (status == CPPARITY_OK) {
        status = ring_attention_backward(&ring, GIVEN(dq), GIVEN(dk), GIVEN(dv), GIVEN(dout),
                                         GIVEN(q), GIVEN(k), GIVEN(v), GIVEN(out), GIVEN(lse),
                                         &p->mask, p->scale, error);
    }
#undef GIVEN
    for (int64_t b = 0; status == CPPARITY_OK && b < B; b++) {
        for (int64_t t = 0; t < L; t++) { /* this rank's rows, at their positions */
            const int64_t at = b * S + index[t];
            memcpy(run->out + at * H * Dh, out + (b * L + t) * H * Dh,
                   (size_t)(H * Dh) * sizeof(float));
            memcpy(run->dq + at * H * Dh, dq + (b * L + t) * H * Dh,
                   (size_t)(H * Dh) * sizeof(float));
            memcpy(run->dk + at * Hkv * Dh, dk + (b * L + t) * Hkv * Dh,
                   (size_t)(Hkv * Dh) * sizeof(float));
            memcpy(run->dv + at * Hkv * Dh, dv + (b * L + t) * Hkv * Dh,
                   (size_t)(Hkv * Dh) * sizeof(float));
        }
    }
    float *buffers[] = {q, dout, k, v, out, dq, lse, dk, dv};
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
        free(buffers[i]);
    }
    free(tokens);
    return status;
}

static void ring_run_free(ring_run *run) {
    free(run->out);
    free(run->dq);
    free(run->dk);
    free(run->dv);
    run->out = run->dq = run->dk = run->dv = NULL;
}

/* Runs ring attention on cp local ranks, keeping the outputs (ring_run_free); returns the
 * largest difference of out, dq, dk and dv from the whole-sequence call. */
static double run_ring_keep(ring_run *run, int cp) {
    const problem *p = run->p;
    run->out = calloc((size_t)p->query_elements, sizeof(float));
    run->dq = calloc((size_t)p->query_elements, sizeof(float));
    run->dk = calloc((size_t)p->key_elements, sizeof(float));
    run->dv = calloc((size_t)p->key_elements, sizeof(float));
    cpparity_status statuses[8];
    cpparity_error errors[8], error;
    cr_assert_eq(comm_local_run(cp, 60.0, ring_body, run, statuses, errors, &error), CPPARITY_OK);
    for (int r = 0; r < cp; r++) {
        cr_assert_eq(statuses[r], CPPARITY_OK, "rank %d: %s", r, errors[r].message);
    }
    const struct {
        const float *x, *r;
        int64_t count;
    } pairs[] = {{run->out, p->out, p->query_elements},
                 {run->dq, p->dq, p->query_elements},
                 {run->dk, p->dk, p->key_elements},
                 {run->dv, p->dv, p->key_elements}};
    double largest = 0.0;
    for (size_t i = 0; i < 4; i++) {
        for (int64_t e = 0; e < pairs[i].count; e++) {
            const double difference = fabs((double)pairs[i].x[e] - pairs[i].r[e]);
            largest = difference > largest ? difference : largest;
        }
    }
    return largest;
}

/* run_ring_keep, the outputs freed. */
static double run_ring(ring_run *run, int cp) {
    const double largest = run_ring_keep(run, cp);
    ring_run_free(run);
    return largest;
}

Test(ring_attention, every_layout_and_mask_on_1_to_4_ranks__matches_the_whole_sequence_call) {
    for (size_t l = 0; l < sizeof block_layers / sizeof *block_layers; l++) {
        problem p;
        problem_init(&p, block_layers[l], 90 + l);
        for (size_t k = 0; k < 3; k++) {
            for (int cp = 1; cp <= 4; cp++) {
                ring_run run = {.p = &p,
                                .layout = all_layouts[k],
                                .fault = CPPARITY_FAULT_NONE,
                                .kernel = cpparity_cpu_f32_kernel()};
                const double difference = run_ring(&run, cp);
                cr_expect_leq(difference, BLOCK_TOLERANCE, "layer %zu layout %d cp %d: off by %g",
                              l, (int)all_layouts[k], cp, difference);
            }
        }
        problem_free(&p);
    }
}

Test(ring_attention, causal_contiguous_blocks__are_skipped_and_zigzag_ones_are_not) {
    /* plain causal rows: one document each, no padding, so only causality removes blocks */
    const test_row_layout rows[2] = {{0, 1, {24}, 0, {0}}, {0, 1, {24}, 0, {0}}};
    problem p;
    problem_init_rows(&p, block_layers[0], rows, 5);
    cpparity_attention_kernel counting = *cpparity_cpu_f32_kernel();
    counting.forward_block = counting_forward_block;
    ring_run contiguous = {.p = &p,
                           .layout = CPPARITY_LAYOUT_CONTIGUOUS,
                           .fault = CPPARITY_FAULT_NONE,
                           .kernel = &counting};
    cr_expect_leq(run_ring(&contiguous, 4), BLOCK_TOLERANCE);
    for (int r = 0; r < 4; r++) { /* rank r sees the blocks of ranks 0 … r only */
        cr_expect_eq(contiguous.calls[r], r + 1, "contiguous rank %d made %lld block calls", r,
                     (long long)contiguous.calls[r]);
    }
    ring_run zigzag = contiguous;
    zigzag.layout = CPPARITY_LAYOUT_ZIGZAG;
    cr_expect_leq(run_ring(&zigzag, 4), BLOCK_TOLERANCE);
    for (int r = 0; r < 4; r++) { /* balanced: each rank's late chunk sees every block */
        cr_expect_eq(zigzag.calls[r], 4, "zigzag rank %d made %lld block calls", r,
                     (long long)zigzag.calls[r]);
    }
    problem_free(&p);
}

Test(ring_attention, each_planted_ring_fault__moves_the_results) {
    problem p;
    problem_init(&p, block_layers[1], 11);
    const cpparity_fault faults[] = {CPPARITY_FAULT_RING_MERGE_MAX,
                                     CPPARITY_FAULT_RING_MERGE_STEP_LSE,
                                     CPPARITY_FAULT_RING_LAST_STEP, CPPARITY_FAULT_RING_CAUSAL_SKIP,
                                     CPPARITY_FAULT_RING_DKV_DIRECTION};
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        ring_run run = {.p = &p,
                        .layout = CPPARITY_LAYOUT_ZIGZAG,
                        .fault = faults[f],
                        .kernel = cpparity_cpu_f32_kernel()};
        /* cp 4: dK and dV sent the wrong way land on another rank only past cp 2 */
        const double difference = run_ring(&run, 4);
        cr_expect_gt(difference, 1e-2, "fault %s: off by %g only", cpparity_fault_name(faults[f]),
                     difference);
    }
    problem_free(&p);
}

Test(ring_attention, tensors_moved_only_through_the_operations__give_the_same_bits) {
    /* ring.c given far addresses (far_operations) must compute exactly what it computes on host
     * memory: every layout, causal skips, cp 1 to 4, forward and backward */
    problem p;
    problem_init(&p, block_layers[1], 23);
    for (size_t k = 0; k < 3; k++) {
        for (int cp = 1; cp <= 4; cp++) {
            ring_run near = {.p = &p,
                             .layout = all_layouts[k],
                             .fault = CPPARITY_FAULT_NONE,
                             .kernel = cpparity_cpu_f32_kernel()};
            ring_run far = near;
            far.far = true;
            const double near_difference = run_ring_keep(&near, cp);
            far_operations_called = 0;
            const double far_difference = run_ring_keep(&far, cp);
            cr_expect_gt(far_operations_called, 0, "layout %d cp %d: no operation called",
                         (int)all_layouts[k], cp);
            cr_expect_eq(far_difference, near_difference, "layout %d cp %d", (int)all_layouts[k],
                         cp);
            const struct {
                const float *a, *b;
                int64_t count;
                const char *name;
            } outputs[] = {{near.out, far.out, p.query_elements, "out"},
                           {near.dq, far.dq, p.query_elements, "dq"},
                           {near.dk, far.dk, p.key_elements, "dk"},
                           {near.dv, far.dv, p.key_elements, "dv"}};
            for (size_t o = 0; o < 4; o++) {
                cr_expect_eq(
                    memcmp(outputs[o].a, outputs[o].b, (size_t)outputs[o].count * sizeof(float)), 0,
                    "layout %d cp %d: %s differs", (int)all_layouts[k], cp, outputs[o].name);
            }
            ring_run_free(&near);
            ring_run_free(&far);
        }
    }
    problem_free(&p);
}
