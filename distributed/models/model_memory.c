/* model_memory.c — the host memory of one rank of the model under test (see model_memory.h). */
#include "distributed/models/model_memory.h"

#include "common/batch.h"
#include "common/checked_size.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "distributed/models/activation_layout.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/models/model_f32.h"

/* The sizes of one rank, as model_f32.c and model_cuda.cu lay them out (shard.h, ulysses.h). */
typedef struct rank_sizes {
    int64_t B, S, V, D, F, H, Hkv, Dh, layers, cp;
    int64_t P;          /* parameters */
    int64_t parameters; /* tensors in the parameter table */
    int64_t L, Sp, Nl, NSp, Hl, Hkvl, widest;
    bool ring;           /* ring attention (ring.h), alone or in a hybrid, rather than Ulysses */
    int64_t U;           /* the all-to-all's ranks: cp, U (hybrid) or 1 (ring) */
    int64_t NS;          /* tokens of the sequence-side tensors: B·Sp, or B·L for ring */
    int64_t S_attention; /* their sequence length: Sp, or L for ring */
} rank_sizes;

/* What both models hold alike: their slice of the batch and compact mask, the mask gather, the
 * reduce's gather, and a planted fault's buffers (model_f32*.c, model_cuda_faults.cu) — *kept
 * for the instance's life, *forward at the end of forward, *reduce while gradients reduce. */
typedef struct rank_common {
    int64_t local;         /* the slice of the batch and the compact mask */
    int64_t exchange;      /* floats of an all-to-all's send and receive */
    int64_t gather;        /* the mask gather at the start of forward */
    int64_t reduce;        /* the all-reduce's gather of every rank's gradients */
    int64_t fault_kept;    /* a fault's buffers kept */
    int64_t fault_forward; /* a fault's buffers at the end of forward */
    int64_t fault_reduce;  /* a fault's buffers while gradients reduce */
    int64_t ring_tokens;   /* ring and hybrid: every member's rows' tokens, kept */
} rank_common;

/* The sizes of setup; false (error set) when the parameter table cannot be made. */
static bool sizes_of(cpparity_sizer *s, const cpparity_implementation_estimate *setup,
                     rank_sizes *z) {
    const cpparity_model_config *m = setup->config;
    *z = (rank_sizes){.B = setup->batch,
                      .S = setup->seq_len,
                      .V = m->vocab_size,
                      .D = m->hidden_size,
                      .F = m->intermediate_size,
                      .H = m->num_attention_heads,
                      .Hkv = m->num_key_value_heads,
                      .Dh = m->head_dim,
                      .layers = m->num_hidden_layers,
                      .cp = setup->cp >= 1 ? setup->cp : 1};
    cpparity_tensor_table table = {0};
    cpparity_error why;
    if (cpparity_model_parameter_table(m, &table, &why) != CPPARITY_OK) {
        cpparity_sizer_fail(s, why.message);
    }
    z->P = table.total;
    z->parameters = table.count;
    cpparity_tensor_table_free(&table);
    const int64_t per = setup->layout == CPPARITY_LAYOUT_ZIGZAG ? 2 * z->cp : z->cp;
    z->L = (z->S / per + (z->S % per != 0)) * (per / z->cp); /* shard.h: zigzag, 2·ceil(S/2cp) */
    z->ring = setup->algorithm.kind != CPPARITY_ALGORITHM_ULYSSES; /* ring, or hybrid's ring */
    /* the all-to-all's degree: cp (Ulysses), U (hybrid), 1 (ring: no all-to-all) */
    z->U = setup->algorithm.kind == CPPARITY_ALGORITHM_HYBRID ? setup->algorithm.ulysses_degree
           : z->ring                                          ? 1
                                                              : z->cp;
    z->U = z->U >= 1 ? z->U : 1;
    z->Sp = CPPARITY_PRODUCT(s, "the padded sequence", z->cp, z->L);
    z->Nl = CPPARITY_PRODUCT(s, "a rank's tokens", z->B, z->L);
    z->NSp = CPPARITY_PRODUCT(s, "the padded tokens", z->B, z->Sp);
    z->Hl = z->H / z->U;
    z->Hkvl = z->Hkv % z->U != 0 ? 1 : z->Hkv / z->U;
    /* the sequence-side tensors: the whole padded sequence (Ulysses), a ring member's rows (the
     * rank's own for ring, its Ulysses group's for hybrid) */
    z->S_attention = z->ring ? CPPARITY_PRODUCT(s, "a ring member's rows", z->U, z->L) : z->Sp;
    z->NS = CPPARITY_PRODUCT(s, "the sequence-side tokens", z->B, z->S_attention);
    z->widest = z->H > z->cp ? z->H : z->cp;
    return s->ok;
}

static rank_common common_of(cpparity_sizer *s, const cpparity_implementation_estimate *setup,
                             const rank_sizes *z) {
    rank_common c = {0};
    c.local =
        CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the local batch", CPPARITY_BATCH_TOKEN_BYTES, z->Nl),
                     CPPARITY_PRODUCT(s, "the compact mask", 17, z->NSp),
                     CPPARITY_PRODUCT(s, "the compact mask", 8, z->B));
    c.exchange = CPPARITY_PRODUCT(s, "the all-to-all buffers", 2, z->Nl, z->widest, z->Dh);
    c.gather = CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the mask gather", 9, z->cp, z->Nl),
                            CPPARITY_PRODUCT(s, "the mask gather", 9, z->NSp));
    c.reduce =
        setup->comm_gathers_reduce ? CPPARITY_PRODUCT(s, "the all-reduce", 4, z->cp, z->P) : 0;
    c.ring_tokens = z->ring ? CPPARITY_PRODUCT(s, "the ring's tokens", 8, z->cp, z->L) : 0;
    const bool every = setup->every_fault;
    const int64_t logits = CPPARITY_PRODUCT(s, "a rank's logits", z->Nl, z->V);
    if (every || setup->fault == CPPARITY_FAULT_POSITIONS_LOCAL) {
        c.fault_kept =
            CPPARITY_SUM(s, c.fault_kept, CPPARITY_PRODUCT(s, "a fault's buffers", 8, z->Nl));
    }
    if (every || setup->fault == CPPARITY_FAULT_STALE_RANK_SLICE) {
        c.fault_kept =
            CPPARITY_SUM(s, c.fault_kept, CPPARITY_PRODUCT(s, "a fault's buffers", 4, logits));
        c.fault_forward = CPPARITY_PRODUCT(s, "a fault's buffers", 4, z->cp, logits);
    }
    if (every || setup->fault == CPPARITY_FAULT_GRAD_REDUCE_ORDER) {
        c.fault_reduce = CPPARITY_PRODUCT(s, "a fault's buffers", 4, z->cp, z->P);
    }
    return c;
}

/* One CPU rank (model_f32*.c, implementation_cpu.c). */
static int64_t cpu_bytes(cpparity_sizer *s, const cpparity_implementation_estimate *setup,
                         const rank_sizes *z, const rank_common *c, int64_t *kept) {
    /* the activations: activation_layout.c's table, as f32_model_init lays it out */
    cpparity_tensor_table layout = {0};
    model_layer_activations offsets[CPPARITY_MAX_LAYERS];
    int64_t final_input, final_rstd, final_normed, final_logits;
    const activation_layout_sizes sizes = {z->B, z->L, z->S_attention, z->Hl, z->Hkvl, 0};
    cpparity_error why;
    if (activation_layout_build(&layout, offsets, &final_input, &final_rstd, &final_normed,
                                &final_logits, setup->config, &sizes, &why) != CPPARITY_OK) {
        cpparity_sizer_fail(s, why.message);
    }
    const int64_t activations = layout.total;
    cpparity_tensor_table_free(&layout);
    /* implementation_cpu.c's instance: the model struct (its per-layer offsets), its parameter
     * and activation tables, parameters and gradients, activations, the local batch, the mask */
    const int64_t instance = CPPARITY_SUM(
        s, (int64_t)sizeof(f32_model) + 1024, cpparity_tensor_table_bytes(z->parameters),
        cpparity_tensor_table_bytes(18 * z->layers + 4),
        CPPARITY_PRODUCT(s, "the parameters", 8, z->P),
        CPPARITY_PRODUCT(s, "the implementation's activations", 4, activations), c->local,
        c->ring_tokens);
    /* model_f32_forward.c: the all-to-all's send and receive, the gathered heads, a projection,
     * the attention output in rank order; ring.c's buffers during a ring forward */
    const int64_t query = CPPARITY_PRODUCT(s, "a rank's queries", z->Nl, z->H, z->Dh);
    /* a ring member's block: its rows × the heads it holds */
    const int64_t ring_query = CPPARITY_PRODUCT(s, "a ring member's queries", z->NS, z->Hl, z->Dh);
    const int64_t key = CPPARITY_PRODUCT(s, "a ring member's keys", z->NS, z->Hkvl, z->Dh);
    /* ring.c's row bookkeeping: four row lists, two run lists, two flags */
    const int64_t ring_rows = CPPARITY_PRODUCT(s, "the ring's rows", 82, z->S_attention);
    const int64_t ring_forward =
        z->ring ? CPPARITY_SUM(
                      s, CPPARITY_PRODUCT(s, "the ring's buffers", 4, 6, key),
                      CPPARITY_PRODUCT(s, "the ring's buffers", 4, 2, ring_query),
                      CPPARITY_PRODUCT(s, "the ring's buffers", 4, z->B, z->Hl, z->S_attention),
                      ring_rows)
                : 0;
    const int64_t ring_backward =
        z->ring ? CPPARITY_SUM(
                      s, CPPARITY_PRODUCT(s, "the ring's buffers", 4, 12, key),
                      CPPARITY_PRODUCT(s, "the ring's buffers", 4, 4, ring_query),
                      CPPARITY_PRODUCT(s, "the ring's buffers", 4, z->B, z->Hl, z->S_attention),
                      ring_rows)
                : 0;
    const int64_t scratch = CPPARITY_SUM(
        s,
        CPPARITY_PRODUCT(
            s, "the forward scratch", 4,
            CPPARITY_SUM(s, c->exchange,
                         CPPARITY_PRODUCT(s, "the forward scratch", z->Nl, z->cp, z->Dh),
                         CPPARITY_PRODUCT(s, "the forward scratch", z->Nl, z->D), query)),
        ring_forward);
    /* model_f32_backward.c: per token the stream, residual and normed (D each), swiglu, gate,
     * up (F each), attention and q (H·Dh), k and v (Hkv·Dh); the sequence-side q, k, v
     * gradients; the gathered heads; the all-to-all; and model_f32_head.c's chunk of logits and
     * of their gradient (the forward holds one chunk, the backward two) */
    const int64_t per_token =
        CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the backward buffers", 3, z->D),
                     CPPARITY_PRODUCT(s, "the backward buffers", 3, z->F),
                     CPPARITY_PRODUCT(s, "the backward buffers", 2, z->H, z->Dh),
                     CPPARITY_PRODUCT(s, "the backward buffers", 2, z->Hkv, z->Dh));
    const int64_t chunk = CPPARITY_PRODUCT(
        s, "a chunk of logits", 4, z->Nl < MODEL_F32_HEAD_ROWS ? z->Nl : MODEL_F32_HEAD_ROWS, z->V);
    /* stale-rank-slice: the whole slice made once, beside every rank's gathered */
    const bool stale = setup->every_fault || setup->fault == CPPARITY_FAULT_STALE_RANK_SLICE;
    const int64_t stale_own = stale ? CPPARITY_PRODUCT(s, "a fault's buffers", 4, z->Nl, z->V) : 0;
    const int64_t sequence = CPPARITY_PRODUCT(s, "the backward buffers", 2, z->NS,
                                              CPPARITY_SUM(s, z->Hl, z->Hkvl), z->Dh);
    const int64_t buffers = CPPARITY_SUM(
        s,
        CPPARITY_PRODUCT(
            s, "the backward buffers", 4,
            CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the backward buffers", z->Nl, per_token), sequence,
                         CPPARITY_PRODUCT(s, "the backward buffers", 2, chunk / 4),
                         CPPARITY_PRODUCT(s, "the backward buffers", z->Nl, z->cp, z->Dh),
                         c->exchange)),
        ring_backward);
    /* the kernel's own workspace in an attention call over the gathered sequence */
    const cpparity_attention_dims dims = {z->B, z->S_attention, z->Hl, z->Hkvl, z->Dh};
    int64_t workspace = 0;
    if (!kernel_workspace_bytes(setup->kernel, &dims, &workspace)) {
        cpparity_sizer_fail(s, "the attention kernel's workspace");
    }
    *kept = CPPARITY_SUM(s, instance, c->fault_kept);
    const int64_t total = CPPARITY_SUM(
        s, instance, c->fault_kept, workspace,
        CPPARITY_LARGEST(c->gather, scratch, chunk, CPPARITY_SUM(s, c->fault_forward, stale_own),
                         CPPARITY_SUM(s, buffers, CPPARITY_LARGEST(c->reduce, c->fault_reduce))));
    return total;
}

/* One CUDA rank's host memory (model_cuda*.cu). */
static int64_t cuda_bytes(cpparity_sizer *s, const cpparity_implementation_estimate *setup,
                          const rank_sizes *z, const rank_common *c, int64_t *kept) {
    /* model_cuda.cu: pinned staging for host collectives (the largest: an all-to-all's send and
     * receive (Ulysses, hybrid), the ring's backward block — k, v, dk, dv of a member's rows —
     * sent and received (ring, hybrid), or the gradients), the token groups, the ring's tokens;
     * the parameters' upload */
    const bool all_to_all = setup->algorithm.kind != CPPARITY_ALGORITHM_RING;
    const int64_t ring_block =
        z->ring ? CPPARITY_PRODUCT(s, "the ring's travelling block", 8, z->NS, z->Hkvl, z->Dh) : 0;
    const int64_t staging =
        setup->comm_on_device
            ? 0
            : CPPARITY_PRODUCT(s, "the pinned staging", 4,
                               CPPARITY_LARGEST(all_to_all ? c->exchange : 0, ring_block, z->P));
    const int64_t groups =
        CPPARITY_PRODUCT(s, "the token groups", 8,
                         CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the token groups", 4, z->Nl), 1));
    *kept = CPPARITY_SUM(s, c->local, groups, staging, c->ring_tokens, c->fault_kept);
    const int64_t total = CPPARITY_SUM(
        s, c->local, groups, staging, c->ring_tokens, c->fault_kept,
        CPPARITY_LARGEST(CPPARITY_PRODUCT(s, "the parameters' upload", 4, z->P), c->gather,
                         c->fault_forward, CPPARITY_LARGEST(c->reduce, c->fault_reduce)));
    return total;
}

/* The figure rank_bytes gives for setup's rank into *bytes, or the size that overflowed. */
static cpparity_status
estimate(const cpparity_implementation_estimate *setup,
         int64_t (*rank_bytes)(cpparity_sizer *, const cpparity_implementation_estimate *,
                               const rank_sizes *, const rank_common *, int64_t *),
         int64_t *bytes, int64_t *kept, cpparity_error *error) {
    cpparity_sizer s = CPPARITY_SIZER_START;
    rank_sizes z;
    int64_t total = 0, after = 0;
    if (sizes_of(&s, setup, &z)) {
        const rank_common c = common_of(&s, setup, &z);
        total = rank_bytes(&s, setup, &z, &c, &after);
    }
    *bytes = s.ok ? total : 0;
    *kept = s.ok ? after : 0;
    return s.ok ? CPPARITY_OK : cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s", s.what);
}

cpparity_status model_memory_cpu(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                 int64_t *kept, cpparity_error *error) {
    return estimate(setup, cpu_bytes, bytes, kept, error);
}

cpparity_status model_memory_cuda(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                  int64_t *kept, cpparity_error *error) {
    return estimate(setup, cuda_bytes, bytes, kept, error);
}
