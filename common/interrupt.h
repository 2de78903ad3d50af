/*
 * interrupt.h — what SIGINT, SIGTERM and SIGHUP do to a command: remove every unpublished
 * temporary file (temporary_files.h), say on stderr what was running, and exit with 128 + the
 * signal's number (130, 143, 129) at once, without running exit handlers (a library's own, such as
 * HDF5's, may not be safe then). SIGXFSZ is ignored, so a write past the file size limit fails
 * with EFBIG and is reported like a full disk instead of killing the process. A signal that was
 * ignored when the process started (nohup, a non-interactive shell's background job) stays
 * ignored.
 *
 * A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL) also removes the temporary files and says what was
 * running (and which kernel plugin call, when in one), then dies of the same signal (exit 139
 * for SIGSEGV), so a core dump and the shell's report are unchanged.
 *
 * While a command publishes its outputs (output_file.h) it defers signals: one that arrives
 * then takes effect when publishing ends, so the outputs appear all together or not at all.
 */
#ifndef CPPARITY_COMMON_INTERRUPT_H
#define CPPARITY_COMMON_INTERRUPT_H

/* Installs the handlers; prefix begins every message ("cpparity run"). Call once, early. */
void interrupt_install(const char *prefix);

/* Replaces the message prefix (under MPI: "cpparity run: rank 3"). */
void interrupt_set_prefix(const char *prefix);

/* What the process is doing, printed if a signal stops it ("case 'x' (cp 4, f32)"); "" for
 * nothing in particular. Any thread may call it; the latest call wins. */
void interrupt_set_activity(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Marks a call into code cpparity did not write (a kernel plugin's forward or backward): if the
 * process crashes meanwhile (SIGSEGV, SIGBUS, SIGFPE, SIGILL), the message names it. name and
 * call must stay valid; interrupt_leave_foreign_code ends the mark. */
void interrupt_enter_foreign_code(const char *name, const char *call);
void interrupt_leave_foreign_code(void);

/* Defers signals until the matching interrupt_resume (calls nest; any thread). */
/* "SIGSEGV", "SIGTERM", ... for the signals cpparity handles or reports, else "a signal"; a
 * constant string, async-signal-safe. */
const char *interrupt_signal_name(int signal_number);

void interrupt_defer(void);
void interrupt_resume(void);

#endif
