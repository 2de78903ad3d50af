/*
 * bench_model.c — `cpparity bench model [SUITE.yaml] [--case PATTERN]`: wall time of the float64
 * reference model's forward and backward for each case of a suite (one thread), to size suites
 * and to see the reference's share of a run.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "harness/bench/bench_model.h"
#include "common/case.h"
#include "harness/suite/case_file.h"
#include "common/monotonic_clock.h"
#include "reference/model.h"

/* Times one case; prints one line. Returns an exit code. */
static int bench_case(const cpparity_case *c, FILE *out, FILE *err) {
    cpparity_batch batch = {0};
    reference_model model = {0};
    cpparity_error error;
    cpparity_status status = fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, c->seed, &error);
    if (status == CPPARITY_OK) {
        status = reference_model_init(&model, &c->model, c->batch_size, c->seq_len, &error);
    }
    double start = 0.0, middle = 0.0, end = 0.0;
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(model.parameters, &model.parameter_table, c->seed);
        start = monotonic_seconds();
        status = reference_model_forward(&model, &batch, &error);
        middle = monotonic_seconds();
    }
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, &batch, &error);
        end = monotonic_seconds();
    }
    if (status == CPPARITY_OK) {
        fprintf(out, "%-48s %3lld %5lld %3lld %10lld %10.6f %10.6f %10.6f\n", c->name,
                (long long)c->batch_size, (long long)c->seq_len,
                (long long)c->model.num_hidden_layers, (long long)model.parameter_table.total,
                middle - start, end - middle, end - start);
    } else {
        fprintf(err, "cpparity bench model: case %s: %s\n", c->name, error.message);
    }
    reference_model_free(&model);
    cpparity_batch_free(&batch);
    return (int)status;
}

int bench_model_main(int argc, char **argv, FILE *out, FILE *err) {
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *pattern = "*";
    int option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (option == 'c') {
            pattern = optarg;
        } else if (option == 'h') {
            fprintf(out, "usage: cpparity bench model [SUITE.yaml] [--case PATTERN]\n"
                         "  Times the float64 reference model forward and backward per case.\n");
            return 0;
        } else {
            fprintf(err, "cpparity bench model: unknown option or missing value '%s'\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind > 1) {
        fprintf(err, "cpparity bench model: at most one SUITE.yaml\n");
        return 2;
    }
    const char *path = optind < argc ? argv[optind] : cpparity_default_suite();
    cpparity_suite suite;
    cpparity_error error;
    if (cpparity_suite_load(path, &suite, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench model: %s\n", error.message);
        return 2;
    }
    fprintf(out, "# cpparity bench model: float64 reference model, one thread, suite %s\n", path);
    fprintf(out, "%-48s %3s %5s %3s %10s %10s %10s %10s\n", "case", "B", "S", "L", "parameters",
            "fwd s", "bwd s", "total s");
    int status = 0;
    for (int64_t i = 0; i < suite.count && status == 0; i++) {
        if (fnmatch(pattern, suite.cases[i].name, 0) == 0) {
            status = bench_case(&suite.cases[i], out, err);
        }
    }
    cpparity_suite_free(&suite);
    return status;
}
