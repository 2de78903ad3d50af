/* run_arguments.c — parsing `cpparity run` options (see run_arguments.h). */
#include "harness/cli/run_arguments.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/names.h"
#include "distributed/comm/comm_launch.h"
#include "distributed/models/implementation_registry.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "harness/running/attention_stream.h"
#include "harness/running/memory_estimate.h"
#include "harness/suite/random_cases.h"

/* getopt values of the options; outputs use OPTION_OUTPUT + their run_output. */
enum {
    OPTION_CASE = 256,
    OPTION_DEVICE,
    OPTION_COMM,
    OPTION_RANKS,
    OPTION_QUERY_BLOCK,
    OPTION_DTYPE,
    OPTION_LAYOUT,
    OPTION_ALGORITHM,
    OPTION_SEED,
    OPTION_KERNEL,
    OPTION_TIMEOUT,
    OPTION_STORE,
    OPTION_ALLOW_NOT_RUN,
    OPTION_HELP,
    OPTION_INJECT,
    OPTION_SEEDS,
    OPTION_FAULT,
    OPTION_MAX_MEMORY,
    OPTION_THREADS,
    OPTION_REFERENCE_CACHE,
    OPTION_FRESH,
    OPTION_RANDOM,
    OPTION_OUTPUT = 512,
};

/* Whether an output flag belongs to the command: selftest writes the results file only. */
static bool output_allowed(int output, run_command_kind kind) {
    return kind == RUN_COMMAND_RUN || output == RUN_OUTPUT_RESULTS;
}

cpparity_status run_arguments_reference_cache(const char *folder, cpparity_error *error) {
    struct stat status;
    if (stat(folder, &status) != 0 && mkdir(folder, 0775) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--reference-cache %s: cannot make the folder: %s", folder,
                                  strerror(errno));
    }
    if (stat(folder, &status) != 0 || !S_ISDIR(status.st_mode) ||
        access(folder, W_OK | X_OK) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--reference-cache %s: not a folder this process can write to",
                                  folder);
    }
    return CPPARITY_OK;
}

void run_arguments_usage(FILE *stream, run_command_kind kind) {
    char dtypes[64], stores[64];
    cpparity_names_join(cpparity_dtype_names, CPPARITY_DTYPE_COUNT, "|", "|", dtypes,
                        sizeof dtypes);
    cpparity_names_join(run_store_names, RUN_STORE_COUNT, "|", "|", stores, sizeof stores);
    if (kind == RUN_COMMAND_SELFTEST) {
        fprintf(stream,
                "usage: cpparity selftest [SUITE.yaml ...] [options]\n"
                "  Proves the suites catch real bugs: runs them clean (every case must pass),\n"
                "  then once per fault planted in the implementation under test (`cpparity list\n"
                "  --faults`; each must fail in at least 2 cases), then clean again under\n"
                "  --seeds N other seeds (any failure is a false alarm). Prints the detection\n"
                "  matrix and writes it, with the clean run, to the results file.\n"
                "  Default suite: cases/ci.yaml. Exit 0 when all of that holds, 1 when not.\n"
                "  --seeds N           clean reruns under seeds 1..N (default 0)\n"
                "  --fault NAME        only this fault (repeatable; default every fault)\n"
                "  --case PATTERN      only cases whose name matches (repeatable; shell glob)\n");
    } else {
        fprintf(stream,
                "usage: cpparity run [SUITE.yaml ...] [options]\n"
                "  Runs every case (and cp size) of the suites on the implementation under test "
                "and\n"
                "  the float64 reference, compares loss, each rank's logits and every gradient,\n"
                "  and writes one HDF5 results file. Default suite: cases/ci.yaml.\n"
                "  --case PATTERN      only cases whose name matches (repeatable; shell glob)\n"
                "  --inject FAULT      plant a fault in the implementation under test on purpose\n"
                "                      (self-test; the faults: cpparity list --faults)\n");
    }
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        const run_output_writer *writer = &run_output_writers[o];
        if (!output_allowed(o, kind)) {
            continue;
        }
        char flag[64];
        snprintf(flag, sizeof flag, "%s %s", writer->flag, writer->argument);
        fprintf(stream, "  %-19s %s\n", flag, writer->usage);
    }
    fprintf(stream,
            "  --device DEVICE     where the implementation under test runs (default cpu):\n");
    for (int i = 0; i < implementation_registry_count(); i++) {
        const cpparity_implementation *implementation = implementation_registry_at(i);
        fprintf(stream, "                        %-6s %s: %s\n", implementation->device,
                implementation->name, implementation->description);
    }
    fprintf(stream,
            "  --comm NAME         communicator (default: mpi under mpirun, else local):\n");
    for (int i = 0; i < comm_backend_count(); i++) {
        fprintf(stream, "                        %-6s %s\n", comm_backend_at(i)->name,
                comm_backend_at(i)->description);
    }
    fprintf(stream,
            "  --ranks N           ranks of --comm local (default: the least rank count that\n"
            "                      runs every cp size of the selected cases)\n"
            "  --dtype %-11s only this dtype\n"
            "  --layout NAME       only items of this layout at cp > 1 (contiguous, zigzag,\n"
            "                      round-robin); cp 1 runs whatever is chosen\n"
            "  --algorithm NAME    only items of this algorithm at cp > 1 (ulysses, ring,\n"
            "                      hybrid: every hybrid:UxR of the case)\n"
            "  --seed N            fixture seed for every case (default: each case's own)\n"
            "  --fresh             attention-level cases draw new random inputs (their seed is\n"
            "                      in each item's message; --seed reproduces it)\n"
            "  --random N          instead of a suite: N attention-level cases of random shapes\n"
            "                      and masks, drawn from --seed (or a fresh seed, printed; give\n"
            "                      --seed under mpirun): a kernel's soak run\n"
            "  --kernel NAME       attention kernel (default: the device's own); registered:\n",
            dtypes);
    for (int i = 0; i < kernel_registry_count(); i++) {
        const cpparity_attention_kernel *kernel = kernel_registry_at(i);
        fprintf(stream, "                        %-10s version %s, %s, %s%s\n", kernel->name,
                kernel->version, kernel_device_name(kernel),
                kernel->dtype == CPPARITY_KERNEL_DTYPE_BFLOAT16 ? "bfloat16" : "float32",
                kernel_declares_deterministic(kernel) ? ", deterministic" : "");
    }
    fprintf(stream,
            "  --kernel PATH.so[:NAME]  a kernel plugin (include/cpparity/kernel.h; the one\n"
            "                      kernel it exports, or NAME among several):\n"
            "                      examples/kernel-plugin, cases/kernels.yaml\n"
            "  --timeout SECONDS   deadline of every collective (default 300)\n"
            "  --query-block N     attention-level items by query blocks of N tokens (a\n"
            "                      multiple of 256), spread over the ranks (default: only\n"
            "                      those too long to hold whole, by blocks of 4096)\n"
            "  --reference-cache DIR  keep the float64 reference's outputs in DIR (made when\n"
            "                      missing) and reuse them when a case, its seed and the\n"
            "                      reference are unchanged; damaged entries are recomputed\n"
            "  --threads N         threads of the float64 reference in each process (default:\n"
            "                      this machine's cores divided by the ranks on it); its results\n"
            "                      are the same bits for every N\n"
            "  --max-memory SIZE   memory one process may hold, e.g. 512M, 24G, 1.5GiB (default:\n"
            "                      what this machine or cgroup has available, shared by the MPI\n"
            "                      ranks of a node); a case estimated to need more is refused\n"
            "                      before anything runs (exit 2)\n"
            "  --store MODE        tensors kept in the results file: %s (default\n"
            "                      failures)\n"
            "  --allow-not-run     items that cannot run here (cp sizes the rank count does\n"
            "                      not divide, dtypes the device lacks) do not fail the run\n"
            "Exit codes: 0 passed, 1 parity failure, 2 bad input, 3 environment or runtime\n"
            "failure, including planned items that could not run (NOT RUN) unless\n"
            "--allow-not-run.\n",
            stores);
}

cpparity_status run_arguments_integer(const char *text, const char *flag, long long minimum,
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

cpparity_status run_arguments_choice(const char *text, const char *flag, const char *const *names,
                                     int count, int *value, cpparity_error *error) {
    *value = cpparity_name_index(names, count, text);
    if (*value < 0) {
        char choices[256];
        cpparity_names_join(names, count, ", ", " or ", choices, sizeof choices);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: unknown value '%s' (expected %s)", flag, text, choices);
    }
    return CPPARITY_OK;
}

/* The fault called text, or an input error naming the flag and pointing at the list. */
static cpparity_status parse_fault(const char *text, const char *flag, cpparity_fault *fault,
                                   cpparity_error *error) {
    const int found = cpparity_fault_from_name(text);
    if (found <= 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s: unknown fault '%s' (`cpparity list --faults` lists them)",
                                  flag, text);
    }
    *fault = (cpparity_fault)found;
    return CPPARITY_OK;
}

cpparity_status run_arguments_parse(run_options *options, int argc, char **argv,
                                    run_command_kind kind, cpparity_error *error) {
    static const struct option fixed_options[] = {
        {"case", required_argument, NULL, OPTION_CASE},
        {"device", required_argument, NULL, OPTION_DEVICE},
        {"comm", required_argument, NULL, OPTION_COMM},
        {"ranks", required_argument, NULL, OPTION_RANKS},
        {"query-block", required_argument, NULL, OPTION_QUERY_BLOCK},
        {"dtype", required_argument, NULL, OPTION_DTYPE},
        {"layout", required_argument, NULL, OPTION_LAYOUT},
        {"algorithm", required_argument, NULL, OPTION_ALGORITHM},
        {"seed", required_argument, NULL, OPTION_SEED},
        {"kernel", required_argument, NULL, OPTION_KERNEL},
        {"timeout", required_argument, NULL, OPTION_TIMEOUT},
        {"store", required_argument, NULL, OPTION_STORE},
        {"allow-not-run", no_argument, NULL, OPTION_ALLOW_NOT_RUN},
        {"help", no_argument, NULL, OPTION_HELP},
        {"inject", required_argument, NULL, OPTION_INJECT},
        {"seeds", required_argument, NULL, OPTION_SEEDS},
        {"fault", required_argument, NULL, OPTION_FAULT},
        {"max-memory", required_argument, NULL, OPTION_MAX_MEMORY},
        {"threads", required_argument, NULL, OPTION_THREADS},
        {"reference-cache", required_argument, NULL, OPTION_REFERENCE_CACHE},
        {"fresh", no_argument, NULL, OPTION_FRESH},
        {"random", required_argument, NULL, OPTION_RANDOM},
    };
    enum { FIXED = sizeof fixed_options / sizeof *fixed_options };
    struct option long_options[FIXED + RUN_OUTPUT_COUNT + 1];
    memcpy(long_options, fixed_options, sizeof fixed_options);
    int option_count = FIXED;
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        long_options[option_count++] = (struct option){run_output_writers[o].flag + 2,
                                                       required_argument, NULL, OPTION_OUTPUT + o};
    }
    long_options[option_count] = (struct option){NULL, 0, NULL, 0};

    memset(options, 0, sizeof *options);
    options->device = "cpu";
    options->timeout_seconds = RUN_DEFAULT_TIMEOUT_SECONDS;
    options->store = RUN_STORE_FAILURES;
    options->selftest = kind == RUN_COMMAND_SELFTEST;
    optind = 1;
    opterr = 0;
    int option, choice = 0;
    long long value = 0;
    cpparity_status status = CPPARITY_OK;
    while (status == CPPARITY_OK &&
           (option = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
        if (option >= OPTION_OUTPUT && option < OPTION_OUTPUT + RUN_OUTPUT_COUNT) {
            if (!output_allowed(option - OPTION_OUTPUT, kind)) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "%s: selftest writes the results file (--out) only",
                                          run_output_writers[option - OPTION_OUTPUT].flag);
            }
            options->outputs[option - OPTION_OUTPUT] = optarg;
            continue;
        }
        const bool selftest_only = option == OPTION_SEEDS || option == OPTION_FAULT;
        if ((kind == RUN_COMMAND_RUN && selftest_only) ||
            (kind == RUN_COMMAND_SELFTEST && option == OPTION_INJECT)) {
            const char *flag = option == OPTION_INJECT  ? "--inject"
                               : option == OPTION_SEEDS ? "--seeds"
                                                        : "--fault";
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: not an option of %s%s",
                                      flag, argv[0],
                                      option == OPTION_INJECT ? " (selftest plants every fault "
                                                                "itself; --fault picks some)"
                                                              : "");
        }
        switch (option) {
        case OPTION_CASE:
            if (options->pattern_count == RUN_MAX_PATTERNS) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "--case: at most %d",
                                          RUN_MAX_PATTERNS);
            }
            options->patterns[options->pattern_count++] = optarg;
            break;
        case OPTION_DEVICE:
            options->device = optarg;
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "--device: unknown value '%s' (expected cpu or cuda)",
                                            optarg);
            }
            break;
        case OPTION_COMM:
            options->comm = optarg;
            if (strcmp(optarg, "mpi") != 0 && strcmp(optarg, "local") != 0 &&
                strcmp(optarg, "nccl") != 0) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "--comm: unknown value '%s' (expected mpi, local or "
                                            "nccl)",
                                            optarg);
            }
            break;
        case OPTION_RANKS:
            status = run_arguments_integer(optarg, "--ranks", 1, 1024, &value, error);
            options->ranks = (int)value;
            break;
        case OPTION_QUERY_BLOCK:
            status = run_arguments_integer(optarg, "--query-block", ATTENTION_STREAM_BLOCK_UNIT,
                                           INT64_MAX / 2, &value, error);
            if (status == CPPARITY_OK && value % ATTENTION_STREAM_BLOCK_UNIT != 0) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "--query-block expects a multiple of %d tokens, got "
                                            "'%s'",
                                            ATTENTION_STREAM_BLOCK_UNIT, optarg);
            }
            options->query_block = value;
            break;
        case OPTION_DTYPE:
            status = run_arguments_choice(optarg, "--dtype", cpparity_dtype_names,
                                          CPPARITY_DTYPE_COUNT, &choice, error);
            options->dtype_set = true;
            options->dtype = (cpparity_dtype)(choice < 0 ? 0 : choice);
            break;
        case OPTION_LAYOUT:
            status = run_arguments_choice(optarg, "--layout", cpparity_layout_names,
                                          CPPARITY_LAYOUT_COUNT, &choice, error);
            options->layout_set = true;
            options->layout = (cpparity_layout)(choice < 0 ? 0 : choice);
            break;
        case OPTION_ALGORITHM:
            status = run_arguments_choice(optarg, "--algorithm", cpparity_algorithm_names,
                                          CPPARITY_ALGORITHM_COUNT, &choice, error);
            options->algorithm_set = true;
            options->algorithm = (cpparity_algorithm)(choice < 0 ? 0 : choice);
            break;
        case OPTION_SEED:
            status = run_arguments_integer(optarg, "--seed", 0, INT64_MAX, &value, error);
            options->seed_set = true;
            options->seed = (uint64_t)value;
            break;
        case OPTION_KERNEL:
            options->kernel = optarg;
            break;
        case OPTION_TIMEOUT:
            status = run_arguments_integer(optarg, "--timeout", 1, 86400, &value, error);
            options->timeout_seconds = (double)value;
            break;
        case OPTION_STORE:
            status = run_arguments_choice(optarg, "--store", run_store_names, RUN_STORE_COUNT,
                                          &choice, error);
            options->store = (run_store)(choice < 0 ? RUN_STORE_FAILURES : choice);
            break;
        case OPTION_ALLOW_NOT_RUN:
            options->allow_not_run = true;
            break;
        case OPTION_HELP:
            options->help = true;
            break;
        case OPTION_INJECT:
            status = parse_fault(optarg, "--inject", &options->fault, error);
            break;
        case OPTION_SEEDS:
            status = run_arguments_integer(optarg, "--seeds", 0, 10000, &value, error);
            options->seeds = (int)value;
            break;
        case OPTION_FAULT: {
            cpparity_fault fault = CPPARITY_FAULT_NONE;
            status = parse_fault(optarg, "--fault", &fault, error);
            for (int f = 0; status == CPPARITY_OK && f < options->fault_count; f++) {
                if (options->faults[f] == fault) {
                    status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                                "--fault %s: given twice", optarg);
                }
            }
            if (status == CPPARITY_OK) {
                options->faults[options->fault_count++] = fault;
            }
            break;
        }
        case OPTION_FRESH:
            options->fresh = true;
            break;
        case OPTION_RANDOM:
            status = run_arguments_integer(optarg, "--random", 1, RANDOM_CASES_MAX, &value, error);
            options->random_cases = value;
            break;
        case OPTION_REFERENCE_CACHE:
            status = run_arguments_reference_cache(optarg, error);
            options->reference_cache = optarg;
            break;
        case OPTION_THREADS:
            status = run_arguments_integer(optarg, "--threads", 1, 256, &value, error);
            options->threads = (int)value;
            break;
        case OPTION_MAX_MEMORY:
            if (!memory_size_parse(optarg, &options->max_memory)) {
                status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                            "--max-memory expects a size such as 512M, 24G, "
                                            "1.5GiB or a number of bytes (K, M, G, T: multiples "
                                            "of 1024), got '%s'",
                                            optarg);
            }
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
    if (options->random_cases > 0 && options->suite_count > 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--random draws its own cases: give no suite (got %s)",
                                  options->suites[0]);
    }
    if (options->random_cases > 0 && options->fresh) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--random and --fresh exclude each other: --random draws new "
                                  "cases and inputs from its seed (--seed fixes both)");
    }
    if (options->fresh && options->seed_set) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--fresh and --seed exclude each other: --fresh draws new "
                                  "inputs, --seed fixes them");
    }
    if (options->ranks != 0 && options->comm != NULL && strcmp(options->comm, "local") != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--ranks applies to --comm local only (mpirun -np sets the "
                                  "ranks of --comm %s)",
                                  options->comm);
    }
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        for (int p = 0; p < o; p++) {
            if (options->outputs[o] != NULL && options->outputs[p] != NULL &&
                strcmp(options->outputs[o], options->outputs[p]) == 0) {
                return cpparity_error_set(
                    error, CPPARITY_ERROR_INPUT, "%s and %s name the same file %s",
                    run_output_writers[p].flag, run_output_writers[o].flag, options->outputs[o]);
            }
        }
    }
    return CPPARITY_OK;
}
