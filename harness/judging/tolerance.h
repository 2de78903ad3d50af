/*
 * tolerance.h — cpparity's built-in tolerances (docs/tolerances.md): the values a case gets for
 * every (dtype, tensor kind) unless its suite or the case itself sets them.
 */
#ifndef CPPARITY_HARNESS_JUDGING_TOLERANCE_H
#define CPPARITY_HARNESS_JUDGING_TOLERANCE_H

#include "common/case.h"

/* The built-in tolerance for a dtype and tensor kind (every origin CPPARITY_ORIGIN_DEFAULT). */
cpparity_tolerance cpparity_tolerance_default(cpparity_dtype dtype, cpparity_tensor_kind kind);

#endif
