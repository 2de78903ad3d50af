/*
 * test_layouts.h — test-only helpers: deterministic random numbers, batch row layouts
 * (left padding, documents, right padding) and a dense mask evaluated straight from the wording
 * of docs/masks.md. The dense mask is S×S on purpose: tests use small S only.
 *
 * The dense mask is written independently of reference/mask.c (documents found by scanning for
 * breaks between k and q, floor division through floor() of a double), so that a shared
 * misreading of the definition cannot hide in both.
 */
#ifndef CPPARITY_TESTS_TEST_LAYOUTS_H
#define CPPARITY_TESTS_TEST_LAYOUTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/attention_layer.h"

/* A sequential stream over fixtures/random.h; failing tests print the seed. */
typedef struct test_random {
    uint64_t seed;    /* set by the test */
    uint64_t counter; /* starts at 0 */
} test_random;

uint64_t test_random_next(test_random *random);
/* Uniform integer in [low, high]. */
int64_t test_random_between(test_random *random, int64_t low, int64_t high);
/* Uniform double in [-1, 1). */
double test_random_signed(test_random *random);
/* Fills values (count) with uniform doubles in [-amplitude, amplitude). */
void test_random_fill(test_random *random, double *values, int64_t count, double amplitude);

/* One batch row: left padding, then documents of the given lengths, then right padding. */
typedef struct test_row_layout {
    int64_t left_padding;
    int64_t documents;
    int64_t document_lengths[16];
    int64_t right_padding;
    int64_t document_starts[16]; /* the position_ids of each document's first token (0: from 0;
                                    a document starting mid-stream has another) */
} test_row_layout;

/* Writes attention_mask (S) and position_ids (S) of one row: 0 on padding, positions counting
 * from each document's start. Returns false when the layout does not add up to seq_len. */
bool test_row_fill(const test_row_layout *layout, int64_t seq_len, int8_t *attention_mask,
                   int64_t *position_ids);

/* A random layout of seq_len tokens: padding on either side or none, several documents with
 * length-1 documents likely, a third of them starting mid-stream (a first position of 1 to 9,
 * never the one that would continue the document before), sometimes a row of padding only. */
test_row_layout test_row_random(test_random *random, int64_t seq_len);

/* dense[(b·S + q)·S + k] = allowed(b, q, k) from the definition, for every b, q, k. */
void test_dense_mask(bool *dense, int64_t batch, int64_t seq_len, const int8_t *attention_mask,
                     const int64_t *position_ids, cpparity_attention_layer layer);

#endif
