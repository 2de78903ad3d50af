/* test_files.c — fresh folders and entry counts for tests that write files. */
#include "test_files.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void test_make_folder(char *folder, size_t size) {
    snprintf(folder, size, "/tmp/cpparity-test-XXXXXX");
    cr_assert_not_null(mkdtemp(folder), "cannot create a folder under /tmp");
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
