/* selftest.c — the self-test job (see selftest.h and results_model/selftest_matrix.h). */
#include "harness/running/selftest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/monotonic_clock.h"
#include "results_model/selftest_matrix.h"
#include "distributed/kernels/kernel_cpu.h"
#include "distributed/kernels/kernel_support.h"
#include "results_model/selftest_file.h"
#include "reports/selftest_console.h"

/* Whether fault can be planted in what is under test; why not in note. */
static bool applicable(cpparity_fault fault, const run_target *target, char *note, size_t size) {
    cpparity_attention_kernel copy;
    kernel_cpu_options options = {fault, 1, 0, false};
    if (cpparity_faults[fault].kernel &&
        !kernel_cpu_with_options(&copy, target->kernel, &options)) {
        snprintf(note, size, "lives in the built-in cpu-f32 kernel; kernel %s is under test",
                 target->kernel->name);
        return false;
    }
    const implementation_fault_support support =
        implementation_supports_fault(target->implementation, fault);
    if (support != IMPLEMENTATION_FAULT_SUPPORTED) {
        const char *lives = support == IMPLEMENTATION_FAULT_NEEDS_RING     ? "ring attention"
                            : support == IMPLEMENTATION_FAULT_NEEDS_HYBRID ? "hybrid attention"
                                                                           : "the zigzag layout";
        snprintf(note, size, "lives in %s, which the %s implementation does not run", lives,
                 target->implementation->name);
        return false;
    }
    if (fault_needs_block_calls(fault) && !kernel_has_block_calls(target->kernel)) {
        if (target->kernel->abi_version < 3u) {
            snprintf(note, size, "lives in ring attention; kernel %s has no block calls (ABI %u)",
                     target->kernel->name, target->kernel->abi_version);
        } else { /* ABI 3, block calls left NULL: they are optional */
            snprintf(note, size,
                     "lives in ring attention; kernel %s has no block calls "
                     "(forward_block/backward_block NULL)",
                     target->kernel->name);
        }
        return false;
    }
    note[0] = '\0';
    return true;
}

/* Per case: did one of its items fail or error, and how strongly (rank 0). */
static void fill_row(selftest_matrix *matrix, int64_t f, const run_plan *plan,
                     const run_results *results) {
    selftest_fault_row *row = &matrix->faults[f];
    row->strongest = NAN;
    row->detection_ratio = NAN;
    for (int64_t c = 0; c < matrix->case_count; c++) {
        selftest_cell *cell = selftest_matrix_cell(matrix, f, c);
        cell->ratio = NAN;
        for (int64_t i = 0; i < results->item_count; i++) {
            const run_item *item = &results->items[i];
            if (plan->items[i].case_index != c ||
                (item->outcome != RUN_FAIL && item->outcome != RUN_ERROR)) {
                continue;
            }
            const double ratio = selftest_item_ratio(item);
            if (!cell->caught || ratio > cell->ratio) {
                cell->caught = true;
                cell->ratio = ratio;
                selftest_describe_item(item, cell->how, sizeof cell->how);
            }
        }
        if (!cell->caught) {
            continue;
        }
        row->cases_caught++;
        if (isnan(row->strongest) || cell->ratio > row->strongest) {
            row->detection_ratio = row->strongest;
            row->strongest = cell->ratio;
        } else if (isnan(row->detection_ratio) || cell->ratio > row->detection_ratio) {
            row->detection_ratio = cell->ratio;
        }
    }
}

/* Clean-run findings: failures (and not-run items unless allowed) and the largest ratio of a
 * passing item. */
static int64_t clean_findings(const run_results *results, const run_options *options,
                              double *worst_ratio, char *worst, size_t size) {
    int64_t failures = 0;
    *worst_ratio = 0.0;
    worst[0] = '\0';
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        if (item->outcome == RUN_FAIL || item->outcome == RUN_ERROR ||
            (item->outcome == RUN_NOT_RUN && !options->allow_not_run)) {
            failures++;
            continue;
        }
        if (item->outcome == RUN_PASS && item->worst_ratio > *worst_ratio) {
            *worst_ratio = item->worst_ratio;
            const int used = snprintf(worst, size, "%s ", item->source->name);
            if (used > 0 && (size_t)used < size) {
                selftest_describe_item(item, worst + used, size - (size_t)used);
            }
        }
    }
    return failures;
}

/* The verdict and the weakest fault. */
static void decide(selftest_matrix *matrix) {
    matrix->passed = matrix->clean_failures == 0 && matrix->false_alarms == 0;
    matrix->smallest_detection_ratio = NAN;
    matrix->weakest_fault = -1;
    for (int64_t f = 0; f < matrix->fault_count; f++) {
        const selftest_fault_row *row = &matrix->faults[f];
        if (!row->applicable) {
            continue;
        }
        if (row->cases_caught < SELFTEST_MINIMUM_CASES) {
            matrix->passed = false;
        }
        const double ratio = row->cases_caught < SELFTEST_MINIMUM_CASES ? 0.0
                             : isnan(row->detection_ratio)              ? 0.0
                                                                        : row->detection_ratio;
        if (matrix->weakest_fault < 0 || ratio < matrix->smallest_detection_ratio) {
            matrix->smallest_detection_ratio = ratio;
            matrix->weakest_fault = row->fault;
        }
    }
}

/* One pass of the suite on target with options (rank 0 gets the items); fresh results. */
static cpparity_status pass(cpparity_comm *world, run_plan *plan, const run_options *options,
                            const run_target *target, reference_cache *cache, run_results *results,
                            cpparity_error *error) {
    run_options quiet = *options;
    quiet.store = RUN_STORE_METRICS; /* the matrix needs metrics only */
    run_results_free(results);
    return run_pass(world, plan, &quiet, target, cache, false, results, error);
}

/* Allocates the matrix's rows and cells (rank 0) for the selected faults. */
static cpparity_status matrix_begin(selftest_matrix *matrix, const run_plan *plan,
                                    const run_options *options, const run_target *target,
                                    cpparity_error *error) {
    memset(matrix, 0, sizeof *matrix);
    matrix->case_count = plan->case_count;
    matrix->cases = plan->cases;
    matrix->fault_count =
        options->fault_count > 0 ? options->fault_count : CPPARITY_FAULT_COUNT - 1;
    matrix->seed_count = options->seeds;
    matrix->faults = calloc((size_t)matrix->fault_count + 1, sizeof *matrix->faults);
    matrix->cells =
        calloc((size_t)(matrix->fault_count * matrix->case_count) + 1, sizeof *matrix->cells);
    matrix->seeds = calloc((size_t)matrix->seed_count + 1, sizeof *matrix->seeds);
    if (matrix->faults == NULL || matrix->cells == NULL || matrix->seeds == NULL) {
        selftest_matrix_free(matrix);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (self-test)");
    }
    for (int64_t f = 0; f < matrix->fault_count; f++) {
        selftest_fault_row *row = &matrix->faults[f];
        row->fault = options->fault_count > 0 ? (int)options->faults[f] : (int)(f + 1);
        row->applicable =
            applicable((cpparity_fault)row->fault, target, row->note, sizeof row->note);
        row->strongest = row->detection_ratio = NAN;
    }
    return CPPARITY_OK;
}

/* Every pass, in order: clean, each fault, each seed. Rank 0 fills matrix and keeps the clean
 * run in clean. */
static cpparity_status run_passes(cpparity_comm *world, run_plan *plan, const run_options *options,
                                  const run_target *target, selftest_matrix *matrix,
                                  run_results *clean, cpparity_error *error) {
    reference_cache cache = {.directory = options->reference_cache};
    const bool lead = world->rank == 0;
    double started = monotonic_seconds();
    cpparity_status status = run_pass(world, plan, options, target, &cache, false, clean, error);
    if (status == CPPARITY_OK && lead) {
        matrix->clean_failures = clean_findings(clean, options, &matrix->clean_worst_ratio,
                                                matrix->clean_worst, sizeof matrix->clean_worst);
        selftest_console_clean(stdout, matrix, clean, monotonic_seconds() - started);
    }
    run_results found;
    memset(&found, 0, sizeof found);
    for (int64_t f = 0; status == CPPARITY_OK && f < matrix->fault_count; f++) {
        /* every rank knows the rows: they depend on the options and target alone */
        selftest_fault_row *row = &matrix->faults[f];
        if (!row->applicable) {
            if (lead) {
                selftest_console_fault(stdout, matrix, f);
            }
            continue;
        }
        run_target faulty = *target;
        faulty.fault = (cpparity_fault)row->fault;
        started = monotonic_seconds();
        status = pass(world, plan, options, &faulty, &cache, &found, error);
        row->seconds = monotonic_seconds() - started;
        if (status == CPPARITY_OK && lead) {
            fill_row(matrix, f, plan, &found);
            selftest_console_fault(stdout, matrix, f);
        }
    }
    run_report_reference_cache(world, &cache);
    reference_cache_free(&cache);
    for (int64_t s = 0; status == CPPARITY_OK && s < matrix->seed_count; s++) {
        run_options reseeded = *options;
        reseeded.seed_set = true;
        reseeded.seed = (uint64_t)(s + 1);
        for (int64_t i = 0; i < plan->item_count; i++) {
            plan->items[i].seed = reseeded.seed; /* what the items' fixtures are built from */
        }
        reference_cache seed_cache = {.directory = options->reference_cache};
        status = pass(world, plan, &reseeded, target, &seed_cache, &found, error);
        reference_cache_free(&seed_cache);
        if (status == CPPARITY_OK && lead) {
            selftest_seed_row *row = &matrix->seeds[s];
            row->seed = reseeded.seed;
            row->failures =
                clean_findings(&found, options, &row->worst_ratio, row->worst, sizeof row->worst);
            matrix->false_alarms += row->failures;
            selftest_console_seed(stdout, matrix, s, &found);
        }
    }
    run_results_free(&found);
    return status;
}

int selftest_job(cpparity_comm *world, run_plan *shared, const run_options *options,
                 const run_target *target, const run_environment *environment) {
    const double started = monotonic_seconds();
    run_plan plan = *shared; /* a private copy of the items, marked for this job's ranks */
    plan.items = malloc((size_t)(shared->item_count + 1) * sizeof *plan.items);
    cpparity_error error;
    cpparity_status status = CPPARITY_OK;
    if (plan.items == NULL) {
        status = cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory (run plan)");
    } else {
        memcpy(plan.items, shared->items, (size_t)shared->item_count * sizeof *plan.items);
        run_plan_set_ranks(&plan, world->size, target->implementation);
    }
    run_target clean_target = *target;
    clean_target.fault = CPPARITY_FAULT_NONE;
    selftest_matrix matrix;
    memset(&matrix, 0, sizeof matrix);
    run_results clean;
    memset(&clean, 0, sizeof clean);
    if (status == CPPARITY_OK) {
        status = matrix_begin(&matrix, &plan, options, &clean_target, &error);
    }
    if (status == CPPARITY_OK && world->rank == 0) {
        run_provenance_fill(&clean.provenance, world, options, &clean_target, environment);
        selftest_console_preamble(stdout, &clean.provenance, &matrix);
    }
    if (status == CPPARITY_OK) {
        status = run_passes(world, &plan, options, &clean_target, &matrix, &clean, &error);
    }
    int64_t code = 0;
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity selftest: rank %d: %s\n", world->world_rank, error.message);
        code = status;
        cpparity_comm_abort(world, (int)status, error.message);
    } else if (world->rank == 0) {
        decide(&matrix);
        matrix.seconds = monotonic_seconds() - started;
        run_provenance_finish(&clean.provenance);
        run_results_count(&clean);
        selftest_console_summary(stdout, &matrix);
        code = matrix.passed ? 0 : 1;
        if (selftest_file_write(&clean, &matrix, environment->out_path, &error) != CPPARITY_OK) {
            fprintf(stderr, "cpparity selftest: writing the results file: %s\n", error.message);
            code = error.status > code ? error.status : code;
        } else {
            printf("# results: %s\n", environment->out_path);
        }
        fflush(stdout);
    }
    if (status == CPPARITY_OK &&
        cpparity_broadcast(world, &code, 1, CPPARITY_INT64, 0, NULL, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity selftest: rank %d: %s\n", world->world_rank, error.message);
        code = 3;
    }
    run_results_free(&clean);
    selftest_matrix_free(&matrix);
    free(plan.items);
    return (int)code;
}
