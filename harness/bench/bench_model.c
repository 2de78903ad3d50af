/*
 * bench_model.c — `cpparity bench model [SUITE.yaml] [--case PATTERN] [--threads N] [--ranks R]
 * [--json]`: wall time and GFLOP/s of the float64 reference model's forward and backward for each
 * case of a suite, next to this machine's dgemm on as many threads (the ceiling), to size suites
 * and to see the reference's share of a run; with --ranks, spread over R local ranks (the time of
 * rank 0, from the model's allocation on); with --baseline, also the naive float32 baseline of the
 * case on the same threads (harness/judging/naive_model.h, its logits compared with the
 * reference's as a run does) and its time over the reference's. The FLOP count is
 * docs/benchmarks.md's.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/case.h"
#include "common/monotonic_clock.h"
#include "distributed/comm/comm_local.h"
#include "fixtures/batch_fixture.h"
#include "fixtures/parameter_fixture.h"
#include "harness/bench/bench_model.h"
#include "harness/bench/bench_reference.h"
#include "harness/judging/naive_model.h"
#include "harness/running/reference_team_comm.h"
#include "harness/suite/case_file.h"
#include "reference/model.h"
#include "reference/threads.h"

enum { BENCH_MAX_RANKS = 64 };

static double cpu_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Counted flops of one forward + backward: 6·N per weight of every linear layer (2 forward,
 * 4 backward) and 14·Dh per allowed pair and head of every attention layer. */
static cpparity_status model_flops(const reference_model *model, double *flops,
                                   cpparity_error *error) {
    const cpparity_model_config *c = &model->config;
    const double D = (double)c->hidden_size, F = (double)c->intermediate_size;
    const double H = (double)c->num_attention_heads, Hkv = (double)c->num_key_value_heads;
    const double Dh = (double)c->head_dim, N = (double)(model->batch * model->seq_len);
    const double layer_weights = D * (H * Dh) * 2.0 + D * (Hkv * Dh) * 2.0 + 3.0 * D * F;
    double total =
        6.0 * N * (layer_weights * (double)c->num_hidden_layers + D * (double)c->vocab_size);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        reference_mask_counts counts;
        cpparity_status status = reference_mask_count(&model->masks[l], &counts, error);
        if (status != CPPARITY_OK) {
            return status;
        }
        total += 14.0 * Dh * H * (double)counts.pairs_allowed;
    }
    *flops = total;
    return CPPARITY_OK;
}

/* One rank's share of a case spread over local ranks: rank 0's times are the case's. */
typedef struct spread_run {
    const cpparity_case *c;
    const cpparity_batch *batch;
    double start, middle, end, flops;
} spread_run;

static cpparity_status spread_rank(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_run *run = argument;
    const cpparity_case *c = run->c;
    const reference_team team = reference_team_of_comm(comm);
    reference_model model;
    const double start = monotonic_seconds();
    cpparity_status status =
        reference_model_init_spread(&model, &c->model, c->batch_size, c->seq_len, &team, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    fixture_fill_parameters(model.parameters, &model.parameter_table, c->seed);
    status = reference_model_forward(&model, run->batch, error);
    const double middle = monotonic_seconds();
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, run->batch, error);
    }
    if (status == CPPARITY_OK && comm->rank == 0) {
        run->start = start;
        run->middle = middle;
        run->end = monotonic_seconds();
        status = model_flops(&model, &run->flops, error);
    }
    reference_model_free(&model);
    return status;
}

/* Times one case spread over `ranks` local ranks; prints one line. */
static int bench_spread_case(const cpparity_case *c, int ranks, FILE *out, FILE *err) {
    cpparity_batch batch = {0};
    cpparity_error error;
    cpparity_status status = fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, c->seed, &error);
    spread_run run = {c, &batch, 0.0, 0.0, 0.0, 0.0};
    cpparity_status statuses[BENCH_MAX_RANKS];
    cpparity_error errors[BENCH_MAX_RANKS];
    if (status == CPPARITY_OK) {
        status = comm_local_run(ranks, 86400.0, spread_rank, &run, statuses, errors, &error);
    }
    for (int r = 0; status == CPPARITY_OK && r < ranks; r++) {
        if (statuses[r] != CPPARITY_OK) {
            status = statuses[r];
            error = errors[r];
        }
    }
    if (status == CPPARITY_OK) {
        fprintf(out, "%-48s %3lld %5lld %3lld %10s %10.6f %10.6f %10.6f %9.2f\n", c->name,
                (long long)c->batch_size, (long long)c->seq_len,
                (long long)c->model.num_hidden_layers, "-", run.middle - run.start,
                run.end - run.middle, run.end - run.start,
                run.flops / (run.end - run.start) * 1e-9);
    } else {
        fprintf(err, "cpparity bench model: case %s: %s\n", c->name, error.message);
    }
    fflush(out);
    cpparity_batch_free(&batch);
    return (int)status;
}

/* The reference's logits of a row block, for the naive baseline's comparison. */
static void reference_logits(const void *context, int64_t block, double *out) {
    reference_model_logits_block(context, block, out);
}

/* The naive f32 baseline of the case after the reference's forward and backward: its seconds. */
static cpparity_status time_baseline(const cpparity_case *c, const reference_model *model,
                                     const cpparity_batch *batch, double *seconds,
                                     cpparity_error *error) {
    const naive_reference_logits logits = {reference_logits, model};
    naive_outputs outputs;
    const double start = monotonic_seconds();
    const cpparity_status status =
        naive_model_run(&c->model, batch, &model->parameter_table, model->parameters,
                        CPPARITY_DTYPE_F32, &logits, &outputs, error);
    *seconds = monotonic_seconds() - start;
    naive_outputs_free(&outputs);
    return status;
}

/* Times one case (and its baseline when asked); prints one line. Returns an exit code. */
static int bench_case(const cpparity_case *c, int threads, int json, int baseline, FILE *out,
                      FILE *err) {
    cpparity_batch batch = {0};
    reference_model model = {0};
    cpparity_error error;
    cpparity_status status = fixture_batch_build(&batch, c->rows, c->batch_size, c->seq_len,
                                                 c->model.vocab_size, c->seed, &error);
    if (status == CPPARITY_OK) {
        status = reference_model_init(&model, &c->model, c->batch_size, c->seq_len, &error);
    }
    double start = 0.0, middle = 0.0, end = 0.0, cpu_start = 0.0, cpu_end = 0.0, flops = 0.0;
    if (status == CPPARITY_OK) {
        fixture_fill_parameters(model.parameters, &model.parameter_table, c->seed);
        start = monotonic_seconds();
        cpu_start = cpu_seconds();
        status = reference_model_forward(&model, &batch, &error);
        middle = monotonic_seconds();
    }
    if (status == CPPARITY_OK) {
        status = reference_model_backward(&model, &batch, &error);
        end = monotonic_seconds();
        cpu_end = cpu_seconds();
    }
    if (status == CPPARITY_OK) {
        status = model_flops(&model, &flops, &error);
    }
    double baseline_seconds = 0.0;
    if (status == CPPARITY_OK && baseline) {
        status = time_baseline(c, &model, &batch, &baseline_seconds, &error);
    }
    if (status == CPPARITY_OK && json) {
        fprintf(out,
                "{\"what\": \"model\", \"mask\": null, \"case\": \"%s\", \"batch\": %lld, "
                "\"seq\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"threads\": %d, "
                "\"seconds\": %.6f, \"gflops\": %.3f, \"cpu_seconds\": %.6f, "
                "\"forward_seconds\": %.6f",
                c->name, (long long)c->batch_size, (long long)c->seq_len,
                (long long)c->model.num_attention_heads, (long long)c->model.head_dim, threads,
                end - start, flops / (end - start) * 1e-9, cpu_end - cpu_start, middle - start);
        if (baseline) {
            fprintf(out, ", \"baseline_seconds\": %.6f", baseline_seconds);
        }
        fprintf(out, "}\n");
    } else if (status == CPPARITY_OK) {
        fprintf(out, "%-48s %3lld %5lld %3lld %10lld %10.6f %10.6f %10.6f %9.2f", c->name,
                (long long)c->batch_size, (long long)c->seq_len,
                (long long)c->model.num_hidden_layers, (long long)model.parameter_table.total,
                middle - start, end - middle, end - start, flops / (end - start) * 1e-9);
        if (baseline) {
            fprintf(out, " %10.6f %9.2f", baseline_seconds, baseline_seconds / (end - start));
        }
        fprintf(out, "\n");
    } else {
        fprintf(err, "cpparity bench model: case %s: %s\n", c->name, error.message);
    }
    fflush(out);
    reference_model_free(&model);
    cpparity_batch_free(&batch);
    return (int)status;
}

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity bench model [SUITE.yaml] [--case PATTERN] [--threads N] [--ranks R]\n"
            "                            [--baseline] [--json]\n"
            "  Times the float64 reference model forward and backward per case, and this\n"
            "  machine's dgemm on the same threads (the ceiling), in the same run.\n"
            "  --case PATTERN  only the cases whose name matches (shell pattern)\n"
            "  --threads N     threads of the reference (default 1), in each rank\n"
            "  --ranks R       the reference spread over R ranks (threads of this process,\n"
            "                  each holding its row blocks: docs/architecture.md); default 1\n"
            "  --baseline      also time the naive float32 baseline of each case on the same\n"
            "                  threads, and its time over the reference's (one rank)\n"
            "  --json          one JSON object per line instead of the table\n");
}

int bench_model_main(int argc, char **argv, FILE *out, FILE *err) {
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"ranks", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {"baseline", no_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    const char *pattern = "*";
    int threads = 1, json = 0, ranks = 1, baseline = 0, option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (option == 'c') {
            pattern = optarg;
        } else if (option == 't') {
            char *end = NULL;
            const long parsed = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || parsed < 1 || parsed > REFERENCE_MAX_THREADS) {
                fprintf(err, "cpparity bench model: --threads expects 1 to %d, got '%s'\n",
                        REFERENCE_MAX_THREADS, optarg);
                return 2;
            }
            threads = (int)parsed;
        } else if (option == 'j') {
            json = 1;
        } else if (option == 'b') {
            baseline = 1;
        } else if (option == 'r') {
            char *end = NULL;
            const long parsed = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || parsed < 1 || parsed > BENCH_MAX_RANKS) {
                fprintf(err, "cpparity bench model: --ranks expects 1 to %d, got '%s'\n",
                        BENCH_MAX_RANKS, optarg);
                return 2;
            }
            ranks = (int)parsed;
        } else if (option == 'h') {
            usage(out);
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
    if (ranks > 1 && (json || baseline)) {
        fprintf(err, "cpparity bench model: --%s is for one rank\n", json ? "json" : "baseline");
        return 2;
    }
    const char *path = optind < argc ? argv[optind] : cpparity_default_suite();
    cpparity_suite suite;
    cpparity_error error;
    if (cpparity_suite_load(path, &suite, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench model: %s\n", error.message);
        return 2;
    }
    reference_set_threads(threads);
    if (!json) {
        fprintf(out,
                "# cpparity bench model: float64 reference model, %d rank(s) x %d thread(s), "
                "suite %s\n",
                ranks, threads, path);
    }
    int status = bench_dgemm_ceiling(threads, json, out, err);
    if (status == 0 && !json) {
        fprintf(out, "%-48s %3s %5s %3s %10s %10s %10s %10s %9s%s\n", "case", "B", "S", "L",
                "parameters", "fwd s", "bwd s", "total s", "GF/s",
                baseline ? "  naive f32 s  / total" : "");
    }
    for (int64_t i = 0; i < suite.count && status == 0; i++) {
        if (fnmatch(pattern, suite.cases[i].name, 0) == 0) {
            status = ranks > 1 ? bench_spread_case(&suite.cases[i], ranks, out, err)
                               : bench_case(&suite.cases[i], threads, json, baseline, out, err);
        }
    }
    cpparity_suite_free(&suite);
    return status;
}
