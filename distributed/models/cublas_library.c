/*
 * cublas_library.c — cuBLAS opened with dlopen on first use (cublas_library.h).
 */
#include "distributed/models/cublas_library.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef CPPARITY_CUBLAS_SONAME
#error "CPPARITY_CUBLAS_SONAME (libcublas.so.<CUDA major version>) comes from the build"
#endif
#ifndef CPPARITY_CUBLAS_DIRECTORY
#define CPPARITY_CUBLAS_DIRECTORY ""
#endif

/* cublas_v2.h maps some names to their _v2 symbols with macros: expand before naming. */
#define CUBLAS_STRING_(name) #name
#define CUBLAS_SYMBOL(name) CUBLAS_STRING_(name)

/* Each pointer type of the table against the header's declaration, at compile time (_Generic's
 * operand is not evaluated: nothing here links against cuBLAS). */
#define CUBLAS_SAME_TYPE(function, field)                                                          \
    _Static_assert(                                                                                \
        _Generic(&(function), __typeof__(((cublas_library *)0)->field) : 1, default : 0),          \
        #function " matches cublas_library." #field)

static cublas_library loaded_table;
static char load_failure[1024];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void *open_library(void) {
    char tried[2][400] = {"", ""};
    void *handle = dlopen(CPPARITY_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL) {
        return handle;
    }
    snprintf(tried[0], sizeof tried[0], "%s", dlerror());
    if (CPPARITY_CUBLAS_DIRECTORY[0] != '\0') {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", CPPARITY_CUBLAS_DIRECTORY, CPPARITY_CUBLAS_SONAME);
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) {
            return handle;
        }
        snprintf(tried[1], sizeof tried[1], "; %s", dlerror());
    }
    snprintf(load_failure, sizeof load_failure,
             "cuBLAS could not be loaded (%s%s); put the folder holding %s on LD_LIBRARY_PATH",
             tried[0], tried[1], CPPARITY_CUBLAS_SONAME);
    return NULL;
}

static void load(void) {
    void *handle = open_library();
    if (handle == NULL) {
        return;
    }
    cublas_library table;
    struct {
        const char *symbol;
        void **slot;
    } wanted[] = {
        {CUBLAS_SYMBOL(cublasCreate), (void **)&table.create},
        {CUBLAS_SYMBOL(cublasDestroy), (void **)&table.destroy},
        {CUBLAS_SYMBOL(cublasSetStream), (void **)&table.set_stream},
        {CUBLAS_SYMBOL(cublasSetMathMode), (void **)&table.set_math_mode},
        {CUBLAS_SYMBOL(cublasSetAtomicsMode), (void **)&table.set_atomics_mode},
        {CUBLAS_SYMBOL(cublasSgemm), (void **)&table.sgemm},
        {CUBLAS_SYMBOL(cublasGetStatusName), (void **)&table.get_status_name},
        {CUBLAS_SYMBOL(cublasGetStatusString), (void **)&table.get_status_string},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        (void)dlerror();
        *wanted[i].slot = dlsym(handle, wanted[i].symbol);
        if (*wanted[i].slot == NULL) {
            const char *why = dlerror();
            snprintf(load_failure, sizeof load_failure, "cuBLAS (%s) has no %s: %s",
                     CPPARITY_CUBLAS_SONAME, wanted[i].symbol, why != NULL ? why : "a null symbol");
            (void)dlclose(handle);
            return;
        }
    }
    /* The handle stays open for the process's life: handles made from it may outlive any user. */
    loaded_table = table;
}

CUBLAS_SAME_TYPE(cublasCreate, create);
CUBLAS_SAME_TYPE(cublasDestroy, destroy);
CUBLAS_SAME_TYPE(cublasSetStream, set_stream);
CUBLAS_SAME_TYPE(cublasSetMathMode, set_math_mode);
CUBLAS_SAME_TYPE(cublasSetAtomicsMode, set_atomics_mode);
CUBLAS_SAME_TYPE(cublasSgemm, sgemm);
CUBLAS_SAME_TYPE(cublasGetStatusName, get_status_name);
CUBLAS_SAME_TYPE(cublasGetStatusString, get_status_string);

cpparity_status cublas_library_load(const cublas_library **library, cpparity_error *error) {
    *library = NULL;
    if (pthread_once(&load_once, load) != 0) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "cuBLAS: loading it failed");
    }
    if (loaded_table.create == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s", load_failure);
    }
    *library = &loaded_table;
    return CPPARITY_OK;
}

const char *cublas_library_status_name(cublasStatus_t status) {
    return loaded_table.get_status_name != NULL ? loaded_table.get_status_name(status)
                                                : "a status (cuBLAS not loaded)";
}

const char *cublas_library_status_string(cublasStatus_t status) {
    return loaded_table.get_status_string != NULL ? loaded_table.get_status_string(status) : "";
}
