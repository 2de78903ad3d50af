/* judge_dumps.c — see judge_dumps.h. */
#include "harness/running/judge_dumps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every dump is of the export read (its case, seed and digest). */
static cpparity_status check_export(const rank_dump *dumps, int64_t count,
                                    const export_reading *reading, cpparity_error *error) {
    for (int64_t i = 0; i < count; i++) {
        const rank_dump *dump = &dumps[i];
        if (strcmp(dump->export_digest, reading->digest) != 0 ||
            strcmp(dump->case_name, reading->case_name) != 0 ||
            (uint64_t)dump->seed != reading->seed) {
            return cpparity_error_set(
                error, CPPARITY_ERROR_INPUT,
                "%s: /: export_digest %s (case %s, seed %lld) is not the export's %s (case %s, "
                "seed %llu): a dump of another export or seed",
                dump->path, dump->export_digest, dump->case_name, (long long)dump->seed,
                reading->digest, reading->case_name, (unsigned long long)reading->seed);
        }
    }
    return CPPARITY_OK;
}

/* One cp and one dtype; each rank exactly once. by_rank[r] receives the index of rank r's dump. */
static cpparity_status check_ranks(const rank_dump *dumps, int64_t count, int64_t *by_rank,
                                   cpparity_error *error) {
    const int64_t cp = dumps[0].cp;
    for (int64_t i = 1; i < count; i++) {
        if (dumps[i].cp != cp) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: /: cp %lld, but %s says %lld", dumps[i].path,
                                      (long long)dumps[i].cp, dumps[0].path, (long long)cp);
        }
        if (dumps[i].dtype != dumps[0].dtype) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: /: dtype %s, but %s says %s", dumps[i].path,
                                      cpparity_dtype_name(dumps[i].dtype), dumps[0].path,
                                      cpparity_dtype_name(dumps[0].dtype));
        }
    }
    for (int64_t r = 0; r < cp; r++) {
        by_rank[r] = -1;
    }
    for (int64_t i = 0; i < count; i++) {
        const int64_t r = dumps[i].rank;
        if (by_rank[r] >= 0) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s and %s: both are rank %lld (/ rank)",
                                      dumps[by_rank[r]].path, dumps[i].path, (long long)r);
        }
        by_rank[r] = i;
    }
    for (int64_t r = 0; r < cp; r++) {
        if (by_rank[r] < 0) {
            return cpparity_error_set(
                error, CPPARITY_ERROR_INPUT,
                "no dump of rank %lld: %lld dumps given for cp %lld (%s, ...)", (long long)r,
                (long long)count, (long long)cp, dumps[0].path);
        }
    }
    return CPPARITY_OK;
}

/* The ranks' positions partition [0, Sp), Sp = Σ L_r >= S. */
static cpparity_status check_positions(judge_dump_set *set, const cpparity_case *c,
                                       cpparity_error *error) {
    set->padded_len = 0;
    for (int64_t r = 0; r < set->cp; r++) {
        set->positions[r] = set->dumps[r].positions;
        set->lengths[r] = set->dumps[r].rows;
        set->padded_len += set->dumps[r].rows;
    }
    if (set->padded_len < c->seq_len) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "/token_indices: the %lld dumps hold %lld positions, fewer than "
                                  "the case's S = %lld (%s, ...)",
                                  (long long)set->cp, (long long)set->padded_len,
                                  (long long)c->seq_len, set->dumps[0].path);
    }
    cpparity_error why;
    const cpparity_status status =
        token_layout_check_partition(set->padded_len, set->cp, set->positions, set->lengths, &why);
    if (status != CPPARITY_OK) {
        const int64_t culprit = strstr(why.message, "rank ") != NULL
                                    ? strtoll(strstr(why.message, "rank ") + 5, NULL, 10)
                                    : 0;
        return cpparity_error_set(error, status,
                                  "%s: /token_indices: the ranks' positions do not partition the "
                                  "padded sequence [0, %lld): %s",
                                  set->dumps[culprit >= 0 && culprit < set->cp ? culprit : 0].path,
                                  (long long)set->padded_len, why.message);
    }
    set->layout =
        token_layout_recognise(set->padded_len, set->cp, set->positions, set->lengths, NULL);
    return CPPARITY_OK;
}

/* Parameter p given in slices by every rank: they tile [0, count) exactly; the whole tensor is
 * then copied into every rank's gradients. */
static cpparity_status assemble_slices(judge_dump_set *set, const cpparity_tensor_entry *entry,
                                       int64_t p, int64_t total, cpparity_error *error) {
    const int64_t cp = set->cp;
    int64_t *order = malloc((size_t)cp * sizeof *order);
    if (order == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t r = 0; r < cp; r++) { /* ranks by slice offset (insertion: cp is small) */
        int64_t at = r;
        while (at > 0 &&
               set->dumps[order[at - 1]].slice_offset[p] > set->dumps[r].slice_offset[p]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = r;
    }
    cpparity_status status = CPPARITY_OK;
    int64_t covered = 0, last = -1;
    for (int64_t i = 0; i < cp && status == CPPARITY_OK; i++) {
        const rank_dump *dump = &set->dumps[order[i]];
        const int64_t offset = dump->slice_offset[p], length = dump->slice_length[p];
        if (length == 0) {
            continue;
        }
        if (offset > covered) {
            status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                        "/gradient_slices/%s: elements [%lld, %lld) of %lld are in "
                                        "no rank's slice (%s, ...)",
                                        entry->name, (long long)covered, (long long)offset,
                                        (long long)entry->count, set->dumps[0].path);
        } else if (offset < covered) {
            status =
                cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                   "%s: /gradient_slices/%s: element %lld is also in rank "
                                   "%lld's slice",
                                   dump->path, entry->name, (long long)offset, (long long)last);
        }
        covered = offset + length;
        last = dump->rank;
        for (int64_t r = 0; status == CPPARITY_OK && r < cp; r++) {
            memcpy(set->gradients + r * total + entry->offset + offset,
                   dump->gradients + entry->offset + offset, (size_t)length * sizeof(float));
        }
    }
    if (status == CPPARITY_OK && covered != entry->count) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "/gradient_slices/%s: elements [%lld, %lld) of %lld are in no "
                                    "rank's slice (%s, ...)",
                                    entry->name, (long long)covered, (long long)entry->count,
                                    (long long)entry->count, set->dumps[0].path);
    }
    free(order);
    return status;
}

/* losses, logits rank after rank, gradients [cp][P] (slices reassembled). */
static cpparity_status gather(judge_dump_set *set, const cpparity_case *c,
                              const cpparity_tensor_table *parameters, cpparity_error *error) {
    const int64_t cp = set->cp, P = parameters->total;
    const int64_t row = c->batch_size * c->model.vocab_size; /* logits of one position */
    set->losses = malloc((size_t)cp * sizeof *set->losses);
    set->logits = malloc((size_t)(set->padded_len * row > 0 ? set->padded_len * row : 1) *
                         sizeof *set->logits);
    set->gradients = malloc((size_t)(cp * P > 0 ? cp * P : 1) * sizeof *set->gradients);
    if (!set->losses || !set->logits || !set->gradients) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    int64_t at = 0;
    for (int64_t r = 0; r < cp; r++) {
        const rank_dump *dump = &set->dumps[r];
        set->losses[r] = (float)dump->loss;
        memcpy(set->logits + at, dump->logits, (size_t)(dump->rows * row) * sizeof(float));
        at += dump->rows * row;
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t p = 0; status == CPPARITY_OK && p < parameters->count; p++) {
        const cpparity_tensor_entry *entry = &parameters->entries[p];
        for (int64_t r = 1; r < cp; r++) {
            if (set->dumps[r].sliced[p] != set->dumps[0].sliced[p]) {
                const int64_t sliced = set->dumps[r].sliced[p] ? r : 0;
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "%s: /gradient_slices/%s: a slice here, but %s gives "
                                          "it in full",
                                          set->dumps[sliced].path, entry->name,
                                          set->dumps[sliced == 0 ? r : 0].path);
            }
        }
        if (set->dumps[0].sliced[p]) {
            status = assemble_slices(set, entry, p, P, error);
            continue;
        }
        for (int64_t r = 0; r < cp; r++) {
            memcpy(set->gradients + r * P + entry->offset, set->dumps[r].gradients + entry->offset,
                   (size_t)entry->count * sizeof(float));
        }
    }
    return status;
}

cpparity_status judge_dumps_load(const char *const *paths, int64_t count,
                                 const export_reading *reading, const cpparity_case *c,
                                 const cpparity_tensor_table *parameters, judge_dump_set *set,
                                 cpparity_error *error) {
    memset(set, 0, sizeof *set);
    if (count < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "no rank dump given");
    }
    rank_dump *read = calloc((size_t)count, sizeof *read);
    if (read == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t i = 0; i < count && status == CPPARITY_OK; i++) {
        status = rank_dump_read(paths[i], c, parameters, &read[i], error);
    }
    if (status == CPPARITY_OK) {
        status = check_export(read, count, reading, error);
    }
    const int64_t cp = status == CPPARITY_OK ? read[0].cp : 0;
    int64_t *by_rank = status == CPPARITY_OK ? malloc((size_t)cp * sizeof *by_rank) : NULL;
    if (status == CPPARITY_OK && by_rank == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    if (status == CPPARITY_OK) {
        status = check_ranks(read, count, by_rank, error);
    }
    if (status == CPPARITY_OK) { /* count == cp now: every rank once */
        set->cp = cp;
        set->dtype = read[0].dtype;
        set->dumps = calloc((size_t)cp, sizeof *set->dumps);
        set->positions = calloc((size_t)cp, sizeof *set->positions);
        set->lengths = calloc((size_t)cp, sizeof *set->lengths);
        if (!set->dumps || !set->positions || !set->lengths) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
    }
    if (status == CPPARITY_OK) {
        for (int64_t r = 0; r < cp; r++) {
            set->dumps[r] = read[by_rank[r]];
            memset(&read[by_rank[r]], 0, sizeof read[by_rank[r]]);
        }
        status = check_positions(set, c, error);
    }
    if (status == CPPARITY_OK) {
        status = gather(set, c, parameters, error);
    }
    for (int64_t i = 0; i < count; i++) {
        rank_dump_free(&read[i]);
    }
    free(read);
    free(by_rank);
    if (status != CPPARITY_OK) {
        judge_dump_set_free(set);
    }
    return status;
}

void judge_dump_set_free(judge_dump_set *set) {
    for (int64_t r = 0; set->dumps != NULL && r < set->cp; r++) {
        rank_dump_free(&set->dumps[r]);
    }
    free(set->dumps);
    free(set->losses);
    free(set->logits);
    free(set->gradients);
    free(set->positions);
    free(set->lengths);
    memset(set, 0, sizeof *set);
}
