/* run_item.c — one (case, cp, dtype) run on a CP group (see run_item.h). */
#include "harness/running/run_item.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "common/interrupt.h"
#include "common/model_parameters.h"
#include "common/monotonic_clock.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/kernels/mask_description.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_cache.h"
#include "harness/running/attention_item.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/token_layout.h"

#define PROBLEM_TEXT 512 /* bytes of a rank's output problem, NUL included */

/* The float64 reference (and naive baseline) of the item, computed on the root by a thread of
 * its own while the implementation under test runs: the reference's CPU work overlaps the
 * implementation's (a GPU's, or other cores'). Only the root's thread touches its cache. */
typedef struct reference_prefetch {
    pthread_t thread;                 /* the computing thread */
    bool started;                     /* thread runs (join before using anything below) */
    reference_cache *cache;           /* the root's cache */
    int64_t case_index;               /* which case */
    const cpparity_case *c;           /* the case */
    uint64_t seed;                    /* its fixture seed */
    cpparity_dtype dtype;             /* the naive baseline's dtype */
    const reference_outputs *outputs; /* result */
    double seconds_now;               /* time spent computing now (0 when cached) */
    cpparity_status status;           /* how it went */
    cpparity_error error;             /* why it failed */
} reference_prefetch;

static void *prefetch_main(void *argument) {
    reference_prefetch *p = argument;
    p->status = reference_cache_get_with_naive(p->cache, p->case_index, p->c, p->seed, p->dtype,
                                               &p->outputs, &p->seconds_now, &p->error);
    return NULL;
}

/* Starts the reference on its own thread; computes it here when no thread can be made. */
static void prefetch_start(reference_prefetch *p) {
    p->started = pthread_create(&p->thread, NULL, prefetch_main, p) == 0;
    if (!p->started) {
        prefetch_main(p);
    }
}

/* Waits for the reference (nothing when it was computed in place). */
static void prefetch_finish(reference_prefetch *p) {
    if (p->started) {
        pthread_join(p->thread, NULL);
        p->started = false;
    }
}

/* What one rank reports to the root besides its tensors. */
typedef struct rank_summary {
    float loss;                 /* the rank's loss */
    double seconds;             /* the implementation's time on this rank */
    char problem[PROBLEM_TEXT]; /* an output the rank could not deliver, "" when none */
} rank_summary;

/* What one rank of the implementation under test produced. */
typedef struct rank_outputs {
    rank_summary summary; /* loss, time, problem */
    float *logits;        /* [B, L, V] this rank's slice, owned; NULL when read by rows */
    void *instance;       /* the implementation's instance, kept for read_logits_rows until the
                             logits have been sent (NULL otherwise: destroyed after backward) */
    float *gradients;     /* (parameters.total) by the harness's parameter table, owned */
} rank_outputs;

/* The slice length every rank must deliver under layout: the contract of implementation.h,
 * computed here independently of the implementation's own sharding (zigzag cuts 2·cp chunks). */
static int64_t expected_local_len(int64_t seq_len, int64_t cp, cpparity_layout layout) {
    const int64_t chunks = layout == CPPARITY_LAYOUT_ZIGZAG ? 2 * cp : cp;
    return (seq_len + chunks - 1) / chunks * (chunks / cp);
}

/* The harness's own account of layout (token_layout.h), for the judge: round-robin deals one
 * token at a time. */
static token_layout judge_layout(cpparity_layout layout, int64_t padded_len, int64_t cp) {
    const token_layout_kind kinds[CPPARITY_LAYOUT_COUNT] = {
        [CPPARITY_LAYOUT_CONTIGUOUS] = TOKEN_LAYOUT_CONTIGUOUS,
        [CPPARITY_LAYOUT_ZIGZAG] = TOKEN_LAYOUT_ZIGZAG,
        [CPPARITY_LAYOUT_ROUND_ROBIN] = TOKEN_LAYOUT_ROUND_ROBIN};
    return (token_layout){kinds[layout], padded_len, cp, 1};
}

/* Records the first output problem of a rank, "what: detail" (later ones are dropped). */
static void note_problem(rank_summary *summary, const char *what, const char *detail) {
    if (summary->problem[0] == '\0') {
        snprintf(summary->problem, sizeof summary->problem, "%.100s: %.400s", what, detail);
    }
}

/* Reads every gradient the harness's parameter table names from the instance, and checks that
 * the instance holds no other. */
static void read_gradients(const cpparity_implementation *implementation, void *instance,
                           const cpparity_tensor_table *parameters, rank_outputs *outputs) {
    for (int64_t e = 0; e < parameters->count; e++) {
        const cpparity_tensor_entry *entry = &parameters->entries[e];
        cpparity_error read_error;
        cpparity_error_clear(&read_error);
        if (implementation->read_gradient(instance, entry->name, outputs->gradients + entry->offset,
                                          entry->count, &read_error) != CPPARITY_OK) {
            note_problem(&outputs->summary, "missing gradient", read_error.message);
        }
    }
    const int64_t held = implementation->gradient_count(instance);
    for (int64_t i = 0; i < held; i++) {
        const char *name = implementation->gradient_name(instance, i);
        if (name == NULL || cpparity_tensor_table_find(parameters, name) == NULL) {
            note_problem(&outputs->summary, "an unexpected extra gradient",
                         name != NULL ? name : "(no name)");
        }
    }
    if (held != parameters->count && outputs->summary.problem[0] == '\0') {
        char counts[96];
        snprintf(counts, sizeof counts, "it holds %lld, model.md names %lld", (long long)held,
                 (long long)parameters->count);
        note_problem(&outputs->summary, "a gradient count that is not model.md's", counts);
    }
}

/* The implementation under test on this rank: the harness builds the whole batch and every
 * weight from the fixtures, hands them over, runs forward and backward (timed: create, load,
 * forward, backward), and reads the outputs into host buffers. A failed call is returned as an
 * error; an output the instance cannot deliver is recorded as the rank's problem. */
static cpparity_status run_on_rank(cpparity_comm *group, const run_target *target,
                                   const cpparity_case *c, const run_plan_item *planned,
                                   rank_outputs *outputs, cpparity_error *error) {
    memset(outputs, 0, sizeof *outputs);
    const cpparity_implementation *implementation = target->implementation;
    const cpparity_dtype dtype = planned->dtype;
    const uint64_t seed = planned->seed;
    const int64_t B = c->batch_size, V = c->model.vocab_size;
    const int64_t L = expected_local_len(c->seq_len, group->size, planned->layout);
    cpparity_batch batch = {0};
    cpparity_tensor_table parameters = {0};
    double *weights = NULL;
    void *instance = NULL;
    cpparity_status status = fixture_batch_build(&batch, c->rows, B, c->seq_len, V, seed, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameter_table(&c->model, &parameters, error);
    }
    const int64_t logits_shape[] = {B, L, V};
    int64_t logits_count = 0;
    if (status == CPPARITY_OK && !cpparity_elements_checked(logits_shape, 3, &logits_count)) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "logits of a rank: %lld x %lld x %lld elements are too many "
                                    "to hold",
                                    (long long)B, (long long)L, (long long)V);
    }
    if (status == CPPARITY_OK) {
        weights = malloc((size_t)parameters.total * sizeof *weights);
        /* an implementation that reads its logits by rows keeps them nowhere whole */
        outputs->logits = implementation->read_logits_rows != NULL
                              ? NULL
                              : malloc((size_t)logits_count * sizeof(float));
        outputs->gradients = calloc((size_t)parameters.total, sizeof(float));
        if (weights == NULL || outputs->gradients == NULL ||
            (outputs->logits == NULL && implementation->read_logits_rows == NULL)) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "rank %d: out of memory (inputs and outputs)", group->rank);
        } else {
            fixture_fill_parameters_cached(weights, &parameters, seed);
        }
    }
    const double start = monotonic_seconds();
    if (status == CPPARITY_OK) {
        const cpparity_implementation_setup setup = {.config = &c->model,
                                                     .batch = B,
                                                     .seq_len = c->seq_len,
                                                     .dtype = dtype,
                                                     .comm = group,
                                                     .kernel = target->kernel,
                                                     .layout = planned->layout,
                                                     .algorithm = planned->algorithm,
                                                     .fault = target->fault};
        status = implementation->create(&setup, &instance, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->load_parameters(instance, &parameters, weights, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->forward(instance, &batch, error);
    }
    if (status == CPPARITY_OK) {
        status = implementation->backward(instance, error);
    }
    outputs->summary.seconds = monotonic_seconds() - start;
    if (status == CPPARITY_OK) {
        cpparity_error read_error;
        cpparity_error_clear(&read_error);
        if (implementation->read_loss(instance, &outputs->summary.loss, &read_error) !=
            CPPARITY_OK) {
            outputs->summary.loss = NAN;
            note_problem(&outputs->summary, "no loss", read_error.message);
        }
        if (outputs->logits != NULL &&
            implementation->read_logits(instance, outputs->logits, B * L * V, &read_error) !=
                CPPARITY_OK) {
            for (int64_t i = 0; i < B * L * V; i++) {
                outputs->logits[i] = NAN;
            }
            note_problem(&outputs->summary, "no logits slice", read_error.message);
        }
        read_gradients(implementation, instance, &parameters, outputs);
    }
    if (instance != NULL && status == CPPARITY_OK && outputs->logits == NULL) {
        outputs->instance = instance; /* its logits are read by rows, block by block */
    } else if (instance != NULL) {
        implementation->destroy(instance);
    }
    free(weights);
    cpparity_tensor_table_free(&parameters);
    cpparity_batch_free(&batch);
    return status;
}

/* Gathers `bytes` from every rank of group into a malloc'd array on root (NULL elsewhere).
 * On root, *mismatch (when not NULL) is the first rank whose contribution was not `bytes`
 * long, or −1. */
static cpparity_status gather(cpparity_comm *group, int root, const void *data, int64_t bytes,
                              void **received, int *mismatch, cpparity_error *error) {
    int64_t *sizes = calloc((size_t)group->size, sizeof *sizes);
    if (sizes == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    cpparity_status status =
        cpparity_gather_bytes(group, data, bytes, received, sizes, root, error);
    if (mismatch != NULL) {
        *mismatch = -1;
        for (int r = 0; status == CPPARITY_OK && group->rank == root && r < group->size; r++) {
            if (sizes[r] != bytes && *mismatch < 0) {
                *mismatch = r;
            }
        }
    }
    free(sizes);
    return status;
}

void run_item_begin(run_item *item, const run_plan *plan, const run_plan_item *planned) {
    const cpparity_case *c = plan->cases[planned->case_index];
    memset(item, 0, sizeof *item);
    item->source = c;
    snprintf(item->suite_path, sizeof item->suite_path, "%s",
             plan->case_suite[planned->case_index]);
    item->cp = planned->cp;
    item->dtype = planned->dtype;
    item->is_baseline = planned->is_baseline;
    item->worst_tensor = -1;
    item->padded_seq_len =
        expected_local_len(c->seq_len, planned->cp, planned->layout) * planned->cp;
    cpparity_algorithm_choice_name(planned->algorithm, item->algorithm, sizeof item->algorithm);
    /* the layout asked for (judge_item then records the one the positions follow: the same) */
    snprintf(item->token_layout, sizeof item->token_layout, "%s",
             cpparity_layout_name(planned->layout));
}

/* Ring attention calls the kernel on blocks (kernel.h ABI 3), and so does an implementation
 * whose layouts need them (cpparity_implementation.layouts_need_block_calls) for a layout other
 * than contiguous: a kernel without block calls (an ABI 2 plugin, or an ABI 3 one leaving both
 * NULL: they are optional) cannot run the item, which is never run, saying so (root's item). Its
 * outcome is NOT CLAIMED, like a call needing a capability the kernel does not declare: a plugin
 * without block calls keeps passing what it passed, and a suite with ring items does not fail
 * for it. */
static bool lacks_block_calls(const run_target *target, const run_plan_item *planned, bool is_root,
                              run_item *item) {
    const bool needs = planned->algorithm.kind != CPPARITY_ALGORITHM_ULYSSES ||
                       (planned->layout != CPPARITY_LAYOUT_CONTIGUOUS &&
                        target->implementation->layouts_need_block_calls);
    if (!needs || kernel_has_block_calls(target->kernel)) {
        return false;
    }
    if (is_root) {
        item->outcome = RUN_NOT_CLAIMED;
        const bool ring = planned->algorithm.kind != CPPARITY_ALGORITHM_ULYSSES;
        const char *what = ring ? "ring attention" : "the layout ";
        const char *layout = ring ? "" : cpparity_layout_name(planned->layout);
        if (target->kernel->abi_version < 3u) {
            snprintf(item->message, sizeof item->message,
                     "not run: kernel %s speaks ABI %u; kernel ABI %u has no block calls (%s%s "
                     "needs ABI 3's forward_block and backward_block)",
                     target->kernel->name, target->kernel->abi_version, target->kernel->abi_version,
                     what, layout);
        } else { /* ABI 3, block calls left NULL: they are optional */
            snprintf(item->message, sizeof item->message,
                     "not run: kernel %s has no block calls (forward_block/backward_block NULL; "
                     "%s%s needs them)",
                     target->kernel->name, what, layout);
        }
    }
    return true;
}

/* The refusal check before any compute, identical on every rank: true when the implementation
 * refused (the item, on root, then holds the verdict on that refusal). */
static bool refused(const run_target *target, const cpparity_case *c, const run_plan_item *planned,
                    bool is_root, run_item *item) {
    cpparity_error refusal;
    cpparity_error_clear(&refusal);
    if (target->implementation->check(&c->model, planned->cp, planned->dtype, planned->algorithm,
                                      target->kernel, &refusal) == CPPARITY_OK) {
        return false;
    }
    if (is_root) {
        const bool expected = c->expect_refuse && strstr(refusal.message, c->refusal) != NULL;
        item->outcome = expected ? RUN_REFUSED : c->expect_refuse ? RUN_FAIL : RUN_ERROR;
        item->error_status = CPPARITY_ERROR_INPUT; /* refused unexpectedly: bad input */
        snprintf(item->message, sizeof item->message, "%.700s%s%.200s%s", refusal.message,
                 expected || !c->expect_refuse ? "" : " (expected the refusal to contain '",
                 expected || !c->expect_refuse ? "" : c->refusal,
                 expected || !c->expect_refuse ? "" : "')");
    }
    return true;
}

/* Whether the kernel supports every attention call of the item (kernel_support.h), judged on the
 * mask each layer will get (the case's batch, padded to a multiple of cp as the implementation
 * pads it) and the heads one rank holds after the all-to-all. Identical on every rank. When not,
 * the item is NOT CLAIMED with "not claimed by kernel ..." on root (the kernel declares it lacks
 * what a layer needs: the model cannot run without that layer): never run, never passed, not a
 * failure. Built-in kernels support everything, so this costs nothing for them. */
static bool unsupported(const run_target *target, const cpparity_case *c,
                        const run_plan_item *planned, bool is_root, run_item *item) {
    const cpparity_attention_kernel *kernel = target->kernel;
    if ((kernel->capabilities | CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS) ==
            CPPARITY_KERNEL_SUPPORTS_ALL &&
        kernel->head_dim_count == 0 && kernel->supports == NULL) {
        return false;
    }
    const cpparity_model_config *model = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len, P = item->padded_seq_len;
    cpparity_batch batch = {0};
    mask_storage storage = {0};
    int8_t *attention_mask = calloc((size_t)(B * P + 1), sizeof *attention_mask);
    int64_t *position_ids = calloc((size_t)(B * P + 1), sizeof *position_ids);
    char why[512] = "";
    bool supported = false;
    if (attention_mask != NULL && position_ids != NULL &&
        fixture_batch_build(&batch, c->rows, B, S, model->vocab_size, planned->seed, NULL) ==
            CPPARITY_OK) {
        for (int64_t b = 0; b < B; b++) { /* automatic padding: mask 0, position 0 */
            memcpy(attention_mask + b * P, batch.attention_mask + b * S, (size_t)S);
            memcpy(position_ids + b * P, batch.position_ids + b * S, (size_t)S * sizeof(int64_t));
        }
        supported =
            mask_storage_build(&storage, B, P, attention_mask, position_ids, NULL) == CPPARITY_OK;
    }
    /* the heads of one call: a rank's share after the all-to-all (of its Ulysses group for a
     * hybrid), or every head for ring */
    const cpparity_algorithm_choice *algorithm = &planned->algorithm;
    const int64_t cp = algorithm->kind == CPPARITY_ALGORITHM_RING     ? 1
                       : algorithm->kind == CPPARITY_ALGORITHM_HYBRID ? algorithm->ulysses_degree
                                                                      : planned->cp;
    const int64_t kv = model->num_key_value_heads;
    const cpparity_attention_dims dims = {B, P, model->num_attention_heads / cp,
                                          kv >= cp ? kv / cp : 1, model->head_dim};
    int64_t failing = -1; /* the first layer the kernel does not support */
    for (int64_t layer = 0; supported && layer < model->num_hidden_layers; layer++) {
        const cpparity_mask_description mask =
            mask_storage_describe(&storage, cpparity_model_layer(model, layer));
        supported = kernel_supports_call(kernel, &mask, &dims, why, sizeof why);
        failing = supported ? -1 : layer;
    }
    mask_storage_free(&storage);
    cpparity_batch_free(&batch);
    free(attention_mask);
    free(position_ids);
    if (supported) {
        return false;
    }
    if (is_root) {
        item->outcome = failing < 0 ? RUN_NOT_RUN : RUN_NOT_CLAIMED;
        if (failing < 0) {
            snprintf(item->message, sizeof item->message,
                     "unsupported by kernel %s: out of memory checking what the calls need",
                     kernel->name);
        } else {
            snprintf(item->message, sizeof item->message,
                     "not claimed by kernel %s: layer %lld (%s): %s", kernel->name,
                     (long long)failing,
                     cpparity_layer_type_name(cpparity_model_layer(model, failing).type), why);
        }
    }
    return true;
}

/* Root: an item whose ranks failed gets the first rank's message. */
static cpparity_status report_failure(cpparity_comm *group, int root, cpparity_status agreed,
                                      const cpparity_error *local_error, run_item *item,
                                      cpparity_error *error) {
    void *messages = NULL;
    cpparity_status status = gather(group, root, local_error->message,
                                    (int64_t)sizeof local_error->message, &messages, NULL, error);
    if (status == CPPARITY_OK && group->rank == root) {
        const char *first = "";
        for (int r = 0; r < group->size && first[0] == '\0'; r++) {
            first = (const char *)messages + (size_t)r * sizeof local_error->message;
        }
        item->outcome = RUN_ERROR;
        item->error_status = (int32_t)agreed;
        snprintf(item->message, sizeof item->message, "%s", first);
    }
    free(messages);
    return status;
}

/* --- the ranks' logits, one block of positions at a time (judge_item.h's judge_logits) ------- */

/* The ranks' logits travel to the root one block of the padded sequence at a time
 * (common/row_blocks.h): for every block, in order, every rank sends the rows it holds there
 * (cpparity_gather_bytes), so the root never holds more than a block's logits. Non-root ranks
 * serve every block; the root gathers each when judge_item asks for it and the rest after. */
typedef struct streamed_logits {
    cpparity_comm *group;
    int root;
    int64_t cp, batch, vocab, length; /* ranks, B, V, L (every rank holds L rows) */
    int64_t **positions;              /* [cp] each rank's positions (L), by token_layout.h */
    int64_t *held;                    /* (cp·L) their storage */
    const float *mine;                /* this rank's logits [B, L, V], or NULL: read by rows */
    const cpparity_implementation *implementation; /* with mine NULL: read_logits_rows of */
    void *instance;                                /* this rank's instance */
    row_blocks blocks;                             /* of the padded sequence */
    int64_t next;                                  /* blocks gathered so far */
    row_block current;                             /* the last one */
    int64_t *rows;                                 /* (edge) scratch: a rank's rows in a block */
    float *send;                                   /* (edge · V) this rank's rows of a block */
    void *received;                                /* root: the block's rows, rank after rank */
    int64_t *sizes;                                /* [cp] bytes from each rank */
    char unreadable[PROBLEM_TEXT]; /* the first rows read_logits_rows could not give (sent
                                      as NaN), "" when none */
} streamed_logits;

static void streamed_free(streamed_logits *s) {
    free(s->positions);
    free(s->held);
    free(s->rows);
    free(s->send);
    free(s->received);
    free(s->sizes);
    memset(s, 0, sizeof *s);
}

static cpparity_status streamed_start(streamed_logits *s, cpparity_comm *group, int root,
                                      const cpparity_case *c, const run_plan_item *planned,
                                      const cpparity_implementation *implementation,
                                      const rank_outputs *outputs, cpparity_error *error) {
    const int64_t cp = group->size, V = c->model.vocab_size;
    const int64_t L = expected_local_len(c->seq_len, cp, planned->layout);
    memset(s, 0, sizeof *s);
    s->group = group;
    s->root = root;
    s->cp = cp;
    s->batch = c->batch_size;
    s->vocab = V;
    s->length = L;
    s->mine = outputs->logits;
    s->implementation = implementation;
    s->instance = outputs->instance;
    s->blocks = row_blocks_of(c->batch_size, cp * L);
    s->positions = calloc((size_t)cp, sizeof *s->positions);
    s->held = malloc((size_t)(cp * L + 1) * sizeof *s->held);
    s->rows = malloc((size_t)(row_blocks_widest(&s->blocks) + 1) * sizeof *s->rows);
    s->send = malloc((size_t)(row_blocks_widest(&s->blocks) * V + 1) * sizeof *s->send);
    s->sizes = calloc((size_t)cp, sizeof *s->sizes);
    if (!s->positions || !s->held || !s->rows || !s->send || !s->sizes) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (logits blocks)", group->rank);
    }
    const token_layout layout = judge_layout(planned->layout, cp * L, cp);
    cpparity_status status = CPPARITY_OK;
    for (int64_t r = 0; status == CPPARITY_OK && r < cp; r++) {
        s->positions[r] = s->held + r * L;
        status = token_layout_fill(&layout, r, s->positions[r], error);
    }
    return status;
}

/* The rows of a rank holding positions [begin, end), in increasing row order, into rows; their
 * count. */
static int64_t rows_in_block(const int64_t *positions, int64_t length, int64_t begin, int64_t end,
                             int64_t *rows) {
    int64_t count = 0;
    for (int64_t t = 0; t < length; t++) {
        if (positions[t] >= begin && positions[t] < end) {
            rows[count++] = t;
        }
    }
    return count;
}

/* The next block: every rank sends its rows there to the root. */
static cpparity_status streamed_next(streamed_logits *s, cpparity_error *error) {
    const row_block block = row_blocks_at(&s->blocks, s->next);
    const int64_t V = s->vocab, L = s->length;
    const int64_t count =
        rows_in_block(s->positions[s->group->rank], L, block.begin, block.end, s->rows);
    for (int64_t i = 0; s->mine != NULL && i < count; i++) {
        memcpy(s->send + i * V, s->mine + (block.batch_row * L + s->rows[i]) * V,
               (size_t)V * sizeof *s->send);
    }
    for (int64_t i = 0; s->mine == NULL && i < count;) { /* runs of consecutive rows */
        int64_t run = 1;
        while (i + run < count && s->rows[i + run] == s->rows[i] + run) {
            run++;
        }
        cpparity_error read_error;
        if (s->implementation->read_logits_rows(s->instance, block.batch_row, s->rows[i], run,
                                                s->send + i * V, &read_error) != CPPARITY_OK) {
            if (s->unreadable[0] == '\0') {
                snprintf(s->unreadable, sizeof s->unreadable, "logits rows unreadable: %.400s",
                         read_error.message);
            }
            for (int64_t k = 0; k < run * V; k++) { /* unreadable rows are not finite */
                s->send[i * V + k] = NAN;
            }
        }
        i += run;
    }
    free(s->received);
    s->received = NULL;
    s->current = block;
    s->next++;
    return cpparity_gather_bytes(s->group, s->send, count * V * (int64_t)sizeof(float),
                                 &s->received, s->sizes, s->root, error);
}

/* Every block not gathered yet (non-root ranks: all of them). */
static cpparity_status streamed_serve(streamed_logits *s, cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    while (status == CPPARITY_OK && s->next < s->blocks.count) {
        status = streamed_next(s, error);
    }
    return status;
}

static cpparity_status streamed_begin_block(void *context, const row_block *block,
                                            cpparity_error *error) {
    streamed_logits *s = context;
    if (block->index != s->next) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "logits blocks out of step: block %lld asked, %lld next",
                                  (long long)block->index, (long long)s->next);
    }
    return streamed_next(s, error);
}

static cpparity_status streamed_read(void *context, int64_t rank, int64_t batch_row, int64_t row,
                                     int64_t count, float *rows, cpparity_error *error) {
    streamed_logits *s = context;
    const int64_t V = s->vocab, bytes = V * (int64_t)sizeof(float);
    const int64_t held =
        rows_in_block(s->positions[rank], s->length, s->current.begin, s->current.end, s->rows);
    int64_t offset = 0, index = 0;
    for (int64_t q = 0; q < rank; q++) {
        offset += s->sizes[q];
    }
    while (index < held && s->rows[index] != row) {
        index++;
    }
    if (batch_row != s->current.batch_row || index + count > held ||
        s->sizes[rank] != held * bytes) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %lld's logits rows %lld..%lld of batch row %lld are not "
                                  "in the block gathered (%lld bytes of %lld rows)",
                                  (long long)rank, (long long)row, (long long)(row + count - 1),
                                  (long long)batch_row, (long long)s->sizes[rank], (long long)held);
    }
    memcpy(rows, (const uint8_t *)s->received + offset + index * bytes, (size_t)(count * bytes));
    return CPPARITY_OK;
}

/* The reason the case's cp = 1 item of the same dtype was left out (memory_estimate.h), or
 * NULL when it ran (or planned is that item). */
static const char *cp1_not_run(const run_plan *plan, const run_plan_item *planned) {
    for (int64_t i = 0; !planned->is_baseline && i < plan->item_count; i++) {
        const run_plan_item *other = &plan->items[i];
        if (other->is_baseline && other->case_index == planned->case_index &&
            other->dtype == planned->dtype && other->memory_skipped) {
            return other->not_run_reason;
        }
    }
    return NULL;
}

/* After the walk: the root learns which ranks could not read their logits rows (read_logits_rows
 * failed: they sent NaN) and fails the item naming the first. */
static cpparity_status report_unreadable(cpparity_comm *group, int root, const streamed_logits *s,
                                         run_item *item, cpparity_error *error) {
    void *messages = NULL;
    cpparity_status status =
        gather(group, root, s->unreadable, (int64_t)sizeof s->unreadable, &messages, NULL, error);
    for (int r = 0; status == CPPARITY_OK && group->rank == root && r < group->size; r++) {
        const char *message = (const char *)messages + (size_t)r * sizeof s->unreadable;
        if (message[0] != '\0') {
            item->outcome = RUN_FAIL;
            snprintf(item->message, sizeof item->message, "rank %d: %.900s", r, message);
            break;
        }
    }
    free(messages);
    return status;
}

/* Root: the problems ranks reported, the reference and the judgement. */
static cpparity_status judge_on_root(const run_plan *plan, const run_plan_item *planned,
                                     const run_options *options, const baseline_table *baselines,
                                     reference_prefetch *prefetch, const rank_summary *summaries,
                                     int cp, judge_logits logits, const int64_t *const *positions,
                                     const float *gradients, run_item *item,
                                     cpparity_error *error) {
    const cpparity_case *c = plan->cases[planned->case_index];
    float *losses = malloc((size_t)cp * sizeof *losses);
    if (losses == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int r = 0; r < cp; r++) {
        losses[r] = summaries[r].loss;
        item->seconds = summaries[r].seconds > item->seconds ? summaries[r].seconds : item->seconds;
    }
    for (int r = 0; r < cp; r++) {
        if (summaries[r].problem[0] != '\0') {
            item->outcome = RUN_FAIL;
            snprintf(item->message, sizeof item->message, "rank %d: %.900s", r,
                     summaries[r].problem);
            free(losses);
            return CPPARITY_OK;
        }
    }
    prefetch_finish(prefetch);
    const reference_outputs *reference = prefetch->outputs;
    cpparity_status status = CPPARITY_OK;
    if (prefetch->status != CPPARITY_OK) {
        item->outcome = RUN_ERROR;
        item->error_status = (int32_t)prefetch->status;
        snprintf(item->message, sizeof item->message, "reference: %.1000s",
                 prefetch->error.message);
    } else {
        /* the reference's (and the naive baseline's) time is counted once, for the item that
         * computed it */
        item->reference_seconds = prefetch->seconds_now;
        const int64_t L = expected_local_len(c->seq_len, cp, planned->layout);
        int64_t *lengths = malloc((size_t)cp * sizeof *lengths);
        if (lengths == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
        for (int r = 0; status == CPPARITY_OK && r < cp; r++) {
            lengths[r] = L;
        }
        /* the positions each rank's rows must be, from token_layout.h (contiguous: NULL) */
        const judge_inputs in = {
            .reference = reference,
            .naive = &reference->naive[planned->dtype],
            .losses = losses,
            .logits = logits,
            .gradients = gradients,
            .local_len = L,
            .store = options->store,
            .positions = planned->layout != CPPARITY_LAYOUT_CONTIGUOUS ? positions : NULL,
            .lengths = lengths,
            .cp1_not_run = cp1_not_run(plan, planned)};
        if (status == CPPARITY_OK) {
            status = judge_item(item, planned->case_index, &in, baselines, error);
        }
        free(lengths);
    }
    free(losses);
    return status;
}

cpparity_status run_item_execute(cpparity_comm *group, int root, const run_plan *plan,
                                 int64_t index, const run_options *options,
                                 const run_target *target, const baseline_table *baselines,
                                 reference_cache *cache, run_item *item, cpparity_error *error) {
    const run_plan_item *planned = &plan->items[index];
    const cpparity_case *c = plan->cases[planned->case_index];
    const bool is_root = group->rank == root;
    run_item_begin(item, plan, planned);
    if (c->level == CPPARITY_LEVEL_ATTENTION) { /* the kernel alone, on the root (cp is 1) */
        interrupt_set_activity("case '%s' (attention level, %s)", c->name,
                               cpparity_dtype_name(planned->dtype));
        /* the case's seed fixes its inputs; --fresh draws new ones, --seed sets them */
        const uint64_t seed = options->seed_set ? options->seed
                              : options->fresh  ? attention_item_fresh_seed(c->seed)
                                                : c->seed;
        cpparity_status status = CPPARITY_OK;
        if (is_root) {
            const double started = monotonic_seconds();
            status = attention_item_run(item, c, seed, target->kernel, error);
            item->seconds = monotonic_seconds() - started;
            item->wall_seconds = item->seconds;
        } else {
            memset(item, 0, sizeof *item);
        }
        return status;
    }
    interrupt_set_activity("case '%s' (cp %lld, %s)", c->name, (long long)planned->cp,
                           cpparity_dtype_name(planned->dtype));
    if (lacks_block_calls(target, planned, is_root, item) ||
        refused(target, c, planned, is_root, item) ||
        unsupported(target, c, planned, is_root, item)) {
        if (!is_root) {
            memset(item, 0, sizeof *item);
        }
        return CPPARITY_OK;
    }

    const double started = monotonic_seconds();
    reference_prefetch prefetch = {.cache = cache,
                                   .case_index = planned->case_index,
                                   .c = c,
                                   .seed = planned->seed,
                                   .dtype = planned->dtype,
                                   .status = CPPARITY_OK};
    if (is_root && !c->expect_refuse) {
        prefetch_start(&prefetch);
    }
    rank_outputs outputs;
    cpparity_error local_error;
    cpparity_error_clear(&local_error);
    const cpparity_status local_status =
        run_on_rank(group, target, c, planned, &outputs, &local_error);
    cpparity_status agreed;
    cpparity_status status = cpparity_agree_status(group, local_status, &agreed, error);
    if (status == CPPARITY_OK && agreed != CPPARITY_OK) {
        status = report_failure(group, root, agreed, &local_error, item, error);
    } else if (status == CPPARITY_OK) {
        void *summaries = NULL, *gradients = NULL;
        cpparity_tensor_table table = {0};
        status = cpparity_model_parameter_table(&c->model, &table, error);
        int mismatch = -1;
        if (status == CPPARITY_OK) {
            status = gather(group, root, &outputs.summary, sizeof outputs.summary, &summaries, NULL,
                            error);
        }
        if (status == CPPARITY_OK) {
            status = gather(group, root, outputs.gradients, table.total * (int64_t)sizeof(float),
                            &gradients, &mismatch, error);
        }
        /* the logits are compared block by block with every rank sending its rows (the walk):
         * the root says whether that happens (not when the item is decided without them) */
        int64_t walk = 0;
        if (status == CPPARITY_OK && is_root && !c->expect_refuse && mismatch < 0) {
            walk = 1;
            for (int r = 0; r < group->size; r++) {
                walk &= ((const rank_summary *)summaries)[r].problem[0] == '\0';
            }
            if (walk) {
                prefetch_finish(&prefetch);
                walk = prefetch.status == CPPARITY_OK;
            }
        }
        if (status == CPPARITY_OK) {
            status = cpparity_broadcast(group, &walk, 1, CPPARITY_INT64, root, NULL, error);
        }
        streamed_logits streamed = {0};
        if (status == CPPARITY_OK && walk) {
            status = streamed_start(&streamed, group, root, c, planned, target->implementation,
                                    &outputs, error);
        }
        if (status == CPPARITY_OK && walk && !is_root) {
            status = streamed_serve(&streamed, error);
        }
        if (status == CPPARITY_OK && is_root) {
            if (c->expect_refuse) {
                item->outcome = RUN_FAIL;
                snprintf(item->message, sizeof item->message,
                         "expected a refusal containing '%s', but cp %lld ran", c->refusal,
                         (long long)planned->cp);
            } else if (mismatch >= 0) {
                item->outcome = RUN_FAIL;
                snprintf(item->message, sizeof item->message,
                         "rank %d delivered a different number of gradient values than rank %d",
                         mismatch, root);
            } else {
                const judge_logits source = {streamed_begin_block, streamed_read, &streamed};
                status = judge_on_root(
                    plan, planned, options, baselines, &prefetch, summaries, group->size, source,
                    (const int64_t *const *)streamed.positions, gradients, item, error);
            }
            if (walk) { /* the blocks the judgement did not ask for, so every rank ends */
                cpparity_error drain_error;
                const cpparity_status drained =
                    streamed_serve(&streamed, status == CPPARITY_OK ? error : &drain_error);
                status = status == CPPARITY_OK ? drained : status;
            }
        }
        if (status == CPPARITY_OK && walk) { /* rows a rank could not read fail the item */
            status = report_unreadable(group, root, &streamed, item, error);
        }
        streamed_free(&streamed);
        cpparity_tensor_table_free(&table);
        free(summaries);
        free(gradients);
    }
    prefetch_finish(&prefetch); /* on every path: the thread uses the cache */
    item->wall_seconds = monotonic_seconds() - started;
    if (outputs.instance != NULL) { /* its logits have been read */
        target->implementation->destroy(outputs.instance);
    }
    free(outputs.logits);
    free(outputs.gradients);
    if (!is_root) {
        memset(item, 0, sizeof *item);
    }
    return status;
}
