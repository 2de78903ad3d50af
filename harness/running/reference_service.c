/* reference_service.c — other ranks computing their share of rank 0's references (see
 * reference_service.h). */
#include "harness/running/reference_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/judging/discrimination.h"
#include "harness/judging/reference_cache.h"
#include "harness/running/reference_team_comm.h"
#include "harness/suite/case_file.h"
#include "reference/threads.h"

/* What rank 0 sends first: an order and the sizes of the bytes that follow it. */
enum { ORDER_RELEASE = 0, ORDER_COMPUTE = 1, ORDER_DISCRIMINATION = 2, ORDER_BASELINE = 3 };
enum { HEADER_ORDER, HEADER_SUITE_LENGTH, HEADER_NAME_LENGTH, HEADER_SEED, HEADER_CODE, HEADER };

void reference_service_init(reference_service *s, cpparity_comm *world, const char *suite_text,
                            size_t suite_length, const char *suite_path) {
    s->world = world;
    s->team = reference_team_of_comm(world);
    s->suite_text = suite_text;
    s->suite_length = suite_length;
    s->suite_path = suite_path;
}

/* Sends an order about case c and seed: the header (code: the baseline's dtype), the suite's
 * bytes, the case's name. */
static cpparity_status send_order(reference_service *s, int64_t order, const cpparity_case *c,
                                  uint64_t seed, int64_t code, cpparity_error *error) {
    const size_t name_length = strlen(c->name);
    int64_t header[HEADER] = {order, (int64_t)s->suite_length, (int64_t)name_length, (int64_t)seed,
                              code};
    cpparity_status status =
        cpparity_broadcast(s->world, header, HEADER, CPPARITY_INT64, 0, NULL, error);
    if (status == CPPARITY_OK && s->suite_length > 0) {
        status = cpparity_broadcast(s->world, (void *)s->suite_text, (int64_t)s->suite_length,
                                    CPPARITY_INT8, 0, NULL, error);
    }
    if (status == CPPARITY_OK) {
        status = cpparity_broadcast(s->world, (void *)c->name, (int64_t)name_length, CPPARITY_INT8,
                                    0, NULL, error);
    }
    return status;
}

cpparity_status reference_service_summon(void *service, const cpparity_case *c, uint64_t seed,
                                         cpparity_error *error) {
    return send_order(service, ORDER_COMPUTE, c, seed, 0, error);
}

cpparity_status reference_service_summon_discrimination(reference_service *s,
                                                        const cpparity_case *c, uint64_t seed,
                                                        cpparity_error *error) {
    return send_order(s, ORDER_DISCRIMINATION, c, seed, 0, error);
}

cpparity_status reference_service_summon_baseline(reference_service *s, const cpparity_case *c,
                                                  uint64_t seed, cpparity_dtype dtype,
                                                  cpparity_error *error) {
    return send_order(s, ORDER_BASELINE, c, seed, (int64_t)dtype, error);
}

void reference_service_release(reference_service *s, int exit_code) {
    int64_t header[HEADER] = {ORDER_RELEASE, 0, 0, 0, exit_code};
    cpparity_error error;
    if (cpparity_broadcast(s->world, header, HEADER, CPPARITY_INT64, 0, NULL, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "cpparity: rank 0 could not release the other ranks: %s\n", error.message);
    }
}

/* One summoned reference, its naive baseline in a dtype, or the discrimination reruns of one:
 * the case from rank 0's bytes, then this rank's share. */
static cpparity_status serve_one(reference_service *s, const int64_t *header,
                                 cpparity_error *error) {
    char *suite = malloc((size_t)header[HEADER_SUITE_LENGTH] + 1);
    char *name = malloc((size_t)header[HEADER_NAME_LENGTH] + 1);
    if (suite == NULL || name == NULL) {
        free(suite);
        free(name);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (a suite of %lld bytes)",
                                  (long long)header[HEADER_SUITE_LENGTH]);
    }
    cpparity_status status = CPPARITY_OK;
    if (header[HEADER_SUITE_LENGTH] > 0) {
        status = cpparity_broadcast(s->world, suite, header[HEADER_SUITE_LENGTH], CPPARITY_INT8, 0,
                                    NULL, error);
    }
    if (status == CPPARITY_OK) {
        status = cpparity_broadcast(s->world, name, header[HEADER_NAME_LENGTH], CPPARITY_INT8, 0,
                                    NULL, error);
    }
    suite[header[HEADER_SUITE_LENGTH]] = '\0';
    name[header[HEADER_NAME_LENGTH]] = '\0';
    cpparity_suite loaded = {0};
    if (status == CPPARITY_OK) {
        status = cpparity_suite_load_text(suite, (size_t)header[HEADER_SUITE_LENGTH],
                                          "rank 0's suite", &loaded, error);
    }
    const cpparity_case *c = status == CPPARITY_OK ? cpparity_suite_find(&loaded, name) : NULL;
    if (status == CPPARITY_OK && c == NULL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT, "rank 0's suite has no case '%s'",
                                    name);
    }
    if (status == CPPARITY_OK && header[HEADER_ORDER] == ORDER_DISCRIMINATION) {
        status = discrimination_share(c, (uint64_t)header[HEADER_SEED], &s->team, error);
    } else if (status == CPPARITY_OK && header[HEADER_ORDER] == ORDER_BASELINE) {
        if (header[HEADER_CODE] < 0 || header[HEADER_CODE] >= CPPARITY_DTYPE_COUNT) {
            status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                        "rank 0 asked for a baseline of dtype %lld",
                                        (long long)header[HEADER_CODE]);
        } else {
            status = reference_naive_share(c, (uint64_t)header[HEADER_SEED],
                                           (cpparity_dtype)header[HEADER_CODE], &s->team, error);
        }
    } else if (status == CPPARITY_OK) {
        status = reference_outputs_share(c, (uint64_t)header[HEADER_SEED], &s->team, error);
    }
    cpparity_suite_free(&loaded);
    free(suite);
    free(name);
    return status;
}

int reference_service_serve(reference_service *s) {
    for (;;) {
        int64_t header[HEADER] = {0};
        cpparity_error error;
        cpparity_status status =
            cpparity_broadcast(s->world, header, HEADER, CPPARITY_INT64, 0, NULL, &error);
        if (status == CPPARITY_OK && header[HEADER_ORDER] == ORDER_RELEASE) {
            return (int)header[HEADER_CODE];
        }
        if (status == CPPARITY_OK) {
            status = serve_one(s, header, &error);
        }
        if (status != CPPARITY_OK) {
            fprintf(stderr, "cpparity: rank %d: its share of the float64 reference: %s\n",
                    s->world->world_rank, error.message);
            return (int)status;
        }
    }
}

int reference_threads_per_rank(int requested, bool from_launcher, int ranks) {
    if (requested > 0) {
        return requested;
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long sharing = ranks > 0 ? ranks : 1;
    if (from_launcher) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        local = local != NULL ? local : getenv("MPI_LOCALNRANKS");
        local = local != NULL ? local : getenv("SLURM_NTASKS_PER_NODE");
        sharing = local != NULL && atol(local) > 0 ? atol(local) : 1;
    }
    const long threads = cores / sharing;
    return threads < 1 ? 1 : threads > REFERENCE_MAX_THREADS ? REFERENCE_MAX_THREADS : (int)threads;
}
