/* bench_reference.c — timing of the float64 reference attention (see bench_reference.h). */
#include "harness/bench/bench_reference.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/random.h"
#include "common/monotonic_clock.h"
#include "reference/attention.h"
#include "reference/mask.h"

enum { MAX_LENGTHS = 8, PACKED_DOCUMENTS = 8 };

typedef struct bench_mask {
    const char *name;               /* column label */
    cpparity_attention_layer layer; /* type, W, C */
    int packed;                     /* 1: PACKED_DOCUMENTS equal documents in the row */
} bench_mask;

static const bench_mask bench_masks[] = {
    {"causal", {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW}, 0},
    {"sliding W=256", {CPPARITY_LAYER_SLIDING, 256, 0, CPPARITY_CHUNK_ORIGIN_ROW}, 0},
    {"chunked C=512", {CPPARITY_LAYER_CHUNKED, 0, 512, CPPARITY_CHUNK_ORIGIN_ROW}, 0},
    {"8 packed documents", {CPPARITY_LAYER_FULL, 0, 0, CPPARITY_CHUNK_ORIGIN_ROW}, 1},
};

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity bench reference [--seq-len N]... [--heads H] [--head-dim D]\n"
            "  Times the float64 reference attention forward+backward, B = 1, on the masks\n"
            "  causal, sliding W=256, chunked C=512 and 8 packed documents.\n"
            "  --seq-len N   sequence length (repeatable; default 1024 and 4096)\n"
            "  --heads H     query heads = key/value heads (default 8)\n"
            "  --head-dim D  head dimension (default 64)\n");
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

/* Times one mask at one length; prints one table line. Returns 0 or an exit code. */
static int bench_one(const bench_mask *bench, int64_t seq_len, int64_t heads, int64_t head_dim,
                     FILE *out, FILE *err) {
    const reference_attention_shape shape = {1, seq_len, heads, heads, head_dim};
    const int64_t elements = seq_len * heads * head_dim;
    int8_t *attention_mask = malloc((size_t)seq_len);
    int64_t *position_ids = malloc((size_t)seq_len * sizeof(int64_t));
    double *buffers[7];
    for (int i = 0; i < 7; i++) {
        buffers[i] = calloc((size_t)elements, sizeof(double));
    }
    double *lse = malloc((size_t)(heads * seq_len) * sizeof(double));
    int status = 3;
    reference_mask mask = {0};
    cpparity_error error = {0};
    if (!attention_mask || !position_ids || !lse || !buffers[0] || !buffers[1] || !buffers[2] ||
        !buffers[3] || !buffers[4] || !buffers[5] || !buffers[6]) {
        fprintf(err, "cpparity bench reference: out of memory at S=%lld\n", (long long)seq_len);
        goto done;
    }
    double *q = buffers[0], *k = buffers[1], *v = buffers[2], *dout = buffers[3];
    double *result = buffers[4], *dq = buffers[5], *dk = buffers[6];
    const int64_t document_length =
        bench->packed ? (seq_len + PACKED_DOCUMENTS - 1) / PACKED_DOCUMENTS : seq_len;
    for (int64_t t = 0; t < seq_len; t++) {
        attention_mask[t] = 1;
        position_ids[t] = t % document_length;
    }
    for (int64_t i = 0; i < elements; i++) {
        q[i] = fixture_uniform(1, 1, (uint64_t)i);
        k[i] = fixture_uniform(1, 2, (uint64_t)i);
        v[i] = fixture_uniform(1, 3, (uint64_t)i);
        dout[i] = fixture_uniform(1, 4, (uint64_t)i);
    }
    if (reference_mask_init(&mask, 1, seq_len, attention_mask, position_ids, bench->layer,
                            REFERENCE_MASK_DEFAULT_BLOCK, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    reference_mask_counts counts;
    if (reference_mask_count(&mask, &counts, &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    const double scale = 1.0 / sqrt((double)head_dim);
    /* dv shares the output buffer: the benchmark reads no result */
    double start = monotonic_seconds();
    if (reference_attention_forward(result, lse, q, k, v, &mask, shape, scale, &error) !=
        CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    double middle = monotonic_seconds();
    if (reference_attention_backward(dq, dk, dout, dout, q, k, v, result, lse, &mask, shape, scale,
                                     &error) != CPPARITY_OK) {
        fprintf(err, "cpparity bench reference: %s\n", error.message);
        goto done;
    }
    double end = monotonic_seconds();
    const double pairs = (double)counts.pairs_allowed * (double)heads;
    const double forward_flops = 4.0 * (double)head_dim * pairs;
    const double backward_flops = 10.0 * (double)head_dim * pairs;
    fprintf(out, "%-20s %6lld %14.0f %9.3f %9.3f %9.3f %9.2f %9.2f %9.2f\n", bench->name,
            (long long)seq_len, pairs, middle - start, end - middle, end - start,
            forward_flops / (middle - start) * 1e-9, backward_flops / (end - middle) * 1e-9,
            (forward_flops + backward_flops) / (end - start) * 1e-9);
    fflush(out);
    status = 0;
done:
    reference_mask_free(&mask);
    for (int i = 0; i < 7; i++) {
        free(buffers[i]);
    }
    free(lse);
    free(position_ids);
    free(attention_mask);
    return status;
}

int bench_reference_main(int argc, char **argv, FILE *out, FILE *err) {
    static const struct option options[] = {
        {"seq-len", required_argument, NULL, 's'},
        {"heads", required_argument, NULL, 'h'},
        {"head-dim", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, '?' + 256},
        {NULL, 0, NULL, 0},
    };
    int64_t lengths[MAX_LENGTHS];
    int length_count = 0;
    int64_t heads = 8, head_dim = 64;
    optind = 1;
    opterr = 0;
    int option;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (option) {
        case 's':
            if (length_count == MAX_LENGTHS) {
                fprintf(err, "cpparity bench reference: at most %d --seq-len\n", MAX_LENGTHS);
                return 2;
            }
            if (!parse_positive(optarg, "--seq-len", &lengths[length_count++], err)) {
                return 2;
            }
            break;
        case 'h':
            if (!parse_positive(optarg, "--heads", &heads, err)) {
                return 2;
            }
            break;
        case 'd':
            if (!parse_positive(optarg, "--head-dim", &head_dim, err)) {
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
    if (length_count == 0) {
        lengths[length_count++] = 1024;
        lengths[length_count++] = 4096;
    }
    fprintf(out, "# cpparity bench reference: float64 reference attention, one thread\n");
    fprintf(out, "# B=1 H=Hkv=%lld Dh=%lld; GFLOP/s on allowed pairs only (4*Dh fwd, 10*Dh bwd)\n",
            (long long)heads, (long long)head_dim);
    fprintf(out, "%-20s %6s %14s %9s %9s %9s %9s %9s %9s\n", "mask", "S", "allowed pairs", "fwd s",
            "bwd s", "total s", "fwd GF/s", "bwd GF/s", "GF/s");
    for (int l = 0; l < length_count; l++) {
        for (size_t m = 0; m < sizeof bench_masks / sizeof *bench_masks; m++) {
            int status = bench_one(&bench_masks[m], lengths[l], heads, head_dim, out, err);
            if (status != 0) {
                return status;
            }
        }
    }
    return 0;
}
