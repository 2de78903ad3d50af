/*
 * test_hdf5_guard.c — reading in a forked child first (results_model/hdf5_guard.h): a reader that
 * returns is the reader's result, one that crashes, hangs or dies is a damaged file named with
 * the last place the reader marked, and the parent goes on. The HDF5 library's own crashes are
 * replayed from real damaged files by integrity/damaged-files-exit-2; here the readers crash on
 * purpose, outside HDF5.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/monotonic_clock.h"
#include "results_model/hdf5_guard.h"

static cpparity_status read_fine(void *context, cpparity_error *error) {
    (void)error;
    hdf5_guard_at("/model", "digest");
    *(int *)context = 1; /* the child's memory: the parent's stays 0 */
    return CPPARITY_OK;
}

static cpparity_status refuse(void *context, cpparity_error *error) {
    (void)context;
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "dump.h5: /logits: shape [2, 3]");
}

static cpparity_status crash(void *context, cpparity_error *error) {
    (void)context;
    (void)error;
    hdf5_guard_at("/", "framework");
    raise(SIGSEGV);
    return CPPARITY_OK;
}

static cpparity_status hang(void *context, cpparity_error *error) {
    (void)context;
    (void)error;
    hdf5_guard_at("/gradients/model.norm.weight", NULL);
    for (;;) {
        pause();
    }
    return CPPARITY_OK;
}

static cpparity_status leave(void *context, cpparity_error *error) {
    (void)context;
    (void)error;
    hdf5_guard_at("/logits", NULL);
    _exit(3); /* as a sanitizer ends a process it found a bad access in */
}

Test(hdf5_guard, reader_succeeds__ok_and_the_parent_untouched) {
    int touched = 0;
    cpparity_error error = {0};
    cr_assert_eq(hdf5_guard_read("dump.h5", 1000, read_fine, &touched, &error), CPPARITY_OK, "%s",
                 error.message);
    cr_expect_eq(touched, 0, "the reader ran in another process");
}

Test(hdf5_guard, reader_refuses__its_status_and_message) {
    cpparity_error error = {0};
    cr_assert_eq(hdf5_guard_read("dump.h5", 1000, refuse, NULL, &error), CPPARITY_ERROR_INPUT);
    cr_expect_str_eq(error.message, "dump.h5: /logits: shape [2, 3]");
}

Test(hdf5_guard, reader_crashes__damaged_naming_where_and_the_signal) {
    cpparity_error error = {0};
    cr_assert_eq(hdf5_guard_read("dump.h5", 1000, crash, NULL, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "dump.h5: reading /: attribute 'framework' crashed") != NULL,
              "%s", error.message);
    cr_expect(strstr(error.message, "SIGSEGV") != NULL, "%s", error.message);
    /* raised outside HDF5: named as cpparity's own, never blamed on the library */
    cr_expect(strstr(error.message, "inside the HDF5 library") == NULL, "%s", error.message);
}

Test(hdf5_guard, reader_hangs__killed_at_the_limit_and_named) {
    setenv("CPPARITY_HDF5_READ_SECONDS", "0.2", 1);
    cpparity_error error = {0};
    const double started = monotonic_seconds();
    cr_assert_eq(hdf5_guard_read("dump.h5", 0, hang, NULL, &error), CPPARITY_ERROR_INPUT);
    const double seconds = monotonic_seconds() - started;
    /* 0.2 s limit; 5 s leaves room for a loaded machine, far below a hang */
    cr_expect(seconds >= 0.2 && seconds < 5.0, "%g s", seconds);
    cr_expect(strstr(error.message, "dump.h5 is damaged: reading /gradients/model.norm.weight "
                                    "hung") != NULL,
              "%s", error.message);
    unsetenv("CPPARITY_HDF5_READ_SECONDS");
}

Test(hdf5_guard, reader_exits_early__damaged) {
    cpparity_error error = {0};
    cr_assert_eq(hdf5_guard_read("dump.h5", 0, leave, NULL, &error), CPPARITY_ERROR_INPUT);
    cr_expect(strstr(error.message, "dump.h5 is damaged: reading /logits ended the reading "
                                    "process (exit status 3)") != NULL,
              "%s", error.message);
}

Test(hdf5_guard, time_limit__grows_with_the_file) {
    unsetenv("CPPARITY_HDF5_READ_SECONDS");
    cr_expect_eq(hdf5_guard_seconds(0), 10.0);
    cr_expect_eq(hdf5_guard_seconds((int64_t)64 << 20), 18.0); /* 1 s per 8 MiB */
    setenv("CPPARITY_HDF5_READ_SECONDS", "2", 1);
    cr_expect_eq(hdf5_guard_seconds(0), 2.0);
    setenv("CPPARITY_HDF5_READ_SECONDS", "soon", 1); /* not a number: the default */
    cr_expect_eq(hdf5_guard_seconds(0), 10.0);
    unsetenv("CPPARITY_HDF5_READ_SECONDS");
}
