/* results_reader.c — a results file read back (see results_reader.h). */
#include "results_model/results_reader.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_util.h"
#include "results_model/results_file.h"

typedef struct reader {
    read_results *results;
    int64_t capacity;      /* items allocated */
    int64_t case_capacity; /* cases allocated */
    int64_t case_index;    /* the case being read */
    cpparity_error *error;
    const char *case_name; /* the case being read, for messages */
    const char *suite;
    char at[CPPARITY_PATH]; /* the HDF5 group being read: where hdf5_guard_at says it is */
} reader;

/* Records bad input: "PATH: what" (and HDF5's innermost message when it has one). */
static cpparity_status bad(const reader *r, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static cpparity_status bad(const reader *r, const char *format, ...) {
    char what[768];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(what, sizeof what, format, arguments);
    va_end(arguments);
    return cpparity_error_set(r->error, CPPARITY_ERROR_INPUT, "%s: %s", r->results->path, what);
}

/* Opens attribute name of object, or records why it is missing (a negative id then). */
static hid_t open_attribute(const reader *r, hid_t object, const char *where, const char *name) {
    hdf5_guard_at(where[0] == '/' ? where : r->at, name);
    const hid_t attribute =
        H5Aexists(object, name) > 0 ? H5Aopen(object, name, H5P_DEFAULT) : H5I_INVALID_HID;
    if (attribute < 0) {
        bad(r, "%s has no attribute '%s' (not a cpparity results file, or damaged)", where, name);
    }
    return attribute;
}

/* A fixed-length string attribute of object into text (truncated to size). */
static cpparity_status read_string(const reader *r, hid_t object, const char *where,
                                   const char *name, char *text, size_t size) {
    hid_t attribute = H5I_INVALID_HID, type = H5I_INVALID_HID, memory = H5I_INVALID_HID;
    char *buffer = NULL;
    cpparity_status status = CPPARITY_ERROR_INPUT;
    if ((attribute = open_attribute(r, object, where, name)) < 0) {
        goto done;
    }
    type = H5Aget_type(attribute);
    const size_t width = type >= 0 ? H5Tget_size(type) : 0;
    if (type < 0 || H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) != 0 ||
        width == 0 || width > (1u << 20)) {
        status = bad(r, "%s: attribute '%s' is not a fixed-length string", where, name);
        goto done;
    }
    buffer = calloc(width + 1, 1);
    memory = H5Tcopy(H5T_C_S1);
    /* width + 1: a null-padded string of exactly width bytes (h5py writes them) keeps its last
     * character when converted to a null-terminated one */
    if (buffer == NULL || memory < 0 || H5Tset_size(memory, width + 1) < 0 ||
        H5Aread(attribute, memory, buffer) < 0) {
        status = bad(r, "%s: cannot read attribute '%s'", where, name);
        goto done;
    }
    snprintf(text, size, "%s", buffer);
    status = CPPARITY_OK;
done:
    free(buffer);
    hdf5_close(memory);
    hdf5_close(type);
    hdf5_close(attribute);
    return status;
}

/* A scalar numeric attribute, converted to native (an int64_t or a double per native). */
static cpparity_status read_number(const reader *r, hid_t object, const char *where,
                                   const char *name, hid_t native, void *value) {
    hid_t attribute = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_INPUT;
    if ((attribute = open_attribute(r, object, where, name)) < 0) {
        goto done;
    }
    space = H5Aget_space(attribute);
    type = H5Aget_type(attribute);
    const H5T_class_t kind = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (space < 0 || H5Sget_simple_extent_npoints(space) != 1 ||
        (kind != H5T_INTEGER && kind != H5T_FLOAT) || H5Aread(attribute, native, value) < 0) {
        status = bad(r, "%s: attribute '%s' is not a readable number", where, name);
        goto done;
    }
    status = CPPARITY_OK;
done:
    hdf5_close(type);
    hdf5_close(space);
    hdf5_close(attribute);
    return status;
}

/* The 1-D compound table `name` of object (where, for messages): at most max_rows rows of
 * row_size bytes, of the type make_type builds, into *rows (owned by the caller, with one spare
 * zeroed row) and *count. */
static cpparity_status read_table(const reader *r, hid_t object, const char *where,
                                  const char *name, hsize_t max_rows, size_t row_size,
                                  hid_t (*make_type)(cpparity_error *), void **rows,
                                  int64_t *count) {
    hid_t dataset = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_INPUT;
    hsize_t length = 0;
    char at[CPPARITY_PATH + 64];
    snprintf(at, sizeof at, "%s/%s", strcmp(r->at, "/") == 0 ? "" : r->at, name);
    hdf5_guard_at(at, NULL);
    if (H5Lexists(object, name, H5P_DEFAULT) <= 0 ||
        (dataset = H5Dopen2(object, name, H5P_DEFAULT)) < 0) {
        status = bad(r, "%s has no %s table", where, name);
        goto done;
    }
    space = H5Dget_space(dataset);
    if (space < 0 || H5Sget_simple_extent_ndims(space) != 1 ||
        H5Sget_simple_extent_dims(space, &length, NULL) < 0 || length > max_rows) {
        status = bad(r, "%s/%s is not a table", where, name);
        goto done;
    }
    *rows = calloc((size_t)length + 1, row_size);
    cpparity_error type_error;
    if (*rows == NULL) {
        status = cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory");
        goto done;
    }
    if ((type = make_type(&type_error)) < 0) {
        status = cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "%s", type_error.message);
        goto done;
    }
    if (length > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0) {
        status = bad(r, "%s/%s cannot be read (damaged or truncated)", where, name);
        goto done;
    }
    *count = (int64_t)length;
    status = CPPARITY_OK;
done:
    hdf5_close(type);
    hdf5_close(space);
    hdf5_close(dataset);
    return status;
}

/* The metrics table of an item group. */
static cpparity_status read_metrics(const reader *r, hid_t group, const char *where,
                                    read_item *item) {
    void *rows = NULL;
    const cpparity_status status =
        /* at most 2^20 records: cp × (2 + parameters) is far less for any model; a damaged
         * extent must not make the reader allocate gigabytes before it finds out */
        read_table(r, group, where, "metrics", (hsize_t)1 << 20, sizeof(metrics_row),
                   results_metrics_type, &rows, &item->tensor_count);
    item->tensors = rows;
    return status;
}

/* /discrimination, when there is one. */
static cpparity_status read_discrimination(const reader *r, hid_t file) {
    read_results *results = r->results;
    hdf5_guard_at("/discrimination", NULL);
    if (H5Lexists(file, "discrimination", H5P_DEFAULT) <= 0) {
        return CPPARITY_OK;
    }
    void *rows = NULL;
    const cpparity_status status =
        read_table(r, file, "", "discrimination", (hsize_t)1 << 24, sizeof(discrimination_row),
                   results_discrimination_type, &rows, &results->discrimination_count);
    results->discrimination = rows;
    for (int64_t i = 0; status == CPPARITY_OK && i < results->discrimination_count; i++) {
        discrimination_row *row = &results->discrimination[i]; /* terminated whatever the file */
        row->case_name[sizeof row->case_name - 1] = '\0';
        row->feature[sizeof row->feature - 1] = '\0';
    }
    return status;
}

/* A whole dataset of at most max_elements (1-D or 2-D) read as `type` (elements of `size`
 * bytes), into *values (owned by the caller); *count elements. */
static cpparity_status read_whole_dataset(const reader *r, hid_t group, const char *where,
                                          const char *name, hid_t type, size_t size,
                                          int64_t max_elements, void **values, int64_t *count) {
    *values = NULL;
    *count = 0;
    hid_t dataset = H5I_INVALID_HID, space = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_INPUT;
    char at[CPPARITY_PATH + 64];
    snprintf(at, sizeof at, "%s/%s", r->at, name);
    hdf5_guard_at(at, NULL);
    if (H5Lexists(group, name, H5P_DEFAULT) <= 0 ||
        (dataset = H5Dopen2(group, name, H5P_DEFAULT)) < 0) {
        status = bad(r, "%s has no dataset '%s'", where, name);
        goto done;
    }
    space = H5Dget_space(dataset);
    const hssize_t elements = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (elements < 0 || elements > max_elements) {
        status = bad(r, "%s/%s: %lld elements, expected at most %lld", where, name,
                     (long long)elements, (long long)max_elements);
        goto done;
    }
    *values = malloc((size_t)elements * size + 1);
    if (*values == NULL) {
        status = cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory");
        goto done;
    }
    if (elements > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *values) < 0) {
        status = bad(r, "%s/%s cannot be read (damaged or truncated)", where, name);
        goto done;
    }
    *count = (int64_t)elements;
    status = CPPARITY_OK;
done:
    hdf5_close(space);
    hdf5_close(dataset);
    return status;
}

static cpparity_status read_int64_dataset(const reader *r, hid_t group, const char *where,
                                          const char *name, int64_t max_elements, int64_t **values,
                                          int64_t *count) {
    void *read = NULL;
    const cpparity_status status = read_whole_dataset(r, group, where, name, H5T_NATIVE_INT64,
                                                      sizeof **values, max_elements, &read, count);
    *values = read;
    return status;
}

static cpparity_status read_double_dataset(const reader *r, hid_t group, const char *where,
                                           const char *name, int64_t max_elements, double **values,
                                           int64_t *count) {
    void *read = NULL;
    const cpparity_status status = read_whole_dataset(r, group, where, name, H5T_NATIVE_DOUBLE,
                                                      sizeof **values, max_elements, &read, count);
    *values = read;
    return status;
}

/* positions@rank<r> beside a profile whose rows are not consecutive positions: one global
 * position per entry, each in [0, padded_seq_len). Files written before it existed lack it: the
 * profile then keeps positions NULL. */
static cpparity_status read_profile_positions(const reader *r, hid_t group, const char *where,
                                              const read_item *item, read_profile *profile) {
    char name[48];
    snprintf(name, sizeof name, "positions@rank%d", profile->rank);
    if (H5Lexists(group, name, H5P_DEFAULT) <= 0) {
        return CPPARITY_OK;
    }
    int64_t count = 0;
    cpparity_status status =
        read_int64_dataset(r, group, where, name, profile->length, &profile->positions, &count);
    if (status == CPPARITY_OK && count != profile->length) {
        status = bad(r, "%s: %s holds %lld positions for %lld entries", where, name,
                     (long long)count, (long long)profile->length);
    }
    const int64_t end = item->padded_seq_len > 0 ? item->padded_seq_len : INT64_MAX;
    for (int64_t k = 0; status == CPPARITY_OK && k < count; k++) {
        if (profile->positions[k] < 0 || profile->positions[k] >= end) {
            status = bad(r, "%s: %s[%lld] = %lld is outside [0, %lld)", where, name, (long long)k,
                         (long long)profile->positions[k], (long long)end);
        }
    }
    return status;
}

/* limits@rank<r> beside a profile: one limit per entry, each NaN or positive. Files written before
 * it existed lack it: the profile then keeps limit NULL. */
static cpparity_status read_profile_limits(const reader *r, hid_t group, const char *where,
                                           read_profile *profile) {
    char name[48];
    snprintf(name, sizeof name, "limits@rank%d", profile->rank);
    if (H5Lexists(group, name, H5P_DEFAULT) <= 0) {
        return CPPARITY_OK;
    }
    int64_t count = 0;
    cpparity_status status =
        read_double_dataset(r, group, where, name, profile->length, &profile->limit, &count);
    if (status == CPPARITY_OK && count != profile->length) {
        status = bad(r, "%s: %s holds %lld limits for %lld entries", where, name, (long long)count,
                     (long long)profile->length);
    }
    for (int64_t k = 0; status == CPPARITY_OK && k < count; k++) {
        if (!isnan(profile->limit[k]) && !(profile->limit[k] > 0.0)) {
            status = bad(r, "%s: %s[%lld] = %g is not a limit", where, name, (long long)k,
                         profile->limit[k]);
        }
    }
    return status;
}

/* One dataset of an item's profiles group. */
static herr_t read_profile_dataset(hid_t group, const char *name, const H5L_info_t *info,
                                   void *data) {
    (void)info;
    reader *r = data;
    read_item *item = &r->results->items[r->results->item_count - 1];
    if (strncmp(name, "logits@rank", strlen("logits@rank")) != 0) {
        return 0;
    }
    char where[CPPARITY_CASE_NAME + 96], at[CPPARITY_PATH + 64];
    snprintf(where, sizeof where, "case '%s' %s cp_%lld profiles/%s", item->case_name, item->dtype,
             (long long)item->cp, name);
    snprintf(at, sizeof at, "%s/profiles/%s", r->at, name);
    hdf5_guard_at(at, NULL);
    char item_at[CPPARITY_PATH]; /* r->at is the profile's while its attributes are read */
    snprintf(item_at, sizeof item_at, "%s", r->at);
    snprintf(r->at, sizeof r->at, "%.*s", (int)sizeof r->at - 1, at);
    hid_t dataset = H5Dopen2(group, name, H5P_DEFAULT), space = H5I_INVALID_HID;
    cpparity_status status = dataset < 0 ? bad(r, "cannot open %s", where) : CPPARITY_OK;
    hsize_t length = 0;
    if (status == CPPARITY_OK) {
        space = H5Dget_space(dataset);
        if (space < 0 || H5Sget_simple_extent_ndims(space) != 1 ||
            H5Sget_simple_extent_dims(space, &length, NULL) < 0 || length > ((hsize_t)1 << 32)) {
            status = bad(r, "%s is not a profile", where);
        }
    }
    read_profile *profile = NULL;
    if (status == CPPARITY_OK) {
        read_profile *larger =
            realloc(item->profiles, (size_t)(item->profile_count + 1) * sizeof *larger);
        if (larger == NULL) {
            status = cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory");
        } else {
            item->profiles = larger;
            profile = &item->profiles[item->profile_count++];
            memset(profile, 0, sizeof *profile);
            profile->error = malloc((size_t)length * sizeof *profile->error + 1);
            status = profile->error == NULL
                         ? cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory")
                         : CPPARITY_OK;
        }
    }
    int64_t rank = 0;
    if (status == CPPARITY_OK &&
        (read_number(r, dataset, where, "rank", H5T_NATIVE_INT64, &rank) != CPPARITY_OK ||
         read_number(r, dataset, where, "position_offset", H5T_NATIVE_INT64,
                     &profile->position_offset) != CPPARITY_OK)) {
        status = CPPARITY_ERROR_INPUT;
    }
    hdf5_guard_at(at, NULL);
    if (status == CPPARITY_OK && length > 0 &&
        H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, profile->error) < 0) {
        status = bad(r, "%s cannot be read (damaged or truncated)", where);
    }
    if (status == CPPARITY_OK) {
        profile->rank = (int)rank;
        profile->length = (int64_t)length;
    }
    snprintf(r->at, sizeof r->at, "%s", item_at);
    if (status == CPPARITY_OK && profile->position_offset < 0 && length > 0) {
        char profiles_at[CPPARITY_PATH + 16];
        snprintf(profiles_at, sizeof profiles_at, "%s/profiles", item_at);
        snprintf(r->at, sizeof r->at, "%.*s", (int)sizeof r->at - 1, profiles_at);
        status = read_profile_positions(r, group, where, item, profile);
        snprintf(r->at, sizeof r->at, "%s", item_at);
    }
    if (status == CPPARITY_OK) {
        char profiles_at[CPPARITY_PATH + 16];
        snprintf(profiles_at, sizeof profiles_at, "%s/profiles", item_at);
        snprintf(r->at, sizeof r->at, "%.*s", (int)sizeof r->at - 1, profiles_at);
        status = read_profile_limits(r, group, where, profile);
        snprintf(r->at, sizeof r->at, "%s", item_at);
    }
    hdf5_close(space);
    hdf5_close(dataset);
    return status == CPPARITY_OK ? 0 : -1;
}

static int compare_profiles(const void *a, const void *b) {
    const int x = ((const read_profile *)a)->rank, y = ((const read_profile *)b)->rank;
    return (x > y) - (x < y);
}

/* One cp_<n> group of a dtype group: one item. */
static herr_t read_item_group(hid_t dtype_group, const char *name, const H5L_info_t *info,
                              void *data) {
    (void)info;
    reader *r = data;
    read_results *results = r->results;
    if (strncmp(name, "cp_", 3) != 0) {
        return 0;
    }
    if (results->item_count == r->capacity) {
        const int64_t grown = r->capacity == 0 ? 64 : 2 * r->capacity;
        read_item *larger = realloc(results->items, (size_t)grown * sizeof *larger);
        if (larger == NULL) {
            cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory");
            return -1;
        }
        results->items = larger;
        r->capacity = grown;
    }
    read_item *item = &results->items[results->item_count];
    memset(item, 0, sizeof *item);
    snprintf(item->case_name, sizeof item->case_name, "%s", r->case_name);
    snprintf(item->suite, sizeof item->suite, "%s", r->suite);
    char where[CPPARITY_CASE_NAME + 64], dtype_at[CPPARITY_PATH];
    snprintf(where, sizeof where, "case '%s' %s", r->case_name, name);
    snprintf(dtype_at, sizeof dtype_at, "%s", r->at);
    snprintf(r->at + strlen(r->at), sizeof r->at - strlen(r->at), "/%s", name);
    hdf5_guard_at(r->at, NULL);
    const hid_t group = H5Gopen2(dtype_group, name, H5P_DEFAULT);
    cpparity_status status = group < 0 ? bad(r, "cannot open %s", where) : CPPARITY_OK;
    if (status == CPPARITY_OK) {
        if (read_string(r, group, where, "outcome", item->outcome, sizeof item->outcome) !=
                CPPARITY_OK ||
            read_string(r, group, where, "message", item->message, sizeof item->message) !=
                CPPARITY_OK ||
            read_string(r, group, where, "dtype", item->dtype, sizeof item->dtype) != CPPARITY_OK ||
            read_number(r, group, where, "cp", H5T_NATIVE_INT64, &item->cp) != CPPARITY_OK ||
            read_number(r, group, where, "worst_ratio", H5T_NATIVE_DOUBLE, &item->worst_ratio) !=
                CPPARITY_OK ||
            read_string(r, group, where, "worst_tensor", item->worst_tensor,
                        sizeof item->worst_tensor) != CPPARITY_OK) {
            status = CPPARITY_ERROR_INPUT;
        } else {
            results->item_count++; /* owned from here: freed with the results */
            item->case_index = r->case_index;
            status = read_metrics(r, group, where, item);
        }
        /* written since profiles exist; absent from older files of the same format */
        if (status == CPPARITY_OK && H5Aexists(group, "by_choice") > 0) {
            int64_t by_choice = 0;
            status = read_number(r, group, where, "by_choice", H5T_NATIVE_INT64, &by_choice);
            item->by_choice = by_choice != 0;
        }
        if (status == CPPARITY_OK && H5Aexists(group, "padded_seq_len") > 0) {
            status = read_number(r, group, where, "padded_seq_len", H5T_NATIVE_INT64,
                                 &item->padded_seq_len);
        }
        /* written since `cpparity judge`; absent from older files of the same format */
        if (status == CPPARITY_OK && H5Aexists(group, "token_layout") > 0) {
            status = read_string(r, group, where, "token_layout", item->token_layout,
                                 sizeof item->token_layout);
        }
        /* written since ring attention; absent from older files of the same format */
        if (status == CPPARITY_OK && H5Aexists(group, "algorithm") > 0) {
            status =
                read_string(r, group, where, "algorithm", item->algorithm, sizeof item->algorithm);
        }
        hdf5_guard_at(r->at, "profiles");
        if (status == CPPARITY_OK && H5Lexists(group, "profiles", H5P_DEFAULT) > 0) {
            const hid_t profiles = H5Gopen2(group, "profiles", H5P_DEFAULT);
            if (profiles < 0 || H5Literate(profiles, H5_INDEX_NAME, H5_ITER_INC, NULL,
                                           read_profile_dataset, r) < 0) {
                status = r->error->status != CPPARITY_OK
                             ? r->error->status
                             : bad(r, "%s: cannot read its profiles", where);
            }
            hdf5_close(profiles);
            if (item->profile_count > 1) { /* a group with no profile leaves profiles NULL */
                qsort(item->profiles, (size_t)item->profile_count, sizeof *item->profiles,
                      compare_profiles);
            }
        }
    }
    hdf5_close(group);
    snprintf(r->at, sizeof r->at, "%s", dtype_at);
    return status == CPPARITY_OK ? 0 : -1;
}

/* Iterates a group's links in creation order (the run's order), by name where the file does not
 * track it. */
static herr_t iterate_in_order(hid_t group, H5L_iterate_t visit, void *data) {
    hid_t properties = H5Gget_create_plist(group);
    unsigned flags = 0;
    const bool tracked = properties >= 0 && H5Pget_link_creation_order(properties, &flags) >= 0 &&
                         (flags & H5P_CRT_ORDER_INDEXED) != 0;
    hdf5_close(properties);
    return H5Literate(group, tracked ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME, H5_ITER_INC, NULL, visit,
                      data);
}

/* A case's layout (seq_len, batch_size, rows, document lengths) into results->cases. */
static cpparity_status read_case_layout(reader *r, hid_t group, const char *where,
                                        const char *case_name) {
    read_results *results = r->results;
    if (results->case_count == r->case_capacity) {
        const int64_t grown = r->case_capacity == 0 ? 32 : 2 * r->case_capacity;
        read_case *larger = realloc(results->cases, (size_t)grown * sizeof *larger);
        if (larger == NULL) {
            return cpparity_error_set(r->error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
        results->cases = larger;
        r->case_capacity = grown;
    }
    read_case *layout = &results->cases[results->case_count++];
    memset(layout, 0, sizeof *layout);
    snprintf(layout->name, sizeof layout->name, "%s", case_name);
    r->case_index = results->case_count - 1;
    int64_t rows = 0;
    cpparity_status status =
        read_number(r, group, where, "seq_len", H5T_NATIVE_INT64, &layout->seq_len);
    if (status == CPPARITY_OK) {
        status = read_number(r, group, where, "batch_size", H5T_NATIVE_INT64, &layout->batch_size);
    }
    if (status == CPPARITY_OK && (layout->batch_size < 1 || layout->batch_size > (1 << 24))) {
        status = bad(r, "%s: batch_size %lld", where, (long long)layout->batch_size);
    }
    if (status == CPPARITY_OK) {
        status = read_int64_dataset(r, group, where, "rows", 3 * layout->batch_size, &layout->rows,
                                    &rows);
    }
    if (status == CPPARITY_OK && rows != 3 * layout->batch_size) {
        status = bad(r, "%s/rows: %lld values for %lld rows", where, (long long)rows,
                     (long long)layout->batch_size);
    }
    if (status == CPPARITY_OK) {
        status = read_int64_dataset(r, group, where, "document_lengths", (int64_t)1 << 32,
                                    &layout->document_lengths, &layout->document_count);
    }
    return status;
}

/* One /cases/<case> group: its items, dtype by dtype. */
static herr_t read_case_group(hid_t cases, const char *name, const H5L_info_t *info, void *data) {
    (void)info;
    reader *r = data;
    char where[CPPARITY_CASE_NAME + 32], case_name[CPPARITY_CASE_NAME] = "",
                                         suite[CPPARITY_PATH] = "";
    snprintf(where, sizeof where, "/cases/%s", name);
    snprintf(r->at, sizeof r->at, "/cases/%s", name);
    hdf5_guard_at(r->at, NULL);
    const hid_t group = H5Gopen2(cases, name, H5P_DEFAULT);
    if (group < 0) {
        bad(r, "cannot open %s", where);
        return -1;
    }
    herr_t result = 0;
    if (read_string(r, group, where, "name", case_name, sizeof case_name) != CPPARITY_OK ||
        read_string(r, group, where, "suite", suite, sizeof suite) != CPPARITY_OK) {
        result = -1;
    }
    r->case_name = case_name;
    r->suite = suite;
    if (result >= 0 && read_case_layout(r, group, where, case_name) != CPPARITY_OK) {
        result = -1;
    }
    for (int d = 0; d < CPPARITY_DTYPE_COUNT && result >= 0; d++) {
        const char *dtype = cpparity_dtype_names[d];
        snprintf(r->at, sizeof r->at, "/cases/%s/%s", name, dtype);
        hdf5_guard_at(r->at, NULL);
        if (H5Lexists(group, dtype, H5P_DEFAULT) <= 0) {
            continue;
        }
        const hid_t dtype_group = H5Gopen2(group, dtype, H5P_DEFAULT);
        if (dtype_group < 0) {
            bad(r, "cannot open %s/%s", where, dtype);
            result = -1;
            break;
        }
        result = iterate_in_order(dtype_group, read_item_group, r);
        hdf5_close(dtype_group);
    }
    hdf5_close(group);
    return result;
}

/* /provenance: strings, ranks and the seed. */
static cpparity_status read_provenance(const reader *r, hid_t file) {
    run_provenance *p = &r->results->provenance;
    hdf5_guard_at("/provenance", NULL);
    const hid_t group = H5Lexists(file, "provenance", H5P_DEFAULT) > 0
                            ? H5Gopen2(file, "provenance", H5P_DEFAULT)
                            : H5I_INVALID_HID;
    if (group < 0) {
        return bad(r, "no /provenance group (not a cpparity results file, or damaged)");
    }
    const struct {
        const char *name;
        char *text;
        size_t size;
    } strings[] = {
        {"version", p->version, sizeof p->version},
        {"git_commit", p->git_commit, sizeof p->git_commit},
        {"compiler", p->compiler, sizeof p->compiler},
        {"libraries", p->libraries, sizeof p->libraries},
        {"host", p->host, sizeof p->host},
        {"command_line", p->command_line, sizeof p->command_line},
        {"comm", p->comm, sizeof p->comm},
        {"device", p->device, sizeof p->device},
        {"implementation", p->implementation, sizeof p->implementation},
        {"kernel", p->kernel, sizeof p->kernel},
        {"fault", p->fault, sizeof p->fault},
        {"store", p->store, sizeof p->store},
        {"start_time", p->start_time, sizeof p->start_time},
        {"end_time", p->end_time, sizeof p->end_time},
    };
    cpparity_status status = CPPARITY_OK;
    for (size_t s = 0; s < sizeof strings / sizeof *strings && status == CPPARITY_OK; s++) {
        status =
            read_string(r, group, "/provenance", strings[s].name, strings[s].text, strings[s].size);
    }
    int64_t ranks = 0;
    if (status == CPPARITY_OK) {
        status = read_number(r, group, "/provenance", "ranks", H5T_NATIVE_INT64, &ranks);
        p->ranks = (int)ranks;
    }
    hdf5_close(group);
    return status;
}

/* Everything of an open file into r's results; closes file. */
static cpparity_status read_open_file(reader *r, hid_t file) {
    read_results *results = r->results;
    cpparity_error *error = r->error;
    char format[64] = "";
    cpparity_status status = read_string(r, file, "/", "format", format, sizeof format);
    if (status == CPPARITY_OK && strcmp(format, "cpparity-results") != 0) {
        status = bad(r, "not a cpparity results file (/format is '%s', not 'cpparity-results'%s)",
                     format, strcmp(format, "cpparity-export") == 0 ? "; it is an export" : "");
    }
    if (status == CPPARITY_OK) {
        status =
            read_number(r, file, "/", "format_version", H5T_NATIVE_INT64, &results->format_version);
    }
    if (status == CPPARITY_OK && results->format_version != RESULTS_FILE_FORMAT_VERSION) {
        status = bad(r, "results format version %lld; this cpparity reads version %d only (%s)",
                     (long long)results->format_version, RESULTS_FILE_FORMAT_VERSION,
                     results->format_version > RESULTS_FILE_FORMAT_VERSION
                         ? "written by a newer cpparity: read it with that one"
                         : "written by an older cpparity, whose errors meant something else");
    }
    if (status == CPPARITY_OK) {
        status = read_provenance(r, file);
    }
    if (status == CPPARITY_OK) {
        status = read_discrimination(r, file);
    }
    if (status == CPPARITY_OK) {
        hdf5_guard_at("/cases", NULL);
        const hid_t cases = H5Lexists(file, "cases", H5P_DEFAULT) > 0
                                ? H5Gopen2(file, "cases", H5P_DEFAULT)
                                : H5I_INVALID_HID;
        if (cases < 0) {
            status = bad(r, "no /cases group (damaged)");
        } else {
            if (iterate_in_order(cases, read_case_group, r) < 0) {
                status = error->status != CPPARITY_OK ? error->status
                                                      : bad(r, "cannot list /cases (damaged)");
            }
            hdf5_close(cases);
        }
    }
    hdf5_close(file);
    if (status != CPPARITY_OK) { /* nothing half-read: the caller sees no item of a bad file */
        char path[sizeof results->path];
        snprintf(path, sizeof path, "%s", results->path);
        read_results_free(results);
        snprintf(results->path, sizeof results->path, "%s", path);
    }
    return status;
}

/* results_file_read in this process, unguarded. */
static cpparity_status read_path(const char *path, read_results *results, cpparity_error *error) {
    memset(results, 0, sizeof *results);
    cpparity_error_clear(error);
    snprintf(results->path, sizeof results->path, "%s", path);
    reader r = {results, 0, 0, 0, error, "", "", "/"};
    struct stat file_status;
    if (stat(path, &file_status) != 0) {
        return bad(&r, "cannot read: %s", strerror(errno));
    }
    hdf5_quiet();
    if (!S_ISREG(file_status.st_mode) || H5Fis_hdf5(path) <= 0) {
        return bad(&r, "not an HDF5 file, or a truncated one (a cpparity results file is HDF5)");
    }
    const hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        return bad(&r, "cannot be opened as HDF5 (truncated or damaged)");
    }
    return read_open_file(&r, file);
}

/* The whole read, in the guard's child (hdf5_guard.h): context is the path. */
static cpparity_status read_in_child(void *context, cpparity_error *error) {
    read_results results;
    const cpparity_status status = read_path(context, &results, error);
    read_results_free(&results);
    return status;
}

cpparity_status results_file_read(const char *path, read_results *results, cpparity_error *error) {
    memset(results, 0, sizeof *results);
    snprintf(results->path, sizeof results->path, "%s", path);
    const cpparity_status status =
        hdf5_guard_read_path(path, read_in_child, (void *)(uintptr_t)path, error);
    return status == CPPARITY_OK ? read_path(path, results, error) : status;
}

cpparity_status results_file_read_image(const void *image, size_t size, const char *name,
                                        read_results *results, cpparity_error *error) {
    memset(results, 0, sizeof *results);
    cpparity_error_clear(error);
    snprintf(results->path, sizeof results->path, "%s", name);
    reader r = {results, 0, 0, 0, error, "", "", "/"};
    hid_t file = H5I_INVALID_HID;
    const cpparity_status status = hdf5_open_image(image, size, name, &file, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    return read_open_file(&r, file);
}

void read_results_free(read_results *results) {
    for (int64_t i = 0; i < results->item_count; i++) {
        free(results->items[i].tensors);
        for (int64_t p = 0; p < results->items[i].profile_count; p++) {
            free(results->items[i].profiles[p].error);
            free(results->items[i].profiles[p].positions);
            free(results->items[i].profiles[p].limit);
        }
        free(results->items[i].profiles);
    }
    free(results->items);
    for (int64_t c = 0; c < results->case_count; c++) {
        free(results->cases[c].rows);
        free(results->cases[c].document_lengths);
    }
    free(results->cases);
    free(results->discrimination);
    memset(results, 0, sizeof *results);
}
