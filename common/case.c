/* case.c — name tables and releasing suites (see case.h). */
#include "common/case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"

const char *const cpparity_dtype_names[CPPARITY_DTYPE_COUNT] = {"f32", "bf16"};
const char *const cpparity_layout_names[CPPARITY_LAYOUT_COUNT] = {"contiguous", "zigzag",
                                                                  "round-robin"};
const char *const cpparity_algorithm_names[CPPARITY_ALGORITHM_COUNT] = {"ulysses", "ring",
                                                                        "hybrid"};
const char *const cpparity_case_level_names[CPPARITY_LEVEL_COUNT] = {"model", "attention"};
const char *const cpparity_tensor_kind_names[CPPARITY_KIND_COUNT] = {"loss", "logits", "grads"};
const char *const cpparity_tolerance_origin_names[CPPARITY_ORIGIN_COUNT] = {"default", "suite",
                                                                            "case"};

const char *cpparity_dtype_name(cpparity_dtype dtype) {
    return cpparity_name_of(cpparity_dtype_names, CPPARITY_DTYPE_COUNT, (int)dtype);
}

const char *cpparity_layout_name(cpparity_layout layout) {
    return cpparity_name_of(cpparity_layout_names, CPPARITY_LAYOUT_COUNT, (int)layout);
}

const char *cpparity_algorithm_name(cpparity_algorithm algorithm) {
    return cpparity_name_of(cpparity_algorithm_names, CPPARITY_ALGORITHM_COUNT, (int)algorithm);
}

void cpparity_algorithm_choice_name(cpparity_algorithm_choice choice, char *text, size_t size) {
    if (choice.kind == CPPARITY_ALGORITHM_HYBRID) {
        snprintf(text, size, "hybrid:%lldx%lld", (long long)choice.ulysses_degree,
                 (long long)choice.ring_degree);
    } else {
        snprintf(text, size, "%s", cpparity_algorithm_name(choice.kind));
    }
}

const char *cpparity_tensor_kind_name(cpparity_tensor_kind kind) {
    return cpparity_name_of(cpparity_tensor_kind_names, CPPARITY_KIND_COUNT, (int)kind);
}

const char *cpparity_tolerance_origin_name(cpparity_tolerance_origin origin) {
    return cpparity_name_of(cpparity_tolerance_origin_names, CPPARITY_ORIGIN_COUNT, (int)origin);
}

void cpparity_row_layouts_free(cpparity_row_layout *rows, int64_t count) {
    for (int64_t i = 0; rows != NULL && i < count; i++) {
        free(rows[i].document_lengths);
        free(rows[i].start_positions);
    }
    free(rows);
}

void cpparity_suite_free(cpparity_suite *suite) {
    if (suite == NULL) {
        return;
    }
    for (int64_t i = 0; suite->cases != NULL && i < suite->count; i++) {
        cpparity_row_layouts_free(suite->cases[i].rows, suite->cases[i].batch_size);
    }
    free(suite->cases);
    memset(suite, 0, sizeof *suite);
}

const cpparity_case *cpparity_suite_find(const cpparity_suite *suite, const char *name) {
    for (int64_t i = 0; suite != NULL && name != NULL && i < suite->count; i++) {
        if (strcmp(suite->cases[i].name, name) == 0) {
            return &suite->cases[i];
        }
    }
    return NULL;
}
