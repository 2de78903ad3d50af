/* hdf5_input.c — see hdf5_input.h. */
#include "results_model/hdf5_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results_model/hdf5_guard.h"
#include "results_model/hdf5_util.h"

/* "object/name", without a doubled slash for the root. */
static void join(char *path, size_t size, const char *object, const char *name) {
    const size_t length = strlen(object);
    snprintf(path, size, "%s%s%s", object, length > 0 && object[length - 1] == '/' ? "" : "/",
             name);
}

cpparity_status hdf5_input_open(hdf5_input *input, const char *path, cpparity_error *error) {
    input->file = H5I_INVALID_HID;
    input->path = path;
    if (access(path, R_OK) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: cannot read: %s", path,
                                  strerror(errno));
    }
    hdf5_quiet();
    if (H5Fis_hdf5(path) <= 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: not an HDF5 file", path);
    }
    input->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (input->file < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: cannot open it as HDF5 (damaged or truncated)", path);
    }
    return CPPARITY_OK;
}

cpparity_status hdf5_input_open_image(hdf5_input *input, const void *image, size_t size,
                                      const char *name, cpparity_error *error) {
    input->path = name;
    return hdf5_open_image(image, size, name, &input->file, error);
}

void hdf5_input_close(hdf5_input *input) {
    hdf5_close(input->file);
    input->file = H5I_INVALID_HID;
}

/* Whether every prefix of path ("/a", "/a/b") is a link: H5Lexists needs its parents to. */
static bool path_exists(const hdf5_input *input, const char *path) {
    char prefix[1024];
    if (strcmp(path, "/") == 0) {
        return true;
    }
    if (strlen(path) >= sizeof prefix) {
        return false;
    }
    for (const char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
        const size_t length = slash != NULL ? (size_t)(slash - path) : strlen(path);
        memcpy(prefix, path, length);
        prefix[length] = '\0';
        if (H5Lexists(input->file, prefix, H5P_DEFAULT) <= 0) {
            return false;
        }
        if (slash == NULL) {
            return true;
        }
    }
}

bool hdf5_input_exists(const hdf5_input *input, const char *object, const char *name) {
    char path[1024];
    join(path, sizeof path, object, name);
    hdf5_guard_at(path, NULL);
    return path_exists(input, object) && path_exists(input, path);
}

bool hdf5_input_has_attribute(const hdf5_input *input, const char *object, const char *name) {
    hdf5_guard_at(object, name);
    return path_exists(input, object) &&
           H5Aexists_by_name(input->file, object, name, H5P_DEFAULT) > 0;
}

/* Opens attribute name of object, or records why not. */
static hid_t open_attribute(const hdf5_input *input, const char *object, const char *name,
                            cpparity_error *error) {
    hdf5_guard_at(object, name);
    if (!path_exists(input, object) ||
        H5Aexists_by_name(input->file, object, name, H5P_DEFAULT) <= 0) {
        cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: no attribute '%s'", input->path,
                           object, name);
        return H5I_INVALID_HID;
    }
    const hid_t attribute = H5Aopen_by_name(input->file, object, name, H5P_DEFAULT, H5P_DEFAULT);
    if (attribute < 0) {
        cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: attribute '%s' cannot be read",
                           input->path, object, name);
    }
    return attribute;
}

/* Whether attribute holds exactly one value. */
static bool is_scalar(hid_t attribute) {
    const hid_t space = H5Aget_space(attribute);
    const bool scalar = space >= 0 && H5Sget_simple_extent_npoints(space) == 1;
    hdf5_close(space);
    return scalar;
}

cpparity_status hdf5_input_string(const hdf5_input *input, const char *object, const char *name,
                                  char *text, size_t size, cpparity_error *error) {
    const hid_t attribute = open_attribute(input, object, name, error);
    hid_t type = H5I_INVALID_HID, memory = H5I_INVALID_HID;
    char *buffer = NULL, *variable = NULL;
    cpparity_status status = CPPARITY_ERROR_INPUT;
    if (attribute < 0) {
        return CPPARITY_ERROR_INPUT;
    }
    type = H5Aget_type(attribute);
    if (type < 0 || H5Tget_class(type) != H5T_STRING || !is_scalar(attribute)) {
        cpparity_error_set(error, status, "%s: %s: attribute '%s' is not a string", input->path,
                           object, name);
        goto done;
    }
    memory = H5Tcopy(H5T_C_S1);
    const htri_t is_variable = H5Tis_variable_str(type);
    const H5T_cset_t cset = H5Tget_cset(type); /* h5py writes UTF-8: read it as such */
    if (memory >= 0 && cset != H5T_CSET_ERROR) {
        H5Tset_cset(memory, cset);
    }
    const size_t width = H5Tget_size(type);
    if (memory < 0 || is_variable < 0) {
        cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: %s: reading attribute '%s'",
                           input->path, object, name);
        goto done;
    }
    const char *read = NULL;
    if (is_variable > 0) {
        if (H5Tset_size(memory, H5T_VARIABLE) < 0 || H5Aread(attribute, memory, &variable) < 0) {
            cpparity_error_set(error, status, "%s: %s: attribute '%s' cannot be read", input->path,
                               object, name);
            goto done;
        }
        read = variable != NULL ? variable : "";
    } else {
        buffer = calloc(width + 1, 1);
        /* width + 1: a null-padded string of exactly width bytes (numpy's bytes_ in h5py) keeps
         * its last character when converted to a null-terminated one */
        if (buffer == NULL || H5Tset_size(memory, width + 1) < 0 ||
            H5Aread(attribute, memory, buffer) < 0) {
            cpparity_error_set(error, status, "%s: %s: attribute '%s' cannot be read", input->path,
                               object, name);
            goto done;
        }
        read = buffer;
    }
    if (strlen(read) >= size) {
        cpparity_error_set(error, status, "%s: %s: attribute '%s' is longer than %zu bytes",
                           input->path, object, name, size - 1);
        goto done;
    }
    memcpy(text, read, strlen(read) + 1);
    status = CPPARITY_OK;
done:
    if (variable != NULL) {
        H5free_memory(variable);
    }
    free(buffer);
    hdf5_close(memory);
    hdf5_close(type);
    hdf5_close(attribute);
    return status;
}

cpparity_status hdf5_input_int64(const hdf5_input *input, const char *object, const char *name,
                                 int64_t *value, cpparity_error *error) {
    const hid_t attribute = open_attribute(input, object, name, error);
    if (attribute < 0) {
        return CPPARITY_ERROR_INPUT;
    }
    const hid_t type = H5Aget_type(attribute);
    cpparity_status status = CPPARITY_OK;
    if (type < 0 || H5Tget_class(type) != H5T_INTEGER || !is_scalar(attribute) ||
        H5Aread(attribute, H5T_NATIVE_INT64, value) < 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: %s: attribute '%s' is not an integer", input->path, object,
                                    name);
    }
    hdf5_close(type);
    hdf5_close(attribute);
    return status;
}

/* Opens dataset path of class kind, or records why not. */
static hid_t open_dataset(const hdf5_input *input, const char *path, H5T_class_t kind,
                          cpparity_error *error) {
    hdf5_guard_at(path, NULL);
    if (!path_exists(input, path)) {
        cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: missing", input->path, path);
        return H5I_INVALID_HID;
    }
    H5O_info_t info;
    const hid_t dataset = H5Oget_info_by_name(input->file, path, &info, H5P_DEFAULT) >= 0 &&
                                  info.type == H5O_TYPE_DATASET
                              ? H5Dopen2(input->file, path, H5P_DEFAULT)
                              : H5I_INVALID_HID;
    const hid_t type = dataset >= 0 ? H5Dget_type(dataset) : H5I_INVALID_HID;
    const bool right = type >= 0 && H5Tget_class(type) == kind;
    hdf5_close(type);
    if (!right) {
        hdf5_close(dataset);
        cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: not a dataset of %s", input->path,
                           path, kind == H5T_FLOAT ? "floating-point numbers" : "integers");
        return H5I_INVALID_HID;
    }
    return dataset;
}

cpparity_status hdf5_input_shape(const hdf5_input *input, const char *path, H5T_class_t kind,
                                 int *rank, int64_t dims[HDF5_INPUT_MAX_RANK],
                                 cpparity_error *error) {
    const hid_t dataset = open_dataset(input, path, kind, error);
    if (dataset < 0) {
        return CPPARITY_ERROR_INPUT;
    }
    const hid_t space = H5Dget_space(dataset);
    const int found = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t extent[HDF5_INPUT_MAX_RANK] = {0};
    cpparity_status status = CPPARITY_OK;
    if (found < 0 || found > HDF5_INPUT_MAX_RANK ||
        H5Sget_simple_extent_dims(space, extent, NULL) < 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: %s: not a dataset of at most %d dimensions", input->path,
                                    path, HDF5_INPUT_MAX_RANK);
    } else {
        *rank = found;
        for (int d = 0; d < found; d++) {
            dims[d] = (int64_t)extent[d];
        }
    }
    hdf5_close(space);
    hdf5_close(dataset);
    return status;
}

/* "[2, 3, 5]" (or "a scalar") into text. */
static void format_shape(char *text, size_t size, int rank, const int64_t *dims) {
    if (rank == 0) {
        snprintf(text, size, "a scalar");
        return;
    }
    size_t used = (size_t)snprintf(text, size, "[");
    for (int d = 0; d < rank && used < size; d++) {
        used += (size_t)snprintf(text + used, size - used, "%s%lld", d > 0 ? ", " : "",
                                 (long long)dims[d]);
    }
    if (used < size) {
        snprintf(text + used, size - used, "]");
    }
}

/* Checks path's shape against rank and dims (CPPARITY_ERROR_INPUT naming both); *elements = its
 * elements. */
static cpparity_status check_shape(const hdf5_input *input, const char *path, H5T_class_t kind,
                                   int rank, const int64_t *dims, int64_t *elements,
                                   cpparity_error *error) {
    int found_rank = 0;
    int64_t found[HDF5_INPUT_MAX_RANK] = {0};
    cpparity_status status = hdf5_input_shape(input, path, kind, &found_rank, found, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    bool same = found_rank == rank;
    int64_t count = 1;
    for (int d = 0; same && d < rank; d++) {
        same = found[d] == dims[d];
        count *= dims[d];
    }
    if (!same) {
        char expected[128], actual[128];
        format_shape(expected, sizeof expected, rank, dims);
        format_shape(actual, sizeof actual, found_rank, found);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: shape %s, expected %s",
                                  input->path, path, actual, expected);
    }
    *elements = count;
    return CPPARITY_OK;
}

cpparity_status hdf5_input_read(const hdf5_input *input, const char *path, H5T_class_t kind,
                                int rank, const int64_t *dims, hid_t native, void *values,
                                cpparity_error *error) {
    int64_t count = 0;
    cpparity_status status = check_shape(input, path, kind, rank, dims, &count, error);
    if (status != CPPARITY_OK || count == 0) {
        return status;
    }
    const hid_t dataset = open_dataset(input, path, kind, error);
    if (dataset < 0) {
        return CPPARITY_ERROR_INPUT;
    }
    status = CPPARITY_OK;
    if (H5Dread(dataset, native, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
        status = cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "%s: %s: cannot be read (damaged, truncated or not convertible)", input->path, path);
    }
    hdf5_close(dataset);
    return status;
}

cpparity_status hdf5_input_read_part(const hdf5_input *input, const char *path, H5T_class_t kind,
                                     int rank, const int64_t *dims, const int64_t *start,
                                     const int64_t *count, hid_t native, void *values,
                                     cpparity_error *error) {
    int64_t elements = 0;
    cpparity_status status = check_shape(input, path, kind, rank, dims, &elements, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    hsize_t offsets[HDF5_INPUT_MAX_RANK], counts[HDF5_INPUT_MAX_RANK];
    int64_t part = 1;
    for (int d = 0; d < rank; d++) {
        if (start[d] < 0 || count[d] < 0 || start[d] > dims[d] || count[d] > dims[d] - start[d]) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "%s: %s: part [%lld, +%lld) of dimension %d is outside %lld",
                                      input->path, path, (long long)start[d], (long long)count[d],
                                      d, (long long)dims[d]);
        }
        offsets[d] = (hsize_t)start[d];
        counts[d] = (hsize_t)count[d];
        part *= count[d];
    }
    if (part == 0) {
        return CPPARITY_OK;
    }
    const hid_t dataset = open_dataset(input, path, kind, error);
    if (dataset < 0) {
        return CPPARITY_ERROR_INPUT;
    }
    hid_t file_space = H5Dget_space(dataset);
    hid_t memory_space = H5Screate_simple(rank, counts, NULL);
    if (file_space < 0 || memory_space < 0 ||
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, offsets, NULL, counts, NULL) < 0 ||
        H5Dread(dataset, native, memory_space, file_space, H5P_DEFAULT, values) < 0) {
        status = cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "%s: %s: cannot be read (damaged, truncated or not convertible)", input->path, path);
    }
    hdf5_close(memory_space);
    hdf5_close(file_space);
    hdf5_close(dataset);
    return status;
}

/* The names H5Literate visits, collected. */
typedef struct name_list {
    char *names;
    int64_t count, capacity;
    size_t size;
    bool too_long, no_memory;
} name_list;

static herr_t collect_name(hid_t group, const char *name, const H5L_info_t *info, void *data) {
    (void)group;
    (void)info;
    name_list *list = data;
    if (strlen(name) >= list->size) {
        list->too_long = true;
        return 1;
    }
    if (list->count == list->capacity) {
        const int64_t grown = list->capacity == 0 ? 16 : list->capacity * 2;
        char *larger = realloc(list->names, (size_t)grown * list->size);
        if (larger == NULL) {
            list->no_memory = true;
            return 1;
        }
        list->names = larger;
        list->capacity = grown;
    }
    snprintf(list->names + (size_t)list->count * list->size, list->size, "%s", name);
    list->count++;
    return 0;
}

cpparity_status hdf5_input_names(const hdf5_input *input, const char *path, size_t size,
                                 char **names, int64_t *count, cpparity_error *error) {
    *names = NULL;
    *count = 0;
    hdf5_guard_at(path, NULL);
    if (!path_exists(input, path)) {
        return CPPARITY_OK;
    }
    const hid_t group = H5Gopen2(input->file, path, H5P_DEFAULT);
    if (group < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: not a group", input->path,
                                  path);
    }
    name_list list = {NULL, 0, 0, size, false, false};
    hsize_t index = 0;
    const herr_t walked =
        H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &list);
    hdf5_close(group);
    cpparity_status status = CPPARITY_OK;
    if (list.no_memory) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    } else if (list.too_long) {
        status =
            cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: a name longer than %zu bytes",
                               input->path, path, size - 1);
    } else if (walked < 0) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: %s: cannot be listed",
                                    input->path, path);
    }
    if (status != CPPARITY_OK) {
        free(list.names);
        return status;
    }
    *names = list.names;
    *count = list.count;
    return CPPARITY_OK;
}
