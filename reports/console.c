/* console.c — the run's preamble, table, failure locations and footer (see console.h). */
#include "reports/console.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

void console_preamble(FILE *stream, const run_provenance *p, int64_t cases, int64_t items) {
    fprintf(stream, "# cpparity %s (commit %s)\n", p->version, p->git_commit);
    fprintf(stream, "# ranks %d, comm %s, device %s, implementation %s, kernel %s, store %s\n",
            p->ranks, p->comm, p->device, p->implementation, p->kernel, p->store);
    if (p->fault[0] != '\0' && strcmp(p->fault, "none") != 0) {
        fprintf(stream,
                "# FAULT INJECTED: %s — the implementation under test is broken on purpose "
                "(--inject); failures are expected\n",
                p->fault);
    }
    if (p->seed_overridden) {
        fprintf(stream, "# seed %llu for every case\n", (unsigned long long)p->seed);
    } else {
        fprintf(stream, "# seed: each case's own\n");
    }
    fprintf(
        stream,
        "# %s\n# %lld cases, %lld runs (case x dtype x cp x algorithm x layout, baselines at cp 1 "
        "included); started %s\n",
        p->libraries, (long long)cases, (long long)items, p->start_time);
}

void console_table_header(FILE *stream) {
    fprintf(stream, "%-46s %3s %-5s %-44s %9s %9s %-5s  %s\n", "case", "cp", "dtype",
            "worst tensor", "error", "limit", "rule", "result");
}

void console_item(FILE *stream, const run_item *item) {
    char tensor[45] = "-", error[16] = "-", limit[16] = "-";
    const char *rule = "-";
    if (item->worst_tensor >= 0 && item->worst_tensor < item->tensor_count) {
        const tensor_record *record = &item->tensors[item->worst_tensor];
        /* "grads/model.layers.0.self_attn.q_proj.weight" is shown as
         * "d layers.0.self_attn.q_proj.weight" to fit the column */
        const char *name = record->name;
        const bool gradient = strncmp(name, "grads/", 6) == 0;
        if (gradient) {
            name += 6;
            name += strncmp(name, "model.", 6) == 0 ? 6 : 0;
        }
        snprintf(tensor, sizeof tensor, "%s%.36s@%d", gradient ? "d " : "", name, record->rank);
        /* the limit of the rule that decided: the naive rule's, or the CP-only rule's where it
         * is the tighter (results_deciding_limit) */
        const deciding_limit decided = tensor_record_deciding_limit(record);
        rule = decided.rule;
        if (record->metrics.nonfinite > 0 && !record->decision.passed) {
            snprintf(error, sizeof error, "nonfinite"); /* its finite error is not the story */
        } else if (!record->decision.passed && record->metrics.relative_l2 <= decided.limit) {
            /* failed for what the error cannot show: a second or concurrent call changed bits,
             * fully masked rows; the message says which */
            snprintf(error, sizeof error, "%s",
                     strstr(record->decision.reason, "changed") != NULL ? "changed" : "see below");
        } else {
            snprintf(error, sizeof error, "%.2e", record->metrics.relative_l2);
        }
        snprintf(limit, sizeof limit, "%.2e", decided.limit);
    }
    /* another layout or algorithm than contiguous Ulysses is named after the case */
    char variant[48], name[CPPARITY_CASE_NAME + 64];
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    snprintf(name, sizeof name, "%s%s%s%s", item->source->name, variant[0] != '\0' ? " [" : "",
             variant, variant[0] != '\0' ? "]" : "");
    fprintf(stream, "%-46s %3lld %-5s %-44s %9s %9s %-5s  %s\n", name, (long long)item->cp,
            cpparity_dtype_name(item->dtype), tensor, error, limit, rule,
            run_outcome_name(item->outcome));
    if (item->outcome == RUN_PASS) {
        if (item->message[0] != '\0') { /* e.g. an attention-level item's seed */
            fprintf(stream, "    %s\n", item->message);
        }
        return;
    }
    if (item->message[0] != '\0') {
        fprintf(stream, "    %s\n", item->message);
    }
    int shown = 0;
    for (int64_t i = 0; i < item->tensor_count && item->outcome == RUN_FAIL; i++) {
        const tensor_record *record = &item->tensors[i];
        if (record->decision.passed) {
            continue;
        }
        if (shown++ == 8) {
            fprintf(stream, "    ... more failing tensors in the results file\n");
            break;
        }
        char where[256];
        run_item_describe_worst(item, record, where, sizeof where);
        fprintf(stream,
                "    FAIL %s: %s (tolerance: ratio %g [%s], floor %.1e [%s], ceiling %.1e "
                "[%s])\n",
                where, record->decision.reason, record->tolerance.ratio,
                cpparity_tolerance_origin_name(record->tolerance.ratio_origin),
                record->tolerance.floor,
                cpparity_tolerance_origin_name(record->tolerance.floor_origin),
                record->tolerance.ceiling,
                cpparity_tolerance_origin_name(record->tolerance.ceiling_origin));
    }
    fflush(stream);
}

void console_discrimination(FILE *stream, const run_results *results) {
    int64_t weak = 0;
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        weak += !results->discrimination[i].discriminating;
    }
    fprintf(stream, "# discrimination: %lld feature checks, %lld not discriminating\n",
            (long long)results->discrimination_count, (long long)weak);
    for (int64_t i = 0; i < results->discrimination_count; i++) {
        const discrimination_record *record = &results->discrimination[i];
        if (!record->discriminating) {
            fprintf(stream, "#   %s cannot tell %s being dropped: change %.2e < %.2e\n",
                    record->source->name, record->feature, record->change, record->threshold);
        }
    }
}

void console_footer(FILE *stream, const run_results *results, const char *results_path,
                    bool allow_not_run) {
    double implementation = 0.0, reference = 0.0, wall = 0.0;
    for (int64_t i = 0; i < results->item_count; i++) {
        implementation += results->items[i].seconds;
        reference += results->items[i].reference_seconds;
        wall += results->items[i].wall_seconds;
    }
    fprintf(stream, "# %lld passed, %lld failed, %lld refused, %lld not run, %lld errors\n",
            (long long)results->passed, (long long)results->failed, (long long)results->refused,
            (long long)results->not_run, (long long)results->errors);
    fprintf(stream,
            "# time in the implementation %.3f s, in the float64 reference %.3f s, wall %.3f s "
            "with the reference alongside (summed over runs)\n",
            implementation, reference, wall);
    if (results->provenance.reference_spread_seconds > 0.0) {
        fprintf(stream,
                "# and %.3f s before the runs, the float64 references and naive baselines "
                "computed by the %d ranks together (the runs' reference time is what they computed "
                "alone)\n",
                results->provenance.reference_spread_seconds, results->provenance.ranks);
    }
    if (results_path != NULL) {
        fprintf(stream, "# results: %s\n", results_path);
    } else {
        fprintf(stream, "# results: NOT WRITTEN (the reason is on stderr); no output published\n");
    }
    if (results->not_claimed > 0) {
        fprintf(stream,
                "# %lld run%s not claimed: the kernel declares it lacks what %s (listed above as "
                "NOT CLAIMED); not failures, and not runs that could not happen here\n",
                (long long)results->not_claimed, results->not_claimed == 1 ? "" : "s",
                results->not_claimed == 1 ? "it needs" : "they need");
    }
    if (results->left_out > 0) {
        fprintf(stream,
                "# %lld cp 1 run%s left out on purpose (listed above as NOT RUN): the whole "
                "sequence does not fit one rank within the memory limit; the runs at cp > 1 were "
                "decided by the naive rule alone and say so\n",
                (long long)results->left_out, results->left_out == 1 ? "" : "s");
    }
    if (results->not_run > 0) {
        fprintf(stream,
                "# %lld planned run%s could not run here (listed above as NOT RUN, with what each "
                "needs)%s\n",
                (long long)results->not_run, results->not_run == 1 ? "" : "s",
                allow_not_run ? "; allowed by --allow-not-run" : "; --allow-not-run accepts that");
    }
    const bool failed = results->failed + results->errors > 0 ||
                        (results->not_run > 0 && !allow_not_run) || results_path == NULL;
    fprintf(stream, "# %s\n", failed ? "FAILED" : "OK");
}

void console_progress(const char *case_name, int64_t cp, const char *dtype) {
    if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r\033[K  running %s cp %lld %s ...", case_name, (long long)cp, dtype);
        fflush(stderr);
    }
}

void console_progress_clear(void) {
    if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}
