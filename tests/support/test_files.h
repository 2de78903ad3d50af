/* test_files.h — test-only helpers for tests that write files: a fresh folder, its entries. */
#ifndef CPPARITY_TESTS_TEST_FILES_H
#define CPPARITY_TESTS_TEST_FILES_H

#include <stddef.h>

/* Creates a fresh empty folder /tmp/cpparity-test-XXXXXX and writes its path to folder. */
void test_make_folder(char *folder, size_t size);

/* Creates a fresh folder (as test_make_folder) holding one file, suite.yaml, with text; its path
 * into path. */
void test_write_suite(char *folder, size_t folder_size, char *path, size_t path_size,
                      const char *text);

/* Number of entries in folder, "." and ".." excluded (temporary files included). */
int test_count_entries(const char *folder);

#endif
