/*
 * reference_service.h — the ranks of a job sharing rank 0's float64 references
 * (docs/architecture.md, "Long context: row blocks"): `mpirun -np R cpparity judge` and
 * `mpirun -np R cpparity export` read and write on rank 0 alone, and every other rank waits here
 * to compute its row blocks of each reference rank 0 computes. Rank 0 sends the case as its
 * suite's bytes, its name and the seed (the other ranks may be on hosts that see none of rank
 * 0's files), then computes with them; the case's naive baseline and the discrimination
 * check's reruns of it are summoned the same way; at the end it sends its exit code, which every
 * rank returns.
 *
 *   rank 0                                     ranks 1 .. R − 1
 *   reference_service_init(&s, world, suite)   reference_service_init(&s, world, NULL)
 *   cache.team = &s.team;                      code = reference_service_serve(&s);
 *   cache.summon = reference_service_summon;
 *   cache.summon_context = &s;
 *   ... reference_cache_get ...
 *   reference_service_release(&s, code);
 */
#ifndef CPPARITY_HARNESS_RUNNING_REFERENCE_SERVICE_H
#define CPPARITY_HARNESS_RUNNING_REFERENCE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/case.h"
#include "common/error.h"
#include "distributed/comm/comm.h"
#include "reference/team.h"

typedef struct reference_service {
    cpparity_comm *world;   /* every rank of the job */
    reference_team team;    /* the same ranks as a reference team */
    const char *suite_text; /* rank 0: the suite the summoned cases come from */
    size_t suite_length;    /* its bytes */
    const char *suite_path; /* for messages */
} reference_service;

/* Fills s for world (rank 0 passes the suite its cases come from, the others NULL, 0, NULL). */
void reference_service_init(reference_service *s, cpparity_comm *world, const char *suite_text,
                            size_t suite_length, const char *suite_path);

/* Rank 0, as reference_cache.summon: sends case c (a case of the suite) and seed to the others. */
cpparity_status reference_service_summon(void *service, const cpparity_case *c, uint64_t seed,
                                         cpparity_error *error);

/* Rank 0: sends case c and seed to the others to compute their share of its discrimination
 * reruns (discrimination.h discrimination_share), before it calls discrimination_check with
 * &s->team. */
cpparity_status reference_service_summon_discrimination(reference_service *s,
                                                        const cpparity_case *c, uint64_t seed,
                                                        cpparity_error *error);

/* Rank 0: sends case c, seed and dtype to the others to compute their share of its naive baseline
 * (reference_cache.h reference_naive_share), before it calls reference_cache_spread_naive with
 * &s->team. */
cpparity_status reference_service_summon_baseline(reference_service *s, const cpparity_case *c,
                                                  uint64_t seed, cpparity_dtype dtype,
                                                  cpparity_error *error);

/* Rank 0: sends exit_code to the others, which return it from reference_service_serve. */
void reference_service_release(reference_service *s, int exit_code);

/* Ranks > 0: computes this rank's share of every reference rank 0 summons it to, until rank 0
 * releases it. Returns rank 0's exit code, or this rank's own failure (3; 2 for a case it
 * could not read), said on stderr. */
int reference_service_serve(reference_service *s);

/* The float64 reference's threads in each rank: `requested` (--threads) when > 0, else this
 * machine's cores shared by the ranks on it (a launcher's local ranks, from Open MPI's, MPICH's or
 * Slurm's environment; else `ranks`, the local ranks of this process, at least 1). */
int reference_threads_per_rank(int requested, bool from_launcher, int ranks);

#endif
