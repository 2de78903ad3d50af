/* interrupt.c — signals remove temporary files and stop the command (see interrupt.h). */
#include "common/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/temporary_files.h"

#define INTERRUPT_TEXT 256

/* Two buffers per text: a writer fills the one not in use and then switches, so the handler
 * always reads a complete text. Writers are serialised by the lock. */
static char prefixes[2][INTERRUPT_TEXT] = {"cpparity", "cpparity"};
static char activities[2][INTERRUPT_TEXT];
static atomic_int prefix_current, activity_current;
static pthread_mutex_t writers = PTHREAD_MUTEX_INITIALIZER;
static atomic_int deferred, pending;
static _Atomic(const char *) foreign_name;
static _Atomic(const char *) foreign_call;

/* Appends text to buffer at *used (async-signal-safe: no libc formatting). */
static void append(char *buffer, size_t size, size_t *used, const char *text) {
    while (*text != '\0' && *used + 1 < size) {
        buffer[(*used)++] = *text++;
    }
}

const char *interrupt_signal_name(int signal_number) {
    switch (signal_number) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    case SIGABRT:
        return "SIGABRT";
    case SIGSYS:
        return "SIGSYS";
    case SIGKILL:
        return "SIGKILL";
    default:
        return "a signal";
    }
}

/* Removes the temporary files and says on stderr what happened ("interrupted by", "crashed
 * with"), what was running and, for a crash, which kernel plugin call; async-signal-safe. */
static void clean_up_and_say(const char *what, int signal_number, bool crashed) {
    temporary_files_remove_all();
    char message[4 * INTERRUPT_TEXT];
    size_t used = 0;
    append(message, sizeof message, &used, prefixes[atomic_load(&prefix_current)]);
    append(message, sizeof message, &used, what);
    append(message, sizeof message, &used, interrupt_signal_name(signal_number));
    const char *activity = activities[atomic_load(&activity_current)];
    if (activity[0] != '\0') {
        append(message, sizeof message, &used, " while running ");
        append(message, sizeof message, &used, activity);
    }
    const char *name = atomic_load(&foreign_name), *call = atomic_load(&foreign_call);
    if (crashed && name != NULL) {
        append(message, sizeof message, &used, ", inside kernel plugin ");
        append(message, sizeof message, &used, name);
        append(message, sizeof message, &used, " ");
        append(message, sizeof message, &used, call != NULL ? call : "");
        append(message, sizeof message, &used, " (the plugin crashed, not cpparity)");
    }
    append(message, sizeof message, &used,
           crashed ? "; temporary files removed\n"
                   : "; temporary files removed, nothing more is written\n");
    ssize_t written = write(STDERR_FILENO, message, used);
    (void)written; /* nothing more can be done about a failed write to stderr */
}

/* Cleans up, says why, and exits 128 + signal_number. */
static void stop(int signal_number) {
    clean_up_and_say(": interrupted by ", signal_number, false);
    _exit(128 + signal_number);
}

/* A crash: the same cleanup and message, then the default action of the signal. */
static void on_crash(int signal_number) {
    clean_up_and_say(": crashed with ", signal_number, true);
    signal(signal_number, SIG_DFL); /* die of it: core dump and exit status as without us */
    raise(signal_number);
}

void interrupt_enter_foreign_code(const char *name, const char *call) {
    atomic_store(&foreign_call, call);
    atomic_store(&foreign_name, name);
}

void interrupt_leave_foreign_code(void) {
    atomic_store(&foreign_name, NULL);
    atomic_store(&foreign_call, NULL);
}

static void on_signal(int signal_number) {
    if (atomic_load(&deferred) > 0) {
        atomic_store(&pending, signal_number);
        /* unless interrupt_resume ended the deferral meanwhile without seeing it */
        if (atomic_load(&deferred) > 0 || atomic_exchange(&pending, 0) == 0) {
            return;
        }
    }
    stop(signal_number);
}

void interrupt_install(const char *prefix) {
    interrupt_set_prefix(prefix);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);
    sigaddset(&action.sa_mask, SIGTERM);
    sigaddset(&action.sa_mask, SIGHUP);
    const int handled[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t s = 0; s < sizeof handled / sizeof *handled; s++) {
        struct sigaction inherited;
        /* a signal ignored when cpparity started stays ignored (nohup, a shell's background
         * job): whoever started it asked for that */
        if (sigaction(handled[s], NULL, &inherited) == 0 && inherited.sa_handler == SIG_IGN) {
            continue;
        }
        sigaction(handled[s], &action, NULL);
    }
    signal(SIGXFSZ, SIG_IGN);
    struct sigaction crash;
    memset(&crash, 0, sizeof crash);
    crash.sa_handler = on_crash;
    sigemptyset(&crash.sa_mask);
    crash.sa_flags = SA_RESETHAND; /* a crash inside the handler ends the process plainly */
    const int crashes[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t s = 0; s < sizeof crashes / sizeof *crashes; s++) {
        sigaction(crashes[s], &crash, NULL);
    }
}

/* Fills the unused buffer of a pair and makes it current. */
static void set_text(char pair[2][INTERRUPT_TEXT], atomic_int *current, const char *format,
                     va_list arguments) {
    pthread_mutex_lock(&writers);
    const int next = 1 - atomic_load(current);
    vsnprintf(pair[next], INTERRUPT_TEXT, format, arguments);
    atomic_store(current, next);
    pthread_mutex_unlock(&writers);
}

static void set_prefix(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    set_text(prefixes, &prefix_current, format, arguments);
    va_end(arguments);
}

void interrupt_set_prefix(const char *prefix) {
    set_prefix("%s", prefix);
}

void interrupt_set_activity(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    set_text(activities, &activity_current, format, arguments);
    va_end(arguments);
}

void interrupt_defer(void) {
    atomic_fetch_add(&deferred, 1);
}

void interrupt_resume(void) {
    if (atomic_fetch_sub(&deferred, 1) == 1) {
        const int signal_number = atomic_exchange(&pending, 0);
        if (signal_number != 0) {
            stop(signal_number);
        }
    }
}
