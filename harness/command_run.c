/*
 * command_run.c — `cpparity run`: options, the communicator (MPI under mpirun, else N local
 * threads), the plan, and run_job on every rank. The exit code is identical on every rank.
 */
#include <cblas.h>
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "distributed/comm_local.h"
#include "harness/commands.h"
#include "harness/run.h"
#include "harness/run_options.h"
#include "harness/run_plan.h"
#include "harness/version.h"

#ifdef CPPARITY_HAVE_MPI
#include <mpi.h>

#include "distributed/comm_mpi.h"
#include "distributed/mpi_check.h"

/* MPI_Init_thread and this process's world rank. */
static cpparity_status start_mpi(int *rank, cpparity_error *error) {
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided), error, "starting MPI");
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), error, "starting MPI");
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank), error, "starting MPI");
    return CPPARITY_OK;
}

/* Rank 0's verdict on the plan and outputs reaches every rank before anything runs. */
static cpparity_status share_verdict(int *code, cpparity_error *error) {
    MPI_CHECK(MPI_Bcast(code, 1, MPI_INT, 0, MPI_COMM_WORLD), error, "sharing the input check");
    return CPPARITY_OK;
}
#endif

/* "HDF5 1.10.8; OpenBLAS ...; Open MPI ..." */
static void library_versions(char *text, size_t size) {
    unsigned major = 0, minor = 0, release = 0;
    if (H5get_libversion(&major, &minor, &release) < 0) {
        major = minor = release = 0; /* reported as HDF5 0.0.0: unknown */
    }
    int used = snprintf(text, size, "HDF5 %u.%u.%u; OpenBLAS %s", major, minor, release,
                        openblas_get_config());
#ifdef CPPARITY_HAVE_MPI
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int length = 0;
    if (MPI_Get_library_version(mpi, &length) != MPI_SUCCESS) {
        snprintf(mpi, sizeof mpi, "MPI (version unavailable)");
    }
    mpi[strcspn(mpi, ",\n")] = '\0';
    snprintf(text + used, size - (size_t)used, "; %s", mpi);
#else
    (void)used;
#endif
}

/* results/<UTC timestamp>.h5, creating results/ when needed. */
static void default_out_path(char *path, size_t size) {
    mkdir("results", 0775);
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    snprintf(path, size, "results/%s.h5", stamp);
}

/* Output paths that exist are refused before anything runs (nothing is ever overwritten). */
static int check_outputs(const run_options *options, const char *out_path) {
    const struct {
        const char *flag;
        const char *path;
    } outputs[] = {
        {"--out", out_path}, {"--junit", options->junit}, {"--markdown", options->markdown}};
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++) {
        if (outputs[i].path != NULL && access(outputs[i].path, F_OK) == 0) {
            fprintf(stderr,
                    "cpparity run: %s %s: the file exists; cpparity never overwrites a "
                    "file\n",
                    outputs[i].flag, outputs[i].path);
            return 2;
        }
    }
    return 0;
}

typedef struct local_job {
    run_plan *plan;
    const run_options *options;
    const run_environment *environment;
    int *codes; /* per rank */
} local_job;

static cpparity_status local_body(cpparity_comm *comm, void *argument, cpparity_error *error) {
    (void)error;
    local_job *job = argument;
    job->codes[comm->rank] = run_job(comm, job->plan, job->options, job->environment);
    return CPPARITY_OK;
}

static void join_arguments(char *text, size_t size, int argc, char **argv) {
    size_t used = (size_t)snprintf(text, size, "cpparity");
    for (int i = 0; i < argc && used < size; i++) {
        used += (size_t)snprintf(text + used, size - used, " %s", argv[i]);
    }
}

static int run_local(run_plan *plan, const run_options *options,
                     const run_environment *environment) {
    const int ranks = options->ranks > 0 ? options->ranks : (int)plan->largest_cp;
    run_plan_set_ranks(plan, ranks, options->device);
    int *codes = calloc((size_t)ranks, sizeof *codes);
    cpparity_status *statuses = calloc((size_t)ranks, sizeof *statuses);
    if (codes == NULL || statuses == NULL) {
        free(codes);
        free(statuses);
        fprintf(stderr, "cpparity run: out of memory\n");
        return 3;
    }
    local_job job = {plan, options, environment, codes};
    cpparity_error error;
    int code = 0;
    if (comm_local_run(ranks, options->timeout_seconds, local_body, &job, statuses, NULL, &error) !=
        CPPARITY_OK) {
        fprintf(stderr, "cpparity run: %s\n", error.message);
        code = 3;
    }
    for (int r = 0; r < ranks; r++) {
        code = codes[r] > code ? codes[r] : code;
    }
    free(codes);
    free(statuses);
    return code;
}

int command_run(int argc, char **argv) {
    run_options options;
    cpparity_error error;
    if (run_options_parse(&options, argc, argv, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity run: %s\n%s", error.message, run_options_usage());
        return 2;
    }
    if (options.help) {
        fputs(run_options_usage(), stdout);
        return 0;
    }
    const char *comm = options.comm;
    if (comm == NULL) {
        comm = (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) ? "mpi" : "local";
    }
    if (strcmp(options.device, "cuda") == 0 || strcmp(comm, "nccl") == 0) {
        fprintf(stderr, "cpparity run: --device cuda / --comm nccl: this cpparity has no CUDA "
                        "implementation under test yet (environment)\n");
        return 3;
    }
    if (strcmp(options.kernel, "cpu-f32") != 0) {
        fprintf(stderr, "cpparity run: --kernel %s: unknown kernel (available: cpu-f32)\n",
                options.kernel);
        return 2;
    }
    openblas_set_num_threads(1); /* ranks are the parallelism; one BLAS thread each */
    char out_path[512], libraries[512], command_line[2048];
    if (options.out != NULL) {
        snprintf(out_path, sizeof out_path, "%s", options.out);
    } else {
        default_out_path(out_path, sizeof out_path);
    }
    join_arguments(command_line, sizeof command_line, argc, argv);
    run_environment environment = {CPPARITY_VERSION, CPPARITY_GIT_COMMIT, libraries, command_line,
                                   out_path};
    if (strcmp(comm, "local") == 0) {
        library_versions(libraries, sizeof libraries);
        run_plan plan;
        if (run_plan_build(&plan, &options, &error) != CPPARITY_OK) {
            fprintf(stderr, "cpparity run: %s\n", error.message);
            return (int)error.status;
        }
        int code = check_outputs(&options, out_path);
        if (code == 0) {
            code = run_local(&plan, &options, &environment);
        }
        run_plan_free(&plan);
        return code;
    }
#ifdef CPPARITY_HAVE_MPI
    int rank = 0;
    if (start_mpi(&rank, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity run: %s\n", error.message);
        return 3;
    }
    library_versions(libraries, sizeof libraries);
    run_plan plan;
    cpparity_status status = run_plan_build(&plan, &options, &error);
    int code = status != CPPARITY_OK ? (int)status : 0;
    if (code != 0 && rank == 0) {
        fprintf(stderr, "cpparity run: %s\n", error.message);
    }
    if (code == 0 && rank == 0) {
        code = check_outputs(&options, out_path);
    }
    if (share_verdict(&code, &error) != CPPARITY_OK) {
        fprintf(stderr, "cpparity run: %s\n", error.message);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (code == 0) {
        cpparity_comm *world = NULL;
        if (comm_mpi_create_world(&world, options.timeout_seconds, &error) != CPPARITY_OK) {
            fprintf(stderr, "cpparity run: rank %d: %s\n", rank, error.message);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        run_plan_set_ranks(&plan, world->size, options.device);
        code = run_job(world, &plan, &options, &environment);
        cpparity_comm_free(world);
    }
    if (status == CPPARITY_OK) {
        run_plan_free(&plan);
    }
    if (MPI_Finalize() != MPI_SUCCESS && code == 0) {
        fprintf(stderr, "cpparity run: rank %d: MPI_Finalize failed\n", rank);
        code = 3;
    }
    return code;
#else
    fprintf(stderr, "cpparity run: --comm mpi: this cpparity was built without MPI\n");
    return 3;
#endif
}
