/*
 * checked_size.h — size arithmetic that cannot wrap: every element count and byte size computed
 * from input (case files, flags) goes through these, so a case too large for int64 or size_t is
 * refused with a message instead of allocating a wrapped size and writing past it.
 */
#ifndef CPPARITY_COMMON_CHECKED_SIZE_H
#define CPPARITY_COMMON_CHECKED_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most elements one tensor or buffer may hold: its bytes (at 8 per element, float64) and
 * sums of a few of them still fit int64 and size_t. */
#define CPPARITY_MAX_ELEMENTS (INT64_MAX / 64)

/* *product = a · b; false (product untouched) on overflow or a negative factor. */
static inline bool cpparity_multiply_checked(int64_t a, int64_t b, int64_t *product) {
    int64_t result;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &result)) {
        return false;
    }
    *product = result;
    return true;
}

/* *sum = a + b; false (sum untouched) on overflow or a negative term. */
static inline bool cpparity_add_checked(int64_t a, int64_t b, int64_t *sum) {
    int64_t result;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &result)) {
        return false;
    }
    *sum = result;
    return true;
}

/* *product = the product of count factors, at most CPPARITY_MAX_ELEMENTS; false otherwise. */
static inline bool cpparity_elements_checked(const int64_t *factors, int count, int64_t *product) {
    int64_t result = 1;
    for (int i = 0; i < count; i++) {
        if (!cpparity_multiply_checked(result, factors[i], &result)) {
            return false;
        }
    }
    if (result > CPPARITY_MAX_ELEMENTS) {
        return false;
    }
    *product = result;
    return true;
}

#endif
