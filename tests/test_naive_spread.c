/*
 * test_naive_spread.c — the naive same-dtype baseline spread over ranks
 * (harness/judging/naive_model.h naive_model_run_spread, through reference_cache.h's
 * reference_cache_spread_naive and reference_naive_share, as `mpirun -np R cpparity run` and
 * `judge` use it): on 2 and 3 local ranks its loss, every gradient and every token's logits error
 * are the bits it computes alone. The baseline's errors set every limit (docs/tolerances.md), so
 * a verdict must not depend on how many ranks computed them.
 *
 * The case makes every exchange do real work: two batch rows of 300 tokens (row blocks of 256
 * tokens, so a rank's blocks span batch rows, and 3 ranks hold unequal shares), a vocabulary of
 * 5000 (two groups of the LM head's backward), an intermediate size of 300 (two bands of a weight
 * gradient), sliding and chunked layers, packed documents and padding on both sides; tied and
 * untied embeddings, float32 and bf16.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "distributed/comm/comm_local.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/reference_team_comm.h"
#include "harness/suite/case_file.h"

#define SUITE                                                                                      \
    "defaults:\n"                                                                                  \
    "  model: {vocab_size: 5000, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,\n" \
    "          num_key_value_heads: 2, head_dim: 8, intermediate_size: 300,\n"                     \
    "          layer_types: [sliding_attention, chunked_attention], sliding_window: 40,\n"         \
    "          attention_chunk_size: 100}\n"                                                       \
    "  cp: [1]\n"                                                                                  \
    "  seed: 11\n"                                                                                 \
    "  seq_len: 300\n"                                                                             \
    "  rows: [{left_padding: 9, documents: [100, 150, 41]},\n"                                     \
    "         {documents: [280], right_padding: 20}]\n"                                            \
    "cases:\n"                                                                                     \
    "  - name: untied\n"                                                                           \
    "  - name: tied\n"                                                                             \
    "    model: {tie_word_embeddings: true}\n"

/* What the ranks of one spread baseline share. */
typedef struct spread_job {
    reference_cache *cache; /* rank 0's, holding the case's reference */
    const cpparity_case *c;
    cpparity_dtype dtype;
} spread_job;

static cpparity_status spread_rank(cpparity_comm *comm, void *argument, cpparity_error *error) {
    spread_job *job = argument;
    const reference_team team = reference_team_of_comm(comm);
    if (comm->rank == 0) {
        return reference_cache_spread_naive(job->cache, 0, job->c, job->c->seed, job->dtype, &team,
                                            error);
    }
    return reference_naive_share(job->c, job->c->seed, job->dtype, &team, error);
}

/* Bitwise equality of count values of width bytes, naming the first difference. */
static void expect_same(const void *alone, const void *spread, int64_t count, size_t width,
                        const char *what, int ranks) {
    const unsigned char *a = alone, *b = spread;
    for (int64_t i = 0; i < count; i++) {
        if (memcmp(a + (size_t)i * width, b + (size_t)i * width, width) != 0) {
            cr_expect(false, "%s[%lld] differs on %d ranks from alone", what, (long long)i, ranks);
            return;
        }
    }
}

Test(naive_spread, on_2_and_3_ranks__the_bits_it_computes_alone, .timeout = 240) {
    cpparity_suite suite;
    cpparity_error error;
    cr_assert_eq(cpparity_suite_load_text(SUITE, strlen(SUITE), "s.yaml", &suite, &error),
                 CPPARITY_OK, "%s", error.message);
    cr_assert_eq(suite.count, 2);
    for (int64_t k = 0; k < suite.count; k++) {
        const cpparity_case *c = &suite.cases[k];
        const int64_t tokens = c->batch_size * c->seq_len;
        for (int dtype = 0; dtype < CPPARITY_DTYPE_COUNT; dtype++) {
            reference_cache alone = {0};
            const reference_outputs *a = NULL;
            double seconds = 0.0;
            cr_assert_eq(
                reference_cache_get_with_naive(&alone, 0, c, c->seed, dtype, &a, &seconds, &error),
                CPPARITY_OK, "%s", error.message);
            const naive_outputs *x = &a->naive[dtype];
            for (int ranks = 2; ranks <= 3; ranks++) {
                reference_cache cache = {0};
                const reference_outputs *b = NULL;
                int computed = 0;
                cr_assert_eq(reference_cache_get(&cache, 0, c, c->seed, &b, &computed, &error),
                             CPPARITY_OK, "%s", error.message);
                cr_assert(reference_cache_has(&cache, 0, c->seed, -1));
                cr_assert(!reference_cache_has(&cache, 0, c->seed, dtype));
                spread_job job = {&cache, c, dtype};
                cpparity_status statuses[3];
                cpparity_error errors[3];
                cr_assert_eq(
                    comm_local_run(ranks, 120.0, spread_rank, &job, statuses, errors, &error),
                    CPPARITY_OK, "%s", error.message);
                for (int r = 0; r < ranks; r++) {
                    cr_assert_eq(statuses[r], CPPARITY_OK, "%s, rank %d of %d: %s", c->name, r,
                                 ranks, errors[r].message);
                }
                cr_assert(reference_cache_has(&cache, 0, c->seed, dtype));
                const naive_outputs *y = &b->naive[dtype];
                /* bitwise: the same sums in the same order on any rank count, no tolerance */
                cr_expect(memcmp(&x->loss, &y->loss, sizeof x->loss) == 0,
                          "%s %d: loss %a alone, %a on %d ranks", c->name, dtype, x->loss, y->loss,
                          ranks);
                expect_same(x->gradients, y->gradients, b->parameter_table.total, sizeof(float),
                            "gradients", ranks);
                expect_same(x->logits_error, y->logits_error, tokens, sizeof(double),
                            "logits_error", ranks);
                expect_same(x->logits_norm, y->logits_norm, tokens, sizeof(double), "logits_norm",
                            ranks);
                expect_same(x->logits_nonfinite, y->logits_nonfinite, tokens, 1, "logits_nonfinite",
                            ranks);
                reference_cache_free(&cache);
            }
            /* not trivially equal: the baseline errs against the reference */
            double error_sum = 0.0;
            for (int64_t n = 0; n < tokens; n++) {
                error_sum += x->logits_error[n];
            }
            cr_expect(error_sum > 0.0, "%s: the baseline's logits equal the reference's", c->name);
            reference_cache_free(&alone);
        }
    }
    cpparity_suite_free(&suite);
}
