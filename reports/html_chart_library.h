/*
 * html_chart_library.h — the plotting library an HTML report inlines: Chart.js from Debian's
 * libjs-chart.js, read at run time from where CMake found it when cpparity was configured
 * (/usr/share/javascript/chart.js/chart.min.js), or from the file the environment variable
 * CPPARITY_CHART_JS names.
 */
#ifndef CPPARITY_REPORTS_HTML_CHART_LIBRARY_H
#define CPPARITY_REPORTS_HTML_CHART_LIBRARY_H

#include <stddef.h>

#include "common/error.h"

#define HTML_CHART_LIBRARY_PACKAGE "libjs-chart.js" /* the Debian package that provides it */
#define HTML_CHART_LIBRARY_MAX_BYTES (16u << 20)    /* a larger file is not Chart.js */

/* The library's path: $CPPARITY_CHART_JS when set and not empty, else the path CMake found at
 * configure time; NULL when there is neither. */
const char *html_chart_library_path(void);

/* Reads the library at path into *text (NUL-terminated, the caller frees it). A missing or
 * unreadable file is CPPARITY_ERROR_RUNTIME naming the path and the package to install; so is a
 * file that could not sit inside a <script> element ("</script" or "<!--" in it). */
cpparity_status html_chart_library_read(const char *path, char **text, cpparity_error *error);

#endif
