/*
 * tolerance.c — cpparity's built-in tolerances (see tolerance.h and docs/tolerances.md).
 *
 * Errors are relative L2 errors against the float64 reference. A tensor passes when its error is
 * at most ratio × the naive same-dtype baseline's error + floor (and, for cp > 1, at most
 * ratio × its own error at cp = 1 + floor). Ratios follow FlashAttention's practice (2× for
 * outputs, 3× for gradients, against a naive implementation of the same precision). The floor
 * absorbs differences of summation order and blocking between two correct implementations of
 * the same precision, which the ratio alone does not cover where the baseline's error is tiny.
 * The ceiling bounds the naive baseline itself against float64: a baseline over it means the
 * harness (or the ceiling) is wrong, and the run says so instead of judging.
 */
#include "harness/judging/tolerance.h"

cpparity_tolerance cpparity_tolerance_default(cpparity_dtype dtype, cpparity_tensor_kind kind) {
    cpparity_tolerance tolerance = {0};
    tolerance.ratio = kind == CPPARITY_KIND_GRADS ? 3.0 : 2.0;
    if (dtype == CPPARITY_DTYPE_F32) {
        /* float32 has a unit roundoff of 6e-8; sums over a few thousand terms stay near 1e-6 */
        tolerance.floor = 1e-6;
        tolerance.ceiling = 1e-4;
    } else {
        /* bfloat16 has a unit roundoff of 3.9e-3; stored at ~20 points per layer, outputs of a
         * small model err by ~1e-2. Gradients pass through the softmax Jacobian, whose
         * cancellations make dq and dk of a naive bf16 model err by up to ~5e-2 per tensor
         * (measured: tests/test_naive_model.c), so their ceiling is 1e-1. */
        tolerance.floor = 1e-2;
        tolerance.ceiling = kind == CPPARITY_KIND_GRADS ? 1e-1 : 5e-2;
    }
    tolerance.ratio_origin = CPPARITY_ORIGIN_DEFAULT;
    tolerance.floor_origin = CPPARITY_ORIGIN_DEFAULT;
    tolerance.ceiling_origin = CPPARITY_ORIGIN_DEFAULT;
    return tolerance;
}
