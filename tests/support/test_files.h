/* test_files.h — test-only helpers for tests that write files: a fresh folder, its entries. */
#ifndef CPPARITY_TESTS_TEST_FILES_H
#define CPPARITY_TESTS_TEST_FILES_H

#include <stddef.h>

/* Creates a fresh empty folder /tmp/cpparity-test-XXXXXX and writes its path to folder. */
void test_make_folder(char *folder, size_t size);

/* Number of entries in folder, "." and ".." excluded (temporary files included). */
int test_count_entries(const char *folder);

#endif
