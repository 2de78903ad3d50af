/* command_export.c — `cpparity export SUITE.yaml --case NAME -o FILE.h5` (see export.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/case.h"
#include "common/interrupt.h"
#include "common/output_file.h"
#include "harness/cli/commands.h"
#include "harness/storage/export.h"
#include "harness/suite/case_file.h"

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity export SUITE.yaml --case NAME -o FILE.h5\n"
            "  Writes the case's inputs, weights, per-layer dense masks (S <= %d) and float64\n"
            "  reference loss, logits and gradients. Never overwrites FILE.h5.\n",
            EXPORT_DENSE_MASK_LIMIT);
}

int command_export(int argc, char **argv) {
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *case_name = NULL, *output = NULL;
    int option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "o:", options, NULL)) != -1) {
        switch (option) {
        case 'c':
            case_name = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "cpparity export: unknown option or missing value '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || case_name == NULL || output == NULL) {
        fprintf(stderr, "cpparity export: %s\n",
                optind > argc - 1   ? "missing SUITE.yaml"
                : optind < argc - 1 ? "exactly one SUITE.yaml is expected"
                : case_name == NULL ? "missing --case NAME"
                                    : "missing -o FILE.h5");
        usage(stderr);
        return 2;
    }
    cpparity_suite suite = {0};
    cpparity_error error;
    char *suite_text = NULL; /* what is parsed is what the export keeps (/source/suite_yaml) */
    size_t suite_length = 0;
    cpparity_status status = cpparity_suite_read(argv[optind], &suite_text, &suite_length, &error);
    if (status == CPPARITY_OK) {
        status = cpparity_suite_load_text(suite_text, suite_length, argv[optind], &suite, &error);
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: %s\n", error.message);
        free(suite_text);
        return (int)status;
    }
    const export_source source = {argv[optind], suite_text, suite_length};
    const cpparity_case *exported = cpparity_suite_find(&suite, case_name);
    if (exported == NULL) {
        fprintf(stderr, "cpparity export: --case %s: no such case in %s (cpparity list %s)\n",
                case_name, argv[optind], argv[optind]);
        cpparity_suite_free(&suite);
        free(suite_text);
        return 2;
    }
    status = output_file_check(output, "-o", &error); /* before the reference is computed */
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: %s\n", error.message);
        cpparity_suite_free(&suite);
        free(suite_text);
        return (int)status;
    }
    interrupt_set_activity("the export of case '%s' to %s", case_name, output);
    output_claim claim; /* a second export to the same path stops now, not after computing */
    status = output_file_claim(&claim, output, "-o", &error);
    if (status == CPPARITY_OK) {
        status = export_case(exported, &source, output, &error);
        output_file_release(&claim);
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity export: case %s: %s\n", case_name, error.message);
    }
    cpparity_suite_free(&suite);
    free(suite_text);
    return (int)status;
}
