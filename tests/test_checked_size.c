/*
 * test_checked_size.c — size arithmetic that cannot wrap (common/checked_size.h), and the tensor
 * table refusing a tensor whose element count int64 cannot hold (once a segfault: a case with
 * vocab_size 2^62 wrapped the embedding's count and wrote past a small allocation).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common/checked_size.h"
#include "common/tensor_table.h"

Test(checked_size, products_and_sums_that_overflow__are_refused) {
    int64_t result = 7;
    cr_expect(cpparity_multiply_checked(3, 4, &result) && result == 12);
    cr_expect(!cpparity_multiply_checked(INT64_MAX / 2 + 1, 2, &result));
    cr_expect(!cpparity_multiply_checked(-1, 2, &result), "a negative size is refused");
    cr_expect_eq(result, 12, "a refused product leaves the result untouched");
    cr_expect(cpparity_add_checked(INT64_MAX - 1, 1, &result) && result == INT64_MAX);
    cr_expect(!cpparity_add_checked(INT64_MAX, 1, &result));
    const int64_t fits[] = {1024, 1024, 1024}, too_many[] = {(int64_t)1 << 62, 8};
    cr_expect(cpparity_elements_checked(fits, 3, &result) && result == (int64_t)1 << 30);
    cr_expect(!cpparity_elements_checked(too_many, 2, &result));
    const int64_t just_over[] = {CPPARITY_MAX_ELEMENTS + 1};
    cr_expect(!cpparity_elements_checked(just_over, 1, &result),
              "more than CPPARITY_MAX_ELEMENTS is refused even without overflow");
}

Test(checked_size, tensor_table__refuses_counts_and_totals_int64_cannot_hold) {
    cpparity_tensor_table table = {0};
    cpparity_error error;
    const int64_t embedding[] = {(int64_t)1 << 62, 8}; /* vocab 2^62 x hidden 8 */
    cr_expect_eq(cpparity_tensor_table_add(&table, 2, embedding, &error, "embed"),
                 CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "embed") && strstr(error.message, "4611686018427387904 x 8"),
              "%s", error.message);
    cr_expect_eq(table.count, 0, "nothing is added");
    /* each tensor fits, their sum does not */
    const int64_t half[] = {CPPARITY_MAX_ELEMENTS / 2 + 1};
    cr_expect_eq(cpparity_tensor_table_add(&table, 1, half, &error, "a"), CPPARITY_OK);
    cr_expect_eq(cpparity_tensor_table_add(&table, 1, half, &error, "b"), CPPARITY_ERROR_INPUT);
    cr_expect_eq(table.count, 1);
    cr_expect_eq(table.total, CPPARITY_MAX_ELEMENTS / 2 + 1);
    cpparity_tensor_table_free(&table);
}
