/* output_file.c — write to a temporary name, publish without overwriting (see output_file.h). */
#include "common/output_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    const int descriptor = mkstemp(probe);
    if (descriptor < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "%s %s: cannot create a file in %s: %s", flag, destination,
                                  folder, strerror(errno));
    }
    close(descriptor);
    unlink(probe);
    return CPPARITY_OK;
}

cpparity_status output_file_begin(output_file *file, const char *destination, const char *flag,
                                  cpparity_error *error) {
    memset(file, 0, sizeof *file);
    const cpparity_status refused = refuse_destination(destination, flag, error);
    if (refused != CPPARITY_OK) {
        return refused;
    }
    snprintf(file->destination, sizeof file->destination, "%s", destination);
    const char *slash = strrchr(destination, '/');
    const int folder_length = slash != NULL ? (int)(slash - destination + 1) : 0;
    snprintf(file->temporary, sizeof file->temporary, "%.*s.%s.tmp-XXXXXX", folder_length,
             destination, slash != NULL ? slash + 1 : destination);
    int descriptor = mkstemp(file->temporary);
    if (descriptor < 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s %s: cannot create %s: %s",
                                  flag, destination, file->temporary, strerror(errno));
    }
    /* mkstemp creates 0600; a published file gets the permissions of any new file */
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(descriptor, 0666 & ~mask);
    close(descriptor);
    return CPPARITY_OK;
}

cpparity_status output_file_commit(output_file *file, cpparity_error *error) {
    if (link(file->temporary, file->destination) != 0) {
        int reason = errno;
        output_file_abandon(file);
        return cpparity_error_set(error,
                                  reason == EEXIST ? CPPARITY_ERROR_INPUT : CPPARITY_ERROR_RUNTIME,
                                  "cannot publish %s: %s", file->destination, strerror(reason));
    }
    unlink(file->temporary);
    return CPPARITY_OK;
}

void output_file_abandon(output_file *file) {
    if (file->temporary[0] != '\0') {
        unlink(file->temporary);
    }
}
