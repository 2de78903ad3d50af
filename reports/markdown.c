/* markdown.c — a run's results as a Markdown summary for CI job summaries (see markdown.h). */
#include "reports/markdown.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output_file.h"
#include "reports/failing_tensors.h"

/* Writes at most capacity bytes of text as a table cell's content: '|' as "\|", '<' as "&lt;"
 * (so it is not taken for HTML), line breaks and tabs as spaces, other control characters as
 * '?'. */
static void put_cell(FILE *out, const char *text, size_t capacity) {
    for (size_t i = 0; i < capacity && text[i] != '\0'; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c == '|') {
            fputs("\\|", out);
        } else if (c == '<') {
            fputs("&lt;", out);
        } else if (c == '\n' || c == '\r' || c == '\t') {
            fputc(' ', out);
        } else {
            fputc(c < 0x20 || c == 0x7f ? '?' : c, out);
        }
    }
}

/* put_cell of a NUL-terminated string. */
static void put_text(FILE *out, const char *text) {
    put_cell(out, text, strlen(text));
}

/* One row of the overview table. */
static void put_item_row(FILE *out, const run_item *item) {
    fputs("| ", out);
    put_cell(out, failing_tensors_case_name(item), CPPARITY_CASE_NAME);
    char cp[64];
    run_item_cp_label(item, cp, sizeof cp);
    fprintf(out, " | %s | %s | ", cp, cpparity_dtype_name(item->dtype));
    const bool bad = item->outcome == RUN_FAIL || item->outcome == RUN_ERROR;
    fprintf(out, bad ? "**%s** | " : "%s | ", run_outcome_name(item->outcome));
    if (item->worst_tensor >= 0 && item->worst_tensor < item->tensor_count) {
        const tensor_record *worst = &item->tensors[item->worst_tensor];
        put_cell(out, worst->name, sizeof worst->name);
        const deciding_limit decided = tensor_record_deciding_limit(worst);
        fprintf(out, " @ rank %d | %.3g | %.3g | %s | %.3g |\n", worst->rank,
                worst->metrics.relative_l2, decided.limit, decided.rule, item->worst_ratio);
    } else {
        fputs("- | - | - | - | - |\n", out);
    }
}

/* The section of a FAIL or ERROR item. */
static void put_item_section(FILE *out, const run_item *item) {
    fprintf(out, "\n### %s: ", run_outcome_name(item->outcome));
    put_cell(out, failing_tensors_case_name(item), CPPARITY_CASE_NAME);
    fprintf(out, ", cp %lld, %s", (long long)item->cp, cpparity_dtype_name(item->dtype));
    if (item->token_layout[0] != '\0' && strcmp(item->token_layout, "contiguous") != 0) {
        fprintf(out, ", layout %s", item->token_layout); /* a name from token_layout.h */
    }
    if (item->algorithm[0] != '\0' && strcmp(item->algorithm, "ulysses") != 0) {
        fprintf(out, ", algorithm %s", item->algorithm);
    }
    fputs("\n\n", out);
    put_cell(out, item->message, sizeof item->message);
    fputs("\n", out);
    if (item->outcome != RUN_FAIL) {
        return;
    }
    fprintf(out,
            "\nTensors compared: %lld of %lld expected; gradients identical on every rank: %s.\n",
            (long long)item->tensor_count, (long long)item->tensors_expected,
            item->gradients_identical ? "yes" : "no");
    int64_t count = 0;
    failing_tensor *failing = failing_tensors(item, &count);
    if (count < 0) {
        fputs("\n(out of memory listing the failing tensors)\n", out);
        return;
    }
    if (count == 0) {
        return;
    }
    fputs("\n| tensor | rank | error | limit | rule | tolerance (origin) | worst coordinates | "
          "reason |\n"
          "|---|---:|---:|---:|---|---|---|---|\n",
          out);
    for (int64_t f = 0; f < count && f < MARKDOWN_FAILING_TENSORS_LISTED; f++) {
        const tensor_record *record = &item->tensors[failing[f].index];
        char worst[96], origin[192];
        failing_tensors_worst_coordinates(record, worst, sizeof worst);
        failing_tensors_limit_origin(record, "×", origin, sizeof origin);
        fputs("| ", out);
        put_cell(out, record->name, sizeof record->name);
        const deciding_limit decided = tensor_record_deciding_limit(record);
        fprintf(out, " | %d | %.4g%s | %.4g | %s | ", record->rank, record->metrics.relative_l2,
                record->metrics.absolute ? " (absolute)" : "", decided.limit, decided.rule);
        put_text(out, origin);
        fputs(" | ", out);
        put_text(out, worst);
        fputs(" | ", out);
        put_cell(out, record->decision.reason, sizeof record->decision.reason);
        fputs(" |\n", out);
    }
    if (count > MARKDOWN_FAILING_TENSORS_LISTED) {
        fprintf(out, "\n... and %lld more failing tensors (see the results file).\n",
                (long long)(count - MARKDOWN_FAILING_TENSORS_LISTED));
    }
    free(failing);
}

static void put_summary(FILE *out, const run_results *results) {
    int64_t counts[RUN_OUTCOME_COUNT] = {0};
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_outcome outcome = results->items[i].outcome;
        if ((int)outcome >= 0 && (int)outcome < RUN_OUTCOME_COUNT) {
            counts[outcome]++;
        }
    }
    const bool ok = counts[RUN_FAIL] == 0 && counts[RUN_ERROR] == 0;
    char not_claimed[64] = "";
    if (counts[RUN_NOT_CLAIMED] > 0) {
        snprintf(not_claimed, sizeof not_claimed, ", %lld not claimed",
                 (long long)counts[RUN_NOT_CLAIMED]);
    }
    fprintf(out,
            "## cpparity: %s — %lld passed, %lld failed, %lld refused, %lld not run, %lld "
            "errors%s\n\n",
            ok ? "OK" : "FAILED", (long long)counts[RUN_PASS], (long long)counts[RUN_FAIL],
            (long long)counts[RUN_REFUSED], (long long)counts[RUN_NOT_RUN],
            (long long)counts[RUN_ERROR], not_claimed);
    const run_provenance *p = &results->provenance;
    char line[1024];
    snprintf(line, sizeof line, "cpparity %.*s (%.*s), %.*s/%.*s, %d ranks, kernel %.*s, %.*s",
             (int)sizeof p->version, p->version, (int)sizeof p->git_commit, p->git_commit,
             (int)sizeof p->device, p->device, (int)sizeof p->comm, p->comm, p->ranks,
             (int)sizeof p->kernel, p->kernel, (int)sizeof p->start_time, p->start_time);
    put_text(out, line);
    fputs("\n\n| case | cp | dtype | outcome | worst tensor | error | limit | rule | ratio |\n"
          "|---|---:|---|---|---|---:|---:|---|---:|\n",
          out);
    for (int64_t i = 0; i < results->item_count; i++) {
        put_item_row(out, &results->items[i]);
    }
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        if (item->outcome == RUN_FAIL || item->outcome == RUN_ERROR) {
            put_item_section(out, item);
        }
    }
    for (int listed = RUN_NOT_RUN; listed <= RUN_NOT_CLAIMED;
         listed += RUN_NOT_CLAIMED - RUN_NOT_RUN) {
        if (counts[listed] == 0) {
            continue;
        }
        fprintf(out, "\n### %s (%lld)\n\n",
                listed == RUN_NOT_RUN
                    ? "Not run"
                    : "Not claimed by the kernel (it declares it lacks what they need)",
                (long long)counts[listed]);
        for (int64_t i = 0; i < results->item_count; i++) {
            const run_item *item = &results->items[i];
            if ((int)item->outcome == listed) {
                fputs("- ", out);
                put_cell(out, failing_tensors_case_name(item), CPPARITY_CASE_NAME);
                char cp[64];
                run_item_cp_label(item, cp, sizeof cp);
                fprintf(out, ", cp %s, %s: ", cp, cpparity_dtype_name(item->dtype));
                put_cell(out, item->message, sizeof item->message);
                fputs("\n", out);
            }
        }
    }
    bool header = false;
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        const discrimination_record *record = &results->discrimination[i];
        if (record->discriminating) {
            continue;
        }
        if (!header) {
            fputs("\n### Mask features a case cannot detect\n\n", out);
            header = true;
        }
        fputs("- ", out);
        put_cell(out, record->source != NULL ? record->source->name : "(no case)",
                 CPPARITY_CASE_NAME);
        fputs(": ", out);
        put_cell(out, record->feature, sizeof record->feature);
        fprintf(out, " off changes the tensors by %.3g < threshold %.3g\n", record->change,
                record->threshold);
    }
}

/* put_summary's shape for output_file_write_text. */
static void put_report(FILE *out, const void *results) {
    put_summary(out, results);
}

cpparity_status markdown_write_staged(const run_results *results, const output_file *file,
                                      cpparity_error *error) {
    return output_file_write_text(file, put_report, results, error);
}

cpparity_status markdown_write(const run_results *results, const char *path,
                               cpparity_error *error) {
    return output_file_publish_text(path, "--markdown", put_report, results, error);
}
