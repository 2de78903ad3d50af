/*
 * discrimination.h — can a case tell a mask feature being dropped? (tolerances.md §4)
 *
 * For each mask feature a case uses (window, chunks, documents, padding) the float64 reference
 * is recomputed with that feature switched off; if the compared tensors change by less than
 * 10× the tightest tolerance limit applied to the case, the case cannot detect that feature
 * being dropped, and is reported as not discriminating for it. Reported, not failed.
 */
#ifndef CPPARITY_HARNESS_JUDGING_DISCRIMINATION_H
#define CPPARITY_HARNESS_JUDGING_DISCRIMINATION_H

#include <stdint.h>

#include "common/error.h"
#include "common/case.h"
#include "harness/judging/reference_cache.h"
#include "reference/team.h"
#include "results_model/results.h"

/* Appends to results->discrimination one record per feature the case uses. normal is the
 * case's reference run with every feature (reference_cache.h); threshold_limit is the tightest
 * limit applied to the case's tensors (the threshold is 10× it); seed the fixture seed the case
 * ran with. Each rerun is computed by team (reference/team.h; this process its rank 0, the
 * others in discrimination_share), or by this process alone when team is NULL: the same bits
 * either way, so the records do not depend on the rank count. */
cpparity_status discrimination_check(run_results *results, const cpparity_case *checked,
                                     const reference_outputs *normal, uint64_t seed,
                                     double threshold_limit, const reference_team *team,
                                     cpparity_error *error);

/* A rank of team other than its rank 0: its share of the reruns discrimination_check makes on
 * rank 0 for the same case and seed, in the same order; nothing is kept. */
cpparity_status discrimination_share(const cpparity_case *checked, uint64_t seed,
                                     const reference_team *team, cpparity_error *error);

/* How many reruns the case needs (the features it uses): 0, nothing to check. */
int discrimination_reruns(const cpparity_case *checked);

#endif
