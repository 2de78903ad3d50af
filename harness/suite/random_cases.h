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

/* The same cases as suite text (malloc'd, NUL-terminated; free it), or NULL when out of memory:
 * what `cpparity export --random` keeps, so that `judge` loads the very cases again. */
char *random_cases_text(uint64_t seed, int64_t count);

/* How such a suite is named in messages and results: "--random N --seed S". */
#define RANDOM_CASES_DISPLAY 96
void random_cases_display(uint64_t seed, int64_t count, char display[RANDOM_CASES_DISPLAY]);

#endif
