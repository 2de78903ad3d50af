/*
 * reference_store.h — the float64 reference's outputs of a case kept on disk between runs
 * (`--reference-cache DIR`), so that a nightly job never computes the same reference twice.
 *
 * An entry is one file DIR/<key>.ref, the key a 128-bit hash of everything the outputs depend
 * on: the resolved case (model, batch layout), the seed, REFERENCE_STORE_VERSION (bumped when
 * the reference's or the fixtures' arithmetic changes) and the OpenBLAS kernel the machine uses
 * (its dgemm on another core type may round differently). The file holds the key again, the
 * sizes, the loss, logits, gradients and fully masked rows, and a checksum of all of it; an
 * entry is published whole (output_file.h) or not at all. A file that is unreadable, truncated,
 * of another key or size, or whose checksum fails is never trusted: the caller is told why,
 * recomputes, and replaces it.
 */
#ifndef CPPARITY_HARNESS_JUDGING_REFERENCE_STORE_H
#define CPPARITY_HARNESS_JUDGING_REFERENCE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/case.h"
#include "common/error.h"

/* Bump when the float64 reference's or the fixtures' arithmetic changes. */
#define REFERENCE_STORE_VERSION 4

typedef struct reference_store_key {
    uint64_t words[2]; /* two independent 64-bit hashes */
    char hex[33];      /* their 32 hex digits, the file's name */
} reference_store_key;

/* What an entry holds (arrays owned by the caller; sizes from the case). */
typedef struct reference_store_entry {
    int64_t batch, seq_len, hidden, parameters; /* B, S, D, P */
    double loss;
    double *final_normed;  /* [B, S, D] */
    double *gradients;     /* (P) */
    uint8_t *fully_masked; /* [B, S] */
} reference_store_entry;

/* The key of (case, seed) on this machine. */
reference_store_key reference_store_key_of(const cpparity_case *c, uint64_t seed);

/* Loads the entry of key from directory into entry, whose sizes and arrays the caller set.
 * true when found and intact; false when there is none (why is "") or it cannot be trusted (why
 * says what is wrong: the caller recomputes and stores over it). */
bool reference_store_load(const char *directory, const reference_store_key *key,
                          reference_store_entry *entry, char *why, size_t why_size);

/* Stores entry under key in directory (replacing an entry that could not be trusted; another
 * process storing the same key at the same time is harmless). CPPARITY_ERROR_RUNTIME naming the
 * file when it cannot be written. */
cpparity_status reference_store_save(const char *directory, const reference_store_key *key,
                                     const reference_store_entry *entry, cpparity_error *error);

#endif
