/* export.c — one case's inputs, weights, masks and reference outputs to HDF5 (see export.h). */
#include "harness/storage/export.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "results_model/hdf5_util.h"
#include "common/output_file.h"
#include "common/row_blocks.h"
#include "reference/model.h"
#include "reference/model_layers.h"

/* Creates group name under parent; an absolute name ("/inputs") is also how error messages name
 * it. Returns the open group (caller closes) or a negative id with error filled. */
static hid_t create_group(hid_t parent, const char *name, cpparity_error *error) {
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group %s", name);
fail:
    return group;
}

void export_digest(const char *suite_text, size_t length, const char *case_name, uint64_t seed,
                   char hex[CPPARITY_DIGEST_HEX]) {
    cpparity_digest digest = cpparity_digest_start("cpparity export 1");
    cpparity_digest_int(&digest, (int64_t)length);
    cpparity_digest_bytes(&digest, suite_text, length);
    cpparity_digest_text(&digest, case_name);
    cpparity_digest_int(&digest, (int64_t)seed);
    cpparity_digest_hex(&digest, hex);
}

/* /model: the configuration, then the seed, the case name and the export's digest. */
static cpparity_status write_model_attributes(hid_t file, const cpparity_case *c,
                                              const export_source *source, cpparity_error *error) {
    const hid_t group = create_group(file, "/model", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    char digest[CPPARITY_DIGEST_HEX];
    export_digest(source->suite_text, source->suite_length, c->name, c->seed, digest);
    const bool written =
        hdf5_write_model_config(group, &c->model, error) == CPPARITY_OK &&
        hdf5_attribute_int64(group, "seed", (int64_t)c->seed, error) == CPPARITY_OK &&
        hdf5_attribute_string(group, "case", c->name, error) == CPPARITY_OK &&
        hdf5_attribute_string(group, "digest", digest, error) == CPPARITY_OK;
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

/* /source: the suite file the case came from, whole, so that `cpparity judge` rebuilds the very
 * case (its rows, tolerances, dtypes) from the export alone. */
static cpparity_status write_source(hid_t file, const export_source *source,
                                    cpparity_error *error) {
    const hid_t group = create_group(file, "/source", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const int64_t dims[1] = {(int64_t)source->suite_length};
    const bool written =
        hdf5_attribute_string(group, "path", source->suite_path, error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "suite_yaml", H5T_NATIVE_UINT8, 1, dims, source->suite_text,
                           "the suite file's bytes (UTF-8 YAML, cases/README.md) the case was "
                           "read from; /model's case names it",
                           error) == CPPARITY_OK;
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

static cpparity_status write_inputs(hid_t file, const cpparity_batch *batch,
                                    cpparity_error *error) {
    const hid_t group = create_group(file, "/inputs", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const int64_t dims[2] = {batch->batch, batch->seq_len};
    const bool written =
        hdf5_write_dataset(group, "input_ids", H5T_NATIVE_INT64, 2, dims, batch->input_ids,
                           "token ids in [0, vocab_size) [B,S]", error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "labels", H5T_NATIVE_INT64, 2, dims, batch->labels,
                           "input_ids[t+1] where t and t+1 are real tokens of the same "
                           "document, shifted once over the whole row; -100 = ignored (every "
                           "padding token, a document's last token) [B,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "attention_mask", H5T_NATIVE_INT8, 2, dims, batch->attention_mask,
                           "1 = real token, 0 = padding (leading: left, trailing: right) [B,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "position_ids", H5T_NATIVE_INT64, 2, dims, batch->position_ids,
                           "position of each token (docs/masks.md): counts on by 1 inside a "
                           "document from its start position (a row's start_positions, else 0, or "
                           "continuing the left padding's count); padding has 0 "
                           "(padding_positions: zero) or counts on (continue); a step other "
                           "than +1 starts a new document [B,S]",
                           error) == CPPARITY_OK;
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

/* Writes every tensor of table from values (float64) under group `name`. */
static cpparity_status write_tensors(hid_t file, const char *name,
                                     const cpparity_tensor_table *table, const double *values,
                                     const char *description, cpparity_error *error) {
    const hid_t group = create_group(file, name, error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    bool written = true;
    for (int64_t e = 0; e < table->count && written; e++) {
        const cpparity_tensor_entry *entry = &table->entries[e];
        written =
            hdf5_write_dataset(group, entry->name, H5T_NATIVE_DOUBLE, entry->rank, entry->shape,
                               values + entry->offset, description, error) == CPPARITY_OK;
    }
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

/* /masks/layer_<l> [B,S,S], written one query row at a time: never S×S in memory. */
static cpparity_status write_masks(hid_t file, const reference_model *model,
                                   cpparity_error *error) {
    const int64_t B = model->batch, S = model->seq_len;
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t group = H5I_INVALID_HID, file_space = H5I_INVALID_HID, row_space = H5I_INVALID_HID;
    hid_t dataset = H5I_INVALID_HID, properties = H5I_INVALID_HID;
    uint8_t *row = malloc((size_t)S);
    if (row == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (mask row)");
    }
    if ((group = create_group(file, "/masks", error)) < 0) {
        goto fail;
    }
    const hsize_t dims[3] = {(hsize_t)B, (hsize_t)S, (hsize_t)S};
    const hsize_t row_dims[1] = {(hsize_t)S};
    HDF5_CHECK(file_space = H5Screate_simple(3, dims, NULL), error, "creating the mask space");
    HDF5_CHECK(row_space = H5Screate_simple(1, row_dims, NULL), error, "creating a row space");
    /* chunks of whole query rows, at most about 1 MiB, deflated and checksummed (Fletcher-32)
     * like every dataset cpparity writes */
    const hsize_t rows_per_chunk = (hsize_t)(S > 0 && S < (1 << 20) / S ? (1 << 20) / S : 1);
    const hsize_t chunk[3] = {1, rows_per_chunk < (hsize_t)S ? rows_per_chunk : (hsize_t)S,
                              (hsize_t)S};
    HDF5_CHECK(properties = H5Pcreate(H5P_DATASET_CREATE), error,
               "creating the mask dataset properties");
    if (B > 0 && S > 0) {
        HDF5_CHECK(H5Pset_chunk(properties, 3, chunk), error, "chunking the masks");
        HDF5_CHECK(H5Pset_deflate(properties, 4), error, "compressing the masks");
        HDF5_CHECK(H5Pset_fletcher32(properties), error, "checksumming the masks");
    }
    for (int64_t l = 0; l < model->config.num_hidden_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer_%lld", (long long)l);
        HDF5_CHECK(dataset = H5Dcreate2(group, name, H5T_NATIVE_UINT8, file_space, H5P_DEFAULT,
                                        properties, H5P_DEFAULT),
                   error, "creating /masks/%s", name);
        for (int64_t b = 0; b < B; b++) {
            for (int64_t q = 0; q < S; q++) {
                for (int64_t k = 0; k < S; k++) {
                    row[k] = reference_mask_allowed(&model->masks[l], b, q, k) ? 1 : 0;
                }
                const hsize_t start[3] = {(hsize_t)b, (hsize_t)q, 0};
                const hsize_t count[3] = {1, 1, (hsize_t)S};
                HDF5_CHECK(
                    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL),
                    error, "selecting row %lld of /masks/%s", (long long)q, name);
                HDF5_CHECK(
                    H5Dwrite(dataset, H5T_NATIVE_UINT8, row_space, file_space, H5P_DEFAULT, row),
                    error, "writing row %lld of /masks/%s", (long long)q, name);
            }
        }
        if (hdf5_attribute_string(dataset, "Description",
                                  "1 = query q may attend key k, from masks.md [B,S,S]",
                                  error) != CPPARITY_OK) {
            goto fail;
        }
        const cpparity_status closed = HDF5_CLOSE(dataset, CPPARITY_OK, error);
        dataset = H5I_INVALID_HID;
        if (closed != CPPARITY_OK) {
            goto fail;
        }
    }
    status = CPPARITY_OK;
fail:
    status = HDF5_CLOSE(dataset, status, error);
    status = HDF5_CLOSE(row_space, status, error);
    status = HDF5_CLOSE(file_space, status, error);
    status = HDF5_CLOSE(properties, status, error);
    status = HDF5_CLOSE(group, status, error);
    free(row);
    return status;
}

/* Rows of /reference/logits per chunk: a power of two (so chunks tile the row blocks the logits
 * are written in) whose chunk holds at most about 1 MiB, at least one row. */
static int64_t logits_chunk_rows(int64_t vocab) {
    int64_t rows = 1;
    while (rows < CPPARITY_ROW_BLOCK && 2 * rows * vocab * (int64_t)sizeof(double) <= (1 << 20)) {
        rows *= 2;
    }
    return rows;
}

/* /reference/logits [B, S, V], one row block at a time (never held whole), from every token's
 * final norm output (B·S, D). */
static cpparity_status write_logits(hid_t group, const reference_model *model,
                                    const double *final_normed, cpparity_error *error) {
    const int64_t B = model->batch, S = model->seq_len, V = model->config.vocab_size;
    const int64_t dims[3] = {B, S, V};
    const int64_t rows = logits_chunk_rows(V);
    const int64_t chunk[3] = {1, rows < S ? rows : S, V};
    const row_blocks blocks = row_blocks_of(B, S);
    double *logits = malloc((size_t)(row_blocks_widest(&blocks) * V + 1) * sizeof *logits);
    if (logits == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the logits of a row block)");
    }
    hdf5_stream stream;
    cpparity_status status = hdf5_stream_create(group, "logits", H5T_NATIVE_DOUBLE, 3, dims, chunk,
                                                "float64 reference logits [B,S,V]", &stream, error);
    for (int64_t k = 0; status == CPPARITY_OK && k < blocks.count; k++) {
        const row_block block = row_blocks_at(&blocks, k);
        lm_head_logits_rows(logits, final_normed + block.flat * model->config.hidden_size,
                            reference_model_head(model), block.end - block.begin,
                            model->config.hidden_size, V);
        const int64_t start[3] = {block.batch_row, block.begin, 0};
        const int64_t count[3] = {1, block.end - block.begin, V};
        status = hdf5_stream_write(&stream, start, count, logits, error);
    }
    if (stream.dataset >= 0) {
        status = hdf5_stream_close(&stream, status, error);
    }
    free(logits);
    return status;
}

static cpparity_status write_reference(hid_t file, const reference_model *model,
                                       const double *final_normed, bool logits,
                                       cpparity_error *error) {
    const hid_t group = create_group(file, "/reference", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const bool written =
        hdf5_write_dataset(group, "loss", H5T_NATIVE_DOUBLE, 0, NULL, &model->loss,
                           "float64 reference loss: summed token cross-entropy / valid labels",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(
            group, "final_normed", H5T_NATIVE_DOUBLE, 3,
            (const int64_t[]){model->batch, model->seq_len, model->config.hidden_size},
            final_normed,
            "float64 final norm output [B,S,D], the LM head's input: logits = "
            "final_normed . head^T, a block of rows at a time",
            error) == CPPARITY_OK &&
        (!logits || write_logits(group, model, final_normed, error) == CPPARITY_OK) &&
        write_tensors(group, "grads", &model->parameter_table, model->gradients,
                      "float64 reference gradient of the loss", error) == CPPARITY_OK;
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

cpparity_status export_case(const cpparity_case *exported, const export_source *source, bool logits,
                            const char *path, const export_spread *spread, cpparity_error *error) {
    output_file output;
    cpparity_status status = output_file_begin(&output, path, "-o", error);
    if (status != CPPARITY_OK) {
        return status;
    }
    cpparity_batch batch = {0};
    reference_model model = {0};
    double *final_normed = NULL; /* every token's, whole: the logits are made from it */
    const reference_team *team = spread != NULL ? spread->team : NULL;
    hid_t file = H5I_INVALID_HID, access = H5I_INVALID_HID;
    status = fixture_batch_build(&batch, exported->rows, exported->batch_size, exported->seq_len,
                                 exported->model.vocab_size, exported->seed, error);
    if (status == CPPARITY_OK && spread != NULL) { /* the other ranks join (as reference_cache) */
        status = spread->summon(spread->context, exported, exported->seed, error);
    }
    if (status == CPPARITY_OK) {
        status = reference_model_init_spread(&model, &exported->model, exported->batch_size,
                                             exported->seq_len, team, error);
    }
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(model.parameters, &model.parameter_table, exported->seed);
        status = reference_model_forward(&model, &batch, error);
    }
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, &batch, error);
    }
    if (status == CPPARITY_OK) { /* a collective of the team: with or without the logits */
        final_normed = malloc(
            (size_t)(exported->batch_size * exported->seq_len * exported->model.hidden_size) *
            sizeof *final_normed);
        status = final_normed == NULL
                     ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                          "out of memory (the final norm's output)")
                     : reference_model_final_normed_whole(&model, final_normed, error);
    }
    if (status != CPPARITY_OK) {
        goto done;
    }
    hdf5_quiet();
    status = CPPARITY_ERROR_RUNTIME;
    if ((access = hdf5_file_access(error)) < 0) {
        goto done;
    }
    HDF5_CHECK(file = H5Fcreate(output.temporary, H5F_ACC_TRUNC, H5P_DEFAULT, access), error,
               "creating -o %s (as %s)", path, output.temporary);
    if (write_model_attributes(file, exported, source, error) != CPPARITY_OK ||
        write_source(file, source, error) != CPPARITY_OK ||
        write_inputs(file, &batch, error) != CPPARITY_OK ||
        write_tensors(file, "weights", &model.parameter_table, model.parameters,
                      "float64 fixture weight", error) != CPPARITY_OK ||
        (exported->seq_len <= EXPORT_DENSE_MASK_LIMIT &&
         write_masks(file, &model, error) != CPPARITY_OK) ||
        write_reference(file, &model, final_normed, logits, error) != CPPARITY_OK) {
        goto fail;
    }
    /* HDF5 writes much of the file while closing it: a full disk shows here */
    status = hdf5_close_file(&file, error, "-o %s", path);
    if (status == CPPARITY_OK) {
        status = output_file_commit(&output, error);
    }
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    hdf5_close(file);
    hdf5_close(access);
    if (status != CPPARITY_OK) {
        output_file_abandon(&output);
    }
    free(final_normed);
    reference_model_free(&model);
    cpparity_batch_free(&batch);
    return status;
}
