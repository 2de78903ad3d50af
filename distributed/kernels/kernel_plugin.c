/* kernel_plugin.c — kernels from a shared library (see kernel_plugin.h). */
#include "distributed/kernels/kernel_plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "distributed/kernels/kernel_registry.h"

#define PLUGIN_MAX_KERNELS 16

/* The plugins' descriptors as the registry holds them: each copied whole into cpparity's own
 * cpparity_attention_kernel, fields past the plugin's struct_size zeroed (an older plugin has
 * no workspace_bytes), so that nothing reads past the end of a plugin's smaller descriptor; a
 * NULL version (optional) reads as "". */
static cpparity_attention_kernel copies[KERNEL_REGISTRY_CAPACITY];
static int copy_count;

/* A copy of what the plugin's descriptor holds (its first struct_size bytes); the descriptor
 * itself when it is too small for ABI 2, which the registry refuses saying so, or when no copy is
 * left, which the registry, full, refuses too. */
static const cpparity_attention_kernel *copy_of(const cpparity_attention_kernel *kernel) {
    if (kernel->struct_size < CPPARITY_KERNEL_ABI2_STRUCT_SIZE ||
        copy_count == KERNEL_REGISTRY_CAPACITY) {
        return kernel;
    }
    cpparity_attention_kernel *copy = &copies[copy_count];
    memset(copy, 0, sizeof *copy);
    const size_t size = kernel->struct_size < sizeof *copy ? kernel->struct_size : sizeof *copy;
    memcpy(copy, kernel, size);
    copy->version = copy->version != NULL ? copy->version : ""; /* optional (kernel.h) */
    return copy;
}

/* The position of ":NAME" after ".so" in argument, or NULL. */
static const char *name_separator(const char *argument) {
    const char *so = strstr(argument, ".so:");
    const char *last = NULL;
    while (so != NULL) { /* the last ".so:" : a folder may be called x.so:y too */
        last = so;
        so = strstr(so + 1, ".so:");
    }
    return last != NULL ? last + 3 : NULL;
}

bool kernel_plugin_is_path(const char *argument) {
    const size_t length = strlen(argument);
    return strchr(argument, '/') != NULL ||
           (length > 3 && strcmp(argument + length - 3, ".so") == 0) ||
           name_separator(argument) != NULL;
}

cpparity_status kernel_plugin_load(const char *argument, const char *device,
                                   const cpparity_attention_kernel **kernel,
                                   cpparity_error *error) {
    *kernel = NULL;
    char path[4096];
    const char *separator = name_separator(argument);
    const char *wanted = separator != NULL ? separator + 1 : NULL;
    const int path_length = separator != NULL ? (int)(separator - argument) : (int)strlen(argument);
    /* dlopen searches the library path for a bare name: a plugin is always a file path */
    snprintf(path, sizeof path, "%s%.*s", strchr(argument, '/') != NULL ? "" : "./", path_length,
             argument);
    struct stat file;
    if (stat(path, &file) != 0 || !S_ISREG(file.st_mode)) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--kernel %s: no such file (a kernel plugin is a shared "
                                  "library built against include/cpparity/kernel.h)",
                                  path);
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "--kernel %s: cannot load it: %s",
                                  path, reason != NULL ? reason : "unknown dlopen error");
    }
    cpparity_kernel_plugin_entry entry;
    void *symbol = dlsym(library, CPPARITY_KERNEL_PLUGIN_ENTRY);
    memcpy(&entry, &symbol, sizeof entry); /* object to function pointer, as POSIX allows */
    if (symbol == NULL) {
        dlclose(library);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--kernel %s: no symbol %s: not a cpparity kernel plugin "
                                  "(include/cpparity/kernel.h says what to export)",
                                  path, CPPARITY_KERNEL_PLUGIN_ENTRY);
    }
    /* the newest version first; a plugin that does not speak it is asked for the older ones */
    int32_t count = -1;
    const cpparity_attention_kernel *const *kernels = NULL;
    for (uint32_t version = CPPARITY_KERNEL_ABI_VERSION;
         version >= CPPARITY_KERNEL_ABI_OLDEST && (kernels == NULL || count < 1); version--) {
        count = -1;
        kernels = entry(version, &count);
    }
    if (kernels == NULL || count < 1 || count > PLUGIN_MAX_KERNELS) {
        dlclose(library);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--kernel %s: %s(%u) returned %s%d kernels: the plugin does not "
                                  "speak ABI version %u (nor any down to %u), or offers no kernel "
                                  "(1 to %d expected)",
                                  path, CPPARITY_KERNEL_PLUGIN_ENTRY, CPPARITY_KERNEL_ABI_OLDEST,
                                  kernels == NULL ? "NULL and " : "", (int)count,
                                  CPPARITY_KERNEL_ABI_VERSION, CPPARITY_KERNEL_ABI_OLDEST,
                                  PLUGIN_MAX_KERNELS);
    }
    /* every kernel is checked (and registered) before any is used; the library stays loaded */
    char names[512] = "";
    size_t used = 0;
    const cpparity_attention_kernel *copied[PLUGIN_MAX_KERNELS] = {NULL};
    for (int32_t i = 0; i < count; i++) {
        cpparity_error why;
        if (kernels[i] == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "--kernel %s: kernel %d of %d is NULL", path, (int)i + 1,
                                      (int)count);
        }
        const cpparity_attention_kernel *copy = copy_of(kernels[i]);
        if (kernel_registry_add(copy, &why) != CPPARITY_OK) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "--kernel %s: %s", path,
                                      why.message);
        }
        copy_count += copy != kernels[i];
        copied[i] = copy;
        used += (size_t)snprintf(names + used, used < sizeof names ? sizeof names - used : 0,
                                 "%s%s (%s)", i > 0 ? ", " : "", copied[i]->name,
                                 kernel_device_name(copied[i]));
        used = used < sizeof names ? used : sizeof names;
    }
    int matches = 0;
    for (int32_t i = 0; i < count; i++) {
        const bool named = wanted != NULL && strcmp(copied[i]->name, wanted) == 0;
        const bool for_device = strcmp(kernel_device_name(copied[i]), device) == 0;
        if (named || (wanted == NULL && for_device)) {
            *kernel = copied[i];
            matches++;
        }
    }
    if (matches == 1) {
        return CPPARITY_OK;
    }
    *kernel = NULL;
    if (wanted != NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                  "--kernel %s: the plugin has no kernel called %s (it has: %s)",
                                  argument, wanted, names);
    }
    return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                              matches == 0 ? "--kernel %s: the plugin has no %s kernel (it has: "
                                             "%s)"
                                           : "--kernel %s: the plugin has several %s kernels "
                                             "(%s): choose one with --kernel PATH.so:NAME",
                              argument, device, names);
}
