/* judge_dumps.c — see judge_dumps.h. */
#include "harness/running/judge_dumps.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked_size.h"
#include "harness/running/memory_estimate.h"

/* One cp and one dtype; each rank exactly once. by_rank[r] (count entries) receives the index of
 * rank r's dump. Nothing of the size of cp (a number from a file) is allocated before cp is
 * known to equal count. */
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
    for (int64_t i = 0; i < count; i++) { /* a rank given twice (every rank is < cp) */
        for (int64_t j = 0; j < i; j++) {
            if (dumps[j].rank == dumps[i].rank) {
                return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                          "%s and %s: both are rank %lld (/ rank)", dumps[j].path,
                                          dumps[i].path, (long long)dumps[i].rank);
            }
        }
    }
    if (count != cp) { /* distinct ranks, fewer than cp: name the first missing */
        int64_t missing = 0;
        for (bool found = true; found; missing += found) {
            found = false;
            for (int64_t i = 0; i < count && !found; i++) {
                found = dumps[i].rank == missing;
            }
        }
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "no dump of rank %lld: %lld dump%s given for cp %lld (%s, ...)",
                                  (long long)missing, (long long)count, count == 1 ? "" : "s",
                                  (long long)cp, dumps[0].path);
    }
    for (int64_t i = 0; i < count; i++) {
        by_rank[dumps[i].rank] = i;
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

/* losses, gradients [cp][P] (slices reassembled); the logits stay in the files. */
static cpparity_status gather(judge_dump_set *set, const cpparity_tensor_table *parameters,
                              cpparity_error *error) {
    const int64_t cp = set->cp, P = parameters->total;
    set->losses = malloc((size_t)cp * sizeof *set->losses);
    set->gradients = malloc((size_t)(cp * P > 0 ? cp * P : 1) * sizeof *set->gradients);
    if (!set->losses || !set->gradients) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t r = 0; r < cp; r++) {
        set->losses[r] = (float)set->dumps[r].loss;
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

int64_t judge_dumps_position_bytes(const cpparity_case *c, run_store store) {
    int64_t per_element = 0, per_row = 0, bytes = 0;
    if (!cpparity_multiply_checked(c->batch_size, c->model.vocab_size, &per_element) ||
        !cpparity_multiply_checked(per_element, store == RUN_STORE_ALL ? 12 : 0, &per_element) ||
        !cpparity_multiply_checked(c->batch_size, 8, &per_row) ||
        !cpparity_add_checked(per_element, per_row, &bytes) ||
        !cpparity_add_checked(bytes, 64, &bytes)) {
        return INT64_MAX;
    }
    return bytes;
}

int64_t judge_dumps_most_positions(const cpparity_case *c, run_store store, int64_t memory_bytes) {
    const int64_t most = memory_bytes / judge_dumps_position_bytes(c, store);
    return most > c->seq_len ? most : c->seq_len;
}

/* Reads request's dumps into read, each against the export and what is left of the bound. */
static cpparity_status read_each(const judge_dumps_request *request, const export_reading *reading,
                                 const cpparity_case *c, const cpparity_tensor_table *parameters,
                                 rank_dump *read, cpparity_error *error) {
    const int64_t most = judge_dumps_most_positions(c, request->store, request->memory_bytes);
    char limit[64], bound[512];
    memory_size_format(request->memory_bytes, limit, sizeof limit);
    rank_dump_expect expect = {reading->digest, reading->case_name, reading->seed, request->flag,
                               request->cp,     request->dtype,     most,          bound};
    cpparity_status status = CPPARITY_OK;
    int64_t held = 0; /* rows of the dumps read so far */
    for (int64_t i = 0; i < request->count && status == CPPARITY_OK; i++) {
        expect.most_rows = most - held;
        snprintf(bound, sizeof bound,
                 "with the %lld rows of the dumps read before, the padded length Sp would pass "
                 "%lld positions, the most the judge holds for S = %lld at %lld bytes per padded "
                 "position within the memory limit of %s (%.200s; docs/dump-format.md, padding)",
                 (long long)held, (long long)most, (long long)c->seq_len,
                 (long long)judge_dumps_position_bytes(c, request->store), limit,
                 request->memory_source != NULL ? request->memory_source : "given");
        status = rank_dump_read(request->paths[i], c, parameters, &expect, &read[i], error);
        held += status == CPPARITY_OK ? read[i].rows : 0;
    }
    return status;
}

cpparity_status judge_dumps_load(const judge_dumps_request *request, const export_reading *reading,
                                 const cpparity_case *c, const cpparity_tensor_table *parameters,
                                 judge_dump_set *set, cpparity_error *error) {
    memset(set, 0, sizeof *set);
    const int64_t count = request->count;
    if (count < 1) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s%sno rank dump given",
                                  request->flag != NULL ? request->flag : "",
                                  request->flag != NULL ? ": " : "");
    }
    rank_dump *read = calloc((size_t)count, sizeof *read);
    if (read == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    cpparity_status status = read_each(request, reading, c, parameters, read, error);
    const int64_t cp = status == CPPARITY_OK ? read[0].cp : 0;
    int64_t *by_rank = status == CPPARITY_OK ? malloc((size_t)count * sizeof *by_rank) : NULL;
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
        status = gather(set, parameters, error);
    }
    for (int64_t i = 0; i < count; i++) {
        rank_dump_free(&read[i]);
    }
    free(read);
    free(by_rank);
    if (status != CPPARITY_OK) {
        judge_dump_set_free(set);
    }
    const char *flag = request->flag;
    if (status != CPPARITY_OK && flag != NULL &&
        strncmp(error->message, flag, strlen(flag)) != 0) { /* say whose dumps these are */
        char message[CPPARITY_ERROR_TEXT];
        snprintf(message, sizeof message, "%s", error->message);
        cpparity_error_set(error, status, "%s: %s", flag, message);
    }
    return status;
}

static cpparity_status dump_rows(void *context, int64_t rank, int64_t batch_row, int64_t row,
                                 int64_t count, float *rows, cpparity_error *error) {
    const judge_dump_set *set = context;
    return rank_dump_read_logits(&set->dumps[rank], batch_row, row, count, rows, error);
}

judge_logits judge_dump_set_logits(const judge_dump_set *set) {
    const judge_logits logits = {NULL, dump_rows, (void *)set};
    return logits;
}

void judge_dump_set_free(judge_dump_set *set) {
    for (int64_t r = 0; set->dumps != NULL && r < set->cp; r++) {
        rank_dump_free(&set->dumps[r]);
    }
    free(set->dumps);
    free(set->losses);
    free(set->gradients);
    free(set->positions);
    free(set->lengths);
    memset(set, 0, sizeof *set);
}
