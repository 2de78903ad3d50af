/* hdf5_util.c — checked HDF5 calls and small writers (see hdf5_util.h). */
#include "results_model/hdf5_util.h"

#include "common/names.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Set when a file failed to close: HDF5 must then not shut down (hdf5_library_end). */
static atomic_bool file_close_failed;

/* What hdf5_fail keeps of HDF5's error stack. */
typedef struct hdf5_failure {
    char message[256];        /* the innermost description */
    int system_error;         /* the errno a file driver reported ("errno = 28"), 0 when none */
    char system_function[64]; /* the HDF5 function that reported it */
} hdf5_failure;

/* Keeps the innermost (first walked upward) description of HDF5's error stack, and the errno
 * of any entry that names one (the sec2 driver's "errno = 28, error message = ..."). */
static herr_t remember_message(unsigned n, const H5E_error2_t *entry, void *client) {
    (void)n;
    hdf5_failure *failure = client;
    if (entry->desc == NULL) {
        return 0;
    }
    if (failure->message[0] == '\0') {
        snprintf(failure->message, sizeof failure->message, "%s (in %s)", entry->desc,
                 entry->func_name);
    }
    const char *system_error = strstr(entry->desc, "errno = ");
    if (system_error != NULL && failure->system_error == 0) {
        failure->system_error = atoi(system_error + strlen("errno = "));
        snprintf(failure->system_function, sizeof failure->system_function, "%s", entry->func_name);
    }
    return 0;
}

cpparity_status hdf5_fail(cpparity_error *error, const char *file, int line, const char *format,
                          ...) {
    char what[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(what, sizeof what, format, arguments);
    va_end(arguments);
    hdf5_failure failure = {"", 0, ""};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, remember_message, &failure);
    if (failure.system_error != 0) {
        /* the system's reason is what the reader needs ("No space left on device"); the
         * driver's own description is long and spans lines */
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "HDF5: %s failed: %s (errno %d in %s, at %s:%d)", what,
                                  strerror(failure.system_error), failure.system_error,
                                  failure.system_function, file, line);
    }
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "HDF5: %s failed at %s:%d: %s", what,
                              file, line, failure.message[0] ? failure.message : "no HDF5 message");
}

cpparity_status hdf5_close_file(hid_t *file, cpparity_error *error, const char *format, ...) {
    if (*file < 0) {
        return CPPARITY_OK;
    }
    const herr_t closed = H5Fclose(*file);
    *file = H5I_INVALID_HID; /* valid or not, never touched again */
    if (closed >= 0) {
        return CPPARITY_OK;
    }
    atomic_store(&file_close_failed, true);
    char what[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(what, sizeof what, format, arguments);
    va_end(arguments);
    return hdf5_fail(error, __FILE__, __LINE__, "closing %s", what);
}

void hdf5_library_begin(void) {
    H5dont_atexit();
}

void hdf5_library_end(void) {
    if (!atomic_load(&file_close_failed)) {
        H5close();
    }
}

void hdf5_quiet(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Closes id with the close call of its kind; the HDF5 return code. */
static herr_t close_by_kind(hid_t id) {
    switch (H5Iget_type(id)) {
    case H5I_FILE:
        if (H5Fclose(id) < 0) {
            atomic_store(&file_close_failed, true);
            return -1;
        }
        return 0;
    case H5I_GROUP:
        return H5Gclose(id);
    case H5I_DATASET:
        return H5Dclose(id);
    case H5I_ATTR:
        return H5Aclose(id);
    case H5I_DATASPACE:
        return H5Sclose(id);
    case H5I_DATATYPE:
        return H5Tclose(id);
    case H5I_GENPROP_LST:
        return H5Pclose(id);
    default:
        return H5Idec_ref(id) < 0 ? -1 : 0;
    }
}

void hdf5_close(hid_t id) {
    if (id >= 0) {
        (void)close_by_kind(id); /* after a failure: the first error is the one reported */
    }
}

cpparity_status hdf5_close_checked(hid_t id, cpparity_status status, cpparity_error *error,
                                   const char *file, int line) {
    if (id < 0) {
        return status;
    }
    char name[256] = "";
    if (H5Iget_name(id, name, sizeof name) < 0 || name[0] == '\0') {
        snprintf(name, sizeof name, "an HDF5 object (id %lld)", (long long)id);
    }
    if (close_by_kind(id) < 0 && status == CPPARITY_OK) {
        return hdf5_fail(error, file, line, "closing %s", name);
    }
    return status;
}

/* Writes attribute name of type: a scalar when rank is 0, else of the given dims. */
static cpparity_status write_attribute(hid_t object, const char *name, hid_t type, int rank,
                                       const hsize_t *dims, const void *value,
                                       cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t space = H5I_INVALID_HID, attribute = H5I_INVALID_HID;
    HDF5_CHECK(space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL),
               error, "creating the space of attribute %s", name);
    HDF5_CHECK(attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating attribute %s", name);
    HDF5_CHECK(H5Awrite(attribute, type, value), error, "writing attribute %s", name);
    status = CPPARITY_OK;
fail:
    status = HDF5_CLOSE(attribute, status, error);
    status = HDF5_CLOSE(space, status, error);
    return status;
}

/* Writes attribute name with a new string type of width bytes per string: a scalar when rank is
 * 0, else of the given dims. */
static cpparity_status string_attribute(hid_t object, const char *name, size_t width, int rank,
                                        const hsize_t *dims, const char *value,
                                        cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t type = H5I_INVALID_HID;
    HDF5_CHECK(type = H5Tcopy(H5T_C_S1), error, "copying the string type for %s", name);
    HDF5_CHECK(H5Tset_size(type, width), error, "sizing the string type for %s", name);
    status = write_attribute(object, name, type, rank, dims, value, error);
fail:
    status = HDF5_CLOSE(type, status, error);
    return status;
}

cpparity_status hdf5_attribute_int64(hid_t object, const char *name, int64_t value,
                                     cpparity_error *error) {
    return write_attribute(object, name, H5T_NATIVE_INT64, 0, NULL, &value, error);
}

cpparity_status hdf5_attribute_double(hid_t object, const char *name, double value,
                                      cpparity_error *error) {
    return write_attribute(object, name, H5T_NATIVE_DOUBLE, 0, NULL, &value, error);
}

cpparity_status hdf5_attributes_int64(hid_t object, const hdf5_named_int64 *values, size_t count,
                                      cpparity_error *error) {
    for (size_t i = 0; i < count; i++) {
        if (hdf5_attribute_int64(object, values[i].name, values[i].value, error) != CPPARITY_OK) {
            return CPPARITY_ERROR_RUNTIME;
        }
    }
    return CPPARITY_OK;
}

cpparity_status hdf5_attribute_string(hid_t object, const char *name, const char *value,
                                      cpparity_error *error) {
    const size_t width = strlen(value) > 0 ? strlen(value) : 1;
    return string_attribute(object, name, width, 0, NULL, value, error);
}

cpparity_status hdf5_attribute_strings(hid_t object, const char *name, const char *const *values,
                                       int64_t count, cpparity_error *error) {
    size_t width = 1;
    for (int64_t i = 0; i < count; i++) {
        width = strlen(values[i]) > width ? strlen(values[i]) : width;
    }
    char packed[64 * 32];
    if ((size_t)count * width > sizeof packed) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "attribute %s: %lld strings of %zu bytes do not fit", name,
                                  (long long)count, width);
    }
    memset(packed, 0, sizeof packed);
    for (int64_t i = 0; i < count; i++) {
        memcpy(packed + (size_t)i * width, values[i], strlen(values[i]));
    }
    const hsize_t dims[1] = {(hsize_t)count};
    return string_attribute(object, name, width, 1, dims, packed, error);
}

cpparity_status hdf5_attribute_int64s(hid_t object, const char *name, const int64_t *values,
                                      int64_t count, cpparity_error *error) {
    const hsize_t dims[1] = {(hsize_t)count};
    return write_attribute(object, name, H5T_NATIVE_INT64, 1, dims, values, error);
}

/* Creates dataset name under parent, stored as file_type in the given shape (a scalar when rank
 * is 0) with the given creation properties, writes data (memory_type) unless data is NULL (only
 * for an empty dataset) and attaches the `Description` attribute. */
static cpparity_status new_dataset(hid_t parent, const char *name, hid_t memory_type,
                                   hid_t file_type, int rank, const hsize_t *sizes,
                                   hid_t properties, const void *data, const char *description,
                                   cpparity_error *error) {
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t space = H5I_INVALID_HID, dataset = H5I_INVALID_HID;
    HDF5_CHECK(space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, sizes, NULL),
               error, "creating the space of dataset %s", name);
    HDF5_CHECK(dataset =
                   H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, properties, H5P_DEFAULT),
               error, "creating dataset %s", name);
    if (data != NULL) {
        HDF5_CHECK(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), error,
                   "writing dataset %s", name);
    }
    status = hdf5_attribute_string(dataset, "Description", description, error);
fail:
    status = HDF5_CLOSE(dataset, status, error);
    status = HDF5_CLOSE(space, status, error);
    return status;
}

/* A scalar or an empty dataset, which cannot be chunked: compact, its data inside its object
 * header, which the file's format bounds (hdf5_file_access) checksum. */
static cpparity_status write_compact(hid_t parent, const char *name, hid_t type, int rank,
                                     const int64_t *dims, const void *data, const char *description,
                                     cpparity_error *error) {
    hsize_t sizes[8];
    if (rank < 0 || rank > 8) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "dataset %s: rank %d", name, rank);
    }
    for (int d = 0; d < rank; d++) {
        sizes[d] = (hsize_t)dims[d];
    }
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    hid_t properties = H5I_INVALID_HID;
    HDF5_CHECK(properties = H5Pcreate(H5P_DATASET_CREATE), error,
               "creating the properties of dataset %s", name);
    HDF5_CHECK(H5Pset_layout(properties, H5D_COMPACT), error, "making dataset %s compact", name);
    status =
        new_dataset(parent, name, type, type, rank, sizes, properties, data, description, error);
fail:
    return HDF5_CLOSE(properties, status, error);
}

static bool scalar_or_empty(int rank, const int64_t *dims) {
    bool empty = false;
    for (int d = 0; d < rank; d++) {
        empty = empty || dims[d] == 0;
    }
    return rank == 0 || empty;
}

cpparity_status hdf5_open_image(const void *image, size_t size, const char *name, hid_t *file,
                                cpparity_error *error) {
    *file = H5I_INVALID_HID;
    hdf5_quiet();
    const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    if (access < 0 || H5Pset_fapl_core(access, 1 << 16, 0) < 0 ||
        (size > 0 && H5Pset_file_image(access, (void *)(uintptr_t)image, size) < 0)) {
        hdf5_close(access);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s: cannot set up an in-memory HDF5 file (out of memory?)",
                                  name);
    }
    *file = size > 0 ? H5Fopen(name, H5F_ACC_RDONLY, access) : H5I_INVALID_HID;
    hdf5_close(access);
    if (*file < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: not an HDF5 file, or a damaged or truncated one", name);
    }
    return CPPARITY_OK;
}

hid_t hdf5_file_access(cpparity_error *error) {
    hid_t access = H5I_INVALID_HID;
    HDF5_CHECK(access = H5Pcreate(H5P_FILE_ACCESS), error, "creating file access properties");
    HDF5_CHECK(H5Pset_fclose_degree(access, H5F_CLOSE_STRONG), error,
               "setting the file close degree");
    /* HDF5 1.10's newest format: version 2 object headers, version 2 B-trees, fractal heaps and
     * a version 3 superblock, each with a checksum verified on every read */
    HDF5_CHECK(H5Pset_libver_bounds(access, H5F_LIBVER_V110, H5F_LIBVER_V110), error,
               "setting the file format bounds to HDF5 1.10's");
    return access;
fail:
    hdf5_close(access);
    return H5I_INVALID_HID;
}

hid_t hdf5_string_type(size_t size) {
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0) {
        return H5I_INVALID_HID;
    }
    if (H5Tset_size(type, size) < 0) {
        H5Tclose(type);
        return H5I_INVALID_HID;
    }
    return type;
}

/* Chunked, shuffled, deflated, checksummed dataset of memory_type data stored as file_type. */
/* The creation properties of a chunked dataset: chunks of `chunk` (NULL: at most about 1 MiB,
 * leading dimensions halved first), shuffled, deflated, fletcher32. A negative id on failure
 * (error set). */
static hid_t chunked_properties(const char *name, hid_t file_type, int rank, const int64_t *dims,
                                const int64_t *given, cpparity_error *error) {
    enum { CHUNK_BYTES = 1 << 20, DEFLATE_LEVEL = 4 };
    hsize_t chunk[8];
    hid_t properties = H5I_INVALID_HID;
    if (rank < 1 || rank > 8) {
        cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                           "dataset %s: cannot chunk a dataset of rank %d", name, rank);
        return H5I_INVALID_HID;
    }
    const size_t element = H5Tget_size(file_type);
    if (element == 0) {
        hdf5_fail(error, __FILE__, __LINE__, "sizing the type of dataset %s", name);
        return H5I_INVALID_HID;
    }
    for (int d = 0; d < rank; d++) {
        chunk[d] = (hsize_t)(given != NULL ? given[d] : dims[d]);
    }
    for (int d = 0; given == NULL && d < rank; d++) {
        hsize_t bytes = element;
        for (int e = 0; e < rank; e++) {
            bytes *= chunk[e];
        }
        while (bytes > CHUNK_BYTES && chunk[d] > 1) {
            const hsize_t halved = (chunk[d] + 1) / 2;
            bytes = bytes / chunk[d] * halved;
            chunk[d] = halved;
        }
    }
    HDF5_CHECK(properties = H5Pcreate(H5P_DATASET_CREATE), error,
               "creating the properties of dataset %s", name);
    HDF5_CHECK(H5Pset_chunk(properties, rank, chunk), error, "chunking dataset %s", name);
    HDF5_CHECK(H5Pset_shuffle(properties), error, "adding the shuffle filter to %s", name);
    HDF5_CHECK(H5Pset_deflate(properties, DEFLATE_LEVEL), error, "adding the deflate filter to %s",
               name);
    HDF5_CHECK(H5Pset_fletcher32(properties), error, "adding the fletcher32 checksum to %s", name);
    return properties;
fail:
    hdf5_close(properties);
    return H5I_INVALID_HID;
}

static cpparity_status write_chunked(hid_t parent, const char *name, hid_t memory_type,
                                     hid_t file_type, int rank, const int64_t *dims,
                                     const void *data, const char *description,
                                     cpparity_error *error) {
    hsize_t sizes[8];
    const hid_t properties = chunked_properties(name, file_type, rank, dims, NULL, error);
    if (properties < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    for (int d = 0; d < rank; d++) {
        sizes[d] = (hsize_t)dims[d];
    }
    cpparity_status status = new_dataset(parent, name, memory_type, file_type, rank, sizes,
                                         properties, data, description, error);
    return HDF5_CLOSE(properties, status, error);
}

cpparity_status hdf5_stream_create(hid_t parent, const char *name, hid_t type, int rank,
                                   const int64_t *dims, const int64_t *chunk,
                                   const char *description, hdf5_stream *stream,
                                   cpparity_error *error) {
    memset(stream, 0, sizeof *stream);
    stream->dataset = H5I_INVALID_HID;
    stream->type = type;
    stream->rank = rank;
    snprintf(stream->name, sizeof stream->name, "%s", name);
    hsize_t sizes[8];
    hid_t space = H5I_INVALID_HID;
    const hid_t properties = chunked_properties(name, type, rank, dims, chunk, error);
    if (properties < 0) {
        return CPPARITY_ERROR_RUNTIME;
    }
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    for (int d = 0; d < rank; d++) {
        sizes[d] = (hsize_t)dims[d];
    }
    HDF5_CHECK(space = H5Screate_simple(rank, sizes, NULL), error,
               "creating the space of dataset %s", name);
    HDF5_CHECK(stream->dataset =
                   H5Dcreate2(parent, name, type, space, H5P_DEFAULT, properties, H5P_DEFAULT),
               error, "creating dataset %s", name);
    status = hdf5_attribute_string(stream->dataset, "Description", description, error);
fail:
    status = HDF5_CLOSE(space, status, error);
    status = HDF5_CLOSE(properties, status, error);
    if (status != CPPARITY_OK) {
        hdf5_close(stream->dataset);
        stream->dataset = H5I_INVALID_HID;
    }
    return status;
}

cpparity_status hdf5_stream_write(hdf5_stream *stream, const int64_t *start, const int64_t *count,
                                  const void *data, cpparity_error *error) {
    hsize_t offsets[8], counts[8];
    hid_t file_space = H5I_INVALID_HID, memory_space = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    for (int d = 0; d < stream->rank; d++) {
        offsets[d] = (hsize_t)start[d];
        counts[d] = (hsize_t)count[d];
    }
    HDF5_CHECK(file_space = H5Dget_space(stream->dataset), error, "the space of dataset %s",
               stream->name);
    HDF5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, offsets, NULL, counts, NULL), error,
               "selecting a part of dataset %s", stream->name);
    HDF5_CHECK(memory_space = H5Screate_simple(stream->rank, counts, NULL), error,
               "creating a memory space for dataset %s", stream->name);
    HDF5_CHECK(H5Dwrite(stream->dataset, stream->type, memory_space, file_space, H5P_DEFAULT, data),
               error, "writing a part of dataset %s", stream->name);
    status = CPPARITY_OK;
fail:
    status = HDF5_CLOSE(memory_space, status, error);
    status = HDF5_CLOSE(file_space, status, error);
    return status;
}

cpparity_status hdf5_stream_close(hdf5_stream *stream, cpparity_status status,
                                  cpparity_error *error) {
    status = HDF5_CLOSE(stream->dataset, status, error);
    stream->dataset = H5I_INVALID_HID;
    return status;
}

cpparity_status hdf5_write_dataset(hid_t parent, const char *name, hid_t type, int rank,
                                   const int64_t *dims, const void *data, const char *description,
                                   cpparity_error *error) {
    if (scalar_or_empty(rank, dims)) {
        return write_compact(parent, name, type, rank, dims, data, description, error);
    }
    return write_chunked(parent, name, type, type, rank, dims, data, description, error);
}

cpparity_status hdf5_write_compound(hid_t parent, const char *name, hid_t memory_type,
                                    int64_t count, const void *rows, const char *description,
                                    cpparity_error *error) {
    const int64_t dims[1] = {count};
    const hsize_t sizes[1] = {(hsize_t)count};
    hid_t file_type = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    HDF5_CHECK(file_type = H5Tcopy(memory_type), error, "copying the row type of %s", name);
    HDF5_CHECK(H5Tpack(file_type), error, "packing the row type of %s", name);
    if (count > 0) {
        status =
            write_chunked(parent, name, memory_type, file_type, 1, dims, rows, description, error);
    } else {
        status = new_dataset(parent, name, memory_type, file_type, 1, sizes, H5P_DEFAULT, NULL,
                             description, error);
    }
fail:
    status = HDF5_CLOSE(file_type, status, error);
    return status;
}

cpparity_status hdf5_write_model_config(hid_t object, const cpparity_model_config *config,
                                        cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT && status == CPPARITY_OK; i++) {
        const cpparity_model_field *field = &cpparity_model_fields[i];
        const void *value = cpparity_model_field_value(config, field);
        switch (field->type) {
        case CPPARITY_FIELD_SIZE:
            status = hdf5_attribute_int64(object, field->name, *(const int64_t *)value, error);
            break;
        case CPPARITY_FIELD_BOOLEAN:
            status = hdf5_attribute_int64(object, field->name, *(const bool *)value ? 1 : 0, error);
            break;
        case CPPARITY_FIELD_POSITIVE:
            status = hdf5_attribute_double(object, field->name, *(const double *)value, error);
            break;
        case CPPARITY_FIELD_CHUNK_ORIGIN:
            status = hdf5_attribute_string(
                object, field->name,
                cpparity_name_of(cpparity_chunk_origin_names, CPPARITY_CHUNK_ORIGIN_COUNT,
                                 (int)*(const cpparity_chunk_origin *)value),
                error);
            break;
        case CPPARITY_FIELD_LAYER_TYPES: {
            const cpparity_layer_type *types = value;
            const char *names[CPPARITY_MAX_LAYERS];
            const int64_t layers = config->num_hidden_layers < CPPARITY_MAX_LAYERS
                                       ? config->num_hidden_layers
                                       : CPPARITY_MAX_LAYERS;
            for (int64_t l = 0; l < layers; l++) {
                names[l] = cpparity_layer_type_name(types[l]);
            }
            if (layers > 0) {
                status = hdf5_attribute_strings(object, field->name, names, layers, error);
            }
            break;
        }
        }
    }
    return status;
}

hid_t hdf5_compound_type(size_t size, const hdf5_member *members, size_t count,
                         cpparity_error *error) {
    hid_t type = H5I_INVALID_HID, string = H5I_INVALID_HID;
    HDF5_CHECK(type = H5Tcreate(H5T_COMPOUND, size), error, "creating a compound type");
    for (size_t i = 0; i < count; i++) {
        hid_t field = members[i].native;
        if (members[i].string_size > 0) {
            HDF5_CHECK(string = hdf5_string_type(members[i].string_size), error,
                       "creating the string type of %s", members[i].name);
            field = string;
        }
        HDF5_CHECK(H5Tinsert(type, members[i].name, members[i].offset, field), error,
                   "adding field %s", members[i].name);
        hdf5_close(string);
        string = H5I_INVALID_HID;
    }
    return type;
fail:
    hdf5_close(string);
    hdf5_close(type);
    return H5I_INVALID_HID;
}
