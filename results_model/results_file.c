/* results_file.c — one run's results to HDF5 (layout in results_file.h and docs/results-file.md).
 */
#include "results_model/results_file.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results_model/hdf5_util.h"
#include "results_model/results_layout.h"
#include "common/output_file.h"

/* Where an item's case was written: its source and the group name under /cases. */
typedef struct case_entry {
    const cpparity_case *source;         /* the case */
    char group[CPPARITY_CASE_NAME + 16]; /* the group name (the case name, maybe with ~k) */
} case_entry;

/* Copies at most capacity bytes of a possibly unterminated char array into out (NUL-terminated). */
static void copy_bounded(char *out, size_t out_size, const char *value, size_t capacity) {
    size_t length = strnlen(value, capacity);
    if (length >= out_size) {
        length = out_size - 1;
    }
    memcpy(out, value, length);
    out[length] = '\0';
}

/* A string attribute from a fixed-size char array that may lack its terminator. */
static cpparity_status bounded_attribute(hid_t object, const char *name, const char *value,
                                         size_t capacity, cpparity_error *error) {
    char copy[CPPARITY_COMMAND_LINE + 1]; /* the longest field written this way, and its NUL */
    copy_bounded(copy, sizeof copy, value, capacity);
    return hdf5_attribute_string(object, name, copy, error);
}

#define FIELD_ATTRIBUTE(object, name, field)                                                       \
    bounded_attribute((object), (name), (field), sizeof(field), error)

/* True when name is a non-empty [A-Za-z0-9_.-]+ other than "." and "..". */
static bool safe_name(const char *name) {
    if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return false;
    }
    for (const char *c = name; *c != '\0'; c++) {
        const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                        (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* Creates group name under parent with its links' creation order tracked. Returns the open group
 * (caller closes) or a negative id with error filled. */
/* Links a group keeps in its object header (HDF5's largest compact count). */
#define RESULTS_COMPACT_LINKS 65535

static hid_t create_group(hid_t parent, const char *name, cpparity_error *error) {
    hid_t properties = H5I_INVALID_HID, group = H5I_INVALID_HID;
    HDF5_CHECK(properties = H5Pcreate(H5P_GROUP_CREATE), error,
               "creating the properties of group %s", name);
    HDF5_CHECK(
        H5Pset_link_creation_order(properties, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        error, "tracking creation order in group %s", name);
    /* links stay in the group's object header, whose checksum HDF5 verifies: past 8 links HDF5
     * would move them to dense storage (a fractal heap and B-trees), and HDF5 1.10 crashes
     * iterating a corrupted one instead of refusing it (docs/results-file.md, Integrity) */
    HDF5_CHECK(H5Pset_link_phase_change(properties, RESULTS_COMPACT_LINKS, RESULTS_COMPACT_LINKS),
               error, "keeping the links of group %s compact", name);
    HDF5_CHECK(group = H5Gcreate2(parent, name, H5P_DEFAULT, properties, H5P_DEFAULT), error,
               "creating group %s", name);
fail:
    if (HDF5_CLOSE(properties, CPPARITY_OK, error) != CPPARITY_OK) {
        hdf5_close(group);
        group = H5I_INVALID_HID;
    }
    return group;
}

static cpparity_status write_provenance(hid_t file, const run_provenance *p,
                                        cpparity_error *error) {
    hid_t group = create_group(file, "provenance", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const hdf5_named_int64 integers[] = {
        {"ranks", p->ranks},
        {"seed", (int64_t)p->seed},
        {"seed_overridden", p->seed_overridden ? 1 : 0},
    };
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    if (FIELD_ATTRIBUTE(group, "version", p->version) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "git_commit", p->git_commit) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "compiler", p->compiler) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "libraries", p->libraries) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "host", p->host) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "command_line", p->command_line) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "comm", p->comm) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "device", p->device) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "implementation", p->implementation) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "kernel", p->kernel) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "fault", p->fault) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "store", p->store) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "start_time", p->start_time) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "end_time", p->end_time) != CPPARITY_OK ||
        hdf5_attributes_int64(group, integers, sizeof integers / sizeof *integers, error) !=
            CPPARITY_OK ||
        hdf5_attribute_double(group, "reference_spread_seconds", p->reference_spread_seconds,
                              error) != CPPARITY_OK) {
        goto done;
    }
    status = CPPARITY_OK;
done:
    return HDF5_CLOSE(group, status, error);
}

static cpparity_status write_summary(hid_t file, const run_results *results,
                                     cpparity_error *error) {
    hid_t group = create_group(file, "summary", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const hdf5_named_int64 counts[] = {
        {"passed", results->passed},
        {"failed", results->failed},
        {"refused", results->refused},
        {"not_run", results->not_run},
        {"left_out", results->left_out},
        {"not_claimed", results->not_claimed},
        {"errors", results->errors},
        {"items", results->item_count},
        {"discrimination_records", results->discrimination_count},
    };
    cpparity_status status =
        hdf5_attributes_int64(group, counts, sizeof counts / sizeof *counts, error);
    return HDF5_CLOSE(group, status, error);
}

/* /cases/<group>: the case's definition (see results_file.h). */
static cpparity_status write_case(hid_t cases, const char *group_name, const cpparity_case *c,
                                  const char *suite_path, cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    int64_t *rows = NULL, *lengths = NULL, *starts = NULL;
    hid_t group = create_group(cases, group_name, error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    const hdf5_named_int64 integers[] = {
        {"seq_len", c->seq_len},
        {"batch_size", c->batch_size},
        {"seed", (int64_t)c->seed},
        {"expect_refuse", c->expect_refuse ? 1 : 0},
    };
    const char *dtypes[CPPARITY_DTYPE_COUNT];
    const int dtype_count =
        c->dtype_count < CPPARITY_DTYPE_COUNT ? c->dtype_count : CPPARITY_DTYPE_COUNT;
    for (int d = 0; d < dtype_count; d++) {
        dtypes[d] = cpparity_dtype_name(c->dtypes[d]);
    }
    const int cp_count = c->cp_count < CPPARITY_MAX_CP_SIZES ? c->cp_count : CPPARITY_MAX_CP_SIZES;
    if (FIELD_ATTRIBUTE(group, "name", c->name) != CPPARITY_OK ||
        bounded_attribute(group, "suite", suite_path, CPPARITY_PATH, error) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "description", c->description) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "refusal", c->refusal) != CPPARITY_OK ||
        hdf5_attributes_int64(group, integers, sizeof integers / sizeof *integers, error) !=
            CPPARITY_OK ||
        hdf5_write_model_config(group, &c->model, error) != CPPARITY_OK ||
        (cp_count > 0 &&
         hdf5_attribute_int64s(group, "cp_sizes", c->cp_sizes, cp_count, error) != CPPARITY_OK) ||
        (dtype_count > 0 &&
         hdf5_attribute_strings(group, "dtypes", dtypes, dtype_count, error) != CPPARITY_OK)) {
        goto done;
    }
    int64_t documents = 0;
    for (int64_t b = 0; b < c->batch_size; b++) {
        documents += c->rows[b].document_count;
    }
    rows = malloc((size_t)(c->batch_size > 0 ? c->batch_size : 1) * 3 * sizeof *rows);
    lengths = malloc((size_t)(documents > 0 ? documents : 1) * sizeof *lengths);
    starts = malloc((size_t)(documents > 0 ? documents : 1) * sizeof *starts);
    if (rows == NULL || lengths == NULL || starts == NULL) {
        cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (layout of case %s)",
                           group_name);
        goto done;
    }
    int64_t next = 0;
    for (int64_t b = 0; b < c->batch_size; b++) {
        const cpparity_row_layout *row = &c->rows[b];
        rows[3 * b] = row->left_padding;
        rows[3 * b + 1] = row->document_count;
        rows[3 * b + 2] = row->right_padding;
        for (int64_t d = 0; d < row->document_count; d++) {
            starts[next] = row->start_positions != NULL ? row->start_positions[d] : -1;
            lengths[next++] = row->document_lengths[d];
        }
    }
    const int64_t row_dims[2] = {c->batch_size, 3};
    if (hdf5_write_dataset(group, "rows", H5T_NATIVE_INT64, 2, row_dims, rows,
                           "per batch row: left padding, number of documents, right padding "
                           "[B, 3]",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "document_lengths", H5T_NATIVE_INT64, 1, &documents, lengths,
                           "document lengths of every row, row after row (rows[:, 1] says how "
                           "many belong to each row) [total documents]",
                           error) != CPPARITY_OK ||
        hdf5_write_dataset(group, "document_start_positions", H5T_NATIVE_INT64, 1, &documents,
                           starts,
                           "position_ids of each document's first token as the case declares "
                           "them (start_positions), -1 where not declared (0, or continuing the "
                           "left padding's count) [total documents]",
                           error) != CPPARITY_OK) {
        goto done;
    }
    status = CPPARITY_OK;
done:
    free(starts);
    free(lengths);
    free(rows);
    return HDF5_CLOSE(group, status, error);
}

/* The metrics row of one record. */
static void fill_metrics_row(metrics_row *row, const tensor_record *record) {
    memset(row, 0, sizeof *row);
    const compare_metrics *m = &record->metrics;
    const cpparity_tolerance *t = &record->tolerance;
    copy_bounded(row->tensor, sizeof row->tensor, record->name, sizeof record->name);
    snprintf(row->kind, sizeof row->kind, "%s", cpparity_tensor_kind_name(record->kind));
    row->rank = (int32_t)record->rank;
    row->count = m->count;
    row->compared = m->compared;
    row->excluded = m->excluded;
    row->nonfinite = m->nonfinite;
    row->first_nonfinite = m->first_nonfinite;
    row->max_abs = m->max_abs;
    row->error_norm = m->error_norm;
    row->reference_norm = m->reference_norm;
    row->relative_l2 = m->relative_l2;
    row->absolute = m->absolute ? 1 : 0;
    row->worst_index = m->worst_index;
    row->worst_value = m->worst_value;
    row->worst_reference = m->worst_reference;
    int64_t *coordinates[4] = {&row->w0, &row->w1, &row->w2, &row->w3};
    for (int d = 0; d < 4; d++) {
        const bool used = m->worst_index >= 0 && d < record->shape_rank;
        *coordinates[d] = used ? record->worst[d] : -1;
    }
    row->position_offset = record->position_offset;
    row->baseline_error = record->baseline_error;
    row->cp1_error = record->cp1_error;
    row->ratio = t->ratio;
    row->floor = t->floor;
    row->ceiling = t->ceiling;
    snprintf(row->ratio_origin, sizeof row->ratio_origin, "%s",
             cpparity_tolerance_origin_name(t->ratio_origin));
    snprintf(row->floor_origin, sizeof row->floor_origin, "%s",
             cpparity_tolerance_origin_name(t->floor_origin));
    snprintf(row->ceiling_origin, sizeof row->ceiling_origin, "%s",
             cpparity_tolerance_origin_name(t->ceiling_origin));
    row->limit = record->decision.limit;
    row->cp1_limit = record->decision.cp1_limit;
    row->passed = record->decision.passed ? 1 : 0;
    copy_bounded(row->reason, sizeof row->reason, record->decision.reason,
                 sizeof record->decision.reason);
}

static cpparity_status write_metrics(hid_t group, const run_item *item, cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t type = H5I_INVALID_HID, dataset = H5I_INVALID_HID;
    const int64_t count = item->tensor_count > 0 ? item->tensor_count : 0;
    metrics_row *rows = calloc((size_t)(count > 0 ? count : 1), sizeof *rows);
    if (rows == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (metrics rows)");
    }
    for (int64_t i = 0; i < count; i++) {
        fill_metrics_row(&rows[i], &item->tensors[i]);
    }
    if ((type = results_metrics_type(error)) < 0 ||
        hdf5_write_compound(group, "metrics", type, count, rows,
                            "one row per compared tensor and rank: error metrics against the "
                            "float64 reference, the tolerance applied and where each part came "
                            "from (default, suite, case), the limit and the verdict",
                            error) != CPPARITY_OK) {
        goto done;
    }
    HDF5_CHECK(dataset = H5Dopen2(group, "metrics", H5P_DEFAULT), error, "opening metrics");
    if (hdf5_attribute_string(dataset, "error_metric",
                              "relative L2 against the float64 reference; absolute when the "
                              "reference norm is 0",
                              error) != CPPARITY_OK) {
        goto done;
    }
    status = CPPARITY_OK;
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    status = HDF5_CLOSE(dataset, status, error);
    status = HDF5_CLOSE(type, status, error);
    free(rows);
    return status;
}

/* Adds the tensor, rank and position_offset attributes to a just-written tensor dataset; with
 * window, a windowed record's window too (batch row, first row, rows: results.h). */
static cpparity_status label_tensor(hid_t group, const char *dataset_name,
                                    const tensor_record *record, bool window,
                                    cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t dataset = H5I_INVALID_HID;
    HDF5_CHECK(dataset = H5Dopen2(group, dataset_name, H5P_DEFAULT), error, "opening tensors/%s",
               dataset_name);
    if (FIELD_ATTRIBUTE(dataset, "tensor", record->name) == CPPARITY_OK &&
        hdf5_attribute_int64(dataset, "rank", record->rank, error) == CPPARITY_OK &&
        hdf5_attribute_int64(dataset, "position_offset", record->position_offset, error) ==
            CPPARITY_OK &&
        (!window || record->window[2] == 0 ||
         hdf5_attribute_int64s(dataset, "window", record->window, 3, error) == CPPARITY_OK)) {
        status = CPPARITY_OK;
    }
fail:
    return HDF5_CLOSE(dataset, status, error);
}

/* profiles/logits@rank<r>: the logits error along each rank's slice (tensor_record's
 * position_error), for every item that compared logits; limits@rank<r> beside it, each
 * position's own limit (position_limit), where the per-position rule applies. */
static cpparity_status write_profiles(hid_t item_group, const run_item *item,
                                      cpparity_error *error) {
    hid_t group = create_group(item_group, "profiles", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t i = 0; i < item->tensor_count && status == CPPARITY_OK; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->kind != CPPARITY_KIND_LOGITS || record->position_error == NULL ||
            record->shape_rank != 3) {
            continue;
        }
        char name[48], description[256];
        snprintf(name, sizeof name, "logits@rank%d", record->rank);
        snprintf(description, sizeof description,
                 "logits error along rank %d's slice from position_offset: per position, "
                 "||x - r|| / ||r|| over batch rows and vocabulary of compared elements (NaN "
                 "where none is)",
                 record->rank);
        status = hdf5_write_dataset(group, name, H5T_NATIVE_DOUBLE, 1, &record->shape[1],
                                    record->position_error, description, error);
        if (status == CPPARITY_OK) {
            status = label_tensor(group, name, record, false, error);
        }
        if (status == CPPARITY_OK && record->position_limit != NULL) {
            snprintf(name, sizeof name, "limits@rank%d", record->rank);
            snprintf(description, sizeof description,
                     "each position's own limit beside logits@rank%d: ratio x the naive "
                     "baseline's error on the same elements + floor (NaN where nothing is "
                     "compared or the baseline is not finite)",
                     record->rank);
            status = hdf5_write_dataset(group, name, H5T_NATIVE_DOUBLE, 1, &record->shape[1],
                                        record->position_limit, description, error);
            if (status == CPPARITY_OK) {
                status = label_tensor(group, name, record, false, error);
            }
        }
        if (status != CPPARITY_OK || record->positions == NULL) {
            continue;
        }
        snprintf(name, sizeof name, "positions@rank%d", record->rank);
        snprintf(description, sizeof description,
                 "global position, in the padded sequence, of each row of rank %d's logits and "
                 "of each entry of logits@rank%d (its rows are not consecutive positions: "
                 "position_offset is -1)",
                 record->rank, record->rank);
        status = hdf5_write_dataset(group, name, H5T_NATIVE_INT64, 1, &record->shape[1],
                                    record->positions, description, error);
        if (status == CPPARITY_OK) {
            status = label_tensor(group, name, record, false, error);
        }
    }
    return HDF5_CLOSE(group, status, error);
}

/* tensors/<name>@rank<r>[.reference] for every record with stored values or reference. */
static cpparity_status write_tensors(hid_t item_group, const run_item *item,
                                     cpparity_error *error) {
    hid_t group = create_group(item_group, "tensors", error);
    if (group < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t i = 0; i < item->tensor_count && status == CPPARITY_OK; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->values == NULL && record->reference == NULL) {
            continue;
        }
        char tensor[sizeof record->name];
        copy_bounded(tensor, sizeof tensor, record->name, sizeof record->name);
        int64_t elements = 1;
        const bool rank_ok = record->shape_rank >= 0 && record->shape_rank <= 4;
        for (int d = 0; rank_ok && d < record->shape_rank; d++) {
            elements *= record->shape[d];
        }
        int64_t stored_shape[4] = {0, 0, 0, 0}, stored = 0;
        const int stored_rank =
            rank_ok ? tensor_record_stored_shape(record, stored_shape, &stored) : 0;
        if (!rank_ok || elements != record->metrics.count) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "results: tensor %s on rank %d: shape of rank %d holds "
                                        "%lld elements but its count is %lld",
                                        tensor, record->rank, record->shape_rank,
                                        (long long)elements, (long long)record->metrics.count);
            break;
        }
        char name[sizeof record->name + 48];
        int length = snprintf(name, sizeof name, "%s@rank%d", tensor, record->rank);
        for (char *c = name; *c != '\0'; c++) {
            *c = *c == '/' ? ':' : *c;
        }
        char description[512];
        if (record->values != NULL) {
            snprintf(description, sizeof description,
                     "float32 values of %s on rank %d (%s, cp = %lld) from the implementation "
                     "under test%s",
                     tensor, record->rank, cpparity_dtype_name(item->dtype), (long long)item->cp,
                     record->kind == CPPARITY_KIND_LOGITS
                         ? "; this rank's slice of the sequence, from position_offset"
                         : "");
            status = hdf5_write_dataset(group, name, H5T_NATIVE_FLOAT, stored_rank, stored_shape,
                                        record->values, description, error);
            if (status == CPPARITY_OK) {
                status = label_tensor(group, name, record, true, error);
            }
        }
        if (status == CPPARITY_OK && record->reference != NULL) {
            snprintf(name + length, sizeof name - (size_t)length, ".reference");
            snprintf(description, sizeof description,
                     "float64 reference of %s on rank %d (the values it was compared with)", tensor,
                     record->rank);
            status = hdf5_write_dataset(group, name, H5T_NATIVE_DOUBLE, stored_rank, stored_shape,
                                        record->reference, description, error);
            if (status == CPPARITY_OK) {
                status = label_tensor(group, name, record, true, error);
            }
        }
    }
    status = HDF5_CLOSE(group, status, error);
    return status == CPPARITY_OK ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME;
}

void results_item_group_name(const run_item *item, char *name, size_t size) {
    const bool plain =
        item->algorithm[0] == '\0' ||
        (strcmp(item->algorithm, "ulysses") == 0 &&
         (item->token_layout[0] == '\0' || strcmp(item->token_layout, "contiguous") == 0));
    if (plain) {
        snprintf(name, size, "cp_%lld", (long long)item->cp);
    } else {
        snprintf(name, size, "cp_%lld_%s_%s", (long long)item->cp,
                 item->token_layout[0] != '\0' ? item->token_layout : "contiguous",
                 item->algorithm);
        for (char *c = name; *c != '\0'; c++) {
            *c = *c == ':' ? '-' : *c; /* hybrid:2x2 -> hybrid-2x2: names stay [A-Za-z0-9_.-] */
        }
    }
}

/* /cases/<case>/<dtype>/cp_<n>[_<layout>_<algorithm>]: one item. */
static cpparity_status write_item(hid_t case_group, const run_item *item, cpparity_error *error) {
    const char *dtype = cpparity_dtype_name(item->dtype);
    hid_t dtype_group = H5I_INVALID_HID, group = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    htri_t exists;
    HDF5_CHECK(exists = H5Lexists(case_group, dtype, H5P_DEFAULT), error, "looking up group %s",
               dtype);
    if (exists > 0) {
        HDF5_CHECK(dtype_group = H5Gopen2(case_group, dtype, H5P_DEFAULT), error,
                   "opening group %s", dtype);
    } else if ((dtype_group = create_group(case_group, dtype, error)) < 0) {
        goto fail;
    }
    char name[64];
    results_item_group_name(item, name, sizeof name);
    if ((group = create_group(dtype_group, name, error)) < 0) {
        goto fail;
    }
    const bool has_worst = item->worst_tensor >= 0 && item->worst_tensor < item->tensor_count;
    char worst[sizeof item->tensors->name] = "";
    if (has_worst) {
        copy_bounded(worst, sizeof worst, item->tensors[item->worst_tensor].name, sizeof worst);
    }
    const hdf5_named_int64 integers[] = {
        {"cp", item->cp},
        {"is_baseline", item->is_baseline ? 1 : 0},
        {"padded_seq_len", item->padded_seq_len},
        {"tensors_expected", item->tensors_expected},
        {"tensors_compared", item->tensor_count},
        {"logits_excluded", item->logits_excluded},
        {"gradients_identical", item->gradients_identical ? 1 : 0},
        {"worst_tensor_index", has_worst ? item->worst_tensor : -1},
        {"error_status", item->outcome == RUN_ERROR ? item->error_status : 0},
        {"by_choice", item->by_choice ? 1 : 0},
    };
    if (hdf5_attribute_string(group, "outcome", run_outcome_name(item->outcome), error) !=
            CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "message", item->message) != CPPARITY_OK ||
        hdf5_attribute_string(group, "dtype", dtype, error) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "token_layout", item->token_layout) != CPPARITY_OK ||
        FIELD_ATTRIBUTE(group, "algorithm", item->algorithm) != CPPARITY_OK ||
        hdf5_attributes_int64(group, integers, sizeof integers / sizeof *integers, error) !=
            CPPARITY_OK ||
        hdf5_attribute_double(group, "worst_ratio", item->worst_ratio, error) != CPPARITY_OK ||
        hdf5_attribute_string(group, "worst_tensor", worst, error) != CPPARITY_OK ||
        hdf5_attribute_double(group, "seconds", item->seconds, error) != CPPARITY_OK ||
        hdf5_attribute_double(group, "reference_seconds", item->reference_seconds, error) !=
            CPPARITY_OK ||
        hdf5_attribute_double(group, "wall_seconds", item->wall_seconds, error) != CPPARITY_OK ||
        write_metrics(group, item, error) != CPPARITY_OK ||
        write_tensors(group, item, error) != CPPARITY_OK ||
        write_profiles(group, item, error) != CPPARITY_OK) {
        goto fail;
    }
    status = CPPARITY_OK;
fail:
    status = HDF5_CLOSE(group, status, error);
    return HDF5_CLOSE(dtype_group, status, error);
}

/* The /cases group name of item's case, writing the case group the first time it is seen. */
static cpparity_status case_group_for(hid_t cases, const run_item *item, case_entry *entries,
                                      int64_t *entry_count, const char **group_name,
                                      cpparity_error *error) {
    const cpparity_case *c = item->source;
    for (int64_t e = 0; e < *entry_count; e++) {
        if (entries[e].source == c) {
            *group_name = entries[e].group;
            return CPPARITY_OK;
        }
    }
    char name[CPPARITY_CASE_NAME];
    copy_bounded(name, sizeof name, c->name, sizeof c->name);
    if (!safe_name(name)) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "results: case name \"%s\" is not a safe HDF5 name "
                                  "([A-Za-z0-9_.-])",
                                  name);
    }
    case_entry *entry = &entries[(*entry_count)++];
    entry->source = c;
    snprintf(entry->group, sizeof entry->group, "%s", name);
    for (int k = 2;; k++) {
        bool taken = false;
        for (int64_t e = 0; e + 1 < *entry_count; e++) {
            taken = taken || strcmp(entries[e].group, entry->group) == 0;
        }
        if (!taken) {
            break;
        }
        snprintf(entry->group, sizeof entry->group, "%s~%d", name, k);
    }
    *group_name = entry->group;
    return write_case(cases, entry->group, c, item->suite_path, error);
}

static cpparity_status write_cases(hid_t file, const run_results *results, cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t cases = H5I_INVALID_HID, case_group = H5I_INVALID_HID;
    int64_t entry_count = 0;
    case_entry *entries =
        calloc((size_t)(results->item_count > 0 ? results->item_count : 1), sizeof *entries);
    if (entries == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (case list)");
    }
    if ((cases = create_group(file, "cases", error)) < 0) {
        goto done;
    }
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        const char *group_name = NULL;
        if (item->source == NULL) {
            cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "results: item %lld has no case",
                               (long long)i);
            goto done;
        }
        if (case_group_for(cases, item, entries, &entry_count, &group_name, error) != CPPARITY_OK) {
            goto done;
        }
        HDF5_CHECK(case_group = H5Gopen2(cases, group_name, H5P_DEFAULT), error,
                   "opening /cases/%s", group_name);
        if (write_item(case_group, item, error) != CPPARITY_OK) {
            goto done;
        }
        const cpparity_status closed = HDF5_CLOSE(case_group, CPPARITY_OK, error);
        case_group = H5I_INVALID_HID;
        if (closed != CPPARITY_OK) {
            goto done;
        }
    }
    status = CPPARITY_OK;
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    status = HDF5_CLOSE(case_group, status, error);
    status = HDF5_CLOSE(cases, status, error);
    free(entries);
    return status;
}

static cpparity_status write_discrimination(hid_t file, const run_results *results,
                                            cpparity_error *error) {
    if (results->discrimination_count <= 0) {
        return CPPARITY_OK;
    }
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t type = H5I_INVALID_HID;
    discrimination_row *rows = calloc((size_t)results->discrimination_count, sizeof *rows);
    if (rows == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (discrimination rows)");
    }
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        const discrimination_record *record = &results->discrimination[i];
        if (record->source != NULL) {
            copy_bounded(rows[i].case_name, sizeof rows[i].case_name, record->source->name,
                         sizeof record->source->name);
        }
        copy_bounded(rows[i].feature, sizeof rows[i].feature, record->feature,
                     sizeof record->feature);
        rows[i].change = record->change;
        rows[i].threshold = record->threshold;
        rows[i].discriminating = record->discriminating ? 1 : 0;
    }
    type = results_discrimination_type(error);
    if (type < 0) {
        goto fail;
    }
    status = hdf5_write_compound(file, "discrimination", type, results->discrimination_count, rows,
                                 "per case and mask feature: the largest relative change of the "
                                 "compared tensors when the feature is switched off, the "
                                 "threshold (10 x the tightest limit) and whether the case can "
                                 "detect the feature being dropped",
                                 error);
    goto done;
fail:
    status = CPPARITY_ERROR_RUNTIME;
done:
    status = HDF5_CLOSE(type, status, error);
    free(rows);
    return status;
}

/* The results (and extra) into the temporary file of output, which the caller publishes. */
static cpparity_status write_into(const run_results *results, const output_file *output,
                                  results_file_extra extra, const void *context,
                                  cpparity_error *error) {
    hdf5_quiet();
    hid_t access = H5I_INVALID_HID, file = H5I_INVALID_HID;
    if ((access = hdf5_file_access(error)) < 0) {
        goto fail;
    }
    HDF5_CHECK(file = H5Fcreate(output->temporary, H5F_ACC_TRUNC, H5P_DEFAULT, access), error,
               "creating %s %s (as %s)", output->flag, output->destination, output->temporary);
    if (hdf5_attribute_string(file, "format", "cpparity-results", error) != CPPARITY_OK ||
        hdf5_attribute_int64(file, "format_version", RESULTS_FILE_FORMAT_VERSION, error) !=
            CPPARITY_OK ||
        write_provenance(file, &results->provenance, error) != CPPARITY_OK ||
        write_summary(file, results, error) != CPPARITY_OK ||
        write_cases(file, results, error) != CPPARITY_OK ||
        write_discrimination(file, results, error) != CPPARITY_OK ||
        (extra != NULL && extra(file, context, error) != CPPARITY_OK)) {
        goto fail;
    }
    /* HDF5 writes most of the file while closing it: a full disk shows here */
    if (hdf5_close_file(&file, error, "%s %s", output->flag, output->destination) != CPPARITY_OK) {
        goto fail;
    }
    return HDF5_CLOSE(access, CPPARITY_OK, error);
fail:
    hdf5_close(file); /* the first error is the one reported */
    hdf5_close(access);
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status results_file_write_staged(const run_results *results, const output_file *file,
                                          cpparity_error *error) {
    return write_into(results, file, NULL, NULL, error);
}

cpparity_status results_file_write(const run_results *results, const char *path,
                                   cpparity_error *error) {
    return results_file_write_extended(results, path, NULL, NULL, error);
}

cpparity_status results_file_write_extended(const run_results *results, const char *path,
                                            results_file_extra extra, const void *context,
                                            cpparity_error *error) {
    output_file output;
    cpparity_status status = output_file_begin(&output, path, "--out", error);
    if (status == CPPARITY_OK) {
        status = write_into(results, &output, extra, context, error);
    }
    if (status == CPPARITY_OK) {
        return output_file_commit(&output, error);
    }
    output_file_abandon(&output);
    return status;
}
