/* output_file.c — write to a temporary name, publish without overwriting (see output_file.h). */
#include "common/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/temporary_files.h"

/* Refuses a destination that exists (nothing is ever overwritten), is empty or is too long for
 * its temporary name. */
static cpparity_status refuse_destination(const char *destination, const char *flag,
                                          cpparity_error *error) {
    struct stat existing;
    if (stat(destination, &existing) == 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s %s: the file exists; cpparity never overwrites a file "
                                  "(choose another name or remove it)",
                                  flag, destination);
    }
    if (destination[0] == '\0' || strlen(destination) + 32 >= OUTPUT_FILE_PATH) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s '%s': %s", flag, destination,
                                  destination[0] == '\0' ? "an empty path" : "path too long");
    }
    return CPPARITY_OK;
}

cpparity_status output_file_check(const char *destination, const char *flag,
                                  cpparity_error *error) {
    const cpparity_status refused = refuse_destination(destination, flag, error);
    if (refused != CPPARITY_OK) {
        return refused;
    }
    const char *slash = strrchr(destination, '/');
    char folder[OUTPUT_FILE_PATH], probe[OUTPUT_FILE_PATH + 64];
    snprintf(folder, sizeof folder, "%.*s", slash == NULL ? 1 : (int)(slash - destination + 1),
             slash == NULL ? "." : destination);
    struct stat folder_status;
    const int found = stat(folder, &folder_status);
    const int found_errno = errno;
    if (found != 0 || !S_ISDIR(folder_status.st_mode)) {
        const bool missing = found != 0 && found_errno == ENOENT;
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s %s: the folder %s %s", flag,
                                  destination, folder,
                                  missing ? "does not exist" : "is not a folder");
    }
    /* mkstemp's template: it replaces the six trailing characters */
    snprintf(probe, sizeof probe, "%s%s.cpparity-probe-XXXXXX", folder, slash == NULL ? "/" : "");
    interrupt_defer(); /* the probe is not registered: no signal between its creation and removal */
    const int descriptor = mkstemp(probe);
    const int reason = errno;
    if (descriptor >= 0) {
        close(descriptor);
        unlink(probe);
    }
    interrupt_resume();
    if (descriptor < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s %s: cannot create a file in %s: %s", flag, destination,
                                  folder, strerror(reason));
    }
    return CPPARITY_OK;
}

cpparity_status output_file_begin(output_file *file, const char *destination, const char *flag,
                                  cpparity_error *error) {
    memset(file, 0, sizeof *file);
    file->slot = -1;
    const cpparity_status refused = refuse_destination(destination, flag, error);
    if (refused != CPPARITY_OK) {
        return refused;
    }
    snprintf(file->destination, sizeof file->destination, "%s", destination);
    snprintf(file->flag, sizeof file->flag, "%s", flag);
    const char *slash = strrchr(destination, '/');
    const int folder_length = slash != NULL ? (int)(slash - destination + 1) : 0;
    snprintf(file->temporary, sizeof file->temporary, "%.*s.%s.tmp-XXXXXX", folder_length,
             destination, slash != NULL ? slash + 1 : destination);
    interrupt_defer(); /* created and registered as one step */
    const int descriptor = mkstemp(file->temporary);
    const int reason = errno;
    if (descriptor >= 0) {
        file->slot = temporary_files_add(file->temporary);
        if (file->slot < 0) {
            close(descriptor);
            unlink(file->temporary);
        }
    }
    interrupt_resume();
    if (descriptor < 0) {
        file->temporary[0] = '\0';
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s %s: cannot create a file in "
                                  "its folder: %s",
                                  flag, destination, strerror(reason));
    }
    if (file->slot < 0) {
        file->temporary[0] = '\0';
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s %s: more than %d temporary files at once", flag, destination,
                                  TEMPORARY_FILES_MAX);
    }
    /* mkstemp creates 0600; a published file gets the permissions of any new file */
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(descriptor, 0666 & ~mask);
    close(descriptor);
    return CPPARITY_OK;
}

/* Removes the temporary file and forgets it. */
static void remove_temporary(output_file *file) {
    if (file->temporary[0] != '\0') {
        unlink(file->temporary);
        file->temporary[0] = '\0';
    }
    temporary_files_forget(file->slot);
    file->slot = -1;
}

/* Links the temporary file to the destination; an error names the flag and the destination. */
static cpparity_status link_destination(const output_file *file, cpparity_error *error) {
    if (link(file->temporary, file->destination) == 0) {
        return CPPARITY_OK;
    }
    const int reason = errno;
    return cpparity_error_set(
        error, reason == EEXIST ? CPPARITY_ERROR_INPUT : CPPARITY_ERROR_RUNTIME,
        "%s %s: cannot publish it: %s%s", file->flag, file->destination, strerror(reason),
        reason == EEXIST ? " (it appeared while cpparity ran; cpparity "
                           "never overwrites a file)"
                         : "");
}

cpparity_status output_file_commit(output_file *file, cpparity_error *error) {
    interrupt_defer();
    const cpparity_status status = link_destination(file, error);
    remove_temporary(file);
    interrupt_resume();
    return status;
}

void output_file_abandon(output_file *file) {
    remove_temporary(file);
}

cpparity_status output_file_write_text(const output_file *file,
                                       void (*put)(FILE *stream, const void *context),
                                       const void *context, cpparity_error *error) {
    FILE *stream = fopen(file->temporary, "w");
    if (stream == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s %s: cannot open %s: %s",
                                  file->flag, file->destination, file->temporary, strerror(errno));
    }
    errno = 0; /* what a failed write leaves here is the reason */
    put(stream, context);
    const int write_failed = ferror(stream) ? (errno != 0 ? errno : EIO) : 0;
    errno = 0;
    const int close_failed = fclose(stream) != 0 ? (errno != 0 ? errno : EIO) : 0;
    if (write_failed != 0 || close_failed != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s %s: cannot write it: %s",
                                  file->flag, file->destination,
                                  strerror(write_failed != 0 ? write_failed : close_failed));
    }
    return CPPARITY_OK;
}

/* Creates the claim file exclusively; 0, or the errno. */
static int create_claim(const char *path) {
    const int descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (descriptor < 0) {
        return errno;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char text[320];
    const int length = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
    const bool written = length > 0 && write(descriptor, text, (size_t)length) == length;
    close(descriptor);
    if (!written) {
        unlink(path);
        return EIO;
    }
    return 0;
}

/* Whether the claim at path was left by a process of this host that no longer runs; *holder
 * describes the claiming process for messages. */
static bool claim_is_stale(const char *path, char *holder, size_t size) {
    snprintf(holder, size, "another process");
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return false;
    }
    long pid = 0;
    char host[256] = "", own_host[256] = "";
    const bool parsed = fscanf(file, "%ld %255s", &pid, host) == 2 && pid > 0;
    fclose(file);
    if (!parsed) {
        return false;
    }
    snprintf(holder, size, "process %ld on %s", pid, host);
    gethostname(own_host, sizeof own_host - 1);
    return strcmp(host, own_host) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

cpparity_status output_file_claim(output_claim *claim, const char *destination, const char *flag,
                                  cpparity_error *error) {
    memset(claim, 0, sizeof *claim);
    claim->slot = -1;
    const char *slash = strrchr(destination, '/');
    const int folder_length = slash != NULL ? (int)(slash - destination + 1) : 0;
    snprintf(claim->path, sizeof claim->path, "%.*s.%s.cpparity-claim", folder_length, destination,
             slash != NULL ? slash + 1 : destination);
    interrupt_defer(); /* created and registered as one step */
    int reason = create_claim(claim->path);
    char holder[320] = "";
    if (reason == EEXIST && claim_is_stale(claim->path, holder, sizeof holder)) {
        unlink(claim->path); /* its process is gone: the claim is ours */
        reason = create_claim(claim->path);
    }
    if (reason == 0) {
        claim->slot = temporary_files_add(claim->path);
    }
    interrupt_resume();
    if (reason != 0) {
        const bool held = reason == EEXIST;
        if (held && holder[0] == '\0') {
            claim_is_stale(claim->path, holder, sizeof holder);
        }
        char path[OUTPUT_FILE_PATH];
        snprintf(path, sizeof path, "%s", claim->path);
        claim->path[0] = '\0';
        if (held) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s %s: %s is writing it already (its claim is %s; remove "
                                      "that file if no cpparity runs)",
                                      flag, destination, holder, path);
        }
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s %s: cannot create %s: %s", flag,
                                  destination, path, strerror(reason));
    }
    return CPPARITY_OK;
}

void output_file_release(output_claim *claim) {
    if (claim->path[0] != '\0') {
        interrupt_defer();
        unlink(claim->path);
        temporary_files_forget(claim->slot);
        interrupt_resume();
        claim->path[0] = '\0';
        claim->slot = -1;
    }
}

cpparity_status output_file_publish_text(const char *destination, const char *flag,
                                         void (*put)(FILE *stream, const void *context),
                                         const void *context, cpparity_error *error) {
    output_file output;
    cpparity_status status = output_file_begin(&output, destination, flag, error);
    if (status == CPPARITY_OK) {
        status = output_file_write_text(&output, put, context, error);
    }
    if (status == CPPARITY_OK) {
        return output_file_commit(&output, error);
    }
    output_file_abandon(&output);
    return status;
}

cpparity_status output_set_add(output_set *set, const char *destination, const char *flag,
                               output_file **file, cpparity_error *error) {
    *file = NULL;
    if (set->count >= OUTPUT_SET_MAX) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s %s: more than %d outputs in one command", flag, destination,
                                  OUTPUT_SET_MAX);
    }
    const cpparity_status status =
        output_file_begin(&set->files[set->count], destination, flag, error);
    if (status == CPPARITY_OK) {
        *file = &set->files[set->count++];
    }
    return status;
}

cpparity_status output_set_publish(output_set *set, cpparity_error *error) {
    interrupt_defer();
    cpparity_status status = CPPARITY_OK;
    int linked = 0;
    while (linked < set->count && status == CPPARITY_OK) {
        status = link_destination(&set->files[linked], error);
        linked += status == CPPARITY_OK;
    }
    if (status != CPPARITY_OK) {
        /* none or all: take back what this call published (those names were free before) */
        for (int f = 0; f < linked; f++) {
            unlink(set->files[f].destination);
        }
    }
    output_set_abandon(set);
    interrupt_resume();
    return status;
}

void output_set_abandon(output_set *set) {
    for (int f = 0; f < set->count; f++) {
        remove_temporary(&set->files[f]);
    }
    set->count = 0;
}
