/* judge_kernel.c — `cpparity judge` of a kernel dump (see judge_kernel.h). */
#include "harness/cli/judge_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "common/monotonic_clock.h"
#include "harness/cli/judge_provenance.h"
#include "harness/running/attention_blocks.h"
#include "harness/running/attention_item.h"
#include "harness/running/kernel_replay.h"
#include "harness/running/run.h"
#include "harness/suite/case_file.h"
#include "reports/console.h"

/* The export's cases, found in its own suite (each must be there, attention-level, with the
 * seed the export names), into cases and their dump shapes into shapes (count of room each). */
static cpparity_status find_cases(const judge_kernel_request *r, const cpparity_suite *suite,
                                  const cpparity_case **cases, kernel_dump_shape *shapes,
                                  cpparity_error *error) {
    int64_t *tokens = NULL;
    for (int64_t i = 0; i < r->reading->case_count; i++) {
        const attention_export_entry *entry = &r->reading->cases[i];
        const cpparity_case *c = cpparity_suite_find(suite, entry->name);
        if (c == NULL || c->seed != entry->seed || c->level != CPPARITY_LEVEL_ATTENTION) {
            free(tokens);
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: /cases/%s: not an attention-level case of seed %llu in "
                                      "the export's own suite",
                                      r->export_path, entry->name, (unsigned long long)entry->seed);
        }
        cases[i] = c;
        const cpparity_model_config *m = &c->model;
        kernel_dump_shape *s = &shapes[i];
        *s = (kernel_dump_shape){c->name,
                                 c->batch_size,
                                 c->seq_len,
                                 m->num_attention_heads,
                                 m->num_key_value_heads,
                                 m->head_dim,
                                 m->num_hidden_layers,
                                 {0},
                                 {0}};
        int64_t *grown = realloc(tokens, ((size_t)c->seq_len + 1) * sizeof *tokens);
        if (grown == NULL) {
            free(tokens);
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
        }
        tokens = grown;
        for (int q = 0; q < KERNEL_DUMP_QUERY_BLOCKS; q++) {
            s->query_rows[q] = attention_query_block(c->seq_len, q, tokens);
        }
        for (int k = 0; k < KERNEL_DUMP_KEY_BLOCKS; k++) {
            s->key_rows[k] = attention_key_block(c->seq_len, k, tokens);
        }
    }
    free(tokens);
    return CPPARITY_OK;
}

/* One case judged as `run` judges an attention-level item (run_item.c), its calls replayed. */
static cpparity_status judge_case(const judge_kernel_request *r, const char *suite_path,
                                  const cpparity_case *c, int64_t index, kernel_replay *replay,
                                  run_item *item, cpparity_error *error) {
    memset(item, 0, sizeof *item);
    item->source = c;
    snprintf(item->suite_path, sizeof item->suite_path, "%.*s", (int)sizeof item->suite_path - 1,
             suite_path);
    item->cp = 1;
    item->dtype = CPPARITY_DTYPE_F32;
    item->worst_tensor = -1;
    item->padded_seq_len = c->seq_len;
    snprintf(item->algorithm, sizeof item->algorithm, "%s",
             cpparity_algorithm_name(CPPARITY_ALGORITHM_ULYSSES));
    snprintf(item->token_layout, sizeof item->token_layout, "%s",
             cpparity_layout_name(CPPARITY_LAYOUT_CONTIGUOUS));
    interrupt_set_activity("case '%s' (attention level, kernel dump %s)", c->name, r->dump_path);
    kernel_replay_select(replay, index);
    const double started = monotonic_seconds();
    const cpparity_status status = attention_item_run_observed(
        item, c, r->reading->cases[index].input_seed, &replay->kernel, &replay->observer, error);
    item->seconds = monotonic_seconds() - started;
    item->wall_seconds = item->seconds;
    return status;
}

int judge_kernel(const judge_kernel_request *r) {
    cpparity_error error;
    cpparity_error_clear(&error);
    const int64_t count = r->reading->case_count;
    char shown[600];
    snprintf(shown, sizeof shown, "%s:/source/suite_yaml (%s)", r->export_path,
             r->reading->suite_path);
    cpparity_suite suite = {0};
    kernel_dump dump = {0};
    run_results results = {0};
    const cpparity_case **cases = calloc((size_t)count, sizeof *cases);
    kernel_dump_shape *shapes = calloc((size_t)count, sizeof *shapes);
    cpparity_status status =
        cases == NULL || shapes == NULL
            ? cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory")
            : cpparity_suite_load_text(r->reading->suite_text, r->reading->suite_length, shown,
                                       &suite, &error);
    if (status == CPPARITY_OK) {
        status = find_cases(r, &suite, cases, shapes, &error);
    }
    if (status == CPPARITY_OK) {
        interrupt_set_activity("reading the kernel dump %s", r->dump_path);
        status = kernel_dump_read(r->dump_path, r->reading->digest, shapes, count, &dump, &error);
    }
    if (status == CPPARITY_OK) {
        results.items = calloc((size_t)count, sizeof *results.items);
        status = results.items == NULL
                     ? cpparity_error_set(&error, CPPARITY_ERROR_RUNTIME, "out of memory")
                     : CPPARITY_OK;
    }
    int code = 0;
    if (status == CPPARITY_OK) {
        char kernel[sizeof results.provenance.kernel];
        snprintf(kernel, sizeof kernel, "%.120s%s%.120s", dump.kernel,
                 dump.kernel_version[0] ? " " : "", dump.kernel_version);
        judge_provenance(&results.provenance, r->argc, r->argv, r->store, dump.framework,
                         dump.framework_version, kernel, 1);
        results.item_count = count;
        console_preamble(stdout, &results.provenance, count, count);
        printf("# kernel dump: kernel %s%s%s from %s%s%s; %s, %s, %s\n", dump.kernel,
               dump.kernel_version[0] ? " " : "", dump.kernel_version, dump.framework,
               dump.framework_version[0] ? " " : "", dump.framework_version,
               dump.block_calls ? "block calls" : "no block calls",
               dump.backward_uses_out_lse ? "backward given out and lse"
                                          : "backward takes no out and lse",
               dump.deterministic ? "declared deterministic" : "not declared deterministic");
        console_table_header(stdout);
        kernel_replay replay;
        kernel_replay_init(&replay, &dump);
        for (int64_t i = 0; status == CPPARITY_OK && i < count; i++) {
            status = judge_case(r, shown, cases[i], i, &replay, &results.items[i], &error);
            if (status == CPPARITY_OK) {
                console_item(stdout, &results.items[i]);
            }
        }
    }
    if (status != CPPARITY_OK) {
        fprintf(stderr, "cpparity judge: %s\n", error.message);
        code = (int)status;
    } else {
        run_results_count(&results);
        code = run_results_exit_code(&results, false);
        run_provenance_finish(&results.provenance);
        const cpparity_status written = run_outputs_write(&results, r->paths, &error);
        if (written != CPPARITY_OK) {
            fprintf(stderr, "cpparity judge: %s; no output was published\n", error.message);
            code = code > (int)written ? code : (int)written;
        }
        console_footer(stdout, &results,
                       written == CPPARITY_OK ? r->paths[RUN_OUTPUT_RESULTS] : NULL, false);
    }
    fflush(stdout);
    run_results_free(&results);
    kernel_dump_free(&dump);
    cpparity_suite_free(&suite);
    free(cases);
    free(shapes);
    return code;
}
