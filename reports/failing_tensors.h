/*
 * failing_tensors.h — what the JUnit and Markdown reports (junit.h, markdown.h) both say about a
 * run item: its failing tensors worst first, and how a tensor's worst element and limit read.
 *
 * A failing tensor's severity is how far past its deciding limit (results_deciding_limit) it
 * is: error / limit, infinite when the tensor has non-finite values, a NaN error, or a zero limit
 * with a non-zero error (0 for a zero error under a zero limit). Failing tensors sort by severity,
 * worst first, ties in record order.
 *
 * Every function only reads the item or record it is given; the array failing_tensors returns is
 * the caller's, and the texts are written into the caller's buffers (truncated to size).
 */
#ifndef CPPARITY_REPORTS_FAILING_TENSORS_H
#define CPPARITY_REPORTS_FAILING_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "results_model/results.h"

/* A failing tensor and how far past its limit it is, for sorting worst first. */
typedef struct failing_tensor {
    double severity; /* error / limit; infinite for non-finite values or a zero limit */
    int64_t index;   /* into item->tensors */
} failing_tensor;

/* The failing tensors of item, worst first, in a new array of *count entries that the caller
 * frees with free(); NULL with *count 0 when none fail, or with *count -1 when memory is short. */
failing_tensor *failing_tensors(const run_item *item, int64_t *count);

/* The case name of an item, or "(no case)" when it has none. The string belongs to the item's
 * case (not NUL-terminated past CPPARITY_CASE_NAME bytes: print it bounded). */
const char *failing_tensors_case_name(const run_item *item);

/* The worst element's coordinates, "[b, position, vocab]" (at most 4 dimensions), or "scalar"
 * for a rank-0 tensor, or "none" when there is no worst element. */
void failing_tensors_worst_coordinates(const tensor_record *record, char *text, size_t size);

/* The deciding limit in words with where each part came from: "ratio 2 (default) <times> naive
 * 1e-06 + floor 1e-06 (suite)", followed for a cp > 1 item by "; CP only: <times> cp 1 8e-07";
 * where the CP-only rule decided, "CP only: ratio 2 (default) <times> cp 1 8e-07 + floor 1e-06
 * (suite); naive: <times> 1e-06" (times is the multiplication sign the report uses, e.g. "x" or
 * "×"). */
void failing_tensors_limit_origin(const tensor_record *record, const char *times, char *text,
                                  size_t size);

#endif
