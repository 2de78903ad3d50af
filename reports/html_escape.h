/*
 * html_escape.h — text made safe for an HTML page, as HTML text (element content or a quoted
 * attribute value) and as JSON inside a <script type="application/json"> block.
 *
 * Both write pure ASCII, whatever the input: non-ASCII characters become numeric references
 * (&#xE9; in HTML, \u00e9 in JSON, surrogate pairs above U+FFFF), and bytes that are not UTF-8,
 * and control characters other than tab and newline, become U+FFFD. '<', '>' and '&' never
 * appear raw in JSON (\u003c, \u003e, \u0026), so neither "</script" nor "<!--" can end or
 * confuse the script block that holds it.
 */
#ifndef CPPARITY_REPORTS_HTML_ESCAPE_H
#define CPPARITY_REPORTS_HTML_ESCAPE_H

#include <stdio.h>

/* text as HTML: & < > " ' as entities, non-ASCII as &#xHHHH;. */
void html_put_text(FILE *out, const char *text);

/* text as a JSON string, quotes included. */
void json_put_string(FILE *out, const char *text);

/* A number as JSON: %.6g (plots need no more), null when not finite (JSON has no NaN or
 * infinity). */
void json_put_number(FILE *out, double value);

#endif
