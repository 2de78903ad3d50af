/* html_escape.c — text made safe for HTML and for JSON in a script block (see html_escape.h). */
#include "reports/html_escape.h"

#include <math.h>
#include <stdbool.h>

#define REPLACEMENT_CHARACTER 0xFFFDL

/* Decodes the UTF-8 character at text into *code and returns the bytes it takes (at least 1).
 * A byte that does not start a well-formed character (overlong forms, surrogates and values
 * above U+10FFFF included) is one byte of U+FFFD. */
static int utf8_next(const unsigned char *text, long *code) {
    const unsigned char lead = text[0];
    int length;
    long value, smallest;
    if (lead < 0x80) {
        *code = lead;
        return 1;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2, value = lead & 0x1F, smallest = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3, value = lead & 0x0F, smallest = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4, value = lead & 0x07, smallest = 0x10000;
    } else {
        *code = REPLACEMENT_CHARACTER;
        return 1;
    }
    for (int i = 1; i < length; i++) {
        if ((text[i] & 0xC0) != 0x80) { /* also stops at the terminating NUL */
            *code = REPLACEMENT_CHARACTER;
            return 1;
        }
        value = (value << 6) | (text[i] & 0x3F);
    }
    if (value < smallest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
        *code = REPLACEMENT_CHARACTER;
        return 1;
    }
    *code = value;
    return length;
}

/* Control characters other than tab and newline (C0, DEL, C1) have no place in a report. */
static long printable(long code) {
    const bool control =
        (code < 0x20 && code != '\t' && code != '\n') || (code >= 0x7F && code <= 0x9F);
    return control ? REPLACEMENT_CHARACTER : code;
}

void html_put_text(FILE *out, const char *text) {
    const unsigned char *at = (const unsigned char *)text;
    while (*at != '\0') {
        long code;
        at += utf8_next(at, &code);
        code = printable(code);
        switch (code) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            if (code < 0x80) {
                fputc((int)code, out);
            } else {
                fprintf(out, "&#x%lX;", code);
            }
        }
    }
}

void json_put_string(FILE *out, const char *text) {
    fputc('"', out);
    const unsigned char *at = (const unsigned char *)text;
    while (*at != '\0') {
        long code;
        at += utf8_next(at, &code);
        code = printable(code);
        if (code == '"' || code == '\\') {
            fprintf(out, "\\%c", (int)code);
        } else if (code == '\n') {
            fputs("\\n", out);
        } else if (code == '\t') {
            fputs("\\t", out);
        } else if (code == '<' || code == '>' || code == '&') {
            fprintf(out, "\\u%04lx", code);
        } else if (code < 0x80) {
            fputc((int)code, out);
        } else if (code < 0x10000) {
            fprintf(out, "\\u%04lx", code);
        } else {
            const long offset = code - 0x10000;
            fprintf(out, "\\u%04lx\\u%04lx", 0xD800 + (offset >> 10), 0xDC00 + (offset & 0x3FF));
        }
    }
    fputc('"', out);
}

void json_put_number(FILE *out, double value) {
    if (isfinite(value)) {
        fprintf(out, "%.6g", value);
    } else {
        fputs("null", out);
    }
}
