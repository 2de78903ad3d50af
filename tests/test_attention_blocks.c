/*
 * test_attention_blocks.c — the block calls of attention-level items (harness/running/
 * attention_blocks.h): the blocks cut every sequence length into a partition, in the documented
 * order; the CPU kernel's block calls merged and summed equal its whole-sequence call under every
 * mask type; a causal mask leaves one pair of blocks with no allowed pair; and a kernel that
 * leaves a row with no allowed key in a block unwritten is counted, at the right coordinates.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/mask_description.h"
#include "harness/running/attention_blocks.h"
#include "tests/support/attention_fixture.h"

Test(attention_blocks, blocks__partition_every_length_in_the_documented_order) {
    int64_t tokens[64];
    for (int64_t S = 1; S <= 64; S++) {
        int query_seen[64] = {0}, key_seen[64] = {0};
        for (int b = 0; b < ATTENTION_QUERY_BLOCKS; b++) {
            const int64_t count = attention_query_block(S, b, tokens);
            for (int64_t i = 0; i < count; i++) {
                cr_assert(tokens[i] >= 0 && tokens[i] < S);
                query_seen[tokens[i]]++;
            }
            if (b == 0 && count > 0) { /* chunk 3 first, then chunk 0 */
                cr_assert_eq(tokens[0], 3 * S / 4, "S %lld", (long long)S);
            }
        }
        for (int b = 0; b < ATTENTION_KEY_BLOCKS; b++) {
            const int64_t count = attention_key_block(S, b, tokens);
            for (int64_t i = 0; i < count; i++) {
                key_seen[tokens[i]]++;
            }
        }
        for (int64_t t = 0; t < S; t++) {
            cr_assert_eq(query_seen[t], 1, "S %lld token %lld", (long long)S, (long long)t);
            cr_assert_eq(key_seen[t], 1, "S %lld token %lld", (long long)S, (long long)t);
        }
    }
}

/* One problem: fixture inputs rounded to float32, the mask, the whole-sequence call. */
typedef struct problem {
    attention_fixture fixture;
    mask_storage storage;
    cpparity_mask_description mask;
    cpparity_attention_dims dims;
    float scale;
    float *in[4];      /* q, k, v, dout */
    float *whole[5];   /* out, lse, dq, dk, dv of the whole-sequence call */
    float *blocks[5];  /* the same of the block calls */
    int64_t counts[5]; /* elements of each output */
} problem;

/* rows: NULL for random padding and documents from the seed. */
static void problem_init(problem *p, cpparity_attention_layer layer, const test_row_layout *rows,
                         uint64_t seed) {
    const reference_attention_shape shape = {2, 29, 4, 2, 8};
    attention_fixture_init(&p->fixture, shape, layer, rows, 4, seed);
    cr_assert_eq(mask_storage_build(&p->storage, shape.batch, shape.seq_len,
                                    p->fixture.attention_mask, p->fixture.position_ids, NULL),
                 CPPARITY_OK);
    p->mask = mask_storage_describe(&p->storage, layer);
    p->dims = (cpparity_attention_dims){shape.batch, shape.seq_len, shape.heads, shape.kv_heads,
                                        shape.head_dim};
    p->scale = (float)p->fixture.scale;
    const int64_t query = fixture_query_elements(&p->fixture),
                  key = fixture_key_elements(&p->fixture),
                  lse_rows = shape.batch * shape.heads * shape.seq_len;
    const double *sources[4] = {p->fixture.q, p->fixture.k, p->fixture.v, p->fixture.dout};
    const int64_t in_counts[4] = {query, key, key, query};
    for (int i = 0; i < 4; i++) {
        p->in[i] = malloc((size_t)in_counts[i] * sizeof(float));
        for (int64_t e = 0; e < in_counts[i]; e++) {
            p->in[i][e] = (float)sources[i][e];
        }
    }
    const int64_t counts[5] = {query, lse_rows, query, key, key};
    for (int o = 0; o < 5; o++) {
        p->counts[o] = counts[o];
        p->whole[o] = malloc((size_t)counts[o] * sizeof(float));
        p->blocks[o] = malloc((size_t)counts[o] * sizeof(float));
    }
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    char message[256] = "";
    cr_assert_eq(kernel->forward(kernel->context, p->whole[0], p->whole[1], p->in[0], p->in[1],
                                 p->in[2], &p->mask, &p->dims, p->scale, NULL, message,
                                 sizeof message),
                 0, "%s", message);
    cr_assert_eq(kernel->backward(kernel->context, p->whole[2], p->whole[3], p->whole[4], p->in[3],
                                  p->in[0], p->in[1], p->in[2], p->whole[0], p->whole[1], &p->mask,
                                  &p->dims, p->scale, NULL, message, sizeof message),
                 0, "%s", message);
}

static void problem_free(problem *p) {
    for (int i = 0; i < 4; i++) {
        free(p->in[i]);
    }
    for (int o = 0; o < 5; o++) {
        free(p->whole[o]);
        free(p->blocks[o]);
    }
    mask_storage_free(&p->storage);
    attention_fixture_free(&p->fixture);
}

/* The block calls of kernel on p, backward given the whole-sequence call's out and lse. */
static attention_block_outputs call_blocks(problem *p, const cpparity_attention_kernel *kernel) {
    const attention_block_inputs inputs = {p->in[0], p->in[3],    p->in[1],
                                           p->in[2], p->whole[0], p->whole[1]};
    attention_block_outputs outputs = {
        p->blocks[0], p->blocks[1], p->blocks[2], p->blocks[3], p->blocks[4], 0, {0}};
    char message[512] = "";
    cr_assert_eq(attention_blocks_call(kernel, &p->mask, &p->dims, p->scale, &inputs, &outputs,
                                       message, sizeof message),
                 0, "%s", message);
    return outputs;
}

static const cpparity_attention_layer layers[] = {
    {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_ROW},
    {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
};

Test(attention_blocks, cpu_kernel_blocks_merged__equal_its_whole_sequence_call) {
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
        problem p;
        problem_init(&p, layers[l], NULL, 70 + l);
        const attention_block_outputs outputs = call_blocks(&p, cpparity_cpu_f32_kernel());
        cr_assert_eq(outputs.empty_wrong, 0);
        for (int o = 0; o < 5; o++) {
            double largest = 0.0;
            for (int64_t e = 0; e < p.counts[o]; e++) {
                const float a = p.whole[o][e], b = p.blocks[o][e];
                if (isinf(a) || isinf(b)) { /* a fully masked row: −∞ in both */
                    cr_assert(a == b, "layer %zu %s element %lld", l, names[o], (long long)e);
                    continue;
                }
                largest = fabs((double)a - b) > largest ? fabs((double)a - b) : largest;
            }
            /* float32 sums over at most 29 keys of values below ~4, taken in another order and
             * merged in float64: a few units in the last place of values of order 1 */
            cr_assert_lt(largest, 2e-5, "layer %zu %s differs by %g", l, names[o], largest);
        }
        problem_free(&p);
    }
}

Test(attention_blocks, causal_mask__leaves_the_late_key_block_empty_for_the_middle_queries) {
    problem p;
    problem_init(&p, layers[0], NULL, 80);
    const int64_t S = p.dims.seq_len;
    int64_t queries[64], keys[64];
    const int64_t nq = attention_query_block(S, 1, queries), nk = attention_key_block(S, 2, keys);
    cr_assert(nq > 0 && nk > 0);
    for (int64_t b = 0; b < p.dims.batch; b++) {
        for (int64_t i = 0; i < nq; i++) {
            for (int64_t j = 0; j < nk; j++) {
                cr_assert(!p.fixture.dense[(b * S + queries[i]) * S + keys[j]]);
            }
        }
    }
    problem_free(&p);
}

/* The CPU kernel's forward_block, but a row with no allowed key in a block gets out 1. */
static int unwritten_forward_block(void *context, void *out, float *lse, const void *q,
                                   const void *k, const void *v,
                                   const cpparity_mask_description *mask,
                                   const cpparity_attention_dims *dims,
                                   const cpparity_attention_block *block, float scale, void *stream,
                                   char *message, size_t size) {
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    const int failed = kernel->forward_block(context, out, lse, q, k, v, mask, dims, block, scale,
                                             stream, message, size);
    float *o = out;
    for (int64_t b = 0; b < dims->batch; b++) {
        for (int64_t h = 0; h < dims->heads; h++) {
            for (int64_t i = 0; i < block->query_len; i++) {
                if (isinf(lse[(b * dims->heads + h) * block->query_len + i])) {
                    o[((b * block->query_len + i) * dims->heads + h) * dims->head_dim] = 1.0f;
                }
            }
        }
    }
    return failed;
}

Test(attention_blocks, a_block_row_without_keys_left_nonzero__is_counted_where_it_is) {
    problem p;
    const test_row_layout rows[2] = {{0, 1, {29}, 0, {0}},
                                     {0, 1, {29}, 0, {0}}}; /* one document each */
    problem_init(&p, layers[0], rows, 81);
    cpparity_attention_kernel wrong = *cpparity_cpu_f32_kernel();
    wrong.forward_block = unwritten_forward_block;
    const attention_block_outputs outputs = call_blocks(&p, &wrong);
    cr_assert_gt(outputs.empty_wrong, 0);
    /* the first pair with such rows is query block {3, 0} against key block {1}: causal rows of
     * chunk 0 see none of it, the first being batch row 0, token 0, head 0 (its dim 0 written) */
    const int64_t *first = outputs.first_empty_wrong;
    for (int d = 0; d < 4; d++) {
        cr_assert_eq(first[d], 0, "coordinate %d is %lld", d, (long long)first[d]);
    }
    /* the merge weighs such a row 0: the merged out still equals the whole call's */
    for (int64_t e = 0; e < p.counts[0]; e++) {
        cr_assert(fabsf(p.whole[0][e] - p.blocks[0][e]) < 2e-5f); /* as above */
    }
    problem_free(&p);
}
