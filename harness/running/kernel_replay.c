/* kernel_replay.c — a kernel dump's outputs given back as kernel calls (see kernel_replay.h). */
#include "harness/running/kernel_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/running/attention_blocks.h"

/* The layer's record, or NULL (with error filled) when the item is outside the dump. */
static const kernel_dump_layer *current_layer(const kernel_replay *r, char *error,
                                              size_t capacity) {
    if (r->current == NULL || r->layer < 0 || r->layer >= r->current->layer_count) {
        snprintf(error, capacity, "kernel dump: layer %lld is not in the dump",
                 (long long)r->layer);
        return NULL;
    }
    return &r->current->layers[r->layer];
}

static void copy(void *to, const float *from, int64_t count) {
    memcpy(to, from, (size_t)count * sizeof *from);
}

static int64_t query_count(const cpparity_attention_dims *d, int64_t rows) {
    return d->batch * rows * d->heads * d->head_dim;
}

static int64_t key_count(const cpparity_attention_dims *d, int64_t rows) {
    return d->batch * rows * d->kv_heads * d->head_dim;
}

static int forward(void *context, void *out, float *lse, const void *q, const void *k,
                   const void *v, const cpparity_mask_description *mask,
                   const cpparity_attention_dims *dims, float scale, void *stream, char *error,
                   size_t capacity) {
    (void)q, (void)k, (void)v, (void)mask, (void)scale, (void)stream;
    const kernel_replay *r = context;
    const kernel_dump_layer *layer = current_layer(r, error, capacity);
    if (layer == NULL) {
        return 1;
    }
    const bool again = r->phase == ATTENTION_CALL_AGAIN;
    if (r->phase != ATTENTION_CALL_OWN && !again) {
        snprintf(error, capacity, "kernel dump: a forward outside the layer's own calls");
        return 1;
    }
    float *const *from = again ? layer->again : layer->called;
    copy(out, from[0], query_count(dims, dims->seq_len));
    copy(lse, from[1], dims->batch * dims->heads * dims->seq_len);
    return 0;
}

static int backward(void *context, void *dq, void *dk, void *dv, const void *dout, const void *q,
                    const void *k, const void *v, const void *out, const float *lse,
                    const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                    float scale, void *stream, char *error, size_t capacity) {
    (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)mask, (void)scale,
        (void)stream;
    const kernel_replay *r = context;
    const kernel_dump_layer *layer = current_layer(r, error, capacity);
    if (layer == NULL) {
        return 1;
    }
    float *const *from = NULL;
    switch (r->phase) {
    case ATTENTION_CALL_OWN:
        from = layer->called + 2;
        break;
    case ATTENTION_CALL_AGAIN:
        from = layer->again + 2;
        break;
    case ATTENTION_CALL_ALONE: /* without backward_alone/, the kernel's backward ignores them */
        from = r->dump->backward_uses_out_lse ? layer->alone : layer->called + 2;
        break;
    default:
        snprintf(error, capacity, "kernel dump: a backward outside the layer's calls");
        return 1;
    }
    copy(dq, from[0], query_count(dims, dims->seq_len));
    copy(dk, from[1], key_count(dims, dims->seq_len));
    copy(dv, from[2], key_count(dims, dims->seq_len));
    return 0;
}

/* The recorded outputs of the pair block names (by its token lists), or NULL with error. */
static float *const *block_outputs(const kernel_replay *r, const cpparity_attention_dims *dims,
                                   const cpparity_attention_block *block, char *error,
                                   size_t capacity) {
    const kernel_dump_layer *layer = current_layer(r, error, capacity);
    if (layer == NULL) {
        return NULL;
    }
    if (r->phase != ATTENTION_CALL_BLOCKS) {
        snprintf(error, capacity, "kernel dump: a block call outside the layer's block calls");
        return NULL;
    }
    int64_t *tokens = calloc((size_t)dims->seq_len + 1, sizeof *tokens);
    if (tokens == NULL) {
        snprintf(error, capacity, "out of memory");
        return NULL;
    }
    int found_query = -1, found_key = -1;
    for (int i = 0; i < ATTENTION_QUERY_BLOCKS && found_query < 0; i++) {
        const int64_t n = attention_query_block(dims->seq_len, i, tokens);
        found_query = n == block->query_len &&
                              memcmp(tokens, block->query_index, (size_t)n * sizeof *tokens) == 0
                          ? i
                          : -1;
    }
    for (int j = 0; j < ATTENTION_KEY_BLOCKS && found_key < 0; j++) {
        const int64_t n = attention_key_block(dims->seq_len, j, tokens);
        found_key =
            n == block->key_len && memcmp(tokens, block->key_index, (size_t)n * sizeof *tokens) == 0
                ? j
                : -1;
    }
    free(tokens);
    if (found_query < 0 || found_key < 0 || layer->blocks[found_query][found_key][0] == NULL) {
        snprintf(error, capacity,
                 "kernel dump: no block call of %lld query rows and %lld key rows "
                 "in the dump",
                 (long long)block->query_len, (long long)block->key_len);
        return NULL;
    }
    return layer->blocks[found_query][found_key];
}

static int forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                         const void *v, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, const cpparity_attention_block *block,
                         float scale, void *stream, char *error, size_t capacity) {
    (void)q, (void)k, (void)v, (void)mask, (void)scale, (void)stream;
    float *const *from = block_outputs(context, dims, block, error, capacity);
    if (from == NULL) {
        return 1;
    }
    copy(out, from[0], query_count(dims, block->query_len));
    copy(lse, from[1], dims->batch * dims->heads * block->query_len);
    return 0;
}

static int backward_block(void *context, void *dq, void *dk, void *dv, const void *dout,
                          const void *q, const void *k, const void *v, const void *out,
                          const float *lse, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims,
                          const cpparity_attention_block *block, float scale, void *stream,
                          char *error, size_t capacity) {
    (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)mask, (void)scale,
        (void)stream;
    float *const *from = block_outputs(context, dims, block, error, capacity);
    if (from == NULL) {
        return 1;
    }
    copy(dq, from[2], query_count(dims, block->query_len));
    copy(dk, from[3], key_count(dims, block->key_len));
    copy(dv, from[4], key_count(dims, block->key_len));
    return 0;
}

/* A layer the dump marks unsupported is refused with its reason. */
static int supports(void *context, const cpparity_mask_description *mask,
                    const cpparity_attention_dims *dims, char *why, size_t capacity) {
    (void)mask, (void)dims;
    const kernel_dump_layer *layer = current_layer(context, why, capacity);
    if (layer == NULL) {
        return 0;
    }
    if (layer->unsupported[0] != '\0') {
        snprintf(why, capacity, "%s", layer->unsupported);
        return 0;
    }
    return 1;
}

static void phase(void *context, int64_t layer, attention_call_phase next) {
    kernel_replay *r = context;
    r->layer = layer;
    r->phase = next;
}

void kernel_replay_init(kernel_replay *replay, const kernel_dump *dump) {
    memset(replay, 0, sizeof *replay);
    replay->dump = dump;
    uint32_t capabilities =
        CPPARITY_KERNEL_CAPABILITY_BITS & ~CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS;
    if (!dump->deterministic) {
        capabilities &= ~CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC;
    }
    replay->kernel = (cpparity_attention_kernel){
        .abi_version = CPPARITY_KERNEL_ABI_VERSION,
        .struct_size = sizeof(cpparity_attention_kernel),
        .name = dump->kernel,
        .version = dump->kernel_version,
        .device = CPPARITY_KERNEL_DEVICE_CPU,
        .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
        .context = replay,
        .forward = forward,
        .backward = backward,
        .capabilities = capabilities,
        .supports = supports,
        .forward_block = dump->block_calls ? forward_block : NULL,
        .backward_block = dump->block_calls ? backward_block : NULL,
    };
    replay->observer = (attention_item_observer){
        phase, replay,
        "the kernel dump has none (block_calls 0), only its whole-sequence calls were judged"};
    replay->layer = -1;
}

void kernel_replay_select(kernel_replay *replay, int64_t index) {
    replay->current =
        index >= 0 && index < replay->dump->case_count ? &replay->dump->cases[index] : NULL;
    replay->layer = -1;
}
