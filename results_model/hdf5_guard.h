/*
 * hdf5_guard.h — reading an HDF5 file that someone else wrote without letting HDF5 take
 * cpparity down with it.
 *
 * HDF5 1.10 parses much of a file without checksums (all of it in the earliest format, which
 * plain h5py writes; the global heap in every format), and on some damaged files it crashes,
 * loops or allocates without bound inside its own parsers (fuzz/README.md lists the stacks). A
 * reader of cpparity's cannot check what HDF5 parses before handing it over. So a file cpparity
 * did not write in this process (a rank dump, an export, a results file) is first read in a
 * forked child, by the same reader, with a time and a memory limit; only when the child read it
 * to the end does the caller read it in its own process. A child that dies by a signal, runs past
 * its time or out of memory makes the read fail with CPPARITY_ERROR_INPUT:
 *
 *     dump.h5 is damaged: reading /: attribute 'framework' crashed inside the HDF5 library
 *     (SIGSEGV, in H5HG_read of libhdf5_serial.so.103)
 *
 * naming the HDF5 object the reader was at when the child died: the readers mark where they are
 * with hdf5_guard_at, which writes into a page the child shares with its parent (a child killed
 * for hanging cannot write to a pipe). A read that fails cleanly in the child fails with the
 * child's own status and message, and the file is not read again.
 *
 * The child reads the whole file, bulk data included: the earliest format's chunk indexes and
 * the global heap are parsed only when data are read. Limits: the child may run
 * hdf5_guard_seconds(bytes) (10 s, and 1 s more per 8 MiB of file; CPPARITY_HDF5_READ_SECONDS
 * sets the 10) and may map what the machine has available (MemAvailable) beyond what the parent
 * maps already (not under AddressSanitizer, whose shadow memory an address-space limit breaks).
 * For single-threaded callers only (cpparity's judge, report and diff read before they start
 * threads): a child forked while another thread holds a lock could wait on it forever.
 */
#ifndef CPPARITY_RESULTS_MODEL_HDF5_GUARD_H
#define CPPARITY_RESULTS_MODEL_HDF5_GUARD_H

#include <stdint.h>

#include "common/error.h"

/* One whole read of the file: what the child runs (and the caller runs again after). Returns a
 * status and fills error as every cpparity reader does; it must not print or write files. */
typedef cpparity_status (*hdf5_guard_reader)(void *context, cpparity_error *error);

/* Runs read(context) in a forked child as above. file names the file in messages, bytes is its
 * size (for the time limit; 0 when unknown). CPPARITY_OK when the child read it to the end; the
 * child's status and message when the read failed cleanly; CPPARITY_ERROR_INPUT "FILE is
 * damaged: ..." when the child crashed, hung or ran out of memory; CPPARITY_ERROR_RUNTIME when no
 * child could be started (fork, mmap). */
cpparity_status hdf5_guard_read(const char *file, int64_t bytes, hdf5_guard_reader read,
                                void *context, cpparity_error *error);

/* hdf5_guard_read of a file by its path: its size from stat (0 when it cannot be read: the
 * reader then says why). */
cpparity_status hdf5_guard_read_path(const char *path, hdf5_guard_reader read, void *context,
                                     cpparity_error *error);

/* Where the reader is: the HDF5 object (a path) and, when not NULL, the attribute or link name
 * it is reading. Costs a pointer test outside a guarded child. */
void hdf5_guard_at(const char *object, const char *name);

/* The seconds a child reading a file of bytes may run (above). */
double hdf5_guard_seconds(int64_t bytes);

/* Called first in every child (NULL: nothing): the fuzz target's (fuzz/), which turns off the
 * fuzzer's own crash reporting there, so that a crash the guard handles is not recorded. */
void hdf5_guard_set_child_hook(void (*hook)(void));

#endif
