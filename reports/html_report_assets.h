/*
 * html_report_assets.h — the style sheet and script of `cpparity report` pages, compiled in from
 * reports/html_report.css and reports/html_report.js (reports/embed_text.cmake), so a page never
 * needs a file next to it.
 */
#ifndef CPPARITY_REPORTS_HTML_REPORT_ASSETS_H
#define CPPARITY_REPORTS_HTML_REPORT_ASSETS_H

extern const char html_report_style[];  /* html_report.css, NUL-terminated */
extern const char html_report_script[]; /* html_report.js, NUL-terminated */

#endif
