/* ring.c — ring attention across a CP group (see ring.h). */
#include "distributed/cp/ring.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/cp/ring_merge.h"
#include "distributed/kernels/kernel_call.h"
#include "distributed/kernels/mask_predicate.h"

/* Past this many pairs of runs a step calls the kernel on every row (round-robin shards of long
 * sequences: one run per token), leaving the skipping to the kernel's own tiles. */
enum { RING_MAX_RUN_PAIRS = 4096 };

int64_t ring_step_count(int64_t cp, cpparity_fault fault) {
    return fault == CPPARITY_FAULT_RING_LAST_STEP && cp > 1 ? cp - 1 : cp;
}

/* Rows [row, row + length) of a block are the consecutive tokens [token, token + length). */
typedef struct run {
    int64_t row, length, token;
} run;

/* Cuts index (count rows) into runs of consecutive tokens; returns how many (runs holds count). */
static int64_t make_runs(const int64_t *index, int64_t count, run *runs) {
    int64_t made = 0;
    for (int64_t i = 0; i < count; i++) {
        if (made > 0 && index[i] == runs[made - 1].token + runs[made - 1].length) {
            runs[made - 1].length++;
        } else {
            runs[made++] = (run){i, 1, index[i]};
        }
    }
    return made;
}

/* Whether queries of run a and keys of run b have an allowed pair in some batch row (the tile
 * classification of the compact mask); ring-causal-skip drops pairs whose first key is at or
 * after the first query. */
static bool runs_meet(const cpparity_mask_description *mask, int64_t batch, const run *a,
                      const run *b, cpparity_fault fault) {
    if (fault == CPPARITY_FAULT_RING_CAUSAL_SKIP && b->token >= a->token) {
        return false; /* fault site: ring-causal-skip */
    }
    for (int64_t row = 0; row < batch; row++) {
        if (mask_classify_tile(mask, row, a->token, a->token + a->length, b->token,
                               b->token + b->length) != MASK_TILE_EMPTY) {
            return true;
        }
    }
    return false;
}

/* The rows of one step: which query rows and key rows meet, and their tokens. */
typedef struct step_rows {
    int64_t query_count, key_count;
    int64_t *query_rows, *key_rows;     /* (L) rows of this rank's queries / the visiting keys */
    int64_t *query_tokens, *key_tokens; /* (L) their global tokens */
    run *query_runs, *key_runs;         /* (L) scratch */
    bool *query_used, *key_used;        /* (L) scratch */
} step_rows;

static void step_rows_free(step_rows *rows) {
    free(rows->query_rows);
    free(rows->key_rows);
    free(rows->query_tokens);
    free(rows->key_tokens);
    free(rows->query_runs);
    free(rows->key_runs);
    free(rows->query_used);
    free(rows->key_used);
}

static bool step_rows_allocate(step_rows *rows, int64_t L) {
    memset(rows, 0, sizeof *rows);
    rows->query_rows = malloc((size_t)L * sizeof(int64_t));
    rows->key_rows = malloc((size_t)L * sizeof(int64_t));
    rows->query_tokens = malloc((size_t)L * sizeof(int64_t));
    rows->key_tokens = malloc((size_t)L * sizeof(int64_t));
    rows->query_runs = malloc((size_t)L * sizeof(run));
    rows->key_runs = malloc((size_t)L * sizeof(run));
    rows->query_used = malloc((size_t)L * sizeof(bool));
    rows->key_used = malloc((size_t)L * sizeof(bool));
    return rows->query_rows && rows->key_rows && rows->query_tokens && rows->key_tokens &&
           rows->query_runs && rows->key_runs && rows->query_used && rows->key_used;
}

/* Selects the rows that meet when this rank's queries (tokens query_index) see the block of keys
 * at key_index: the rows of every pair of runs that meet. */
static void select_rows(step_rows *rows, const cpparity_mask_description *mask, int64_t batch,
                        const int64_t *query_index, const int64_t *key_index, int64_t L,
                        cpparity_fault fault) {
    const int64_t query_runs = make_runs(query_index, L, rows->query_runs);
    const int64_t key_runs = make_runs(key_index, L, rows->key_runs);
    const bool every = query_runs * key_runs > RING_MAX_RUN_PAIRS;
    for (int64_t a = 0; a < query_runs; a++) {
        rows->query_used[a] = every;
    }
    for (int64_t b = 0; b < key_runs; b++) {
        rows->key_used[b] = every;
    }
    for (int64_t a = 0; !every && a < query_runs; a++) {
        for (int64_t b = 0; b < key_runs; b++) {
            if ((!rows->query_used[a] || !rows->key_used[b]) &&
                runs_meet(mask, batch, &rows->query_runs[a], &rows->key_runs[b], fault)) {
                rows->query_used[a] = true;
                rows->key_used[b] = true;
            }
        }
    }
    rows->query_count = 0;
    rows->key_count = 0;
    for (int64_t a = 0; a < query_runs; a++) {
        const run *r = &rows->query_runs[a];
        for (int64_t i = 0; rows->query_used[a] && i < r->length; i++) {
            rows->query_rows[rows->query_count] = r->row + i;
            rows->query_tokens[rows->query_count++] = r->token + i;
        }
    }
    for (int64_t b = 0; b < key_runs; b++) {
        const run *r = &rows->key_runs[b];
        for (int64_t i = 0; rows->key_used[b] && i < r->length; i++) {
            rows->key_rows[rows->key_count] = r->row + i;
            rows->key_tokens[rows->key_count++] = r->token + i;
        }
    }
}

/* --- the operations on host memory ------------------------------------------------------- */

static void *host_allocate(void *context, size_t bytes) {
    (void)context;
    return malloc(bytes > 0 ? bytes : 1);
}

static void host_release(void *context, void *memory) {
    (void)context;
    free(memory);
}

static cpparity_status host_copy(void *context, float *to, const float *from, int64_t count,
                                 cpparity_error *error) {
    (void)context;
    (void)error;
    memcpy(to, from, (size_t)count * sizeof(float));
    return CPPARITY_OK;
}

static cpparity_status host_fill(void *context, float *to, float value, int64_t count,
                                 cpparity_error *error) {
    (void)context;
    (void)error;
    for (int64_t i = 0; i < count; i++) {
        to[i] = value;
    }
    return CPPARITY_OK;
}

static cpparity_status host_gather_rows(void *context, float *to, const float *from, int64_t batch,
                                        int64_t L, int64_t width, const int64_t *rows,
                                        int64_t count, cpparity_error *error) {
    (void)context;
    (void)error;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < count; i++) {
            memcpy(to + (b * count + i) * width, from + (b * L + rows[i]) * width,
                   (size_t)width * sizeof(float));
        }
    }
    return CPPARITY_OK;
}

static cpparity_status host_scatter_add_rows(void *context, float *to, const float *from,
                                             int64_t batch, int64_t L, int64_t width,
                                             const int64_t *rows, int64_t count,
                                             cpparity_error *error) {
    (void)context;
    (void)error;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < count; i++) {
            float *row = to + (b * L + rows[i]) * width;
            const float *add = from + (b * count + i) * width;
            for (int64_t e = 0; e < width; e++) {
                row[e] += add[e];
            }
        }
    }
    return CPPARITY_OK;
}

static cpparity_status host_gather_lse(void *context, float *to, const float *from, int64_t planes,
                                       int64_t L, const int64_t *rows, int64_t count,
                                       cpparity_error *error) {
    (void)context;
    (void)error;
    for (int64_t p = 0; p < planes; p++) {
        for (int64_t i = 0; i < count; i++) {
            to[p * count + i] = from[p * L + rows[i]];
        }
    }
    return CPPARITY_OK;
}

static cpparity_status host_merge_rows(void *context, float *out, float *lse, const float *part_out,
                                       const float *part_lse, int64_t batch, int64_t L,
                                       int64_t heads, int64_t head_dim, const int64_t *rows,
                                       int64_t count, cpparity_fault fault, cpparity_error *error) {
    (void)context;
    (void)error;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t h = 0; h < heads; h++) {
            for (int64_t i = 0; i < count; i++) {
                const int64_t row = rows[i];
                ring_merge_row(out + ((b * L + row) * heads + h) * head_dim,
                               &lse[(b * heads + h) * L + row],
                               part_out + ((b * count + i) * heads + h) * head_dim,
                               part_lse[(b * heads + h) * count + i], head_dim, fault);
            }
        }
    }
    return CPPARITY_OK;
}

static cpparity_status host_shift(void *context, cpparity_comm *comm, const float *send,
                                  float *receive, int64_t count, int offset,
                                  cpparity_error *error) {
    (void)context;
    return cpparity_shift(comm, send, receive, count, CPPARITY_FLOAT32, offset, NULL, error);
}

static int host_forward_block(void *context, const cpparity_attention_kernel *kernel, float *out,
                              float *lse, const float *q, const float *k, const float *v,
                              const cpparity_mask_description *mask,
                              const cpparity_attention_dims *dims,
                              const cpparity_attention_block *block, float scale, char *message,
                              size_t size) {
    (void)context;
    return kernel_call_forward_block(kernel, out, lse, q, k, v, mask, dims, block, scale, message,
                                     size);
}

static int host_backward_block(void *context, const cpparity_attention_kernel *kernel, float *dq,
                               float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *out, const float *lse,
                               const cpparity_mask_description *mask,
                               const cpparity_attention_dims *dims,
                               const cpparity_attention_block *block, float scale, char *message,
                               size_t size) {
    (void)context;
    return kernel_call_backward_block(kernel, dq, dk, dv, dout, q, k, v, out, lse, mask, dims,
                                      block, scale, message, size);
}

const ring_operations ring_host_operations = {
    .context = NULL,
    .allocate = host_allocate,
    .release = host_release,
    .copy = host_copy,
    .fill = host_fill,
    .gather_rows = host_gather_rows,
    .scatter_add_rows = host_scatter_add_rows,
    .gather_lse = host_gather_lse,
    .merge_rows = host_merge_rows,
    .shift = host_shift,
    .forward_block = host_forward_block,
    .backward_block = host_backward_block,
};

/* --- the ring ----------------------------------------------------------------------------- */

static const ring_operations *operations_of(const ring_setup *ring) {
    return ring->operations != NULL ? ring->operations : &ring_host_operations;
}

/* Buffers of one call, freed together (in the operations' memory, the rows on the host). */
typedef struct ring_buffers {
    const ring_operations *ops;
    float *held, *incoming;  /* the travelling block (k, v; backward: dk, dv too) */
    float *q, *k, *v;        /* the rows of a step: [B, n, H, Dh], [B, n, Hkv, Dh] ×2 */
    float *out, *dout, *lse; /* [B, n, H, Dh] ×2, [B, H, n] */
    float *dq, *dk, *dv;     /* backward: the step's gradients */
    step_rows rows;
} ring_buffers;

static void ring_buffers_free(ring_buffers *buffers) {
    const ring_operations *ops = buffers->ops;
    float *const made[] = {buffers->held, buffers->incoming, buffers->q,    buffers->k,
                           buffers->v,    buffers->out,      buffers->dout, buffers->lse,
                           buffers->dq,   buffers->dk,       buffers->dv};
    for (size_t i = 0; ops != NULL && i < sizeof made / sizeof made[0]; i++) {
        if (made[i] != NULL) {
            ops->release(ops->context, made[i]);
        }
    }
    step_rows_free(&buffers->rows);
}

/* count floats in the operations' memory. */
static float *allocate_floats(const ring_operations *ops, int64_t count) {
    return ops->allocate(ops->context, (size_t)count * sizeof(float));
}

/* Allocates for one call; travelling holds `travelling` floats. */
static cpparity_status ring_buffers_allocate(ring_buffers *buffers, const ring_setup *ring,
                                             int64_t travelling, bool backward,
                                             cpparity_error *error) {
    memset(buffers, 0, sizeof *buffers);
    const ring_operations *ops = operations_of(ring);
    buffers->ops = ops;
    const int64_t B = ring->batch, L = ring->rows, Dh = ring->head_dim;
    const int64_t query = B * L * ring->heads * Dh, key = B * L * ring->kv_heads * Dh;
    bool made = step_rows_allocate(&buffers->rows, L);
    buffers->held = allocate_floats(ops, travelling);
    buffers->incoming = allocate_floats(ops, travelling);
    buffers->q = allocate_floats(ops, query);
    buffers->k = allocate_floats(ops, key);
    buffers->v = allocate_floats(ops, key);
    buffers->out = allocate_floats(ops, query);
    buffers->lse = allocate_floats(ops, B * ring->heads * L);
    made = made && buffers->held && buffers->incoming && buffers->q && buffers->k && buffers->v &&
           buffers->out && buffers->lse;
    if (backward) {
        buffers->dout = allocate_floats(ops, query);
        buffers->dq = allocate_floats(ops, query);
        buffers->dk = allocate_floats(ops, key);
        buffers->dv = allocate_floats(ops, key);
        made = made && buffers->dout && buffers->dq && buffers->dk && buffers->dv;
    }
    if (!made) {
        ring_buffers_free(buffers);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (ring attention)", ring->comm->rank);
    }
    return CPPARITY_OK;
}

/* The member whose block this member holds at step `step`. */
static int64_t step_source(const ring_setup *ring, int64_t step) {
    const int64_t cp = ring->comm->size;
    return ((ring->comm->rank - step) % cp + cp) % cp;
}

/* Passes the held block (count floats) one rank on; swaps held and incoming. */
static cpparity_status pass_on(const ring_setup *ring, ring_buffers *buffers, int64_t count,
                               cpparity_error *error) {
    const ring_operations *ops = buffers->ops;
    cpparity_status status =
        ops->shift(ops->context, ring->comm, buffers->held, buffers->incoming, count, 1, error);
    float *swap = buffers->held;
    buffers->held = buffers->incoming;
    buffers->incoming = swap;
    return status;
}

/* The rows of step `step` that meet, into rows: true when the step calls the kernel (some rows
 * meet, the step is within the ring's count, and no call of this pass has failed). */
static bool step_meets(const ring_setup *ring, const cpparity_mask_description *mask, int64_t step,
                       cpparity_status failed, step_rows *rows) {
    const int64_t L = ring->rows;
    const int64_t *tokens = ring->tokens;
    select_rows(rows, mask, ring->batch, tokens + ring->comm->rank * L,
                tokens + step_source(ring, step) * L, L, ring->fault);
    return step < ring_step_count(ring->comm->size, ring->fault) && failed == CPPARITY_OK &&
           rows->query_count > 0 && rows->key_count > 0;
}

/* Puts this member's k and v (key_count floats each) at the front of the travelling block. */
static cpparity_status load_block(ring_buffers *buffers, const float *k, const float *v,
                                  int64_t key_count, cpparity_error *error) {
    const ring_operations *ops = buffers->ops;
    cpparity_status status = ops->copy(ops->context, buffers->held, k, key_count, error);
    return status == CPPARITY_OK
               ? ops->copy(ops->context, buffers->held + key_count, v, key_count, error)
               : status;
}

/* Runs the next operation only while everything before it succeeded. */
#define THEN(call)                                                                                 \
    do {                                                                                           \
        if (failed == CPPARITY_OK) {                                                               \
            failed = (call);                                                                       \
        }                                                                                          \
    } while (0)

cpparity_status ring_attention_forward(const ring_setup *ring, float *out, float *lse,
                                       const float *q, const float *k, const float *v,
                                       const cpparity_mask_description *mask, float scale,
                                       cpparity_error *error) {
    const int64_t B = ring->batch, H = ring->heads, Hkv = ring->kv_heads, Dh = ring->head_dim;
    const int64_t L = ring->rows, cp = ring->comm->size;
    const int64_t key_count = B * L * Hkv * Dh;
    ring_buffers buffers;
    cpparity_status status = ring_buffers_allocate(&buffers, ring, 2 * key_count, false, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const ring_operations *ops = buffers.ops;
    void *context = ops->context;
    /* a failure here or in a step: the ring still turns to the end, so no rank waits alone */
    cpparity_status failed = load_block(&buffers, k, v, key_count, error);
    THEN(ops->fill(context, out, 0.0f, B * L * H * Dh, error));
    THEN(ops->fill(context, lse, -INFINITY, B * H * L, error));
    const cpparity_attention_dims dims = {B, mask->seq_len, H, Hkv, Dh};
    step_rows *rows = &buffers.rows;
    for (int64_t step = 0; step < cp && status == CPPARITY_OK; step++) {
        const int64_t source = step_source(ring, step);
        if (step_meets(ring, mask, step, failed, rows)) {
            const int64_t nq = rows->query_count, nk = rows->key_count;
            THEN(
                ops->gather_rows(context, buffers.q, q, B, L, H * Dh, rows->query_rows, nq, error));
            THEN(ops->gather_rows(context, buffers.k, buffers.held, B, L, Hkv * Dh, rows->key_rows,
                                  nk, error));
            THEN(ops->gather_rows(context, buffers.v, buffers.held + key_count, B, L, Hkv * Dh,
                                  rows->key_rows, nk, error));
            const cpparity_attention_block block = {nq, nk, rows->query_tokens, rows->key_tokens};
            char message[512] = "";
            if (failed == CPPARITY_OK &&
                ops->forward_block(context, ring->kernel, buffers.out, buffers.lse, buffers.q,
                                   buffers.k, buffers.v, mask, &dims, &block, scale, message,
                                   sizeof message) != 0) {
                failed = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "rank %d ring step %lld (block of rank %lld): kernel "
                                            "%s forward_block failed: %s",
                                            ring->comm->rank, (long long)step, (long long)source,
                                            ring->kernel->name, message);
            }
            THEN(ops->merge_rows(context, out, lse, buffers.out, buffers.lse, B, L, H, Dh,
                                 rows->query_rows, nq, ring->fault, error));
        }
        if (step + 1 < cp) {
            status = pass_on(ring, &buffers, 2 * key_count, error);
        }
    }
    ring_buffers_free(&buffers);
    return status != CPPARITY_OK ? status : failed;
}

cpparity_status ring_attention_backward(const ring_setup *ring, float *dq, float *dk, float *dv,
                                        const float *dout, const float *q, const float *k,
                                        const float *v, const float *out, const float *lse,
                                        const cpparity_mask_description *mask, float scale,
                                        cpparity_error *error) {
    const int64_t B = ring->batch, H = ring->heads, Hkv = ring->kv_heads, Dh = ring->head_dim;
    const int64_t L = ring->rows, cp = ring->comm->size;
    const int64_t key_count = B * L * Hkv * Dh;
    ring_buffers buffers;
    cpparity_status status = ring_buffers_allocate(&buffers, ring, 4 * key_count, true, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    const ring_operations *ops = buffers.ops;
    void *context = ops->context;
    /* the travelling block: k, v, and the dk, dv accumulated for them so far */
    cpparity_status failed = load_block(&buffers, k, v, key_count, error);
    THEN(ops->fill(context, buffers.held + 2 * key_count, 0.0f, 2 * key_count, error));
    THEN(ops->fill(context, dq, 0.0f, B * L * H * Dh, error));
    const cpparity_attention_dims dims = {B, mask->seq_len, H, Hkv, Dh};
    step_rows *rows = &buffers.rows;
    for (int64_t step = 0; step < cp && status == CPPARITY_OK; step++) {
        const int64_t source = step_source(ring, step);
        if (step_meets(ring, mask, step, failed, rows)) {
            const int64_t nq = rows->query_count, nk = rows->key_count;
            THEN(
                ops->gather_rows(context, buffers.q, q, B, L, H * Dh, rows->query_rows, nq, error));
            THEN(ops->gather_rows(context, buffers.dout, dout, B, L, H * Dh, rows->query_rows, nq,
                                  error));
            THEN(ops->gather_rows(context, buffers.out, out, B, L, H * Dh, rows->query_rows, nq,
                                  error));
            THEN(ops->gather_lse(context, buffers.lse, lse, B * H, L, rows->query_rows, nq, error));
            THEN(ops->gather_rows(context, buffers.k, buffers.held, B, L, Hkv * Dh, rows->key_rows,
                                  nk, error));
            THEN(ops->gather_rows(context, buffers.v, buffers.held + key_count, B, L, Hkv * Dh,
                                  rows->key_rows, nk, error));
            const cpparity_attention_block block = {nq, nk, rows->query_tokens, rows->key_tokens};
            char message[512] = "";
            if (failed == CPPARITY_OK &&
                ops->backward_block(context, ring->kernel, buffers.dq, buffers.dk, buffers.dv,
                                    buffers.dout, buffers.q, buffers.k, buffers.v, buffers.out,
                                    buffers.lse, mask, &dims, &block, scale, message,
                                    sizeof message) != 0) {
                failed = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                            "rank %d ring step %lld (block of rank %lld): kernel "
                                            "%s backward_block failed: %s",
                                            ring->comm->rank, (long long)step, (long long)source,
                                            ring->kernel->name, message);
            }
            THEN(ops->scatter_add_rows(context, dq, buffers.dq, B, L, H * Dh, rows->query_rows, nq,
                                       error));
            THEN(ops->scatter_add_rows(context, buffers.held + 2 * key_count, buffers.dk, B, L,
                                       Hkv * Dh, rows->key_rows, nk, error));
            THEN(ops->scatter_add_rows(context, buffers.held + 3 * key_count, buffers.dv, B, L,
                                       Hkv * Dh, rows->key_rows, nk, error));
        }
        if (step + 1 < cp) {
            status = pass_on(ring, &buffers, 4 * key_count, error);
        }
    }
    /* the last block held belongs to the next rank: its dk and dv go home, one step on */
    const float *home = buffers.held + 2 * key_count;
    if (status == CPPARITY_OK && cp > 1) {
        const int offset = ring->fault == CPPARITY_FAULT_RING_DKV_DIRECTION ? -1 : 1;
        status = ops->shift(context, ring->comm, buffers.held + 2 * key_count, buffers.incoming,
                            2 * key_count, offset, error);
        home = buffers.incoming;
    }
    if (status == CPPARITY_OK) {
        THEN(ops->copy(context, dk, home, key_count, error));
        THEN(ops->copy(context, dv, home + key_count, key_count, error));
    }
    ring_buffers_free(&buffers);
    return status != CPPARITY_OK ? status : failed;
}
