/* shard.c — sequence shards by layout, with automatic padding (see shard.h). */
#include "shard.h"

#include <string.h>

shard_layout shard_layout_make(int64_t seq_len, int64_t cp, int64_t rank, cpparity_layout kind) {
    shard_layout layout;
    layout.kind = kind;
    layout.fault = CPPARITY_FAULT_NONE;
    layout.seq_len = seq_len;
    layout.cp = cp;
    layout.rank = rank;
    layout.local_len = kind == CPPARITY_LAYOUT_ZIGZAG ? 2 * ((seq_len + 2 * cp - 1) / (2 * cp))
                                                      : (seq_len + cp - 1) / cp;
    layout.padded_seq_len = layout.local_len * cp;
    layout.offset = shard_position(&layout, rank, 0);
    return layout;
}

int64_t shard_position(const shard_layout *layout, int64_t rank, int64_t t) {
    const int64_t L = layout->local_len, cp = layout->cp;
    switch (layout->kind) {
    case CPPARITY_LAYOUT_ZIGZAG: {
        const int64_t half = L / 2; /* chunks r and 2·cp − 1 − r */
        const bool swapped = layout->fault == CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP && rank == 1;
        const int64_t first = swapped ? 2 * cp - 1 - rank : rank;
        const int64_t second = swapped ? rank : 2 * cp - 1 - rank;
        return t < half ? first * half + t : second * half + (t - half);
    }
    case CPPARITY_LAYOUT_ROUND_ROBIN:
        return t * cp + rank;
    case CPPARITY_LAYOUT_CONTIGUOUS:
    default:
        return rank * L + t;
    }
}

void shard_reorder(const shard_layout *layout, float *values, int64_t batch, int64_t width,
                   float *scratch, bool to_positions) {
    if (layout->kind == CPPARITY_LAYOUT_CONTIGUOUS) {
        return;
    }
    const int64_t L = layout->local_len, cp = layout->cp, Sp = layout->padded_seq_len;
    const size_t row = (size_t)width * sizeof(float);
    memcpy(scratch, values, (size_t)(batch * Sp) * row);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < cp; i++) {
            for (int64_t t = 0; t < L; t++) {
                const int64_t ranked = b * Sp + i * L + t;
                const int64_t placed = b * Sp + shard_position(layout, i, t);
                memcpy(values + (to_positions ? placed : ranked) * width,
                       scratch + (to_positions ? ranked : placed) * width, row);
            }
        }
    }
}

cpparity_status shard_slice_batch(cpparity_batch *local, const cpparity_batch *full,
                                  const shard_layout *layout, cpparity_error *error) {
    cpparity_status status = cpparity_batch_allocate(local, full->batch, layout->local_len, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int64_t b = 0; b < full->batch; b++) {
        for (int64_t t = 0; t < layout->local_len; t++) {
            const int64_t global = shard_position(layout, layout->rank, t);
            const int64_t i = b * layout->local_len + t;
            if (global >= layout->seq_len) { /* automatic padding */
                local->input_ids[i] = SHARD_PAD_TOKEN;
                local->labels[i] = CPPARITY_IGNORE_INDEX;
                local->attention_mask[i] = 0;
                local->position_ids[i] = 0;
                continue;
            }
            const int64_t source = b * full->seq_len + global;
            local->input_ids[i] = full->input_ids[source];
            local->labels[i] = full->labels[source];
            local->attention_mask[i] = full->attention_mask[source];
            local->position_ids[i] = full->position_ids[source];
        }
    }
    return CPPARITY_OK;
}

int64_t shard_truncated_length(const shard_layout *layout) {
    return layout->seq_len / layout->cp * layout->cp;
}

void shard_inject(cpparity_batch *local, const shard_layout *layout, cpparity_fault fault) {
    const int64_t L = layout->local_len, kept = shard_truncated_length(layout);
    for (int64_t b = 0; b < local->batch; b++) {
        for (int64_t t = 0; t < L; t++) {
            const int64_t i = b * L + t, global = shard_position(layout, layout->rank, t);
            if (fault == CPPARITY_FAULT_LABEL_SHIFT_IN_SHARD && t == L - 1) {
                local->labels[i] = CPPARITY_IGNORE_INDEX;
            } else if (fault == CPPARITY_FAULT_AUTOPAD_TRUNCATE && global >= kept - 1 &&
                       kept < layout->seq_len) {
                local->labels[i] = CPPARITY_IGNORE_INDEX;
                local->attention_mask[i] = global >= kept ? 0 : local->attention_mask[i];
            } else if (fault == CPPARITY_FAULT_AUTOPAD_UNMASKED && global >= layout->seq_len) {
                local->attention_mask[i] = 1;
                local->labels[i] = SHARD_PAD_TOKEN;
            }
        }
    }
}
