/*
 * test_kernel_cpu.c — the CPU float32 kernel (distributed/kernels/kernel_cpu.c) through the kernel
 * ABI, against the float64 reference attention on the same inputs.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"
#include "tests/support/attention_fixture.h"
#include "tests/support/masked_values_contract.h"

/* float32 against float64 on scores of order 1 summed over S·Dh <= 400 terms: a few hundred
 * float32 roundings (6e-8 each) stay below 5e-5; a masking or scaling error is order 1e-1. */
#define KERNEL_TOLERANCE 5e-5

static float *to_float(const double *values, int64_t count) {
    float *converted = malloc((size_t)count * sizeof(float));
    for (int64_t i = 0; i < count; i++) {
        converted[i] = (float)values[i];
    }
    return converted;
}

static double largest_difference(const float *x, const double *r, int64_t count) {
    double largest = 0.0;
    for (int64_t i = 0; i < count; i++) {
        const double difference = fabs((double)x[i] - r[i]);
        largest = difference > largest ? difference : largest;
    }
    return largest;
}

static void expect_kernel_matches_reference(const cpparity_attention_kernel *kernel,
                                            reference_attention_shape shape,
                                            cpparity_attention_layer layer, uint64_t seed) {
    attention_fixture fixture;
    attention_fixture_init(&fixture, shape, layer, NULL, 4, seed);
    const int64_t queries = fixture_query_elements(&fixture), keys = fixture_key_elements(&fixture);
    const int64_t rows = shape.batch * shape.heads * shape.seq_len;
    /* the reference on float32-rounded inputs, so only the arithmetic differs */
    float *q = to_float(fixture.q, queries), *k = to_float(fixture.k, keys);
    float *v = to_float(fixture.v, keys), *dout = to_float(fixture.dout, queries);
    for (int64_t i = 0; i < queries; i++) {
        fixture.q[i] = q[i];
        fixture.dout[i] = dout[i];
    }
    for (int64_t i = 0; i < keys; i++) {
        fixture.k[i] = k[i];
        fixture.v[i] = v[i];
    }
    double *out = malloc((size_t)queries * sizeof(double)),
           *lse = malloc((size_t)rows * sizeof(double));
    double *dq = calloc((size_t)queries, sizeof(double)),
           *dk = calloc((size_t)keys, sizeof(double));
    double *dv = calloc((size_t)keys, sizeof(double));
    cr_assert_eq(reference_attention_forward(out, lse, fixture.q, fixture.k, fixture.v,
                                             &fixture.mask, shape, fixture.scale, NULL),
                 CPPARITY_OK);
    cr_assert_eq(reference_attention_backward(dq, dk, dv, fixture.dout, fixture.q, fixture.k,
                                              fixture.v, out, lse, &fixture.mask, shape,
                                              fixture.scale, NULL),
                 CPPARITY_OK);

    mask_storage storage;
    cr_assert_eq(mask_storage_build(&storage, shape.batch, shape.seq_len, fixture.attention_mask,
                                    fixture.position_ids, NULL),
                 CPPARITY_OK);
    const cpparity_mask_description mask = mask_storage_describe(&storage, layer);
    const cpparity_attention_dims dims = {shape.batch, shape.seq_len, shape.heads, shape.kv_heads,
                                          shape.head_dim};
    cr_assert_eq(kernel->abi_version, CPPARITY_KERNEL_ABI_VERSION);
    float *kernel_out = malloc((size_t)queries * sizeof(float));
    float *kernel_lse = malloc((size_t)rows * sizeof(float));
    float *kernel_dq = malloc((size_t)queries * sizeof(float));
    float *kernel_dk = malloc((size_t)keys * sizeof(float));
    float *kernel_dv = malloc((size_t)keys * sizeof(float));
    char message[256];
    cr_assert_eq(kernel->forward(kernel->context, kernel_out, kernel_lse, q, k, v, &mask, &dims,
                                 (float)fixture.scale, NULL, message, sizeof message),
                 0, "%s", message);
    cr_assert_eq(kernel->backward(kernel->context, kernel_dq, kernel_dk, kernel_dv, dout, q, k, v,
                                  kernel_out, kernel_lse, &mask, &dims, (float)fixture.scale, NULL,
                                  message, sizeof message),
                 0, "%s", message);
    const struct {
        const char *name;
        const float *x;
        const double *r;
        int64_t count;
    } tensors[] = {{"out", kernel_out, out, queries},
                   {"dq", kernel_dq, dq, queries},
                   {"dk", kernel_dk, dk, keys},
                   {"dv", kernel_dv, dv, keys}};
    for (size_t t = 0; t < 4; t++) {
        const double difference = largest_difference(tensors[t].x, tensors[t].r, tensors[t].count);
        cr_expect_leq(difference, KERNEL_TOLERANCE,
                      "%s seed %llu type %d W=%lld C=%lld Hkv=%lld Dh=%lld: %s differs by %.3e",
                      kernel->name, (unsigned long long)seed, (int)layer.type,
                      (long long)layer.window, (long long)layer.chunk_size,
                      (long long)shape.kv_heads, (long long)shape.head_dim, tensors[t].name,
                      difference);
    }
    for (int64_t i = 0; i < rows; i++) {
        if (isinf(lse[i])) {
            cr_expect(isinf(kernel_lse[i]) && kernel_lse[i] < 0, "lse[%lld] = %g, expected -inf",
                      (long long)i, kernel_lse[i]);
        } else {
            cr_expect(fabs(kernel_lse[i] - lse[i]) <= KERNEL_TOLERANCE, "lse[%lld]", (long long)i);
        }
    }
    free(kernel_out);
    free(kernel_lse);
    free(kernel_dq);
    free(kernel_dk);
    free(kernel_dv);
    mask_storage_free(&storage);
    free(out);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
    free(q);
    free(k);
    free(v);
    free(dout);
    attention_fixture_free(&fixture);
}

static void expect_matches_reference(reference_attention_shape shape,
                                     cpparity_attention_layer layer, uint64_t seed) {
    expect_kernel_matches_reference(cpparity_cpu_f32_kernel(), shape, layer, seed);
}

Test(kernel_cpu, every_layer_type_and_head_grouping__matches_the_float64_reference) {
    const reference_attention_shape shapes[] = {
        {2, 37, 4, 4, 8}, {2, 37, 6, 2, 8}, {1, 40, 4, 1, 6}};
    const cpparity_attention_layer layers[] = {
        {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 1, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 7, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 5, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
    };
    uint64_t seed = 700;
    for (size_t s = 0; s < 3; s++) {
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            expect_matches_reference(shapes[s], layers[l], seed++);
        }
    }
}

/* The tile loops take head dimensions by chunks of 32 elements, then one at a time: 32, 40 (a
 * chunk and 8 more), 64 and 100 (three chunks and 4 more) go through both, with the fused loops
 * (where the CPU has AVX2 and FMA) and the plain ones every other CPU runs, at both tile sizes. */
Test(kernel_cpu, head_dimensions_of_whole_chunks_and_remainders__match_the_float64_reference) {
    const reference_attention_shape shapes[] = {
        {2, 37, 4, 2, 32}, {1, 41, 2, 1, 40}, {1, 35, 2, 2, 64}, {1, 19, 3, 1, 100}};
    const cpparity_attention_layer layers[] = {
        {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 7, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_CHUNKED, 0, 4, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
    };
    const cpparity_attention_kernel *built_in[] = {cpparity_cpu_f32_kernel(),
                                                   cpparity_cpu_f32_small_tile_kernel()};
    uint64_t seed = 900;
    for (size_t n = 0; n < 2; n++) {
        for (int plain = 0; plain < 2; plain++) {
            cpparity_attention_kernel copy;
            kernel_cpu_options options = {CPPARITY_FAULT_NONE, 0, 0, plain == 1};
            cr_assert(kernel_cpu_with_options(&copy, built_in[n], &options));
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
                    expect_kernel_matches_reference(&copy, shapes[s], layers[l], seed++);
                }
            }
        }
    }
}

/* Float32 tensors of a fixture and the kernel's outputs of one whole-sequence call. */
typedef struct float_problem {
    attention_fixture fixture;
    mask_storage storage;
    cpparity_attention_dims dims;
    cpparity_mask_description mask;
    float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
} float_problem;

static float_problem float_problem_make(const cpparity_attention_kernel *kernel,
                                        reference_attention_shape shape,
                                        cpparity_attention_layer layer, uint64_t seed) {
    float_problem p;
    attention_fixture_init(&p.fixture, shape, layer, NULL, 4, seed);
    const int64_t queries = fixture_query_elements(&p.fixture);
    const int64_t keys = fixture_key_elements(&p.fixture);
    const int64_t rows = shape.batch * shape.heads * shape.seq_len;
    p.q = to_float(p.fixture.q, queries);
    p.k = to_float(p.fixture.k, keys);
    p.v = to_float(p.fixture.v, keys);
    p.dout = to_float(p.fixture.dout, queries);
    p.out = malloc((size_t)queries * sizeof(float));
    p.dq = malloc((size_t)queries * sizeof(float));
    p.lse = malloc((size_t)rows * sizeof(float));
    p.dk = malloc((size_t)keys * sizeof(float));
    p.dv = malloc((size_t)keys * sizeof(float));
    cr_assert_eq(mask_storage_build(&p.storage, shape.batch, shape.seq_len,
                                    p.fixture.attention_mask, p.fixture.position_ids, NULL),
                 CPPARITY_OK);
    p.mask = mask_storage_describe(&p.storage, layer);
    p.dims = (cpparity_attention_dims){shape.batch, shape.seq_len, shape.heads, shape.kv_heads,
                                       shape.head_dim};
    char message[256] = "";
    cr_assert_eq(kernel->forward(kernel->context, p.out, p.lse, p.q, p.k, p.v, &p.mask, &p.dims,
                                 (float)p.fixture.scale, NULL, message, sizeof message),
                 0, "%s", message);
    cr_assert_eq(kernel->backward(kernel->context, p.dq, p.dk, p.dv, p.dout, p.q, p.k, p.v, p.out,
                                  p.lse, &p.mask, &p.dims, (float)p.fixture.scale, NULL, message,
                                  sizeof message),
                 0, "%s", message);
    return p;
}

static void float_problem_free(float_problem *p) {
    float *buffers[] = {p->q, p->k, p->v, p->dout, p->out, p->lse, p->dq, p->dk, p->dv};
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
        free(buffers[i]);
    }
    mask_storage_free(&p->storage);
    attention_fixture_free(&p->fixture);
}

/* The tile loops take query rows two at a time and keys two at a time; each row's sums are its own
 * lanes. So a query row's out, lse and dq must have the same bits whichever row shares its step:
 * a block call with the query rows in reverse order (S is even, so every row changes its place in
 * its pair, and every tile is classified pair by pair) against the whole-sequence call, row by
 * row, bit for bit. (dk and dv add the queries in another order then, so they are compared to the
 * reference by the tests above.) */
Test(kernel_cpu, a_query_rows_results__do_not_depend_on_the_rows_beside_it) {
    const cpparity_attention_layer layers[] = {
        {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
        {CPPARITY_LAYER_SLIDING, 9, 0, CPPARITY_CHUNK_ORIGIN_ROW},
    };
    for (int plain = 0; plain < 2; plain++) {
        cpparity_attention_kernel kernel;
        kernel_cpu_options options = {CPPARITY_FAULT_NONE, 0, 0, plain == 1};
        cr_assert(kernel_cpu_with_options(&kernel, cpparity_cpu_f32_small_tile_kernel(), &options));
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            const reference_attention_shape shape = {2, 38, 4, 2, 40};
            float_problem p = float_problem_make(&kernel, shape, layers[l], 950 + l);
            const int64_t B = shape.batch, S = shape.seq_len, H = shape.heads;
            const int64_t row_elements = H * shape.head_dim;
            int64_t *reversed = malloc((size_t)S * sizeof *reversed);
            int64_t *identity = malloc((size_t)S * sizeof *identity);
            for (int64_t t = 0; t < S; t++) {
                reversed[t] = S - 1 - t;
                identity[t] = t;
            }
            /* the block's rows: q, dout, out and lse of token S − 1 − i in row i */
            const int64_t queries = B * S * row_elements;
            float *q = malloc((size_t)queries * sizeof(float));
            float *dout = malloc((size_t)queries * sizeof(float));
            float *out_given = malloc((size_t)queries * sizeof(float));
            float *lse_given = malloc((size_t)(B * H * S) * sizeof(float));
            for (int64_t b = 0; b < B; b++) {
                for (int64_t i = 0; i < S; i++) {
                    const int64_t from = (b * S + reversed[i]) * row_elements;
                    const int64_t to = (b * S + i) * row_elements;
                    memcpy(q + to, p.q + from, (size_t)row_elements * sizeof(float));
                    memcpy(dout + to, p.dout + from, (size_t)row_elements * sizeof(float));
                    memcpy(out_given + to, p.out + from, (size_t)row_elements * sizeof(float));
                    for (int64_t h = 0; h < H; h++) {
                        lse_given[(b * H + h) * S + i] = p.lse[(b * H + h) * S + reversed[i]];
                    }
                }
            }
            const cpparity_attention_block block = {S, S, reversed, identity};
            float *out = malloc((size_t)queries * sizeof(float));
            float *dq = malloc((size_t)queries * sizeof(float));
            float *lse = malloc((size_t)(B * H * S) * sizeof(float));
            const int64_t keys = fixture_key_elements(&p.fixture);
            float *dk = malloc((size_t)keys * sizeof(float));
            float *dv = malloc((size_t)keys * sizeof(float));
            char message[256] = "";
            const float scale = (float)p.fixture.scale;
            cr_assert_eq(kernel.forward_block(kernel.context, out, lse, q, p.k, p.v, &p.mask,
                                              &p.dims, &block, scale, NULL, message,
                                              sizeof message),
                         0, "%s", message);
            cr_assert_eq(kernel.backward_block(kernel.context, dq, dk, dv, dout, q, p.k, p.v,
                                               out_given, lse_given, &p.mask, &p.dims, &block,
                                               scale, NULL, message, sizeof message),
                         0, "%s", message);
            int64_t differing = 0;
            for (int64_t b = 0; b < B; b++) {
                for (int64_t i = 0; i < S; i++) {
                    const int64_t from = (b * S + reversed[i]) * row_elements;
                    const int64_t to = (b * S + i) * row_elements;
                    const size_t bytes = (size_t)row_elements * sizeof(float);
                    differing += memcmp(out + to, p.out + from, bytes) != 0;
                    differing += memcmp(dq + to, p.dq + from, bytes) != 0;
                    for (int64_t h = 0; h < H; h++) {
                        differing +=
                            memcmp(&lse[(b * H + h) * S + i], &p.lse[(b * H + h) * S + reversed[i]],
                                   sizeof(float)) != 0;
                    }
                }
            }
            cr_expect_eq(differing, 0,
                         "%s layer %zu: %lld rows of out, dq or lse changed with their neighbours",
                         plain ? "plain loops" : "built-in loops", l, (long long)differing);
            free(reversed);
            free(identity);
            float *buffers[] = {q, dout, out_given, lse_given, out, dq, lse, dk, dv};
            for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
                free(buffers[i]);
            }
            float_problem_free(&p);
        }
    }
}

/* A query with one allowed key has p = 1 and ds = dp − δ with out = v, so ds is exactly 0 and so
 * are dq and dk (the float64 reference and the CUDA kernels give exact zeros): δ must be computed
 * with dp's own arithmetic. A window of 1 gives every query one key. */
Test(kernel_cpu, queries_with_one_allowed_key__give_exactly_zero_dq_and_dk) {
    const cpparity_attention_layer window_of_one = {CPPARITY_LAYER_SLIDING, 1, 0,
                                                    CPPARITY_CHUNK_ORIGIN_ROW};
    for (int plain = 0; plain < 2; plain++) {
        cpparity_attention_kernel kernel;
        kernel_cpu_options options = {CPPARITY_FAULT_NONE, 0, 0, plain == 1};
        cr_assert(kernel_cpu_with_options(&kernel, cpparity_cpu_f32_kernel(), &options));
        const reference_attention_shape shape = {2, 40, 4, 2, 72};
        float_problem p = float_problem_make(&kernel, shape, window_of_one, 970);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < fixture_query_elements(&p.fixture); i++) {
            nonzero += p.dq[i] != 0.0f;
        }
        for (int64_t i = 0; i < fixture_key_elements(&p.fixture); i++) {
            nonzero += p.dk[i] != 0.0f;
        }
        cr_expect_eq(nonzero, 0, "%s loops: %lld elements of dq and dk are not 0",
                     plain ? "plain" : "built-in", (long long)nonzero);
        float_problem_free(&p);
    }
}

/* The plain loops against the fused ones on one problem: the same sums, one rounding per step
 * fewer where fused, so they agree to float32 rounding of order-1 values over ~40 terms; 1e-5
 * (20 times that) keeps a margin and is far below what a wrong pair costs (1e-2 and more). On a
 * CPU without FMA both are the plain loops and must be identical. */
#define PATHS_TOLERANCE 1e-5

Test(kernel_cpu, plain_and_fused_tile_loops__agree) {
    cpparity_attention_kernel plain, built_in = *cpparity_cpu_f32_kernel();
    kernel_cpu_options options = {CPPARITY_FAULT_NONE, 0, 0, true};
    cr_assert(kernel_cpu_with_options(&plain, cpparity_cpu_f32_kernel(), &options));
    const reference_attention_shape shape = {2, 45, 4, 2, 72};
    const cpparity_attention_layer causal = {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW};
    float_problem a = float_problem_make(&plain, shape, causal, 990);
    float_problem b = float_problem_make(&built_in, shape, causal, 990);
    const int64_t queries = fixture_query_elements(&a.fixture);
    const int64_t keys = fixture_key_elements(&a.fixture);
    const struct {
        const char *name;
        const float *x, *y;
        int64_t count;
    } tensors[] = {{"out", a.out, b.out, queries},
                   {"dq", a.dq, b.dq, queries},
                   {"dk", a.dk, b.dk, keys},
                   {"dv", a.dv, b.dv, keys}};
    for (size_t t = 0; t < 4; t++) {
        double largest = 0.0;
        for (int64_t i = 0; i < tensors[t].count; i++) {
            const double difference = fabs((double)tensors[t].x[i] - tensors[t].y[i]);
            largest = difference > largest ? difference : largest;
        }
        cr_expect_leq(largest, PATHS_TOLERANCE, "%s: the two paths differ by %.3e", tensors[t].name,
                      largest);
    }
    float_problem_free(&a);
    float_problem_free(&b);
}

Test(kernel_cpu, stream_on_a_cpu_kernel__is_refused_with_a_message) {
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
    cpparity_mask_description mask = {0};
    mask.batch = 1;
    mask.seq_len = 1;
    const cpparity_attention_dims dims = {1, 1, 1, 1, 2};
    float tensor[2] = {0}, lse[1];
    char message[256] = "";
    int stream_token = 0;
    cr_expect_neq(kernel->forward(kernel->context, tensor, lse, tensor, tensor, tensor, &mask,
                                  &dims, 1.0f, &stream_token, message, sizeof message),
                  0);
    cr_expect(strstr(message, "stream") != NULL, "%s", message);
}

/* --- the contract that masked values cannot change a result (masked_values_contract.h) ------- */

Test(kernel_cpu, every_built_in_cpu_kernel__keeps_masked_inf_and_nan_out_of_every_output) {
    int checked = 0;
    for (int i = 0; i < kernel_registry_count(); i++) {
        const cpparity_attention_kernel *kernel = kernel_registry_at(i);
        if (kernel->device != CPPARITY_KERNEL_DEVICE_CPU) {
            continue; /* CUDA kernels: tests/gpu_kernel_cuda.cu runs the same check on a device */
        }
        char report[1024] = "";
        cr_expect(masked_values_contract_check(kernel, report, sizeof report), "%s", report);
        checked++;
    }
    cr_expect_geq(checked, 2, "cpu-f32 and cpu-f32-tile8 at least");
    /* and the plain tile loops, which CPUs without AVX2 and FMA run */
    cpparity_attention_kernel plain;
    kernel_cpu_options options = {CPPARITY_FAULT_NONE, 0, 0, true};
    cr_assert(kernel_cpu_with_options(&plain, cpparity_cpu_f32_small_tile_kernel(), &options));
    char report[1024] = "";
    cr_expect(masked_values_contract_check(&plain, report, sizeof report), "plain loops: %s",
              report);
}

/* A kernel that multiplies masked pairs by a probability of 0 (as a FlashAttention-style kernel
 * does when it masks with −∞ before exp): its forward computes every pair of the row, 0 for the
 * masked ones, and sums p·v over all keys; its backward is cpu-f32's. */
static int zero_weight_forward(void *context, void *out_raw, float *lse, const void *q_raw,
                               const void *k_raw, const void *v_raw,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *d, float scale, void *stream,
                               char *error, size_t capacity) {
    (void)context, (void)stream, (void)error, (void)capacity;
    float *out = out_raw;
    const float *q = q_raw, *k = k_raw, *v = v_raw;
    const int64_t S = d->seq_len, H = d->heads, Hkv = d->kv_heads, Dh = d->head_dim;
    float *weights = malloc((size_t)S * sizeof(float));
    for (int64_t b = 0; b < d->batch; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / (H / Hkv);
            for (int64_t t = 0; t < S; t++) {
                const float *query = q + ((b * S + t) * H + h) * Dh;
                float largest = -INFINITY, sum = 0.0f;
                for (int64_t key = 0; key < S; key++) {
                    const float *key_row = k + ((b * S + key) * Hkv + g) * Dh;
                    float score = 0.0f;
                    for (int64_t i = 0; i < Dh; i++) {
                        score += query[i] * key_row[i];
                    }
                    weights[key] = mask_allowed(mask, b, t, key) ? scale * score : -INFINITY;
                    largest = weights[key] > largest ? weights[key] : largest;
                }
                for (int64_t key = 0; key < S; key++) {
                    weights[key] = largest == -INFINITY ? 0.0f : expf(weights[key] - largest);
                    sum += weights[key];
                }
                float *row = out + ((b * S + t) * H + h) * Dh;
                for (int64_t i = 0; i < Dh; i++) {
                    float accumulated = 0.0f;
                    for (int64_t key = 0; key < S; key++) { /* masked keys too: 0 · v */
                        accumulated += weights[key] * v[((b * S + key) * Hkv + g) * Dh + i];
                    }
                    row[i] = sum > 0.0f ? accumulated / sum : 0.0f;
                }
                lse[(b * H + h) * S + t] = sum > 0.0f ? largest + logf(sum) : -INFINITY;
            }
        }
    }
    free(weights);
    return 0;
}

Test(kernel_cpu, a_kernel_multiplying_masked_pairs_by_zero__breaks_the_masked_values_contract) {
    cpparity_attention_kernel zero_weight = *cpparity_cpu_f32_kernel();
    zero_weight.name = "zero-weight";
    zero_weight.forward = zero_weight_forward;
    char report[1024] = "";
    cr_assert_not(masked_values_contract_check(&zero_weight, report, sizeof report));
    /* the smallest problem already shows it: query 0 of a causal S = 2 with v[1] = Inf */
    cr_expect(strstr(report, "causal S=2") != NULL && strstr(report, "changed out") != NULL, "%s",
              report);
}
