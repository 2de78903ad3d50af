/* rank_dump.c — see rank_dump.h. */
#include "harness/storage/rank_dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "common/row_blocks.h"
#include "harness/storage/attention_export_format.h"
#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_input.h"

/* The root attributes: what made the dump and what it claims to be a run of. */
static cpparity_status read_attributes(const hdf5_input *input, rank_dump *dump,
                                       cpparity_error *error) {
    char format[RANK_DUMP_TEXT], dtype[RANK_DUMP_TEXT];
    int64_t version = 0;
    cpparity_status status = hdf5_input_string(input, "/", "format", format, sizeof format, error);
    if (status != CPPARITY_OK) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: not a cpparity rank dump (no attribute format = \"%s\"; "
                                  "docs/dump-format.md)",
                                  input->path, RANK_DUMP_FORMAT);
    }
    if (strcmp(format, RANK_DUMP_FORMAT) != 0) {
        const bool kernel_dump = strcmp(format, KERNEL_DUMP_FORMAT) == 0;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: format is \"%s\", not \"%s\"%s (docs/dump-format.md)",
                                  input->path, format, RANK_DUMP_FORMAT,
                                  kernel_dump ? ": a kernel dump is judged against the "
                                                "attention-level export it was made from"
                                              : "");
    }
    status = hdf5_input_int64(input, "/", "format_version", &version, error);
    if (status == CPPARITY_OK && version != RANK_DUMP_VERSION) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: format_version %lld; this cpparity reads version %d "
                                  "(docs/dump-format.md)",
                                  input->path, (long long)version, RANK_DUMP_VERSION);
    }
    const struct {
        const char *name;
        char *text;
        size_t size;
    } strings[] = {
        {"framework", dump->framework, sizeof dump->framework},
        {"framework_version", dump->framework_version, sizeof dump->framework_version},
        {"kernel", dump->kernel, sizeof dump->kernel},
        {"dtype", dtype, sizeof dtype},
        {"case", dump->case_name, sizeof dump->case_name},
        {"export_digest", dump->export_digest, sizeof dump->export_digest},
    };
    for (size_t i = 0; status == CPPARITY_OK && i < sizeof strings / sizeof *strings; i++) {
        status =
            hdf5_input_string(input, "/", strings[i].name, strings[i].text, strings[i].size, error);
    }
    const struct {
        const char *name;
        int64_t *value;
    } numbers[] = {{"cp", &dump->cp}, {"rank", &dump->rank}, {"seed", &dump->seed}};
    for (size_t i = 0; status == CPPARITY_OK && i < sizeof numbers / sizeof *numbers; i++) {
        status = hdf5_input_int64(input, "/", numbers[i].name, numbers[i].value, error);
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    int found = -1;
    for (int d = 0; d < CPPARITY_DTYPE_COUNT; d++) {
        found = strcmp(dtype, cpparity_dtype_names[d]) == 0 ? d : found;
    }
    if (found < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: dtype \"%s\" is neither f32 nor bf16", input->path,
                                  dtype);
    }
    dump->dtype = (cpparity_dtype)found;
    if (dump->cp < 1 || dump->rank < 0 || dump->rank >= dump->cp) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: rank %lld of cp %lld (0 <= rank < cp, cp >= 1)",
                                  input->path, (long long)dump->rank, (long long)dump->cp);
    }
    return CPPARITY_OK;
}

/* What the dump claims to be (its export, case and seed; cp; dtype) against what expect says it
 * must be: before any shape is read. */
static cpparity_status check_expected(const hdf5_input *input, const rank_dump_expect *expect,
                                      const rank_dump *dump, cpparity_error *error) {
    const char *flag = expect->flag != NULL ? expect->flag : "";
    const char *space = expect->flag != NULL ? " " : "";
    if (expect->export_digest != NULL &&
        (strcmp(dump->export_digest, expect->export_digest) != 0 ||
         strcmp(dump->case_name, expect->case_name) != 0 || (uint64_t)dump->seed != expect->seed)) {
        return cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "%s%s%s: /: a dump of another export or seed: its export_digest %s (case %s, seed "
            "%lld) is not the export's %s (case %s, seed %llu)",
            flag, space, input->path, dump->export_digest, dump->case_name, (long long)dump->seed,
            expect->export_digest, expect->case_name, (unsigned long long)expect->seed);
    }
    if ((expect->cp > 0 && dump->cp != expect->cp) ||
        (expect->dtype >= 0 && (int)dump->dtype != expect->dtype)) {
        const char *dtype = expect->dtype >= 0 && expect->dtype < CPPARITY_DTYPE_COUNT
                                ? cpparity_dtype_name((cpparity_dtype)expect->dtype)
                                : "any dtype";
        if (expect->flag != NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s %s: /: a dump of cp %lld (rank %lld), dtype %s; %s "
                                      "takes the framework's own cp = 1 run of the same case: "
                                      "one dump of cp 1, dtype %s",
                                      flag, input->path, (long long)dump->cp, (long long)dump->rank,
                                      cpparity_dtype_name(dump->dtype), flag, dtype);
        }
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /: cp %lld, dtype %s; expected cp %lld, dtype %s",
                                  input->path, (long long)dump->cp,
                                  cpparity_dtype_name(dump->dtype), (long long)expect->cp, dtype);
    }
    return CPPARITY_OK;
}

/* Reads every value of /logits [B, L, V], one block of rows at a time into a scratch block (the
 * guard's child: HDF5 parses every chunk once, in a process that may crash). */
static cpparity_status read_every_logit(const hdf5_input *input, const int64_t *dims,
                                        cpparity_error *error) {
    const int64_t rows = dims[1] < CPPARITY_ROW_BLOCK ? dims[1] : CPPARITY_ROW_BLOCK;
    float *block = malloc((size_t)(rows * dims[2] + 1) * sizeof *block);
    if (block == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s: out of memory (a block of logits)", input->path);
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t b = 0; status == CPPARITY_OK && b < dims[0]; b++) {
        for (int64_t t = 0; status == CPPARITY_OK && t < dims[1]; t += rows) {
            const int64_t start[3] = {b, t, 0};
            const int64_t count[3] = {1, t + rows < dims[1] ? rows : dims[1] - t, dims[2]};
            status = hdf5_input_read_part(input, "/logits", H5T_FLOAT, 3, dims, start, count,
                                          H5T_NATIVE_FLOAT, block, error);
        }
    }
    free(block);
    return status;
}

/* /token_indices [B, L_r] (every batch row alike), /loss, /logits [B, L_r, V] (its shape; its
 * values only when every_value). L_r is bounded by expect's most_rows (the padding bound) before
 * anything of its size is allocated. */
static cpparity_status read_rows(const hdf5_input *input, const cpparity_case *c,
                                 const rank_dump_expect *expect, bool every_value, rank_dump *dump,
                                 cpparity_error *error) {
    const int64_t B = c->batch_size, V = c->model.vocab_size;
    int rank = 0;
    int64_t dims[HDF5_INPUT_MAX_RANK];
    cpparity_status status =
        hdf5_input_shape(input, "/token_indices", H5T_INTEGER, &rank, dims, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (rank != 2 || dims[0] != B || dims[1] < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /token_indices: shape [B, L_r] expected, B = %lld",
                                  input->path, (long long)B);
    }
    if (expect != NULL && expect->most_rows >= 0 && dims[1] > expect->most_rows) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /token_indices: %lld rows: padding past the bound: %s",
                                  input->path, (long long)dims[1],
                                  expect->bound != NULL ? expect->bound : "");
    }
    const int64_t L = dims[1];
    int64_t logits_count = 0;
    if (!cpparity_elements_checked((const int64_t[]){B, L, V}, 3, &logits_count)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: /token_indices: %lld rows: logits [%lld, %lld, %lld] are "
                                  "too many elements to hold",
                                  input->path, (long long)L, (long long)B, (long long)L,
                                  (long long)V);
    }
    int64_t *indices = malloc((size_t)(B * L > 0 ? B * L : 1) * sizeof *indices);
    dump->positions = malloc((size_t)(L > 0 ? L : 1) * sizeof *dump->positions);
    if (indices == NULL || dump->positions == NULL) {
        free(indices);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: out of memory for %lld rows",
                                  input->path, (long long)L);
    }
    status = hdf5_input_read(input, "/token_indices", H5T_INTEGER, 2, dims, H5T_NATIVE_INT64,
                             indices, error);
    for (int64_t b = 1; status == CPPARITY_OK && b < B; b++) {
        for (int64_t i = 0; i < L; i++) {
            if (indices[b * L + i] != indices[i]) {
                status = cpparity_error_set(
                    error, CPPARITY_ERROR_INPUT,
                    "%s: /token_indices: batch row %lld differs from row 0 at entry %lld (%lld, "
                    "not %lld); version 1 takes one layout for every row",
                    input->path, (long long)b, (long long)i, (long long)indices[b * L + i],
                    (long long)indices[i]);
                break;
            }
        }
    }
    if (status == CPPARITY_OK) {
        memcpy(dump->positions, indices, (size_t)L * sizeof *dump->positions);
        dump->rows = L;
    }
    free(indices);
    const int64_t logits_dims[3] = {B, L, V};
    if (status == CPPARITY_OK) {
        status = hdf5_input_read(input, "/loss", H5T_FLOAT, 0, NULL, H5T_NATIVE_DOUBLE, &dump->loss,
                                 error);
    }
    if (status == CPPARITY_OK) { /* the shape and type now, the values block by block */
        const int64_t start[3] = {0, 0, 0}, none[3] = {0, 0, 0};
        status = hdf5_input_read_part(input, "/logits", H5T_FLOAT, 3, logits_dims, start, none,
                                      H5T_NATIVE_FLOAT, NULL, error);
    }
    if (status == CPPARITY_OK && every_value) {
        status = read_every_logit(input, logits_dims, error);
    }
    dump->batch = B;
    dump->vocab = V;
    return status;
}

/* Every parameter under /gradients (its shape) or /gradient_slices (1-D, attribute offset), and
 * no other name under either. */
static cpparity_status read_gradients(const hdf5_input *input,
                                      const cpparity_tensor_table *parameters, rank_dump *dump,
                                      cpparity_error *error) {
    const int64_t count = parameters->count;
    dump->gradients =
        malloc((size_t)(parameters->total > 0 ? parameters->total : 1) * sizeof(float));
    dump->sliced = calloc((size_t)(count > 0 ? count : 1), sizeof *dump->sliced);
    dump->slice_offset = calloc((size_t)(count > 0 ? count : 1), sizeof *dump->slice_offset);
    dump->slice_length = calloc((size_t)(count > 0 ? count : 1), sizeof *dump->slice_length);
    if (!dump->gradients || !dump->sliced || !dump->slice_offset || !dump->slice_length) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t i = 0; i < parameters->total; i++) {
        dump->gradients[i] = NAN;
    }
    cpparity_status status = CPPARITY_OK;
    char path[CPPARITY_TENSOR_NAME + 32];
    for (int64_t p = 0; status == CPPARITY_OK && p < count; p++) {
        const cpparity_tensor_entry *entry = &parameters->entries[p];
        const bool full = hdf5_input_exists(input, "/gradients", entry->name);
        const bool slice = hdf5_input_exists(input, "/gradient_slices", entry->name);
        if (full == slice) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: /gradients/%s: %s (every parameter once, in full or "
                                      "under /gradient_slices)",
                                      input->path, entry->name,
                                      full ? "given both in full and as a slice" : "missing");
        }
        float *values = dump->gradients + entry->offset;
        if (full) {
            snprintf(path, sizeof path, "/gradients/%s", entry->name);
            status = hdf5_input_read(input, path, H5T_FLOAT, entry->rank, entry->shape,
                                     H5T_NATIVE_FLOAT, values, error);
            continue;
        }
        snprintf(path, sizeof path, "/gradient_slices/%s", entry->name);
        int rank = 0;
        int64_t dims[HDF5_INPUT_MAX_RANK], offset = 0;
        status = hdf5_input_shape(input, path, H5T_FLOAT, &rank, dims, error);
        if (status == CPPARITY_OK) {
            status = hdf5_input_int64(input, path, "offset", &offset, error);
        }
        if (status == CPPARITY_OK && (rank != 1 || offset < 0 || dims[0] > entry->count - offset)) {
            return cpparity_error_set(
                error, CPPARITY_ERROR_INPUT,
                "%s: %s: a slice must be 1-D within the tensor's %lld elements (offset %lld, %lld "
                "elements)",
                input->path, path, (long long)entry->count, (long long)offset,
                (long long)(rank == 1 ? dims[0] : -1));
        }
        if (status == CPPARITY_OK) {
            status = hdf5_input_read(input, path, H5T_FLOAT, 1, dims, H5T_NATIVE_FLOAT,
                                     values + offset, error);
            dump->sliced[p] = true;
            dump->slice_offset[p] = offset;
            dump->slice_length[p] = dims[0];
        }
    }
    const char *const groups[] = {"/gradients", "/gradient_slices"};
    for (size_t g = 0; status == CPPARITY_OK && g < 2; g++) {
        char *names = NULL;
        int64_t found = 0;
        status = hdf5_input_names(input, groups[g], CPPARITY_TENSOR_NAME, &names, &found, error);
        for (int64_t n = 0; status == CPPARITY_OK && n < found; n++) {
            const char *name = names + (size_t)n * CPPARITY_TENSOR_NAME;
            if (cpparity_tensor_table_find(parameters, name) == NULL) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "%s: %s/%s: the model has no such parameter "
                                            "(docs/model.md's names)",
                                            input->path, groups[g], name);
            }
        }
        free(names);
    }
    return status;
}

/* Reads an input opened (status OK) or not into dump, every logit too when every_value; keeps
 * it open in dump->file when the dump is good and keep is set, closes it otherwise. */
static cpparity_status read_input(hdf5_input *input, cpparity_status status, const char *path,
                                  const cpparity_case *c, const cpparity_tensor_table *parameters,
                                  const rank_dump_expect *expect, bool every_value, bool keep,
                                  rank_dump *dump, cpparity_error *error) {
    if (status == CPPARITY_OK) {
        status = read_attributes(input, dump, error);
    }
    if (status == CPPARITY_OK && expect != NULL) {
        status = check_expected(input, expect, dump, error);
    }
    if (status == CPPARITY_OK) {
        status = read_rows(input, c, expect, every_value, dump, error);
    }
    if (status == CPPARITY_OK) {
        status = read_gradients(input, parameters, dump, error);
    }
    if (status == CPPARITY_OK && keep) {
        dump->file = *input;
    } else if (input->file > 0) {
        hdf5_input_close(input);
    }
    if (status != CPPARITY_OK) {
        rank_dump_free(dump);
        dump->path = path;
    }
    return status;
}

/* What rank_dump_read reads, for the guard's child. */
typedef struct dump_request {
    const char *path;
    const cpparity_case *c;
    const cpparity_tensor_table *parameters;
    const rank_dump_expect *expect;
} dump_request;

/* rank_dump_read in this process, unguarded: every logit read (the guard's child), or the file
 * kept open for reading them later. */
static cpparity_status read_path(const dump_request *request, bool every_value, rank_dump *dump,
                                 cpparity_error *error) {
    memset(dump, 0, sizeof *dump);
    cpparity_error_clear(error);
    dump->path = request->path;
    hdf5_input input = {0};
    const cpparity_status status = hdf5_input_open(&input, request->path, error);
    return read_input(&input, status, request->path, request->c, request->parameters,
                      request->expect, every_value, !every_value, dump, error);
}

/* The whole read, every logit included, in the guard's child (hdf5_guard.h). */
static cpparity_status read_in_child(void *context, cpparity_error *error) {
    rank_dump dump;
    const cpparity_status status = read_path(context, true, &dump, error);
    rank_dump_free(&dump);
    return status;
}

cpparity_status rank_dump_read(const char *path, const cpparity_case *c,
                               const cpparity_tensor_table *parameters,
                               const rank_dump_expect *expect, rank_dump *dump,
                               cpparity_error *error) {
    memset(dump, 0, sizeof *dump);
    dump->path = path;
    dump_request request = {path, c, parameters, expect};
    const cpparity_status status = hdf5_guard_read_path(path, read_in_child, &request, error);
    return status == CPPARITY_OK ? read_path(&request, false, dump, error) : status;
}

cpparity_status rank_dump_read_image(const void *image, size_t size, const char *name,
                                     const cpparity_case *c,
                                     const cpparity_tensor_table *parameters,
                                     const rank_dump_expect *expect, rank_dump *dump,
                                     cpparity_error *error) {
    memset(dump, 0, sizeof *dump);
    cpparity_error_clear(error);
    dump->path = name;
    hdf5_input input = {0};
    const cpparity_status status = hdf5_input_open_image(&input, image, size, name, error);
    return read_input(&input, status, name, c, parameters, expect, true, false, dump, error);
}

cpparity_status rank_dump_read_logits(const rank_dump *dump, int64_t batch_row, int64_t row,
                                      int64_t count, float *rows, cpparity_error *error) {
    if (dump->file.file <= 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: /logits: the file is closed",
                                  dump->path);
    }
    const int64_t dims[3] = {dump->batch, dump->rows, dump->vocab};
    const int64_t start[3] = {batch_row, row, 0}, part[3] = {1, count, dump->vocab};
    return hdf5_input_read_part(&dump->file, "/logits", H5T_FLOAT, 3, dims, start, part,
                                H5T_NATIVE_FLOAT, rows, error);
}

void rank_dump_free(rank_dump *dump) {
    if (dump->file.file > 0) {
        hdf5_input_close(&dump->file);
    }
    free(dump->positions);
    free(dump->gradients);
    free(dump->sliced);
    free(dump->slice_offset);
    free(dump->slice_length);
    memset(dump, 0, sizeof *dump);
}
