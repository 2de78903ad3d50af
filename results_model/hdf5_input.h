/*
 * hdf5_input.h — reading HDF5 files that someone else wrote (a framework's rank dump, an export)
 * without trusting them: every attribute and dataset is checked for presence, class, rank and
 * size before anything is allocated or indexed, and every problem is CPPARITY_ERROR_INPUT naming
 * the file and the HDF5 path ("dump.h5: /logits: 3 dimensions expected, found 2"). Strings may be
 * fixed-length or variable-length (h5py writes the latter); numbers are converted by HDF5 to the
 * native type asked for. Failures of HDF5 itself on a file that passed these checks are
 * CPPARITY_ERROR_RUNTIME through HDF5_CHECK (hdf5_util.h).
 */
#ifndef CPPARITY_RESULTS_MODEL_HDF5_INPUT_H
#define CPPARITY_RESULTS_MODEL_HDF5_INPUT_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define HDF5_INPUT_MAX_RANK 4 /* the most dimensions a dataset read here may have */

/* An open input file and its name for messages. */
typedef struct hdf5_input {
    hid_t file;
    const char *path;
} hdf5_input;

/* Opens path read-only: CPPARITY_ERROR_INPUT when it is missing, unreadable or not HDF5. */
cpparity_status hdf5_input_open(hdf5_input *input, const char *path, cpparity_error *error);

/* The same for an HDF5 file image in memory (size bytes, only read; HDF5's core driver), called
 * name in messages: the fuzz targets' entry (fuzz/). */
cpparity_status hdf5_input_open_image(hdf5_input *input, const void *image, size_t size,
                                      const char *name, cpparity_error *error);

void hdf5_input_close(hdf5_input *input);

/* Whether object (a group path such as "/" or "/gradients") has a link called name. */
bool hdf5_input_exists(const hdf5_input *input, const char *object, const char *name);

/* Whether object (a group or dataset path) exists and has an attribute called name. */
bool hdf5_input_has_attribute(const hdf5_input *input, const char *object, const char *name);
/* A scalar string attribute of object, fixed- or variable-length, into text (at most size − 1
 * bytes; a longer one is refused). */
cpparity_status hdf5_input_string(const hdf5_input *input, const char *object, const char *name,
                                  char *text, size_t size, cpparity_error *error);

/* A scalar integer attribute (an integer class, any width). */
cpparity_status hdf5_input_int64(const hdf5_input *input, const char *object, const char *name,
                                 int64_t *value, cpparity_error *error);

/* The shape of dataset path: rank (1..HDF5_INPUT_MAX_RANK, 0 for a scalar) and dims; the class
 * must be kind (H5T_INTEGER or H5T_FLOAT). */
cpparity_status hdf5_input_shape(const hdf5_input *input, const char *path, H5T_class_t kind,
                                 int *rank, int64_t dims[HDF5_INPUT_MAX_RANK],
                                 cpparity_error *error);

/* Reads dataset path, whose shape must be exactly rank × dims (rank 0: a scalar), converted to
 * native (H5T_NATIVE_FLOAT, _DOUBLE or _INT64) into values (room for the product of dims). */
cpparity_status hdf5_input_read(const hdf5_input *input, const char *path, H5T_class_t kind,
                                int rank, const int64_t *dims, hid_t native, void *values,
                                cpparity_error *error);

/* Part of a dataset: the elements [start, start + count) of each dimension of path, whose class,
 * rank and shape must be kind, rank and dims (checked as hdf5_input_read checks them), into
 * values (Π count elements of native, contiguous). A tensor too large to read whole (a dump's
 * logits) is read this way, one block of rows at a time. */
cpparity_status hdf5_input_read_part(const hdf5_input *input, const char *path, H5T_class_t kind,
                                     int rank, const int64_t *dims, const int64_t *start,
                                     const int64_t *count, hid_t native, void *values,
                                     cpparity_error *error);

/* The names of the links of group path, in name order, each at most size − 1 bytes, into a
 * malloc'd array of count strings of size bytes each (free it). A missing group is 0 names. */
cpparity_status hdf5_input_names(const hdf5_input *input, const char *path, size_t size,
                                 char **names, int64_t *count, cpparity_error *error);

#endif
