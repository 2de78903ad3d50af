/*
 * naive_team.h — the naive baseline's exchanges when it is spread over the ranks of a reference
 * team (reference/team.h, docs/architecture.md "Long context: row blocks"): the team's own four,
 * for float32 values. They travel as float64, which holds every float32 exactly, so one transport
 * serves the reference and the baseline; each call converts a bounded piece at a time.
 *
 * As for the reference, a sum over tokens is continued rank after rank in rank order (the
 * ranks hold consecutive row blocks), so the baseline's bits do not depend on the rank count. A
 * NULL team, or one of size 1, exchanges nothing.
 */
#ifndef CPPARITY_HARNESS_JUDGING_NAIVE_TEAM_H
#define CPPARITY_HARNESS_JUDGING_NAIVE_TEAM_H

#include <stdint.h>

#include "common/error.h"
#include "reference/team.h"

/* whole (Σ rows, width) = every rank's `rows[r]` rows of width values at mine, in rank order
 * (reference_team_gather_rows). */
cpparity_status naive_team_gather_rows(const reference_team *team, const float *mine,
                                       const int64_t *rows, int64_t width, float *whole,
                                       cpparity_error *error);

/* reference_team_pipeline for float32 groups: group g is values(context, g, &count); rank r runs
 * add(context, g) on it once the ranks before it have (rank 0 on its own values, the others on
 * the sum handed on); the last rank ends with every group's sum. */
typedef float *(*naive_team_group_values)(void *context, int64_t group, int64_t *count);
cpparity_status naive_team_pipeline(const reference_team *team, int64_t groups,
                                    naive_team_group_values values,
                                    void (*add)(void *context, int64_t group), void *context,
                                    cpparity_error *error);

/* The pipeline of one group: buffer (count). */
cpparity_status naive_team_chain(const reference_team *team, float *buffer, int64_t count,
                                 void (*add)(void *context), void *context, cpparity_error *error);

/* values (count) of the last rank copied to every rank. */
cpparity_status naive_team_from_last(const reference_team *team, float *values, int64_t count,
                                     cpparity_error *error);

#endif
