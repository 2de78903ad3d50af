/*
 * gpu_implementation_cuda.cu — the cuda implementation (distributed/models/implementation_cuda.cu)
 * against the cpu one, both through the implementation interface the harness uses, on the same
 * inputs and weights: full, sliding, chunked (row and document grids), packed rows with padding,
 * grouped-query and multi-query attention, tied embeddings; float32 and bf16 storage; cp 1 and
 * cp 2 (two local-communicator ranks as threads sharing the device, each with its own stream);
 * with a kernel that has block calls, ring attention at cp 2 and hybrid 2x2 at cp 4 (contiguous
 * and zigzag: Ulysses pairs split from the four ranks, the ring across them; the kv heads fewer
 * than cp). Loss, each rank's logits and every gradient are compared; gradients must be
 * bit-identical across ranks; two runs must give identical bits.
 *
 * The attention kernel of the cuda runs is "cpu-f32-staged", this test's CUDA-device wrapper of
 * the built-in CPU kernel (device buffers copied to the host and back): the model code is
 * then compared with the same attention arithmetic as the cpu run. When the registry holds the
 * CUDA kernel "cuda-f32" (kernel_cuda.h), every comparison runs with it too.
 *
 * Every fault the cuda implementation plants (model_cuda_faults.cu) is run beside the cpu
 * implementation with the same fault: both must deviate alike.
 *
 * The checks that need no device (refusals, the built-in kernel's faults, available) run first;
 * then, without a CUDA device, the test prints why and exits 77 (skipped).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/model_parameters.h"
#include "distributed/comm/comm_local.h"
#include "distributed/models/implementation.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_cuda.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/cp/shard.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"

extern const cpparity_implementation cpparity_cuda_implementation;
}

/* MAX_RANKS: the hybrid's 2x2; Ulysses and ring run at cp 1 and 2 */
enum { SKIPPED = 77, MAX_RANKS = 4, BATCH = 2, SEQ_LEN = 11 /* odd: cp 2 and 4 pad */ };
#define SEED 20261207u
#define TIMEOUT 120.0 /* seconds per collective: never reached by a passing run */

/* float32: both sides compute in float32 (unit roundoff 6e-8) but sum in other orders (cuBLAS
 * against OpenBLAS, block trees against loops) and call other expf/logf/pow/cos; on these 2-layer
 * models of width 8 that moves elements by ~1e-6 of a tensor's largest. 1e-4 of the largest
 * element leaves a wide margin, while a wrong index, slice or all-reduce moves elements by
 * their own size. */
#define F32_MAX_RELATIVE 1e-4

/* bf16: both store in bfloat16 (unit roundoff 2^-9 ≈ 2e-3) at the same points. A float32
 * difference of 1e-7 before a storage point now and then rounds a value the other way (one
 * bfloat16 ulp, ~0.5%), and the later layers carry that: the two runs then differ by bfloat16
 * noise, of the order of either run's distance to float64, which the cpu test bounds by the bf16
 * ceiling of docs/tolerances.md, relative L2 5e-2. A wrong slice, head or all-reduce is off by
 * O(1); whether the storage points round at all is checked apart (logits are bfloat16 values). */
#define BF16_RELATIVE_L2 5e-2

/* --- the staged kernel: the CPU kernel behind a CUDA-device interface ----------------------- */

/* Copies count floats between device and host on stream; 0 or 1 with a message. */
static int copy(void *to, const void *from, int64_t count, cudaMemcpyKind kind, void *stream,
                char *error, size_t capacity) {
    cudaError_t code =
        cudaMemcpyAsync(to, from, (size_t)count * sizeof(float), kind, (cudaStream_t)stream);
    if (code == cudaSuccess) {
        code = cudaStreamSynchronize((cudaStream_t)stream);
    }
    if (code != cudaSuccess) {
        snprintf(error, capacity, "staged kernel: copy failed: %s", cudaGetErrorString(code));
        return 1;
    }
    return 0;
}

/* Host buffers of one staged call. */
typedef struct staged_buffers {
    float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
} staged_buffers;

static bool staged_allocate(staged_buffers *h, const cpparity_attention_dims *dims) {
    const size_t q = (size_t)(dims->batch * dims->seq_len * dims->heads * dims->head_dim);
    const size_t kv = (size_t)(dims->batch * dims->seq_len * dims->kv_heads * dims->head_dim);
    const size_t lse = (size_t)(dims->batch * dims->heads * dims->seq_len);
    h->q = (float *)malloc(q * sizeof(float));
    h->k = (float *)malloc(kv * sizeof(float));
    h->v = (float *)malloc(kv * sizeof(float));
    h->out = (float *)malloc(q * sizeof(float));
    h->lse = (float *)malloc(lse * sizeof(float));
    h->dout = (float *)malloc(q * sizeof(float));
    h->dq = (float *)malloc(q * sizeof(float));
    h->dk = (float *)malloc(kv * sizeof(float));
    h->dv = (float *)malloc(kv * sizeof(float));
    return h->q && h->k && h->v && h->out && h->lse && h->dout && h->dq && h->dk && h->dv;
}

static void staged_free(staged_buffers *h) {
    free(h->q);
    free(h->k);
    free(h->v);
    free(h->out);
    free(h->lse);
    free(h->dout);
    free(h->dq);
    free(h->dk);
    free(h->dv);
}

static int staged_forward(void *context, void *out, float *lse, const void *q, const void *k,
                          const void *v, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, float scale, void *stream,
                          char *error, size_t capacity) {
    const cpparity_attention_kernel *cpu = (const cpparity_attention_kernel *)context;
    const int64_t nq = dims->batch * dims->seq_len * dims->heads * dims->head_dim;
    const int64_t nkv = dims->batch * dims->seq_len * dims->kv_heads * dims->head_dim;
    const int64_t nlse = dims->batch * dims->heads * dims->seq_len;
    staged_buffers h = {};
    int failed = staged_allocate(&h, dims) ? 0 : 1;
    if (failed) {
        snprintf(error, capacity, "staged kernel: out of memory");
    }
    failed = failed || copy(h.q, q, nq, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.k, k, nkv, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.v, v, nkv, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || cpu->forward(cpu->context, h.out, h.lse, h.q, h.k, h.v, mask, dims, scale,
                                    NULL, error, capacity) != 0;
    failed = failed || copy(out, h.out, nq, cudaMemcpyHostToDevice, stream, error, capacity);
    failed = failed || copy(lse, h.lse, nlse, cudaMemcpyHostToDevice, stream, error, capacity);
    staged_free(&h);
    return failed;
}

static int staged_backward(void *context, void *dq, void *dk, void *dv, const void *dout,
                           const void *q, const void *k, const void *v, const void *out,
                           const float *lse, const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims, float scale, void *stream,
                           char *error, size_t capacity) {
    const cpparity_attention_kernel *cpu = (const cpparity_attention_kernel *)context;
    const int64_t nq = dims->batch * dims->seq_len * dims->heads * dims->head_dim;
    const int64_t nkv = dims->batch * dims->seq_len * dims->kv_heads * dims->head_dim;
    const int64_t nlse = dims->batch * dims->heads * dims->seq_len;
    staged_buffers h = {};
    int failed = staged_allocate(&h, dims) ? 0 : 1;
    if (failed) {
        snprintf(error, capacity, "staged kernel: out of memory");
    }
    failed = failed || copy(h.q, q, nq, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.k, k, nkv, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.v, v, nkv, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.out, out, nq, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.lse, lse, nlse, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || copy(h.dout, dout, nq, cudaMemcpyDeviceToHost, stream, error, capacity);
    failed = failed || cpu->backward(cpu->context, h.dq, h.dk, h.dv, h.dout, h.q, h.k, h.v, h.out,
                                     h.lse, mask, dims, scale, NULL, error, capacity) != 0;
    failed = failed || copy(dq, h.dq, nq, cudaMemcpyHostToDevice, stream, error, capacity);
    failed = failed || copy(dk, h.dk, nkv, cudaMemcpyHostToDevice, stream, error, capacity);
    failed = failed || copy(dv, h.dv, nkv, cudaMemcpyHostToDevice, stream, error, capacity);
    staged_free(&h);
    return failed;
}

static cpparity_attention_kernel staged_kernel(void) {
    cpparity_attention_kernel kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.abi_version = CPPARITY_KERNEL_ABI_VERSION;
    kernel.struct_size = sizeof kernel;
    kernel.name = "cpu-f32-staged";
    kernel.version = "test";
    kernel.device = CPPARITY_KERNEL_DEVICE_CUDA;
    kernel.dtype = CPPARITY_KERNEL_DTYPE_FLOAT32;
    kernel.deterministic = 1;
    kernel.context = (void *)cpparity_cpu_f32_kernel();
    kernel.forward = staged_forward;
    kernel.backward = staged_backward;
    return kernel;
}

/* The CUDA kernel cuda-f32 from the registry; under the CPU emulation (tests/emulation/README.md,
 * where the registry holds no CUDA kernel) the emulated one. */
static const cpparity_attention_kernel *cuda_f32_kernel(void) {
#ifdef CPPARITY_CUDA_EMULATION
    return cpparity_cuda_f32_kernel();
#else
    return kernel_registry_find("cuda-f32");
#endif
}

/* --- the configurations ---------------------------------------------------------------------- */

static int64_t one_document[] = {SEQ_LEN}, two_documents[] = {4, 5}, three_documents[] = {3, 1, 5};

/* Whole rows; left padding, two documents, right padding; one document with left padding. */
static const cpparity_row_layout plain_rows[BATCH] = {{0, 1, one_document, 0, false, NULL},
                                                      {0, 1, one_document, 0, false, NULL}};
static const cpparity_row_layout packed_rows[BATCH] = {{1, 2, two_documents, 1, false, NULL},
                                                       {2, 3, three_documents, 0, false, NULL}};

typedef struct test_case {
    const char *name;
    cpparity_model_config config;
    const cpparity_row_layout *rows;
} test_case;

/* V 13, D 8, two layers, H 4, Hkv kv_heads, Dh 4, F 12, W = C = 3. */
static cpparity_model_config small_model(cpparity_layer_type first, cpparity_layer_type second,
                                         int64_t kv_heads) {
    cpparity_model_config config;
    memset(&config, 0, sizeof config);
    cpparity_model_config_set_defaults(&config);
    config.vocab_size = 13;
    config.hidden_size = 8;
    config.num_hidden_layers = 2;
    config.num_attention_heads = 4;
    config.num_key_value_heads = kv_heads;
    config.head_dim = 4;
    config.intermediate_size = 12;
    config.layer_types[0] = first;
    config.layer_types[1] = second;
    config.sliding_window = 3;
    config.attention_chunk_size = 3;
    return config;
}

static int make_cases(test_case *cases) {
    int n = 0;
    cases[n++] = {"full", small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL, 2), plain_rows};
    cases[n++] = {"sliding-packed", small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_FULL, 2),
                  packed_rows};
    cases[n++] = {"chunked-packed", small_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_SLIDING, 2),
                  packed_rows};
    cases[n] = {"chunked-document-grid",
                small_model(CPPARITY_LAYER_CHUNKED, CPPARITY_LAYER_CHUNKED, 4), packed_rows};
    cases[n++].config.chunk_origin = CPPARITY_CHUNK_ORIGIN_DOCUMENT;
    cases[n++] = {"multi-query-kv-replicated",
                  small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_CHUNKED, 1), packed_rows};
    cases[n] = {"tied-embeddings", small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING, 2),
                packed_rows};
    cases[n++].config.tie_word_embeddings = true;
    return n;
}

/* --- one run of an implementation on cp local ranks ------------------------------------------ */

typedef struct inputs {
    cpparity_model_config config;
    cpparity_batch batch;        /* every rank gets the whole batch */
    cpparity_tensor_table table; /* the parameter table */
    double *weights;             /* fixture weights */
} inputs;

typedef struct outputs {
    int ranks;
    int64_t logits_count; /* per rank: B·L·V */
    float loss[MAX_RANKS];
    float *logits[MAX_RANKS];
    float *gradients[MAX_RANKS]; /* by the table */
} outputs;

typedef struct run {
    const cpparity_implementation *implementation;
    const cpparity_attention_kernel *kernel;
    cpparity_dtype dtype;
    const inputs *in;
    outputs *out;
    cpparity_fault fault;                /* planted (NONE normally) */
    cpparity_algorithm_choice algorithm; /* Ulysses, ring or hybrid */
    cpparity_layout layout;              /* who holds what (shard.h) */
} run;

static const cpparity_algorithm_choice ULYSSES = {CPPARITY_ALGORITHM_ULYSSES, 0, 0};
static const cpparity_algorithm_choice RING = {CPPARITY_ALGORITHM_RING, 0, 0};
static const cpparity_algorithm_choice HYBRID = {CPPARITY_ALGORITHM_HYBRID, 2, 2}; /* cp 4 */

/* The ranks an algorithm runs on here: a hybrid at U·R, the others at cp. */
static int ranks_of(cpparity_algorithm_choice algorithm, int cp) {
    return algorithm.kind == CPPARITY_ALGORITHM_HYBRID
               ? (int)(algorithm.ulysses_degree * algorithm.ring_degree)
               : cp;
}

/* The algorithm's name in labels (the only hybrid run here is HYBRID, 2x2). */
static const char *algorithm_label(cpparity_algorithm_choice algorithm) {
    return algorithm.kind == CPPARITY_ALGORITHM_RING     ? "ring"
           : algorithm.kind == CPPARITY_ALGORITHM_HYBRID ? "hybrid:2x2"
                                                         : "ulysses";
}

#define RANK_CHECK(condition, ...)                                                                 \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, __VA_ARGS__);                        \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

static cpparity_status rank_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const run *r = (const run *)argument;
    const cpparity_implementation *implementation = r->implementation;
    const inputs *in = r->in;
    outputs *out = r->out;
    const cpparity_implementation_setup setup = {
        &in->config, BATCH, SEQ_LEN, r->dtype, comm, r->kernel, r->fault, r->layout, r->algorithm};
    void *instance = NULL;
    cpparity_status status = implementation->create(&setup, &instance, error);
    RANK_CHECK(status == CPPARITY_OK, "create: %s", error->message);
    status = implementation->load_parameters(instance, &in->table, in->weights, error);
    RANK_CHECK(status == CPPARITY_OK, "load_parameters: %s", error->message);
    status = implementation->forward(instance, &in->batch, error);
    RANK_CHECK(status == CPPARITY_OK, "forward: %s", error->message);
    status = implementation->backward(instance, error);
    RANK_CHECK(status == CPPARITY_OK, "backward: %s", error->message);
    status = implementation->read_loss(instance, &out->loss[comm->rank], error);
    RANK_CHECK(status == CPPARITY_OK, "read_loss: %s", error->message);
    status =
        implementation->read_logits(instance, out->logits[comm->rank], out->logits_count, error);
    RANK_CHECK(status == CPPARITY_OK, "read_logits: %s", error->message);
    RANK_CHECK(implementation->gradient_count(instance) == in->table.count,
               "gradient_count %lld, table %lld",
               (long long)implementation->gradient_count(instance), (long long)in->table.count);
    for (int64_t e = 0; e < in->table.count; e++) {
        const cpparity_tensor_entry *entry = &in->table.entries[e];
        const char *name = implementation->gradient_name(instance, e);
        RANK_CHECK(name != NULL && strcmp(name, entry->name) == 0,
                   "gradient_name %lld is %s, the table says %s", (long long)e,
                   name != NULL ? name : "NULL", entry->name);
        status = implementation->read_gradient(
            instance, entry->name, out->gradients[comm->rank] + entry->offset, entry->count, error);
        RANK_CHECK(status == CPPARITY_OK, "read_gradient %s: %s", entry->name, error->message);
    }
    RANK_CHECK(implementation->gradient_name(instance, in->table.count) == NULL,
               "a name past the last gradient");
    status = CPPARITY_OK;
done:
    implementation->destroy(instance);
    return status;
}

static void outputs_free(outputs *out) {
    for (int r = 0; r < MAX_RANKS; r++) {
        free(out->logits[r]);
        free(out->gradients[r]);
    }
    memset(out, 0, sizeof *out);
}

/* Runs the implementation on `ranks` local ranks into *out; false (printed) when a rank failed. */
static bool run_ranks(const cpparity_implementation *implementation,
                      const cpparity_attention_kernel *kernel, cpparity_dtype dtype,
                      const inputs *in, int ranks, outputs *out, const char *label,
                      cpparity_fault fault, cpparity_algorithm_choice algorithm,
                      cpparity_layout layout) {
    memset(out, 0, sizeof *out);
    out->ranks = ranks;
    const shard_layout shard = shard_layout_make(SEQ_LEN, ranks, 0, layout);
    out->logits_count = BATCH * shard.local_len * in->config.vocab_size;
    for (int r = 0; r < ranks; r++) {
        out->logits[r] = (float *)calloc((size_t)out->logits_count, sizeof(float));
        out->gradients[r] = (float *)calloc((size_t)in->table.total, sizeof(float));
        if (out->logits[r] == NULL || out->gradients[r] == NULL) {
            fprintf(stderr, "%s: out of memory\n", label);
            return false;
        }
    }
    run r = {implementation, kernel, dtype, in, out, fault, algorithm, layout};
    cpparity_status statuses[MAX_RANKS];
    cpparity_error errors[MAX_RANKS], error;
    if (comm_local_run(ranks, TIMEOUT, rank_body, &r, statuses, errors, &error) != CPPARITY_OK) {
        fprintf(stderr, "%s: %s\n", label, error.message);
        return false;
    }
    bool passed = true;
    for (int rank = 0; rank < ranks; rank++) {
        if (statuses[rank] != CPPARITY_OK) {
            fprintf(stderr, "%s: %s rank %d: %s\n", label, implementation->name, rank,
                    errors[rank].message);
            passed = false;
        }
    }
    return passed;
}

/* --- comparisons ------------------------------------------------------------------------------ */

/* Whether got is within the dtype's tolerance of want (count elements); prints when not. */
static bool close_tensor(const float *got, const float *want, int64_t count, cpparity_dtype dtype,
                         const char *label, const char *what) {
    double largest = 0.0, worst = 0.0, difference = 0.0, norm = 0.0;
    int64_t worst_index = 0;
    for (int64_t i = 0; i < count; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        largest = fmax(largest, fabs((double)want[i]));
        if (d > worst || isnan(d)) {
            worst = isnan(d) ? INFINITY : d;
            worst_index = i;
        }
        difference += d * d;
        norm += (double)want[i] * (double)want[i];
    }
    const double measured = dtype == CPPARITY_DTYPE_F32
                                ? worst / (largest > 0.0 ? largest : 1.0)
                                : sqrt(difference / (norm > 0.0 ? norm : 1.0));
    const double bound = dtype == CPPARITY_DTYPE_F32 ? F32_MAX_RELATIVE : BF16_RELATIVE_L2;
    if (!(measured <= bound)) {
        fprintf(stderr,
                "%s: %s off the cpu run by %.3g (%s, bound %g); worst [%lld] %.9g against "
                "%.9g\n",
                label, what, measured,
                dtype == CPPARITY_DTYPE_F32 ? "max relative to the largest" : "relative L2", bound,
                (long long)worst_index, (double)got[worst_index], (double)want[worst_index]);
        return false;
    }
    return true;
}

static bool is_bfloat16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & 0xffffu) == 0;
}

/* The cuda run against the cpu run, rank by rank, tensor by tensor. */
static bool compare_runs(const outputs *cuda, const outputs *cpu, const inputs *in,
                         cpparity_dtype dtype, const char *label, bool ranks_agree) {
    bool passed = true;
    for (int r = 0; r < cuda->ranks; r++) {
        char what[160];
        snprintf(what, sizeof what, "rank %d loss", r);
        passed = close_tensor(&cuda->loss[r], &cpu->loss[r], 1, dtype, label, what) && passed;
        snprintf(what, sizeof what, "rank %d logits", r);
        passed =
            close_tensor(cuda->logits[r], cpu->logits[r], cuda->logits_count, dtype, label, what) &&
            passed;
        for (int64_t e = 0; e < in->table.count; e++) {
            const cpparity_tensor_entry *entry = &in->table.entries[e];
            snprintf(what, sizeof what, "rank %d grads/%s", r, entry->name);
            passed =
                close_tensor(cuda->gradients[r] + entry->offset, cpu->gradients[r] + entry->offset,
                             entry->count, dtype, label, what) &&
                passed;
        }
        if (dtype == CPPARITY_DTYPE_BF16) {
            bool logits_bf16 = true, gradients_bf16 = true;
            for (int64_t i = 0; i < cuda->logits_count; i++) {
                logits_bf16 = logits_bf16 && is_bfloat16(cuda->logits[r][i]);
            }
            for (int64_t i = 0; i < in->table.total; i++) {
                gradients_bf16 = gradients_bf16 && is_bfloat16(cuda->gradients[r][i]);
            }
            if (!logits_bf16 || gradients_bf16) {
                fprintf(stderr, "%s: rank %d: logits %s bfloat16, gradients %s float32\n", label, r,
                        logits_bf16 ? "are" : "are NOT", gradients_bf16 ? "are NOT" : "are");
                passed = false;
            }
        }
        if (ranks_agree && r > 0 &&
            memcmp(cuda->gradients[r], cuda->gradients[0],
                   (size_t)in->table.total * sizeof(float)) != 0) {
            fprintf(stderr, "%s: rank %d's gradients differ from rank 0's\n", label, r);
            passed = false;
        }
    }
    return passed;
}

/* Two runs give the same bits. */
static bool identical_runs(const outputs *a, const outputs *b, const inputs *in,
                           const char *label) {
    bool same = true;
    for (int r = 0; r < a->ranks; r++) {
        same =
            same && memcmp(&a->loss[r], &b->loss[r], sizeof(float)) == 0 &&
            memcmp(a->logits[r], b->logits[r], (size_t)a->logits_count * sizeof(float)) == 0 &&
            memcmp(a->gradients[r], b->gradients[r], (size_t)in->table.total * sizeof(float)) == 0;
    }
    if (!same) {
        fprintf(stderr, "%s: two runs on the same inputs differ in their bits\n", label);
    }
    return same;
}

static bool inputs_make(inputs *in, const test_case *test) {
    memset(in, 0, sizeof *in);
    in->config = test->config;
    cpparity_error error;
    if (fixture_batch_build(&in->batch, test->rows, BATCH, SEQ_LEN, in->config.vocab_size, SEED,
                            &error) != CPPARITY_OK ||
        cpparity_model_parameter_table(&in->config, &in->table, &error) != CPPARITY_OK) {
        fprintf(stderr, "%s: %s\n", test->name, error.message);
        return false;
    }
    in->weights = (double *)malloc((size_t)in->table.total * sizeof(double));
    if (in->weights == NULL) {
        fprintf(stderr, "%s: out of memory\n", test->name);
        return false;
    }
    fixture_fill_parameters(in->weights, &in->table, SEED);
    return true;
}

static void inputs_free(inputs *in) {
    cpparity_batch_free(&in->batch);
    cpparity_tensor_table_free(&in->table);
    free(in->weights);
}

/* One case, dtype, cp, kernel, algorithm and layout: cuda against cpu; with repeat, a second
 * cuda run too. Ring attention on the GPU runs ring.c's steps through device operations
 * (model_cuda_ring.cu), on the CPU through host ones: the same steps, rows and merge order; a
 * hybrid adds the Ulysses groups' all-to-alls (device to device between the local ranks). */
static bool check_one(const test_case *test, const inputs *in, cpparity_dtype dtype, int ranks,
                      const cpparity_attention_kernel *kernel, cpparity_algorithm_choice algorithm,
                      cpparity_layout layout, bool repeat) {
    char label[256];
    snprintf(label, sizeof label, "%s %s cp %d kernel %s %s %s", test->name,
             cpparity_dtype_name(dtype), ranks, kernel->name, algorithm_label(algorithm),
             cpparity_layout_name(layout));
    outputs cpu, cuda, again;
    memset(&again, 0, sizeof again);
    bool passed = run_ranks(&cpparity_cpu_implementation, cpparity_cpu_f32_kernel(), dtype, in,
                            ranks, &cpu, label, CPPARITY_FAULT_NONE, algorithm, layout);
    passed = run_ranks(&cpparity_cuda_implementation, kernel, dtype, in, ranks, &cuda, label,
                       CPPARITY_FAULT_NONE, algorithm, layout) &&
             passed;
    passed = passed && compare_runs(&cuda, &cpu, in, dtype, label, true);
    if (passed && repeat) {
        passed = run_ranks(&cpparity_cuda_implementation, kernel, dtype, in, ranks, &again, label,
                           CPPARITY_FAULT_NONE, algorithm, layout) &&
                 identical_runs(&cuda, &again, in, label);
    }
    printf("%-70s %s\n", label, passed ? "ok" : "FAILED");
    outputs_free(&cpu);
    outputs_free(&cuda);
    outputs_free(&again);
    return passed;
}

/* --- what needs no device -----------------------------------------------------------------------
 */

/* check refuses a CPU kernel, a bfloat16 kernel and an impossible cp, naming them; create refuses
 * the built-in CPU kernel's faults before touching the device. */
static bool check_refusals(void) {
    const cpparity_implementation *cuda = &cpparity_cuda_implementation;
    const cpparity_model_config config =
        small_model(CPPARITY_LAYER_SLIDING, CPPARITY_LAYER_FULL, 2);
    cpparity_attention_kernel staged = staged_kernel(), bf16 = staged_kernel();
    bf16.dtype = CPPARITY_KERNEL_DTYPE_BFLOAT16;
    cpparity_error error;
    bool passed = true;
    const struct {
        int64_t cp;
        const cpparity_attention_kernel *kernel;
        const char *expected; /* NULL: accepted */
    } checks[] = {
        {2, &staged, NULL},
        {2, cpparity_cpu_f32_kernel(), "refused: the cuda implementation needs a CUDA float32"},
        {2, &bf16, "refused: the cuda implementation needs a CUDA float32"},
        {3, &staged, "refused: num_attention_heads"},
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        for (int dtype = 0; dtype < CPPARITY_DTYPE_COUNT; dtype++) {
            error.message[0] = '\0';
            const cpparity_status status =
                cuda->check(&config, checks[i].cp, (cpparity_dtype)dtype,
                            {CPPARITY_ALGORITHM_ULYSSES, 0, 0}, checks[i].kernel, &error);
            const bool ok = checks[i].expected == NULL
                                ? status == CPPARITY_OK
                                : status == CPPARITY_ERROR_INPUT &&
                                      strstr(error.message, checks[i].expected) != NULL;
            if (!ok) {
                fprintf(stderr, "check %zu (%s): status %d, message '%s'\n", i,
                        checks[i].kernel->name, (int)status, error.message);
                passed = false;
            }
        }
    }
    /* ring at cp 2 and hybrid 2x2 at cp 4 are accepted with a kernel that has block calls;
     * without block calls, or with U·R other than cp, or U not dividing the heads, refused */
    const cpparity_attention_kernel *block_kernel = cuda_f32_kernel();
    if (block_kernel == NULL || !cuda->algorithms[CPPARITY_ALGORITHM_HYBRID]) {
        fprintf(stderr, "no cuda-f32 kernel, or the cuda implementation declares no hybrid\n");
        passed = false;
    }
    const struct {
        int64_t cp;
        cpparity_algorithm_choice algorithm;
        const cpparity_attention_kernel *kernel;
        const char *expected; /* NULL: accepted */
    } algorithm_checks[] = {
        {2, RING, block_kernel, NULL},
        {4, HYBRID, block_kernel, NULL},
        {2, RING, &staged, "refused: ring attention needs block calls"},
        {4, HYBRID, &staged, "refused: ring attention needs block calls"},
        {2, HYBRID, block_kernel, "refused: hybrid 2x2 needs cp = 4, not 2"},
        {6, {CPPARITY_ALGORITHM_HYBRID, 3, 2}, block_kernel, "refused: num_attention_heads"},
    };
    for (size_t i = 0;
         block_kernel != NULL && i < sizeof algorithm_checks / sizeof *algorithm_checks; i++) {
        error.message[0] = '\0';
        const cpparity_status status =
            cuda->check(&config, algorithm_checks[i].cp, CPPARITY_DTYPE_F32,
                        algorithm_checks[i].algorithm, algorithm_checks[i].kernel, &error);
        const bool ok = algorithm_checks[i].expected == NULL
                            ? status == CPPARITY_OK
                            : status == CPPARITY_ERROR_INPUT &&
                                  strstr(error.message, algorithm_checks[i].expected) != NULL;
        if (!ok) {
            fprintf(stderr,
                    "algorithm check %zu (%s, U %lld R %lld, at cp %lld): status %d, message "
                    "'%s'\n",
                    i, algorithm_label(algorithm_checks[i].algorithm),
                    (long long)algorithm_checks[i].algorithm.ulysses_degree,
                    (long long)algorithm_checks[i].algorithm.ring_degree,
                    (long long)algorithm_checks[i].cp, (int)status, error.message);
            passed = false;
        }
    }
    /* the built-in CPU kernel's faults: refused before any device work, naming the fault */
    cpparity_comm fake;
    memset(&fake, 0, sizeof fake);
    fake.kind = "local";
    fake.size = 1;
    int kernel_faults = 0;
    for (int fault = 1; fault < CPPARITY_FAULT_COUNT; fault++) {
        if (!cpparity_faults[fault].kernel) {
            continue; /* planted on the device: check_faults */
        }
        kernel_faults++;
        const cpparity_implementation_setup setup = {&config,
                                                     BATCH,
                                                     SEQ_LEN,
                                                     CPPARITY_DTYPE_F32,
                                                     &fake,
                                                     &staged,
                                                     (cpparity_fault)fault,
                                                     CPPARITY_LAYOUT_CONTIGUOUS,
                                                     {CPPARITY_ALGORITHM_ULYSSES, 0, 0}};
        void *instance = (void *)&fake;
        const cpparity_status status = cuda->create(&setup, &instance, &error);
        char expected[128];
        snprintf(expected, sizeof expected, "refused: fault %s lives in the built-in cpu-f32",
                 cpparity_fault_name((cpparity_fault)fault));
        if (status != CPPARITY_ERROR_INPUT || instance != NULL ||
            strstr(error.message, expected) == NULL) {
            fprintf(stderr, "fault %s: status %d, message '%s'\n",
                    cpparity_fault_name((cpparity_fault)fault), (int)status, error.message);
            passed = false;
        }
    }
    if (kernel_faults == 0) {
        fprintf(stderr, "no fault of the built-in kernel in the table\n");
        passed = false;
    }
    cuda->destroy(NULL);
    printf("%-70s %s\n", "refusals before compute", passed ? "ok" : "FAILED");
    return passed;
}

/* --- planted faults, on the device ------------------------------------------------------------
 */

/* Every fault the cuda implementation plants, on the multi-query case (kv replicated, packed
 * rows with padding, an odd length cp pads): the cuda run with the fault against the cpu run with
 * the same fault, within the float32 tolerance — both must deviate alike. Ulysses's faults run at
 * cp 2 with kernel; the ring's at cp 2 under ring attention and hybrid-group-across-ring under
 * hybrid 2x2 at cp 4, both with ring_kernel (block calls; skipped, said so, without one); a fault
 * the cuda implementation does not run is named and skipped. Whether the fault moved the cpu
 * result at all on this case is printed ("no effect here" means this check cannot tell whether
 * the cuda side planted it; the self-test on the GPU covers those). */
static bool check_faults(const inputs *in, const cpparity_attention_kernel *kernel,
                         const cpparity_attention_kernel *ring_kernel) {
    int failed = 0, without_effect = 0;
    enum { CLEAN_RUNS = 3 };
    outputs clean[CLEAN_RUNS];
    memset(clean, 0, sizeof clean);
    const cpparity_algorithm_choice algorithms[CLEAN_RUNS] = {ULYSSES, RING, HYBRID};
    for (int a = 0; a < CLEAN_RUNS; a++) {
        if (!run_ranks(&cpparity_cpu_implementation, cpparity_cpu_f32_kernel(), CPPARITY_DTYPE_F32,
                       in, ranks_of(algorithms[a], 2), &clean[a], "faults: clean cpu run",
                       CPPARITY_FAULT_NONE, algorithms[a], CPPARITY_LAYOUT_CONTIGUOUS)) {
            for (int b = 0; b < CLEAN_RUNS; b++) {
                outputs_free(&clean[b]);
            }
            return false;
        }
    }
    for (int f = 1; f < CPPARITY_FAULT_COUNT; f++) {
        const cpparity_fault fault = (cpparity_fault)f;
        if (cpparity_faults[fault].kernel) {
            continue;
        }
        const bool ring = fault_needs_block_calls(fault);
        const cpparity_attention_kernel *planted_with = ring ? ring_kernel : kernel;
        if (implementation_supports_fault(&cpparity_cuda_implementation, fault) !=
                IMPLEMENTATION_FAULT_SUPPORTED ||
            planted_with == NULL) {
            printf("%-70s %s\n", cpparity_fault_name(fault),
                   planted_with == NULL ? "not planted (no CUDA kernel with block calls)"
                                        : "not planted (the cuda implementation refuses it)");
            continue;
        }
        const bool hybrid = fault == CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING;
        const int which = hybrid ? 2 : ring ? 1 : 0;
        const cpparity_algorithm_choice algorithm = algorithms[which];
        const int ranks = ranks_of(algorithm, 2);
        const outputs *before = &clean[which];
        char label[160];
        snprintf(label, sizeof label, "fault %s cp %d kernel %s %s", cpparity_fault_name(fault),
                 ranks, planted_with->name, algorithm_label(algorithm));
        outputs cpu, cuda;
        bool passed =
            run_ranks(&cpparity_cpu_implementation, cpparity_cpu_f32_kernel(), CPPARITY_DTYPE_F32,
                      in, ranks, &cpu, label, fault, algorithm, CPPARITY_LAYOUT_CONTIGUOUS);
        passed = run_ranks(&cpparity_cuda_implementation, planted_with, CPPARITY_DTYPE_F32, in,
                           ranks, &cuda, label, fault, algorithm, CPPARITY_LAYOUT_CONTIGUOUS) &&
                 passed;
        /* grad-not-reduced and grad-reduce-order leave the ranks' gradients apart on purpose */
        const bool ranks_agree =
            fault != CPPARITY_FAULT_GRAD_NOT_REDUCED && fault != CPPARITY_FAULT_GRAD_REDUCE_ORDER;
        passed = passed && compare_runs(&cuda, &cpu, in, CPPARITY_DTYPE_F32, label, ranks_agree);
        bool moved = false;
        for (int r = 0; passed && r < ranks; r++) {
            moved = moved || cpu.loss[r] != before->loss[r] ||
                    memcmp(cpu.logits[r], before->logits[r],
                           (size_t)cpu.logits_count * sizeof(float)) != 0 ||
                    memcmp(cpu.gradients[r], before->gradients[r],
                           (size_t)in->table.total * sizeof(float)) != 0;
        }
        without_effect += passed && !moved;
        printf("%-70s %s\n", label, !passed ? "FAILED" : moved ? "ok" : "ok (no effect here)");
        failed += passed ? 0 : 1;
        outputs_free(&cpu);
        outputs_free(&cuda);
    }
    printf("faults planted alike: %d failed, %d without effect on this case\n", failed,
           without_effect);
    for (int b = 0; b < CLEAN_RUNS; b++) {
        outputs_free(&clean[b]);
    }
    return failed == 0;
}

/* --- misuse, on the device ---------------------------------------------------------------------
 */

static cpparity_status misuse_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    const inputs *in = (const inputs *)argument;
    const cpparity_implementation *implementation = &cpparity_cuda_implementation;
    const cpparity_attention_kernel kernel = staged_kernel();
    const cpparity_implementation_setup setup = {&in->config,
                                                 BATCH,
                                                 SEQ_LEN,
                                                 CPPARITY_DTYPE_F32,
                                                 comm,
                                                 &kernel,
                                                 CPPARITY_FAULT_NONE,
                                                 CPPARITY_LAYOUT_CONTIGUOUS,
                                                 {CPPARITY_ALGORITHM_ULYSSES, 0, 0}};
    void *instance = NULL;
    cpparity_error refusal;
    float loss, logit;
    cpparity_batch other = {};
    cpparity_status status = implementation->create(&setup, &instance, error);
    RANK_CHECK(status == CPPARITY_OK, "create: %s", error->message);
    RANK_CHECK(implementation->backward(instance, &refusal) == CPPARITY_ERROR_INPUT &&
                   strstr(refusal.message, "before forward") != NULL,
               "backward before forward: %s", refusal.message);
    RANK_CHECK(implementation->read_loss(instance, &loss, &refusal) == CPPARITY_ERROR_INPUT,
               "a loss before forward");
    RANK_CHECK(implementation->read_logits(instance, &logit, 1, &refusal) == CPPARITY_ERROR_INPUT,
               "logits before forward");
    RANK_CHECK(implementation->read_gradient(instance, "model.norm.weight", &logit, 1, &refusal) ==
                   CPPARITY_ERROR_INPUT,
               "a gradient before backward");
    RANK_CHECK(implementation->read_gradient(instance, "model.no_such.weight", &logit, 1,
                                             &refusal) == CPPARITY_ERROR_INPUT &&
                   strstr(refusal.message, "model.no_such.weight") != NULL,
               "an unknown gradient name: %s", refusal.message);
    status = cpparity_batch_allocate(&other, BATCH, SEQ_LEN + 1, error);
    RANK_CHECK(status == CPPARITY_OK, "batch: %s", error->message);
    RANK_CHECK(implementation->forward(instance, &other, &refusal) == CPPARITY_ERROR_INPUT,
               "a batch of another length was accepted");
    status = CPPARITY_OK;
done:
    cpparity_batch_free(&other);
    implementation->destroy(instance);
    return status;
}

static bool check_misuse(const inputs *in) {
    cpparity_status statuses[MAX_RANKS];
    cpparity_error errors[MAX_RANKS], error;
    const int ranks = 2;
    bool passed = comm_local_run(ranks, TIMEOUT, misuse_body, (void *)in, statuses, errors,
                                 &error) == CPPARITY_OK;
    for (int rank = 0; passed && rank < ranks; rank++) {
        if (statuses[rank] != CPPARITY_OK) {
            fprintf(stderr, "misuse: rank %d: %s\n", rank, errors[rank].message);
            passed = false;
        }
    }
    printf("%-70s %s\n", "misuse refused as bad input", passed ? "ok" : "FAILED");
    return passed;
}

int main(void) {
    int failed = check_refusals() ? 0 : 1;
    char why[512] = "";
    if (!cpparity_cuda_implementation.available(why, sizeof why)) {
        printf("SKIPPED: %s\n", why);
        return failed ? 1 : SKIPPED;
    }
    const cpparity_attention_kernel staged = staged_kernel();
    const cpparity_attention_kernel *kernels[2] = {&staged, cuda_f32_kernel()};
    const int kernel_count = kernels[1] != NULL ? 2 : 1;
    if (kernels[1] == NULL) {
        printf("note: no kernel cuda-f32 in the registry; the staged cpu kernel only\n");
    }
    test_case cases[8];
    const int case_count = make_cases(cases);
    for (int c = 0; c < case_count; c++) {
        inputs in;
        if (!inputs_make(&in, &cases[c])) {
            inputs_free(&in);
            return 1;
        }
        if (c == 0) {
            failed += check_misuse(&in) ? 0 : 1;
        }
        if (strcmp(cases[c].name, "multi-query-kv-replicated") == 0) {
            failed += check_faults(&in, &staged, kernels[1]) ? 0 : 1;
        }
        for (int k = 0; k < kernel_count; k++) {
            const bool blocks = kernel_has_block_calls(kernels[k]);
            for (int dtype = 0; dtype < CPPARITY_DTYPE_COUNT; dtype++) {
                const cpparity_dtype type = (cpparity_dtype)dtype;
                for (int ranks = 1; ranks <= 2; ranks++) {
                    /* two runs bit for bit: packed rows at cp 2, each dtype and kernel */
                    const bool repeat = c == 1 && ranks == 2;
                    failed += check_one(&cases[c], &in, type, ranks, kernels[k], ULYSSES,
                                        CPPARITY_LAYOUT_CONTIGUOUS, repeat)
                                  ? 0
                                  : 1;
                    /* ring attention at cp 2 with a kernel that has block calls (cuda-f32) */
                    if (ranks == 2 && blocks) {
                        failed += check_one(&cases[c], &in, type, ranks, kernels[k], RING,
                                            CPPARITY_LAYOUT_CONTIGUOUS, repeat)
                                      ? 0
                                      : 1;
                    }
                }
                /* hybrid 2x2 at cp 4, contiguous and zigzag: Ulysses pairs, the ring across */
                const cpparity_layout layouts[2] = {CPPARITY_LAYOUT_CONTIGUOUS,
                                                    CPPARITY_LAYOUT_ZIGZAG};
                for (int l = 0; blocks && l < 2; l++) {
                    failed += check_one(&cases[c], &in, type, ranks_of(HYBRID, 2), kernels[k],
                                        HYBRID, layouts[l], c == 1)
                                  ? 0
                                  : 1;
                }
            }
        }
        inputs_free(&in);
    }
    printf("gpu_implementation_cuda: %d failed\n", failed);
    return failed > 0 ? 1 : 0;
}
