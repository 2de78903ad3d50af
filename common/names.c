/* names.c — lookups in enumeration name tables (see names.h). */
#include "common/names.h"

#include <stdio.h>
#include <string.h>

const char *cpparity_name_of(const char *const *names, int count, int value) {
    return value >= 0 && value < count ? names[value] : "unknown";
}

int cpparity_name_index(const char *const *names, int count, const char *text) {
    for (int i = 0; text != NULL && i < count; i++) {
        if (strcmp(names[i], text) == 0) {
            return i;
        }
    }
    return -1;
}

void cpparity_names_join(const char *const *names, int count, const char *separator,
                         const char *last_separator, char *buffer, unsigned long size) {
    unsigned long used = 0;
    if (size == 0) {
        return;
    }
    buffer[0] = '\0';
    for (int i = 0; i < count && used < size; i++) {
        const char *between = i == 0 ? "" : i == count - 1 ? last_separator : separator;
        int written = snprintf(buffer + used, size - used, "%s%s", between, names[i]);
        if (written < 0) {
            return;
        }
        used += (unsigned long)written;
    }
}
