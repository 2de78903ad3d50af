/*
 * hdf5_util.h — the one place HDF5 return codes are checked, and small writers built on it.
 *
 * HDF5_CHECK(call, error, what...) evaluates call; on a negative return it records an
 * CPPARITY_ERROR_RUNTIME in error naming what failed (printf-style), the source file and line,
 * and HDF5's own innermost message, then jumps to the enclosing function's `fail:` label.
 * cpparity never lets HDF5 print its error stack itself (hdf5_quiet).
 */
#ifndef CPPARITY_RESULTS_MODEL_HDF5_UTIL_H
#define CPPARITY_RESULTS_MODEL_HDF5_UTIL_H

#include <hdf5.h>
#include <stdint.h>

#include "common/error.h"
#include "common/model_config.h"

/* Records a failed HDF5 call (used by HDF5_CHECK). */
cpparity_status hdf5_fail(cpparity_error *error, const char *file, int line, const char *format,
                          ...) __attribute__((format(printf, 4, 5)));

#define HDF5_CHECK(call, error, ...)                                                               \
    do {                                                                                           \
        if ((call) < 0) {                                                                          \
            hdf5_fail((error), __FILE__, __LINE__, __VA_ARGS__);                                   \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Closes id (negative ids are ignored) and returns status, or CPPARITY_ERROR_RUNTIME with the
 * failed close recorded when status was CPPARITY_OK and the close failed. Through HDF5_CLOSE. */
cpparity_status hdf5_close_checked(hid_t id, cpparity_status status, cpparity_error *error,
                                   const char *file, int line);
#define HDF5_CLOSE(id, status, error)                                                              \
    hdf5_close_checked((id), (status), (error), __FILE__, __LINE__)

/* Turns off HDF5's automatic printing of its error stack (we report errors ourselves). */
void hdf5_quiet(void);

/* Closes a file and sets *file to H5I_INVALID_HID whatever happens, so no error path touches a
 * handle that failed to close. A failure (a full disk shows here, when HDF5 flushes) is
 * CPPARITY_ERROR_RUNTIME naming what (a printf-style description of the file) and the
 * system's reason, and marks the library unsafe to shut down (hdf5_library_end). */
cpparity_status hdf5_close_file(hid_t *file, cpparity_error *error, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* The program's HDF5 lifetime. hdf5_library_begin, first thing in main, stops HDF5 from
 * shutting itself down at exit; hdf5_library_end, at the end of main, shuts it down unless a
 * file failed to close (HDF5 1.10 crashes when it shuts down with such a file). */
void hdf5_library_begin(void);
void hdf5_library_end(void);

/* Closes id, whatever it identifies (file, group, dataset, attribute, space, type, property
 * list); does nothing for a negative id and ignores a failure. For the cleanup after a fail:
 * label, where the first error is already recorded. */
void hdf5_close(hid_t id);

/* Scalar attributes on an object (group or dataset). */
cpparity_status hdf5_attribute_int64(hid_t object, const char *name, int64_t value,
                                     cpparity_error *error);
cpparity_status hdf5_attribute_double(hid_t object, const char *name, double value,
                                      cpparity_error *error);
cpparity_status hdf5_attribute_string(hid_t object, const char *name, const char *value,
                                      cpparity_error *error);

/* A named int64 value, for hdf5_attributes_int64. */
typedef struct hdf5_named_int64 {
    const char *name; /* attribute name */
    int64_t value;    /* its value */
} hdf5_named_int64;

/* One scalar int64 attribute per entry of values (count entries), in order; stops at the first
 * failure. */
cpparity_status hdf5_attributes_int64(hid_t object, const hdf5_named_int64 *values, size_t count,
                                      cpparity_error *error);

/* A 1-D attribute of count fixed-length strings (h5py reads a numpy bytes array). */
cpparity_status hdf5_attribute_strings(hid_t object, const char *name, const char *const *values,
                                       int64_t count, cpparity_error *error);

/* File access properties for every file cpparity writes (close with H5Pclose): HDF5 1.10's
 * newest format bounds (H5Pset_libver_bounds V110, V110), under which object headers, B-tree
 * nodes, heaps and the superblock carry checksums HDF5 verifies when it reads them, and a
 * strong close degree. A negative id, with error filled, on failure. */
hid_t hdf5_file_access(cpparity_error *error);

/* Opens an HDF5 file image in memory (size bytes, only read; HDF5's core driver, nothing on disk)
 * read-only into *file, called name in messages. CPPARITY_ERROR_INPUT ("NAME: not an HDF5 file,
 * or a damaged or truncated one") when HDF5 cannot open it, CPPARITY_ERROR_RUNTIME when the
 * driver cannot be set up. For the fuzz targets' readers (fuzz/). */
cpparity_status hdf5_open_image(const void *image, size_t size, const char *name, hid_t *file,
                                cpparity_error *error);

/* Writes a whole dataset `name` under parent with a `Description` attribute; type is the HDF5
 * memory and file type (H5T_NATIVE_DOUBLE, H5T_NATIVE_INT64, H5T_NATIVE_INT8, ...). rank 0
 * writes a scalar. Every dataset is checksummed, stored the way SWIFT stores its output: chunked
 * (chunks of at most about 1 MiB, leading dimensions split first), byte-shuffled,
 * deflate-compressed and with a fletcher32 checksum. A scalar or an empty dataset (a dimension of
 * 0) cannot be chunked and is compact: its data inside its object header, checksummed in files
 * made with hdf5_file_access. */
cpparity_status hdf5_write_dataset(hid_t parent, const char *name, hid_t type, int rank,
                                   const int64_t *dims, const void *data, const char *description,
                                   cpparity_error *error);

/* A dataset written piece by piece (a tensor too large to hold whole: the logits of a long
 * sequence, one row block at a time): created like hdf5_write_dataset's (chunked, shuffled,
 * deflated, fletcher32, a Description), chunks of `chunk` (NULL: hdf5_write_dataset's), then
 * filled by hyperslabs. */
typedef struct hdf5_stream {
    hid_t dataset; /* open while writing */
    hid_t type;    /* memory and file type */
    int rank;
    char name[64]; /* for messages */
} hdf5_stream;

/* Creates the dataset (rank 1..8, no dimension 0) under parent; *stream open on success. */
cpparity_status hdf5_stream_create(hid_t parent, const char *name, hid_t type, int rank,
                                   const int64_t *dims, const int64_t *chunk,
                                   const char *description, hdf5_stream *stream,
                                   cpparity_error *error);

/* Writes data (count elements per dimension, contiguous) at start. */
cpparity_status hdf5_stream_write(hdf5_stream *stream, const int64_t *start, const int64_t *count,
                                  const void *data, cpparity_error *error);

/* Closes the dataset; returns status, or the close's failure when status was CPPARITY_OK. */
cpparity_status hdf5_stream_close(hdf5_stream *stream, cpparity_status status,
                                  cpparity_error *error);

/* A 1-D int64 attribute of count values (count >= 1). */
cpparity_status hdf5_attribute_int64s(hid_t object, const char *name, const int64_t *values,
                                      int64_t count, cpparity_error *error);

/* A new fixed-length, NUL-terminated string type of size bytes (for compound members); the
 * caller closes it with H5Tclose. Returns a negative id on failure (check with HDF5_CHECK). */
hid_t hdf5_string_type(size_t size);

/* One member of a compound type: a native type, or a fixed-length string when string_size > 0. */
typedef struct hdf5_member {
    const char *name;   /* field name in the file */
    size_t offset;      /* offsetof in the C struct */
    hid_t native;       /* H5T_NATIVE_... (ignored for strings) */
    size_t string_size; /* bytes of a NUL-terminated string field, 0 for a native one */
} hdf5_member;

/* A compound type of size bytes with count members (the caller closes it with H5Tclose), or a
 * negative id with error filled naming the member that failed. */
hid_t hdf5_compound_type(size_t size, const hdf5_member *members, size_t count,
                         cpparity_error *error);

/* A 1-D compound dataset (a table) of count rows of memory_type, read from rows (an array of C
 * structs described by memory_type). The file type is memory_type packed (no padding), so h5py
 * reads it as a numpy structured array. Chunked, shuffled, compressed and checksummed like
 * hdf5_write_dataset when count > 0; count 0 writes an empty table. A `Description`
 * attribute is attached. */
cpparity_status hdf5_write_compound(hid_t parent, const char *name, hid_t memory_type,
                                    int64_t count, const void *rows, const char *description,
                                    cpparity_error *error);

/* The model configuration as attributes of object (a group): one attribute per field of
 * cpparity_model_fields (common/model_config.h), under its transformers name and in table
 * order. Sizes are int64, booleans int64 0/1, positive numbers float64, chunk_origin a string
 * ("row" or "document"), layer_types a string array (omitted when there are no layers). Both
 * `cpparity export`'s /model and the results file's /cases/<case> carry it. Stops at the first
 * attribute that fails. */
cpparity_status hdf5_write_model_config(hid_t object, const cpparity_model_config *config,
                                        cpparity_error *error);

#endif
