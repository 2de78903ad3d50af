/* run_plan.c — selecting cases and laying out the items of a run (see run_plan.h). */
#include "harness/running/run_plan.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite/case_file.h"
#include "harness/suite/random_cases.h"

void run_plan_free(run_plan *plan) {
    for (int s = 0; s < plan->suite_count; s++) {
        cpparity_suite_free(&plan->suites[s]);
    }
    free(plan->cases);
    free(plan->case_suite);
    free(plan->items);
    memset(plan, 0, sizeof *plan);
}

static bool selected(const run_options *options, const char *name, bool *matched) {
    if (options->pattern_count == 0) {
        return true;
    }
    bool any = false;
    for (int p = 0; p < options->pattern_count; p++) {
        if (fnmatch(options->patterns[p], name, 0) == 0) {
            matched[p] = true;
            any = true;
        }
    }
    return any;
}

/* Sets one item. */
static void set_item(run_plan_item *item, int64_t case_index, int64_t cp, cpparity_dtype dtype,
                     cpparity_layout layout, cpparity_algorithm_choice algorithm, uint64_t seed) {
    memset(item, 0, sizeof *item);
    item->case_index = case_index;
    item->cp = cp;
    item->dtype = dtype;
    item->layout = layout;
    item->algorithm = algorithm;
    item->is_baseline = cp == 1;
    item->runnable = true;
    item->seed = seed;
}

static int compare_sizes(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t run_plan_case_items(const cpparity_case *c, int64_t case_index, const run_options *options,
                            run_plan_item *items) {
    const uint64_t seed = options->seed_set ? options->seed : c->seed;
    int64_t sizes[CPPARITY_MAX_CP_SIZES];
    memcpy(sizes, c->cp_sizes, (size_t)c->cp_count * sizeof *sizes);
    qsort(sizes, (size_t)c->cp_count, sizeof *sizes, compare_sizes);
    int64_t count = 0;
    const cpparity_algorithm_choice ulysses = {CPPARITY_ALGORITHM_ULYSSES, 0, 0};
    for (int d = 0; d < c->dtype_count; d++) {
        if (options->dtype_set && c->dtypes[d] != options->dtype) {
            continue;
        }
        /* a case that must be refused needs no baseline unless it lists cp 1 */
        if (sizes[0] != 1 && !c->expect_refuse) {
            set_item(&items[count++], case_index, 1, c->dtypes[d], CPPARITY_LAYOUT_CONTIGUOUS,
                     ulysses, seed);
        }
        for (int k = 0; k < c->cp_count; k++) {
            if (sizes[k] == 1) {
                set_item(&items[count++], case_index, 1, c->dtypes[d], CPPARITY_LAYOUT_CONTIGUOUS,
                         ulysses, seed);
                continue;
            }
            for (int a = 0; a < c->algorithm_count; a++) {
                const cpparity_algorithm_choice *choice = &c->algorithms[a];
                if ((choice->kind == CPPARITY_ALGORITHM_HYBRID &&
                     choice->ulysses_degree * choice->ring_degree != sizes[k]) ||
                    (options->algorithm_set && choice->kind != options->algorithm)) {
                    continue; /* a hybrid U×R runs at cp = U·R only; --algorithm */
                }
                for (int l = 0; l < c->layout_count; l++) {
                    if (options->layout_set && c->layouts[l] != options->layout) {
                        continue; /* --layout */
                    }
                    set_item(&items[count++], case_index, sizes[k], c->dtypes[d], c->layouts[l],
                             c->algorithms[a], seed);
                }
            }
        }
    }
    return count;
}

void run_plan_suite_paths(const run_options *options, const char *const **paths, int *count) {
    static const char *default_suite[1];
    default_suite[0] = cpparity_default_suite();
    *paths = options->suite_count > 0 ? options->suites : default_suite;
    *count = options->random_cases > 0 ? 0 : options->suite_count > 0 ? options->suite_count : 1;
}

cpparity_status run_plan_build(run_plan *plan, const run_options *options, cpparity_error *error) {
    return run_plan_build_texts(plan, options, NULL, 0, error);
}

cpparity_status run_plan_build_texts(run_plan *plan, const run_options *options,
                                     const run_suite_text *texts, int text_count,
                                     cpparity_error *error) {
    memset(plan, 0, sizeof *plan);
    const char *const *paths = NULL;
    int count = 0;
    run_plan_suite_paths(options, &paths, &count);
    count = options->random_cases > 0 ? 1 : count;
    int64_t total_cases = 0;
    for (int s = 0; s < count; s++) {
        cpparity_status status =
            options->random_cases > 0
                ? random_cases_load(options->seed, options->random_cases, &plan->suites[s], error)
            : texts != NULL && s < text_count
                ? cpparity_suite_load_text(texts[s].text, texts[s].length, texts[s].path,
                                           &plan->suites[s], error)
                : cpparity_suite_load(paths[s], &plan->suites[s], error);
        if (status != CPPARITY_OK) {
            run_plan_free(plan);
            return status;
        }
        plan->suite_count++;
        total_cases += plan->suites[s].count;
    }
    plan->cases = calloc((size_t)total_cases + 1, sizeof *plan->cases);
    plan->case_suite = calloc((size_t)total_cases + 1, sizeof *plan->case_suite);
    /* per case: a baseline and each cp size, for each dtype */
    plan->items = calloc((size_t)(total_cases * RUN_PLAN_CASE_ITEMS) + 1, sizeof *plan->items);
    if (!plan->cases || !plan->case_suite || !plan->items) {
        run_plan_free(plan);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (run plan)");
    }
    /* the runs the cases list, without --dtype, --layout and --algorithm: what those leave out */
    run_options unfiltered = *options;
    unfiltered.dtype_set = unfiltered.layout_set = unfiltered.algorithm_set = false;
    run_plan_item *listed = malloc(RUN_PLAN_CASE_ITEMS * sizeof *listed);
    if (listed == NULL) {
        run_plan_free(plan);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (run plan)");
    }
    bool listed_cp = false, planned_cp = false; /* runs at cp > 1 listed, and left in */
    bool matched[RUN_MAX_PATTERNS] = {false};
    for (int s = 0; s < plan->suite_count; s++) {
        for (int64_t i = 0; i < plan->suites[s].count; i++) {
            const cpparity_case *c = &plan->suites[s].cases[i];
            if (!selected(options, c->name, matched)) {
                continue;
            }
            const int64_t index = plan->case_count++;
            plan->cases[index] = c;
            plan->case_suite[index] = plan->suites[s].path;
            const int64_t added =
                run_plan_case_items(c, index, options, plan->items + plan->item_count);
            for (int64_t k = plan->item_count; k < plan->item_count + added; k++) {
                const int64_t cp = plan->items[k].cp;
                plan->largest_cp = cp > plan->largest_cp ? cp : plan->largest_cp;
                planned_cp |= cp > 1;
            }
            plan->item_count += added;
            const int64_t all = run_plan_case_items(c, index, &unfiltered, listed);
            for (int64_t k = 0; k < all; k++) {
                listed_cp |= listed[k].cp > 1;
            }
            plan->filtered_out += all - added;
        }
    }
    free(listed);
    size_t used = 0;
    if (options->dtype_set) {
        used += (size_t)snprintf(plan->filters + used, sizeof plan->filters - used, "--dtype %s",
                                 cpparity_dtype_name(options->dtype));
    }
    if (options->layout_set && used < sizeof plan->filters) {
        used += (size_t)snprintf(plan->filters + used, sizeof plan->filters - used, "%s--layout %s",
                                 used > 0 ? " " : "", cpparity_layout_name(options->layout));
    }
    if (options->algorithm_set && used < sizeof plan->filters) {
        snprintf(plan->filters + used, sizeof plan->filters - used, "%s--algorithm %s",
                 used > 0 ? " " : "", cpparity_algorithm_name(options->algorithm));
    }
    if (listed_cp && !planned_cp && plan->case_count > 0) {
        cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                           "%s leaves no run at cp > 1 of the %lld selected case%s (it leaves out "
                           "%lld of their runs): nothing would check context parallelism "
                           "(cpparity list shows each case's dtypes, layouts and algorithms)",
                           plan->filters, (long long)plan->case_count,
                           plan->case_count == 1 ? "" : "s", (long long)plan->filtered_out);
        run_plan_free(plan);
        return CPPARITY_ERROR_INPUT;
    }
    for (int p = 0; p < options->pattern_count; p++) {
        if (!matched[p]) {
            run_plan_free(plan);
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "--case %s matches no case (cpparity list shows them)",
                                      options->patterns[p]);
        }
    }
    if (plan->largest_cp == 0) {
        plan->largest_cp = 1;
    }
    plan->least_ranks = run_plan_least_ranks(plan->items, plan->item_count);
    return CPPARITY_OK;
}

int64_t run_plan_least_ranks(const run_plan_item *items, int64_t count) {
    int64_t least = 1, largest = 1;
    for (int64_t i = 0; i < count; i++) {
        largest = items[i].cp > largest ? items[i].cp : largest;
    }
    for (int64_t i = 0; i < count; i++) {
        const int64_t a = least, b = items[i].cp;
        int64_t x = a, y = b;
        while (y != 0) {
            const int64_t t = x % y;
            x = y;
            y = t;
        }
        least = a / x * b;
        if (least > RUN_PLAN_MAX_RANKS) {
            return largest;
        }
    }
    return least;
}

void run_plan_set_ranks(run_plan *plan, int ranks, const cpparity_implementation *implementation) {
    for (int64_t i = 0; i < plan->item_count; i++) {
        run_plan_item *item = &plan->items[i];
        if (item->memory_skipped) { /* left out on purpose: it keeps its reason */
            item->runnable = false;
            continue;
        }
        item->runnable = true;
        item->not_run_reason[0] = '\0';
        if (!implementation->dtypes[item->dtype]) {
            item->runnable = false;
            snprintf(item->not_run_reason, sizeof item->not_run_reason,
                     "the %s implementation (--device %s) has no %s", implementation->name,
                     implementation->device, cpparity_dtype_name(item->dtype));
        } else if (!implementation->layouts[item->layout]) {
            item->runnable = false;
            snprintf(item->not_run_reason, sizeof item->not_run_reason,
                     "the %s implementation (--device %s) has no %s layout", implementation->name,
                     implementation->device, cpparity_layout_name(item->layout));
        } else if (!implementation->algorithms[item->algorithm.kind]) {
            item->runnable = false;
            snprintf(item->not_run_reason, sizeof item->not_run_reason,
                     "the %s implementation (--device %s) has no %s algorithm",
                     implementation->name, implementation->device,
                     cpparity_algorithm_name(item->algorithm.kind));
        } else if (ranks % item->cp != 0) {
            item->runnable = false;
            snprintf(item->not_run_reason, sizeof item->not_run_reason,
                     "cp %lld needs a rank count divisible by %lld; this job has %d rank%s "
                     "(e.g. mpirun -np %lld, or --ranks %lld)",
                     (long long)item->cp, (long long)item->cp, ranks, ranks == 1 ? "" : "s",
                     (long long)item->cp, (long long)item->cp);
        }
    }
}

bool run_spreads_reference(const cpparity_case *c, int64_t ranks, bool ranks_are_processes) {
    return ranks > 1 && ranks_are_processes && c->level != CPPARITY_LEVEL_ATTENTION &&
           !c->expect_refuse;
}
