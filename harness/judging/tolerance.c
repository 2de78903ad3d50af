/*
 * tolerance.c — cpparity's built-in tolerances (see tolerance.h and docs/tolerances.md).
 *
 * Errors are relative L2 errors against the float64 reference. Ratios follow FlashAttention's
 * practice (2× for outputs, 3× for gradients, against an implementation of the same precision).
 * The floor absorbs the reordering noise that sharding adds on top of the baseline; the ceiling
 * bounds the baseline (cp = 1) itself against float64, so a kernel wrong at cp = 1 fails too.
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
        /* bfloat16 has a unit roundoff of 3.9e-3 */
        tolerance.floor = 1e-2;
        tolerance.ceiling = 5e-2;
    }
    tolerance.ratio_origin = CPPARITY_ORIGIN_DEFAULT;
    tolerance.floor_origin = CPPARITY_ORIGIN_DEFAULT;
    tolerance.ceiling_origin = CPPARITY_ORIGIN_DEFAULT;
    return tolerance;
}
