/* export.c — one case's inputs, weights, masks and reference outputs to HDF5 (see export.h). */
#include "export.h"

#include <stdio.h>
#include <stdlib.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "harness/hdf5_util.h"
#include "harness/output_file.h"
#include "reference/model.h"

static cpparity_status write_model_attributes(hid_t file, const cpparity_case *c,
                                              cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group /model");
    const struct {
        const char *name;
        int64_t value;
    } integers[] = {
        {"vocab_size", m->vocab_size},
        {"hidden_size", m->hidden_size},
        {"num_hidden_layers", m->num_hidden_layers},
        {"num_attention_heads", m->num_attention_heads},
        {"num_key_value_heads", m->num_key_value_heads},
        {"head_dim", m->head_dim},
        {"intermediate_size", m->intermediate_size},
        {"sliding_window", m->sliding_window},
        {"attention_chunk_size", m->attention_chunk_size},
        {"tie_word_embeddings", m->tie_word_embeddings ? 1 : 0},
        {"seed", (int64_t)c->seed},
    };
    for (size_t i = 0; i < sizeof integers / sizeof *integers; i++) {
        if (hdf5_attribute_int64(group, integers[i].name, integers[i].value, error) !=
            CPPARITY_OK) {
            goto fail;
        }
    }
    const char *layer_types[CPPARITY_MAX_LAYERS];
    for (int64_t l = 0; l < m->num_hidden_layers; l++) {
        layer_types[l] = cpparity_layer_type_name(m->layer_types[l]);
    }
    if (hdf5_attribute_double(group, "rms_norm_eps", m->rms_norm_eps, error) != CPPARITY_OK ||
        hdf5_attribute_double(group, "rope_theta", m->rope_theta, error) != CPPARITY_OK ||
        hdf5_attribute_strings(group, "layer_types", layer_types, m->num_hidden_layers, error) !=
            CPPARITY_OK ||
        hdf5_attribute_string(group, "chunk_origin",
                              m->chunk_origin == CPPARITY_CHUNK_ORIGIN_DOCUMENT ? "document"
                                                                                : "row",
                              error) != CPPARITY_OK ||
        hdf5_attribute_string(group, "case", c->name, error) != CPPARITY_OK) {
        goto fail;
    }
    H5Gclose(group);
    return CPPARITY_OK;
fail:
    if (group >= 0) {
        H5Gclose(group);
    }
    return CPPARITY_ERROR_RUNTIME;
}

static cpparity_status write_inputs(hid_t file, const cpparity_batch *batch,
                                    cpparity_error *error) {
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(file, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group /inputs");
    const int64_t dims[2] = {batch->batch, batch->seq_len};
    if (hdf5_write_dataset(group, "input_ids", H5T_NATIVE_INT64, 2, dims, batch->input_ids,
                           "token ids [B,S]", error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "labels", H5T_NATIVE_INT64, 2, dims, batch->labels,
                           "next token of the same document, shifted once over the whole row; "
                           "-100 = ignored [B,S]",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "attention_mask", H5T_NATIVE_INT8, 2, dims, batch->attention_mask,
                           "1 = real token, 0 = padding [B,S]", error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "position_ids", H5T_NATIVE_INT64, 2, dims, batch->position_ids,
                           "position inside the document, 0 on padding [B,S]",
                           error) != CPPARITY_OK) {
        goto fail;
    }
    H5Gclose(group);
    return CPPARITY_OK;
fail:
    if (group >= 0) {
        H5Gclose(group);
    }
    return CPPARITY_ERROR_RUNTIME;
}

/* Writes every tensor of table from values (float64) under group `name`. */
static cpparity_status write_tensors(hid_t file, const char *name,
                                     const cpparity_tensor_table *table, const double *values,
                                     const char *description, cpparity_error *error) {
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group %s", name);
    for (int64_t e = 0; e < table->count; e++) {
        const cpparity_tensor_entry *entry = &table->entries[e];
        if (hdf5_write_dataset(group, entry->name, H5T_NATIVE_DOUBLE, entry->rank, entry->shape,
                               values + entry->offset, description, error) != CPPARITY_OK) {
            goto fail;
        }
    }
    H5Gclose(group);
    return CPPARITY_OK;
fail:
    if (group >= 0) {
        H5Gclose(group);
    }
    return CPPARITY_ERROR_RUNTIME;
}

/* /masks/layer_<l> [B,S,S], written one query row at a time: never S×S in memory. */
static cpparity_status write_masks(hid_t file, const reference_model *model,
                                   cpparity_error *error) {
    const int64_t B = model->batch, S = model->seq_len;
    hid_t group = H5I_INVALID_HID, file_space = H5I_INVALID_HID, row_space = H5I_INVALID_HID;
    hid_t dataset = H5I_INVALID_HID;
    uint8_t *row = malloc((size_t)S);
    if (row == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (mask row)");
    }
    HDF5_CHECK(group = H5Gcreate2(file, "masks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group /masks");
    const hsize_t dims[3] = {(hsize_t)B, (hsize_t)S, (hsize_t)S};
    const hsize_t row_dims[1] = {(hsize_t)S};
    HDF5_CHECK(file_space = H5Screate_simple(3, dims, NULL), error, "creating the mask space");
    HDF5_CHECK(row_space = H5Screate_simple(1, row_dims, NULL), error, "creating a row space");
    for (int64_t l = 0; l < model->config.num_hidden_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer_%lld", (long long)l);
        HDF5_CHECK(dataset = H5Dcreate2(group, name, H5T_NATIVE_UINT8, file_space, H5P_DEFAULT,
                                        H5P_DEFAULT, H5P_DEFAULT),
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
        H5Dclose(dataset);
        dataset = H5I_INVALID_HID;
    }
    H5Sclose(row_space);
    H5Sclose(file_space);
    H5Gclose(group);
    free(row);
    return CPPARITY_OK;
fail:
    if (dataset >= 0) {
        H5Dclose(dataset);
    }
    if (row_space >= 0) {
        H5Sclose(row_space);
    }
    if (file_space >= 0) {
        H5Sclose(file_space);
    }
    if (group >= 0) {
        H5Gclose(group);
    }
    free(row);
    return CPPARITY_ERROR_RUNTIME;
}

static cpparity_status write_reference(hid_t file, const reference_model *model,
                                       cpparity_error *error) {
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(file, "reference", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group /reference");
    const int64_t logits_dims[3] = {model->batch, model->seq_len, model->config.vocab_size};
    if (hdf5_write_dataset(group, "loss", H5T_NATIVE_DOUBLE, 0, NULL, &model->loss,
                           "float64 reference loss: summed token cross-entropy / valid labels",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "logits", H5T_NATIVE_DOUBLE, 3, logits_dims,
                           reference_model_logits(model), "float64 reference logits [B,S,V]",
                           error) != CPPARITY_OK ||
        write_tensors(group, "grads", &model->parameter_table, model->gradients,
                      "float64 reference gradient of the loss", error) != CPPARITY_OK) {
        goto fail;
    }
    H5Gclose(group);
    return CPPARITY_OK;
fail:
    if (group >= 0) {
        H5Gclose(group);
    }
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status export_case(const cpparity_case *exported, const char *path,
                            cpparity_error *error) {
    output_file output;
    cpparity_status status = output_file_begin(&output, path, "-o", error);
    if (status != CPPARITY_OK) {
        return status;
    }
    cpparity_batch batch = {0};
    reference_model model = {0};
    hid_t file = H5I_INVALID_HID;
    status = fixture_batch_build(&batch, exported->rows, exported->batch_size, exported->seq_len,
                                 exported->model.vocab_size, exported->seed, error);
    if (status == CPPARITY_OK) {
        status = reference_model_init(&model, &exported->model, exported->batch_size,
                                      exported->seq_len, error);
    }
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(model.parameters, &model.parameter_table, exported->seed);
        status = reference_model_forward(&model, &batch, error);
    }
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, &batch, error);
    }
    if (status != CPPARITY_OK) {
        goto done;
    }
    hdf5_quiet();
    status = CPPARITY_ERROR_RUNTIME;
    HDF5_CHECK(file = H5Fcreate(output.temporary, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating %s", output.temporary);
    if (write_model_attributes(file, exported, error) != CPPARITY_OK ||
        write_inputs(file, &batch, error) != CPPARITY_OK ||
        write_tensors(file, "weights", &model.parameter_table, model.parameters,
                      "float64 fixture weight", error) != CPPARITY_OK ||
        (exported->seq_len <= EXPORT_DENSE_MASK_LIMIT &&
         write_masks(file, &model, error) != CPPARITY_OK) ||
        write_reference(file, &model, error) != CPPARITY_OK) {
        goto fail;
    }
    HDF5_CHECK(H5Fclose(file), error, "closing %s", output.temporary);
    file = H5I_INVALID_HID;
    status = output_file_commit(&output, error);
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    if (file >= 0) {
        H5Fclose(file);
    }
    if (status != CPPARITY_OK) {
        output_file_abandon(&output);
    }
    reference_model_free(&model);
    fixture_batch_free(&batch);
    return status;
}
