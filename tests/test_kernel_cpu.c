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

static void expect_matches_reference(reference_attention_shape shape,
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
    const cpparity_attention_kernel *kernel = cpparity_cpu_f32_kernel();
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
                      "seed %llu type %d W=%lld C=%lld Hkv=%lld: %s differs by %.3e",
                      (unsigned long long)seed, (int)layer.type, (long long)layer.window,
                      (long long)layer.chunk_size, (long long)shape.kv_heads, tensors[t].name,
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
