/*
 * random_cases.h — `cpparity run --random N`: N attention-level cases with random shapes and
 * masks, for a kernel author's soak runs (cases/README.md, Random cases). The cases are written
 * as suite text and read by the ordinary loader, so they are validated like a written suite.
 * The same seed and N give the same cases, on any machine.
 */
#ifndef CPPARITY_HARNESS_SUITE_RANDOM_CASES_H
#define CPPARITY_HARNESS_SUITE_RANDOM_CASES_H

#include <stdint.h>

#include "common/case.h"
#include "common/error.h"

#define RANDOM_CASES_MAX 100000 /* --random's largest N */

/* Loads count random cases drawn from seed into suite (named random-1 … random-N, each with
 * seed as its fixture seed). CPPARITY_ERROR_RUNTIME when out of memory. */
cpparity_status random_cases_load(uint64_t seed, int64_t count, cpparity_suite *suite,
                                  cpparity_error *error);

#endif
