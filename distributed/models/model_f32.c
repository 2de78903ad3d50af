/* model_f32.c — storage and set-up of the float32 context-parallel model (see model_f32.h). */
#include "model_f32.h"

#include "distributed/device/bfloat16.h"
#include "distributed/kernels/kernel_support.h"
#include "distributed/models/layer_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Ulysses constraints on H and Hkv for an all-to-all over `degree` ranks (what = "cp" or "U").
 */
static cpparity_status check_heads(const cpparity_model_config *config, int64_t degree,
                                   const char *what, cpparity_error *error) {
    const int64_t H = config->num_attention_heads, Hkv = config->num_key_value_heads;
    if (H % degree != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: num_attention_heads (%lld) must be a multiple of %s "
                                  "(%lld) for Ulysses head sharding",
                                  (long long)H, what, (long long)degree);
    }
    if (Hkv % degree != 0 && degree % Hkv != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: num_key_value_heads (%lld) must be a multiple of %s "
                                  "(%lld) (kv heads sharded) or divide it (kv heads replicated)",
                                  (long long)Hkv, what, (long long)degree);
    }
    return CPPARITY_OK;
}

cpparity_status f32_model_check_parallelism(const cpparity_model_config *config, int64_t cp,
                                            cpparity_algorithm_choice algorithm,
                                            const cpparity_attention_kernel *kernel,
                                            cpparity_error *error) {
    if (algorithm.kind == CPPARITY_ALGORITHM_ULYSSES) {
        return check_heads(config, cp, "cp", error);
    }
    if (kernel != NULL && !kernel_has_block_calls(kernel)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "refused: ring attention needs block calls, which kernel %s "
                                  "lacks (ABI %u; forward_block/backward_block NULL or absent)",
                                  kernel->name, kernel->abi_version);
    }
    if (algorithm.kind == CPPARITY_ALGORITHM_HYBRID) {
        if (algorithm.ulysses_degree < 2 || algorithm.ring_degree < 2 ||
            algorithm.ulysses_degree * algorithm.ring_degree != cp) {
            return cpparity_error_set(
                error, CPPARITY_ERROR_INPUT, "refused: hybrid %lldx%lld needs cp = %lld, not %lld",
                (long long)algorithm.ulysses_degree, (long long)algorithm.ring_degree,
                (long long)(algorithm.ulysses_degree * algorithm.ring_degree), (long long)cp);
        }
        return check_heads(config, algorithm.ulysses_degree, "U", error);
    }
    return CPPARITY_OK; /* ring: every rank keeps every head */
}

/* The saved activations' table and offsets (activation_layout.h). */
static cpparity_status build_activations(f32_model *model, cpparity_error *error) {
    /* the "sequence" activations: the whole padded sequence (Ulysses), the rank's own rows
     * (ring), its Ulysses group's rows (hybrid) */
    const int64_t sequence = model->algorithm.kind == CPPARITY_ALGORITHM_ULYSSES
                                 ? model->shard.padded_seq_len
                                 : model->ring_rows;
    const activation_layout_sizes sizes = {
        model->batch,       model->shard.local_len, sequence,
        model->local_heads, model->local_kv_heads,  0 /* made by chunks */};
    return activation_layout_build(&model->activation_table, model->layer, &model->final_input,
                                   &model->final_rstd, &model->final_normed, &model->logits,
                                   &model->config, &sizes, error);
}

void f32_model_store(const f32_model *model, float *x, int64_t count) {
    if (model->dtype != CPPARITY_DTYPE_BF16) {
        return;
    }
    for (int64_t i = 0; i < count; i++) {
        x[i] = bf16_round(x[i]);
    }
}

/* The global token of row r of ring member `member`: a rank's shard row (ring), or row r of the
 * member's Ulysses group after its all-to-all, the group's ranks one after the other (hybrid). */
static int64_t ring_token(const f32_model *model, int64_t member, int64_t row) {
    const int64_t L = model->shard.local_len, U = model->ulysses_degree;
    return shard_position(&model->shard, member * U + row / L, row % L);
}

/* The communicators, head counts and ring bookkeeping of the model's algorithm. Hybrid U×R: rank
 * r is in Ulysses group r / U (consecutive ranks, "inside a node") and at place r mod U of it;
 * the ring joins the ranks of one place across the R groups (hybrid-group-across-ring forms the
 * groups across the ring dimension instead: r mod R, while the token bookkeeping still assumes
 * consecutive groups). */
static cpparity_status set_up_algorithm(f32_model *model, cpparity_comm *comm,
                                        cpparity_error *error) {
    const cpparity_model_config *config = &model->config;
    const cpparity_algorithm_choice *algorithm = &model->algorithm;
    const int64_t cp = comm->size, rank = comm->rank;
    model->ulysses_comm = comm;
    model->ring_comm = NULL;
    model->ulysses_degree = cp;
    if (algorithm->kind == CPPARITY_ALGORITHM_RING) {
        model->ulysses_comm = NULL;
        model->ring_comm = comm;
        model->ulysses_degree = 1;
    } else if (algorithm->kind == CPPARITY_ALGORITHM_HYBRID) {
        const int64_t U = algorithm->ulysses_degree, R = algorithm->ring_degree;
        const bool across = model->fault == CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING;
        cpparity_status status = cpparity_comm_split(comm, (int)(across ? rank % R : rank / U),
                                                     (int)rank, &model->ulysses_comm, error);
        if (status == CPPARITY_OK) {
            status = cpparity_comm_split(comm, (int)(across ? rank / R : rank % U), (int)rank,
                                         &model->ring_comm, error);
        }
        model->owns_split = true;
        model->ulysses_degree = U;
        if (status != CPPARITY_OK) {
            return status;
        }
    }
    const int64_t degree = model->ulysses_degree;
    model->local_heads = config->num_attention_heads / degree;
    model->kv_replicated = config->num_key_value_heads % degree != 0;
    model->local_kv_heads = model->kv_replicated ? 1 : config->num_key_value_heads / degree;
    if (model->ring_comm == NULL) {
        return CPPARITY_OK;
    }
    const int64_t members = model->ring_comm->size;
    model->ring_rows = degree * model->shard.local_len;
    model->ring_tokens = malloc((size_t)(members * model->ring_rows) * sizeof(int64_t));
    if (model->ring_tokens == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (ring tokens)", comm->rank);
    }
    for (int64_t member = 0; member < members; member++) {
        for (int64_t row = 0; row < model->ring_rows; row++) {
            model->ring_tokens[member * model->ring_rows + row] = ring_token(model, member, row);
        }
    }
    return CPPARITY_OK;
}

cpparity_status f32_model_init(f32_model *model, const cpparity_model_config *config,
                               const f32_model_shape *shape, cpparity_comm *comm,
                               const cpparity_attention_kernel *kernel, cpparity_error *error) {
    memset(model, 0, sizeof *model);
    cpparity_status status = cpparity_model_config_validate(config, error);
    if (status == CPPARITY_OK) {
        status = f32_model_check_parallelism(config, comm->size, shape->algorithm, kernel, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    model->config = *config;
    model->dtype = shape->dtype;
    model->batch = shape->batch;
    model->comm = comm;
    model->kernel = kernel;
    model->algorithm = shape->algorithm;
    model->fault = shape->fault;
    model->shard = shard_layout_make(shape->seq_len, comm->size, comm->rank, shape->layout);
    model->shard.fault = shape->fault; /* zigzag-chunk-swap lives in the layout */
    status = set_up_algorithm(model, comm, error);
    if (status != CPPARITY_OK) {
        f32_model_free(model);
        return status;
    }
    status = cpparity_model_parameter_table(config, &model->parameter_table, error);
    if (status == CPPARITY_OK) {
        status = cpparity_model_parameters_locate(config, &model->parameter_table,
                                                  &model->parameter, error);
    }
    if (status == CPPARITY_OK) {
        status = build_activations(model, error);
    }
    if (status == CPPARITY_OK) {
        model->parameters = calloc((size_t)model->parameter_table.total, sizeof(float));
        model->gradients = calloc((size_t)model->parameter_table.total, sizeof(float));
        model->activations = calloc((size_t)model->activation_table.total, sizeof(float));
        if (!model->parameters || !model->gradients || !model->activations) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "rank %d: out of memory (float32 model)", comm->rank);
        }
    }
    if (status != CPPARITY_OK) {
        f32_model_free(model);
        return status;
    }
    return CPPARITY_OK;
}

cpparity_status f32_model_load_parameters(f32_model *model, const cpparity_tensor_table *table,
                                          const double *values, cpparity_error *error) {
    for (int64_t e = 0; e < model->parameter_table.count; e++) {
        const cpparity_tensor_entry *entry = &model->parameter_table.entries[e];
        const cpparity_tensor_entry *given = cpparity_tensor_table_find(table, entry->name);
        if (given == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "rank %d: no weights given for parameter %s",
                                      model->comm->rank, entry->name);
        }
        bool same_shape = given->rank == entry->rank && given->count == entry->count;
        for (int d = 0; same_shape && d < entry->rank; d++) {
            same_shape = given->shape[d] == entry->shape[d];
        }
        if (!same_shape || given->offset + given->count > table->total) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "rank %d: the weights given for %s have %lld elements in "
                                      "%d dimensions, the model holds %lld",
                                      model->comm->rank, entry->name, (long long)given->count,
                                      given->rank, (long long)entry->count);
        }
        for (int64_t i = 0; i < entry->count; i++) {
            model->parameters[entry->offset + i] = (float)values[given->offset + i];
        }
        f32_model_store(model, model->parameters + entry->offset, entry->count);
    }
    return CPPARITY_OK;
}

cpparity_status f32_model_set_fault(f32_model *model, cpparity_fault fault, cpparity_error *error) {
    const int64_t B = model->batch, L = model->shard.local_len;
    model->fault = fault;
    if (fault == CPPARITY_FAULT_POSITIONS_LOCAL && model->rope_positions == NULL) {
        model->rope_positions = malloc((size_t)(B * L) * sizeof(int64_t));
        for (int64_t i = 0; model->rope_positions != NULL && i < B * L; i++) {
            model->rope_positions[i] = i % L; /* restarted at every shard */
        }
    }
    if (fault == CPPARITY_FAULT_STALE_RANK_SLICE && model->reported_logits == NULL) {
        model->reported_logits = calloc((size_t)(B * L * model->config.vocab_size), sizeof(float));
    }
    if ((fault == CPPARITY_FAULT_POSITIONS_LOCAL && model->rope_positions == NULL) ||
        (fault == CPPARITY_FAULT_STALE_RANK_SLICE && model->reported_logits == NULL)) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "rank %d: out of memory (fault %s)", model->comm->rank,
                                  cpparity_fault_name(fault));
    }
    return CPPARITY_OK;
}

cpparity_mask_description f32_model_layer_mask(const f32_model *model, int64_t l) {
    return layer_attention_mask(&model->mask, &model->config, l, model->fault);
}

ring_setup f32_model_ring(const f32_model *model) {
    const ring_setup ring = {model->ring_comm,      model->ring_rows,
                             model->ring_tokens,    model->kernel,
                             model->batch,          model->local_heads,
                             model->local_kv_heads, model->config.head_dim,
                             model->fault,          NULL /* host memory */};
    return ring;
}

float f32_model_attention_scale(const f32_model *model) {
    return layer_attention_scale(model->config.head_dim, model->fault);
}

const int64_t *f32_model_rope_positions(const f32_model *model, const cpparity_batch *local) {
    return model->rope_positions != NULL ? model->rope_positions : local->position_ids;
}

void f32_model_logits_rows(const f32_model *model, int64_t batch_row, int64_t row, int64_t count,
                           float *rows) {
    const int64_t L = model->shard.local_len, V = model->config.vocab_size;
    if (model->reported_logits != NULL) { /* stale-rank-slice: the next rank's, gathered */
        memcpy(rows, model->reported_logits + (batch_row * L + row) * V,
               (size_t)(count * V) * sizeof *rows);
        return;
    }
    f32_head_logits(model, batch_row * L + row, count, rows);
}

void f32_model_free(f32_model *model) {
    mask_storage_free(&model->mask);
    cpparity_tensor_table_free(&model->parameter_table);
    cpparity_tensor_table_free(&model->activation_table);
    free(model->parameters);
    free(model->gradients);
    free(model->activations);
    free(model->rope_positions);
    free(model->reported_logits);
    free(model->ring_tokens);
    if (model->owns_split) {
        cpparity_comm_free(model->ulysses_comm);
        cpparity_comm_free(model->ring_comm);
    }
    memset(model, 0, sizeof *model);
}
