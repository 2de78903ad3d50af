/* diff_report.c — a results_diff as text and Markdown (see diff_report.h). */
#include "reports/diff_report.h"

#include <stdbool.h>
#include <string.h>

/* The order sections are printed in. */
static const diff_kind section_order[DIFF_KIND_COUNT] = {
    DIFF_NEW_FAILURE, DIFF_GREW,     DIFF_FIXED,    DIFF_STILL_FAILING,
    DIFF_CHANGED,     DIFF_ONLY_OLD, DIFF_ONLY_NEW,
};

/* One entry's detail in words. */
static void describe(char *text, size_t size, const diff_entry *entry, double factor) {
    switch (entry->kind) {
    case DIFF_GREW:
        snprintf(text, size, "%s rank %d: error %.3g -> %.3g (x%.3g > x%g), limit %.3g",
                 entry->tensor, entry->rank, entry->old_error, entry->new_error,
                 entry->old_error > 0 ? entry->new_error / entry->old_error : entry->new_error,
                 factor, entry->limit);
        break;
    case DIFF_ONLY_OLD:
        snprintf(text, size, "%s in the old run, absent from the new one", entry->old_outcome);
        break;
    case DIFF_ONLY_NEW:
        snprintf(text, size, "%s in the new run, absent from the old one", entry->new_outcome);
        break;
    default: {
        char layouts[48] = "";
        if (diff_entry_layout_unstated(entry)) {
            snprintf(layouts, sizeof layouts, " (layout %s -> %s)", entry->old_layout,
                     entry->new_layout);
        }
        snprintf(text, size, "%s -> %s%s%s%.300s", entry->old_outcome, entry->new_outcome, layouts,
                 entry->message[0] != '\0' ? ": " : "", entry->message);
        break;
    }
    }
}

void diff_report_console(FILE *stream, const results_diff *diff, const read_results *old_run,
                         const read_results *new_run) {
    fprintf(stream, "# cpparity diff\n# old: %s (%s, commit %s)\n# new: %s (%s, commit %s)\n",
            old_run->path, old_run->provenance.start_time, old_run->provenance.git_commit,
            new_run->path, new_run->provenance.start_time, new_run->provenance.git_commit);
    for (int k = 0; k < DIFF_KIND_COUNT; k++) {
        const diff_kind kind = section_order[k];
        for (int64_t e = 0; e < diff->count; e++) {
            const diff_entry *entry = &diff->entries[e];
            if (entry->kind != kind) {
                continue;
            }
            char detail[640];
            describe(detail, sizeof detail, entry, diff->factor);
            fprintf(stream, "%-13s %s %s cp %lld%s%s: %s\n", diff_kind_names[kind],
                    entry->case_name, entry->dtype, (long long)entry->cp,
                    entry->variant[0] != '\0' ? " " : "", entry->variant, detail);
        }
    }
    fprintf(stream,
            "# %lld items and %lld tensors compared: %lld new failures, %lld grown errors (x%g), "
            "%lld fixed, %lld still failing, %lld changed, %lld only in old, %lld only in new\n",
            (long long)diff->items_compared, (long long)diff->tensors_compared,
            (long long)diff->kinds[DIFF_NEW_FAILURE], (long long)diff->kinds[DIFF_GREW],
            diff->factor, (long long)diff->kinds[DIFF_FIXED],
            (long long)diff->kinds[DIFF_STILL_FAILING], (long long)diff->kinds[DIFF_CHANGED],
            (long long)diff->kinds[DIFF_ONLY_OLD], (long long)diff->kinds[DIFF_ONLY_NEW]);
    fprintf(stream, "# %s\n", diff->regressions > 0 ? "REGRESSED" : "NO REGRESSION");
}

/* Writes text into a Markdown table cell: '|' escaped, '<' as &lt;, line breaks as spaces. */
static void put_cell(FILE *out, const char *text) {
    for (; *text != '\0'; text++) {
        if (*text == '|') {
            fputs("\\|", out);
        } else if (*text == '<') {
            fputs("&lt;", out);
        } else if (*text == '\n' || *text == '\r') {
            fputc(' ', out);
        } else {
            fputc(*text, out);
        }
    }
}

typedef struct markdown_context {
    const results_diff *diff;
    const read_results *old_run, *new_run;
} markdown_context;

static void put_markdown(FILE *out, const void *argument) {
    const markdown_context *context = argument;
    const results_diff *diff = context->diff;
    fprintf(out, "## cpparity diff: %s\n\n", diff->regressions > 0 ? "REGRESSED" : "no regression");
    fputs("Old: `", out);
    put_cell(out, context->old_run->path);
    fprintf(out, "` (commit %s); new: `", context->old_run->provenance.git_commit);
    put_cell(out, context->new_run->path);
    fprintf(out,
            "` (commit %s). %lld items and %lld tensors compared; growth counts above x%g.\n\n",
            context->new_run->provenance.git_commit, (long long)diff->items_compared,
            (long long)diff->tensors_compared, diff->factor);
    if (diff->count == 0) {
        fputs("Nothing changed.\n", out);
        return;
    }
    fputs("| change | case | dtype | cp | detail |\n|---|---|---|---|---|\n", out);
    for (int k = 0; k < DIFF_KIND_COUNT; k++) {
        for (int64_t e = 0; e < diff->count; e++) {
            const diff_entry *entry = &diff->entries[e];
            if (entry->kind != section_order[k]) {
                continue;
            }
            char detail[640];
            describe(detail, sizeof detail, entry, diff->factor);
            fprintf(out, "| %s%s%s | ", entry->regression ? "**" : "", diff_kind_names[entry->kind],
                    entry->regression ? "**" : "");
            put_cell(out, entry->case_name);
            fprintf(out, " | %s | %lld%s%s | ", entry->dtype, (long long)entry->cp,
                    entry->variant[0] != '\0' ? " " : "", entry->variant);
            put_cell(out, detail);
            fputs(" |\n", out);
        }
    }
}

cpparity_status diff_report_markdown(const char *path, const results_diff *diff,
                                     const read_results *old_run, const read_results *new_run,
                                     cpparity_error *error) {
    const markdown_context context = {diff, old_run, new_run};
    return output_file_publish_text(path, "--markdown", put_markdown, &context, error);
}
