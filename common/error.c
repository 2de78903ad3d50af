/* error.c — recording errors for the caller to report (see error.h). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>

cpparity_status cpparity_error_set(cpparity_error *error, cpparity_status status,
                                   const char *format, ...) {
    if (error != NULL) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error->message, sizeof error->message, format, arguments);
        va_end(arguments);
        error->status = status;
    }
    return status;
}

void cpparity_error_clear(cpparity_error *error) {
    if (error != NULL) {
        error->status = CPPARITY_OK;
        error->message[0] = '\0';
    }
}
