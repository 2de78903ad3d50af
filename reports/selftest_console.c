/* selftest_console.c — the self-test's console report (see selftest_console.h). */
#include "reports/selftest_console.h"

#include <math.h>
#include <string.h>

#include "common/fault.h"

void selftest_console_preamble(FILE *stream, const run_provenance *p,
                               const selftest_matrix *matrix) {
    fprintf(stream, "# cpparity %s (commit %s) selftest\n", p->version, p->git_commit);
    fprintf(stream, "# ranks %d, comm %s, device %s, implementation %s, kernel %s\n", p->ranks,
            p->comm, p->device, p->implementation, p->kernel);
    fprintf(stream,
            "# %lld cases; the clean run, %lld faults planted one at a time (each must fail in "
            "at least %d cases), %lld reruns under seeds 1..%lld (no failure allowed)\n",
            (long long)matrix->case_count, (long long)matrix->fault_count, SELFTEST_MINIMUM_CASES,
            (long long)matrix->seed_count, (long long)matrix->seed_count);
}

/* Prints every item that did not pass (or was refused as expected). */
static void not_passed(FILE *stream, const run_results *results) {
    for (int64_t i = 0; i < results->item_count; i++) {
        const run_item *item = &results->items[i];
        if (item->outcome != RUN_PASS && item->outcome != RUN_REFUSED) {
            char cp[64];
            run_item_cp_label(item, cp, sizeof cp);
            fprintf(stream, "#   %s %s cp %s %s: %s\n", run_outcome_name(item->outcome),
                    item->source->name, cp, cpparity_dtype_name(item->dtype), item->message);
        }
    }
}

void selftest_console_clean(FILE *stream, const selftest_matrix *matrix, const run_results *clean,
                            double seconds) {
    int64_t counts[RUN_OUTCOME_COUNT] = {0};
    for (int64_t i = 0; i < clean->item_count; i++) {
        counts[clean->items[i].outcome]++;
    }
    fprintf(stream,
            "clean run: %lld passed, %lld failed, %lld refused as expected, %lld not run, %lld "
            "errors; margin: worst ratio %.3g (%s) [%.1f s]\n",
            (long long)counts[RUN_PASS], (long long)counts[RUN_FAIL],
            (long long)counts[RUN_REFUSED], (long long)counts[RUN_NOT_RUN],
            (long long)counts[RUN_ERROR], matrix->clean_worst_ratio,
            matrix->clean_worst[0] != '\0' ? matrix->clean_worst : "-", seconds);
    not_passed(stream, clean);
}

void selftest_console_fault(FILE *stream, const selftest_matrix *matrix, int64_t f) {
    const selftest_fault_row *row = &matrix->faults[f];
    const char *name = cpparity_fault_name((cpparity_fault)row->fault);
    if (!row->applicable) {
        fprintf(stream, "fault %-21s not planted: %s\n", name, row->note);
        return;
    }
    int64_t strongest = -1;
    for (int64_t c = 0; c < matrix->case_count; c++) {
        const selftest_cell *cell = selftest_matrix_cell(matrix, f, c);
        if (cell->caught &&
            (strongest < 0 || cell->ratio > selftest_matrix_cell(matrix, f, strongest)->ratio)) {
            strongest = c;
        }
    }
    fprintf(stream, "fault %-21s %s caught by %2lld/%lld cases, detection ratio %8.3g", name,
            row->cases_caught >= SELFTEST_MINIMUM_CASES ? "ok    " : "MISSED",
            (long long)row->cases_caught, (long long)matrix->case_count, row->detection_ratio);
    if (strongest >= 0) {
        fprintf(stream, ", strongest %.3g: %s %s", row->strongest, matrix->cases[strongest]->name,
                selftest_matrix_cell(matrix, f, strongest)->how);
    }
    fprintf(stream, " [%.1f s]\n", row->seconds);
}

void selftest_console_seed(FILE *stream, const selftest_matrix *matrix, int64_t s,
                           const run_results *results) {
    const selftest_seed_row *row = &matrix->seeds[s];
    fprintf(stream, "seed %-4llu %s %lld false alarms; margin: worst ratio %.3g (%s)\n",
            (unsigned long long)row->seed, row->failures == 0 ? "ok    " : "FAILED",
            (long long)row->failures, row->worst_ratio, row->worst[0] != '\0' ? row->worst : "-");
    not_passed(stream, results);
}

/* '#' caught with a ratio of at least 10, '+' caught, '.' not caught, ' ' not planted. */
static char cell_mark(const selftest_fault_row *row, const selftest_cell *cell) {
    if (!row->applicable) {
        return ' ';
    }
    return !cell->caught ? '.' : cell->ratio >= 10.0 ? '#' : '+';
}

void selftest_console_summary(FILE *stream, const selftest_matrix *matrix) {
    fprintf(stream, "\ndetection matrix ('#' caught with error/limit >= 10, '+' caught, '.' "
                    "not caught); cases:\n");
    for (int64_t c = 0; c < matrix->case_count; c++) {
        fprintf(stream, "  %3lld %s\n", (long long)c + 1, matrix->cases[c]->name);
    }
    fprintf(stream, "%-22s ", "");
    for (int64_t c = 0; c < matrix->case_count; c++) {
        fputc((c + 1) % 10 == 0 ? '0' + (int)((c + 1) / 10 % 10) : ' ', stream);
    }
    fprintf(stream, "\n%-22s ", "fault \\ case");
    for (int64_t c = 0; c < matrix->case_count; c++) {
        fputc('0' + (int)((c + 1) % 10), stream);
    }
    fputc('\n', stream);
    for (int64_t f = 0; f < matrix->fault_count; f++) {
        const selftest_fault_row *row = &matrix->faults[f];
        fprintf(stream, "%-22s ", cpparity_fault_name((cpparity_fault)row->fault));
        for (int64_t c = 0; c < matrix->case_count; c++) {
            fputc(cell_mark(row, selftest_matrix_cell(matrix, f, c)), stream);
        }
        fprintf(stream, " %lld\n", (long long)row->cases_caught);
    }
    if (matrix->weakest_fault >= 0) {
        fprintf(stream,
                "# smallest detection ratio %.3g (%s: its second-strongest catching case)\n",
                matrix->smallest_detection_ratio,
                cpparity_fault_name((cpparity_fault)matrix->weakest_fault));
    }
    double worst_seed = 0.0;
    for (int64_t s = 0; s < matrix->seed_count; s++) {
        worst_seed =
            matrix->seeds[s].worst_ratio > worst_seed ? matrix->seeds[s].worst_ratio : worst_seed;
    }
    fprintf(stream,
            "# clean margin: worst ratio %.3g in the clean run, %.3g over %lld seeds; %lld false "
            "alarms\n",
            matrix->clean_worst_ratio, worst_seed, (long long)matrix->seed_count,
            (long long)matrix->false_alarms);
    int64_t missed = 0;
    for (int64_t f = 0; f < matrix->fault_count; f++) {
        missed +=
            matrix->faults[f].applicable && matrix->faults[f].cases_caught < SELFTEST_MINIMUM_CASES;
    }
    fprintf(stream,
            "# selftest %s: %lld clean failures, %lld faults caught by fewer than %d "
            "cases, %lld false alarms [%.1f s]\n",
            matrix->passed ? "PASSED" : "FAILED", (long long)matrix->clean_failures,
            (long long)missed, SELFTEST_MINIMUM_CASES, (long long)matrix->false_alarms,
            matrix->seconds);
}
