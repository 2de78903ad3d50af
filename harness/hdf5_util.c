/* hdf5_util.c — checked HDF5 calls and small writers (see hdf5_util.h). */
#include "hdf5_util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Keeps the innermost (last walked) description of HDF5's error stack. */
static herr_t remember_message(unsigned n, const H5E_error2_t *entry, void *client) {
    (void)n;
    char *message = client;
    if (entry->desc != NULL && message[0] == '\0') {
        snprintf(message, 256, "%s (in %s)", entry->desc, entry->func_name);
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
    char message[256] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, remember_message, message);
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "HDF5: %s failed at %s:%d: %s", what,
                              file, line, message[0] ? message : "no HDF5 message");
}

void hdf5_quiet(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Writes a scalar attribute of the given type. */
static cpparity_status scalar_attribute(hid_t object, const char *name, hid_t type,
                                        const void *value, cpparity_error *error) {
    hid_t space = H5I_INVALID_HID, attribute = H5I_INVALID_HID;
    HDF5_CHECK(space = H5Screate(H5S_SCALAR), error, "creating the space of attribute %s", name);
    HDF5_CHECK(attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating attribute %s", name);
    HDF5_CHECK(H5Awrite(attribute, type, value), error, "writing attribute %s", name);
    H5Aclose(attribute);
    H5Sclose(space);
    return CPPARITY_OK;
fail:
    if (attribute >= 0) {
        H5Aclose(attribute);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status hdf5_attribute_int64(hid_t object, const char *name, int64_t value,
                                     cpparity_error *error) {
    return scalar_attribute(object, name, H5T_NATIVE_INT64, &value, error);
}

cpparity_status hdf5_attribute_double(hid_t object, const char *name, double value,
                                      cpparity_error *error) {
    return scalar_attribute(object, name, H5T_NATIVE_DOUBLE, &value, error);
}

cpparity_status hdf5_attribute_string(hid_t object, const char *name, const char *value,
                                      cpparity_error *error) {
    const char *values[] = {value};
    hid_t type = H5I_INVALID_HID;
    HDF5_CHECK(type = H5Tcopy(H5T_C_S1), error, "copying the string type for %s", name);
    HDF5_CHECK(H5Tset_size(type, strlen(value) > 0 ? strlen(value) : 1), error,
               "sizing the string type for %s", name);
    cpparity_status status = scalar_attribute(object, name, type, values[0], error);
    H5Tclose(type);
    return status;
fail:
    return CPPARITY_ERROR_RUNTIME;
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
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID, attribute = H5I_INVALID_HID;
    const hsize_t dims[1] = {(hsize_t)count};
    HDF5_CHECK(type = H5Tcopy(H5T_C_S1), error, "copying the string type for %s", name);
    HDF5_CHECK(H5Tset_size(type, width), error, "sizing the string type for %s", name);
    HDF5_CHECK(space = H5Screate_simple(1, dims, NULL), error, "creating the space of %s", name);
    HDF5_CHECK(attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT), error,
               "creating attribute %s", name);
    HDF5_CHECK(H5Awrite(attribute, type, packed), error, "writing attribute %s", name);
    H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
    return CPPARITY_OK;
fail:
    if (attribute >= 0) {
        H5Aclose(attribute);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    if (type >= 0) {
        H5Tclose(type);
    }
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status hdf5_write_dataset(hid_t parent, const char *name, hid_t type, int rank,
                                   const int64_t *dims, const void *data, const char *description,
                                   cpparity_error *error) {
    hsize_t sizes[8];
    for (int d = 0; d < rank; d++) {
        sizes[d] = (hsize_t)dims[d];
    }
    hid_t space = H5I_INVALID_HID, dataset = H5I_INVALID_HID;
    HDF5_CHECK(space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, sizes, NULL),
               error, "creating the space of dataset %s", name);
    HDF5_CHECK(dataset =
                   H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               error, "creating dataset %s", name);
    HDF5_CHECK(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), error,
               "writing dataset %s", name);
    if (hdf5_attribute_string(dataset, "Description", description, error) != CPPARITY_OK) {
        goto fail;
    }
    H5Dclose(dataset);
    H5Sclose(space);
    return CPPARITY_OK;
fail:
    if (dataset >= 0) {
        H5Dclose(dataset);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status hdf5_attribute_int64s(hid_t object, const char *name, const int64_t *values,
                                      int64_t count, cpparity_error *error) {
    const hsize_t dims[1] = {(hsize_t)count};
    hid_t space = H5I_INVALID_HID, attribute = H5I_INVALID_HID;
    HDF5_CHECK(space = H5Screate_simple(1, dims, NULL), error, "creating the space of %s", name);
    HDF5_CHECK(attribute =
                   H5Acreate2(object, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT),
               error, "creating attribute %s", name);
    HDF5_CHECK(H5Awrite(attribute, H5T_NATIVE_INT64, values), error, "writing attribute %s", name);
    H5Aclose(attribute);
    H5Sclose(space);
    return CPPARITY_OK;
fail:
    if (attribute >= 0) {
        H5Aclose(attribute);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return CPPARITY_ERROR_RUNTIME;
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
static cpparity_status write_chunked(hid_t parent, const char *name, hid_t memory_type,
                                     hid_t file_type, int rank, const int64_t *dims,
                                     const void *data, const char *description,
                                     cpparity_error *error) {
    enum { CHUNK_BYTES = 1 << 20, DEFLATE_LEVEL = 4 };
    hsize_t sizes[8], chunk[8];
    hid_t space = H5I_INVALID_HID, properties = H5I_INVALID_HID, dataset = H5I_INVALID_HID;
    if (rank < 1 || rank > 8) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "dataset %s: cannot chunk a dataset of rank %d", name, rank);
    }
    const size_t element = H5Tget_size(file_type);
    if (element == 0) {
        return hdf5_fail(error, __FILE__, __LINE__, "sizing the type of dataset %s", name);
    }
    for (int d = 0; d < rank; d++) {
        sizes[d] = chunk[d] = (hsize_t)dims[d];
    }
    for (int d = 0; d < rank; d++) {
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
    HDF5_CHECK(space = H5Screate_simple(rank, sizes, NULL), error,
               "creating the space of dataset %s", name);
    HDF5_CHECK(properties = H5Pcreate(H5P_DATASET_CREATE), error,
               "creating the properties of dataset %s", name);
    HDF5_CHECK(H5Pset_chunk(properties, rank, chunk), error, "chunking dataset %s", name);
    HDF5_CHECK(H5Pset_shuffle(properties), error, "adding the shuffle filter to %s", name);
    HDF5_CHECK(H5Pset_deflate(properties, DEFLATE_LEVEL), error, "adding the deflate filter to %s",
               name);
    HDF5_CHECK(H5Pset_fletcher32(properties), error, "adding the fletcher32 checksum to %s", name);
    HDF5_CHECK(dataset =
                   H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, properties, H5P_DEFAULT),
               error, "creating dataset %s", name);
    HDF5_CHECK(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), error,
               "writing dataset %s", name);
    if (hdf5_attribute_string(dataset, "Description", description, error) != CPPARITY_OK) {
        goto fail;
    }
    H5Dclose(dataset);
    H5Pclose(properties);
    H5Sclose(space);
    return CPPARITY_OK;
fail:
    if (dataset >= 0) {
        H5Dclose(dataset);
    }
    if (properties >= 0) {
        H5Pclose(properties);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return CPPARITY_ERROR_RUNTIME;
}

cpparity_status hdf5_write_dataset_compressed(hid_t parent, const char *name, hid_t type, int rank,
                                              const int64_t *dims, const void *data,
                                              const char *description, cpparity_error *error) {
    bool empty = false;
    for (int d = 0; d < rank; d++) {
        empty = empty || dims[d] == 0;
    }
    if (rank == 0 || empty) {
        return hdf5_write_dataset(parent, name, type, rank, dims, data, description, error);
    }
    return write_chunked(parent, name, type, type, rank, dims, data, description, error);
}

cpparity_status hdf5_write_compound(hid_t parent, const char *name, hid_t memory_type,
                                    int64_t count, const void *rows, const char *description,
                                    cpparity_error *error) {
    const int64_t dims[1] = {count};
    const hsize_t sizes[1] = {(hsize_t)count};
    hid_t file_type = H5I_INVALID_HID, space = H5I_INVALID_HID, dataset = H5I_INVALID_HID;
    cpparity_status status = CPPARITY_ERROR_RUNTIME;
    HDF5_CHECK(file_type = H5Tcopy(memory_type), error, "copying the row type of %s", name);
    HDF5_CHECK(H5Tpack(file_type), error, "packing the row type of %s", name);
    if (count > 0) {
        status =
            write_chunked(parent, name, memory_type, file_type, 1, dims, rows, description, error);
        H5Tclose(file_type);
        return status;
    }
    HDF5_CHECK(space = H5Screate_simple(1, sizes, NULL), error, "creating the space of %s", name);
    HDF5_CHECK(
        dataset = H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        error, "creating dataset %s", name);
    if (hdf5_attribute_string(dataset, "Description", description, error) != CPPARITY_OK) {
        goto fail;
    }
    status = CPPARITY_OK;
fail:
    if (dataset >= 0) {
        H5Dclose(dataset);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    if (file_type >= 0) {
        H5Tclose(file_type);
    }
    return status;
}
