/* run_outputs.c — the table of a run's outputs (see run_outputs.h). */
#include "harness/running/run_outputs.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "results_model/results_file.h"
#include "reports/junit.h"
#include "reports/markdown.h"

const run_output_writer run_output_writers[RUN_OUTPUT_COUNT] = {
    [RUN_OUTPUT_RESULTS] =
        {"--out", "FILE.h5",
         "results file (default results/<UTC time>Z-<host>-<pid>.h5, unique, sorting by "
         "time); never overwrites",
         "results file", results_file_write_staged},
    [RUN_OUTPUT_JUNIT] = {"--junit", "FILE.xml", "JUnit XML, one <testcase> per case and cp size",
                          "JUnit report", junit_write_staged},
    [RUN_OUTPUT_MARKDOWN] = {"--markdown", "FILE.md", "summary table (for CI job summaries)",
                             "Markdown summary", markdown_write_staged},
};

void run_outputs_default_path(char *path, size_t size, const char *prefix) {
    mkdir("results", 0775);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm utc;
    gmtime_r(&now.tv_sec, &utc);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &utc);
    char host[HOST_NAME_MAX + 1] = "", label[33] = "";
    gethostname(host, sizeof host - 1);
    size_t used = 0; /* the host's first label, in letters, digits and '-' */
    for (const char *c = host; *c != '\0' && *c != '.' && used < sizeof label - 1; c++) {
        label[used++] = isalnum((unsigned char)*c) || *c == '-' ? *c : '-';
    }
    label[used] = '\0';
    snprintf(path, size, "results/%s%s.%06ldZ-%s-%ld.h5", prefix, stamp, now.tv_nsec / 1000,
             used > 0 ? label : "host", (long)getpid());
}

cpparity_status run_outputs_claim(const char *const paths[RUN_OUTPUT_COUNT],
                                  output_claim claims[RUN_OUTPUT_COUNT], cpparity_error *error) {
    cpparity_status status = CPPARITY_OK;
    memset(claims, 0, RUN_OUTPUT_COUNT * sizeof *claims);
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        claims[o].slot = -1;
    }
    for (int o = 0; o < RUN_OUTPUT_COUNT && status == CPPARITY_OK; o++) {
        if (paths[o] != NULL) {
            status = output_file_check(paths[o], run_output_writers[o].flag, error);
        }
    }
    for (int o = 0; o < RUN_OUTPUT_COUNT && status == CPPARITY_OK; o++) {
        if (paths[o] != NULL) {
            status = output_file_claim(&claims[o], paths[o], run_output_writers[o].flag, error);
        }
    }
    return status;
}

void run_outputs_release(output_claim claims[RUN_OUTPUT_COUNT]) {
    for (int o = 0; o < RUN_OUTPUT_COUNT; o++) {
        output_file_release(&claims[o]);
    }
}

cpparity_status run_outputs_write(const run_results *results,
                                  const char *const paths[RUN_OUTPUT_COUNT],
                                  cpparity_error *error) {
    output_set set = {0};
    cpparity_status status = CPPARITY_OK;
    for (int o = 0; o < RUN_OUTPUT_COUNT && status == CPPARITY_OK; o++) {
        const run_output_writer *writer = &run_output_writers[o];
        output_file *file = NULL;
        if (paths[o] == NULL) {
            continue;
        }
        interrupt_set_activity("writing the %s %s", writer->what, paths[o]);
        status = output_set_add(&set, paths[o], writer->flag, &file, error);
        if (status == CPPARITY_OK && writer->write(results, file, error) != CPPARITY_OK) {
            char reason[CPPARITY_ERROR_TEXT];
            snprintf(reason, sizeof reason, "%s", error->message);
            status = error->status;
            if (strncmp(reason, writer->flag, strlen(writer->flag)) != 0) { /* not named yet */
                cpparity_error_set(error, status, "writing the %s %s (%s): %s", writer->what,
                                   paths[o], writer->flag, reason);
            }
        }
    }
    if (status != CPPARITY_OK) {
        output_set_abandon(&set);
        return status;
    }
    interrupt_set_activity("publishing the outputs");
    return output_set_publish(&set, error);
}
