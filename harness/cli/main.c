/*
 * main.c — the `cpparity` command: dispatches sub-commands, which (harness/cli/) are the only
 * places that print a library error and choose the exit code (docs/command-line.md: 0 passed,
 * 1 parity failure, 2 bad input, 3 environment or runtime failure; 128 + N after signal N:
 * common/interrupt.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/interrupt.h"
#include "distributed/comm/comm_launch.h"
#include "distributed/models/implementation_registry.h"
#include "distributed/kernels/kernel_registry.h"
#include "fixtures/parameter_cache.h"
#include "harness/bench/bench_model.h"
#include "harness/bench/bench_reference.h"
#include "harness/cli/commands.h"
#include "results_model/hdf5_util.h"
#include "harness/version.h"

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity COMMAND [options]\n"
            "commands available in this version:\n"
            "  run [SUITE.yaml ...] [options]          run, compare, write results\n"
            "  selftest [SUITE.yaml ...] [options]     plant every known bug; each must be\n"
            "                                          caught, the clean run must pass\n"
            "  list [SUITE.yaml ...]                   one line per case\n"
            "  export SUITE.yaml --case NAME -o FILE.h5  inputs, weights, masks and\n"
            "                                          float64 reference outputs\n"
            "  judge EXPORT.h5 DUMP.h5 ... [options]   the verdict of `run` on a framework's\n"
            "                                          own run: one dump per rank\n"
            "                                          (docs/dump-format.md)\n"
            "  diff OLD.h5 NEW.h5 [--factor F]         what changed between two runs; exit 1\n"
            "                                          on a regression\n"
            "  report RESULTS.h5 ... -o REPORT.html    one HTML page with plots, opens offline\n"
            "                                          (--baseline OLD.h5: changes and trend)\n"
            "  bench reference                         time the float64 reference attention\n"
            "  bench model [SUITE.yaml]                time the float64 reference model\n"
            "  --version                               print the version\n"
            "  --help                                  this text\n");
}

static int bench_main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: cpparity bench reference|model [options]   (--help for each)\n");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "reference") == 0) {
        return bench_reference_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (strcmp(argv[1], "model") == 0) {
        return bench_model_main(argc - 1, argv + 1, stdout, stderr);
    }
    fprintf(stderr, "cpparity bench: unknown benchmark '%s' (available: reference, model)\n",
            argv[1]);
    return 2;
}

/* The version, then what this build can test with: implementations, kernels, communicators. */
static void version(void) {
    printf("cpparity %s (commit %s)\n", CPPARITY_VERSION, CPPARITY_GIT_COMMIT);
    printf("implementations under test:");
    for (int i = 0; i < implementation_registry_count(); i++) {
        const cpparity_implementation *implementation = implementation_registry_at(i);
        printf("%s %s (--device %s)", i > 0 ? "," : "", implementation->name,
               implementation->device);
    }
    printf("\nattention kernels:");
    for (int i = 0; i < kernel_registry_count(); i++) {
        const cpparity_attention_kernel *kernel = kernel_registry_at(i);
        printf("%s %s %s (%s)", i > 0 ? "," : "", kernel->name, kernel->version,
               kernel_device_name(kernel));
    }
    printf("\ncommunicators:");
    for (int i = 0; i < comm_backend_count(); i++) {
        printf("%s %s", i > 0 ? "," : "", comm_backend_at(i)->name);
    }
    printf("\n");
}

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        version();
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0) {
        return command_run(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "selftest") == 0) {
        return command_selftest(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "list") == 0) {
        return command_list(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "export") == 0) {
        return command_export(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "bench") == 0) {
        return bench_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "judge") == 0) {
        return command_judge(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "diff") == 0) {
        return command_diff(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "report") == 0) {
        return command_report(argc - 1, argv + 1);
    }
    fprintf(stderr, "cpparity: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    hdf5_library_begin();
    char prefix[64];
    snprintf(prefix, sizeof prefix, "cpparity%s%.40s", argc > 1 ? " " : "",
             argc > 1 ? argv[1] : "");
    interrupt_install(prefix);
    const int code = dispatch(argc, argv);
    fixture_parameter_cache_clear();
    hdf5_library_end();
    return code;
}
