/* temporary_files.c — the registry of unpublished temporary files (see temporary_files.h). */
#include "common/temporary_files.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define TEMPORARY_FILE_PATH 4160 /* output_file.h's paths and their temporary suffix */

static char paths[TEMPORARY_FILES_MAX][TEMPORARY_FILE_PATH];
/* 1 while the slot's path is complete and the file is to be removed by a signal; the path is
 * written before the flag is set (sequentially consistent atomics), so a handler that sees 1
 * reads a complete path */
static atomic_int in_use[TEMPORARY_FILES_MAX];
static pthread_mutex_t registration = PTHREAD_MUTEX_INITIALIZER;

int temporary_files_add(const char *path) {
    if (strlen(path) >= TEMPORARY_FILE_PATH) {
        return -1;
    }
    int slot = -1;
    pthread_mutex_lock(&registration);
    for (int s = 0; s < TEMPORARY_FILES_MAX && slot < 0; s++) {
        if (atomic_load(&in_use[s]) == 0) {
            slot = s;
            strcpy(paths[s], path);
            atomic_store(&in_use[s], 1);
        }
    }
    pthread_mutex_unlock(&registration);
    return slot;
}

void temporary_files_forget(int slot) {
    if (slot >= 0 && slot < TEMPORARY_FILES_MAX) {
        pthread_mutex_lock(&registration);
        atomic_store(&in_use[slot], 0);
        pthread_mutex_unlock(&registration);
    }
}

void temporary_files_remove_all(void) {
    for (int s = 0; s < TEMPORARY_FILES_MAX; s++) {
        if (atomic_exchange(&in_use[s], 0) == 1) {
            unlink(paths[s]);
        }
    }
}
