/*
 * command_judge.c — `cpparity judge EXPORT.h5 DUMP.h5 ... [--baseline CP1_DUMP.h5 ...]`: the
 * verdict of `cpparity run` on a framework's own run (docs/dump-format.md). The case is rebuilt
 * from the export's suite (/source), its float64 reference and naive same-dtype baseline are
 * computed as `run` computes them (cached with --reference-cache), the dumps are read and
 * checked as one run (harness/running/judge_dumps.h), and judge_item decides, with the CP-only
 * check against the framework's own cp = 1 dumps when --baseline gives them. The outputs are
 * `run`'s (--out, --junit, --markdown), so `report` and `diff` read them unchanged.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/monotonic_clock.h"
#include "common/model_parameters.h"
#include "distributed/comm/comm_launch.h"
#include "harness/cli/commands.h"
#include "harness/running/reference_service.h"
#include "harness/running/run_options.h"
#include "harness/cli/judge_kernel.h"
#include "harness/cli/judge_provenance.h"
#include "harness/cli/run_arguments.h"
#include "harness/judging/discrimination.h"
#include "harness/judging/judge_item.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/judge_dumps.h"
#include "harness/running/memory_estimate.h"
#include "harness/running/run.h"
#include "harness/running/run_outputs.h"
#include "harness/storage/attention_export_reader.h"
#include "harness/storage/export_reader.h"
#include "harness/suite/case_file.h"
#include "reference/threads.h"
#include "reports/console.h"

#define JUDGE_MAX_DUMPS 4096 /* dumps of one run, and of its cp = 1 baseline */

typedef struct judge_options {
    const char *export_path;
    const char *dumps[JUDGE_MAX_DUMPS];
    int64_t dump_count;
    const char *baselines[JUDGE_MAX_DUMPS];
    int64_t baseline_count;
    const char *outputs[RUN_OUTPUT_COUNT];
    run_store store;
    const char *reference_cache;
    int threads;
    int64_t max_memory; /* --max-memory in bytes; 0: what is available */
    bool help;
} judge_options;

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity judge EXPORT.h5 DUMP.h5 ... [options]\n"
            "  The verdict of `cpparity run` on a framework's own context-parallel run: one\n"
            "  dump per rank (docs/dump-format.md) of the case `cpparity export` wrote.\n"
            "options:\n"
            "  --baseline DUMP.h5  the framework's own cp = 1 dump, for the CP-only check of\n"
            "                      docs/tolerances.md (without it the check is not made)\n"
            "  --out FILE.h5       results file (default results/judge-<UTC timestamp>.h5)\n"
            "  --junit FILE.xml    JUnit XML\n"
            "  --markdown FILE.md  summary table\n"
            "  --store MODE        metrics|failures|all (default failures)\n"
            "  --reference-cache DIR  float64 reference outputs kept on disk between runs\n"
            "  --threads N         threads of the float64 reference (default: the cores)\n"
            "  --max-memory SIZE   memory the judge may hold, e.g. 512M, 24G (default: what is\n"
            "                      available); it bounds the padded length the dumps may have\n"
            "exit: 0 every tensor passed, 1 a parity failure, 2 bad input (a file and the HDF5\n"
            "path named), 3 a runtime failure\n");
}

static cpparity_status parse(judge_options *options, int argc, char **argv, cpparity_error *error) {
    memset(options, 0, sizeof *options);
    options->store = RUN_STORE_FAILURES;
    enum {
        OPTION_BASELINE = 256,
        OPTION_OUT,
        OPTION_JUNIT,
        OPTION_MARKDOWN,
        OPTION_STORE,
        OPTION_CACHE,
        OPTION_THREADS,
        OPTION_MAX_MEMORY
    };
    static const struct option long_options[] = {
        {"baseline", required_argument, NULL, OPTION_BASELINE},
        {"out", required_argument, NULL, OPTION_OUT},
        {"junit", required_argument, NULL, OPTION_JUNIT},
        {"markdown", required_argument, NULL, OPTION_MARKDOWN},
        {"store", required_argument, NULL, OPTION_STORE},
        {"reference-cache", required_argument, NULL, OPTION_CACHE},
        {"threads", required_argument, NULL, OPTION_THREADS},
        {"max-memory", required_argument, NULL, OPTION_MAX_MEMORY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int option;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (option) {
        case OPTION_BASELINE:
            if (options->baseline_count == JUDGE_MAX_DUMPS) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "--baseline: at most %d dumps", JUDGE_MAX_DUMPS);
            }
            options->baselines[options->baseline_count++] = optarg;
            break;
        case OPTION_OUT:
            options->outputs[RUN_OUTPUT_RESULTS] = optarg;
            break;
        case OPTION_JUNIT:
            options->outputs[RUN_OUTPUT_JUNIT] = optarg;
            break;
        case OPTION_MARKDOWN:
            options->outputs[RUN_OUTPUT_MARKDOWN] = optarg;
            break;
        case OPTION_STORE: {
            int store = 0;
            if (run_arguments_choice(optarg, "--store", run_store_names, RUN_STORE_COUNT, &store,
                                     error) != CPPARITY_OK) {
                return CPPARITY_ERROR_INPUT;
            }
            options->store = (run_store)store;
            break;
        }
        case OPTION_CACHE:
            if (run_arguments_reference_cache(optarg, error) != CPPARITY_OK) {
                return CPPARITY_ERROR_INPUT;
            }
            options->reference_cache = optarg;
            break;
        case OPTION_THREADS: {
            long long threads = 0;
            if (run_arguments_integer(optarg, "--threads", 1, 256, &threads, error) !=
                CPPARITY_OK) {
                return CPPARITY_ERROR_INPUT;
            }
            options->threads = (int)threads;
            break;
        }
        case OPTION_MAX_MEMORY:
            if (!memory_size_parse(optarg, &options->max_memory)) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "--max-memory expects a size such as 512M, 24G, 1.5GiB "
                                          "or a number of bytes, not '%s'",
                                          optarg);
            }
            break;
        case 'h':
            options->help = true;
            return CPPARITY_OK;
        default:
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "unknown option or missing value '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind < 2) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s",
                                  argc - optind < 1 ? "missing EXPORT.h5 and the rank dumps"
                                                    : "missing the rank dumps (DUMP.h5 ...)");
    }
    options->export_path = argv[optind++];
    if (argc - optind > JUDGE_MAX_DUMPS) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "at most %d rank dumps",
                                  JUDGE_MAX_DUMPS);
    }
    while (optind < argc) {
        options->dumps[options->dump_count++] = argv[optind++];
    }
    return CPPARITY_OK;
}

/* What the judge works on: the case, rebuilt from the export, and its parameter table. */
typedef struct judge_case {
    export_reading reading;
    cpparity_suite suite;
    const cpparity_case *c;
    cpparity_tensor_table parameters;
    char suite_path[EXPORT_READER_TEXT + 300]; /* "EXPORT.h5:/source/suite_yaml (SUITE)" */
} judge_case;

static cpparity_status load_case(const char *export_path, judge_case *loaded,
                                 cpparity_error *error) {
    memset(loaded, 0, sizeof *loaded);
    cpparity_status status = export_read(export_path, &loaded->reading, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    snprintf(loaded->suite_path, sizeof loaded->suite_path, "%s:/source/suite_yaml (%s)",
             export_path, loaded->reading.suite_path);
    status = cpparity_suite_load_text(loaded->reading.suite_text, loaded->reading.suite_length,
                                      loaded->suite_path, &loaded->suite, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    loaded->c = cpparity_suite_find(&loaded->suite, loaded->reading.case_name);
    if (loaded->c == NULL || loaded->c->seed != loaded->reading.seed) {
        return cpparity_error_set(
            error, CPPARITY_ERROR_INPUT, "%s: /model: case %s (seed %llu) is not in its own suite",
            export_path, loaded->reading.case_name, (unsigned long long)loaded->reading.seed);
    }
    return cpparity_model_parameter_table(&loaded->c->model, &loaded->parameters, error);
}

static void free_case(judge_case *loaded) {
    cpparity_tensor_table_free(&loaded->parameters);
    cpparity_suite_free(&loaded->suite);
    export_reading_free(&loaded->reading);
}

/* "NAME VERSION", or "NAME" when the dump gives no version (never a stray space). */
static void framework_label(const rank_dump *dump, char *text, size_t size) {
    snprintf(text, size, "%.40s%s%.20s", dump->framework, dump->framework_version[0] ? " " : "",
             dump->framework_version);
}

/* Judges one set of dumps as an item of the case. */
static cpparity_status judge_set(const judge_case *loaded, const judge_dump_set *set,
                                 const reference_outputs *reference, const judge_options *options,
                                 const baseline_table *baselines, bool is_baseline, run_item *item,
                                 cpparity_error *error) {
    memset(item, 0, sizeof *item);
    item->source = loaded->c;
    snprintf(item->suite_path, sizeof item->suite_path, "%.*s", (int)sizeof item->suite_path - 1,
             loaded->suite_path);
    item->cp = set->cp;
    item->dtype = set->dtype;
    item->is_baseline = is_baseline;
    item->worst_tensor = -1;
    item->padded_seq_len = set->padded_len;
    const judge_inputs in = {.reference = reference,
                             .naive = &reference->naive[set->dtype],
                             .losses = set->losses,
                             .logits = judge_dump_set_logits(set),
                             .gradients = set->gradients,
                             .store = options->store,
                             .positions = set->positions,
                             .lengths = set->lengths};
    return judge_item(item, 0, &in, baselines, error);
}

/* The tightest limit the judged tensors got (the pass rule's ratio × naive error + floor): the
 * discrimination check's threshold is 10 × it (tolerances.md); infinite when nothing compared. */
static double tightest_limit(const run_results *results) {
    double tightest = INFINITY;
    for (int64_t i = 0; i < results->item_count; i++) {
        for (int64_t t = 0; t < results->items[i].tensor_count; t++) {
            const double limit = results->items[i].tensors[t].decision.limit;
            tightest = isfinite(limit) && limit > 0.0 && limit < tightest ? limit : tightest;
        }
    }
    return tightest;
}

/* An attention-level export: its one kernel dump judged (judge_kernel.h), after refusing the
 * options that belong to rank dumps. */
static int judge_kernel_dump(const judge_options *options, const attention_export_reading *reading,
                             const char *const *paths, int argc, char **argv) {
    const char *refused = options->dump_count != 1      ? "one KERNEL_DUMP.h5 (not several dumps)"
                          : options->baseline_count > 0 ? "no --baseline (it is for rank dumps)"
                          : options->reference_cache != NULL
                              ? "no --reference-cache (each layer's float64 attention is "
                                "computed as `run` computes it)"
                              : NULL;
    if (refused != NULL) {
        fprintf(stderr, "cpparity judge: %s is an attention-level export: it takes %s\n",
                options->export_path, refused);
        return 2;
    }
    reference_set_threads(options->threads > 0 ? options->threads
                                               : (int)sysconf(_SC_NPROCESSORS_ONLN));
    const judge_kernel_request request = {
        options->export_path, reading, options->dumps[0], paths, options->store, argc, argv};
    return judge_kernel(&request);
}

/* Judges on this process; with a service (a launcher's job of several ranks), rank 0 of it,
 * whose float64 reference the other ranks compute with it (reference_service.h). */
static int judge(const judge_options *options, int argc, char **argv, reference_service *service) {
    cpparity_error error;
    cpparity_error_clear(&error);
    char default_out[512];
    const char *paths[RUN_OUTPUT_COUNT];
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        paths[o] = options->outputs[o];
    }
    if (paths[RUN_OUTPUT_RESULTS] == NULL) {
        run_outputs_default_path(default_out, sizeof default_out, "judge-");
        paths[RUN_OUTPUT_RESULTS] = default_out;
    }
    output_claim claims[RUN_OUTPUT_COUNT];
    judge_case loaded;
    judge_dump_set set = {0}, baseline = {0};
    reference_cache cache = {.directory = options->reference_cache};
    run_results results = {0};
    baseline_table baselines = {0};
    cpparity_status status = run_outputs_claim(paths, claims, &error);
    attention_export_reading attention = {0};
    if (status == CPPARITY_OK) { /* an attention-level export is judged with a kernel dump */
        interrupt_set_activity("reading the export %s", options->export_path);
        status = attention_export_read(options->export_path, &attention, &error);
    }
    if (status == CPPARITY_OK && attention.is_attention_export) {
        const int code = judge_kernel_dump(options, &attention, paths, argc, argv);
        attention_export_reading_free(&attention);
        run_outputs_release(claims);
        return code;
    }
    if (status == CPPARITY_OK) {
        status = load_case(options->export_path, &loaded, &error);
    } else {
        memset(&loaded, 0, sizeof loaded);
    }
    memory_limit limit;
    memory_limit_resolve(options->max_memory, false, "", &limit);
    if (status == CPPARITY_OK) {
        interrupt_set_activity("reading the rank dumps");
        const judge_dumps_request run = {options->dumps, options->dump_count, NULL,          0, -1,
                                         limit.bytes,    limit.source,        options->store};
        status =
            judge_dumps_load(&run, &loaded.reading, loaded.c, &loaded.parameters, &set, &error);
    }
    if (status == CPPARITY_OK && options->baseline_count > 0) {
        interrupt_set_activity("reading the --baseline dumps");
        const judge_dumps_request cp1 = {options->baselines, options->baseline_count,
                                         "--baseline",       1,
                                         (int)set.dtype,     limit.bytes,
                                         limit.source,       options->store};
        status = judge_dumps_load(&cp1, &loaded.reading, loaded.c, &loaded.parameters, &baseline,
                                  &error);
        if (status == CPPARITY_OK && set.cp == 1) {
            status = cpparity_error_set(&error, CPPARITY_ERROR_INPUT,
                                        "--baseline: the dumps are of cp 1 already; a baseline is "
                                        "for judging cp > 1");
        }
    }
    const bool with_baseline = options->baseline_count > 0;
    const int64_t item_count = with_baseline ? 2 : 1;
    if (status == CPPARITY_OK) {
        results.items = calloc((size_t)item_count, sizeof *results.items);
        status = results.items == NULL
                     ? cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory")
                     : CPPARITY_OK;
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity judge: %s\n", error.message);
        judge_dump_set_free(&set);
        judge_dump_set_free(&baseline);
        free_case(&loaded);
        run_outputs_release(claims);
        return (int)status;
    }
    judge_provenance(&results.provenance, argc, argv, options->store, set.dumps[0].framework,
                     set.dumps[0].framework_version, set.dumps[0].kernel, (int)set.cp);
    results.item_count = item_count;
    console_preamble(stdout, &results.provenance, 1, item_count);
    char framework[64];
    framework_label(&set.dumps[0], framework, sizeof framework);
    printf("# layout: %s (cp %lld, %lld positions for S = %lld), framework %s, kernel %s\n",
           token_layout_kind_name(set.layout), (long long)set.cp, (long long)set.padded_len,
           (long long)loaded.c->seq_len, framework, set.dumps[0].kernel);
    reference_set_threads(reference_threads_per_rank(options->threads, service != NULL, 1));
    if (service != NULL) {
        printf("# float64 reference spread over %d ranks (row blocks), %d thread%s each\n",
               service->world->size, reference_threads(), reference_threads() == 1 ? "" : "s");
    }
    console_table_header(stdout);
    if (service != NULL) { /* the other ranks compute their row blocks of the reference */
        service->suite_text = loaded.reading.suite_text;
        service->suite_length = loaded.reading.suite_length;
        service->suite_path = loaded.suite_path;
        cache.team = &service->team;
        cache.summon = reference_service_summon;
        cache.summon_context = service;
    }
    const reference_outputs *reference = NULL;
    double seconds = 0.0;
    interrupt_set_activity("the float64 reference of case '%s'", loaded.c->name);
    if (service != NULL) { /* the reference and the naive baseline spread over the ranks; then
                            * the comparison takes every core of rank 0's node, the other ranks
                            * being idle */
        int computed_now = 0;
        const double start = monotonic_seconds();
        status = reference_cache_get(&cache, 0, loaded.c, loaded.c->seed, &reference, &computed_now,
                                     &error);
        if (status == CPPARITY_OK && !reference_cache_has(&cache, 0, loaded.c->seed, set.dtype)) {
            interrupt_set_activity("the naive baseline of case '%s'", loaded.c->name);
            status = reference_service_summon_baseline(service, loaded.c, loaded.c->seed, set.dtype,
                                                       &error);
            if (status == CPPARITY_OK) {
                status = reference_cache_spread_naive(&cache, 0, loaded.c, loaded.c->seed,
                                                      set.dtype, &service->team, &error);
            }
            if (status == CPPARITY_OK) {
                printf("# naive %s baseline spread over %d ranks\n", cpparity_dtype_name(set.dtype),
                       service->world->size);
            }
        }
        reference_set_threads(reference_threads_per_rank(options->threads, false, 1));
        seconds = monotonic_seconds() - start;
    }
    if (status == CPPARITY_OK) {
        double naive_seconds = 0.0;
        status = reference_cache_get_with_naive(&cache, 0, loaded.c, loaded.c->seed, set.dtype,
                                                &reference, &naive_seconds, &error);
        seconds += naive_seconds;
    }
    if (status == CPPARITY_OK && cache.directory != NULL) { /* as `run` reports it */
        printf("# reference cache %s: %s\n", cache.directory,
               cache.reused > 0   ? "reused"
               : cache.stored > 0 ? "computed and stored"
                                  : "computed, not stored");
        if (cache.warning[0] != '\0') {
            fprintf(stderr, "cpparity judge: reference cache: %s\n", cache.warning);
        }
    }
    int64_t next = 0;
    interrupt_set_activity("judging the dumps of case '%s'", loaded.c->name);
    if (status == CPPARITY_OK && with_baseline) {
        run_item *item = &results.items[next++];
        status = judge_set(&loaded, &baseline, reference, options, &baselines, true, item, &error);
        item->reference_seconds = seconds;
        if (status == CPPARITY_OK) {
            console_item(stdout, item);
            status = baseline_table_add(&baselines, 0, item, &error);
        }
    }
    if (status == CPPARITY_OK) {
        run_item *item = &results.items[next];
        /* without --baseline there is no cp = 1 error to check against: NULL skips that check */
        status = judge_set(&loaded, &set, reference, options, with_baseline ? &baselines : NULL,
                           set.cp == 1, item, &error);
        item->reference_seconds = with_baseline ? 0.0 : seconds;
        if (status == CPPARITY_OK) {
            console_item(stdout, item);
        }
    }
    if (status == CPPARITY_OK) { /* discrimination (tolerances.md): as `run` checks it */
        interrupt_set_activity("the discrimination check of case '%s'", loaded.c->name);
        /* spread like the reference: the other ranks compute their share of each rerun */
        const bool spread = service != NULL && discrimination_reruns(loaded.c) > 0;
        if (spread) {
            status =
                reference_service_summon_discrimination(service, loaded.c, loaded.c->seed, &error);
        }
        const double start = monotonic_seconds();
        if (status == CPPARITY_OK) {
            status = discrimination_check(&results, loaded.c, reference, loaded.c->seed,
                                          tightest_limit(&results), spread ? &service->team : NULL,
                                          &error);
        }
        if (status == CPPARITY_OK && spread) {
            printf("# discrimination reruns computed by the %d ranks together: %.1f s\n",
                   service->world->size, monotonic_seconds() - start);
        }
        for (int64_t r = 0; r < results.discrimination_count; r++) {
            results.discrimination[r].source = loaded.c;
        }
    }
    int code = 0;
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity judge: %s\n", error.message);
        code = (int)status;
    } else {
        run_results_count(&results);
        console_discrimination(stdout, &results);
        code = run_results_exit_code(&results, false); /* a judge has no NOT RUN item */
        run_provenance_finish(&results.provenance);
        const cpparity_status written = run_outputs_write(&results, paths, &error);
        if (written != CPPARITY_OK) {
            fprintf(stderr, "cpparity judge: %s; no output was published\n", error.message);
            code = code > (int)written ? code : (int)written;
        }
        console_footer(stdout, &results, written == CPPARITY_OK ? paths[RUN_OUTPUT_RESULTS] : NULL,
                       false);
    }
    fflush(stdout);
    baseline_table_free(&baselines);
    run_results_free(&results);
    reference_cache_free(&cache);
    judge_dump_set_free(&set);
    judge_dump_set_free(&baseline);
    free_case(&loaded);
    run_outputs_release(claims);
    return code;
}

typedef struct judge_job {
    const judge_options *options;
    int argc;
    char **argv;
} judge_job;

/* Every rank of a launcher's job: rank 0 judges, the others serve its references. */
static int judge_job_main(cpparity_comm *world, void *argument) {
    const judge_job *job = argument;
    if (world->size == 1) {
        return judge(job->options, job->argc, job->argv, NULL);
    }
    reference_service service;
    reference_service_init(&service, world, NULL, 0, NULL);
    if (world->rank != 0) {
        char prefix[64]; /* one process per rank: its messages say which */
        snprintf(prefix, sizeof prefix, "cpparity judge: rank %d", world->world_rank);
        interrupt_set_prefix(prefix);
        reference_set_threads(reference_threads_per_rank(job->options->threads, true, 1));
        return reference_service_serve(&service);
    }
    const int code = judge(job->options, job->argc, job->argv, &service);
    reference_service_release(&service, code);
    return code;
}

int command_judge(int argc, char **argv) {
    judge_options options;
    cpparity_error error;
    if (parse(&options, argc, argv, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity judge: %s\n", error.message);
        usage(stderr);
        return 2;
    }
    if (options.help) {
        usage(stdout);
        return 0;
    }
    interrupt_set_activity("cpparity judge");
    const cpparity_comm_backend *backend = comm_backend_detect();
    if (!backend->ranks_from_launcher) {
        return judge(&options, argc, argv, NULL);
    }
    /* mpirun -np R: rank 0 judges, every rank computes its row blocks of the reference */
    judge_job job = {&options, argc, argv};
    int code = 0;
    if (backend->launch(0, RUN_DEFAULT_TIMEOUT_SECONDS, judge_job_main, &job, &code, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "cpparity judge: %s\n", error.message);
        return 3;
    }
    return code;
}
