/*
 * output_file.h — files that appear complete or not at all, and never replace another.
 *
 * A writer asks for a temporary name next to the destination, writes there, then commits:
 * the temporary file is hard-linked to the destination (which fails if the destination exists,
 * so nothing is ever overwritten, even in a race) and then unlinked. A crash leaves at most a
 * `.NAME.tmp-XXXXXX` file, never a half-written destination.
 */
#ifndef CPPARITY_COMMON_OUTPUT_FILE_H
#define CPPARITY_COMMON_OUTPUT_FILE_H

#include <stddef.h>

#include "common/error.h"

#define OUTPUT_FILE_PATH 4096

typedef struct output_file {
    char destination[OUTPUT_FILE_PATH]; /* where the file will appear */
    char temporary[OUTPUT_FILE_PATH];   /* where it is written until commit */
} output_file;

/* Refuses (CPPARITY_ERROR_INPUT, naming the flag) a destination that exists; creates the empty
 * temporary file (closed) and fills file. CPPARITY_ERROR_RUNTIME when the folder is not
 * writable. flag is the option that named the path, e.g. "--out". */
cpparity_status output_file_begin(output_file *file, const char *destination, const char *flag,
                                  cpparity_error *error);

/* Checks, before any work, that destination can be written later: it does not exist, its folder
 * exists, is a folder and takes a new file (a probe file is created there and removed at once).
 * CPPARITY_ERROR_INPUT naming the flag, the path and what is wrong; nothing is left behind. */
cpparity_status output_file_check(const char *destination, const char *flag, cpparity_error *error);

/* Publishes the temporary file under the destination name; refuses to replace a file that
 * appeared meanwhile (CPPARITY_ERROR_INPUT) and then removes the temporary file. */
cpparity_status output_file_commit(output_file *file, cpparity_error *error);

/* Removes the temporary file (after a failure). */
void output_file_abandon(output_file *file);

#endif
