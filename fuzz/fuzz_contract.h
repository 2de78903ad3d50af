/*
 * fuzz_contract.h — the half of a reader's contract every fuzz target checks alike: a success
 * leaves the error clear; a failure is CPPARITY_ERROR_INPUT or CPPARITY_ERROR_RUNTIME, equal to
 * the error's status, with a non-empty, NUL-terminated message that begins with the input's
 * display name. A broken contract is printed (naming the target) and abort()ed, so libFuzzer
 * records the input. Each target checks what is its own (what a success holds, that a failure
 * holds nothing) with fuzz_contract_broken too.
 */
#ifndef CPPARITY_FUZZ_CONTRACT_H
#define CPPARITY_FUZZ_CONTRACT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* Prints what broke, the status and the message (when it is terminated), and aborts. */
static inline void fuzz_contract_broken(const char *target, const char *what,
                                        cpparity_status status, const cpparity_error *error) {
    fprintf(stderr, "%s: contract broken: %s (returned %d, error status %d)\n", target, what,
            (int)status, (int)error->status);
    if (memchr(error->message, '\0', sizeof error->message) != NULL) {
        fprintf(stderr, "%s: message: %s\n", target, error->message);
    }
    abort();
}

/* A success (status OK) must leave the error's status OK. */
static inline void fuzz_check_success(const char *target, cpparity_status status,
                                      const cpparity_error *error) {
    if (error->status != CPPARITY_OK) {
        fuzz_contract_broken(target, "success with an error status set", status, error);
    }
}

/* A failure (status not OK): INPUT or RUNTIME, the error's own status, a non-empty terminated
 * message beginning with prefix — for bad input always, for a runtime failure (out of memory)
 * only when runtime_prefixed. */
static inline void fuzz_check_failure(const char *target, cpparity_status status,
                                      const cpparity_error *error, const char *prefix,
                                      bool runtime_prefixed) {
    if (status != CPPARITY_ERROR_INPUT && status != CPPARITY_ERROR_RUNTIME) {
        fuzz_contract_broken(target, "a status other than OK, INPUT or RUNTIME", status, error);
    }
    if (error->status != status) {
        fuzz_contract_broken(target, "the error's status differs from the one returned", status,
                             error);
    }
    if (memchr(error->message, '\0', sizeof error->message) == NULL) {
        fuzz_contract_broken(target, "the message is not NUL-terminated", status, error);
    }
    if (error->message[0] == '\0') {
        fuzz_contract_broken(target, "the message is empty", status, error);
    }
    if ((status == CPPARITY_ERROR_INPUT || runtime_prefixed) &&
        strncmp(error->message, prefix, strlen(prefix)) != 0) {
        fuzz_contract_broken(target, "the message does not begin with the input's name", status,
                             error);
    }
}

#endif
