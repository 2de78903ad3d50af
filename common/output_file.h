/*
 * output_file.h — files that appear complete or not at all, and never replace another.
 *
 * A writer asks for a temporary name next to the destination, writes there, then commits:
 * the temporary file is hard-linked to the destination (which fails if the destination exists,
 * so nothing is ever overwritten, even in a race) and then unlinked. Every temporary file is
 * registered (temporary_files.h), so a signal removes it (interrupt.h); a crash leaves at most a
 * `.NAME.tmp-XXXXXX` file, never a half-written destination.
 *
 * The several outputs of one command form an output_set: each is written to its temporary file,
 * then all are published together, or, when any fails, none is and every temporary is removed.
 */
#ifndef CPPARITY_COMMON_OUTPUT_FILE_H
#define CPPARITY_COMMON_OUTPUT_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"

#define OUTPUT_FILE_PATH 4096
#define OUTPUT_FILE_FLAG 32
#define OUTPUT_SET_MAX 8

typedef struct output_file {
    char destination[OUTPUT_FILE_PATH]; /* where the file will appear */
    char temporary[OUTPUT_FILE_PATH];   /* where it is written until commit */
    char flag[OUTPUT_FILE_FLAG];        /* the option that named it ("--out"), for messages */
    int slot;                           /* its temporary_files.h registration; -1 when none */
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

/* Writes a text file's content into file's temporary: put(stream, context) writes it. A failure
 * to open, write or close (a full disk: ENOSPC, EDQUOT, EFBIG) is CPPARITY_ERROR_RUNTIME naming
 * the flag, the destination and the system's reason. */
cpparity_status output_file_write_text(const output_file *file,
                                       void (*put)(FILE *stream, const void *context),
                                       const void *context, cpparity_error *error);

/* A claim on a destination for the length of a command: a hidden `.NAME.cpparity-claim` file
 * next to it, created exclusively and holding the claiming process's id and host. */
typedef struct output_claim {
    char path[OUTPUT_FILE_PATH]; /* the claim file; "" when none is held */
    int slot;                    /* its temporary_files.h registration (a signal removes it) */
} output_claim;

/* Claims destination, so that a second command writing the same path is refused at once
 * (CPPARITY_ERROR_INPUT naming the flag, the path and the process that holds it) instead of
 * after its compute. A claim whose process no longer runs (same host) is taken over. */
cpparity_status output_file_claim(output_claim *claim, const char *destination, const char *flag,
                                  cpparity_error *error);

/* Gives a claim up (removes its file). Harmless on a zeroed or released claim. */
void output_file_release(output_claim *claim);

/* A whole text file at destination: output_file_begin, output_file_write_text, then commit (or
 * abandon on failure), for a command with one output. */
cpparity_status output_file_publish_text(const char *destination, const char *flag,
                                         void (*put)(FILE *stream, const void *context),
                                         const void *context, cpparity_error *error);

/* The outputs of one command, published together. Zero-initialise, then output_set_add each. */
typedef struct output_set {
    output_file files[OUTPUT_SET_MAX];
    int count;
} output_set;

/* output_file_begin for one more output of the set; *file is where to write it. */
cpparity_status output_set_add(output_set *set, const char *destination, const char *flag,
                               output_file **file, cpparity_error *error);

/* Publishes every file of the set, or none: when one cannot be published, those already linked
 * are unlinked again. Every temporary file is removed either way; signals are deferred until
 * the set is complete (interrupt.h). */
cpparity_status output_set_publish(output_set *set, cpparity_error *error);

/* Removes every temporary file of the set (after a failure). */
void output_set_abandon(output_set *set);

#endif
