/*
 * command_report.c — `cpparity report RESULTS.h5 [MORE.h5 ...] -o REPORT.html [--baseline OLD.h5]
 * [--factor F]`: one self-contained HTML page (reports/html_report.h) of the last results file
 * given; the earlier files, oldest first, and the baseline before them make the trend of each
 * case's worst ratio; the page lists what changed since the baseline (or, without one, since
 * the file given before the last).
 *
 * Exit 0 when the page was written (whatever the run's outcome), 2 for bad input (a flag, a file
 * that is not a results file, truncated or of another format version, an -o that exists or
 * cannot be created), 3 when the plotting library (Debian's libjs-chart.js) is missing or the
 * page cannot be written.
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
#include "reports/html_chart_library.h"
#include "reports/html_report.h"

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity report RESULTS.h5 [MORE.h5 ...] -o REPORT.html [--baseline OLD.h5]\n"
            "  -o, --output FILE   the HTML page (never overwritten); it opens offline\n"
            "  --baseline OLD.h5   list what changed since OLD (and start the trend with it)\n"
            "  --factor F          an error grown more than F times is a regression (default 2)\n"
            "The last file is the run reported; with several, the trend of each case's worst\n"
            "error / limit follows the files in the order given (oldest first), and the changes\n"
            "are against the one before the last unless --baseline is given.\n"
            "The plots use Chart.js (Debian's %s), read from CPPARITY_CHART_JS when set.\n"
            "exit 0 written, 2 bad input, 3 the plotting library is missing or a write failed\n",
            HTML_CHART_LIBRARY_PACKAGE);
}

typedef struct report_arguments {
    const char *output;
    const char *baseline;
    double factor;
    char **files; /* (file_count) */
    int file_count;
} report_arguments;

/* Parses argv; returns -1 to go on, else the exit code (0 after --help). */
static int parse(int argc, char **argv, report_arguments *arguments) {
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"baseline", required_argument, NULL, 'b'},
        {"factor", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *arguments = (report_arguments){.factor = 2.0};
    int option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "o:", options, NULL)) != -1) {
        if (option == 'h') {
            usage(stdout);
            return 0;
        }
        if (option == 'o') {
            arguments->output = optarg;
        } else if (option == 'b') {
            arguments->baseline = optarg;
        } else if (option == 'f') {
            char *end = NULL;
            arguments->factor = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !isfinite(arguments->factor) ||
                arguments->factor < 1.0) {
                fprintf(stderr, "cpparity report: --factor %s: expected a number >= 1\n", optarg);
                return 2;
            }
        } else {
            fprintf(stderr, "cpparity report: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    arguments->files = argv + optind;
    arguments->file_count = argc - optind;
    if (arguments->file_count < 1) {
        fprintf(stderr, "cpparity report: expected at least one results file\n");
        usage(stderr);
        return 2;
    }
    if (arguments->output == NULL) {
        fprintf(stderr, "cpparity report: -o REPORT.html is required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

int command_report(int argc, char **argv) {
    report_arguments arguments;
    const int parsed = parse(argc, argv, &arguments);
    if (parsed >= 0) {
        return parsed;
    }
    cpparity_error error;
    if (output_file_check(arguments.output, "-o", &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity report: %s\n", error.message);
        return 2;
    }
    const char *library_path = html_chart_library_path();
    if (library_path == NULL) {
        fprintf(stderr,
                "cpparity report: the plotting library Chart.js was not found when cpparity was "
                "configured: install Debian's %s and configure again, or name the file in "
                "CPPARITY_CHART_JS\n",
                HTML_CHART_LIBRARY_PACKAGE);
        return 3;
    }
    char *library = NULL;
    if (html_chart_library_read(library_path, &library, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity report: %s\n", error.message);
        return (int)error.status;
    }
    /* The runs in trend order: the baseline, then the files as given. */
    const int run_count = arguments.file_count + (arguments.baseline != NULL ? 1 : 0);
    read_results *runs = calloc((size_t)run_count, sizeof *runs);
    const read_results **order = calloc((size_t)run_count, sizeof *order);
    cpparity_status status = CPPARITY_OK;
    if (runs == NULL || order == NULL) {
        status = cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int r = 0; r < run_count && status == CPPARITY_OK; r++) {
        const char *path = arguments.baseline != NULL
                               ? (r == 0 ? arguments.baseline : arguments.files[r - 1])
                               : arguments.files[r];
        status = results_file_read(path, &runs[r], &error);
        order[r] = &runs[r];
    }
    results_diff changes = {0};
    const read_results *changes_from = NULL;
    if (status == CPPARITY_OK && run_count > 1) {
        changes_from = arguments.baseline != NULL ? &runs[0] : &runs[run_count - 2];
        status = results_diff_compute(changes_from, &runs[run_count - 1], arguments.factor,
                                      &changes, &error);
    }
    if (status == CPPARITY_OK) {
        const html_report_input input = {
            .runs = order,
            .run_count = run_count,
            .changes = changes_from != NULL ? &changes : NULL,
            .changes_from = changes_from,
            .chart_library = library,
            .chart_library_source = library_path,
        };
        output_file file;
        status = output_file_begin(&file, arguments.output, "-o", &error);
        if (status == CPPARITY_OK) {
            status = html_report_write(&file, &input, &error);
            status = status == CPPARITY_OK ? output_file_commit(&file, &error) : status;
            if (status != CPPARITY_OK) {
                output_file_abandon(&file);
            }
        }
    }
    if (status == CPPARITY_OK) {
        printf("cpparity report: %s\n", arguments.output);
    } else {
        fprintf(stderr, "cpparity report: %s\n", error.message);
    }
    results_diff_free(&changes);
    for (int r = 0; runs != NULL && r < run_count; r++) {
        read_results_free(&runs[r]);
    }
    free(runs);
    free(order);
    free(library);
    return (int)status;
}
