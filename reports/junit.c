/* junit.c — a run's results as JUnit XML (see junit.h). */
#include "reports/junit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output_file.h"
#include "reports/failing_tensors.h"

/* Writes at most capacity bytes of text XML-escaped; in an attribute value line breaks and tabs
 * become character references so parsers keep them. Control characters XML 1.0 cannot carry are
 * written as '?'. */
static void put_escaped(FILE *out, const char *text, size_t capacity, bool attribute) {
    for (size_t i = 0; i < capacity && text[i] != '\0'; i++) {
        const unsigned char c = (unsigned char)text[i];
        switch (c) {
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
            fputs("&apos;", out);
            break;
        case '\n':
        case '\r':
        case '\t':
            if (attribute) {
                fprintf(out, "&#%d;", c);
            } else {
                fputc(c, out);
            }
            break;
        default:
            fputc(c < 0x20 || c == 0x7f ? '?' : c, out);
        }
    }
}

/* Escaped text of a NUL-terminated string. */
static void put_text(FILE *out, const char *text) {
    put_escaped(out, text, strlen(text), false);
}

/* An attribute ` name="value"` with value escaped (at most capacity bytes of it). */
static void put_attribute(FILE *out, const char *name, const char *value, size_t capacity) {
    fprintf(out, " %s=\"", name);
    put_escaped(out, value, capacity, true);
    fputc('"', out);
}

/* The file name of path without folder and last extension ("cases/ci.yaml" -> "ci"). */
static void suite_stem(const char *path, size_t capacity, char *stem, size_t stem_size) {
    char copy[512];
    snprintf(copy, sizeof copy, "%.*s", (int)strnlen(path, capacity), path);
    const char *slash = strrchr(copy, '/');
    const char *base = slash != NULL ? slash + 1 : copy;
    snprintf(stem, stem_size, "%s", base);
    char *dot = strrchr(stem, '.');
    if (dot != NULL && dot != stem) {
        *dot = '\0';
    }
    if (stem[0] == '\0') {
        snprintf(stem, stem_size, "suite");
    }
}

/* The body of a <failure>: the item's facts and its worst failing tensors. */
static void put_failure_body(FILE *out, const run_item *item) {
    char line[1024];
    snprintf(line, sizeof line,
             "tensors compared: %lld of %lld expected; gradients identical on every rank: %s; "
             "padded sequence length %lld\n",
             (long long)item->tensor_count, (long long)item->tensors_expected,
             item->gradients_identical ? "yes" : "no", (long long)item->padded_seq_len);
    put_text(out, line);
    int64_t count = 0;
    failing_tensor *failing = failing_tensors(item, &count);
    if (count < 0) {
        put_text(out, "(out of memory listing the failing tensors)\n");
        return;
    }
    for (int64_t f = 0; f < count && f < JUNIT_FAILING_TENSORS_LISTED; f++) {
        const tensor_record *record = &item->tensors[failing[f].index];
        char worst[96], origin[192];
        failing_tensors_worst_coordinates(record, worst, sizeof worst);
        failing_tensors_limit_origin(record, "x", origin, sizeof origin);
        const deciding_limit decided = tensor_record_deciding_limit(record);
        snprintf(line, sizeof line,
                 "%.*s rank %d: error %.4g%s, limit %.4g (%s) = %s, non-finite %lld; worst "
                 "element %s: %.6g vs reference %.6g\n    reason: %.*s\n",
                 (int)sizeof record->name, record->name, record->rank, record->metrics.relative_l2,
                 record->metrics.absolute ? " (absolute)" : "", decided.limit, decided.rule, origin,
                 (long long)record->metrics.nonfinite, worst, record->metrics.worst_value,
                 record->metrics.worst_reference, (int)sizeof record->decision.reason,
                 record->decision.reason);
        put_text(out, line);
    }
    if (count > JUNIT_FAILING_TENSORS_LISTED) {
        snprintf(line, sizeof line, "... and %lld more failing tensors (see the results file)\n",
                 (long long)(count - JUNIT_FAILING_TENSORS_LISTED));
        put_text(out, line);
    }
    free(failing);
}

static void put_testcase(FILE *out, const run_item *item) {
    char stem[512], classname[700], name[96], variant[48];
    suite_stem(item->suite_path, sizeof item->suite_path, stem, sizeof stem);
    snprintf(classname, sizeof classname, "%s.%.*s", stem, CPPARITY_CASE_NAME,
             failing_tensors_case_name(item));
    /* "cp4-f32", or "cp4-zigzag-ring-f32" for another layout or algorithm */
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    for (char *c = variant; *c != '\0'; c++) {
        *c = *c == ' ' ? '-' : *c;
    }
    snprintf(name, sizeof name, "cp%lld-%s%s%s", (long long)item->cp, variant,
             variant[0] != '\0' ? "-" : "", cpparity_dtype_name(item->dtype));
    fputs("  <testcase", out);
    put_attribute(out, "classname", classname, sizeof classname);
    put_attribute(out, "name", name, sizeof name);
    fprintf(out, " time=\"%.3f\">\n", item->seconds + item->reference_seconds);
    const size_t message = sizeof item->message;
    switch (item->outcome) {
    case RUN_FAIL:
        fputs("    <failure", out);
        put_attribute(out, "message", item->message, message);
        fputs(" type=\"parity\">", out);
        put_failure_body(out, item);
        fputs("</failure>\n", out);
        break;
    case RUN_ERROR:
        fputs("    <error", out);
        put_attribute(out, "message", item->message, message);
        fputs(" type=\"error\">", out);
        put_escaped(out, item->message, message, false);
        fputs("</error>\n", out);
        break;
    case RUN_NOT_RUN:
    case RUN_NOT_CLAIMED:
        fputs("    <skipped", out);
        put_attribute(out, "message", item->message, message);
        fputs("/>\n", out);
        break;
    case RUN_REFUSED:
        fputs("    <system-out>refused as expected: ", out);
        put_escaped(out, item->message, message, false);
        fputs("</system-out>\n", out);
        break;
    case RUN_PASS:
        if (item->worst_tensor >= 0 && item->worst_tensor < item->tensor_count) {
            const tensor_record *worst = &item->tensors[item->worst_tensor];
            char line[256];
            const deciding_limit decided = tensor_record_deciding_limit(worst);
            snprintf(line, sizeof line, "worst tensor %.*s rank %d: error %.4g, limit %.4g (%s)",
                     (int)sizeof worst->name, worst->name, worst->rank, worst->metrics.relative_l2,
                     decided.limit, decided.rule);
            fputs("    <system-out>", out);
            put_text(out, line);
            fputs("</system-out>\n", out);
        }
        break;
    }
    fputs("  </testcase>\n", out);
}

/* <property name="..." value="..."/> */
static void put_property(FILE *out, const char *name, const char *value, size_t capacity) {
    fputs("    <property", out);
    put_attribute(out, "name", name, strlen(name));
    put_attribute(out, "value", value, capacity);
    fputs("/>\n", out);
}

static void put_suite(FILE *out, const run_results *results) {
    int64_t failures = 0, errors = 0, skipped = 0;
    double seconds = 0;
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        failures += item->outcome == RUN_FAIL;
        errors += item->outcome == RUN_ERROR;
        skipped += item->outcome == RUN_NOT_RUN || item->outcome == RUN_NOT_CLAIMED;
        seconds += item->seconds + item->reference_seconds;
    }
    const run_provenance *p = &results->provenance;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
    fprintf(out,
            "<testsuite name=\"cpparity\" tests=\"%lld\" failures=\"%lld\" errors=\"%lld\" "
            "skipped=\"%lld\" time=\"%.3f\"",
            (long long)results->item_count, (long long)failures, (long long)errors,
            (long long)skipped, seconds);
    put_attribute(out, "timestamp", p->start_time, sizeof p->start_time);
    put_attribute(out, "hostname", p->host, sizeof p->host);
    fputs(">\n  <properties>\n", out);
    char number[32];
    put_property(out, "version", p->version, sizeof p->version);
    put_property(out, "git_commit", p->git_commit, sizeof p->git_commit);
    put_property(out, "compiler", p->compiler, sizeof p->compiler);
    put_property(out, "libraries", p->libraries, sizeof p->libraries);
    put_property(out, "command_line", p->command_line, sizeof p->command_line);
    put_property(out, "comm", p->comm, sizeof p->comm);
    put_property(out, "device", p->device, sizeof p->device);
    put_property(out, "kernel", p->kernel, sizeof p->kernel);
    snprintf(number, sizeof number, "%d", p->ranks);
    put_property(out, "ranks", number, sizeof number);
    snprintf(number, sizeof number, "%llu", (unsigned long long)p->seed);
    put_property(out, "seed", p->seed_overridden ? number : "per case", sizeof number);
    put_property(out, "store", p->store, sizeof p->store);
    put_property(out, "end_time", p->end_time, sizeof p->end_time);
    fputs("  </properties>\n", out);
    for (int64_t i = 0; i < results->item_count; i++) {
        put_testcase(out, &results->items[i]);
    }
    fputs("</testsuite>\n", out);
}

/* put_suite's shape for output_file_write_text. */
static void put_report(FILE *out, const void *results) {
    put_suite(out, results);
}

cpparity_status junit_write_staged(const run_results *results, const output_file *file,
                                   cpparity_error *error) {
    return output_file_write_text(file, put_report, results, error);
}

cpparity_status junit_write(const run_results *results, const char *path, cpparity_error *error) {
    return output_file_publish_text(path, "--junit", put_report, results, error);
}
