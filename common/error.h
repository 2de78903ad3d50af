/*
 * error.h — how cpparity library code reports failure.
 *
 * Library functions never print and never exit. A function that can fail returns a
 * cpparity_status and, when it fails, fills a caller-owned cpparity_error with a message that
 * says what failed and where (file, line, field, rank as applicable). Only the command-line
 * driver decides to print the message and which exit code to use; the status values are the
 * exit codes of the interface (2 bad input, 3 environment or runtime failure).
 */
#ifndef CPPARITY_COMMON_ERROR_H
#define CPPARITY_COMMON_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

typedef enum cpparity_status {
    CPPARITY_OK = 0,            /* success */
    CPPARITY_ERROR_INPUT = 2,   /* bad input: case file, flag, refused configuration */
    CPPARITY_ERROR_RUNTIME = 3, /* environment or runtime failure: memory, library, timeout */
} cpparity_status;

#define CPPARITY_ERROR_TEXT 1024 /* bytes of an error message, NUL included */

typedef struct cpparity_error {
    cpparity_status status;            /* CPPARITY_OK until an error is recorded */
    char message[CPPARITY_ERROR_TEXT]; /* human-readable, no trailing newline */
} cpparity_error;

/* Records status and a printf-style message in error (may be NULL) and returns status, so a
 * caller can write `return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "...", ...);`. */
cpparity_status cpparity_error_set(cpparity_error *error, cpparity_status status,
                                   const char *format, ...) __attribute__((format(printf, 3, 4)));

/* Clears error to CPPARITY_OK with an empty message. error may be NULL. */
void cpparity_error_clear(cpparity_error *error);

#ifdef __cplusplus
}
#endif

#endif
