/*
 * command_export.c — `cpparity export`: one model-level case for a framework's run (export.h,
 * `SUITE.yaml --case NAME -o FILE.h5`), or attention-level cases for a kernel called from Python
 * (attention_export.h: every attention-level case of SUITE.yaml, those named by --case, or
 * `--random N [--seed S]`).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/case.h"
#include "common/interrupt.h"
#include "common/output_file.h"
#include "distributed/comm/comm_launch.h"
#include "harness/cli/commands.h"
#include "harness/cli/run_arguments.h"
#include "harness/running/attention_export.h"
#include "harness/running/attention_item.h"
#include "harness/running/reference_service.h"
#include "harness/running/run_options.h"
#include "harness/storage/export.h"
#include "harness/suite/case_file.h"
#include "harness/suite/random_cases.h"
#include "reference/threads.h"

#define EXPORT_MAX_NAMED 4096 /* --case flags of one command */

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity export SUITE.yaml --case NAME -o FILE.h5\n"
            "       cpparity export SUITE.yaml [--case NAME]... [--seed S] -o FILE.h5\n"
            "       cpparity export --random N [--seed S] -o FILE.h5\n"
            "  A model-level case: its inputs, weights, per-layer dense masks (S <= %d) and\n"
            "  float64 reference loss, logits and gradients, for a framework's rank dumps;\n"
            "  --no-logits leaves the logits [B, S, V] out (`judge` computes its reference\n"
            "  itself; at a long sequence and a large vocabulary they are most of the file).\n"
            "  Attention-level cases (level: attention; every one of the suite unless --case\n"
            "  names some; --random N draws N as `run --random` does): per case and layer q, k,\n"
            "  v, dout (from --seed, else the case's seed, as `run`), the compact mask, the block\n"
            "  calls and the float64 reference, for a kernel dump (docs/dump-format.md).\n"
            "  Never overwrites FILE.h5.\n",
            EXPORT_DENSE_MASK_LIMIT);
}

typedef struct export_options {
    const char *suite_path, *output;
    const char *named[EXPORT_MAX_NAMED];
    int64_t named_count;
    long long random; /* --random N; 0 none */
    attention_export_seed seed;
    bool no_logits; /* --no-logits: /reference/logits left out (model level) */
    bool help;
} export_options;

static cpparity_status parse(export_options *o, int argc, char **argv, cpparity_error *error) {
    enum { OPTION_RANDOM = 256, OPTION_SEED, OPTION_NO_LOGITS };
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},
        {"no-logits", no_argument, NULL, OPTION_NO_LOGITS},
        {"output", required_argument, NULL, 'o'},
        {"random", required_argument, NULL, OPTION_RANDOM},
        {"seed", required_argument, NULL, OPTION_SEED},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    optind = 1;
    opterr = 0;
    int option;
    while ((option = getopt_long(argc, argv, "o:", options, NULL)) != -1) {
        long long value = 0;
        switch (option) {
        case 'c':
            if (o->named_count == EXPORT_MAX_NAMED) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "--case: at most %d",
                                          EXPORT_MAX_NAMED);
            }
            o->named[o->named_count++] = optarg;
            break;
        case 'o':
            o->output = optarg;
            break;
        case OPTION_RANDOM:
            if (run_arguments_integer(optarg, "--random", 1, RANDOM_CASES_MAX, &o->random, error) !=
                CPPARITY_OK) {
                return CPPARITY_ERROR_INPUT;
            }
            break;
        case OPTION_SEED:
            if (run_arguments_integer(optarg, "--seed", 0, INT64_MAX, &value, error) !=
                CPPARITY_OK) {
                return CPPARITY_ERROR_INPUT;
            }
            o->seed = (attention_export_seed){true, (uint64_t)value};
            break;
        case OPTION_NO_LOGITS:
            o->no_logits = true;
            break;
        case 'h':
            o->help = true;
            return CPPARITY_OK;
        default:
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "unknown option or missing value '%s'", argv[optind - 1]);
        }
    }
    const int suites = argc - optind;
    if (o->random > 0 && (suites > 0 || o->named_count > 0)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--random draws its own cases: give no SUITE.yaml and no --case");
    }
    if (o->random == 0 && suites != 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s",
                                  suites < 1 ? "missing SUITE.yaml (or --random N)"
                                             : "exactly one SUITE.yaml is expected");
    }
    if (o->output == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "missing -o FILE.h5");
    }
    o->suite_path = suites == 1 ? argv[optind] : NULL;
    return CPPARITY_OK;
}

/* The attention-level cases to export, in suite order, into chosen (suite->count of room): those
 * named (each must exist and be attention-level), or every attention-level one. */
static cpparity_status choose(const export_options *o, const cpparity_suite *suite,
                              const char *shown, const cpparity_case **chosen, int64_t *count,
                              cpparity_error *error) {
    *count = 0;
    for (int64_t n = 0; n < o->named_count; n++) {
        const cpparity_case *c = cpparity_suite_find(suite, o->named[n]);
        if (c == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "--case %s: no such case in %s (cpparity list %s)",
                                      o->named[n], shown, shown);
        }
        if (c->level != CPPARITY_LEVEL_ATTENTION) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "--case %s: a model-level case; export it alone (one "
                                      "--case), not with attention-level ones",
                                      o->named[n]);
        }
    }
    for (int64_t i = 0; i < suite->count; i++) {
        const cpparity_case *c = &suite->cases[i];
        bool named = o->named_count == 0;
        for (int64_t n = 0; n < o->named_count && !named; n++) {
            named = strcmp(o->named[n], c->name) == 0;
        }
        if (named && c->level == CPPARITY_LEVEL_ATTENTION) {
            chosen[(*count)++] = c;
        }
    }
    if (*count == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s has no attention-level case (level: attention); a "
                                  "model-level case is exported with --case NAME",
                                  shown);
    }
    return CPPARITY_OK;
}

/* The model-level export of one case; with a service (a launcher's job of several ranks), its
 * reference spread over the job's ranks (reference_service.h). */
static int export_model_case(const export_options *o, const cpparity_case *exported,
                             const export_source *source, reference_service *service) {
    cpparity_error error;
    if (o->seed.set) {
        fprintf(stderr, "cpparity export: --seed applies to attention-level cases; a model-level "
                        "case is exported with its own seed\n");
        return 2;
    }
    cpparity_status status = output_file_check(o->output, "-o", &error);
    if (status == CPPARITY_OK) { /* before the reference is computed */
        interrupt_set_activity("the export of case '%s' to %s", exported->name, o->output);
        output_claim claim; /* a second export to the same path stops now, not after computing */
        status = output_file_claim(&claim, o->output, "-o", &error);
        if (status == CPPARITY_OK) {
            export_spread spread = {NULL, reference_service_summon, service};
            if (service != NULL) {
                service->suite_text = source->suite_text;
                service->suite_length = source->suite_length;
                service->suite_path = source->suite_path;
                spread.team = &service->team;
                printf("# float64 reference spread over %d ranks (row blocks)\n",
                       service->world->size);
            }
            status = export_case(exported, source, !o->no_logits, o->output,
                                 service != NULL ? &spread : NULL, &error);
            output_file_release(&claim);
        }
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: case %s: %s\n", exported->name, error.message);
    }
    return (int)status;
}

/* The attention-level export of the chosen cases. */
static int export_attention(const export_options *o, const cpparity_suite *suite,
                            const export_source *source) {
    cpparity_error error;
    const cpparity_case **chosen = calloc((size_t)suite->count + 1, sizeof *chosen);
    int64_t count = 0;
    cpparity_status status =
        chosen == NULL ? cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory")
                       : choose(o, suite, source->suite_path, chosen, &count, &error);
    if (status == CPPARITY_OK) {
        status = output_file_check(o->output, "-o", &error);
    }
    if (status == CPPARITY_OK) {
        interrupt_set_activity("the export of %lld attention-level cases to %s", (long long)count,
                               o->output);
        output_claim claim;
        status = output_file_claim(&claim, o->output, "-o", &error);
        if (status == CPPARITY_OK) {
            status = attention_export_write(chosen, count, source, o->seed, o->output, &error);
            output_file_release(&claim);
        }
    }
    if (status == CPPARITY_OK) {
        printf("# exported %lld attention-level case%s of %s to %s (inputs from %s)\n",
               (long long)count, count == 1 ? "" : "s", source->suite_path, o->output,
               o->seed.set ? "--seed" : "each case's seed");
    } else {
        fprintf(stderr, "cpparity export: %s\n", error.message);
    }
    free(chosen);
    return (int)status;
}

/* The export on this process (with a service: rank 0 of a launcher's job). */
static int export_run(export_options o, reference_service *service) {
    cpparity_error error;
    cpparity_suite suite = {0};
    char *suite_text = NULL; /* what is parsed is what the export keeps (/source/suite_yaml) */
    size_t suite_length = 0;
    char shown[RANDOM_CASES_DISPLAY];
    cpparity_status status = CPPARITY_OK;
    if (o.random > 0) { /* one seed draws the cases and their inputs, as `run --random` */
        if (!o.seed.set) {
            o.seed = (attention_export_seed){true, attention_item_fresh_seed(0)};
            printf("# random: %lld cases drawn from seed %llu (again: --random %lld --seed %llu)\n",
                   o.random, (unsigned long long)o.seed.value, o.random,
                   (unsigned long long)o.seed.value);
        }
        random_cases_display(o.seed.value, o.random, shown);
        suite_text = random_cases_text(o.seed.value, o.random);
        suite_length = suite_text != NULL ? strlen(suite_text) : 0;
        status = suite_text == NULL
                     ? cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory")
                     : CPPARITY_OK;
    } else {
        snprintf(shown, sizeof shown, "%s", o.suite_path);
        status = cpparity_suite_read(o.suite_path, &suite_text, &suite_length, &error);
    }
    const char *path = o.random > 0 ? shown : o.suite_path;
    if (status == CPPARITY_OK) {
        status = cpparity_suite_load_text(suite_text, suite_length, path, &suite, &error);
    }
    int code = (int)status;
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: %s\n", error.message);
    } else {
        const export_source source = {path, suite_text, suite_length};
        const cpparity_case *one =
            o.named_count == 1 ? cpparity_suite_find(&suite, o.named[0]) : NULL;
        code = one != NULL && one->level == CPPARITY_LEVEL_MODEL
                   ? export_model_case(&o, one, &source, service)
                   : export_attention(&o, &suite, &source);
    }
    cpparity_suite_free(&suite);
    free(suite_text);
    return code;
}

/* Every rank of a launcher's job: rank 0 reads the suite and writes the export, the others
 * compute their row blocks of its reference (they need none of rank 0's files). */
static int export_job_main(cpparity_comm *world, void *argument) {
    const export_options *o = argument;
    if (world->size == 1) {
        return export_run(*o, NULL);
    }
    reference_service service;
    reference_service_init(&service, world, NULL, 0, NULL);
    reference_set_threads(reference_threads_per_rank(0, true, 1));
    if (world->rank != 0) {
        char prefix[64]; /* one process per rank: its messages say which */
        snprintf(prefix, sizeof prefix, "cpparity export: rank %d", world->world_rank);
        interrupt_set_prefix(prefix);
        return reference_service_serve(&service);
    }
    const int code = export_run(*o, &service);
    reference_service_release(&service, code);
    return code;
}

int command_export(int argc, char **argv) {
    export_options o;
    cpparity_error error;
    if (parse(&o, argc, argv, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: %s\n", error.message);
        usage(stderr);
        return 2;
    }
    if (o.help) {
        usage(stdout);
        return 0;
    }
    const cpparity_comm_backend *backend = comm_backend_detect();
    if (!backend->ranks_from_launcher) { /* the reference on every core of this machine */
        reference_set_threads(reference_threads_per_rank(0, false, 1));
        return export_run(o, NULL);
    }
    int code = 0; /* mpirun -np R: the reference spread over the R ranks */
    if (backend->launch(0, RUN_DEFAULT_TIMEOUT_SECONDS, export_job_main, &o, &code, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "cpparity export: %s\n", error.message);
        return 3;
    }
    return code;
}
