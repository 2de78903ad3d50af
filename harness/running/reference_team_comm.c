/* reference_team_comm.c — the spread reference's transport over a communicator (see
 * reference_team_comm.h). */
#include "harness/running/reference_team_comm.h"

static cpparity_status all_gather(void *context, const double *send, double *receive, int64_t count,
                                  cpparity_error *error) {
    return cpparity_all_gather(context, send, receive, count, CPPARITY_FLOAT64, NULL, error);
}

static cpparity_status shift(void *context, const double *send, double *receive, int64_t count,
                             cpparity_error *error) {
    return cpparity_shift(context, send, receive, count, CPPARITY_FLOAT64, 1, NULL, error);
}

static cpparity_status broadcast(void *context, double *buffer, int64_t count, int root,
                                 cpparity_error *error) {
    return cpparity_broadcast(context, buffer, count, CPPARITY_FLOAT64, root, NULL, error);
}

static const reference_team_operations operations = {all_gather, shift, broadcast};

reference_team reference_team_of_comm(cpparity_comm *comm) {
    const reference_team team = {comm->rank, comm->size, &operations, comm};
    return team;
}
