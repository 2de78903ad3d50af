/* command_list.c — `cpparity list [SUITE.yaml ...] [--names | --model]`: one line per case with
 * its estimated memory (harness/running/memory_estimate.h), or each case's resolved model
 * configuration (every field of common/model_config.h's table). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/fault.h"
#include <unistd.h>

#include "common/case.h"
#include "distributed/models/implementation_registry.h"
#include "harness/cli/commands.h"
#include "harness/running/attention_stream.h"
#include "harness/running/memory_estimate.h"
#include "harness/suite/case_file.h"

static void usage(FILE *stream) {
    fprintf(stream,
            "usage: cpparity list [SUITE.yaml ...] [--names | --model]\n"
            "       cpparity list --faults\n"
            "  One line per case: name, the memory one process needs at most to run the case\n"
            "  alone (`cpparity run SUITE --case NAME` on local ranks, --device cpu; 'overflow'\n"
            "  when its sizes cannot be held; a '+' after it when the implementation declares\n"
            "  no estimate of its own share, which is then not counted), what it exercises, cp\n"
            "  sizes.\n"
            "  Default suite: %s\n"
            "  --names   only the case names, one per line (for scripts)\n"
            "  --model   each case's resolved model configuration, one field per line\n"
            "  --faults  the faults `run --inject` and `selftest` plant: name, where, the bug\n",
            cpparity_default_suite());
}

/* Appends a printf-style fragment to a features string. */
static void append(char *features, size_t size, const char *fragment) {
    size_t used = strlen(features);
    snprintf(features + used, size - used, "%s%s", used > 0 ? " " : "", fragment);
}

/* What a case exercises, in words (layer types with W/C, padding sides, packing, heads). */
static void describe(const cpparity_case *c, char *features, size_t size) {
    features[0] = '\0';
    const cpparity_model_config *m = &c->model;
    int full = 0, sliding = 0, chunked = 0;
    for (int64_t l = 0; l < m->num_hidden_layers; l++) {
        full += m->layer_types[l] == CPPARITY_LAYER_FULL;
        sliding += m->layer_types[l] == CPPARITY_LAYER_SLIDING;
        chunked += m->layer_types[l] == CPPARITY_LAYER_CHUNKED;
    }
    char fragment[64];
    if (full) {
        snprintf(fragment, sizeof fragment, "full x%d", full);
        append(features, size, fragment);
    }
    if (sliding) {
        snprintf(fragment, sizeof fragment, "sliding x%d (W=%lld)", sliding,
                 (long long)m->sliding_window);
        append(features, size, fragment);
    }
    if (chunked) {
        snprintf(fragment, sizeof fragment, "chunked x%d (C=%lld%s)", chunked,
                 (long long)m->attention_chunk_size,
                 m->chunk_origin == CPPARITY_CHUNK_ORIGIN_DOCUMENT   ? ",document"
                 : m->chunk_origin == CPPARITY_CHUNK_ORIGIN_POSITION ? ",position"
                                                                     : "");
        append(features, size, fragment);
    }
    int left = 0, right = 0, packed = 0;
    for (int64_t b = 0; b < c->batch_size; b++) {
        left |= c->rows[b].left_padding > 0;
        right |= c->rows[b].right_padding > 0;
        packed |= c->rows[b].document_count > 1;
    }
    if (left) {
        append(features, size, "left-pad");
    }
    if (right) {
        append(features, size, "right-pad");
    }
    if (packed) {
        append(features, size, "packed");
    }
    if (m->num_key_value_heads == 1) {
        append(features, size, "MQA");
    } else if (m->num_key_value_heads < m->num_attention_heads) {
        append(features, size, "GQA");
    }
    if (m->tie_word_embeddings) {
        append(features, size, "tied");
    }
    snprintf(fragment, sizeof fragment, "B=%lld S=%lld", (long long)c->batch_size,
             (long long)c->seq_len);
    append(features, size, fragment);
    if (c->expect_refuse) {
        append(features, size, "expect-refuse");
    }
}

/* "CASE:" then "  field: value  (default)" for every field of the model configuration table. */
static void print_model(const cpparity_case *c) {
    printf("%s:\n", c->name);
    cpparity_model_config defaults;
    memset(&defaults, 0, sizeof defaults);
    defaults.num_hidden_layers = c->model.num_hidden_layers;
    cpparity_model_config_set_defaults(&defaults);
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        const cpparity_model_field *field = &cpparity_model_fields[i];
        char value[1024], default_value[1024];
        cpparity_model_field_format(&c->model, field, value, sizeof value);
        cpparity_model_field_format(&defaults, field, default_value, sizeof default_value);
        const bool is_default = !field->required && strcmp(value, default_value) == 0;
        printf("  %-22s %s%s\n", field->name, value, is_default ? "  (default)" : "");
    }
}

/* The fault table (common/fault.h), one fault per line. */
static void print_faults(void) {
    for (int f = 1; f < CPPARITY_FAULT_COUNT; f++) {
        const cpparity_fault_info *info = &cpparity_faults[f];
        printf("%-21s %s%s\n%-21s   planted in %s\n", info->name, info->bug,
               info->kernel ? " (built-in kernel only)" : "", "", info->where);
    }
}

int command_list(int argc, char **argv) {
    static const struct option options[] = {
        {"names", no_argument, NULL, 'n'},
        {"model", no_argument, NULL, 'm'},
        {"faults", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int names_only = 0, model = 0, option;
    optind = 1;
    opterr = 0;
    while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (option == 'n') {
            names_only = 1;
        } else if (option == 'm') {
            model = 1;
        } else if (option == 'f') {
            print_faults();
            return 0;
        } else if (option == 'h') {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "cpparity list: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    const char *default_suite[] = {cpparity_default_suite()};
    const char *const *suites = optind < argc ? (const char *const *)argv + optind : default_suite;
    const int suite_count = optind < argc ? argc - optind : 1;
    /* the estimate of a case run as `cpparity run` runs it by default: --device cpu */
    const cpparity_implementation *implementation = implementation_registry_for_device("cpu");
    for (int s = 0; s < suite_count; s++) {
        cpparity_suite suite;
        cpparity_error error;
        cpparity_status status = cpparity_suite_load(suites[s], &suite, &error);
        if (status != CPPARITY_OK) {
            fprintf(stderr, "cpparity list: %s\n", error.message);
            return (int)status;
        }
        for (int64_t i = 0; i < suite.count; i++) {
            const cpparity_case *c = &suite.cases[i];
            if (names_only) {
                printf("%s\n", c->name);
                continue;
            }
            if (model) {
                print_model(c);
                continue;
            }
            char features[512], cp[128] = "";
            describe(c, features, sizeof features);
            for (int k = 0; k < c->cp_count; k++) {
                size_t used = strlen(cp);
                snprintf(cp + used, sizeof cp - used, "%s%lld", k ? "," : "",
                         (long long)c->cp_sizes[k]);
            }
            char memory[32] = "overflow", what[MEMORY_TEXT];
            int64_t bytes = 0;
            bool known = true;
            if (memory_estimate_case(c, implementation, &bytes, &known, what, sizeof what)) {
                memory_size_format(bytes, memory, sizeof memory);
                strcat(memory, known ? "" : "+"); /* the implementation's share unknown */
            }
            /* layouts and algorithms other than contiguous Ulysses alone */
            char variants[256] = "";
            const bool plain =
                c->layout_count == 1 && c->layouts[0] == CPPARITY_LAYOUT_CONTIGUOUS &&
                c->algorithm_count == 1 && c->algorithms[0].kind == CPPARITY_ALGORITHM_ULYSSES;
            for (int k = 0; !plain && k < c->layout_count; k++) {
                const size_t used = strlen(variants);
                snprintf(variants + used, sizeof variants - used, "%s%s",
                         k ? "," : " layouts=", cpparity_layout_name(c->layouts[k]));
            }
            for (int k = 0; !plain && k < c->algorithm_count; k++) {
                char name[48];
                cpparity_algorithm_choice_name(c->algorithms[k], name, sizeof name);
                const size_t used = strlen(variants);
                snprintf(variants + used, sizeof variants - used, "%s%s",
                         k ? "," : " algorithms=", name);
            }
            /* an attention-level case longer than a query block: what a rank holds by blocks
             * (attention_stream.h), which a run chooses when the whole does not fit */
            if (c->level == CPPARITY_LEVEL_ATTENTION && c->seq_len > ATTENTION_STREAM_BLOCK) {
                char one[32] = "overflow", two[32] = "overflow";
                const int64_t alone = attention_stream_memory(c, ATTENTION_STREAM_BLOCK, 1);
                const int64_t shared = attention_stream_memory(c, ATTENTION_STREAM_BLOCK, 2);
                if (alone >= 0 && shared >= 0) {
                    memory_size_format(alone, one, sizeof one);
                    memory_size_format(shared, two, sizeof two);
                }
                const size_t used = strlen(variants);
                snprintf(variants + used, sizeof variants - used,
                         " by query blocks of %d: %s on 1 rank, %s a rank on 2",
                         ATTENTION_STREAM_BLOCK, one, two);
            }
            printf("%-48s %10s  %-66s cp=%s%s\n", c->name, memory, features, cp, variants);
        }
        cpparity_suite_free(&suite);
    }
    return 0;
}
