/* kernel_dump.c — a kernel dump read and checked (see kernel_dump.h). */
#include "harness/storage/kernel_dump.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/storage/attention_export_format.h"
#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_input.h"

static const char *const output_names[KERNEL_DUMP_OUTPUTS] = {"out", "lse", "dq", "dk", "dv"};

/* Reads float32 dataset `group`/`name` of exactly rank × dims into a new buffer at *values. */
static cpparity_status read_tensor(const hdf5_input *input, const char *group, const char *name,
                                   int rank, const int64_t *dims, float **values,
                                   cpparity_error *error) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", group, name);
    if (!hdf5_input_exists(input, group, name)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: missing", input->path,
                                  path);
    }
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        count *= dims[d];
    }
    *values = calloc((size_t)count + 1, sizeof **values);
    if (*values == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (%s)", path);
    }
    return hdf5_input_read(input, path, H5T_FLOAT, rank, dims, H5T_NATIVE_FLOAT, *values, error);
}

/* The five outputs of a call with nq query rows and nk key rows under group. */
static cpparity_status read_outputs(const hdf5_input *input, const char *group,
                                    const kernel_dump_shape *s, int64_t nq, int64_t nk, int first,
                                    int last, float **values, cpparity_error *error) {
    const int64_t query[4] = {s->batch, nq, s->heads, s->head_dim};
    const int64_t key[4] = {s->batch, nk, s->kv_heads, s->head_dim};
    const int64_t lse[3] = {s->batch, s->heads, nq};
    const int64_t *dims[KERNEL_DUMP_OUTPUTS] = {query, lse, query, key, key};
    cpparity_status status = CPPARITY_OK;
    for (int o = first; status == CPPARITY_OK && o <= last; o++) {
        status = read_tensor(input, group, output_names[o], o == 1 ? 3 : 4, dims[o],
                             &values[o - first], error);
    }
    return status;
}

static cpparity_status read_layer(const hdf5_input *input, const kernel_dump *dump,
                                  const kernel_dump_shape *s, int64_t l, kernel_dump_layer *layer,
                                  cpparity_error *error) {
    char group[512];
    snprintf(group, sizeof group, "/cases/%s/layers/%lld", s->name, (long long)l);
    char parent[512];
    snprintf(parent, sizeof parent, "/cases/%s/layers", s->name);
    char name[32];
    snprintf(name, sizeof name, "%lld", (long long)l);
    if (!hdf5_input_exists(input, parent, name)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: %s: missing (every case and layer of the export is in the "
                                  "dump, with attribute `unsupported` when not claimed)",
                                  input->path, group);
    }
    if (hdf5_input_has_attribute(input, group, "unsupported")) {
        cpparity_status status = hdf5_input_string(input, group, "unsupported", layer->unsupported,
                                                   sizeof layer->unsupported, error);
        if (status == CPPARITY_OK && layer->unsupported[0] == '\0') {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: %s: attribute 'unsupported' is empty: say why the "
                                        "kernel does not claim the layer",
                                        input->path, group);
        }
        return status;
    }
    const int64_t S = s->seq_len;
    cpparity_status status =
        read_outputs(input, group, s, S, S, 0, KERNEL_DUMP_OUTPUTS - 1, layer->called, error);
    char sub[600];
    if (status == CPPARITY_OK && dump->backward_uses_out_lse) {
        snprintf(sub, sizeof sub, "%s/backward_alone", group);
        status = read_outputs(input, sub, s, S, S, 2, 4, layer->alone, error);
    }
    if (status == CPPARITY_OK && dump->deterministic) {
        snprintf(sub, sizeof sub, "%s/again", group);
        status = read_outputs(input, sub, s, S, S, 0, KERNEL_DUMP_OUTPUTS - 1, layer->again, error);
    }
    for (int i = 0; status == CPPARITY_OK && dump->block_calls && i < KERNEL_DUMP_QUERY_BLOCKS;
         i++) {
        for (int j = 0; status == CPPARITY_OK && j < KERNEL_DUMP_KEY_BLOCKS; j++) {
            if (s->query_rows[i] == 0 || s->key_rows[j] == 0) {
                continue; /* an empty block is never called */
            }
            snprintf(sub, sizeof sub, "%s/blocks/%d_%d", group, i, j);
            status = read_outputs(input, sub, s, s->query_rows[i], s->key_rows[j], 0,
                                  KERNEL_DUMP_OUTPUTS - 1, layer->blocks[i][j], error);
        }
    }
    return status;
}

/* A 0/1 root attribute into *value. */
static cpparity_status read_flag(const hdf5_input *input, const char *name, bool *value,
                                 cpparity_error *error) {
    int64_t number = 0;
    const cpparity_status status = hdf5_input_int64(input, "/", name, &number, error);
    if (status == CPPARITY_OK && number != 0 && number != 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: /: %s is %lld, not 0 or 1",
                                  input->path, name, (long long)number);
    }
    *value = number == 1;
    return status;
}

static cpparity_status read_root(const hdf5_input *input, const char *export_digest,
                                 kernel_dump *dump, cpparity_error *error) {
    char format[64] = "";
    int64_t version = 0;
    cpparity_status status = hdf5_input_string(input, "/", "format", format, sizeof format, error);
    if (status == CPPARITY_OK && strcmp(format, KERNEL_DUMP_FORMAT) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: format '%s': an attention-level export is judged "
                                  "with a kernel dump (%s, docs/dump-format.md)",
                                  input->path, format, KERNEL_DUMP_FORMAT);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_int64(input, "/", "format_version", &version, error);
    }
    if (status == CPPARITY_OK && version != KERNEL_DUMP_VERSION) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: format_version %lld; this cpparity reads %d", input->path,
                                  (long long)version, KERNEL_DUMP_VERSION);
    }
    struct {
        const char *name;
        char *text;
    } strings[] = {{"kernel", dump->kernel},
                   {"kernel_version", dump->kernel_version},
                   {"framework", dump->framework},
                   {"framework_version", dump->framework_version}};
    for (size_t i = 0; status == CPPARITY_OK && i < sizeof strings / sizeof *strings; i++) {
        status = hdf5_input_string(input, "/", strings[i].name, strings[i].text, KERNEL_DUMP_TEXT,
                                   error);
    }
    if (status == CPPARITY_OK && dump->kernel[0] == '\0') {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: /: kernel is empty: name it",
                                  input->path);
    }
    if (status == CPPARITY_OK) {
        status = hdf5_input_string(input, "/", "export_digest", dump->export_digest,
                                   sizeof dump->export_digest, error);
    }
    if (status == CPPARITY_OK && strcmp(dump->export_digest, export_digest) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: a dump of another export: its export_digest %s is not "
                                  "the export's %s (other cases, or inputs from another seed)",
                                  input->path, dump->export_digest, export_digest);
    }
    if (status == CPPARITY_OK) {
        status = read_flag(input, "deterministic", &dump->deterministic, error);
    }
    if (status == CPPARITY_OK) {
        status = read_flag(input, "block_calls", &dump->block_calls, error);
    }
    if (status == CPPARITY_OK) {
        status = read_flag(input, "backward_uses_out_lse", &dump->backward_uses_out_lse, error);
    }
    return status;
}

/* kernel_dump_read in this process, unguarded. */
typedef struct read_request {
    const char *path, *export_digest;
    const kernel_dump_shape *shapes;
    int64_t count;
} read_request;

static cpparity_status read_path(const read_request *r, kernel_dump *dump, cpparity_error *error) {
    memset(dump, 0, sizeof *dump);
    hdf5_input input;
    cpparity_status status = hdf5_input_open(&input, r->path, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    status = read_root(&input, r->export_digest, dump, error);
    char *names = NULL;
    int64_t found = 0;
    if (status == CPPARITY_OK) {
        status = hdf5_input_names(&input, "/cases", 1024, &names, &found, error);
    }
    for (int64_t i = 0; status == CPPARITY_OK && i < found; i++) {
        bool known = false;
        for (int64_t c = 0; c < r->count && !known; c++) {
            known = strcmp(names + i * 1024, r->shapes[c].name) == 0;
        }
        if (!known) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: /cases/%s: not a case of the export", r->path,
                                        names + i * 1024);
        }
    }
    free(names);
    if (status == CPPARITY_OK) {
        dump->cases = calloc((size_t)r->count + 1, sizeof *dump->cases);
        status = dump->cases == NULL
                     ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                     : CPPARITY_OK;
        dump->case_count = status == CPPARITY_OK ? r->count : 0;
    }
    for (int64_t c = 0; status == CPPARITY_OK && c < r->count; c++) {
        const kernel_dump_shape *s = &r->shapes[c];
        kernel_dump_case *dumped = &dump->cases[c];
        if (!hdf5_input_exists(&input, "/cases", s->name)) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "%s: /cases/%s: missing (every case of the export is in "
                                        "the dump)",
                                        r->path, s->name);
            break;
        }
        dumped->layers = calloc((size_t)s->layer_count + 1, sizeof *dumped->layers);
        if (dumped->layers == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
            break;
        }
        dumped->layer_count = s->layer_count;
        for (int64_t l = 0; status == CPPARITY_OK && l < s->layer_count; l++) {
            status = read_layer(&input, dump, s, l, &dumped->layers[l], error);
        }
    }
    hdf5_input_close(&input);
    if (status != CPPARITY_OK) {
        kernel_dump_free(dump);
    }
    return status;
}

/* The whole read, in the guard's child (hdf5_guard.h). */
static cpparity_status read_in_child(void *context, cpparity_error *error) {
    kernel_dump dump;
    const cpparity_status status = read_path(context, &dump, error);
    kernel_dump_free(&dump);
    return status;
}

cpparity_status kernel_dump_read(const char *path, const char *export_digest,
                                 const kernel_dump_shape *shapes, int64_t count, kernel_dump *dump,
                                 cpparity_error *error) {
    memset(dump, 0, sizeof *dump);
    const read_request request = {path, export_digest, shapes, count};
    const cpparity_status status =
        hdf5_guard_read_path(path, read_in_child, (void *)&request, error);
    return status == CPPARITY_OK ? read_path(&request, dump, error) : status;
}

static void free_layer(kernel_dump_layer *layer) {
    for (int o = 0; o < KERNEL_DUMP_OUTPUTS; o++) {
        free(layer->called[o]);
        free(layer->again[o]);
        for (int i = 0; i < KERNEL_DUMP_QUERY_BLOCKS; i++) {
            for (int j = 0; j < KERNEL_DUMP_KEY_BLOCKS; j++) {
                free(layer->blocks[i][j][o]);
            }
        }
    }
    for (int o = 0; o < 3; o++) {
        free(layer->alone[o]);
    }
}

void kernel_dump_free(kernel_dump *dump) {
    for (int64_t c = 0; dump->cases != NULL && c < dump->case_count; c++) {
        for (int64_t l = 0; dump->cases[c].layers != NULL && l < dump->cases[c].layer_count; l++) {
            free_layer(&dump->cases[c].layers[l]);
        }
        free(dump->cases[c].layers);
    }
    free(dump->cases);
    memset(dump, 0, sizeof *dump);
}
