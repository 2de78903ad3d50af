/* test_files.c — fresh folders and entry counts for tests that write files. */
#define _XOPEN_SOURCE 700 /* nftw; before any system header */
#include "test_files.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The folders this process made, removed when it exits through exit() (atexit): a test that
 * passes leaves nothing under /tmp. */
enum { FOLDERS_KEPT = 64, FOLDER_PATH = 64 };
static char made[FOLDERS_KEPT][FOLDER_PATH];
static int made_count;
static pid_t made_by; /* a forked child inherits the list, and removes nothing of it */

static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *walk) {
    (void)status;
    (void)flag;
    (void)walk;
    (void)remove(path); /* go on past what cannot be removed */
    return 0;
}

static void remove_folders(void) {
    for (int i = 0; getpid() == made_by && i < made_count; i++) {
        nftw(made[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

void test_make_folder(char *folder, size_t size) {
    snprintf(folder, size, "/tmp/cpparity-test-XXXXXX");
    cr_assert_not_null(mkdtemp(folder), "cannot create a folder under /tmp");
    if (made_by != getpid()) { /* the first folder of this process */
        made_by = getpid();
        made_count = 0;
        atexit(remove_folders);
    }
    if (made_count < FOLDERS_KEPT && strlen(folder) < FOLDER_PATH) {
        snprintf(made[made_count++], FOLDER_PATH, "%s", folder);
    }
}

void test_write_suite(char *folder, size_t folder_size, char *path, size_t path_size,
                      const char *text) {
    test_make_folder(folder, folder_size);
    snprintf(path, path_size, "%s/suite.yaml", folder);
    FILE *file = fopen(path, "w");
    cr_assert_not_null(file, "cannot write %s", path);
    fputs(text, file);
    fclose(file);
}

int test_count_entries(const char *folder) {
    DIR *directory = opendir(folder);
    cr_assert_not_null(directory, "cannot read %s", folder);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(directory)) != NULL;) {
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    }
    closedir(directory);
    return count;
}
