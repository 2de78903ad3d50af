/*
 * test_cublas_library.c — cuBLAS opened on first use (distributed/models/cublas_library.h), no GPU
 * needed: opening the library and resolving its functions never touch a device.
 *
 * Built twice: against this toolkit's cuBLAS (the table is complete, the same for every caller
 * and thread, and names statuses as cuBLAS does), and with CPPARITY_TEST_CUBLAS_MISSING against a
 * soname and folder that do not exist (the load fails, every time, with a message naming the
 * library and what to do).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "distributed/models/cublas_library.h"

#ifndef CPPARITY_TEST_CUBLAS_MISSING

#define THREADS 8

static void *load_on_a_thread(void *out) {
    cpparity_error error = {0};
    const cublas_library *library = NULL;
    (void)cublas_library_load(&library, &error);
    *(const cublas_library **)out = library;
    return NULL;
}

Test(cublas_library, loads_every_function_once_for_every_thread) {
    pthread_t threads[THREADS];
    const cublas_library *seen[THREADS] = {NULL};
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(pthread_create(&threads[i], NULL, load_on_a_thread, &seen[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(pthread_join(threads[i], NULL), 0);
    }
    cpparity_error error = {0};
    const cublas_library *library = NULL;
    cr_assert_eq(cublas_library_load(&library, &error), CPPARITY_OK, "%s", error.message);
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(seen[i], library, "thread %d got another table", i);
    }
    const void *functions[] = {
        (const void *)library->create,           (const void *)library->destroy,
        (const void *)library->set_stream,       (const void *)library->set_math_mode,
        (const void *)library->set_atomics_mode, (const void *)library->sgemm,
        (const void *)library->get_status_name,  (const void *)library->get_status_string,
    };
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        cr_assert_not_null(functions[i], "function %zu of the table is missing", i);
    }
}

Test(cublas_library, statuses_are_named_by_cublas) {
    cpparity_error error = {0};
    const cublas_library *library = NULL;
    cr_assert_eq(cublas_library_load(&library, &error), CPPARITY_OK, "%s", error.message);
    cr_assert_str_eq(cublas_library_status_name(CUBLAS_STATUS_NOT_INITIALIZED),
                     "CUBLAS_STATUS_NOT_INITIALIZED");
    cr_assert_str_eq(cublas_library_status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
    cr_assert_gt(strlen(cublas_library_status_string(CUBLAS_STATUS_INVALID_VALUE)), 0);
}

#else

Test(cublas_library, a_missing_library_is_an_error_naming_it_every_time) {
    for (int attempt = 0; attempt < 2; attempt++) {
        cpparity_error error = {0};
        const cublas_library *library = (const cublas_library *)&error; /* must be cleared */
        cr_assert_eq(cublas_library_load(&library, &error), CPPARITY_ERROR_RUNTIME);
        cr_assert_null(library);
        cr_assert(strstr(error.message, "cuBLAS could not be loaded") != NULL, "%s", error.message);
        cr_assert(strstr(error.message, CPPARITY_CUBLAS_SONAME) != NULL, "%s", error.message);
        cr_assert(strstr(error.message, "LD_LIBRARY_PATH") != NULL, "%s", error.message);
    }
    cr_assert_str_eq(cublas_library_status_name(CUBLAS_STATUS_SUCCESS),
                     "a status (cuBLAS not loaded)");
}

#endif
