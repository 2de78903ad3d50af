/* html_chart_library.c — the plotting library a report inlines (see html_chart_library.h). */
#include "reports/html_chart_library.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef CPPARITY_CHART_JS_PATH
#define CPPARITY_CHART_JS_PATH "" /* set by reports/CMakeLists.txt */
#endif

const char *html_chart_library_path(void) {
    const char *environment = getenv("CPPARITY_CHART_JS");
    if (environment != NULL && environment[0] != '\0') {
        return environment;
    }
    return CPPARITY_CHART_JS_PATH[0] != '\0' ? CPPARITY_CHART_JS_PATH : NULL;
}

/* True when text holds word, ASCII letters compared without case. */
static bool contains_folded(const char *text, size_t length, const char *word) {
    const size_t word_length = strlen(word);
    for (size_t i = 0; i + word_length <= length; i++) {
        size_t k = 0;
        while (k < word_length && tolower((unsigned char)text[i + k]) == word[k]) {
            k++;
        }
        if (k == word_length) {
            return true;
        }
    }
    return false;
}

cpparity_status html_chart_library_read(const char *path, char **text, cpparity_error *error) {
    *text = NULL;
    FILE *file = fopen(path, "rb");
    struct stat status;
    if (file == NULL || fstat(fileno(file), &status) != 0 || !S_ISREG(status.st_mode)) {
        const int reason = file == NULL ? errno : EISDIR;
        if (file != NULL) {
            fclose(file);
        }
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "the plotting library Chart.js cannot be read at %s (%s): "
                                  "install Debian's %s (apt-get install %s), or name the file "
                                  "in CPPARITY_CHART_JS",
                                  path, strerror(reason), HTML_CHART_LIBRARY_PACKAGE,
                                  HTML_CHART_LIBRARY_PACKAGE);
    }
    if ((unsigned long long)status.st_size > HTML_CHART_LIBRARY_MAX_BYTES) {
        fclose(file);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s: %lld bytes, more than Chart.js ever takes (%u): not the "
                                  "plotting library of %s",
                                  path, (long long)status.st_size, HTML_CHART_LIBRARY_MAX_BYTES,
                                  HTML_CHART_LIBRARY_PACKAGE);
    }
    const size_t size = (size_t)status.st_size;
    char *buffer = malloc(size + 1);
    if (buffer == NULL) {
        fclose(file);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory reading %s", path);
    }
    const size_t read = fread(buffer, 1, size, file);
    const bool failed = ferror(file) != 0 || read != size;
    fclose(file);
    if (failed) {
        free(buffer);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "cannot read %s: %s", path,
                                  strerror(errno != 0 ? errno : EIO));
    }
    buffer[size] = '\0';
    if (memchr(buffer, '\0', size) != NULL || contains_folded(buffer, size, "</script") ||
        contains_folded(buffer, size, "<!--")) {
        free(buffer);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "%s cannot be inlined into a page (it holds a NUL byte, "
                                  "\"</script\" or \"<!--\"): not the minified Chart.js of %s",
                                  path, HTML_CHART_LIBRARY_PACKAGE);
    }
    *text = buffer;
    return CPPARITY_OK;
}
