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

/* --- estimates: sums and products of many sizes, checked once ------------------------------ */

#define CPPARITY_SIZER_TEXT 256 /* bytes of the name of the size that overflowed, NUL included */

/* A running size computation (memory estimates): products and sums of sizes, where the first one
 * that overflows int64 is remembered by name and every later result is 0, so that one check at
 * the end covers them all. Start from CPPARITY_SIZER_START. */
typedef struct cpparity_sizer {
    bool ok;                        /* nothing has overflowed */
    char what[CPPARITY_SIZER_TEXT]; /* the first size that overflowed, when !ok */
} cpparity_sizer;

#define CPPARITY_SIZER_START                                                                       \
    { true, "" }

/* Marks s as overflowed at what (the first such name is kept, cut to fit). */
static inline void cpparity_sizer_fail(cpparity_sizer *s, const char *what) {
    if (s->ok) {
        s->ok = false;
        size_t i = 0;
        for (; what[i] != '\0' && i + 1 < sizeof s->what; i++) {
            s->what[i] = what[i];
        }
        s->what[i] = '\0';
    }
}

/* The product of count factors (what names it when it overflows), or 0 once s has overflowed. */
static inline int64_t cpparity_sizer_product(cpparity_sizer *s, const char *what,
                                             const int64_t *factors, int count) {
    int64_t result = 1;
    for (int i = 0; i < count; i++) {
        if (!cpparity_multiply_checked(result, factors[i], &result)) {
            cpparity_sizer_fail(s, what);
        }
    }
    return s->ok ? result : 0;
}

/* The sum of count terms, or 0 once s has overflowed. */
static inline int64_t cpparity_sizer_sum(cpparity_sizer *s, const int64_t *terms, int count) {
    int64_t result = 0;
    for (int i = 0; i < count; i++) {
        if (!cpparity_add_checked(result, terms[i], &result)) {
            cpparity_sizer_fail(s, "a sum of the sizes");
        }
    }
    return s->ok ? result : 0;
}

/* The largest of count values (0 for none below 0). */
static inline int64_t cpparity_largest_of(const int64_t *values, int count) {
    int64_t result = 0;
    for (int i = 0; i < count; i++) {
        result = values[i] > result ? values[i] : result;
    }
    return result;
}

#define CPPARITY_SIZES_COUNT(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* CPPARITY_PRODUCT(s, "what", a, b, ...), CPPARITY_SUM(s, a, b, ...), CPPARITY_LARGEST(a, ...). */
#define CPPARITY_PRODUCT(s, what, ...)                                                             \
    cpparity_sizer_product((s), (what), (int64_t[]){__VA_ARGS__}, CPPARITY_SIZES_COUNT(__VA_ARGS__))
#define CPPARITY_SUM(s, ...)                                                                       \
    cpparity_sizer_sum((s), (int64_t[]){__VA_ARGS__}, CPPARITY_SIZES_COUNT(__VA_ARGS__))
#define CPPARITY_LARGEST(...)                                                                      \
    cpparity_largest_of((int64_t[]){__VA_ARGS__}, CPPARITY_SIZES_COUNT(__VA_ARGS__))

#endif
