/*
 * comm_local.c — the `local` communicator (see comm_local.h): N ranks as threads of one process.
 *
 * All communicators of one comm_local_run (the world and everything split from it) share one
 * job: a mutex, the abort state and the list of its contexts. Each communicator group has a
 * context, the rendezvous state its ranks share, with a condition variable of its own: a
 * rendezvous that completes wakes only the ranks of its group (with one condition for the whole
 * job, every completion in one group woke the waiting ranks of every other group, only for them
 * to sleep again: 3 to 5 % of a suite's time on two cores). A collective is
 * one rendezvous: every rank checks its own arguments, deposits them (buffers, count, type, root)
 * in its slot of the context and waits; the last rank to arrive checks that every rank called the
 * same collective with matching arguments, performs the copies for all ranks (every buffer is
 * valid: its owner is waiting), advances the generation counter and wakes the others. So each rank
 * returns with its data in place, and all_reduce_sum computes every element once, in rank order,
 * for all ranks.
 *
 * Failure: a rank whose deadline (CLOCK_MONOTONIC, comm->timeout_seconds after it arrived) passes
 * before the rendezvous completes marks the context failed; the copy then never runs, so no
 * buffer of a departed rank is touched, and every pending and later call on that communicator
 * fails at once. abort marks the whole job failed, which fails every communicator of the job.
 *
 * Waiting for computation is not a hang: when the deadline passes while a rank the rendezvous
 * waits for is computing — neither waiting in a collective of the job nor finished — the
 * deadline moves on by another timeout (the float64 reference of a long case, or another
 * group's item, can take longer than any fixed deadline). It fails only when every missing rank
 * is itself waiting somewhere (a collective called out of step: a real hang) or has finished.
 */
#include "distributed/comm/comm_local.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The collectives, as recorded in a rank's slot (for names and mismatch checks). */
typedef enum local_collective {
    LOCAL_ALL_TO_ALL = 0,     /* all_to_all */
    LOCAL_ALL_REDUCE_SUM = 1, /* all_reduce_sum */
    LOCAL_ALL_GATHER = 2,     /* all_gather */
    LOCAL_BROADCAST = 3,      /* broadcast */
    LOCAL_GATHER_BYTES = 4,   /* gather_bytes */
    LOCAL_AGREE_STATUS = 5,   /* agree_status */
    LOCAL_SPLIT = 6,          /* split */
    LOCAL_SHIFT = 7,          /* shift */
} local_collective;

static const char *const local_collective_names[] = {
    "all_to_all",   "all_reduce_sum", "all_gather", "broadcast",
    "gather_bytes", "agree_status",   "split",      "shift",
};

struct local_context;

/* What all communicators of one comm_local_run share. */
typedef struct local_job {
    pthread_mutex_t mutex;          /* guards the job and every context of the job */
    bool aborted;                   /* a rank called abort: every call of the job fails */
    char abort_message[768];        /* which rank aborted, with what message */
    struct local_context *contexts; /* every live context (abort wakes them all) */
    int ranks;                      /* the job's world size */
    bool *waiting;                  /* (ranks) by world rank: in a rendezvous now */
    bool *finished;                 /* (ranks) by world rank: its body has returned */
} local_job;

/* One rank's part of the current rendezvous: its arguments, then its results. */
typedef struct local_slot {
    bool arrived;                /* waiting in the current rendezvous */
    int world_rank;              /* the rank's world rank (split passes it on) */
    local_collective collective; /* what the rank called */
    const void *send;            /* send buffer (broadcast: the buffer) */
    void *receive;               /* receive buffer (broadcast: the buffer) */
    int64_t count;               /* elements (gather_bytes: bytes) */
    cpparity_element_type type;  /* element type */
    int root;                    /* broadcast, gather_bytes; shift: the offset */
    int color;                   /* split */
    int key;                     /* split */
    cpparity_status local;       /* agree_status: this rank's status */
    int64_t *sizes;              /* gather_bytes: the root's length array */
    void *received;              /* result, gather_bytes on the root: the concatenation */
    cpparity_status agreed;      /* result, agree_status: the maximum */
    cpparity_comm *split_result; /* result, split: this rank's new communicator (or NULL) */
} local_slot;

/* The rendezvous state of one communicator group, shared by its ranks. */
typedef struct local_context {
    local_job *job;           /* mutex, abort state */
    pthread_cond_t condition; /* broadcast when a rendezvous of the group completes, the group
                                 fails or the job is aborted (CLOCK_MONOTONIC waits) */
    struct local_context *previous, *next; /* the job's list */
    int size;                              /* ranks in the group */
    int references;                        /* communicators of the group not yet freed */
    int arrived;                           /* ranks waiting in the current rendezvous */
    unsigned long generation;              /* rendezvous completed so far */
    cpparity_status outcome;               /* result of the last completed rendezvous */
    char outcome_message[768];             /* why it failed, when it did */
    bool failed;                           /* unusable: every call fails at once */
    char failure[768];                     /* why it is unusable */
    local_slot *slots;                     /* size entries, indexed by rank in the group */
    int *world_ranks;                      /* size entries: each group rank's world rank */
} local_context;

static const cpparity_comm_operations local_operations;

/* A new context of `size` ranks in job, referenced by `size` communicators, in the job's list;
 * NULL when out of memory or without a condition variable. The job mutex is held, or no rank of
 * the job runs yet. */
static local_context *local_context_create(local_job *job, int size) {
    local_context *context = calloc(1, sizeof *context);
    if (context == NULL) {
        return NULL;
    }
    context->slots = calloc((size_t)size, sizeof *context->slots);
    context->world_ranks = calloc((size_t)size, sizeof *context->world_ranks);
    pthread_condattr_t attributes;
    bool condition_made = false;
    if (context->slots != NULL && context->world_ranks != NULL &&
        pthread_condattr_init(&attributes) == 0) {
        condition_made = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC) == 0 &&
                         pthread_cond_init(&context->condition, &attributes) == 0;
        pthread_condattr_destroy(&attributes);
    }
    if (!condition_made) {
        free(context->slots);
        free(context->world_ranks);
        free(context);
        return NULL;
    }
    context->job = job;
    context->size = size;
    context->references = size;
    context->next = job->contexts;
    if (job->contexts != NULL) {
        job->contexts->previous = context;
    }
    job->contexts = context;
    return context;
}

/* Releases a context nobody references any more, out of the job's list. The job mutex is held,
 * or no rank of the job runs any more. */
static void local_context_destroy(local_context *context) {
    if (context->previous != NULL) {
        context->previous->next = context->next;
    } else {
        context->job->contexts = context->next;
    }
    if (context->next != NULL) {
        context->next->previous = context->previous;
    }
    pthread_cond_destroy(&context->condition);
    free(context->slots);
    free(context->world_ranks);
    free(context);
}

/* Wakes every rank of the job that waits (job mutex held): after an abort. */
static void local_wake_job(local_job *job) {
    for (local_context *context = job->contexts; context != NULL; context = context->next) {
        pthread_cond_broadcast(&context->condition);
    }
}

/* A new communicator for rank `rank` of context; NULL when out of memory. */
static cpparity_comm *local_comm_create(local_context *context, int rank, int world_rank,
                                        double timeout_seconds) {
    cpparity_comm *comm = calloc(1, sizeof *comm);
    if (comm == NULL) {
        return NULL;
    }
    comm->operations = &local_operations;
    comm->kind = "local";
    comm->rank = rank;
    comm->size = context->size;
    comm->world_rank = world_rank;
    comm->timeout_seconds = timeout_seconds;
    comm->implementation = context;
    return comm;
}

/* The CLOCK_MONOTONIC instant `seconds` from now (clamped to [0, 10^7] s); the contexts' condition
 * variables wait on that clock, so changes of the wall clock never move a deadline. */
static struct timespec local_deadline(double seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (!(seconds > 0.0)) {
        seconds = 0.0;
    }
    if (seconds > 1e7) {
        seconds = 1e7;
    }
    time_t whole = (time_t)seconds;
    deadline.tv_sec += whole;
    deadline.tv_nsec += (long)((seconds - (double)whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    return deadline;
}

/* What only the local communicator checks (comm.c has checked the rest): the stream must be
 * NULL, since local ranks move host memory. */
static cpparity_status local_check_stream(const cpparity_comm *comm, local_collective collective,
                                          const void *stream, cpparity_error *error) {
    if (stream != NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "local communicator: %s on rank %d: stream must be NULL (the "
                                  "local communicator runs on the CPU)",
                                  local_collective_names[collective], comm->rank);
    }
    return CPPARITY_OK;
}

/* Records in context->outcome_message that rank `rank` disagrees with rank 0, and marks the
 * context failed (the ranks no longer run the same program). */
static void local_mismatch(local_context *context, int rank, const char *what) {
    const local_slot *first = &context->slots[0], *other = &context->slots[rank];
    snprintf(context->outcome_message, sizeof context->outcome_message,
             "mismatched collectives: rank 0 called %s (count %lld, type %d, root %d), rank %d "
             "called %s (count %lld, type %d, root %d): different %s",
             local_collective_names[first->collective], (long long)first->count, (int)first->type,
             first->root, rank, local_collective_names[other->collective], (long long)other->count,
             (int)other->type, other->root, what);
    context->outcome = CPPARITY_ERROR_RUNTIME;
    context->failed = true;
    snprintf(context->failure, sizeof context->failure, "%s", "a mismatched collective");
}

/* Checks that every rank called rank 0's collective with the same count, type and root where
 * these must agree; false (and the context failed) when not. */
static bool local_arguments_agree(local_context *context) {
    const local_slot *first = &context->slots[0];
    for (int rank = 1; rank < context->size; rank++) {
        const local_slot *other = &context->slots[rank];
        if (other->collective != first->collective) {
            local_mismatch(context, rank, "collectives");
            return false;
        }
        bool sized = first->collective == LOCAL_ALL_TO_ALL ||
                     first->collective == LOCAL_ALL_REDUCE_SUM ||
                     first->collective == LOCAL_ALL_GATHER ||
                     first->collective == LOCAL_BROADCAST || first->collective == LOCAL_SHIFT;
        if (sized && (other->count != first->count || other->type != first->type)) {
            local_mismatch(context, rank, "counts or types");
            return false;
        }
        bool rooted = first->collective == LOCAL_BROADCAST ||
                      first->collective == LOCAL_GATHER_BYTES || first->collective == LOCAL_SHIFT;
        if (rooted && other->root != first->root) {
            local_mismatch(context, rank,
                           first->collective == LOCAL_SHIFT ? "shift offsets" : "roots");
            return false;
        }
    }
    return true;
}

/* all_reduce_sum: element i of every receive = ((send_0[i] + send_1[i]) + send_2[i]) + ...,
 * computed once; all of element i is read before it is written, so send == receive is safe.
 * Integers wrap (summed as unsigned). */
static void local_sum(local_context *context) {
    local_slot *slots = context->slots;
    int size = context->size;
    int64_t count = slots[0].count;
    for (int64_t i = 0; i < count; i++) {
        switch (slots[0].type) {
        case CPPARITY_FLOAT32: {
            float sum = ((const float *)slots[0].send)[i];
            for (int rank = 1; rank < size; rank++) {
                sum += ((const float *)slots[rank].send)[i];
            }
            for (int rank = 0; rank < size; rank++) {
                ((float *)slots[rank].receive)[i] = sum;
            }
            break;
        }
        case CPPARITY_FLOAT64: {
            double sum = ((const double *)slots[0].send)[i];
            for (int rank = 1; rank < size; rank++) {
                sum += ((const double *)slots[rank].send)[i];
            }
            for (int rank = 0; rank < size; rank++) {
                ((double *)slots[rank].receive)[i] = sum;
            }
            break;
        }
        case CPPARITY_INT64: {
            uint64_t sum = (uint64_t)((const int64_t *)slots[0].send)[i];
            for (int rank = 1; rank < size; rank++) {
                sum += (uint64_t)((const int64_t *)slots[rank].send)[i];
            }
            for (int rank = 0; rank < size; rank++) {
                ((int64_t *)slots[rank].receive)[i] = (int64_t)sum;
            }
            break;
        }
        case CPPARITY_INT8: {
            uint8_t sum = (uint8_t)((const int8_t *)slots[0].send)[i];
            for (int rank = 1; rank < size; rank++) {
                sum = (uint8_t)(sum + (uint8_t)((const int8_t *)slots[rank].send)[i]);
            }
            for (int rank = 0; rank < size; rank++) {
                ((int8_t *)slots[rank].receive)[i] = (int8_t)sum;
            }
            break;
        }
        case CPPARITY_BFLOAT16: /* refused before the rendezvous */
            return;
        }
    }
}

/* gather_bytes: the root's slot receives a malloc'd concatenation in rank order and the root's
 * sizes array the lengths; outcome RUNTIME when out of memory. */
static void local_gather(local_context *context) {
    local_slot *slots = context->slots;
    local_slot *root = &slots[slots[0].root];
    int64_t total = 0;
    for (int rank = 0; rank < context->size; rank++) {
        total += slots[rank].count;
    }
    char *gathered = malloc(total > 0 ? (size_t)total : 1);
    if (gathered == NULL) {
        context->outcome = CPPARITY_ERROR_RUNTIME;
        snprintf(context->outcome_message, sizeof context->outcome_message,
                 "out of memory for %lld gathered bytes", (long long)total);
        return;
    }
    int64_t offset = 0;
    for (int rank = 0; rank < context->size; rank++) {
        if (slots[rank].count > 0) {
            memcpy(gathered + offset, slots[rank].send, (size_t)slots[rank].count);
        }
        root->sizes[rank] = slots[rank].count;
        offset += slots[rank].count;
    }
    root->received = gathered;
}

/* Releases the communicators split has made so far (after a failed allocation). */
static void local_split_undo(local_context *context) {
    for (int rank = 0; rank < context->size; rank++) {
        cpparity_comm *made = context->slots[rank].split_result;
        if (made != NULL) {
            local_context *group = made->implementation;
            free(made);
            if (--group->references == 0) {
                local_context_destroy(group);
            }
            context->slots[rank].split_result = NULL;
        }
    }
}

/* split: one new context per color (negative colors get none); a rank's new rank is the number
 * of ranks of its color before it in (key, parent rank) order. Outcome RUNTIME (nothing made)
 * when out of memory. */
static void local_split(local_context *context, double timeout_seconds) {
    local_slot *slots = context->slots;
    int size = context->size;
    for (int leader = 0; leader < size; leader++) {
        if (slots[leader].color < 0 || slots[leader].split_result != NULL) {
            continue;
        }
        int members = 0;
        for (int rank = 0; rank < size; rank++) {
            members += slots[rank].color == slots[leader].color;
        }
        local_context *group = local_context_create(context->job, members);
        if (group == NULL) {
            goto out_of_memory;
        }
        group->references = 0;
        for (int rank = leader; rank < size; rank++) {
            if (slots[rank].color != slots[leader].color) {
                continue;
            }
            int new_rank = 0;
            for (int other = 0; other < size; other++) {
                new_rank += slots[other].color == slots[rank].color &&
                            (slots[other].key < slots[rank].key ||
                             (slots[other].key == slots[rank].key && other < rank));
            }
            cpparity_comm *made =
                local_comm_create(group, new_rank, slots[rank].world_rank, timeout_seconds);
            if (made == NULL) {
                if (group->references == 0) {
                    local_context_destroy(group);
                }
                goto out_of_memory;
            }
            group->references++;
            group->world_ranks[new_rank] = slots[rank].world_rank;
            slots[rank].split_result = made;
        }
    }
    return;
out_of_memory:
    local_split_undo(context);
    context->outcome = CPPARITY_ERROR_RUNTIME;
    snprintf(context->outcome_message, sizeof context->outcome_message,
             "out of memory for the new communicators");
}

/* The work of a rendezvous every rank has joined, done by the last to arrive (job mutex held):
 * checks the arguments agree, then moves the data of every rank. */
static void local_complete(local_context *context, double timeout_seconds) {
    local_slot *slots = context->slots;
    int size = context->size;
    context->outcome = CPPARITY_OK;
    context->outcome_message[0] = '\0';
    if (!local_arguments_agree(context)) {
        return;
    }
    int64_t block = slots[0].count * cpparity_element_size(slots[0].type);
    switch (slots[0].collective) {
    case LOCAL_ALL_TO_ALL:
        for (int destination = 0; destination < size && block > 0; destination++) {
            for (int source = 0; source < size; source++) {
                memcpy((char *)slots[destination].receive + source * block,
                       (const char *)slots[source].send + destination * block, (size_t)block);
            }
        }
        break;
    case LOCAL_ALL_REDUCE_SUM:
        local_sum(context);
        break;
    case LOCAL_ALL_GATHER:
        for (int destination = 0; destination < size && block > 0; destination++) {
            for (int source = 0; source < size; source++) {
                memcpy((char *)slots[destination].receive + source * block, slots[source].send,
                       (size_t)block);
            }
        }
        break;
    case LOCAL_BROADCAST:
        for (int rank = 0; rank < size && block > 0; rank++) {
            if (rank != slots[0].root) {
                memcpy(slots[rank].receive, slots[slots[0].root].send, (size_t)block);
            }
        }
        break;
    case LOCAL_GATHER_BYTES:
        local_gather(context);
        break;
    case LOCAL_SHIFT: /* rank r's send to rank r + offset */
        for (int source = 0; source < size && block > 0; source++) {
            memcpy(slots[(source + slots[0].root) % size].receive, slots[source].send,
                   (size_t)block);
        }
        break;
    case LOCAL_AGREE_STATUS: {
        cpparity_status agreed = CPPARITY_OK;
        for (int rank = 0; rank < size; rank++) {
            agreed = slots[rank].local > agreed ? slots[rank].local : agreed;
        }
        for (int rank = 0; rank < size; rank++) {
            slots[rank].agreed = agreed;
        }
        break;
    }
    case LOCAL_SPLIT:
        local_split(context, timeout_seconds);
        break;
    }
}

/* Writes into `list` the ranks of context not waiting in the current rendezvous, as "1, 3". */
static void local_missing_ranks(const local_context *context, char *list, size_t capacity) {
    size_t used = 0;
    list[0] = '\0';
    for (int rank = 0; rank < context->size && used < capacity; rank++) {
        if (!context->slots[rank].arrived) {
            int written =
                snprintf(list + used, capacity - used, "%s%d", used > 0 ? ", " : "", rank);
            used += written > 0 ? (size_t)written : 0;
        }
    }
}

/* Records, for a rank whose call cannot complete, why (job mutex held). */
static cpparity_status local_failure(const cpparity_comm *comm, const local_context *context,
                                     const char *name, cpparity_error *error) {
    if (context->job->aborted) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "local communicator: %s failed on rank %d: %s", name, comm->rank,
                                  context->job->abort_message);
    }
    return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                              "local communicator: %s failed on rank %d: the communicator is "
                              "unusable after %s",
                              name, comm->rank, context->failure);
}

/* Whether a rank the current rendezvous of context waits for is computing: neither waiting in a
 * rendezvous of the job nor finished (job mutex held). */
static bool local_someone_computes(const local_context *context) {
    const local_job *job = context->job;
    for (int rank = 0; rank < context->size; rank++) {
        const int world = context->world_ranks[rank];
        if (!context->slots[rank].arrived && !job->waiting[world] && !job->finished[world]) {
            return true;
        }
    }
    return false;
}

/* One collective: deposits this rank's arguments (*slot), waits until every rank of comm has
 * arrived and the last one has done the work, and returns the outcome, with the rank's results
 * copied back into *slot. Fails at once when the job or the communicator has failed, and with a
 * timeout (failing the communicator) when the others do not arrive within
 * comm->timeout_seconds. */
static cpparity_status local_rendezvous(cpparity_comm *comm, local_slot *slot,
                                        cpparity_error *error) {
    local_context *context = comm->implementation;
    local_job *job = context->job;
    const char *name = local_collective_names[slot->collective];
    struct timespec deadline = local_deadline(comm->timeout_seconds);
    cpparity_status status = CPPARITY_OK;

    pthread_mutex_lock(&job->mutex);
    if (job->aborted || context->failed) {
        status = local_failure(comm, context, name, error);
        pthread_mutex_unlock(&job->mutex);
        return status;
    }
    unsigned long generation = context->generation;
    context->slots[comm->rank] = *slot;
    context->slots[comm->rank].arrived = true;
    context->slots[comm->rank].world_rank = comm->world_rank;
    context->arrived++;
    if (context->arrived == context->size) {
        local_complete(context, comm->timeout_seconds);
        for (int rank = 0; rank < context->size; rank++) {
            context->slots[rank].arrived = false;
        }
        context->arrived = 0;
        context->generation++;
        pthread_cond_broadcast(&context->condition);
    }
    job->waiting[comm->world_rank] = true;
    while (context->generation == generation && !job->aborted && !context->failed) {
        int waited = pthread_cond_timedwait(&context->condition, &job->mutex, &deadline);
        if (waited != 0 && context->generation == generation && !job->aborted && !context->failed &&
            local_someone_computes(context)) {
            deadline = local_deadline(comm->timeout_seconds); /* computing is not a hang */
            continue;
        }
        if (waited != 0 && context->generation == generation && !job->aborted && !context->failed) {
            job->waiting[comm->world_rank] = false;
            char missing[256];
            local_missing_ranks(context, missing, sizeof missing);
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "local communicator: %s timed out after %g s on rank %d "
                                        "(waiting for ranks %s)",
                                        name, comm->timeout_seconds, comm->rank, missing);
            context->failed = true;
            snprintf(context->failure, sizeof context->failure,
                     "a timeout: %s on rank %d timed out after %g s waiting for ranks %s", name,
                     comm->rank, comm->timeout_seconds, missing);
            pthread_cond_broadcast(&context->condition);
            pthread_mutex_unlock(&job->mutex);
            return status;
        }
    }
    job->waiting[comm->world_rank] = false;
    if (context->generation == generation) {
        status = local_failure(comm, context, name, error);
    } else if (context->outcome != CPPARITY_OK) {
        status = cpparity_error_set(error, context->outcome,
                                    "local communicator: %s failed on rank %d: %s", name,
                                    comm->rank, context->outcome_message);
    } else {
        /* Results are read here, under the mutex; the next rendezvous cannot complete (and
         * overwrite them) before this rank has joined it. */
        *slot = context->slots[comm->rank];
    }
    pthread_mutex_unlock(&job->mutex);
    return status;
}

/* all_to_all (see comm.h). */
static cpparity_status local_all_to_all(cpparity_comm *comm, const void *send, void *receive,
                                        int64_t count_per_rank, cpparity_element_type type,
                                        void *stream, cpparity_error *error) {
    cpparity_status status = local_check_stream(comm, LOCAL_ALL_TO_ALL, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    local_slot deposit = {.collective = LOCAL_ALL_TO_ALL,
                          .send = send,
                          .receive = receive,
                          .count = count_per_rank,
                          .type = type};
    return local_rendezvous(comm, &deposit, error);
}

/* shift (see comm.h). */
static cpparity_status local_shift(cpparity_comm *comm, const void *send, void *receive,
                                   int64_t count, cpparity_element_type type, int offset,
                                   void *stream, cpparity_error *error) {
    cpparity_status status = local_check_stream(comm, LOCAL_SHIFT, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    local_slot deposit = {.collective = LOCAL_SHIFT,
                          .send = send,
                          .receive = receive,
                          .count = count,
                          .type = type,
                          .root = offset};
    return local_rendezvous(comm, &deposit, error);
}

/* all_reduce_sum (see comm.h); bfloat16 is refused. */
static cpparity_status local_all_reduce_sum(cpparity_comm *comm, const void *send, void *receive,
                                            int64_t count, cpparity_element_type type, void *stream,
                                            cpparity_error *error) {
    cpparity_status status = local_check_stream(comm, LOCAL_ALL_REDUCE_SUM, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    if (type == CPPARITY_BFLOAT16) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "local communicator: all_reduce_sum on rank %d: bfloat16 sums "
                                  "are not supported on the CPU",
                                  comm->rank);
    }
    local_slot deposit = {.collective = LOCAL_ALL_REDUCE_SUM,
                          .send = send,
                          .receive = receive,
                          .count = count,
                          .type = type};
    return local_rendezvous(comm, &deposit, error);
}

/* all_gather (see comm.h). */
static cpparity_status local_all_gather(cpparity_comm *comm, const void *send, void *receive,
                                        int64_t count_per_rank, cpparity_element_type type,
                                        void *stream, cpparity_error *error) {
    cpparity_status status = local_check_stream(comm, LOCAL_ALL_GATHER, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    local_slot deposit = {.collective = LOCAL_ALL_GATHER,
                          .send = send,
                          .receive = receive,
                          .count = count_per_rank,
                          .type = type};
    return local_rendezvous(comm, &deposit, error);
}

/* broadcast (see comm.h). */
static cpparity_status local_broadcast(cpparity_comm *comm, void *buffer, int64_t count,
                                       cpparity_element_type type, int root, void *stream,
                                       cpparity_error *error) {
    cpparity_status status = local_check_stream(comm, LOCAL_BROADCAST, stream, error);
    if (status != CPPARITY_OK) {
        return status;
    }
    local_slot deposit = {.collective = LOCAL_BROADCAST,
                          .send = buffer,
                          .receive = buffer,
                          .count = count,
                          .type = type,
                          .root = root};
    return local_rendezvous(comm, &deposit, error);
}

/* gather_bytes (see comm.h). */
static cpparity_status local_gather_bytes(cpparity_comm *comm, const void *send, int64_t send_bytes,
                                          void **received, int64_t *sizes, int root,
                                          cpparity_error *error) {
    local_slot deposit = {.collective = LOCAL_GATHER_BYTES,
                          .send = send,
                          .count = send_bytes,
                          .type = CPPARITY_INT8,
                          .root = root,
                          .sizes = sizes};
    cpparity_status status = local_rendezvous(comm, &deposit, error);
    if (status == CPPARITY_OK && comm->rank == root) {
        *received = deposit.received;
    }
    return status;
}

/* agree_status (see comm.h). */
static cpparity_status local_agree_status(cpparity_comm *comm, cpparity_status local,
                                          cpparity_status *agreed, cpparity_error *error) {
    local_slot deposit = {.collective = LOCAL_AGREE_STATUS, .local = local};
    cpparity_status status = local_rendezvous(comm, &deposit, error);
    if (status == CPPARITY_OK) {
        *agreed = deposit.agreed;
    }
    return status;
}

/* split (see comm.h); a negative color gives *result = NULL (no new communicator). */
static cpparity_status local_split_call(cpparity_comm *comm, int color, int key,
                                        cpparity_comm **result, cpparity_error *error) {
    local_slot deposit = {.collective = LOCAL_SPLIT, .color = color, .key = key};
    cpparity_status status = local_rendezvous(comm, &deposit, error);
    if (status == CPPARITY_OK && deposit.split_result != NULL) {
        deposit.split_result->world_rank = comm->world_rank;
        *result = deposit.split_result;
    }
    return status;
}

/* abort (see comm.h): the first abort of the job prints "cpparity: rank R: message"; every
 * pending and later call of every communicator of the job then fails. */
static void local_abort(cpparity_comm *comm, int code, const char *message) {
    local_context *context = comm->implementation;
    local_job *job = context->job;
    if (message == NULL) {
        message = "(no message)";
    }
    pthread_mutex_lock(&job->mutex);
    if (!job->aborted) {
        job->aborted = true;
        snprintf(job->abort_message, sizeof job->abort_message, "rank %d aborted (code %d): %s",
                 comm->world_rank, code, message);
        fprintf(stderr, "cpparity: rank %d: %s\n", comm->world_rank, message);
        fflush(stderr);
    }
    local_wake_job(job);
    pthread_mutex_unlock(&job->mutex);
}

/* free (see comm.h): the last communicator of a group releases its context. */
static void local_free(cpparity_comm *comm) {
    local_context *context = comm->implementation;
    local_job *job = context->job;
    pthread_mutex_lock(&job->mutex);
    if (--context->references == 0) {
        local_context_destroy(context); /* out of the job's list, under the mutex */
    }
    pthread_mutex_unlock(&job->mutex);
    free(comm);
}

static const cpparity_comm_operations local_operations = {
    .all_to_all = local_all_to_all,
    .all_reduce_sum = local_all_reduce_sum,
    .all_gather = local_all_gather,
    .broadcast = local_broadcast,
    .gather_bytes = local_gather_bytes,
    .agree_status = local_agree_status,
    .split = local_split_call,
    .shift = local_shift,
    .abort = local_abort,
    .free = local_free,
};

/* What one rank's thread runs and returns. */
typedef struct local_thread {
    pthread_t thread;       /* the thread, once started */
    bool started;           /* pthread_create succeeded */
    cpparity_comm *comm;    /* this rank's world communicator */
    comm_local_body body;   /* the work */
    void *argument;         /* passed to body */
    cpparity_status status; /* body's result */
    cpparity_error error;   /* body's error */
} local_thread;

/* Thread entry: runs body for one rank, then says the rank has finished (a rank waiting for it
 * no longer waits for a computation). */
static void *local_thread_main(void *argument) {
    local_thread *thread = argument;
    cpparity_error_clear(&thread->error);
    thread->status = thread->body(thread->comm, thread->argument, &thread->error);
    local_context *context = thread->comm->implementation;
    pthread_mutex_lock(&context->job->mutex);
    context->job->finished[thread->comm->world_rank] = true;
    pthread_mutex_unlock(&context->job->mutex);
    return NULL;
}

/* Marks job aborted without printing (the caller reports why), waking every rank. */
static void local_job_stop(local_job *job, const char *why) {
    pthread_mutex_lock(&job->mutex);
    job->aborted = true;
    snprintf(job->abort_message, sizeof job->abort_message, "%s", why);
    local_wake_job(job);
    pthread_mutex_unlock(&job->mutex);
}

cpparity_status comm_local_run(int ranks, double timeout_seconds, comm_local_body body,
                               void *argument, cpparity_status *statuses, cpparity_error *errors,
                               cpparity_error *error) {
    if (ranks < 1 || !(timeout_seconds > 0.0) || body == NULL || statuses == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "comm_local_run: need ranks >= 1 (got %d), a positive timeout "
                                  "(got %g s), a body and a statuses array",
                                  ranks, timeout_seconds);
    }
    cpparity_status status = CPPARITY_OK;
    local_job job = {.aborted = false, .contexts = NULL, .ranks = ranks};
    local_context *context = NULL;
    local_thread *threads = calloc((size_t)ranks, sizeof *threads);
    job.waiting = calloc((size_t)ranks, sizeof *job.waiting);
    job.finished = calloc((size_t)ranks, sizeof *job.finished);
    bool mutex_made = false;
    if (threads == NULL || job.waiting == NULL || job.finished == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "comm_local_run: out of memory for %d ranks", ranks);
        goto done;
    }
    mutex_made = pthread_mutex_init(&job.mutex, NULL) == 0;
    context = mutex_made ? local_context_create(&job, ranks) : NULL;
    if (context == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "comm_local_run: could not create the shared context for %d "
                                    "ranks",
                                    ranks);
        goto done;
    }
    for (int rank = 0; rank < ranks; rank++) {
        context->world_ranks[rank] = rank;
        threads[rank].comm = local_comm_create(context, rank, rank, timeout_seconds);
        threads[rank].body = body;
        threads[rank].argument = argument;
        threads[rank].status = CPPARITY_ERROR_RUNTIME;
        cpparity_error_set(&threads[rank].error, CPPARITY_ERROR_RUNTIME,
                           "comm_local_run: rank %d did not run", rank);
        if (threads[rank].comm == NULL) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "comm_local_run: out of memory for rank %d", rank);
            goto done;
        }
    }
    for (int rank = 0; rank < ranks; rank++) {
        int created =
            pthread_create(&threads[rank].thread, NULL, local_thread_main, &threads[rank]);
        if (created != 0) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "comm_local_run: could not start the thread of rank %d: "
                                        "%s",
                                        rank, strerror(created));
            local_job_stop(&job, "comm_local_run could not start every rank");
            break;
        }
        threads[rank].started = true;
    }
    for (int rank = 0; rank < ranks; rank++) {
        if (threads[rank].started) {
            pthread_join(threads[rank].thread, NULL);
        }
    }
done:
    for (int rank = 0; threads != NULL && rank < ranks; rank++) {
        statuses[rank] = threads[rank].status;
        if (errors != NULL) {
            errors[rank] = threads[rank].error;
        }
    }
    /* Every world communicator holds one reference; the last release destroys the context. */
    for (int rank = 0; context != NULL && rank < ranks; rank++) {
        if (threads[rank].comm != NULL) {
            local_free(threads[rank].comm);
        } else if (--context->references == 0) {
            local_context_destroy(context);
        }
    }
    if (mutex_made) {
        pthread_mutex_destroy(&job.mutex);
    }
    free(threads);
    free(job.waiting);
    free(job.finished);
    return status;
}

/* What comm_local_launch's ranks run: main, with its exit code kept per rank. */
typedef struct local_launch {
    cpparity_job_main main; /* the job */
    void *argument;         /* passed to main */
    int *codes;             /* (ranks) exit code of each rank */
} local_launch;

/* comm_local_body of a launched job. */
static cpparity_status local_launch_body(cpparity_comm *comm, void *argument,
                                         cpparity_error *error) {
    (void)error;
    local_launch *launch = argument;
    launch->codes[comm->rank] = launch->main(comm, launch->argument);
    return CPPARITY_OK;
}

cpparity_status comm_local_launch(int ranks, double timeout_seconds, cpparity_job_main main,
                                  void *argument, int *exit_code, cpparity_error *error) {
    *exit_code = 3;
    if (ranks < 1 || main == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "comm_local_launch: need ranks >= 1 (got %d) and a job", ranks);
    }
    int *codes = calloc((size_t)ranks, sizeof *codes);
    cpparity_status *statuses = calloc((size_t)ranks, sizeof *statuses);
    if (codes == NULL || statuses == NULL) {
        free(codes);
        free(statuses);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "comm_local_launch: out of memory for %d ranks", ranks);
    }
    for (int rank = 0; rank < ranks; rank++) {
        codes[rank] = 3; /* a rank that never ran */
    }
    local_launch launch = {main, argument, codes};
    cpparity_status status =
        comm_local_run(ranks, timeout_seconds, local_launch_body, &launch, statuses, NULL, error);
    if (status == CPPARITY_OK) {
        *exit_code = 0;
        for (int rank = 0; rank < ranks; rank++) {
            *exit_code = codes[rank] > *exit_code ? codes[rank] : *exit_code;
        }
    }
    free(codes);
    free(statuses);
    return status;
}
