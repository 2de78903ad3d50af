/*
 * comm_hash.h — test-only: the value a communicator test sends from one rank to another, so that
 * a misplaced block is seen. Header-only: shared by test_comm_local.c (Criterion) and
 * mpi_comm_check.c (an MPI program).
 */
#ifndef CPPARITY_TESTS_COMM_HASH_H
#define CPPARITY_TESTS_COMM_HASH_H

#include <stdint.h>

#include "distributed/comm/comm.h"

/* Writes the element f(source, destination, index) of type to out: distinct for source and
 * destination < 4 and index < 16 in every type (the code 64·source + 16·destination + index fits
 * in one byte). */
static inline void hash_element(cpparity_element_type type, int source, int destination,
                                int64_t index, void *out) {
    const int code = 64 * source + 16 * destination + (int)index;
    switch (type) {
    case CPPARITY_FLOAT32:
        *(float *)out = (float)code + 0.25f;
        break;
    case CPPARITY_FLOAT64:
        *(double *)out = (double)code + 0.125;
        break;
    case CPPARITY_INT64:
        *(int64_t *)out = (int64_t)code * 1000000007LL - 5;
        break;
    case CPPARITY_INT8:
        *(int8_t *)out = (int8_t)(uint8_t)code;
        break;
    case CPPARITY_BFLOAT16:
        *(uint16_t *)out = (uint16_t)(code * 251 + 3);
        break;
    }
}

#endif
