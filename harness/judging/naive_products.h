/*
 * naive_products.h — the float32 matrix products of the naive baseline (naive_model.h), each a
 * plain sum in a fixed, documented order, fast enough that the baseline never costs more than
 * the float64 reference it is measured against.
 *
 * The order: every output element is one float32 accumulator, starting at 0, to which the
 * products of the contraction are added in increasing contraction index; the result is then
 * stored (`set`) or added once to the output's value (`add`). That is the order of the textbook
 * triple loop; what makes it fast is only where the operands sit: tiles of the output computed
 * by the reference's threads (reference/parallel.h), micro-tiles of six rows by sixteen columns
 * in twelve vector registers (each lane its own accumulator, so no sum is reassociated), and both
 * operands copied into panels that stay in cache. On a CPU with AVX2 and FMA each step is a fused
 * multiply-add (one rounding), elsewhere a multiply then an add: the same element always takes
 * the same path on a machine, whatever the thread count.
 *
 * Independence from the implementation under test: this is cpparity's own code, not BLAS (the
 * CPU implementation calls OpenBLAS's sgemm), so a fault in a BLAS library cannot hide in the
 * baseline's error.
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_PRODUCTS_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_PRODUCTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A matrix operand: element (i, j) at data[i·row_stride + j·column_stride]. */
typedef struct naive_matrix {
    const float *data;
    int64_t row_stride;
    int64_t column_stride;
} naive_matrix;

/* result (rows × columns, row-major with leading dimension result_stride) = (add ? result : 0)
 * + left (rows × depth) · right (depth × columns), each element summed as above. Runs on the
 * reference's threads; allocates per-thread scratch and returns false when it cannot (nothing
 * written then). */
bool naive_product(float *result, int64_t result_stride, naive_matrix left, naive_matrix right,
                   int64_t rows, int64_t columns, int64_t depth, bool add);

/* A sum over the contraction cut into consecutive parts (one rank's tokens, then the next
 * rank's: docs/architecture.md, "Long context: row blocks"): naive_product with each element's
 * accumulator starting from result's value instead of 0, and stored back as it is. Resuming part
 * after part from a zero result, then naive_product_finish, gives the bits one naive_product over
 * every part adds to a zero result (0 + the sum). false when out of memory. */
bool naive_product_resume(float *result, int64_t result_stride, naive_matrix left,
                          naive_matrix right, int64_t rows, int64_t columns, int64_t depth);

/* result[i] = 0 + result[i] for count values: the add that ends a resumed sum (a −0 sum becomes
 * +0, as adding it to a zero result does). */
void naive_product_finish(float *result, int64_t count);

/* naive_product on the calling thread alone, for use inside a work item of reference/parallel.h:
 * the same bits, with scratch of naive_product_scratch_bytes() (64-byte aligned) given by the
 * caller, so it cannot fail. */
void naive_product_on_this_thread(float *result, int64_t result_stride, naive_matrix left,
                                  naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                  bool add, void *scratch);
size_t naive_product_scratch_bytes(void);

/* For attention's tables (naive_attention.c), whose left operand already lies so that a
 * micro-tile's rows are close together: naive_product_on_this_thread without an add (resume
 * false) or naive_product_resume on the calling thread (resume true), reading the left operand
 * where it lies instead of packing it. The same bits as those calls; the same scratch. */
void naive_product_left_in_place(float *result, int64_t result_stride, naive_matrix left,
                                 naive_matrix right, int64_t rows, int64_t columns, int64_t depth,
                                 bool resume, void *scratch);

/* Whether the products take fused multiply-adds on this CPU (AVX2 and FMA): tests replay them. */
bool naive_products_fused(void);

/* The three products of a linear layer, weight (O, I) as torch.nn.Linear stores it:
 *   out (N, O)      = in (N, I) · weightᵀ
 *   din (N, I)     += dout (N, O) · weight
 *   dweight (O, I) += dout (N, O)ᵀ · in (N, I)
 * false when out of memory. */
bool naive_linear_forward(float *out, const float *in, const float *weight, int64_t rows,
                          int64_t in_features, int64_t out_features);
bool naive_linear_input_gradient(float *din, const float *dout, const float *weight, int64_t rows,
                                 int64_t in_features, int64_t out_features);
bool naive_linear_weight_gradient(float *dweight, const float *dout, const float *in, int64_t rows,
                                  int64_t in_features, int64_t out_features);
/* dweight's sum over tokens resumed (naive_product_resume): the rows are one part of them. */
bool naive_linear_weight_gradient_resume(float *dweight, const float *dout, const float *in,
                                         int64_t rows, int64_t in_features, int64_t out_features);

#endif
