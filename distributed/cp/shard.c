/* shard.c — contiguous sequence shards with automatic padding (see shard.h). */
#include "shard.h"

shard_layout shard_layout_make(int64_t seq_len, int64_t cp, int64_t rank) {
    shard_layout layout;
    layout.seq_len = seq_len;
    layout.cp = cp;
    layout.rank = rank;
    layout.local_len = (seq_len + cp - 1) / cp;
    layout.padded_seq_len = layout.local_len * cp;
    layout.offset = rank * layout.local_len;
    return layout;
}

cpparity_status shard_slice_batch(cpparity_batch *local, const cpparity_batch *full,
                                  const shard_layout *layout, cpparity_error *error) {
    cpparity_status status = cpparity_batch_allocate(local, full->batch, layout->local_len, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int64_t b = 0; b < full->batch; b++) {
        for (int64_t t = 0; t < layout->local_len; t++) {
            const int64_t global = layout->offset + t;
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
            const int64_t i = b * L + t, global = layout->offset + t;
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
