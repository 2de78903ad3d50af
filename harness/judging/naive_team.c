/* naive_team.c — the spread naive baseline's float32 exchanges over a reference team (see
 * naive_team.h). */
#include "harness/judging/naive_team.h"

#include <stdbool.h>
#include <stdlib.h>

enum {
    GATHER_COLUMNS = 64,        /* columns gathered at a time: 2 · 8 · 64 bytes a row in flight */
    BROADCAST_VALUES = 1 << 20, /* values copied from the last rank at a time (8 MiB) */
};

static cpparity_status out_of_memory(cpparity_error *error, const char *what, int64_t values) {
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                              "out of memory (the spread naive baseline's %s: %lld values)", what,
                              (long long)values);
}

cpparity_status naive_team_gather_rows(const reference_team *team, const float *mine,
                                       const int64_t *rows, int64_t width, float *whole,
                                       cpparity_error *error) {
    const int size = reference_team_size(team), rank = reference_team_rank(team);
    int64_t total = 0;
    for (int r = 0; r < size; r++) {
        total += rows[r];
    }
    const int64_t columns = width < GATHER_COLUMNS ? width : GATHER_COLUMNS;
    double *send = malloc((size_t)(rows[rank] * columns + 1) * sizeof *send);
    double *received = malloc((size_t)(total * columns + 1) * sizeof *received);
    if (send == NULL || received == NULL) {
        free(send);
        free(received);
        return out_of_memory(error, "gathered rows", total * columns);
    }
    cpparity_status status = CPPARITY_OK;
    for (int64_t c0 = 0; c0 < width && status == CPPARITY_OK; c0 += columns) {
        const int64_t count = width - c0 < columns ? width - c0 : columns;
        for (int64_t n = 0; n < rows[rank]; n++) {
            for (int64_t c = 0; c < count; c++) {
                send[n * count + c] = (double)mine[n * width + c0 + c];
            }
        }
        status = reference_team_gather_rows(team, send, rows, count, received, error);
        for (int64_t n = 0; status == CPPARITY_OK && n < total; n++) {
            for (int64_t c = 0; c < count; c++) {
                whole[n * width + c0 + c] = (float)received[n * count + c];
            }
        }
    }
    free(send);
    free(received);
    return status;
}

/* The float pipeline and chain over the team's float64 ones: a group's values are staged as
 * float64 after this rank adds onto them, and the staged sum handed on is put back as float32
 * before the next rank adds. */

/* values (count) = the sum the rank before handed on (nothing on rank 0, which starts the sum). */
static void take_handed_on(float *values, const double *staging, int64_t count, int rank) {
    for (int64_t i = 0; rank > 0 && i < count; i++) {
        values[i] = (float)staging[i];
    }
}

static void stage(double *staging, const float *values, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        staging[i] = (double)values[i];
    }
}

typedef struct staged {
    naive_team_group_values values;
    void (*add)(void *context, int64_t group);
    void *context;
    int rank;
    double *staging; /* (the widest group) */
} staged;

static double *staged_values(void *context, int64_t group, int64_t *count) {
    staged *s = context;
    (void)s->values(s->context, group, count);
    return s->staging;
}

static void staged_add(void *context, int64_t group) {
    staged *s = context;
    int64_t count = 0;
    float *values = s->values(s->context, group, &count);
    take_handed_on(values, s->staging, count, s->rank);
    s->add(s->context, group);
    stage(s->staging, values, count);
}

cpparity_status naive_team_pipeline(const reference_team *team, int64_t groups,
                                    naive_team_group_values values,
                                    void (*add)(void *context, int64_t group), void *context,
                                    cpparity_error *error) {
    if (reference_team_size(team) == 1) {
        for (int64_t g = 0; g < groups; g++) {
            add(context, g);
        }
        return CPPARITY_OK;
    }
    int64_t widest = 0;
    for (int64_t g = 0; g < groups; g++) {
        int64_t count = 0;
        (void)values(context, g, &count);
        widest = count > widest ? count : widest;
    }
    staged s = {values, add, context, reference_team_rank(team),
                malloc((size_t)(widest + 1) * sizeof(double))};
    if (s.staging == NULL) {
        return out_of_memory(error, "partial sum of a weight", widest);
    }
    const cpparity_status status =
        reference_team_pipeline(team, groups, staged_values, staged_add, &s, error);
    free(s.staging);
    return status;
}

/* The chain: reference_team_chain on a float64 copy, staged the same way. */
typedef struct staged_chain {
    float *buffer;
    int64_t count;
    void (*add)(void *context);
    void *context;
    int rank;
    double *staging; /* (count) */
} staged_chain;

static void staged_chain_add(void *context) {
    staged_chain *s = context;
    take_handed_on(s->buffer, s->staging, s->count, s->rank);
    s->add(s->context);
    stage(s->staging, s->buffer, s->count);
}

cpparity_status naive_team_chain(const reference_team *team, float *buffer, int64_t count,
                                 void (*add)(void *context), void *context, cpparity_error *error) {
    if (reference_team_size(team) == 1) {
        add(context);
        return CPPARITY_OK;
    }
    staged_chain s = {buffer,
                      count,
                      add,
                      context,
                      reference_team_rank(team),
                      malloc((size_t)(count + 1) * sizeof(double))};
    if (s.staging == NULL) {
        return out_of_memory(error, "partial sum", count);
    }
    const cpparity_status status =
        reference_team_chain(team, s.staging, count, staged_chain_add, &s, error);
    free(s.staging);
    return status;
}

cpparity_status naive_team_from_last(const reference_team *team, float *values, int64_t count,
                                     cpparity_error *error) {
    const int size = reference_team_size(team);
    if (size == 1) {
        return CPPARITY_OK;
    }
    const int64_t piece = count < BROADCAST_VALUES ? count : BROADCAST_VALUES;
    double *buffer = malloc((size_t)(piece + 1) * sizeof *buffer);
    if (buffer == NULL) {
        return out_of_memory(error, "gradients handed to the first rank", piece);
    }
    const bool last = reference_team_rank(team) == size - 1;
    cpparity_status status = CPPARITY_OK;
    for (int64_t at = 0; at < count && status == CPPARITY_OK; at += piece) {
        const int64_t n = count - at < piece ? count - at : piece;
        for (int64_t i = 0; last && i < n; i++) {
            buffer[i] = (double)values[at + i];
        }
        status = team->operations->broadcast(team->context, buffer, n, size - 1, error);
        for (int64_t i = 0; !last && status == CPPARITY_OK && i < n; i++) {
            values[at + i] = (float)buffer[i];
        }
    }
    free(buffer);
    return status;
}
