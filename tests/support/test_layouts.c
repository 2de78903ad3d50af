/* test_layouts.c — test-only layouts and the definitional dense mask (see test_layouts.h). */
#include "test_layouts.h"

#include <math.h>

#include "fixtures/random.h"

uint64_t test_random_next(test_random *random) {
    return fixture_bits(random->seed, 0, random->counter++);
}

int64_t test_random_between(test_random *random, int64_t low, int64_t high) {
    uint64_t span = (uint64_t)(high - low) + 1;
    return low + (int64_t)(test_random_next(random) % span);
}

double test_random_signed(test_random *random) {
    return fixture_uniform(random->seed, 0, random->counter++);
}

void test_random_fill(test_random *random, double *values, int64_t count, double amplitude) {
    for (int64_t i = 0; i < count; i++) {
        values[i] = amplitude * test_random_signed(random);
    }
}

bool test_row_fill(const test_row_layout *layout, int64_t seq_len, int8_t *attention_mask,
                   int64_t *position_ids) {
    int64_t t = 0;
    for (int64_t i = 0; i < layout->left_padding && t < seq_len; i++, t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
    for (int64_t d = 0; d < layout->documents; d++) {
        for (int64_t i = 0; i < layout->document_lengths[d] && t < seq_len; i++, t++) {
            attention_mask[t] = 1;
            position_ids[t] = layout->document_starts[d] + i;
        }
    }
    for (int64_t i = 0; i < layout->right_padding && t < seq_len; i++, t++) {
        attention_mask[t] = 0;
        position_ids[t] = 0;
    }
    int64_t total = layout->left_padding + layout->right_padding;
    for (int64_t d = 0; d < layout->documents; d++) {
        total += layout->document_lengths[d];
    }
    return total == seq_len;
}

test_row_layout test_row_random(test_random *random, int64_t seq_len) {
    test_row_layout layout = {0};
    if (test_random_between(random, 0, 15) == 0) {
        layout.left_padding = seq_len; /* a row of padding only */
        return layout;
    }
    int64_t side = test_random_between(random, 0, 3); /* none, left, right, both */
    if (side & 1) {
        layout.left_padding = test_random_between(random, 1, seq_len / 3 + 1);
    }
    if (side & 2) {
        layout.right_padding = test_random_between(random, 1, seq_len / 3 + 1);
    }
    int64_t remaining = seq_len - layout.left_padding - layout.right_padding;
    if (remaining < 1) {
        layout.left_padding = 0;
        layout.right_padding = 0;
        remaining = seq_len;
    }
    while (remaining > 0) {
        int64_t length = layout.documents == 15 ? remaining
                         : test_random_between(random, 0, 2) == 0
                             ? 1
                             : test_random_between(random, 1, remaining);
        if (length > remaining) {
            length = remaining;
        }
        int64_t start =
            test_random_between(random, 0, 2) == 0 ? test_random_between(random, 1, 9) : 0;
        const int64_t before = layout.documents; /* a start continuing the document before would
                                                    join it (docs/masks.md): one more */
        if (before > 0 &&
            start == layout.document_starts[before - 1] + layout.document_lengths[before - 1]) {
            start++;
        }
        layout.document_starts[layout.documents] = start;
        layout.document_lengths[layout.documents++] = length;
        remaining -= length;
    }
    return layout;
}

/* True when no document starts in (k, q]: position_ids step by exactly 1 from k to q. */
static bool same_document(const int64_t *position_ids, int64_t q, int64_t k) {
    for (int64_t t = k + 1; t <= q; t++) {
        if (position_ids[t] - position_ids[t - 1] != 1) {
            return false;
        }
    }
    return true;
}

static int64_t document_start(const int64_t *position_ids, int64_t t) {
    while (t > 0 && position_ids[t] - position_ids[t - 1] == 1) {
        t--;
    }
    return t;
}

void test_dense_mask(bool *dense, int64_t batch, int64_t seq_len, const int8_t *attention_mask,
                     const int64_t *position_ids, cpparity_attention_layer layer) {
    for (int64_t b = 0; b < batch; b++) {
        const int8_t *valid = attention_mask + b * seq_len;
        const int64_t *position = position_ids + b * seq_len;
        int64_t left_padding = 0;
        while (left_padding < seq_len && valid[left_padding] == 0) {
            left_padding++;
        }
        for (int64_t q = 0; q < seq_len; q++) {
            for (int64_t k = 0; k < seq_len; k++) {
                bool allowed = k <= q && valid[k] == 1 && same_document(position, q, k);
                if (layer.type == CPPARITY_LAYER_SLIDING) {
                    allowed = allowed && k > q - layer.window;
                }
                if (layer.type == CPPARITY_LAYER_CHUNKED &&
                    layer.chunk_origin == CPPARITY_CHUNK_ORIGIN_POSITION) {
                    double size = (double)layer.chunk_size; /* chunks counted in positions */
                    allowed = allowed && floor((double)position[k] / size) ==
                                             floor((double)position[q] / size);
                } else if (layer.type == CPPARITY_LAYER_CHUNKED) {
                    int64_t origin = layer.chunk_origin == CPPARITY_CHUNK_ORIGIN_ROW
                                         ? left_padding
                                         : document_start(position, q);
                    double size = (double)layer.chunk_size;
                    allowed = allowed && floor((double)(k - origin) / size) ==
                                             floor((double)(q - origin) / size);
                }
                dense[(b * seq_len + q) * seq_len + k] = allowed;
            }
        }
    }
}
