/* random_cases.c — random attention-level cases for soak runs (see random_cases.h). */
#include "harness/suite/random_cases.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite/case_file.h"

/* A growing text buffer; ok turns false when out of memory. */
typedef struct text_buffer {
    char *text;
    size_t length, capacity;
    bool ok;
} text_buffer;

static void append(text_buffer *buffer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void append(text_buffer *buffer, const char *format, ...) {
    for (int attempt = 0; buffer->ok && attempt < 2; attempt++) {
        va_list arguments;
        va_start(arguments, format);
        const int written = vsnprintf(buffer->text + buffer->length,
                                      buffer->capacity - buffer->length, format, arguments);
        va_end(arguments);
        if (written < 0) {
            buffer->ok = false;
            return;
        }
        if ((size_t)written < buffer->capacity - buffer->length) {
            buffer->length += (size_t)written;
            return;
        }
        const size_t grown = 2 * buffer->capacity + (size_t)written + 1;
        char *larger = realloc(buffer->text, grown);
        if (larger == NULL) {
            buffer->ok = false;
            return;
        }
        buffer->text = larger;
        buffer->capacity = grown;
    }
}

/* splitmix64: the generator's state advances by one step per draw. */
static uint64_t next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [low, high]. */
static int64_t between(uint64_t *state, int64_t low, int64_t high) {
    return low + (int64_t)(next(state) % (uint64_t)(high - low + 1));
}

/* True with probability percent / 100. */
static bool chance(uint64_t *state, int percent) {
    return between(state, 0, 99) < percent;
}

/* A length near a tile edge (m × tile + r) a third of the time, else uniform in [1, largest]. */
static int64_t length_at_edges(uint64_t *state, int64_t largest) {
    static const int64_t tiles[] = {16, 32, 64, 128};
    if (chance(state, 33)) {
        const int64_t tile = tiles[between(state, 0, 3)];
        const int64_t edge = between(state, 1, 3) * tile + between(state, -2, 2);
        if (edge >= 1 && edge <= largest) {
            return edge;
        }
    }
    return between(state, 1, largest);
}

static const char *const layer_names[] = {"full_attention", "sliding_attention",
                                          "chunked_attention"};

/* One case: sizes, layers and rows. */
static void append_case(text_buffer *buffer, uint64_t *state, int64_t number) {
    static const int64_t head_dims[] = {4, 8, 16, 32, 59, 64, 96, 128};
    static const int64_t heads_choices[] = {1, 2, 3, 4, 6, 8};
    const int64_t S = chance(state, 50) ? length_at_edges(state, 96) : length_at_edges(state, 400);
    const int64_t B = between(state, 1, 3);
    const int64_t H = heads_choices[between(state, 0, 5)];
    int64_t Hkv = H;
    for (int tries = 0; tries < 4; tries++) { /* a divisor of H */
        const int64_t candidate = between(state, 1, H);
        if (H % candidate == 0) {
            Hkv = candidate;
            break;
        }
    }
    const int64_t Dh = head_dims[between(state, 0, 7)];
    const int64_t layers = between(state, 1, 3);
    append(buffer, "  - name: random-%lld\n    seq_len: %lld\n", (long long)number, (long long)S);
    append(buffer,
           "    model: {hidden_size: %lld, num_attention_heads: %lld, num_key_value_heads: %lld, "
           "head_dim: %lld, num_hidden_layers: %lld, layer_types: [",
           (long long)(H * Dh), (long long)H, (long long)Hkv, (long long)Dh, (long long)layers);
    for (int64_t l = 0; l < layers; l++) {
        append(buffer, "%s%s", l > 0 ? ", " : "", layer_names[between(state, 0, 2)]);
    }
    append(buffer, "], sliding_window: %lld, attention_chunk_size: %lld, chunk_origin: %s}\n",
           (long long)length_at_edges(state, S + 8), (long long)length_at_edges(state, S + 8),
           cpparity_chunk_origin_names[between(state, 0, CPPARITY_CHUNK_ORIGIN_COUNT - 1)]);
    append(buffer, "    rows:\n");
    for (int64_t b = 0; b < B; b++) {
        int64_t left = chance(state, 30) ? between(state, 0, S) : 0;
        int64_t right = chance(state, 20) ? between(state, 0, S - left) : 0;
        int64_t rest = S - left - right;
        append(buffer, "      - {left_padding: %lld, right_padding: %lld, documents: [",
               (long long)left, (long long)right);
        int64_t documents = 0;
        while (rest > 0) {
            const int64_t length =
                documents == 3 || chance(state, 40) ? rest : between(state, 1, rest);
            append(buffer, "%s%lld", documents > 0 ? ", " : "", (long long)length);
            rest -= length;
            documents++;
        }
        append(buffer, "]");
        if (chance(state, 25)) { /* documents starting mid-stream: the chunk origins differ */
            append(buffer, ", start_positions: [");
            for (int64_t d = 0; d < documents; d++) {
                append(buffer, "%s%lld", d > 0 ? ", " : "", (long long)between(state, 0, 12));
            }
            append(buffer, "]");
        }
        append(buffer, "%s}\n", chance(state, 20) ? ", padding_positions: continue" : "");
    }
}

char *random_cases_text(uint64_t seed, int64_t count) {
    text_buffer buffer = {malloc(4096), 0, 4096, true};
    buffer.ok = buffer.text != NULL;
    uint64_t state = seed;
    append(&buffer,
           "# cpparity run --random %lld --seed %llu\n"
           "defaults:\n  level: attention\n  cp: [1]\n  dtypes: [f32]\n  seed: %llu\n"
           "  model: {vocab_size: 16, hidden_size: 8, num_hidden_layers: 1, "
           "num_attention_heads: 1, num_key_value_heads: 1, head_dim: 8, intermediate_size: 16}\n"
           "cases:\n",
           (long long)count, (unsigned long long)seed, (unsigned long long)seed);
    for (int64_t i = 1; i <= count && buffer.ok; i++) {
        append_case(&buffer, &state, i);
    }
    if (!buffer.ok) {
        free(buffer.text);
        return NULL;
    }
    return buffer.text;
}

cpparity_status random_cases_load(uint64_t seed, int64_t count, cpparity_suite *suite,
                                  cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    char *text = random_cases_text(seed, count);
    if (text == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (--random)");
    }
    char display[RANDOM_CASES_DISPLAY];
    random_cases_display(seed, count, display);
    const cpparity_status status =
        cpparity_suite_load_text(text, strlen(text), display, suite, error);
    free(text);
    return status;
}

void random_cases_display(uint64_t seed, int64_t count, char display[RANDOM_CASES_DISPLAY]) {
    snprintf(display, RANDOM_CASES_DISPLAY, "--random %lld --seed %llu", (long long)count,
             (unsigned long long)seed);
}
