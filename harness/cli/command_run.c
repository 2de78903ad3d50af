/*
 * command_run.c — `cpparity run` and `cpparity selftest` (which share options, targets, plans
 * and the job's start): the options, what is under test (the implementation for
 * --device, the kernel for --kernel), the plan, and run_job on every rank of a job started by
 * the communicator backend (comm_launch.h: threads for local, the MPI job for mpi). The exit
 * code is identical on every rank.
 */
#include <cblas.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/output_file.h"
#include "distributed/comm/comm_launch.h"
#include "distributed/models/implementation_registry.h"
#include "distributed/kernels/kernel_plugin.h"
#include "distributed/kernels/kernel_registry.h"
#include "harness/cli/commands.h"
#include "harness/cli/run_arguments.h"
#include "harness/running/attention_item.h"
#include "harness/running/memory_estimate.h"
#include "harness/running/run.h"
#include "harness/running/reference_service.h"
#include "harness/running/run_plan.h"
#include "harness/running/selftest.h"
#include "harness/suite/case_file.h"
#include "harness/version.h"
#include "reference/threads.h"

/* The compiler that built this file (and so cpparity), for provenance. */
#if defined(__clang__)
#define BUILT_WITH "clang " __clang_version__
#elif defined(__GNUC__)
#define BUILT_WITH "gcc " __VERSION__
#else
#define BUILT_WITH "an unknown C compiler"
#endif

/* Everything a rank of the job needs, shared read-only by local ranks. */
typedef struct run_command {
    run_command_kind kind;       /* run or selftest */
    const char *name;            /* "run" or "selftest", for messages */
    run_plan *plan;              /* built before the job started (local ranks), or by each
                                    rank from rank 0's bytes of the suites (plan_deferred:
                                    ranks started by a launcher, maybe on other hosts) */
    cpparity_status plan_status; /* how building it went */
    cpparity_error plan_error;   /* why it failed */
    bool plan_deferred;          /* the plan is built inside the job (plan_from_rank_0) */
    bool plan_built;             /* *plan holds a plan to free */
    const cpparity_implementation *implementation; /* for the memory check */
    const cpparity_attention_kernel *kernel;       /* for the memory check */
    const run_options *options;                    /* parsed flags */
    const run_target *target;                      /* implementation and kernel */
    const run_environment *environment;            /* provenance and the results path */
} run_command;

/* "HDF5 1.10.8; OpenBLAS ...; Open MPI ..." */
static void library_versions(char *text, size_t size, const cpparity_comm_backend *backend) {
    unsigned major = 0, minor = 0, release = 0;
    if (H5get_libversion(&major, &minor, &release) < 0) {
        major = minor = release = 0; /* reported as HDF5 0.0.0: unknown */
    }
    int used = snprintf(text, size, "HDF5 %u.%u.%u; OpenBLAS %s", major, minor, release,
                        openblas_get_config());
    char communicator[256];
    backend->library_version(communicator, sizeof communicator);
    if (communicator[0] != '\0' && used > 0 && (size_t)used < size) {
        snprintf(text + used, size - (size_t)used, "; %s", communicator);
    }
}

/* Every rank agrees on local (the worst status wins); a rank that failed prints why, unless
 * rank 0 failed too (then rank 0 alone speaks). Returns the agreed status (3 when the
 * communicator itself failed). */
static cpparity_status agree_and_report(cpparity_comm *world, const char *name,
                                        cpparity_status local, const cpparity_error *local_error) {
    cpparity_error error;
    int64_t first = local;
    cpparity_status agreed = CPPARITY_OK;
    if (cpparity_broadcast(world, &first, 1, CPPARITY_INT64, 0, NULL, &error) != CPPARITY_OK ||
        cpparity_agree_status(world, local, &agreed, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity %s: rank %d: %s\n", name, world->world_rank, error.message);
        return CPPARITY_ERROR_RUNTIME;
    }
    if (local != CPPARITY_OK && (world->rank == 0 || first == CPPARITY_OK)) {
        if (world->rank == 0) {
            fprintf(stderr, "cpparity %s: %s\n", name, local_error->message);
        } else {
            fprintf(stderr, "cpparity %s: rank %d: %s\n", name, world->world_rank,
                    local_error->message);
        }
    }
    return agreed;
}

/* Rank 0's memory decisions (memory_check_plan: the cp = 1 items left out, with their reasons;
 * the attention-level items run by query blocks, and their block) on every rank: processes on other
 * nodes see other free memory, and the ranks must run the same items. Nothing to do for local
 * ranks, which share rank 0's plan. */
static cpparity_status share_memory_decisions(cpparity_comm *world, run_plan *plan,
                                              cpparity_error *error) {
    if (strcmp(world->kind, "local") == 0 || plan->item_count == 0) {
        return CPPARITY_OK;
    }
    const int64_t record = 1 + (int64_t)sizeof(int64_t) + RUN_PLAN_REASON_TEXT;
    int8_t *decisions = calloc((size_t)(plan->item_count * record), 1);
    if (decisions == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
    }
    for (int64_t i = 0; world->rank == 0 && i < plan->item_count; i++) {
        decisions[i * record] = plan->items[i].memory_skipped ? 1 : 0;
        memcpy(decisions + i * record + 1, &plan->items[i].query_block, sizeof(int64_t));
        memcpy(decisions + i * record + 1 + sizeof(int64_t), plan->items[i].not_run_reason,
               RUN_PLAN_REASON_TEXT);
    }
    cpparity_status status = cpparity_broadcast(world, decisions, plan->item_count * record,
                                                CPPARITY_INT8, 0, NULL, error);
    for (int64_t i = 0; status == CPPARITY_OK && world->rank != 0 && i < plan->item_count; i++) {
        run_plan_item *item = &plan->items[i];
        item->memory_skipped = decisions[i * record] != 0;
        memcpy(&item->query_block, decisions + i * record + 1, sizeof(int64_t));
        if (item->memory_skipped) {
            item->runnable = false;
            memcpy(item->not_run_reason, decisions + i * record + 1 + sizeof(int64_t),
                   RUN_PLAN_REASON_TEXT);
            item->not_run_reason[RUN_PLAN_REASON_TEXT - 1] = '\0';
        }
    }
    free(decisions);
    return status;
}

/* The plan on every rank of a launcher's job, whose ranks may run on hosts that do not see the
 * suite files (no shared file system): rank 0 reads them and sends their bytes, every rank builds
 * the same plan from the bytes, and rank 0 checks the memory (its decisions are shared after).
 * The outcome is in command->plan_status and plan_error, on rank 0 (the others build what rank 0
 * sent, or say rank 0 could not read). */
static void plan_from_rank_0(cpparity_comm *world, run_command *command) {
    const run_options *options = command->options;
    const char *const *paths = NULL;
    int count = 0;
    run_plan_suite_paths(options, &paths, &count);
    int64_t *lengths = calloc((size_t)count + 1, sizeof *lengths);
    run_suite_text *texts = calloc((size_t)count + 1, sizeof *texts);
    char **bytes = calloc((size_t)count + 1, sizeof *bytes);
    cpparity_error *error = &command->plan_error;
    int64_t read =
        lengths != NULL && texts != NULL && bytes != NULL ? CPPARITY_OK : CPPARITY_ERROR_RUNTIME;
    if (read != CPPARITY_OK) {
        cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (the suites)");
    }
    for (int s = 0; world->rank == 0 && read == CPPARITY_OK && s < count; s++) {
        size_t length = 0;
        read = cpparity_suite_read(paths[s], &bytes[s], &length, error);
        lengths[s] = (int64_t)length;
    }
    cpparity_error comm_error;
    cpparity_status status =
        cpparity_broadcast(world, &read, 1, CPPARITY_INT64, 0, NULL, &comm_error);
    if (status == CPPARITY_OK && read == CPPARITY_OK && count > 0) {
        status = cpparity_broadcast(world, lengths, count, CPPARITY_INT64, 0, NULL, &comm_error);
    }
    for (int s = 0; status == CPPARITY_OK && read == CPPARITY_OK && s < count; s++) {
        if (world->rank != 0 && (bytes[s] = malloc((size_t)lengths[s] + 1)) == NULL) {
            status =
                cpparity_error_set(&comm_error, CPPARITY_ERROR_RUNTIME,
                                   "out of memory (a suite of %lld bytes)", (long long)lengths[s]);
            break;
        }
        status =
            cpparity_broadcast(world, bytes[s], lengths[s], CPPARITY_INT8, 0, NULL, &comm_error);
        texts[s] = (run_suite_text){paths[s], bytes[s], (size_t)lengths[s]};
    }
    if (status != CPPARITY_OK) {
        *error = comm_error;
        command->plan_status = status;
    } else if (read != CPPARITY_OK) {
        command->plan_status = (cpparity_status)read;
        if (world->rank != 0) {
            cpparity_error_set(error, (cpparity_status)read, "rank 0 could not read the suites");
        }
    } else {
        command->plan_status = run_plan_build_texts(command->plan, options, texts, count, error);
        command->plan_built = command->plan_status == CPPARITY_OK;
        if (command->plan_status == CPPARITY_OK && world->rank == 0) {
            command->plan_status = memory_check_plan(
                command->plan, options, command->implementation, command->kernel, error);
        }
    }
    for (int s = 0; bytes != NULL && s < count; s++) {
        free(bytes[s]);
    }
    free(bytes);
    free(texts);
    free(lengths);
}

/* What every rank of the job runs: agree on the plan and the outputs, then run. */
static int run_main(cpparity_comm *world, void *argument) {
    run_command *command = argument;
    if (world->world_rank != 0 && strcmp(world->kind, "local") != 0) {
        char prefix[64]; /* one process per rank: its messages say which */
        snprintf(prefix, sizeof prefix, "cpparity %s: rank %d", command->name, world->world_rank);
        interrupt_set_prefix(prefix);
    }
    if (command->plan_deferred) {
        plan_from_rank_0(world, command);
    }
    cpparity_status status =
        agree_and_report(world, command->name, command->plan_status, &command->plan_error);
    if (status != CPPARITY_OK) {
        return (int)status;
    }
    cpparity_error error;
    cpparity_error_clear(&error);
    if (share_memory_decisions(world, command->plan, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity %s: rank %d: %s\n", command->name, world->world_rank,
                error.message);
        return 3;
    }
    cpparity_status outputs = CPPARITY_OK;
    output_claim claims[RUN_OUTPUT_COUNT];
    memset(claims, 0, sizeof claims);
    if (world->rank == 0) {
        const char *paths[RUN_OUTPUT_COUNT];
        for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
            paths[o] = o == RUN_OUTPUT_RESULTS ? command->environment->out_path
                                               : command->options->outputs[o];
        }
        outputs = run_outputs_claim(paths, claims, &error);
    }
    status = agree_and_report(world, command->name, outputs, &error);
    int code = (int)status;
    if (status == CPPARITY_OK && command->kind == RUN_COMMAND_SELFTEST) {
        code = selftest_job(world, command->plan, command->options, command->target,
                            command->environment);
    } else if (status == CPPARITY_OK) {
        code =
            run_job(world, command->plan, command->options, command->target, command->environment);
    }
    run_outputs_release(claims);
    return code;
}

static void join_arguments(char *text, size_t size, int argc, char **argv) {
    size_t used = (size_t)snprintf(text, size, "cpparity");
    for (int i = 0; i < argc && used < size; i++) {
        used += (size_t)snprintf(text + used, size - used, " %s", argv[i]);
    }
}

/* The kernel for --kernel (or the implementation's default), or an input error. */
static const cpparity_attention_kernel *choose_kernel(const run_options *options,
                                                      const cpparity_implementation *implementation,
                                                      cpparity_error *error) {
    const char *name = options->kernel != NULL ? options->kernel : implementation->default_kernel;
    if (kernel_plugin_is_path(name)) { /* a plugin: --kernel PATH.so[:NAME] */
        const cpparity_attention_kernel *plugin = NULL;
        if (kernel_plugin_load(name, implementation->device, &plugin, error) != CPPARITY_OK) {
            return NULL;
        }
        return plugin;
    }
    const cpparity_attention_kernel *kernel = kernel_registry_find(name);
    if (kernel == NULL) {
        char available[512] = "";
        size_t used = 0;
        for (int i = 0; i < kernel_registry_count() && used < sizeof available; i++) {
            used += (size_t)snprintf(available + used, sizeof available - used, "%s%s",
                                     i > 0 ? ", " : "", kernel_registry_at(i)->name);
        }
        cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                           "--kernel %s: unknown kernel (available: %s)", name, available);
        return NULL;
    }
    if (strcmp(kernel_device_name(kernel), implementation->device) != 0) {
        cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                           "--kernel %s: a %s kernel cannot run in the %s implementation (--device "
                           "%s)",
                           name, kernel_device_name(kernel), implementation->name,
                           implementation->device);
        return NULL;
    }
    return kernel;
}

/* The float64 reference's threads per process: --threads, else this machine's cores shared by
 * the ranks on it (local: every rank is a thread of this process; MPI: the node-local rank count
 * Open MPI or MPICH tells), at least 1. ranks is the local job's rank count (0 before it is
 * known). */
static int reference_threads_for(const run_options *options, const cpparity_comm_backend *backend,
                                 int ranks) {
    return reference_threads_per_rank(options->threads, backend->ranks_from_launcher, ranks);
}

/* run or selftest: argv[0] is the sub-command. */
static int command_main(int argc, char **argv, run_command_kind kind) {
    run_options options;
    cpparity_error error;
    const char *name = argv[0];
    if (run_arguments_parse(&options, argc, argv, kind, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity %s: %s\n", name, error.message);
        run_arguments_usage(stderr, kind);
        return 2;
    }
    if (options.help) {
        run_arguments_usage(stdout, kind);
        return 0;
    }
    const cpparity_comm_backend *backend =
        options.comm != NULL ? comm_backend_find(options.comm) : comm_backend_detect();
    if (backend == NULL) {
        fprintf(stderr,
                "cpparity %s: --comm %s: this cpparity was built without that communicator "
                "(environment)\n",
                name, options.comm);
        return 3;
    }
    const cpparity_implementation *implementation =
        implementation_registry_for_device(options.device);
    if (implementation == NULL) {
        fprintf(stderr,
                "cpparity %s: --device %s: this cpparity has no implementation under test for "
                "that device (environment)\n",
                name, options.device);
        return 3;
    }
    char why[512] = "";
    if (implementation->available != NULL && !implementation->available(why, sizeof why)) {
        fprintf(stderr, "cpparity %s: --device %s: %s cannot run here: %s (environment)\n", name,
                options.device, implementation->name, why);
        return 3;
    }
    const cpparity_attention_kernel *kernel = choose_kernel(&options, implementation, &error);
    if (kernel == NULL) {
        fprintf(stderr, "cpparity %s: %s\n", name, error.message);
        return 2;
    }
    if (options.ranks != 0 && backend->ranks_from_launcher) {
        fprintf(stderr,
                "cpparity %s: --ranks applies to --comm local only (mpirun -np sets the ranks "
                "of --comm %s)\n",
                name, backend->name);
        return 2;
    }
    if (options.random_cases > 0 && !options.seed_set) { /* one seed draws cases and inputs */
        if (backend->ranks_from_launcher) {
            fprintf(stderr,
                    "cpparity %s: --random under --comm %s needs --seed: every rank must draw "
                    "the same cases\n",
                    name, backend->name);
            return 2;
        }
        options.seed = attention_item_fresh_seed(0);
        options.seed_set = true;
        printf("# random: %lld cases drawn from seed %llu (rerun them: --random %lld --seed "
               "%llu)\n",
               (long long)options.random_cases, (unsigned long long)options.seed,
               (long long)options.random_cases, (unsigned long long)options.seed);
        fflush(stdout);
    }
    openblas_set_num_threads(1); /* ranks are the parallelism; one BLAS thread each */
    char out_path[512], libraries[512], command_line[CPPARITY_COMMAND_LINE];
    if (options.outputs[RUN_OUTPUT_RESULTS] != NULL) {
        snprintf(out_path, sizeof out_path, "%s", options.outputs[RUN_OUTPUT_RESULTS]);
    } else {
        run_outputs_default_path(out_path, sizeof out_path,
                                 kind == RUN_COMMAND_SELFTEST ? "selftest-" : "");
    }
    join_arguments(command_line, sizeof command_line, argc, argv);
    library_versions(libraries, sizeof libraries, backend);
    const run_environment environment = {CPPARITY_VERSION, CPPARITY_GIT_COMMIT, BUILT_WITH,
                                         libraries,        command_line,        out_path};
    const run_target target = {implementation, kernel, options.fault};
    run_plan plan;
    memset(&plan, 0, sizeof plan);
    run_command command = {.kind = kind,
                           .name = name,
                           .plan = &plan,
                           .plan_status = CPPARITY_OK,
                           .options = &options,
                           .target = &target,
                           .environment = &environment,
                           .implementation = implementation,
                           .kernel = kernel};
    cpparity_error_clear(&command.plan_error);
    memory_allocator_pin(); /* what the run allocates is what it holds (memory_estimate.h) */
    reference_set_threads(reference_threads_for(&options, backend, 0));
    /* ranks a launcher starts may be on hosts without the suite files: their plan is built in
     * the job, from rank 0's bytes (plan_from_rank_0); local ranks share this one */
    command.plan_deferred = backend->ranks_from_launcher;
    if (!command.plan_deferred) {
        command.plan_status = run_plan_build(&plan, &options, &command.plan_error);
        command.plan_built = command.plan_status == CPPARITY_OK;
    }
    if (!command.plan_deferred && command.plan_status == CPPARITY_OK) { /* does it fit? */
        command.plan_status =
            memory_check_plan(&plan, &options, implementation, kernel, &command.plan_error);
    }
    int ranks = options.ranks;
    if (ranks == 0 && !backend->ranks_from_launcher) {
        ranks = command.plan_status == CPPARITY_OK ? (int)plan.least_ranks : 1;
    }
    reference_set_threads(reference_threads_for(&options, backend, ranks));
    int code = 3;
    if (backend->launch(ranks, options.timeout_seconds, run_main, &command, &code, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "cpparity %s: %s\n", name, error.message);
        code = code > (int)error.status ? code : (int)error.status;
    }
    if (command.plan_built) {
        run_plan_free(&plan);
    }
    return code;
}

int command_run(int argc, char **argv) {
    return command_main(argc, argv, RUN_COMMAND_RUN);
}

int command_selftest(int argc, char **argv) {
    return command_main(argc, argv, RUN_COMMAND_SELFTEST);
}
