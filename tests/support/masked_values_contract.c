/*
 * masked_values_contract.c — see masked_values_contract.h.
 */
#include "tests/support/masked_values_contract.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/attention_layer.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"

/* One small problem: sizes, a layer, and the layout of its rows. */
typedef struct contract_problem {
    const char *name;
    int64_t batch, seq_len, heads, kv_heads;
    cpparity_attention_layer layer;
    int64_t left_padding[2], right_padding[2]; /* per row */
    int64_t document_length;                   /* 0: one document per row */
} contract_problem;

/* S = 70 spans several tiles of every built-in kernel (8, 16, 32, 64 keys), with a partial last
 * one; two query heads share a kv head. The first problem is the smallest that shows 0 · Inf. */
static const contract_problem problems[] = {
    {"causal S=2", 1, 2, 1, 1, {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW}, {0}, {0}, 0},
    {"full, padding, packed",
     2,
     70,
     2,
     1,
     {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW},
     {5, 0},
     {0, 9},
     23},
    {"sliding W=5",
     2,
     70,
     2,
     1,
     {CPPARITY_LAYER_SLIDING, 5, 0, CPPARITY_CHUNK_ORIGIN_ROW},
     {5, 0},
     {0, 9},
     23},
    {"chunked C=16 (row)",
     2,
     70,
     2,
     1,
     {CPPARITY_LAYER_CHUNKED, 0, 16, CPPARITY_CHUNK_ORIGIN_ROW},
     {5, 0},
     {0, 9},
     23},
    {"chunked C=7 (document)",
     2,
     70,
     2,
     1,
     {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_DOCUMENT},
     {5, 0},
     {0, 9},
     23},
    {"chunked C=7 (position)",
     2,
     70,
     2,
     1,
     {CPPARITY_LAYER_CHUNKED, 0, 7, CPPARITY_CHUNK_ORIGIN_POSITION},
     {5, 0},
     {0, 9},
     23},
};

/* Every tensor of one problem, with a run's outputs. */
typedef struct contract_run {
    float *q, *k, *v, *dout;
    float *out, *lse, *dq, *dk, *dv;
} contract_run;

typedef struct contract_state {
    const cpparity_attention_kernel *kernel;
    const contract_problem *problem;
    cpparity_attention_dims dims;
    cpparity_mask_description mask;
    int64_t query_count, key_count, rows; /* elements of q, of k, rows of lse */
    char *report;
    size_t size;
} contract_state;

static void run_free(contract_run *run) {
    float *const all[] = {run->q,   run->k,  run->v,  run->dout, run->out,
                          run->lse, run->dq, run->dk, run->dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
    memset(run, 0, sizeof *run);
}

static bool run_allocate(contract_run *run, const contract_state *state) {
    memset(run, 0, sizeof *run);
    const size_t queries = (size_t)state->query_count, keys = (size_t)state->key_count;
    run->q = malloc(queries * sizeof(float));
    run->dout = malloc(queries * sizeof(float));
    run->out = malloc(queries * sizeof(float));
    run->dq = malloc(queries * sizeof(float));
    run->k = malloc(keys * sizeof(float));
    run->v = malloc(keys * sizeof(float));
    run->dk = malloc(keys * sizeof(float));
    run->dv = malloc(keys * sizeof(float));
    run->lse = malloc((size_t)state->rows * sizeof(float));
    return run->q && run->dout && run->out && run->dq && run->k && run->v && run->dk && run->dv &&
           run->lse;
}

static void run_copy_inputs(contract_run *to, const contract_run *from,
                            const contract_state *state) {
    memcpy(to->q, from->q, (size_t)state->query_count * sizeof(float));
    memcpy(to->dout, from->dout, (size_t)state->query_count * sizeof(float));
    memcpy(to->k, from->k, (size_t)state->key_count * sizeof(float));
    memcpy(to->v, from->v, (size_t)state->key_count * sizeof(float));
}

/* The kernel's forward, then its backward on the forward's own out and lse. */
static bool run_kernel(contract_state *state, contract_run *run, const char *what) {
    const cpparity_attention_kernel *kernel = state->kernel;
    const float scale = 1.0f / sqrtf((float)state->dims.head_dim);
    char message[512] = "";
    if (kernel->forward(kernel->context, run->out, run->lse, run->q, run->k, run->v, &state->mask,
                        &state->dims, scale, NULL, message, sizeof message) != 0 ||
        kernel->backward(kernel->context, run->dq, run->dk, run->dv, run->dout, run->q, run->k,
                         run->v, run->out, run->lse, &state->mask, &state->dims, scale, NULL,
                         message, sizeof message) != 0) {
        snprintf(state->report, state->size, "%s, %s: %s failed: %s", state->problem->name, what,
                 kernel->name, message);
        return false;
    }
    return true;
}

/* Does the kernel take this problem (capabilities, then its own test)? */
static bool kernel_takes(const contract_state *state) {
    const cpparity_attention_kernel *kernel = state->kernel;
    const cpparity_attention_layer *layer = &state->problem->layer;
    uint32_t needs = CPPARITY_KERNEL_SUPPORTS_KEY_PADDING | CPPARITY_KERNEL_SUPPORTS_DOCUMENTS |
                     CPPARITY_KERNEL_SUPPORTS_FULLY_MASKED_ROWS;
    if (layer->type == CPPARITY_LAYER_SLIDING) {
        needs |= CPPARITY_KERNEL_SUPPORTS_SLIDING;
    } else if (layer->type == CPPARITY_LAYER_CHUNKED) {
        needs |= layer->chunk_origin == CPPARITY_CHUNK_ORIGIN_ROW
                     ? CPPARITY_KERNEL_SUPPORTS_CHUNKED_ROW
                 : layer->chunk_origin == CPPARITY_CHUNK_ORIGIN_DOCUMENT
                     ? CPPARITY_KERNEL_SUPPORTS_CHUNKED_DOCUMENT
                     : CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION;
    }
    if ((kernel->capabilities & needs) != needs) {
        return false;
    }
    char why[256] = "";
    return kernel->supports == NULL ||
           kernel->supports(kernel->context, &state->mask, &state->dims, why, sizeof why) == 1;
}

/* Whether element i of a tensor whose mask says it must not move kept its value: the same bits
 * for a deterministic kernel; for another, at least finite where it was finite. */
static bool kept(const contract_state *state, float before, float after) {
    if (state->kernel->deterministic) {
        return memcmp(&before, &after, sizeof before) == 0;
    }
    return !isfinite(before) || isfinite(after);
}

/* Compares tensor ([B, S, heads, Dh], or lse [B, H, S] when head_dim is 0) of the clean and the
 * poisoned run at every element whose (b, t) keep_apart says is out of the poison's reach. */
typedef bool (*reach_test)(const contract_state *state, int64_t poisoned_b, int64_t poisoned_t,
                           int64_t b, int64_t t);

static bool compare_tensor(contract_state *state, const char *tensor, const char *poison,
                           const float *clean, const float *poisoned, int64_t heads,
                           int64_t head_dim, int64_t poisoned_b, int64_t poisoned_t,
                           reach_test reached) {
    const int64_t S = state->dims.seq_len;
    for (int64_t b = 0; b < state->dims.batch; b++) {
        for (int64_t t = 0; t < S; t++) {
            if (b == poisoned_b && reached(state, poisoned_b, poisoned_t, b, t)) {
                continue;
            }
            for (int64_t h = 0; h < heads; h++) {
                for (int64_t d = 0; d < (head_dim > 0 ? head_dim : 1); d++) {
                    const int64_t at = head_dim > 0 ? ((b * S + t) * heads + h) * head_dim + d
                                                    : (b * heads + h) * S + t;
                    if (!kept(state, clean[at], poisoned[at])) {
                        snprintf(state->report, state->size,
                                 "%s: %s with %s changed %s at batch row %lld, position %lld, "
                                 "head %lld, dim %lld: %.9g, was %.9g (the mask keeps it apart "
                                 "from the poisoned values)",
                                 state->problem->name, state->kernel->name, poison, tensor,
                                 (long long)b, (long long)t, (long long)h, (long long)d,
                                 (double)poisoned[at], (double)clean[at]);
                        return false;
                    }
                }
            }
        }
    }
    return true;
}

/* Query t sees key j. */
static bool query_sees_key(const contract_state *state, int64_t b, int64_t j, int64_t bb,
                           int64_t t) {
    (void)bb;
    return mask_allowed(&state->mask, b, t, j);
}

/* Key k shares a query with key j (so dk, dv at k may depend on j through that query's row). */
static bool key_shares_query(const contract_state *state, int64_t b, int64_t j, int64_t bb,
                             int64_t k) {
    (void)bb;
    for (int64_t t = 0; t < state->dims.seq_len; t++) {
        if (mask_allowed(&state->mask, b, t, j) && mask_allowed(&state->mask, b, t, k)) {
            return true;
        }
    }
    return false;
}

/* Position t is the poisoned query i. */
static bool same_query(const contract_state *state, int64_t b, int64_t i, int64_t bb, int64_t t) {
    (void)state;
    (void)b;
    (void)bb;
    return t == i;
}

/* Key k is seen by the poisoned query i. */
static bool key_seen_by_query(const contract_state *state, int64_t b, int64_t i, int64_t bb,
                              int64_t k) {
    (void)bb;
    return mask_allowed(&state->mask, b, i, k);
}

/* Writes value into every head and dim of position t of row b of a [B, S, heads, Dh] tensor. */
static void poison_position(float *tensor, const contract_state *state, int64_t heads, int64_t b,
                            int64_t t, float value) {
    const int64_t Dh = state->dims.head_dim;
    for (int64_t i = 0; i < heads * Dh; i++) {
        tensor[(b * state->dims.seq_len + t) * heads * Dh + i] = value;
    }
}

/* One way of poisoning a position: which inputs get NaN and Inf there, and which elements the
 * poison may reach (out, lse and dq are query-side; dk and dv key-side). */
typedef struct poison_kind {
    const char *description; /* "k = NaN, v = Inf" */
    bool key_side;           /* the poisoned inputs are k and v (else q and dout) */
    reach_test query_reach;  /* out, lse, dq at (b, t) */
    reach_test key_reach;    /* dk, dv at (b, k) */
} poison_kind;

static const poison_kind poison_kinds[] = {
    {"k = NaN, v = Inf", true, query_sees_key, key_shares_query},
    {"q = NaN, dout = Inf", false, same_query, key_seen_by_query},
};

static bool check_poison(contract_state *state, const contract_run *clean, contract_run *poisoned,
                         const poison_kind *kind, int64_t b, int64_t at) {
    char poison[96];
    snprintf(poison, sizeof poison, "%s at batch row %lld, position %lld", kind->description,
             (long long)b, (long long)at);
    const int64_t H = state->dims.heads, Hkv = state->dims.kv_heads, Dh = state->dims.head_dim;
    run_copy_inputs(poisoned, clean, state);
    poison_position(kind->key_side ? poisoned->k : poisoned->q, state, kind->key_side ? Hkv : H, b,
                    at, NAN);
    poison_position(kind->key_side ? poisoned->v : poisoned->dout, state, kind->key_side ? Hkv : H,
                    b, at, INFINITY);
    const struct {
        const char *name;
        const float *clean, *poisoned;
        int64_t heads, head_dim;
        reach_test reach;
    } tensors[] = {
        {"out", clean->out, poisoned->out, H, Dh, kind->query_reach},
        {"lse", clean->lse, poisoned->lse, H, 0, kind->query_reach},
        {"dq", clean->dq, poisoned->dq, H, Dh, kind->query_reach},
        {"dk", clean->dk, poisoned->dk, Hkv, Dh, kind->key_reach},
        {"dv", clean->dv, poisoned->dv, Hkv, Dh, kind->key_reach},
    };
    if (!run_kernel(state, poisoned, poison)) {
        return false;
    }
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) {
        if (!compare_tensor(state, tensors[i].name, poison, tensors[i].clean, tensors[i].poisoned,
                            tensors[i].heads, tensors[i].head_dim, b, at, tensors[i].reach)) {
            return false;
        }
    }
    return true;
}

/* attention_mask and position_ids of the problem's rows: padding (position 0), then documents of
 * document_length tokens (the last one shorter), then padding. */
static void build_layout(const contract_problem *problem, int8_t *attention_mask,
                         int64_t *position_ids) {
    for (int64_t b = 0; b < problem->batch; b++) {
        const int64_t S = problem->seq_len, left = problem->left_padding[b];
        const int64_t right = problem->right_padding[b];
        for (int64_t t = 0; t < S; t++) {
            const bool real = t >= left && t < S - right;
            const int64_t in_row = t - left;
            attention_mask[b * S + t] = real;
            position_ids[b * S + t] = !real ? 0
                                      : problem->document_length > 0
                                          ? in_row % problem->document_length
                                          : in_row;
        }
    }
}

static uint64_t next_random(uint64_t *state) {
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    return *state >> 11;
}

static void fill(float *values, int64_t count, uint64_t *random) {
    for (int64_t i = 0; i < count; i++) {
        values[i] = (float)((double)next_random(random) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

/* The positions poisoned in each row: the first, one inside padding when there is some, the
 * middle, one at a document start, and the last. */
static int64_t poisoned_positions(const contract_problem *problem, int64_t b, int64_t *positions) {
    const int64_t S = problem->seq_len;
    int64_t count = 0;
    positions[count++] = 0;
    if (problem->right_padding[b] > 0) {
        positions[count++] = S - problem->right_padding[b];
    }
    if (S > 2) {
        positions[count++] = S / 2;
    }
    if (problem->document_length > 0 && problem->left_padding[b] + problem->document_length < S) {
        positions[count++] = problem->left_padding[b] + problem->document_length;
    }
    if (S > 1) {
        positions[count++] = S - 1;
    }
    return count;
}

static bool check_problem(contract_state *state, bool *ran) {
    const contract_problem *problem = state->problem;
    const int64_t S = problem->seq_len;
    const int64_t head_dim = state->kernel->head_dim_count > 0 ? state->kernel->head_dims[0] : 4;
    state->dims =
        (cpparity_attention_dims){problem->batch, S, problem->heads, problem->kv_heads, head_dim};
    state->query_count = problem->batch * S * problem->heads * head_dim;
    state->key_count = problem->batch * S * problem->kv_heads * head_dim;
    state->rows = problem->batch * problem->heads * S;
    int8_t *attention_mask = malloc((size_t)(problem->batch * S));
    int64_t *position_ids = malloc((size_t)(problem->batch * S) * sizeof(int64_t));
    mask_storage storage = {0};
    contract_run clean, poisoned;
    const bool clean_allocated = run_allocate(&clean, state);
    const bool poisoned_allocated = run_allocate(&poisoned, state);
    bool ok =
        attention_mask != NULL && position_ids != NULL && clean_allocated && poisoned_allocated;
    if (!ok) {
        snprintf(state->report, state->size, "%s: out of memory", problem->name);
    } else {
        build_layout(problem, attention_mask, position_ids);
        cpparity_error error;
        if (mask_storage_build(&storage, problem->batch, S, attention_mask, position_ids, &error) !=
            CPPARITY_OK) {
            snprintf(state->report, state->size, "%s: building the mask failed", problem->name);
            ok = false;
        }
    }
    if (ok) {
        state->mask = mask_storage_describe(&storage, problem->layer);
        if (kernel_takes(state)) {
            *ran = true;
            uint64_t random = 0x6d61736bu + (uint64_t)S;
            fill(clean.q, state->query_count, &random);
            fill(clean.dout, state->query_count, &random);
            fill(clean.k, state->key_count, &random);
            fill(clean.v, state->key_count, &random);
            ok = run_kernel(state, &clean, "finite inputs");
            for (int64_t b = 0; ok && b < problem->batch; b++) {
                int64_t positions[8];
                const int64_t count = poisoned_positions(problem, b, positions);
                for (int64_t p = 0; ok && p < count; p++) {
                    for (size_t k = 0; ok && k < sizeof poison_kinds / sizeof *poison_kinds; k++) {
                        ok = check_poison(state, &clean, &poisoned, &poison_kinds[k], b,
                                          positions[p]);
                    }
                }
            }
        }
    }
    mask_storage_free(&storage);
    run_free(&clean);
    run_free(&poisoned);
    free(attention_mask);
    free(position_ids);
    return ok;
}

bool masked_values_contract_check(const cpparity_attention_kernel *kernel, char *report,
                                  size_t size) {
    contract_state state = {0};
    state.kernel = kernel;
    state.report = report;
    state.size = size;
    bool ran = false;
    for (size_t i = 0; i < sizeof problems / sizeof *problems; i++) {
        state.problem = &problems[i];
        if (!check_problem(&state, &ran)) {
            return false;
        }
    }
    if (!ran) {
        snprintf(report, size, "%s supports none of the contract's problems", kernel->name);
        return false;
    }
    snprintf(report, size, "%s: masked values never reach an output", kernel->name);
    return true;
}
