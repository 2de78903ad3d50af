/* attention_export.c — attention-level cases to HDF5 for Python kernels (see attention_export.h).
 */
#include "harness/running/attention_export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output_file.h"
#include "distributed/kernels/mask_description.h"
#include "fixtures/batch_fixture.h"
#include "harness/running/attention_blocks.h"
#include "harness/running/attention_item.h"
#include "harness/storage/attention_export_format.h"
#include "reference/attention.h"
#include "reference/mask.h"
#include "results_model/hdf5_util.h"

/* The names of docs/dump-format.md for layer types and chunk origins. */
static const char *const layer_type_words[CPPARITY_LAYER_TYPE_COUNT] = {"full", "sliding",
                                                                        "chunked"};

uint64_t attention_export_input_seed(const cpparity_case *c, attention_export_seed seed) {
    return seed.set ? seed.value : c->seed;
}

/* Group name under parent, open (the caller closes it), or a negative id with error filled. */
static hid_t create_group(hid_t parent, const char *name, const char *where,
                          cpparity_error *error) {
    hid_t group = H5I_INVALID_HID;
    HDF5_CHECK(group = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating group %s/%s", where, name);
fail:
    return group;
}

/* One layer's buffers: inputs in float32 and float64, the reference's outputs. */
typedef struct layer_buffers {
    float *q, *k, *v, *dout;
    double *wide_q, *wide_k, *wide_v, *wide_dout;
    double *out, *lse, *dq, *dk, *dv;
} layer_buffers;

static void layer_buffers_free(layer_buffers *b) {
    void *all[] = {b->q,         b->k,   b->v,   b->dout, b->wide_q, b->wide_k, b->wide_v,
                   b->wide_dout, b->out, b->lse, b->dq,   b->dk,     b->dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(all[i]);
    }
    memset(b, 0, sizeof *b);
}

static bool layer_buffers_allocate(layer_buffers *b, int64_t query, int64_t key, int64_t rows) {
    memset(b, 0, sizeof *b);
#define TAKE(field, count) (b->field = calloc((size_t)(count) + 1, sizeof *b->field)) != NULL
    return TAKE(q, query) && TAKE(k, key) && TAKE(v, key) && TAKE(dout, query) &&
           TAKE(wide_q, query) && TAKE(wide_k, key) && TAKE(wide_v, key) &&
           TAKE(wide_dout, query) && TAKE(out, query) && TAKE(lse, rows) && TAKE(dq, query) &&
           TAKE(dk, key) && TAKE(dv, key);
#undef TAKE
}

/* /cases/<case>/mask: the batch's attention_mask and position_ids and the per-token facts of the
 * compact mask description (distributed/kernels/mask_description.h builds them as a kernel is
 * given them). */
static cpparity_status write_mask(hid_t case_group, const char *where, const cpparity_batch *batch,
                                  const mask_storage *storage, cpparity_error *error) {
    const hid_t group = create_group(case_group, "mask", where, error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const int64_t dims[2] = {batch->batch, batch->seq_len};
    const bool written =
        hdf5_write_dataset(group, "attention_mask", H5T_NATIVE_INT8, 2, dims, batch->attention_mask,
                           "1 = real token, 0 = padding [B,S]", error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "position_ids", H5T_NATIVE_INT64, 2, dims, batch->position_ids,
                           "position of each token (docs/masks.md) [B,S]", error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "key_valid", H5T_NATIVE_INT8, 2, dims, storage->key_valid,
                           "1 = the token may be attended (a real token) [B,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "document", H5T_NATIVE_INT64, 2, dims, storage->document,
                           "document id of each token, never decreasing along a row [B,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(
            group, "document_start", H5T_NATIVE_INT64, 2, dims, storage->document_start,
            "index of the first token of each token's document [B,S]", error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "position", H5T_NATIVE_INT64, 2, dims, storage->position,
                           "position_ids, which chunk_origin position counts chunks in [B,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "left_padding", H5T_NATIVE_INT64, 1, dims, storage->left_padding,
                           "leading padding tokens of each row [B]", error) == CPPARITY_OK;
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

/* /cases/<case>/blocks: the global tokens of each query and key block (attention_blocks.h). */
static cpparity_status write_blocks(hid_t case_group, const char *where, int64_t seq_len,
                                    cpparity_error *error) {
    int64_t *tokens = calloc((size_t)seq_len + 1, sizeof *tokens);
    if (tokens == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (block tokens)");
    }
    const hid_t group = create_group(case_group, "blocks", where, error);
    bool written = group >= 0;
    for (int i = 0; written && i < ATTENTION_QUERY_BLOCKS + ATTENTION_KEY_BLOCKS; i++) {
        const bool query = i < ATTENTION_QUERY_BLOCKS;
        const int block = query ? i : i - ATTENTION_QUERY_BLOCKS;
        const int64_t count = query ? attention_query_block(seq_len, block, tokens)
                                    : attention_key_block(seq_len, block, tokens);
        char name[32];
        snprintf(name, sizeof name, "%s_%d", query ? "query" : "key", block);
        written = hdf5_write_dataset(group, name, H5T_NATIVE_INT64, 1, &count, tokens,
                                     query ? "global token of each query row of the block calls "
                                             "with this query block, in call order"
                                           : "global token of each key row of the block calls "
                                             "with this key block, in call order",
                                     error) == CPPARITY_OK;
    }
    free(tokens);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    return HDF5_CLOSE(group, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
}

/* The float64 reference of one layer, from the mask's definition (reference/mask.h), on the
 * widened inputs. */
static cpparity_status reference_layer(const cpparity_case *c, const cpparity_batch *batch,
                                       cpparity_attention_layer layer, layer_buffers *b,
                                       int64_t query, int64_t key, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    reference_mask mask = {0};
    cpparity_status status =
        reference_mask_init(&mask, c->batch_size, c->seq_len, batch->attention_mask,
                            batch->position_ids, layer, REFERENCE_MASK_DEFAULT_BLOCK, error);
    const reference_attention_shape shape = {c->batch_size, c->seq_len, m->num_attention_heads,
                                             m->num_key_value_heads, m->head_dim};
    const double scale = attention_item_scale(c);
    memset(b->dq, 0, (size_t)query * sizeof *b->dq);
    memset(b->dk, 0, (size_t)key * sizeof *b->dk);
    memset(b->dv, 0, (size_t)key * sizeof *b->dv);
    if (status == CPPARITY_OK) {
        status = reference_attention_forward(b->out, b->lse, b->wide_q, b->wide_k, b->wide_v, &mask,
                                             shape, scale, error);
    }
    if (status == CPPARITY_OK) {
        status =
            reference_attention_backward(b->dq, b->dk, b->dv, b->wide_dout, b->wide_q, b->wide_k,
                                         b->wide_v, b->out, b->lse, &mask, shape, scale, error);
    }
    reference_mask_free(&mask);
    return status;
}

/* /cases/<case>/layers/<l>: its mask attributes, inputs and reference outputs. */
static cpparity_status write_layer(hid_t layers, const char *where, const cpparity_case *c,
                                   uint64_t input_seed, int64_t l, const cpparity_batch *batch,
                                   layer_buffers *b, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len, H = m->num_attention_heads,
                  Hkv = m->num_key_value_heads, Dh = m->head_dim;
    const int64_t query = B * S * H * Dh, key = B * S * Hkv * Dh;
    const cpparity_attention_layer layer = cpparity_model_layer(m, l);
    attention_item_draw_inputs(c, input_seed, l, b->q, b->k, b->v, b->dout, b->wide_q, b->wide_k,
                               b->wide_v, b->wide_dout);
    cpparity_status status = reference_layer(c, batch, layer, b, query, key, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    char name[32], path[600];
    snprintf(name, sizeof name, "%lld", (long long)l);
    snprintf(path, sizeof path, "%s/layers/%s", where, name);
    const hid_t group = create_group(layers, name, path, error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    hid_t reference = H5I_INVALID_HID;
    const int64_t query_shape[4] = {B, S, H, Dh}, key_shape[4] = {B, S, Hkv, Dh};
    const int64_t lse_shape[3] = {B, H, S};
    const hdf5_named_int64 sizes[] = {{"window", m->sliding_window},
                                      {"chunk_size", m->attention_chunk_size}};
    bool written =
        hdf5_attribute_string(group, "layer_type", layer_type_words[layer.type], error) ==
            CPPARITY_OK &&
        hdf5_attributes_int64(group, sizes, 2, error) == CPPARITY_OK &&
        hdf5_attribute_string(group, "chunk_origin", cpparity_chunk_origin_names[m->chunk_origin],
                              error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "q", H5T_NATIVE_FLOAT, 4, query_shape, b->q, "queries [B,S,H,Dh]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "k", H5T_NATIVE_FLOAT, 4, key_shape, b->k, "keys [B,S,Hkv,Dh]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "v", H5T_NATIVE_FLOAT, 4, key_shape, b->v, "values [B,S,Hkv,Dh]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "dout", H5T_NATIVE_FLOAT, 4, query_shape, b->dout,
                           "gradient of the output, the backward's input [B,S,H,Dh]",
                           error) == CPPARITY_OK;
    if (written) {
        reference = create_group(group, "reference", path, error);
        written = reference >= 0;
    }
    written =
        written &&
        hdf5_write_dataset(reference, "out", H5T_NATIVE_DOUBLE, 4, query_shape, b->out,
                           "float64 reference output; 0 on a fully masked row [B,S,H,Dh]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(reference, "lse", H5T_NATIVE_DOUBLE, 3, lse_shape, b->lse,
                           "float64 reference log-sum-exp of the scaled scores, natural log; "
                           "-inf on a fully masked row [B,H,S]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(reference, "dq", H5T_NATIVE_DOUBLE, 4, query_shape, b->dq,
                           "float64 reference gradient of sum(dout * out) by q [B,S,H,Dh]",
                           error) == CPPARITY_OK &&
        hdf5_write_dataset(reference, "dk", H5T_NATIVE_DOUBLE, 4, key_shape, b->dk,
                           "float64 reference gradient by k [B,S,Hkv,Dh]", error) == CPPARITY_OK &&
        hdf5_write_dataset(reference, "dv", H5T_NATIVE_DOUBLE, 4, key_shape, b->dv,
                           "float64 reference gradient by v [B,S,Hkv,Dh]", error) == CPPARITY_OK;
    status = HDF5_CLOSE(reference, written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
    return HDF5_CLOSE(group, status, error);
}

/* /cases/<case>: its attributes, mask, blocks and layers. */
static cpparity_status write_case(hid_t cases, const cpparity_case *c, int64_t order,
                                  uint64_t input_seed, cpparity_error *error) {
    const cpparity_model_config *m = &c->model;
    const int64_t B = c->batch_size, S = c->seq_len;
    int64_t query = 0, key = 0, rows = 0;
    if (attention_item_sizes(c, &query, &key, &rows, error) != CPPARITY_OK) {
        return CPPARITY_ERROR_INPUT;
    }
    char where[300];
    snprintf(where, sizeof where, "/cases/%s", c->name);
    cpparity_batch batch = {0};
    mask_storage storage = {0};
    layer_buffers buffers;
    hid_t group = H5I_INVALID_HID, layers = H5I_INVALID_HID;
    cpparity_status status =
        layer_buffers_allocate(&buffers, query, key, rows)
            ? CPPARITY_OK
            : cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "case %s: out of memory", c->name);
    if (status == CPPARITY_OK) {
        status = fixture_batch_build(&batch, c->rows, B, S, m->vocab_size, c->seed, error);
    }
    if (status == CPPARITY_OK) {
        status =
            mask_storage_build(&storage, B, S, batch.attention_mask, batch.position_ids, error);
    }
    if (status == CPPARITY_OK) {
        group = create_group(cases, c->name, "/cases", error);
        status = group < 0 ? CPPARITY_ERROR_RUNTIME : CPPARITY_OK;
    }
    if (status == CPPARITY_OK) {
        const hdf5_named_int64 sizes[] = {
            {"order", order},
            {"seed", (int64_t)c->seed},
            {"input_seed", (int64_t)input_seed},
            {"batch", B},
            {"seq_len", S},
            {"heads", m->num_attention_heads},
            {"kv_heads", m->num_key_value_heads},
            {"head_dim", m->head_dim},
            {"layer_count", m->num_hidden_layers},
        };
        const bool written =
            hdf5_attribute_string(group, "case", c->name, error) == CPPARITY_OK &&
            hdf5_attribute_string(group, "dtype", "f32", error) == CPPARITY_OK &&
            hdf5_attributes_int64(group, sizes, sizeof sizes / sizeof *sizes, error) ==
                CPPARITY_OK &&
            hdf5_attribute_double(group, "scale", attention_item_scale(c), error) == CPPARITY_OK &&
            write_mask(group, where, &batch, &storage, error) == CPPARITY_OK &&
            write_blocks(group, where, S, error) == CPPARITY_OK;
        status = written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME;
    }
    if (status == CPPARITY_OK) {
        layers = create_group(group, "layers", where, error);
        status = layers < 0 ? CPPARITY_ERROR_RUNTIME : CPPARITY_OK;
    }
    for (int64_t l = 0; status == CPPARITY_OK && l < m->num_hidden_layers; l++) {
        status = write_layer(layers, where, c, input_seed, l, &batch, &buffers, error);
    }
    status = HDF5_CLOSE(layers, status, error);
    status = HDF5_CLOSE(group, status, error);
    layer_buffers_free(&buffers);
    mask_storage_free(&storage);
    cpparity_batch_free(&batch);
    return status;
}

cpparity_status attention_export_write(const cpparity_case *const *cases, int64_t count,
                                       const export_source *source, attention_export_seed seed,
                                       const char *path, cpparity_error *error) {
    output_file output;
    cpparity_status status = output_file_begin(&output, path, "-o", error);
    if (status != CPPARITY_OK) {
        return status;
    }
    hid_t file = H5I_INVALID_HID, access = H5I_INVALID_HID, group = H5I_INVALID_HID;
    hdf5_quiet();
    status = CPPARITY_ERROR_RUNTIME;
    if ((access = hdf5_file_access(error)) < 0) {
        goto done;
    }
    HDF5_CHECK(file = H5Fcreate(output.temporary, H5F_ACC_TRUNC, H5P_DEFAULT, access), error,
               "creating -o %s (as %s)", path, output.temporary);
    cpparity_digest digest =
        attention_export_digest_start(source->suite_text, source->suite_length);
    for (int64_t i = 0; i < count; i++) {
        attention_export_digest_case(&digest, cases[i]->name,
                                     attention_export_input_seed(cases[i], seed));
    }
    char hex[CPPARITY_DIGEST_HEX];
    cpparity_digest_hex(&digest, hex);
    const int64_t suite_dims[1] = {(int64_t)source->suite_length};
    if (hdf5_attribute_string(file, "format", ATTENTION_EXPORT_FORMAT, error) != CPPARITY_OK ||
        hdf5_attribute_int64(file, "format_version", ATTENTION_EXPORT_VERSION, error) !=
            CPPARITY_OK ||
        hdf5_attribute_string(file, "digest", hex, error) != CPPARITY_OK ||
        hdf5_attribute_int64(file, "case_count", count, error) != CPPARITY_OK) {
        goto fail;
    }
    if ((group = create_group(file, "source", "", error)) < 0) {
        goto fail;
    }
    const bool source_written =
        hdf5_attribute_string(group, "path", source->suite_path, error) == CPPARITY_OK &&
        hdf5_write_dataset(group, "suite_yaml", H5T_NATIVE_UINT8, 1, suite_dims, source->suite_text,
                           "the suite's bytes (UTF-8 YAML, cases/README.md) the cases were read "
                           "from",
                           error) == CPPARITY_OK;
    status = HDF5_CLOSE(group, source_written ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME, error);
    group = H5I_INVALID_HID;
    if (status != CPPARITY_OK) {
        goto done;
    }
    if ((group = create_group(file, "cases", "", error)) < 0) {
        goto fail;
    }
    for (int64_t i = 0; i < count; i++) {
        status = write_case(group, cases[i], i, attention_export_input_seed(cases[i], seed), error);
        if (status != CPPARITY_OK) {
            goto done;
        }
    }
    status = HDF5_CLOSE(group, CPPARITY_OK, error);
    group = H5I_INVALID_HID;
    if (status != CPPARITY_OK) {
        goto done;
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
    hdf5_close(group);
    hdf5_close(file);
    hdf5_close(access);
    if (status != CPPARITY_OK) {
        output_file_abandon(&output);
    }
    return status;
}
