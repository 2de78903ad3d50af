/* run_outputs.c — the table of a run's outputs (see run_outputs.h). */
#include "harness/running/run_outputs.h"

#include "results_model/results_file.h"
#include "reports/junit.h"
#include "reports/markdown.h"

const run_output_writer run_output_writers[RUN_OUTPUT_COUNT] = {
    [RUN_OUTPUT_RESULTS] = {"--out", "FILE.h5",
                            "results file (default results/<UTC timestamp>.h5); never overwrites",
                            "results file", results_file_write_staged},
    [RUN_OUTPUT_JUNIT] = {"--junit", "FILE.xml", "JUnit XML, one <testcase> per case and cp size",
                          "JUnit report", junit_write_staged},
    [RUN_OUTPUT_MARKDOWN] = {"--markdown", "FILE.md", "summary table (for CI job summaries)",
                             "Markdown summary", markdown_write_staged},
};
