/*
 * test_discrimination.c — the discrimination check (harness/judging/discrimination.h): it says a
 * case detects a mask feature exactly when switching that feature off changes the reference by
 * at least 10× the case's tightest limit. A check that always (or never) says "detects" fails
 * here: a window of 2 changes everything, a window longer than the sequence changes nothing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "distributed/comm/comm_local.h"
#include "harness/judging/discrimination.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/reference_team_comm.h"
#include "harness/suite/case_file.h"

#define MODEL                                                                                      \
    "defaults:\n"                                                                                  \
    "  model: {vocab_size: 32, hidden_size: 16, num_hidden_layers: 2, num_attention_heads: 2,\n"   \
    "          num_key_value_heads: 1, head_dim: 8, intermediate_size: 24,\n"                      \
    "          layer_types: [full_attention, sliding_attention]}\n"                                \
    "  cp: [1]\n"                                                                                  \
    "  seed: 5\n"

/* Loads one case from text, runs its reference and the check with the given tightest limit. */
/* What the ranks of a spread check share: the case, its full reference, and rank 0's records. */
typedef struct spread_check {
    const cpparity_case *checked;
    const reference_outputs *normal;
    double limit;
    run_results results; /* rank 0's */
} spread_check;

static cpparity_status spread_rank(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_check *check = argument;
    const reference_team team = reference_team_of_comm(comm);
    if (comm->rank == 0) {
        return discrimination_check(&check->results, check->checked, check->normal,
                                    check->checked->seed, check->limit, &team, error);
    }
    return discrimination_share(check->checked, check->checked->seed, &team, error);
}

static void check(const char *text, double limit, run_results *results) {
    cpparity_suite suite;
    cpparity_error error;
    cr_assert_eq(cpparity_suite_load_text(text, strlen(text), "d.yaml", &suite, &error),
                 CPPARITY_OK, "%s", error.message);
    reference_cache cache = {0};
    const reference_outputs *normal = NULL;
    int computed = 0;
    cr_assert_eq(reference_cache_get(&cache, 0, &suite.cases[0], suite.cases[0].seed, &normal,
                                     &computed, &error),
                 CPPARITY_OK, "%s", error.message);
    memset(results, 0, sizeof *results);
    cr_assert_eq(discrimination_check(results, &suite.cases[0], normal, suite.cases[0].seed, limit,
                                      NULL, &error),
                 CPPARITY_OK, "%s", error.message);
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        results->discrimination[i].source = NULL; /* the suite goes now */
    }
    reference_cache_free(&cache);
    cpparity_suite_free(&suite);
}

static const discrimination_record *find(const run_results *results, const char *feature) {
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        if (strcmp(results->discrimination[i].feature, feature) == 0) {
            return &results->discrimination[i];
        }
    }
    return NULL;
}

/* W = 2 on S = 16: dropping the window changes the outputs by far more than 10 × 1e-6. */
Test(discrimination, narrow_window__detected) {
    run_results results;
    check(MODEL "cases:\n  - name: w2\n    model: {sliding_window: 2}\n    seq_len: 16\n"
                "    rows: [{documents: [16]}]\n",
          1e-6, &results);
    cr_assert_eq(results.discrimination_count, 1, "only the window is used");
    const discrimination_record *window = find(&results, "window");
    cr_assert_not_null(window);
    cr_assert(window->change > 1e-3, "change %g", window->change);
    cr_assert_float_eq(window->threshold, 1e-5, 1e-20);
    cr_assert(window->discriminating);
    free(results.discrimination);
}

/* W = 64 > S = 16: the sliding layer is full attention already, so switching the window off
 * changes nothing at all, and the case cannot detect a dropped window. */
Test(discrimination, window_longer_than_sequence__not_detected) {
    run_results results;
    check(MODEL "cases:\n  - name: w64\n    model: {sliding_window: 64}\n    seq_len: 16\n"
                "    rows: [{documents: [16]}]\n",
          1e-6, &results);
    const discrimination_record *window = find(&results, "window");
    cr_assert_not_null(window);
    cr_assert_eq(window->change, 0.0, "change %g", window->change);
    cr_assert_not(window->discriminating);
    free(results.discrimination);
}

/* The threshold decides: the same change is detected under a tight limit and not under a loose
 * one (10 × the limit above the change). */
Test(discrimination, threshold_is_ten_times_the_limit) {
    run_results tight, loose;
    const char *text = MODEL "cases:\n  - name: docs\n    model: {sliding_window: 64}\n"
                             "    seq_len: 16\n    rows: [{documents: [5, 11]}]\n";
    check(text, 1e-9, &tight);
    const discrimination_record *documents = find(&tight, "documents");
    cr_assert_not_null(documents);
    cr_assert(documents->change > 1e-6, "change %g", documents->change);
    cr_assert(documents->discriminating);
    check(text, documents->change, &loose); /* threshold 10 × the change */
    const discrimination_record *again = find(&loose, "documents");
    cr_assert_not_null(again);
    cr_assert_float_eq(again->change, documents->change, 1e-15 * documents->change);
    cr_assert_not(again->discriminating);
    free(tight.discrimination);
    free(loose.discrimination);
}

/* Features are checked where used: padding and documents here, and no window or chunks, as no
 * layer slides or chunks; a plain causal case has no record at all. Padding whose positions
 * continue into the first document is only masked as padding, so dropping that changes the
 * outputs (with positions 0 each padding token is a document of its own, masked anyway). */
Test(discrimination, only_features_the_case_uses) {
    run_results results;
    check(MODEL "cases:\n  - name: padded\n    model: {layer_types: [full_attention, "
                "full_attention]}\n    seq_len: 16\n"
                "    rows: [{left_padding: 3, documents: [6, 7], padding_positions: continue}]\n",
          1e-6, &results);
    cr_assert_eq(results.discrimination_count, 2);
    cr_assert_not_null(find(&results, "documents"));
    cr_assert_not_null(find(&results, "padding"));
    cr_assert(find(&results, "padding")->discriminating);
    free(results.discrimination);
    check(MODEL "cases:\n  - name: plain\n    model: {layer_types: [full_attention, "
                "full_attention]}\n    seq_len: 8\n    rows: [{documents: [8]}]\n",
          1e-6, &results);
    cr_assert_eq(results.discrimination_count, 0);
    free(results.discrimination);
}

/* Spread over 2 and 3 local ranks (discrimination_share on all but rank 0, each rerun's
 * reference computed by row blocks: reference/team.h), every feature's record is the one the
 * check makes alone, bit for bit: the results of `mpirun -np R cpparity run` must not depend on
 * R. Two batch rows of 300 tokens (several row blocks, a rank's blocks spanning batch rows),
 * a sliding and a chunked layer, packed documents and padding on both sides: all four reruns. */
Test(discrimination, spread_over_ranks__same_records_as_alone) {
    const char *text =
        MODEL "cases:\n  - name: every-feature\n"
              "    model: {layer_types: [sliding_attention, chunked_attention], sliding_window: 7,"
              "\n            attention_chunk_size: 50}\n    seq_len: 300\n"
              "    rows: [{left_padding: 9, documents: [100, 150, 41]},\n"
              "           {documents: [280], right_padding: 20}]\n";
    cpparity_suite suite;
    cpparity_error error;
    cr_assert_eq(cpparity_suite_load_text(text, strlen(text), "d.yaml", &suite, &error),
                 CPPARITY_OK, "%s", error.message);
    const cpparity_case *checked = &suite.cases[0];
    reference_cache cache = {0};
    const reference_outputs *normal = NULL;
    int computed = 0;
    cr_assert_eq(reference_cache_get(&cache, 0, checked, checked->seed, &normal, &computed, &error),
                 CPPARITY_OK, "%s", error.message);
    run_results alone;
    memset(&alone, 0, sizeof alone);
    cr_assert_eq(discrimination_check(&alone, checked, normal, checked->seed, 1e-6, NULL, &error),
                 CPPARITY_OK, "%s", error.message);
    cr_assert_eq(alone.discrimination_count, 4, "window, chunks, documents and padding");
    cr_assert_eq(discrimination_reruns(checked), 4);
    for (int ranks = 2; ranks <= 3; ranks++) {
        spread_check spread = {.checked = checked, .normal = normal, .limit = 1e-6};
        cpparity_status statuses[3];
        cpparity_error errors[3];
        cr_assert_eq(comm_local_run(ranks, 60.0, spread_rank, &spread, statuses, errors, &error),
                     CPPARITY_OK, "%s", error.message);
        for (int r = 0; r < ranks; r++) {
            cr_assert_eq(statuses[r], CPPARITY_OK, "rank %d of %d: %s", r, ranks,
                         errors[r].message);
        }
        cr_assert_eq(spread.results.discrimination_count, alone.discrimination_count);
        for (int64_t i = 0; i < alone.discrimination_count; i++) {
            const discrimination_record *a = &alone.discrimination[i];
            const discrimination_record *b = &spread.results.discrimination[i];
            cr_expect_str_eq(b->feature, a->feature);
            /* bitwise: the same sums in the same order on any rank count, no tolerance */
            cr_expect(memcmp(&a->change, &b->change, sizeof a->change) == 0,
                      "%s: change %a alone, %a on %d ranks", a->feature, a->change, b->change,
                      ranks);
            cr_expect(a->change > 0.0, "%s: switching it off changes nothing here", a->feature);
            cr_expect_eq(a->discriminating, b->discriminating);
        }
        free(spread.results.discrimination);
    }
    free(alone.discrimination);
    reference_cache_free(&cache);
    cpparity_suite_free(&suite);
}
