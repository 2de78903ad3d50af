/* bench_reference.c — timing of the float64 reference attention (see bench_reference.h). */
#include "harness/bench/bench_reference.h"

#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/monotonic_clock.h"
#include "fixtures/random.h"
#include "harness/judging/naive_attention.h"
#include "reference/attention.h"
#include "reference/mask.h"
#include "reference/threads.h"

enum { MAX_LENGTHS = 8, MASK_KINDS = 4 };

/* The edge of the square dgemm that measures the ceiling: large enough for OpenBLAS's peak,
 * small enough (3 × 8 MiB per thread) to stay out of the way. */
enum { CEILING_EDGE = 1024 };

typedef enum mask_kind { MASK_CAUSAL, MASK_SLIDING, MASK_CHUNKED, MASK_PACKED } mask_kind;

static const char *const mask_names[MASK_KINDS] = {"causal", "sliding", "chunked", "packed"};

typedef struct bench_options {
    int64_t lengths[MAX_LENGTHS]; /* sequence lengths */
    int length_count;
    int64_t heads;         /* H = Hkv */
    int64_t head_dim;      /* Dh */
    int64_t window;        /* W of the sliding mask */
    int64_t chunk;         /* C of the chunked mask */
    int64_t documents;     /* documents of the packed mask */
    int threads;           /* reference_set_threads */
    int json;              /* 1: one JSON object per line */
    int baseline;          /* 1: also time the naive float32 baseline's attention */
    int masks[MASK_KINDS]; /* 1: run this mask */
} bench_options;

/* One measured line. */
typedef struct bench_result {
    const char *what;        /* "attention" or "dgemm" */
    const char *mask;        /* mask name, or NULL for dgemm */
    const char *label;       /* the table's first column, e.g. "sliding W=256" */
    int64_t seq_len;         /* S, or the dgemm's edge */
    int64_t heads, head_dim; /* H and Dh, or 1 and the dgemm's edge */
    double pairs;            /* allowed (b, q, k) pairs times H; 0 for dgemm */
    double forward_seconds;  /* wall; 0 for dgemm */
    double seconds;          /* wall, forward + backward */
    double cpu_seconds;      /* CPU time of the process over the same interval */
    double flops;            /* counted as in docs/benchmarks.md */
    double baseline_seconds; /* wall of the naive float32 attention, forward + backward; 0: not
                                timed */
} bench_result;

static double cpu_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity bench reference [--seq-len N]... [--heads H] [--head-dim D]\n"
            "                                [--threads N] [--json] [--mask NAME]...\n"
            "                                [--window W] [--chunk C] [--documents N]\n"
            "                                [--baseline]\n"
            "  Times the float64 reference attention forward+backward, B = 1, and this\n"
            "  machine's dgemm on the same threads (the ceiling), in the same run.\n"
            "  --seq-len N    sequence length (repeatable; default 1024 and 4096)\n"
            "  --heads H      query heads = key/value heads (default 8)\n"
            "  --head-dim D   head dimension (default 64)\n"
            "  --threads N    threads of the reference (default 1)\n"
            "  --json         one JSON object per line instead of the table\n"
            "  --mask NAME    causal, sliding, chunked or packed (repeatable; default all)\n"
            "  --window W     sliding window (default 256)\n"
            "  --chunk C      attention chunk size (default 512)\n"
            "  --documents N  equal documents packed in the row (default 8)\n"
            "  --baseline     also time the naive float32 baseline's attention on the same\n"
            "                 inputs and threads, and print its time over the reference's\n"
            "  GFLOP/s count allowed pairs only: 4*Dh per pair forward, 10*Dh backward\n"
            "  (docs/benchmarks.md).\n");
}

static int parse_positive(const char *text, const char *flag, int64_t *value, FILE *err) {
    char *end = NULL;
    long long parsed = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || parsed < 1) {
        fprintf(err, "cpparity bench reference: %s expects a positive integer, got '%s'\n", flag,
                text);
        return 0;
    }
    *value = parsed;
    return 1;
}

/* The column label of the text table, e.g. "sliding W=256". */
static void mask_label(char *label, size_t size, mask_kind kind, const bench_options *options) {
    switch (kind) {
    case MASK_SLIDING:
        snprintf(label, size, "sliding W=%lld", (long long)options->window);
        break;
    case MASK_CHUNKED:
        snprintf(label, size, "chunked C=%lld", (long long)options->chunk);
        break;
    case MASK_PACKED:
        snprintf(label, size, "%lld packed documents", (long long)options->documents);
        break;
    default:
        snprintf(label, size, "causal");
    }
}

static void print_result(const bench_result *r, int threads, int json, FILE *out) {
    const double gflops = r->flops / r->seconds * 1e-9;
    if (json) {
        char mask[32] = "null";
        if (r->mask != NULL) {
            snprintf(mask, sizeof mask, "\"%s\"", r->mask);
        }
        fprintf(out,
                "{\"what\": \"%s\", \"mask\": %s, \"batch\": 1, \"seq\": %lld, \"heads\": %lld, "
                "\"head_dim\": %lld, \"threads\": %d, \"seconds\": %.6f, \"gflops\": %.3f, "
                "\"cpu_seconds\": %.6f, \"allowed_pairs\": %.0f",
                r->what, mask, (long long)r->seq_len, (long long)r->heads, (long long)r->head_dim,
                threads, r->seconds, gflops, r->cpu_seconds, r->pairs);
        if (r->baseline_seconds > 0.0) {
            fprintf(out, ", \"baseline_seconds\": %.6f, \"baseline_ratio\": %.4f",
                    r->baseline_seconds, r->baseline_seconds / r->seconds);
        }
        fprintf(out, "}\n");
    } else if (r->mask == NULL) {
        fprintf(out, "# dgemm %lldx%lldx%lld on %d thread(s): %.2f GFLOP/s (%.2f s, CPU %.2f s)\n",
                (long long)r->seq_len, (long long)r->seq_len, (long long)r->seq_len, threads,
                gflops, r->seconds, r->cpu_seconds);
    } else {
        const double backward = r->seconds - r->forward_seconds;
        const double forward_flops = r->flops * 4.0 / 14.0,
                     backward_flops = r->flops - forward_flops;
        fprintf(out, "%-20s %6lld %14.0f %9.3f %9.3f %9.3f %9.3f %9.2f %9.2f %9.2f", r->label,
                (long long)r->seq_len, r->pairs, r->forward_seconds, backward, r->seconds,
                r->cpu_seconds, forward_flops / r->forward_seconds * 1e-9,
                backward_flops / backward * 1e-9, gflops);
        if (r->baseline_seconds > 0.0) {
            fprintf(out, " %9.3f %9.2f", r->baseline_seconds, r->baseline_seconds / r->seconds);
        }
        fprintf(out, "\n");
    }
    fflush(out);
}

/* One thread of the ceiling: `repeats` products of CEILING_EDGE square matrices. */
typedef struct ceiling_thread {
    int repeats;
    int ok;            /* 1 when its matrices could be allocated */
    double start, end; /* monotonic seconds around its products */
    double cpu;        /* its CPU seconds over the same interval */
    pthread_t thread;
} ceiling_thread;

static double thread_cpu_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static void *ceiling_main(void *argument) {
    ceiling_thread *self = argument;
    const size_t elements = (size_t)CEILING_EDGE * CEILING_EDGE;
    double *a = malloc(elements * sizeof *a), *b = malloc(elements * sizeof *b);
    double *c = calloc(elements, sizeof *c);
    self->ok = a != NULL && b != NULL && c != NULL;
    for (size_t i = 0; self->ok && i < elements; i++) {
        a[i] = fixture_uniform(2, 1, i);
        b[i] = fixture_uniform(2, 2, i);
    }
    self->start = monotonic_seconds();
    const double cpu_start = thread_cpu_seconds();
    for (int r = 0; self->ok && r < self->repeats; r++) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, CEILING_EDGE, CEILING_EDGE,
                    CEILING_EDGE, 1.0, a, CEILING_EDGE, b, CEILING_EDGE, 0.0, c, CEILING_EDGE);
    }
    self->cpu = thread_cpu_seconds() - cpu_start;
    self->end = monotonic_seconds();
    free(a);
    free(b);
    free(c);
    return NULL;
}

int bench_dgemm_ceiling(int thread_count, int json, FILE *out, FILE *err) {
    enum { REPEATS = 16 };
    ceiling_thread threads[REFERENCE_MAX_THREADS];
    openblas_set_num_threads(1);
    int started = 0;
    for (; started < thread_count; started++) {
        threads[started].repeats = REPEATS;
        if (pthread_create(&threads[started].thread, NULL, ceiling_main, &threads[started]) != 0) {
            break;
        }
    }
    int ok = started == thread_count;
    double first = INFINITY, last = -INFINITY, cpu = 0.0;
    for (int t = 0; t < started; t++) {
        pthread_join(threads[t].thread, NULL);
        ok = ok && threads[t].ok;
        first = threads[t].start < first ? threads[t].start : first;
        last = threads[t].end > last ? threads[t].end : last;
        cpu += threads[t].cpu;
    }
    if (!ok) {
        fprintf(err, "cpparity bench: could not run %d dgemm threads\n", thread_count);
        return 3;
    }
    const double edge = CEILING_EDGE;
    const bench_result result = {
        .what = "dgemm",
        .seq_len = CEILING_EDGE,
        .heads = 1,
        .head_dim = CEILING_EDGE,
        .seconds = last - first,
        .cpu_seconds = cpu,
        .flops = 2.0 * edge * edge * edge * REPEATS * thread_count,
    };
    print_result(&result, thread_count, json, out);
    return 0;
}

/* The naive float32 baseline's attention (naive_attention.h), forward then backward, on q, k, v
 * and dout rounded to float32, on the reference's threads: its wall seconds, or −1 when out of
 * memory. */
static double time_baseline(const double *q, const double *k, const double *v, const double *dout,
                            const reference_mask *mask, naive_attention_shape shape, double scale) {
    const size_t elements = (size_t)(shape.seq_len * shape.heads * shape.head_dim);
    enum { Q, K, V, DOUT, OUT, DQ, DK, DV, TENSORS };
    float *tensors[TENSORS];
    int allocated = 1;
    for (int i = 0; i < TENSORS; i++) {
        tensors[i] = calloc(elements, sizeof(float));
        allocated = allocated && tensors[i] != NULL;
    }
    float *lse = malloc((size_t)(shape.heads * shape.seq_len) * sizeof(float));
    double seconds = -1.0;
    if (allocated && lse != NULL) {
        for (size_t i = 0; i < elements; i++) {
            tensors[Q][i] = (float)q[i];
            tensors[K][i] = (float)k[i];
            tensors[V][i] = (float)v[i];
            tensors[DOUT][i] = (float)dout[i];
        }
        const double start = monotonic_seconds();
        if (naive_float_attention_forward(tensors[OUT], lse, tensors[Q], tensors[K], tensors[V],
                                          mask, shape, (float)scale) &&
            naive_float_attention_backward(tensors[DQ], tensors[DK], tensors[DV], tensors[DOUT],
                                           tensors[Q], tensors[K], tensors[V], tensors[OUT], lse,
                                           mask, shape, (float)scale)) {
            seconds = monotonic_seconds() - start;
        }
    }
    for (int i = 0; i < TENSORS; i++) {
        free(tensors[i]);
    }
    free(lse);
    return seconds;
}

/* Times one mask at one length; prints one line. Returns 0 or an exit code. */
static int bench_one(mask_kind kind, int64_t seq_len, const bench_options *options, FILE *out,
                     FILE *err) {
    const int64_t heads = options->heads, head_dim = options->head_dim;
    const reference_attention_shape shape = {1, seq_len, heads, heads, head_dim};
    const size_t elements = (size_t)(seq_len * heads * head_dim);
    int8_t *attention_mask = malloc((size_t)seq_len);
    int64_t *position_ids = malloc((size_t)seq_len * sizeof(int64_t));
    enum { Q, K, V, DOUT, OUT, DQ, DK, DV, TENSORS };
    double *tensors[TENSORS];
    for (int i = 0; i < TENSORS; i++) {
        tensors[i] = calloc(elements, sizeof(double));
    }
    double *lse = malloc((size_t)(heads * seq_len) * sizeof(double));
    int status = 3, allocated = attention_mask && position_ids && lse;
    for (int i = 0; i < TENSORS; i++) {
        allocated = allocated && tensors[i] != NULL;
    }
    reference_mask mask = {0};
    cpparity_error error = {0};
    if (!allocated) {
        fprintf(err, "cpparity bench reference: out of memory at S=%lld\n", (long long)seq_len);
        goto done;
    }
    const int64_t document_length =
        kind == MASK_PACKED ? (seq_len + options->documents - 1) / options->documents : seq_len;
    for (int64_t t = 0; t < seq_len; t++) {
        attention_mask[t] = 1;
        position_ids[t] = t % document_length;
    }
    for (size_t i = 0; i < elements; i++) {
        tensors[Q][i] = fixture_uniform(1, 1, i);
        tensors[K][i] = fixture_uniform(1, 2, i);
        tensors[V][i] = fixture_uniform(1, 3, i);
        tensors[DOUT][i] = fixture_uniform(1, 4, i);
    }
    cpparity_attention_layer layer = {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW};
    if (kind == MASK_SLIDING) {
        layer = (cpparity_attention_layer){CPPARITY_LAYER_SLIDING, options->window, 0,
                                           CPPARITY_CHUNK_ORIGIN_ROW};
    } else if (kind == MASK_CHUNKED) {
        layer = (cpparity_attention_layer){CPPARITY_LAYER_CHUNKED, 0, options->chunk,
                                           CPPARITY_CHUNK_ORIGIN_ROW};
    }
    reference_mask_counts counts;
    if (reference_mask_init(&mask, 1, seq_len, attention_mask, position_ids, layer,
                            REFERENCE_MASK_DEFAULT_BLOCK, &error) != CPPARITY_OK ||
        reference_mask_count(&mask, &counts, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    /* the outputs zeroed as the caller's part (attention.h: the backward adds into dq, dk and
     * dv), so that their pages are the process's before the clock starts, as dgemm's are */
    for (int i = OUT; i < TENSORS; i++) {
        memset(tensors[i], 0, elements * sizeof(double));
    }
    const double scale = 1.0 / sqrt((double)head_dim);
    const double start = monotonic_seconds(), cpu_start = cpu_seconds();
    if (reference_attention_forward(tensors[OUT], lse, tensors[Q], tensors[K], tensors[V], &mask,
                                    shape, scale, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    const double middle = monotonic_seconds();
    if (reference_attention_backward(tensors[DQ], tensors[DK], tensors[DV], tensors[DOUT],
                                     tensors[Q], tensors[K], tensors[V], tensors[OUT], lse, &mask,
                                     shape, scale, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    const double end = monotonic_seconds();
    const double cpu_end = cpu_seconds();
    double baseline_seconds = 0.0;
    if (options->baseline) {
        baseline_seconds =
            time_baseline(tensors[Q], tensors[K], tensors[V], tensors[DOUT], &mask,
                          (naive_attention_shape){1, seq_len, heads, heads, head_dim}, scale);
        if (baseline_seconds < 0.0) {
            fprintf(err,
                    "cpparity bench reference: out of memory for the naive baseline at "
                    "S=%lld\n",
                    (long long)seq_len);
            goto done;
        }
    }
    char label[64];
    mask_label(label, sizeof label, kind, options);
    const double pairs = (double)counts.pairs_allowed * (double)heads;
    const bench_result result = {
        .what = "attention",
        .mask = mask_names[kind],
        .label = label,
        .seq_len = seq_len,
        .heads = heads,
        .head_dim = head_dim,
        .pairs = pairs,
        .forward_seconds = middle - start,
        .seconds = end - start,
        .cpu_seconds = cpu_end - cpu_start,
        .flops = 14.0 * (double)head_dim * pairs,
        .baseline_seconds = baseline_seconds,
    };
    print_result(&result, options->threads, options->json, out);
    status = 0;
done:
    reference_mask_free(&mask);
    for (int i = 0; i < TENSORS; i++) {
        free(tensors[i]);
    }
    free(lse);
    free(position_ids);
    free(attention_mask);
    return status;
}

/* Parses argv into options; returns -1 to go on, or an exit code. */
static int parse_options(int argc, char **argv, bench_options *options, FILE *out, FILE *err) {
    static const struct option flags[] = {
        {"seq-len", required_argument, NULL, 's'},
        {"heads", required_argument, NULL, 'h'},
        {"head-dim", required_argument, NULL, 'd'},
        {"threads", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"mask", required_argument, NULL, 'm'},
        {"window", required_argument, NULL, 'w'},
        {"chunk", required_argument, NULL, 'c'},
        {"documents", required_argument, NULL, 'n'},
        {"baseline", no_argument, NULL, 'b'},
        {"help", no_argument, NULL, '?' + 256},
        {NULL, 0, NULL, 0},
    };
    *options = (bench_options){
        .heads = 8, .head_dim = 64, .window = 256, .chunk = 512, .documents = 8, .threads = 1};
    int any_mask = 0;
    int64_t value = 0;
    optind = 1;
    opterr = 0;
    int flag;
    while ((flag = getopt_long(argc, argv, "", flags, NULL)) != -1) {
        switch (flag) {
        case 's':
            if (options->length_count == MAX_LENGTHS) {
                fprintf(err, "cpparity bench reference: at most %d --seq-len\n", MAX_LENGTHS);
                return 2;
            }
            if (!parse_positive(optarg, "--seq-len", &options->lengths[options->length_count++],
                                err)) {
                return 2;
            }
            break;
        case 'h':
            if (!parse_positive(optarg, "--heads", &options->heads, err)) {
                return 2;
            }
            break;
        case 'd':
            if (!parse_positive(optarg, "--head-dim", &options->head_dim, err)) {
                return 2;
            }
            break;
        case 't':
            if (!parse_positive(optarg, "--threads", &value, err)) {
                return 2;
            }
            if (value > REFERENCE_MAX_THREADS) {
                fprintf(err, "cpparity bench reference: --threads is at most %d\n",
                        REFERENCE_MAX_THREADS);
                return 2;
            }
            options->threads = (int)value;
            break;
        case 'j':
            options->json = 1;
            break;
        case 'b':
            options->baseline = 1;
            break;
        case 'm': {
            int found = 0;
            for (int m = 0; m < MASK_KINDS; m++) {
                if (strcmp(optarg, mask_names[m]) == 0) {
                    options->masks[m] = found = any_mask = 1;
                }
            }
            if (!found) {
                fprintf(err,
                        "cpparity bench reference: --mask '%s': expected causal, sliding, "
                        "chunked or packed\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'w':
            if (!parse_positive(optarg, "--window", &options->window, err)) {
                return 2;
            }
            break;
        case 'c':
            if (!parse_positive(optarg, "--chunk", &options->chunk, err)) {
                return 2;
            }
            break;
        case 'n':
            if (!parse_positive(optarg, "--documents", &options->documents, err)) {
                return 2;
            }
            break;
        case '?' + 256:
            usage(out);
            return 0;
        default:
            fprintf(err, "cpparity bench reference: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            usage(err);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(err, "cpparity bench reference: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (options->length_count == 0) {
        options->lengths[options->length_count++] = 1024;
        options->lengths[options->length_count++] = 4096;
    }
    for (int m = 0; m < MASK_KINDS && !any_mask; m++) {
        options->masks[m] = 1;
    }
    return -1;
}

int bench_reference_main(int argc, char **argv, FILE *out, FILE *err) {
    bench_options options;
    const int parsed = parse_options(argc, argv, &options, out, err);
    if (parsed >= 0) {
        return parsed;
    }
    reference_set_threads(options.threads);
    openblas_set_num_threads(1); /* the reference's threads are the parallelism */
    if (!options.json) {
        fprintf(out, "# cpparity bench reference: float64 reference attention, %d thread(s)\n",
                options.threads);
        fprintf(out,
                "# B=1 H=Hkv=%lld Dh=%lld; GFLOP/s on allowed pairs only (4*Dh fwd, 10*Dh bwd); "
                "wall seconds, and the process's CPU seconds\n",
                (long long)options.heads, (long long)options.head_dim);
    }
    int status = bench_dgemm_ceiling(options.threads, options.json, out, err);
    if (status == 0 && !options.json) {
        fprintf(out, "%-20s %6s %14s %9s %9s %9s %9s %9s %9s %9s%s\n", "mask", "S", "allowed pairs",
                "fwd s", "bwd s", "total s", "CPU s", "fwd GF/s", "bwd GF/s", "GF/s",
                options.baseline ? "  naive s / total" : "");
    }
    for (int l = 0; l < options.length_count && status == 0; l++) {
        for (int m = 0; m < MASK_KINDS && status == 0; m++) {
            if (options.masks[m]) {
                status = bench_one((mask_kind)m, options.lengths[l], &options, out, err);
            }
        }
    }
    return status;
}
