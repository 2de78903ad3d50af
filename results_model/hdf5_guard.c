/* hdf5_guard.c — see hdf5_guard.h. */
#define _GNU_SOURCE /* dladdr, the faulting instruction's address in ucontext_t */
#include "results_model/hdf5_guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/interrupt.h"
#include "common/monotonic_clock.h"

#if defined(__SANITIZE_ADDRESS__)
#define GUARD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_SANITIZED 1
#endif
#endif
#ifndef GUARD_SANITIZED
#define GUARD_SANITIZED 0
#endif

#define GUARD_BASE_SECONDS 10.0                /* a read of any file may take this long */
#define GUARD_BYTES_PER_SECOND (8.0 * 1048576) /* and 1 s more per 8 MiB: slow network storage */
#define GUARD_WHERE 512                        /* bytes of a breadcrumb, NUL included */
#define GUARD_CRASH 256                        /* bytes of a crash's location, NUL included */
#define GUARD_ALTERNATE_STACK (64 * 1024)      /* the crash handler's own stack */

/* What the child tells its parent, in memory they share. */
typedef struct guard_page {
    volatile sig_atomic_t finished; /* the reader returned and its result is below */
    int status;                     /* its cpparity_status */
    char message[CPPARITY_ERROR_TEXT];
    char where[GUARD_WHERE];       /* the last hdf5_guard_at: the object being read */
    volatile sig_atomic_t signal;  /* the signal the child crashed with, 0 if none */
    volatile sig_atomic_t in_hdf5; /* a frame of the crash was in the HDF5 library */
    char crash[GUARD_CRASH];       /* "H5HG_read of libhdf5_serial.so.103" */
} guard_page;

static guard_page *child_page; /* set in a guarded child only */
static void (*child_hook)(void);

void hdf5_guard_set_child_hook(void (*hook)(void)) {
    child_hook = hook;
}

void hdf5_guard_at(const char *object, const char *name) {
    if (child_page == NULL) {
        return;
    }
    if (name != NULL) {
        snprintf(child_page->where, sizeof child_page->where, "%s: attribute '%s'", object, name);
    } else {
        snprintf(child_page->where, sizeof child_page->where, "%s", object);
    }
}

double hdf5_guard_seconds(int64_t bytes) {
    const char *setting = getenv("CPPARITY_HDF5_READ_SECONDS");
    double base = GUARD_BASE_SECONDS;
    if (setting != NULL && setting[0] != '\0') {
        char *end = NULL;
        const double value = strtod(setting, &end);
        base = end != setting && *end == '\0' && value > 0.0 ? value : base;
    }
    return base + (bytes > 0 ? (double)bytes / GUARD_BYTES_PER_SECOND : 0.0);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* Describes where a crash happened into child_page: the innermost frame in the HDF5 library if
 * any frame is there, else the faulting instruction's function and object. Not strictly
 * async-signal-safe (dladdr): the child is dying anyway, and backtrace was warmed up. */
static void describe_crash(void *context) {
    void *frames[64];
    const int count = backtrace(frames, 64);
    for (int i = 0; i < count; i++) {
        Dl_info found;
        if (dladdr(frames[i], &found) != 0 && found.dli_fname != NULL &&
            strstr(base_name(found.dli_fname), "hdf5") != NULL) {
            child_page->in_hdf5 = 1;
            snprintf(child_page->crash, sizeof child_page->crash, "in %s of %s",
                     found.dli_sname != NULL ? found.dli_sname : "a function",
                     base_name(found.dli_fname));
            return;
        }
    }
    void *address = NULL;
#if defined(__x86_64__)
    address = (void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    address = (void *)((ucontext_t *)context)->uc_mcontext.pc;
#else
    (void)context;
#endif
    Dl_info found;
    if (address != NULL && dladdr(address, &found) != 0 && found.dli_fname != NULL) {
        snprintf(child_page->crash, sizeof child_page->crash, "in %s of %s",
                 found.dli_sname != NULL ? found.dli_sname : "a function",
                 base_name(found.dli_fname));
    }
}

static void on_crash(int number, siginfo_t *info, void *context) {
    (void)info;
    child_page->signal = number;
    describe_crash(context);
    signal(number, SIG_DFL); /* then die of it, so the parent sees the signal */
    raise(number);
}

/* The memory the child may map: what it maps now and what the machine has available. */
static void limit_memory(void) {
    if (GUARD_SANITIZED) {
        return; /* AddressSanitizer maps terabytes of shadow memory up front */
    }
    FILE *meminfo = fopen("/proc/meminfo", "r");
    FILE *statm = fopen("/proc/self/statm", "r");
    long long available_kib = -1, mapped_pages = -1;
    char line[256];
    while (meminfo != NULL && fgets(line, sizeof line, meminfo) != NULL) {
        if (sscanf(line, "MemAvailable: %lld kB", &available_kib) == 1) {
            break;
        }
    }
    if (statm == NULL || fscanf(statm, "%lld", &mapped_pages) != 1) {
        mapped_pages = -1;
    }
    if (meminfo != NULL) {
        fclose(meminfo);
    }
    if (statm != NULL) {
        fclose(statm);
    }
    if (available_kib > 0 && mapped_pages > 0) {
        const rlim_t bytes =
            (rlim_t)mapped_pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)available_kib * 1024;
        const struct rlimit limit = {bytes, bytes};
        setrlimit(RLIMIT_AS, &limit);
    }
}

/* The child: read, tell the parent how it went, and leave without running any exit handler. */
static void run_child(guard_page *page, pid_t parent, hdf5_guard_reader read, void *context) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a parent that was killed */
#endif
    if (getppid() != parent) {
        _exit(1);
    }
    const int terminating[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT};
    for (size_t i = 0; i < sizeof terminating / sizeof *terminating; i++) {
        signal(terminating[i], SIG_DFL); /* the parent's handlers clean up the parent's files */
    }
    child_page = page;
    if (child_hook != NULL) {
        child_hook();
    }
    static char alternate[GUARD_ALTERNATE_STACK]; /* a stack overflow still reports */
    const stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate, .ss_flags = 0};
    sigaltstack(&stack, NULL);
    void *warm[1];
    backtrace(warm, 1); /* loads what backtrace needs now, not inside the handler */
    struct sigaction crash;
    memset(&crash, 0, sizeof crash);
    crash.sa_sigaction = on_crash;
    crash.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&crash.sa_mask);
    const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGSYS};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) {
        sigaction(fatal[i], &crash, NULL);
    }
    limit_memory();
    const int quiet = open("/dev/null", O_WRONLY); /* glibc's and HDF5's last words: the parent */
    if (quiet >= 0) {                              /* says what happened, once */
        dup2(quiet, STDERR_FILENO);
        close(quiet);
    }
    snprintf(page->where, sizeof page->where, "/ (opening the file)");
    cpparity_error error;
    cpparity_error_clear(&error);
    const cpparity_status status = read(context, &error);
    page->status = (int)status;
    snprintf(page->message, sizeof page->message, "%s", error.message);
    page->finished = 1;
    _exit(0);
}

/* Waits for child until seconds have passed, then kills it; *timed_out says which happened. */
static int wait_for(pid_t child, double seconds, bool *timed_out) {
    const double deadline = monotonic_seconds() + seconds;
    long pause_ns = 20000; /* 20 µs, doubling to 20 ms: a small file's read costs little wait */
    int child_status = 0;
    *timed_out = false;
    for (;;) {
        const pid_t done = waitpid(child, &child_status, WNOHANG);
        if (done == child || (done < 0 && errno != EINTR)) {
            return done == child ? child_status : -1;
        }
        if (monotonic_seconds() > deadline) {
            kill(child, SIGKILL);
            while (waitpid(child, &child_status, 0) < 0 && errno == EINTR) {
            }
            *timed_out = true;
            return child_status;
        }
        const struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
        pause_ns = pause_ns < 20000000 ? pause_ns * 2 : pause_ns;
    }
}

cpparity_status hdf5_guard_read(const char *file, int64_t bytes, hdf5_guard_reader read,
                                void *context, cpparity_error *error) {
    cpparity_error_clear(error);
    guard_page *page =
        mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s: cannot share a page with a reading process: %s", file,
                                  strerror(errno));
    }
    memset(page, 0, sizeof *page);
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
        const int why = errno;
        munmap(page, sizeof *page);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s: cannot start a process to read it first: %s", file,
                                  strerror(why));
    }
    if (child == 0) {
        run_child(page, parent, read, context);
    }
    const double seconds = hdf5_guard_seconds(bytes);
    bool timed_out = false;
    const int child_status = wait_for(child, seconds, &timed_out);
    cpparity_status status = CPPARITY_OK;
    const char *where = page->where[0] != '\0' ? page->where : "/";
    if (timed_out) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s is damaged: reading %s hung inside the HDF5 library (no "
                                    "result after %.0f s; CPPARITY_HDF5_READ_SECONDS sets the "
                                    "limit)",
                                    file, where, seconds);
    } else if (child_status == -1) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "%s: lost the process reading it: %s", file, strerror(errno));
    } else if (WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 && page->finished) {
        status = (cpparity_status)page->status;
        if (status != CPPARITY_OK) {
            cpparity_error_set(error, status, "%s", page->message);
        }
    } else if (WIFSIGNALED(child_status) && WTERMSIG(child_status) == SIGKILL) {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s is damaged: reading %s was killed (SIGKILL: the system "
                                    "ran out of memory)",
                                    file, where);
    } else if (WIFSIGNALED(child_status) && page->in_hdf5) {
        const int number = page->signal != 0 ? (int)page->signal : WTERMSIG(child_status);
        status =
            cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                               "%s is damaged: reading %s crashed inside the HDF5 library (%s, %s)",
                               file, where, interrupt_signal_name(number), page->crash);
    } else if (WIFSIGNALED(child_status)) {
        const int number = page->signal != 0 ? (int)page->signal : WTERMSIG(child_status);
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s: reading %s crashed cpparity's reader (%s%s%s): a bug of "
                                    "cpparity's, please report it with this file",
                                    file, where, interrupt_signal_name(number),
                                    page->crash[0] != '\0' ? ", " : "", page->crash);
    } else {
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s is damaged: reading %s ended the reading process (exit "
                                    "status %d) before it finished: a crash that a sanitizer "
                                    "reported",
                                    file, where,
                                    WIFEXITED(child_status) ? WEXITSTATUS(child_status) : -1);
    }
    munmap(page, sizeof *page);
    return status;
}

cpparity_status hdf5_guard_read_path(const char *path, hdf5_guard_reader read, void *context,
                                     cpparity_error *error) {
    struct stat file;
    const int64_t bytes = stat(path, &file) == 0 ? (int64_t)file.st_size : 0;
    return hdf5_guard_read(path, bytes, read, context, error);
}
