/* reference_store.c — reference outputs on disk (see reference_store.h). */
#include "harness/judging/reference_store.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/output_file.h"

static const char magic[8] = {'C', 'P', 'P', 'R', 'E', 'F', '0', '2'};

/* FNV-1a, 64 bits, continued from hash. */
static uint64_t fnv(uint64_t hash, const void *data, size_t size) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++) {
        hash = (hash ^ bytes[i]) * 0x100000001b3u;
    }
    return hash;
}

reference_store_key reference_store_key_of(const cpparity_case *c, uint64_t seed) {
    reference_store_key key;
    cpparity_digest digest = cpparity_digest_start("cpparity reference outputs");
    cpparity_digest_int(&digest, REFERENCE_STORE_VERSION);
    cpparity_digest_text(&digest, openblas_get_corename());
    cpparity_digest_int(&digest, (int64_t)seed);
    const cpparity_model_config *m = &c->model;
    const int64_t sizes[] = {m->vocab_size,
                             m->hidden_size,
                             m->num_hidden_layers,
                             m->num_attention_heads,
                             m->num_key_value_heads,
                             m->head_dim,
                             m->intermediate_size,
                             m->sliding_window,
                             m->attention_chunk_size,
                             m->chunk_origin,
                             m->tie_word_embeddings ? 1 : 0};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        cpparity_digest_int(&digest, sizes[i]);
    }
    cpparity_digest_double(&digest, m->rms_norm_eps);
    cpparity_digest_double(&digest, m->rope_theta);
    for (int64_t l = 0; l < m->num_hidden_layers; l++) {
        cpparity_digest_int(&digest, m->layer_types[l]);
    }
    cpparity_digest_int(&digest, c->seq_len);
    cpparity_digest_int(&digest, c->batch_size);
    for (int64_t b = 0; b < c->batch_size; b++) {
        const cpparity_row_layout *row = &c->rows[b];
        cpparity_digest_int(&digest, row->left_padding);
        cpparity_digest_int(&digest, row->right_padding);
        cpparity_digest_int(&digest, row->padding_continues ? 1 : 0);
        cpparity_digest_int(&digest, row->document_count);
        for (int64_t d = 0; d < row->document_count; d++) {
            cpparity_digest_int(&digest, row->document_lengths[d]);
            cpparity_digest_int(&digest,
                                row->start_positions != NULL ? row->start_positions[d] : -1);
        }
    }
    key.words[0] = digest.words[0];
    key.words[1] = digest.words[1];
    cpparity_digest_hex(&digest, key.hex);
    return key;
}

/* The header of an entry file; the checksum (FNV-1a of everything before it) follows the data. */
typedef struct entry_header {
    char magic[8];
    uint64_t key[2];
    int64_t batch, seq_len, hidden, parameters;
    double loss;
} entry_header;

static void entry_path(char *path, size_t size, const char *directory,
                       const reference_store_key *key) {
    snprintf(path, size, "%s/%s.ref", directory, key->hex);
}

bool reference_store_load(const char *directory, const reference_store_key *key,
                          reference_store_entry *entry, char *why, size_t why_size) {
    why[0] = '\0';
    char path[OUTPUT_FILE_PATH];
    entry_path(path, sizeof path, directory, key);
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        if (errno != ENOENT) {
            snprintf(why, why_size, "%s: cannot read it: %s", path, strerror(errno));
        }
        return false;
    }
    entry_header header;
    const int64_t cells = entry->batch * entry->seq_len;
    const size_t sizes[3] = {(size_t)(cells * entry->hidden) * sizeof(double),
                             (size_t)entry->parameters * sizeof(double), (size_t)cells};
    void *arrays[3] = {entry->final_normed, entry->gradients, entry->fully_masked};
    uint64_t checksum = 0, stored = 0;
    bool intact = fread(&header, sizeof header, 1, file) == 1;
    if (!intact || memcmp(header.magic, magic, sizeof magic) != 0) {
        snprintf(why, why_size, "%s: not a reference cache entry of this version, or truncated",
                 path);
    } else if (header.key[0] != key->words[0] || header.key[1] != key->words[1]) {
        snprintf(why, why_size, "%s: holds another key", path);
    } else if (header.batch != entry->batch || header.seq_len != entry->seq_len ||
               header.hidden != entry->hidden || header.parameters != entry->parameters) {
        snprintf(why, why_size, "%s: its sizes are not the case's", path);
    } else {
        checksum = fnv(0xcbf29ce484222325u, &header, sizeof header);
        for (int a = 0; a < 3 && why[0] == '\0'; a++) {
            if (fread(arrays[a], 1, sizes[a], file) != sizes[a]) {
                snprintf(why, why_size, "%s: truncated", path);
            }
            checksum = fnv(checksum, arrays[a], sizes[a]);
        }
        if (why[0] == '\0' && (fread(&stored, sizeof stored, 1, file) != 1 || stored != checksum ||
                               fgetc(file) != EOF)) {
            snprintf(why, why_size, "%s: its checksum does not match (damaged)", path);
        }
    }
    fclose(file);
    if (why[0] != '\0') {
        return false;
    }
    entry->loss = header.loss;
    return true;
}

/* Writes the entry's bytes and checksum to stream; false when a write fails. */
static bool write_entry(FILE *stream, const reference_store_key *key,
                        const reference_store_entry *entry) {
    entry_header header;
    memset(&header, 0, sizeof header);
    memcpy(header.magic, magic, sizeof magic);
    header.key[0] = key->words[0];
    header.key[1] = key->words[1];
    header.batch = entry->batch;
    header.seq_len = entry->seq_len;
    header.hidden = entry->hidden;
    header.parameters = entry->parameters;
    header.loss = entry->loss;
    const int64_t cells = entry->batch * entry->seq_len;
    const size_t sizes[3] = {(size_t)(cells * entry->hidden) * sizeof(double),
                             (size_t)entry->parameters * sizeof(double), (size_t)cells};
    const void *arrays[3] = {entry->final_normed, entry->gradients, entry->fully_masked};
    uint64_t checksum = fnv(0xcbf29ce484222325u, &header, sizeof header);
    bool written = fwrite(&header, sizeof header, 1, stream) == 1;
    for (int a = 0; a < 3 && written; a++) {
        written = fwrite(arrays[a], 1, sizes[a], stream) == sizes[a];
        checksum = fnv(checksum, arrays[a], sizes[a]);
    }
    return written && fwrite(&checksum, sizeof checksum, 1, stream) == 1;
}

cpparity_status reference_store_save(const char *directory, const reference_store_key *key,
                                     const reference_store_entry *entry, cpparity_error *error) {
    char path[OUTPUT_FILE_PATH];
    entry_path(path, sizeof path, directory, key);
    unlink(path); /* an entry that could not be trusted is replaced; a sound one is the same */
    output_file output;
    cpparity_status status = output_file_begin(&output, path, "--reference-cache", error);
    if (status != CPPARITY_OK) {
        return status;
    }
    FILE *stream = fopen(output.temporary, "wb");
    const bool written = stream != NULL && write_entry(stream, key, entry);
    const bool closed = stream != NULL && fclose(stream) == 0;
    if (!written || !closed) {
        const int reason = errno;
        output_file_abandon(&output);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "--reference-cache %s: cannot write it: %s", path,
                                  strerror(reason));
    }
    status = output_file_commit(&output, error);
    /* another process stored the same entry meanwhile: the same bits, nothing lost */
    return status == CPPARITY_ERROR_INPUT ? CPPARITY_OK : status;
}
