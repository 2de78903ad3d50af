/* team.c — the spread reference's exchanges (see team.h). */
#include "team.h"

#include <stdlib.h>
#include <string.h>

int reference_team_size(const reference_team *team) {
    return team != NULL ? team->size : 1;
}

int reference_team_rank(const reference_team *team) {
    return team != NULL ? team->rank : 0;
}

static cpparity_status out_of_memory(cpparity_error *error, const char *what, int64_t values) {
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                              "out of memory (the spread reference's %s: %lld values)", what,
                              (long long)values);
}

cpparity_status reference_team_gather_rows(const reference_team *team, const double *mine,
                                           const int64_t *rows, int64_t width, double *whole,
                                           cpparity_error *error) {
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    if (size == 1) {
        if (whole != mine) {
            memcpy(whole, mine, (size_t)(rows[0] * width) * sizeof *whole);
        }
        return CPPARITY_OK;
    }
    int64_t widest = 0;
    for (int r = 0; r < size; r++) {
        widest = rows[r] > widest ? rows[r] : widest;
    }
    const int64_t count = widest * width;
    double *send = calloc((size_t)count + 1, sizeof *send);
    double *receive = malloc(((size_t)count * (size_t)size + 1) * sizeof *receive);
    if (send == NULL || receive == NULL) {
        free(send);
        free(receive);
        return out_of_memory(error, "gathered rows", count * size);
    }
    memcpy(send, mine, (size_t)(rows[rank] * width) * sizeof *send);
    cpparity_status status =
        team->operations->all_gather(team->context, send, receive, count, error);
    int64_t at = 0;
    for (int r = 0; status == CPPARITY_OK && r < size; r++) {
        memcpy(whole + at, receive + r * count, (size_t)(rows[r] * width) * sizeof *whole);
        at += rows[r] * width;
    }
    free(send);
    free(receive);
    return status;
}

cpparity_status reference_team_pipeline(const reference_team *team, int64_t groups,
                                        reference_team_group_values group_values,
                                        void (*add)(void *context, int64_t group), void *context,
                                        cpparity_error *error) {
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    if (size == 1) {
        for (int64_t g = 0; g < groups; g++) {
            add(context, g);
        }
        return CPPARITY_OK;
    }
    int64_t widest = 0;
    for (int64_t g = 0; g < groups; g++) {
        int64_t count = 0;
        (void)group_values(context, g, &count);
        widest = count > widest ? count : widest;
    }
    double *send = calloc((size_t)widest + 1, sizeof *send);
    double *receive = malloc(((size_t)widest + 1) * sizeof *receive);
    if (send == NULL || receive == NULL) {
        free(send);
        free(receive);
        return out_of_memory(error, "partial sum of a weight", widest);
    }
    /* step s: rank r adds group s − r, then hands it to rank r + 1, which adds it at step s + 1 */
    const int64_t steps = groups + size - 1;
    cpparity_status status = CPPARITY_OK;
    for (int64_t s = 0; s < steps && status == CPPARITY_OK; s++) {
        const int64_t mine = s - rank;
        if (mine >= 0 && mine < groups) {
            add(context, mine);
            int64_t count = 0;
            const double *values = group_values(context, mine, &count);
            memcpy(send, values, (size_t)count * sizeof *send);
        }
        if (s + 1 == steps) {
            break; /* the last rank added the last group: nothing is handed on */
        }
        status = team->operations->shift(team->context, send, receive, widest, error);
        const int64_t next = mine + 1; /* the group rank − 1 finished in this step */
        if (status == CPPARITY_OK && rank > 0 && next >= 0 && next < groups) {
            int64_t count = 0;
            double *values = group_values(context, next, &count);
            memcpy(values, receive, (size_t)count * sizeof *values);
        }
    }
    free(send);
    free(receive);
    return status;
}

/* The chain is a pipeline of one group. */
typedef struct chain {
    double *buffer;
    int64_t count;
    void (*add)(void *context);
    void *context;
} chain;

static double *chain_values(void *context, int64_t group, int64_t *count) {
    (void)group;
    chain *c = context;
    *count = c->count;
    return c->buffer;
}

static void chain_add(void *context, int64_t group) {
    (void)group;
    chain *c = context;
    c->add(c->context);
}

cpparity_status reference_team_chain(const reference_team *team, double *buffer, int64_t count,
                                     void (*add)(void *context), void *context,
                                     cpparity_error *error) {
    chain c = {buffer, count, add, context};
    return reference_team_pipeline(team, 1, chain_values, chain_add, &c, error);
}

cpparity_status reference_team_from_last(const reference_team *team, double *buffer, int64_t count,
                                         cpparity_error *error) {
    const int size = reference_team_size(team);
    if (size == 1) {
        return CPPARITY_OK;
    }
    return team->operations->broadcast(team->context, buffer, count, size - 1, error);
}
