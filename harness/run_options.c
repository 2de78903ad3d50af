/* run_options.c — parsing `cpparity run` options (see run_options.h). */
#include "run_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

const char *run_options_usage(void) {
    return "usage: cpparity run [SUITE.yaml ...] [options]\n"
           "  Runs every case (and cp size) of the suites on the implementation under test and\n"
           "  the float64 reference, compares loss, each rank's logits and every gradient,\n"
           "  and writes one HDF5 results file. Default suite: cases/ci.yaml.\n"
           "  --case PATTERN      only cases whose name matches (repeatable; shell glob)\n"
           "  --out FILE.h5       results file (default results/<UTC timestamp>.h5); never\n"
           "                      overwrites\n"
           "  --junit FILE.xml    JUnit XML, one <testcase> per case and cp size\n"
           "  --markdown FILE.md  summary table (for CI job summaries)\n"
           "  --device cpu|cuda   where the implementation under test runs (default cpu)\n"
           "  --comm mpi|local    communicator (default: mpi under mpirun, else local)\n"
           "  --ranks N           ranks of --comm local (default: the largest cp size)\n"
           "  --dtype f32|bf16    only this dtype\n"
           "  --seed N            fixture seed for every case (default: each case's own)\n"
           "  --kernel NAME       attention kernel (default cpu-f32)\n"
           "  --timeout SECONDS   deadline of every collective (default 300)\n"
           "  --store metrics|failures|all  tensors kept in the results file (default failures)\n"
           "Exit codes: 0 passed, 1 parity failure, 2 bad input, 3 environment or runtime.\n";
}

const char *run_store_name(run_store store) {
    return store == RUN_STORE_ALL ? "all" : store == RUN_STORE_METRICS ? "metrics" : "failures";
}

/* Parses a whole decimal number in [minimum, maximum]. */
static cpparity_status parse_integer(const char *text, const char *flag, long long minimum,
                                     long long maximum, long long *value, cpparity_error *error) {
    char *end = NULL;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || parsed < minimum || parsed > maximum) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s expects an integer in [%lld, %lld], got '%s'", flag, minimum,
                                  maximum, text);
    }
    *value = parsed;
    return CPPARITY_OK;
}

/* Checks text is one of the choices (NULL-terminated). */
static cpparity_status expect_choice(const char *text, const char *flag, const char *const *choices,
                                     cpparity_error *error) {
    for (const char *const *choice = choices; *choice != NULL; choice++) {
        if (strcmp(text, *choice) == 0) {
            return CPPARITY_OK;
        }
    }
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: unknown value '%s'", flag, text);
}

cpparity_status run_options_parse(run_options *options, int argc, char **argv,
                                  cpparity_error *error) {
    static const struct option long_options[] = {
        {"case", required_argument, NULL, 'c'},    {"out", required_argument, NULL, 'o'},
        {"junit", required_argument, NULL, 'j'},   {"markdown", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'd'},  {"comm", required_argument, NULL, 'C'},
        {"ranks", required_argument, NULL, 'r'},   {"dtype", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},    {"kernel", required_argument, NULL, 'k'},
        {"timeout", required_argument, NULL, 'T'}, {"store", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    memset(options, 0, sizeof *options);
    options->device = "cpu";
    options->kernel = "cpu-f32";
    options->timeout_seconds = 300.0;
    options->store = RUN_STORE_FAILURES;
    optind = 1;
    opterr = 0;
    int option;
    long long value;
    cpparity_status status = CPPARITY_OK;
    while (status == CPPARITY_OK &&
           (option = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
        switch (option) {
        case 'c':
            if (options->pattern_count == RUN_MAX_PATTERNS) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "--case: at most %d",
                                          RUN_MAX_PATTERNS);
            }
            options->patterns[options->pattern_count++] = optarg;
            break;
        case 'o':
            options->out = optarg;
            break;
        case 'j':
            options->junit = optarg;
            break;
        case 'm':
            options->markdown = optarg;
            break;
        case 'd':
            options->device = optarg;
            status = expect_choice(optarg, "--device", (const char *const[]){"cpu", "cuda", NULL},
                                   error);
            break;
        case 'C':
            options->comm = optarg;
            status = expect_choice(optarg, "--comm",
                                   (const char *const[]){"mpi", "local", "nccl", NULL}, error);
            break;
        case 'r':
            status = parse_integer(optarg, "--ranks", 1, 1024, &value, error);
            options->ranks = (int)value;
            break;
        case 't':
            status =
                expect_choice(optarg, "--dtype", (const char *const[]){"f32", "bf16", NULL}, error);
            options->dtype_set = true;
            options->dtype = strcmp(optarg, "bf16") == 0 ? CPPARITY_DTYPE_BF16 : CPPARITY_DTYPE_F32;
            break;
        case 's':
            status = parse_integer(optarg, "--seed", 0, INT64_MAX, &value, error);
            options->seed_set = true;
            options->seed = (uint64_t)value;
            break;
        case 'k':
            options->kernel = optarg;
            break;
        case 'T':
            status = parse_integer(optarg, "--timeout", 1, 86400, &value, error);
            options->timeout_seconds = (double)value;
            break;
        case 'S':
            status =
                expect_choice(optarg, "--store",
                              (const char *const[]){"metrics", "failures", "all", NULL}, error);
            options->store = strcmp(optarg, "all") == 0       ? RUN_STORE_ALL
                             : strcmp(optarg, "metrics") == 0 ? RUN_STORE_METRICS
                                                              : RUN_STORE_FAILURES;
            break;
        case 'h':
            options->help = true;
            break;
        case ':':
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s needs a value",
                                      argv[optind - 1]);
        default:
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "unknown option '%s'",
                                      argv[optind - 1]);
        }
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int i = optind; i < argc; i++) {
        if (options->suite_count == RUN_MAX_SUITES) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "at most %d suites",
                                      RUN_MAX_SUITES);
        }
        options->suites[options->suite_count++] = argv[i];
    }
    if (options->ranks != 0 && options->comm != NULL && strcmp(options->comm, "local") != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--ranks applies to --comm local only (mpirun -np sets the "
                                  "ranks of --comm %s)",
                                  options->comm);
    }
    return CPPARITY_OK;
}
