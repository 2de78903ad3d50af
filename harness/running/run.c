/* run.c — a whole `cpparity run` job across ranks and groups (see run.h). */
#include "harness/running/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/monotonic_clock.h"
#include "distributed/comm/comm_launch.h"
#include "harness/judging/discrimination.h"
#include "harness/running/attention_item.h"
#include "harness/running/attention_stream.h"
#include "harness/running/run_exchange.h"
#include "harness/running/run_item.h"
#include "harness/running/run_outputs.h"
#include "harness/running/reference_team_comm.h"
#include "reports/console.h"

static void utc_now(char *text, size_t size) {
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(text, size, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

static void free_item_tensors(run_item *item) {
    run_item_free_tensors(item);
}

/* Where collected items go: the results (rank 0), printed as they arrive when print is set. */
typedef struct item_store {
    run_results *results;
    bool print;
} item_store;

/* Unpacked items land at their plan index in the results (rank 0). */
static void store_item(int64_t plan_index, run_item *item, void *context) {
    item_store *store = context;
    run_results *results = store->results;
    free_item_tensors(&results->items[plan_index]);
    results->items[plan_index] = *item;
    if (store->print) {
        const run_item *stored = &results->items[plan_index];
        console_item(stdout, stored);
        if (stored->outcome == RUN_ERROR) { /* on stderr too: errors must not hide in a table */
            fprintf(stderr, "cpparity run: %s cp %lld %s: %s\n", stored->source->name,
                    (long long)stored->cp, cpparity_dtype_name(stored->dtype), stored->message);
        }
    }
}

static int compare_sizes(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sends the baseline table from rank 0 to every rank. */
static cpparity_status share_baselines(cpparity_comm *world, baseline_table *table,
                                       cpparity_error *error) {
    int64_t count = world->rank == 0 ? table->count : 0;
    cpparity_status status = cpparity_broadcast(world, &count, 1, CPPARITY_INT64, 0, NULL, error);
    if (status != CPPARITY_OK || count == 0) {
        return status;
    }
    if (world->rank != 0) {
        baseline_table_free(table);
        table->entries = calloc((size_t)count, sizeof *table->entries);
        if (table->entries == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
        table->count = count;
    }
    return cpparity_broadcast(world, table->entries, count * (int64_t)sizeof(baseline_entry),
                              CPPARITY_INT8, 0, NULL, error);
}

/* Sends what the group leaders packed to rank 0, which stores and prints those items. */
static cpparity_status collect(cpparity_comm *world, run_plan *plan, const byte_buffer *packed,
                               item_store *store, cpparity_error *error) {
    void *received = NULL;
    int64_t *sizes = calloc((size_t)world->size, sizeof *sizes);
    cpparity_status status =
        sizes == NULL
            ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
            : cpparity_gather_bytes(world, packed->data, packed->size, &received, sizes, 0, error);
    if (status == CPPARITY_OK && world->rank == 0) {
        int64_t total = 0;
        for (int r = 0; r < world->size; r++) {
            total += sizes[r];
        }
        if (store->print) {
            console_progress_clear();
        }
        status = run_exchange_unpack(received, total, plan, store_item, store, error);
    }
    free(received);
    free(sizes);
    return status;
}

/* Runs every runnable item of one cp size on N/cp groups. Each case has a home rank (its index
 * modulo N): the group holding that rank runs the case's items, and the home rank computes the
 * case's float64 reference once (reference_cache) and compares every cp size and dtype of it.
 * Items run in rounds: in round r every group runs the r-th item of its queue, then every rank
 * meets to send finished items to rank 0, so an idle group waits at most one item, never a whole
 * phase, before its next (deadline-bound) collective. */
static cpparity_status run_phase(cpparity_comm *world, run_plan *plan, const run_options *options,
                                 const run_target *target, int64_t cp,
                                 const baseline_table *baselines, reference_cache *cache,
                                 item_store *store, cpparity_error *error) {
    const int groups = (int)(world->size / cp);
    const int color = (int)(world->rank / cp);
    /* this group's queue, in plan order */
    int64_t *queue = malloc((size_t)(plan->item_count + 1) * sizeof *queue);
    int64_t *queue_lengths = calloc((size_t)groups, sizeof *queue_lengths);
    if (queue == NULL || queue_lengths == NULL) {
        free(queue);
        free(queue_lengths);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    int64_t mine = 0, rounds = 0;
    for (int64_t i = 0; i < plan->item_count; i++) {
        if (!plan->items[i].runnable || plan->items[i].cp != cp || plan->items[i].query_block > 0) {
            continue; /* (an item by query blocks runs on every rank, before the phases) */
        }
        const int home = (int)(plan->items[i].case_index % world->size);
        const int group_of_item = (int)(home / cp);
        queue_lengths[group_of_item]++;
        rounds = queue_lengths[group_of_item] > rounds ? queue_lengths[group_of_item] : rounds;
        if (group_of_item == color) {
            queue[mine++] = i;
        }
    }
    cpparity_comm *group = NULL;
    cpparity_status status = cpparity_comm_split(world, color, world->rank, &group, error);
    for (int64_t round = 0; status == CPPARITY_OK && round < rounds; round++) {
        byte_buffer packed = {0};
        if (round < mine) {
            const int64_t i = queue[round];
            const run_plan_item *planned = &plan->items[i];
            const int root = (int)(planned->case_index % world->size % cp);
            if (group->rank == root && store->print) {
                console_progress(plan->cases[planned->case_index]->name, cp,
                                 cpparity_dtype_name(planned->dtype));
            }
            run_item item;
            status = run_item_execute(group, root, plan, i, options, target, baselines, cache,
                                      &item, error);
            if (status == CPPARITY_OK && group->rank == root) {
                status = run_exchange_pack(&packed, i, &item, error);
            }
            free_item_tensors(&item);
        }
        if (status == CPPARITY_OK) {
            status = collect(world, plan, &packed, store, error);
        }
        byte_buffer_free(&packed);
    }
    cpparity_comm_free(group);
    free(queue);
    free(queue_lengths);
    return status;
}

/* The tightest limit a case's tensors get: min over the tensors of its cp = 1 items of
 * ratio × naive baseline error + floor (the pass rule's limit). It depends on the case (and the
 * dtypes run) alone, never on which cp sizes the job's rank count allowed; infinite when no
 * cp = 1 item of the case was compared. */
static double tightest_limit(const run_results *results, const cpparity_case *c) {
    double tightest = INFINITY;
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        if (item->source != c || !item->is_baseline ||
            (item->outcome != RUN_PASS && item->outcome != RUN_FAIL)) {
            continue;
        }
        for (int64_t t = 0; t < item->tensor_count; t++) {
            const double limit = item->tensors[t].decision.limit;
            if (isfinite(limit) && limit > 0.0 && limit < tightest) {
                tightest = limit;
            }
        }
    }
    return tightest;
}

/* Whether world's ranks are processes (its backend's launcher starts them, as the memory
 * estimate takes them: run_plan.h run_spreads_reference). */
static bool ranks_are_processes(const cpparity_comm *world) {
    const cpparity_comm_backend *backend = comm_backend_find(world->kind);
    return backend != NULL ? backend->ranks_from_launcher : strcmp(world->kind, "local") != 0;
}

/* Every rank of world in a new communicator *team whose rank 0 is world's rank home (a case's
 * home rank), the others following in world's order from it. Collective over world. */
static cpparity_status split_home_first(cpparity_comm *world, int home, cpparity_comm **team,
                                        cpparity_error *error) {
    return cpparity_comm_split(world, 0, (world->rank - home + world->size) % world->size, team,
                               error);
}

/* The discrimination check (discrimination.h): each case's home rank reruns its reference with
 * one mask feature off at a time, against the cached full reference; the records reach rank 0,
 * which keeps them in case order. Rank 0 first sends every rank each case's tightest limit. A
 * case whose reference was spread over the job's ranks (run_spreads_reference) has its reruns
 * spread the same way, one case after another, the home rank the team's rank 0 (the same bits
 * as alone); the others' cases are checked by their home ranks side by side. */
static cpparity_status run_discrimination(cpparity_comm *world, run_plan *plan,
                                          const run_options *options, reference_cache *cache,
                                          run_results *results, cpparity_error *error) {
    const int64_t cases = plan->case_count;
    double *limits = malloc((size_t)(cases + 1) * sizeof *limits);
    if (limits == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t c = 0; world->rank == 0 && c < cases; c++) {
        limits[c] = tightest_limit(results, plan->cases[c]);
    }
    cpparity_status status =
        cpparity_broadcast(world, limits, cases, CPPARITY_FLOAT64, 0, NULL, error);
    run_results local;
    memset(&local, 0, sizeof local);
    byte_buffer packed = {0};
    int64_t spread_cases = 0;
    const double start = monotonic_seconds();
    for (int64_t c = 0; status == CPPARITY_OK && c < cases; c++) {
        const cpparity_case *checked = plan->cases[c];
        if (!isfinite(limits[c]) || checked->level == CPPARITY_LEVEL_ATTENTION ||
            discrimination_reruns(checked) == 0) {
            continue; /* nothing of it compared; or no model, or no mask feature to switch off */
        }
        const int home = (int)(c % world->size);
        const bool spread = run_spreads_reference(checked, world->size, ranks_are_processes(world));
        if (!spread && world->rank != home) {
            continue;
        }
        const uint64_t seed = options->seed_set ? options->seed : checked->seed;
        cpparity_comm *team_comm = NULL;
        reference_team team;
        if (spread) {
            interrupt_set_activity("case '%s' (its discrimination reruns, spread over %d ranks)",
                                   checked->name, world->size);
            status = split_home_first(world, home, &team_comm, error);
            if (status != CPPARITY_OK) {
                break;
            }
            team = reference_team_of_comm(team_comm);
            spread_cases++;
        }
        if (world->rank == home) {
            const reference_outputs *normal = NULL;
            int computed_now = 0;
            const int64_t first = local.discrimination_count;
            status = reference_cache_get(cache, c, checked, seed, &normal, &computed_now, error);
            if (status == CPPARITY_OK) {
                status = discrimination_check(&local, checked, normal, seed, limits[c],
                                              spread ? &team : NULL, error);
            }
            for (int64_t r = first; status == CPPARITY_OK && r < local.discrimination_count; r++) {
                status = run_exchange_append(&packed, &c, sizeof c, error);
                if (status == CPPARITY_OK) {
                    status = run_exchange_append(&packed, &local.discrimination[r],
                                                 sizeof local.discrimination[r], error);
                }
            }
        } else {
            status = discrimination_share(checked, seed, &team, error);
        }
        cpparity_comm_free(team_comm);
    }
    if (status == CPPARITY_OK && world->rank == 0 && spread_cases > 0) {
        printf("# discrimination reruns of %lld case%s computed by the %d ranks together: %.1f s\n",
               (long long)spread_cases, spread_cases == 1 ? "" : "s", world->size,
               monotonic_seconds() - start);
        fflush(stdout);
    }
    free(local.discrimination);
    free(limits);
    void *received = NULL;
    int64_t *sizes = calloc((size_t)world->size, sizeof *sizes);
    if (status == CPPARITY_OK && sizes == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    if (status == CPPARITY_OK) {
        status = cpparity_gather_bytes(world, packed.data, packed.size, &received, sizes, 0, error);
    }
    if (status == CPPARITY_OK && world->rank == 0) {
        int64_t total = 0;
        for (int r = 0; r < world->size; r++) {
            total += sizes[r];
        }
        const int64_t entry = (int64_t)(sizeof(int64_t) + sizeof(discrimination_record));
        const int64_t count = total / entry;
        results->discrimination = calloc((size_t)count + 1, sizeof *results->discrimination);
        if (results->discrimination == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
        /* case order; within a case, the order its home rank checked the features in */
        for (int64_t c = 0; status == CPPARITY_OK && c < cases; c++) {
            for (int64_t e = 0; e < count; e++) {
                int64_t index;
                memcpy(&index, (const uint8_t *)received + e * entry, sizeof index);
                if (index != c) {
                    continue;
                }
                discrimination_record *record =
                    &results->discrimination[results->discrimination_count++];
                memcpy(record, (const uint8_t *)received + e * entry + sizeof index,
                       sizeof *record);
                record->source = plan->cases[c];
            }
        }
    }
    free(received);
    free(sizes);
    byte_buffer_free(&packed);
    return status;
}

int run_results_exit_code(const run_results *results, bool allow_not_run) {
    int code = 0;
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        int item_code = item->outcome == RUN_FAIL ? 1
                        : item->outcome == RUN_ERROR
                            ? (item->error_status == CPPARITY_ERROR_RUNTIME ? 3 : 2)
                        : item->outcome == RUN_NOT_RUN && !allow_not_run && !item->by_choice ? 3
                                                                                             : 0;
        code = item_code > code ? item_code : code;
    }
    return code;
}

/* Rank 0: counts, discrimination, footer, results file and reports. Returns the exit code. */
void run_results_count(run_results *results) {
    results->passed = results->failed = results->refused = results->not_run = results->errors = 0;
    results->not_claimed = 0;
    results->left_out = 0;
    for (int64_t i = 0; i < results->item_count; i++) {
        switch (results->items[i].outcome) {
        case RUN_PASS:
            results->passed++;
            break;
        case RUN_FAIL:
            results->failed++;
            break;
        case RUN_REFUSED:
            results->refused++;
            break;
        case RUN_NOT_RUN:
            if (results->items[i].by_choice) {
                results->left_out++;
            } else {
                results->not_run++;
            }
            break;
        case RUN_NOT_CLAIMED:
            results->not_claimed++;
            break;
        case RUN_ERROR:
            results->errors++;
            break;
        }
    }
}

/* Every output of the run (run_outputs_write): the results file at environment->out_path, the
 * others where options ask. */
static cpparity_status write_outputs(const run_results *results, const run_options *options,
                                     const run_environment *environment, cpparity_error *error) {
    const char *paths[RUN_OUTPUT_COUNT];
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        paths[o] = o == RUN_OUTPUT_RESULTS ? environment->out_path : options->outputs[o];
    }
    return run_outputs_write(results, paths, error);
}

static int finish(run_results *results, run_plan *plan, const run_options *options,
                  const run_environment *environment) {
    run_results_count(results);
    for (int64_t i = 0; i < results->item_count; i++) {
        if (!plan->items[i].runnable) {
            console_item(stdout, &results->items[i]); /* listed with what it would need */
        }
    }
    int code = run_results_exit_code(results, options->allow_not_run);
    console_discrimination(stdout, results);
    run_provenance_finish(&results->provenance);
    cpparity_error error;
    const cpparity_status written = write_outputs(results, options, environment, &error);
    if (written != CPPARITY_OK) {
        fprintf(stderr, "cpparity run: %s; no output was published\n", error.message);
        code = code > (int)written ? code : (int)written;
    }
    console_footer(stdout, results, written == CPPARITY_OK ? environment->out_path : NULL,
                   options->allow_not_run);
    fflush(stdout);
    return code;
}

void run_report_reference_cache(const cpparity_comm *world, const reference_cache *cache) {
    if (cache->directory == NULL || cache->reused + cache->stored + cache->rejected == 0) {
        return;
    }
    printf("# reference cache %s, rank %d: %lld reused, %lld computed and stored, %lld not "
           "trusted\n",
           cache->directory, world->world_rank, (long long)cache->reused, (long long)cache->stored,
           (long long)cache->rejected);
    if (cache->warning[0] != '\0') {
        fprintf(stderr, "cpparity: rank %d: reference cache: %s\n", world->world_rank,
                cache->warning);
    }
    fflush(stdout);
}

/* The job: see run.h. Works on its own copy of the plan's items (marked runnable for this job's
 * rank count), so ranks that share one plan (local threads) never write to it. */
static int run_job_on_items(cpparity_comm *world, run_plan *plan, const run_options *options,
                            const run_target *target, const run_environment *environment);

int run_job(cpparity_comm *world, run_plan *shared, const run_options *options,
            const run_target *target, const run_environment *environment) {
    run_plan plan = *shared;
    plan.items = malloc((size_t)(shared->item_count + 1) * sizeof *plan.items);
    if (plan.items == NULL) {
        fprintf(stderr, "cpparity run: rank %d: out of memory (run plan)\n", world->world_rank);
        cpparity_comm_abort(world, 3, "out of memory (run plan)");
        return 3;
    }
    memcpy(plan.items, shared->items, (size_t)shared->item_count * sizeof *plan.items);
    run_plan_set_ranks(&plan, world->size, target->implementation);
    const int code = run_job_on_items(world, &plan, options, target, environment);
    free(plan.items);
    return code;
}

/* Rank 0: every item of the plan, runnable or not, begun and marked not run yet. */
static cpparity_status begin_items(run_results *results, const run_plan *plan,
                                   cpparity_error *error) {
    results->item_count = plan->item_count;
    results->items = calloc((size_t)plan->item_count + 1, sizeof *results->items);
    if (results->items == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t i = 0; i < plan->item_count; i++) {
        const run_plan_item *planned = &plan->items[i];
        run_item *item = &results->items[i];
        run_item_begin(item, plan, planned);
        item->outcome = RUN_NOT_RUN;
        item->by_choice = planned->memory_skipped;
        snprintf(item->message, sizeof item->message, "%s",
                 planned->runnable ? "did not run" : planned->not_run_reason);
    }
    return CPPARITY_OK;
}

/* The summon of a spread reference (reference_cache.summon): tells the team's other ranks that
 * the home rank computes it now (they would otherwise hear that it is cached). */
typedef struct spread_summon {
    cpparity_comm *team; /* the home rank is its rank 0 */
    bool summoned;
} spread_summon;

static cpparity_status summon_team(void *context, const cpparity_case *c, uint64_t seed,
                                   cpparity_error *error) {
    (void)c;
    (void)seed;
    spread_summon *summon = context;
    int64_t compute = 1;
    summon->summoned = true;
    return cpparity_broadcast(summon->team, &compute, 1, CPPARITY_INT64, 0, NULL, error);
}

/* The naive baseline of case c in each dtype its runnable items check, spread over the team like
 * its reference (naive_model.h naive_model_run_spread: the same bits for every rank count): the
 * home rank (the team's rank 0) keeps it in its cache, where the items find it. Nothing when the
 * reference is not cached there (it failed: the item computes both again alone and reports the
 * error). Errors returned are the communicator's. */
typedef struct baselines_made {
    int64_t count;  /* baselines made */
    double seconds; /* the time they took */
} baselines_made;

static cpparity_status spread_baselines(cpparity_comm *team_comm, const reference_team *team,
                                        const run_plan *plan, int64_t c, uint64_t seed,
                                        reference_cache *cache, baselines_made *made,
                                        cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    for (int dtype = 0; status == CPPARITY_OK && dtype < CPPARITY_DTYPE_COUNT; dtype++) {
        bool checked = false;
        for (int64_t i = 0; i < plan->item_count; i++) {
            const run_plan_item *item = &plan->items[i];
            checked |= item->case_index == c && item->runnable && (int)item->dtype == dtype;
        }
        if (!checked) {
            continue;
        }
        int64_t join = team_comm->rank == 0 && reference_cache_has(cache, c, seed, -1) &&
                       !reference_cache_has(cache, c, seed, dtype);
        status = cpparity_broadcast(team_comm, &join, 1, CPPARITY_INT64, 0, NULL, error);
        if (status != CPPARITY_OK || join == 0) {
            continue;
        }
        interrupt_set_activity("case '%s' (its naive %s baseline, spread over %d ranks)",
                               plan->cases[c]->name, cpparity_dtype_name((cpparity_dtype)dtype),
                               team_comm->size);
        const double start = monotonic_seconds();
        cpparity_error failure; /* the baseline's own: the item computes it again and reports it */
        const cpparity_status outcome =
            team_comm->rank == 0
                ? reference_cache_spread_naive(cache, c, plan->cases[c], seed,
                                               (cpparity_dtype)dtype, team, &failure)
                : reference_naive_share(plan->cases[c], seed, (cpparity_dtype)dtype, team,
                                        &failure);
        made->seconds += monotonic_seconds() - start;
        made->count += outcome == CPPARITY_OK;
    }
    return status;
}

/* Every case's float64 reference spread over the job's ranks (reference/team.h: each rank its
 * row blocks, the same bits for every rank count) before any item runs, one case after another:
 * the home rank (case index modulo the ranks), rank 0 of the team, keeps it in its cache; a
 * reference already cached there (or on disk) is not computed again. A reference that fails is
 * left out of the cache: the item computes it again alone and reports the error as an item's.
 * Errors returned are the communicator's. */
static cpparity_status spread_references(cpparity_comm *world, const run_plan *plan,
                                         const run_options *options, reference_cache *cache,
                                         bool print, double *seconds, cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    const double start = monotonic_seconds();
    const int64_t computed = cache->computed, shared = cache->shared;
    baselines_made baselines = {0, 0.0};
    for (int64_t c = 0; status == CPPARITY_OK && c < plan->case_count; c++) {
        const cpparity_case *checked = plan->cases[c];
        bool runs = false;
        for (int64_t i = 0; i < plan->item_count; i++) {
            runs |= plan->items[i].case_index == c && plan->items[i].runnable;
        }
        if (!runs || !run_spreads_reference(checked, world->size, ranks_are_processes(world))) {
            continue;
        }
        const int home = (int)(c % world->size);
        interrupt_set_activity("case '%s' (its float64 reference, spread over %d ranks)",
                               checked->name, world->size);
        cpparity_comm *team_comm = NULL;
        status = split_home_first(world, home, &team_comm, error);
        if (status != CPPARITY_OK) {
            break;
        }
        const reference_team team = reference_team_of_comm(team_comm);
        const uint64_t seed = options->seed_set ? options->seed : checked->seed;
        cpparity_error failure; /* the reference's own: the item reports it */
        if (team_comm->rank == 0) {
            spread_summon summon = {team_comm, false};
            const reference_cache settings = *cache;
            cache->team = &team;
            cache->summon = summon_team;
            cache->summon_context = &summon;
            const reference_outputs *outputs = NULL;
            int computed_now = 0;
            (void)reference_cache_get(cache, c, checked, seed, &outputs, &computed_now, &failure);
            cache->team = settings.team;
            cache->summon = settings.summon;
            cache->summon_context = settings.summon_context;
            if (!summon.summoned) {
                int64_t compute = 0;
                status = cpparity_broadcast(team_comm, &compute, 1, CPPARITY_INT64, 0, NULL, error);
            }
        } else {
            int64_t compute = 0;
            status = cpparity_broadcast(team_comm, &compute, 1, CPPARITY_INT64, 0, NULL, error);
            if (status == CPPARITY_OK && compute == 1) {
                cache->shared +=
                    reference_outputs_share(checked, seed, &team, &failure) == CPPARITY_OK;
            }
        }
        if (status == CPPARITY_OK) {
            status = spread_baselines(team_comm, &team, plan, c, seed, cache, &baselines, error);
        }
        cpparity_comm_free(team_comm);
    }
    /* what this rank took part in: on rank 0, every case it homes or shared in */
    const int64_t references = cache->computed - computed + cache->shared - shared;
    *seconds = references > 0 || baselines.count > 0 ? monotonic_seconds() - start : 0.0;
    if (status == CPPARITY_OK && print && world->rank == 0 && references > 0) {
        printf("# float64 reference of %lld case%s computed by the %d ranks together: %.1f s\n",
               (long long)references, references == 1 ? "" : "s", world->size,
               *seconds - baselines.seconds);
        fflush(stdout);
    }
    if (status == CPPARITY_OK && print && world->rank == 0 && baselines.count > 0) {
        printf("# naive baseline%s of %lld case-dtype pair%s computed by the %d ranks together: "
               "%.1f s\n",
               baselines.count == 1 ? "" : "s", (long long)baselines.count,
               baselines.count == 1 ? "" : "s", world->size, baselines.seconds);
        fflush(stdout);
    }
    return status;
}

/* The attention-level items too long for one process (run_plan_item.query_block), one after
 * another, each on every rank of the job (attention_stream.h): the case's home rank is the
 * team's rank 0 and sends the finished item to rank 0 of the job. Errors returned are the
 * communicator's. */
static cpparity_status run_streamed_attention(cpparity_comm *world, run_plan *plan,
                                              const run_options *options, const run_target *target,
                                              item_store *store, cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    for (int64_t i = 0; status == CPPARITY_OK && i < plan->item_count; i++) {
        const run_plan_item *planned = &plan->items[i];
        if (!planned->runnable || planned->query_block <= 0) {
            continue;
        }
        const cpparity_case *c = plan->cases[planned->case_index];
        const int home = (int)(planned->case_index % world->size);
        cpparity_comm *team = NULL;
        status = split_home_first(world, home, &team, error);
        if (status != CPPARITY_OK) {
            break;
        }
        interrupt_set_activity("case '%s' (attention level by query blocks of %lld tokens, over "
                               "%d ranks)",
                               c->name, (long long)planned->query_block, world->size);
        if (team->rank == 0 && store->print) {
            console_progress(c->name, planned->cp, cpparity_dtype_name(planned->dtype));
        }
        /* the case's seed fixes its inputs; --fresh draws new ones (each process draws its own:
         * the home rank's is every rank's), --seed sets them */
        int64_t seed = (int64_t)(options->seed_set ? options->seed
                                 : options->fresh  ? attention_item_fresh_seed(c->seed)
                                                   : c->seed);
        status = cpparity_broadcast(team, &seed, 1, CPPARITY_INT64, 0, NULL, error);
        run_item item;
        run_item_begin(&item, plan, planned);
        const double started = monotonic_seconds();
        if (status == CPPARITY_OK) {
            status = attention_stream_run(team, &item, c, (uint64_t)seed, target->kernel,
                                          planned->query_block, error);
        }
        byte_buffer packed = {0};
        if (status == CPPARITY_OK && team->rank == 0) {
            item.seconds = monotonic_seconds() - started;
            item.wall_seconds = item.seconds;
            status = run_exchange_pack(&packed, i, &item, error);
        }
        if (team->rank == 0) {
            free_item_tensors(&item);
        }
        cpparity_comm_free(team);
        if (status == CPPARITY_OK) {
            status = collect(world, plan, &packed, store, error);
        }
        byte_buffer_free(&packed);
    }
    return status;
}

cpparity_status run_pass(cpparity_comm *world, run_plan *plan, const run_options *options,
                         const run_target *target, reference_cache *cache, bool print,
                         run_results *results, cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    if (world->rank == 0 && results->items == NULL) {
        status = begin_items(results, plan, error);
    }
    int64_t sizes[CPPARITY_MAX_CP_SIZES * 8];
    int size_count = 0;
    for (int64_t i = 0; i < plan->item_count; i++) {
        bool known = false;
        for (int s = 0; s < size_count; s++) {
            known |= sizes[s] == plan->items[i].cp;
        }
        if (!known && plan->items[i].runnable && size_count < (int)(sizeof sizes / sizeof *sizes)) {
            sizes[size_count++] = plan->items[i].cp;
        }
    }
    qsort(sizes, (size_t)size_count, sizeof *sizes, compare_sizes);
    if (status == CPPARITY_OK) {
        double seconds = 0.0;
        status = spread_references(world, plan, options, cache, print, &seconds, error);
        if (world->rank == 0) {
            results->provenance.reference_spread_seconds += seconds;
        }
    }
    baseline_table baselines = {0};
    item_store store = {results, print};
    if (status == CPPARITY_OK) {
        status = run_streamed_attention(world, plan, options, target, &store, error);
    }
    for (int s = 0; s < size_count && status == CPPARITY_OK; s++) {
        status =
            run_phase(world, plan, options, target, sizes[s], &baselines, cache, &store, error);
        if (status == CPPARITY_OK && sizes[s] == 1) {
            for (int64_t i = 0; world->rank == 0 && i < plan->item_count && status == CPPARITY_OK;
                 i++) {
                if (plan->items[i].cp == 1 && results->items[i].tensor_count > 0) {
                    status = baseline_table_add(&baselines, plan->items[i].case_index,
                                                &results->items[i], error);
                }
            }
            if (status == CPPARITY_OK) {
                status = share_baselines(world, &baselines, error);
            }
        }
    }
    baseline_table_free(&baselines);
    return status;
}

void run_provenance_fill(run_provenance *p, const cpparity_comm *world, const run_options *options,
                         const run_target *target, const run_environment *environment) {
    snprintf(p->version, sizeof p->version, "%s", environment->version);
    snprintf(p->git_commit, sizeof p->git_commit, "%s", environment->git_commit);
    snprintf(p->compiler, sizeof p->compiler, "%s", environment->compiler);
    snprintf(p->libraries, sizeof p->libraries, "%s", environment->libraries);
    gethostname(p->host, sizeof p->host - 1);
    snprintf(p->command_line, sizeof p->command_line, "%s", environment->command_line);
    snprintf(p->comm, sizeof p->comm, "%s", world->kind);
    snprintf(p->device, sizeof p->device, "%s", options->device);
    snprintf(p->implementation, sizeof p->implementation, "%s", target->implementation->name);
    snprintf(p->kernel, sizeof p->kernel, "%s %s", target->kernel->name, target->kernel->version);
    snprintf(p->fault, sizeof p->fault, "%s", cpparity_fault_name(target->fault));
    p->ranks = world->size;
    p->seed = options->seed_set ? options->seed : 0;
    p->seed_overridden = options->seed_set;
    snprintf(p->store, sizeof p->store, "%s", run_store_name(options->store));
    run_provenance_start(p);
}

void run_provenance_start(run_provenance *p) {
    utc_now(p->start_time, sizeof p->start_time);
}

void run_provenance_finish(run_provenance *p) {
    utc_now(p->end_time, sizeof p->end_time);
}

static int run_job_on_items(cpparity_comm *world, run_plan *plan, const run_options *options,
                            const run_target *target, const run_environment *environment) {
    run_results results;
    memset(&results, 0, sizeof results);
    cpparity_error error;
    cpparity_status status = CPPARITY_OK;
    if (world->rank == 0) {
        run_provenance_fill(&results.provenance, world, options, target, environment);
        status = begin_items(&results, plan, &error);
        console_preamble(stdout, &results.provenance, plan->case_count, plan->item_count);
        if (plan->filtered_out > 0) {
            printf("# %s left out %lld run%s the selected cases list\n", plan->filters,
                   (long long)plan->filtered_out, plan->filtered_out == 1 ? "" : "s");
        }
        bool spread = false;
        for (int64_t c = 0; c < plan->case_count; c++) {
            spread |=
                run_spreads_reference(plan->cases[c], world->size, ranks_are_processes(world));
        }
        if (spread) {
            printf("# float64 reference spread over %d ranks (row blocks), before the items\n",
                   world->size);
        }
        console_table_header(stdout);
    }
    reference_cache cache = {.directory = options->reference_cache};
    if (status == CPPARITY_OK) {
        status = run_pass(world, plan, options, target, &cache, true, &results, &error);
    }
    if (status == CPPARITY_OK) {
        status = run_discrimination(world, plan, options, &cache, &results, &error);
    }
    run_report_reference_cache(world, &cache);
    reference_cache_free(&cache);
    int64_t code = 0;
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity run: rank %d: %s\n", world->world_rank, error.message);
        code = status;
        cpparity_comm_abort(world, (int)status, error.message);
    } else {
        if (world->rank == 0) {
            code = finish(&results, plan, options, environment);
        }
        if (cpparity_broadcast(world, &code, 1, CPPARITY_INT64, 0, NULL, &error) != CPPARITY_OK) {
            fprintf(stderr, "cpparity run: rank %d: %s\n", world->world_rank, error.message);
            code = 3;
        }
    }
    run_results_free(&results);
    return (int)code;
}
