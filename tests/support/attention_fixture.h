/*
 * attention_fixture.h — test-only: a small attention problem (layouts, q/k/v/dout, its mask)
 * built from a seed, and a naive dense O(S²) float64 attention written from the textbook formula,
 * sharing nothing with reference/ but the definition.
 */
#ifndef CPPARITY_TESTS_ATTENTION_FIXTURE_H
#define CPPARITY_TESTS_ATTENTION_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "reference/attention.h"
#include "reference/mask.h"
#include "tests/support/test_layouts.h"

typedef struct attention_fixture {
    reference_attention_shape shape;
    cpparity_attention_layer layer;
    uint64_t seed;
    int8_t *attention_mask; /* (B, S) */
    int64_t *position_ids;  /* (B, S) */
    bool *dense;            /* (B, S, S) definitional mask */
    double *q, *k, *v;      /* (B,S,H,Dh), (B,S,Hkv,Dh) ×2 */
    double *dout;           /* (B,S,H,Dh) */
    reference_mask mask;    /* built with block_size */
    double scale;           /* 1/sqrt(Dh) */
} attention_fixture;

/* Every mask type: causal, sliding W = 5 and 13, chunked C = 7 (row grid) and C = 6 (document
 * starts): ATTENTION_FIXTURE_MASKS of them. */
#define ATTENTION_FIXTURE_MASKS 5
extern const cpparity_attention_layer attention_fixture_every_mask[ATTENTION_FIXTURE_MASKS];

/* Two rows of S = 67 (prime; with 8-token tiles): left and right padding, packed documents (one of
 * length 1) and a document boundary inside a tile. */
extern const test_row_layout attention_fixture_padded_and_packed_67[2];

/* Builds a fixture; rows[b] gives row b's layout, or NULL for random layouts from the seed. */
void attention_fixture_init(attention_fixture *fixture, reference_attention_shape shape,
                            cpparity_attention_layer layer, const test_row_layout *rows,
                            int64_t block_size, uint64_t seed);
void attention_fixture_free(attention_fixture *fixture);

/* Naive dense attention: out (B,S,H,Dh), lse (B,H,S); fully masked rows give 0 and −∞. */
void naive_attention_forward(double *out, double *lse, const attention_fixture *fixture,
                             const double *q, const double *k, const double *v);

/* Element counts of the query-shaped and key-shaped tensors. */
int64_t fixture_query_elements(const attention_fixture *fixture);
int64_t fixture_key_elements(const attention_fixture *fixture);

#endif
