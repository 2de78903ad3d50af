/*
 * team.h — the ranks one float64 reference is spread over (docs/architecture.md, "Long context:
 * row blocks"), and the few exchanges the spread reference makes.
 *
 * Rank r of a team of R holds the row blocks [row_blocks_first(R, r), row_blocks_first(R, r + 1))
 * of the batch (common/row_blocks.h): consecutive tokens, O(S/R) of them. Everything a token
 * owns (its activations, their gradients, its loss term) is computed by its owner alone, with
 * the arithmetic one process would use; what crosses ranks is:
 *   - keys and values, gathered whole for one layer's attention (and in the backward the
 *     queries, outputs and output gradients, which the gradients of the keys read);
 *   - every sum over tokens (a weight's gradient): the owner of the first blocks adds its
 *     blocks, hands the partial sum to the next rank, which adds its own onto it, and so on —
 *     the sum one process makes, in the blocks' order, so the same bits for every rank count.
 *     Weights are handed on in groups (row bands, vocabulary chunks), so that rank r works on
 *     group g while rank r − 1 works on group g + 1 (reference_team_pipeline).
 * The last rank ends with every weight gradient; reference_model_backward then sends them to all.
 *
 * The transport is the caller's (the harness passes its communicator: reference/ knows no MPI):
 * three collectives every rank of the team calls in the same order. A NULL team, or one of size
 * 1, is one process holding every block; nothing is exchanged then.
 */
#ifndef CPPARITY_REFERENCE_TEAM_H
#define CPPARITY_REFERENCE_TEAM_H

#include <stdint.h>

#include "common/error.h"

typedef struct reference_team_operations {
    /* receive (size · count) = every rank's send (count values), in rank order. */
    cpparity_status (*all_gather)(void *context, const double *send, double *receive, int64_t count,
                                  cpparity_error *error);
    /* send (count) goes to rank + 1 (the last rank's to rank 0) and receive (count) gets the
     * send of rank − 1; send and receive do not overlap. */
    cpparity_status (*shift)(void *context, const double *send, double *receive, int64_t count,
                             cpparity_error *error);
    /* buffer (count) of rank root is copied to every rank. */
    cpparity_status (*broadcast)(void *context, double *buffer, int64_t count, int root,
                                 cpparity_error *error);
} reference_team_operations;

typedef struct reference_team {
    int rank; /* 0 .. size − 1 */
    int size; /* ranks sharing the reference, >= 1 */
    const reference_team_operations *operations;
    void *context; /* passed to the operations */
} reference_team;

/* Ranks of team (1 for NULL). */
int reference_team_size(const reference_team *team);

/* This rank (0 for NULL). */
int reference_team_rank(const reference_team *team);

/* whole (total rows, width) = every rank's rows in rank order, rank r giving rows[r] rows of
 * `width` values at mine (rows[] the same on every rank). O(max rows · width · size) of scratch. */
cpparity_status reference_team_gather_rows(const reference_team *team, const double *mine,
                                           const int64_t *rows, int64_t width, double *whole,
                                           cpparity_error *error);

/* A sum over the team's rows, made in rank order: rank 0 runs add(context) onto buffer (count
 * values), sends the result to rank 1, which replaces its buffer by it and runs add, and so on;
 * the last rank ends with the sum (the other ranks' buffers are partial). */
cpparity_status reference_team_chain(const reference_team *team, double *buffer, int64_t count,
                                     void (*add)(void *context), void *context,
                                     cpparity_error *error);

/* The chain of `groups` groups pipelined: group g's values are group_values(context, g, &count);
 * rank r runs add(context, g) on group g once the ranks before it have, while they go on with the
 * next groups, so that the ranks work side by side. The last rank ends with every group's sum. */
typedef double *(*reference_team_group_values)(void *context, int64_t group, int64_t *count);
cpparity_status reference_team_pipeline(const reference_team *team, int64_t groups,
                                        reference_team_group_values group_values,
                                        void (*add)(void *context, int64_t group), void *context,
                                        cpparity_error *error);

/* buffer (count) of the last rank copied to every rank. */
cpparity_status reference_team_from_last(const reference_team *team, double *buffer, int64_t count,
                                         cpparity_error *error);

#endif
