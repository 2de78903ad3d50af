/*
 * command_diff.c — `cpparity diff OLD.h5 NEW.h5 [--factor F] [--markdown FILE]`: what changed
 * between two runs (results_model/results_diff.h). Exit 1 on a regression (a new failure or
 * an error grown by more than the factor), 0 otherwise, 2 when the files cannot be compared
 * (not results files, truncated, different format versions) or a flag is wrong.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output_file.h"
#include "harness/cli/commands.h"
#include "results_model/results_diff.h"
#include "results_model/results_reader.h"
#include "reports/diff_report.h"

static void usage(FILE *stream) {
    fprintf(stream, "usage: cpparity diff OLD.h5 NEW.h5 [--factor F] [--markdown FILE.md]\n"
                    "  --factor F        an error that grew more than F times is a regression "
                    "(default 2)\n"
                    "  --markdown FILE   also write the summary as Markdown (never overwrites)\n"
                    "exit 0 no regression, 1 a regression, 2 the files cannot be compared\n");
}

int command_diff(int argc, char **argv) {
    static const struct option options[] = {
        {"factor", required_argument, NULL, 'f'},
        {"markdown", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double factor = 2.0;
    const char *markdown = NULL;
    int option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (option == 'h') {
            usage(stdout);
            return 0;
        }
        if (option == 'f') {
            char *end = NULL;
            factor = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !isfinite(factor) || factor < 1.0) {
                fprintf(stderr, "cpparity diff: --factor %s: expected a number >= 1\n", optarg);
                return 2;
            }
        } else if (option == 'm') {
            markdown = optarg;
        } else {
            fprintf(stderr, "cpparity diff: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "cpparity diff: expected two results files, OLD and NEW\n");
        usage(stderr);
        return 2;
    }
    cpparity_error error;
    if (markdown != NULL && output_file_check(markdown, "--markdown", &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity diff: %s\n", error.message);
        return 2;
    }
    read_results old_run, new_run;
    results_diff diff = {0};
    cpparity_status status = results_file_read(argv[optind], &old_run, &error);
    if (status == CPPARITY_OK) {
        status = results_file_read(argv[optind + 1], &new_run, &error);
        if (status == CPPARITY_OK) {
            status = results_diff_compute(&old_run, &new_run, factor, &diff, &error);
        }
    } else {
        memset(&new_run, 0, sizeof new_run);
    }
    int code = (int)status;
    if (status == CPPARITY_OK) {
        diff_report_console(stdout, &diff, &old_run, &new_run);
        code = diff.regressions > 0 ? 1 : 0;
        if (markdown != NULL) {
            status = diff_report_markdown(markdown, &diff, &old_run, &new_run, &error);
            code = status != CPPARITY_OK ? (int)status : code;
        }
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity diff: %s\n", error.message);
    }
    results_diff_free(&diff);
    read_results_free(&old_run);
    read_results_free(&new_run);
    return code;
}
