/*
 * test_output_file.c — result and export files appear complete or not at all, and never
 * replace an existing file.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/output_file.h"
#include "tests/support/test_files.h"

static void write_text(const char *path, const char *text) {
    FILE *stream = fopen(path, "w");
    cr_assert_not_null(stream);
    fputs(text, stream);
    fclose(stream);
}

static void read_text(const char *path, char *text, size_t size) {
    FILE *stream = fopen(path, "r");
    cr_assert_not_null(stream, "%s missing", path);
    size_t length = fread(text, 1, size - 1, stream);
    text[length] = '\0';
    fclose(stream);
}

Test(output_file, existing_destination__refused_as_bad_input_and_left_untouched) {
    char folder[64], path[128], text[32];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    write_text(path, "precious");
    output_file file;
    cpparity_error error;
    cr_expect_eq(output_file_begin(&file, path, "--out", &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--out") != NULL && strstr(error.message, path) != NULL, "%s",
              error.message);
    read_text(path, text, sizeof text);
    cr_expect_str_eq(text, "precious");
    cr_expect_eq(test_count_entries(folder), 1, "no temporary file may be left behind");
    unlink(path);
    rmdir(folder);
}

Test(output_file, commit__publishes_the_written_file) {
    char folder[64], path[128], text[32];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/out.h5", folder);
    output_file file;
    cr_assert_eq(output_file_begin(&file, path, "-o", NULL), CPPARITY_OK);
    write_text(file.temporary, "complete");
    struct stat status;
    cr_expect_neq(stat(path, &status), 0, "the destination must not exist before commit");
    cr_assert_eq(output_file_commit(&file, NULL), CPPARITY_OK);
    read_text(path, text, sizeof text);
    cr_expect_str_eq(text, "complete");
    cr_expect_eq(test_count_entries(folder), 1, "the temporary file must be gone");
    unlink(path);
    rmdir(folder);
}

Test(output_file, destination_appearing_before_commit__is_not_overwritten) {
    char folder[64], path[128], text[32];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/race.h5", folder);
    output_file file;
    cr_assert_eq(output_file_begin(&file, path, "--out", NULL), CPPARITY_OK);
    write_text(file.temporary, "ours");
    write_text(path, "theirs"); /* another run got there first */
    cpparity_error error;
    cr_expect_eq(output_file_commit(&file, &error), CPPARITY_ERROR_INPUT);
    read_text(path, text, sizeof text);
    cr_expect_str_eq(text, "theirs");
    cr_expect_eq(test_count_entries(folder), 1);
    unlink(path);
    rmdir(folder);
}

Test(output_file, crash_before_commit__leaves_no_destination) {
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/crash.h5", folder);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        output_file file;
        if (output_file_begin(&file, path, "--out", NULL) == CPPARITY_OK) {
            write_text(file.temporary, "half");
        }
        abort(); /* simulated crash: no commit, no cleanup */
    }
    int wait_status = 0;
    waitpid(child, &wait_status, 0);
    struct stat status;
    cr_expect_neq(stat(path, &status), 0, "a crash must never leave the destination");
    /* only the hidden temporary file may remain; remove it */
    DIR *directory = opendir(folder);
    for (struct dirent *entry; (entry = readdir(directory)) != NULL;) {
        if (entry->d_name[0] == '.' && strstr(entry->d_name, ".tmp-") != NULL) {
            char leftover[512];
            snprintf(leftover, sizeof leftover, "%s/%s", folder, entry->d_name);
            unlink(leftover);
        }
    }
    closedir(directory);
    cr_expect_eq(test_count_entries(folder), 0);
    rmdir(folder);
}

Test(output_file, check_before_work__names_the_flag_and_what_is_wrong_and_leaves_nothing) {
    char folder[64], path[192], text[32];
    test_make_folder(folder, sizeof folder);
    cpparity_error error;
    /* a writable folder: fine, and the probe file is gone again */
    snprintf(path, sizeof path, "%s/results.h5", folder);
    cr_expect_eq(output_file_check(path, "--out", &error), CPPARITY_OK, "%s", error.message);
    cr_expect_eq(test_count_entries(folder), 0, "the probe file must be removed");
    /* the destination exists */
    write_text(path, "precious");
    cr_expect_eq(output_file_check(path, "--out", &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--out") && strstr(error.message, "exists"), "%s",
              error.message);
    read_text(path, text, sizeof text);
    cr_expect_str_eq(text, "precious");
    /* the folder does not exist */
    snprintf(path, sizeof path, "%s/missing/results.h5", folder);
    cr_expect_eq(output_file_check(path, "--junit", &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--junit") && strstr(error.message, "does not exist"), "%s",
              error.message);
    /* a file stands where the folder should be */
    snprintf(path, sizeof path, "%s/results.h5/report.md", folder);
    cr_expect_eq(output_file_check(path, "--markdown", &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--markdown") && strstr(error.message, "not a folder"), "%s",
              error.message);
    cr_expect_eq(output_file_check("", "-o", &error), CPPARITY_ERROR_INPUT);
    cr_expect_eq(test_count_entries(folder), 1, "only results.h5 may be there");
}
