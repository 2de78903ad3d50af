/*
 * test_output_file.c — result and export files appear complete or not at all, and never
 * replace an existing file.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/output_file.h"
#include "tests/support/test_files.h"

static void write_text(const char *path, const char *text) {
    FILE *stream = fopen(path, "w");
    cr_assert_not_null(stream);
    fputs(text, stream);
    fclose(stream);
}

/* output_file_write_text's writer: puts the text context. */
static void fputs_text(FILE *stream, const void *text) {
    fputs(text, stream);
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

/* --- outputs published together, claims, signals ---------------------------------------------- */

/* A fresh folder with two outputs staged in set: folder/results.h5 ("results", --out) and
 * folder/report.xml ("report", --junit), written but not published. */
static void stage_two_outputs(output_set *set, char folder[64], char first[128], char second[128]) {
    test_make_folder(folder, 64);
    snprintf(first, 128, "%s/results.h5", folder);
    snprintf(second, 128, "%s/report.xml", folder);
    output_file *file = NULL;
    cr_assert_eq(output_set_add(set, first, "--out", &file, NULL), CPPARITY_OK);
    write_text(file->temporary, "results");
    cr_assert_eq(output_set_add(set, second, "--junit", &file, NULL), CPPARITY_OK);
    write_text(file->temporary, "report");
}

Test(output_set, publish__every_file_appears_and_no_temporary_remains) {
    char folder[64], first[128], second[128], text[32];
    output_set set = {0};
    stage_two_outputs(&set, folder, first, second);
    cr_expect_eq(test_count_entries(folder), 2, "only the two temporary files before publishing");
    cr_assert_eq(output_set_publish(&set, NULL), CPPARITY_OK);
    read_text(first, text, sizeof text);
    cr_expect_str_eq(text, "results");
    read_text(second, text, sizeof text);
    cr_expect_str_eq(text, "report");
    cr_expect_eq(test_count_entries(folder), 2, "the two outputs, no temporary file");
    unlink(first);
    unlink(second);
    rmdir(folder);
}

Test(output_set, one_output_failing_to_publish__none_is_published_and_nothing_is_left) {
    char folder[64], first[128], second[128], text[32];
    output_set set = {0};
    stage_two_outputs(&set, folder, first, second);
    write_text(second, "someone else's"); /* appears while the run computes */
    cpparity_error error;
    cr_expect_eq(output_set_publish(&set, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "--junit") && strstr(error.message, second), "%s",
              error.message);
    struct stat status;
    cr_expect_neq(stat(first, &status), 0, "the results file published first must be taken back");
    read_text(second, text, sizeof text);
    cr_expect_str_eq(text, "someone else's", "the other file must be left as it was");
    cr_expect_eq(test_count_entries(folder), 1, "no temporary file may be left behind");
    unlink(second);
    rmdir(folder);
}

Test(output_set, write_text_into_a_full_disk__names_the_flag_the_file_and_the_reason) {
    /* /dev/full fails every write with ENOSPC: the staged file's temporary is pointed there */
    output_file file = {.destination = "summary.md", .flag = "--markdown", .slot = -1};
    snprintf(file.temporary, sizeof file.temporary, "/dev/full");
    cpparity_error error;
    cr_expect_eq(output_file_write_text(&file, fputs_text, "x", &error), CPPARITY_ERROR_RUNTIME);
    cr_expect(strstr(error.message, "--markdown summary.md") &&
                  strstr(error.message, "No space left on device"),
              "%s", error.message);
}

Test(output_claim, second_claim__refused_naming_the_holder_and_released_claims_are_gone) {
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    output_claim first, second;
    cpparity_error error;
    cr_assert_eq(output_file_claim(&first, path, "--out", &error), CPPARITY_OK, "%s",
                 error.message);
    cr_expect_eq(output_file_claim(&second, path, "--out", &error), CPPARITY_ERROR_INPUT);
    char holder[64];
    snprintf(holder, sizeof holder, "process %ld", (long)getpid());
    cr_expect(strstr(error.message, "--out") && strstr(error.message, holder) &&
                  strstr(error.message, "writing it already"),
              "%s", error.message);
    output_file_release(&first);
    output_file_release(&second); /* never held: harmless */
    cr_expect_eq(test_count_entries(folder), 0, "a released claim leaves nothing");
    rmdir(folder);
}

Test(output_claim, claim_of_a_process_that_is_gone__is_taken_over) {
    char folder[64], path[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        output_claim claim;
        _exit(output_file_claim(&claim, path, "--out", NULL) == CPPARITY_OK ? 0 : 1);
    }
    int wait_status = 0;
    waitpid(child, &wait_status, 0); /* exited holding its claim, like a killed run */
    cr_assert(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
    cr_expect_eq(test_count_entries(folder), 1, "the dead process's claim is there");
    output_claim claim;
    cpparity_error error;
    cr_expect_eq(output_file_claim(&claim, path, "--out", &error), CPPARITY_OK, "%s",
                 error.message);
    output_file_release(&claim);
    cr_expect_eq(test_count_entries(folder), 0);
    rmdir(folder);
}

/* In a child: installs the handlers, begins an output, writes half of it, then sends itself
 * signal_number (deferred first when defer). Returns the child's wait status. */
static int signalled_child(const char *path, int signal_number, bool defer, const char *marker) {
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        interrupt_install("test");
        interrupt_set_activity("case 'x' (cp 2, f32)");
        output_file file;
        if (output_file_begin(&file, path, "--out", NULL) != CPPARITY_OK) {
            _exit(99);
        }
        write_text(file.temporary, "half");
        if (defer) {
            interrupt_defer();
        }
        raise(signal_number);
        if (defer) {
            write_text(marker, "the signal waited"); /* only reached while deferred */
            interrupt_resume();                      /* the deferred signal takes effect */
        }
        _exit(98); /* not reached: the signal ends the process */
    }
    int wait_status = 0;
    waitpid(child, &wait_status, 0);
    return wait_status;
}

Test(interrupt, signal_during_a_write__removes_the_temporary_file_and_exits_128_plus_n) {
    const int signals[] = {SIGINT, SIGTERM, SIGHUP};
    const int codes[] = {130, 143, 129};
    for (int s = 0; s < 3; s++) {
        char folder[64], path[128];
        test_make_folder(folder, sizeof folder);
        snprintf(path, sizeof path, "%s/results.h5", folder);
        const int wait_status = signalled_child(path, signals[s], false, NULL);
        cr_expect(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == codes[s],
                  "signal %d: wait status %d", signals[s], wait_status);
        cr_expect_eq(test_count_entries(folder), 0, "signal %d left a file", signals[s]);
        rmdir(folder);
    }
}

Test(interrupt, deferred_signal__takes_effect_when_deferral_ends) {
    char folder[64], path[128], marker[128];
    test_make_folder(folder, sizeof folder);
    snprintf(path, sizeof path, "%s/results.h5", folder);
    snprintf(marker, sizeof marker, "%s/marker", folder);
    const int wait_status = signalled_child(path, SIGTERM, true, marker);
    cr_expect(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 143, "wait status %d",
              wait_status);
    struct stat status;
    cr_expect_eq(stat(marker, &status), 0, "the process must run on until interrupt_resume");
    cr_expect_eq(test_count_entries(folder), 1, "only the marker: the temporary file is removed");
    unlink(marker);
    rmdir(folder);
}

Test(interrupt, signal_ignored_when_the_process_started__stays_ignored) {
    /* nohup starts a command with SIGHUP ignored; a shell's background job, SIGINT */
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        signal(SIGHUP, SIG_IGN);
        interrupt_install("test");
        raise(SIGHUP);
        _exit(0); /* reached: SIGHUP stayed ignored */
    }
    int wait_status = 0;
    waitpid(child, &wait_status, 0);
    cr_expect(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0, "wait status %d",
              wait_status);
}
