/*
 * case_file.c — reads a YAML suite file (schema: cases/README.md) into a cpparity_suite: opens
 * the file, parses it within the limits (yaml_source.h), then reads `defaults` and every case
 * (case_reader.h) in file order, gives each case the defaults (case_defaults.h) and refuses
 * duplicate case names. The keys themselves are the tables of case_schema.h. Every error is bad
 * input whose message starts with "PATH:LINE:COLUMN: " (1-based, the offending node) followed
 * by the case and the key path.
 */
#include "harness/suite/case_file.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "harness/suite/case_defaults.h"
#include "harness/suite/case_reader.h"
#include "harness/suite/case_schema.h"
#include "harness/suite/case_sweep.h"
#include "harness/suite/yaml_limits.h"
#include "harness/suite/yaml_source.h"

#define SCOPE_CAPACITY 160 /* "case 'NAME'" */

typedef struct suite_loader {
    yaml_source source;    /* the parsed file, its display path and where errors go */
    case_reader reader;    /* reads keys as the schema says, counting rows */
    int64_t *name_slots;   /* open-addressing set of case indices by name (−1: empty), so
                              duplicate names are found in O(1) each, not O(cases) */
    int64_t name_capacity; /* slots, a power of two at least twice the cases */
} suite_loader;

/* FNV-1a hash of a case name. */
static uint64_t name_hash(const char *name) {
    uint64_t hash = 1469598103934665603ull;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++) {
        hash = (hash ^ *c) * 1099511628211ull;
    }
    return hash;
}

/* The index of the earlier case called name, or −1 after recording position under it. */
static int64_t name_seen_or_add(suite_loader *loader, const cpparity_suite *suite, const char *name,
                                int64_t position) {
    const int64_t mask = loader->name_capacity - 1;
    for (int64_t slot = (int64_t)(name_hash(name) & (uint64_t)mask);; slot = (slot + 1) & mask) {
        const int64_t index = loader->name_slots[slot];
        if (index < 0) {
            loader->name_slots[slot] = position;
            return -1;
        }
        if (strcmp(suite->cases[index].name, name) == 0) {
            return index;
        }
    }
}

/* Refuses what a sweep case writes itself that its sweep generates: seq_len, rows and the
 * model's layers, window, chunk size and (with gqa_groups) kv heads. */
static cpparity_status refuse_swept_keys(suite_loader *loader, const char *scope,
                                         const case_sweep *sweep, const case_settings *settings) {
    static const char *const swept_model[] = {"num_hidden_layers", "layer_types", "sliding_window",
                                              "attention_chunk_size", "num_key_value_heads"};
    const case_key_index swept_keys[] = {CASE_KEY_SEQ_LEN, CASE_KEY_ROWS};
    for (size_t k = 0; k < sizeof swept_keys / sizeof *swept_keys; k++) {
        if (settings->nodes[swept_keys[k]] != NULL) {
            return yaml_source_fail(&loader->source, settings->nodes[swept_keys[k]], scope,
                                    case_keys[swept_keys[k]].name,
                                    "a case with a sweep has its %s generated: remove it",
                                    case_keys[swept_keys[k]].name);
        }
    }
    for (int f = 0; f < CPPARITY_MODEL_FIELD_COUNT; f++) {
        for (size_t m = 0; m < sizeof swept_model / sizeof *swept_model; m++) {
            const bool kv_heads = m == sizeof swept_model / sizeof *swept_model - 1;
            if (settings->model.values[f] != NULL &&
                strcmp(cpparity_model_fields[f].name, swept_model[m]) == 0 &&
                (!kv_heads || sweep->group_count > 0)) {
                char key_path[96];
                yaml_source_format(key_path, sizeof key_path, "model.%s", swept_model[m]);
                return yaml_source_fail(&loader->source, settings->model.values[f], scope, key_path,
                                        "set by the case's sweep: remove it");
            }
        }
    }
    return CPPARITY_OK;
}

/* The merged num_attention_heads of a case (its own, else the defaults'), 0 when unset. */
static int64_t merged_heads(const case_settings *settings, const case_settings *defaults) {
    for (int f = 0; f < CPPARITY_MODEL_FIELD_COUNT; f++) {
        if (strcmp(cpparity_model_fields[f].name, "num_attention_heads") == 0) {
            return settings->model.values[f] != NULL   ? settings->model.config.num_attention_heads
                   : defaults->model.values[f] != NULL ? defaults->model.config.num_attention_heads
                                                       : 0;
        }
    }
    return 0;
}

/* Gives the case at suite->cases[suite->count] its name and line, refuses a name used before and
 * counts it. */
static cpparity_status add_case(suite_loader *loader, const yaml_node_t *name, const char *scope,
                                const char *case_name, int64_t line, cpparity_suite *suite) {
    cpparity_case *result = &suite->cases[suite->count];
    snprintf(result->name, sizeof result->name, "%s", case_name);
    result->line = line;
    const int64_t earlier = name_seen_or_add(loader, suite, result->name, suite->count);
    if (earlier >= 0) {
        return yaml_source_fail(&loader->source, name, scope, case_keys[CASE_KEY_NAME].name,
                                "duplicate case name (first used by the case at line %lld)",
                                (long long)suite->cases[earlier].line);
    }
    suite->count++;
    return CPPARITY_OK;
}

/* Reads, merges and checks case number position of the file into the next cases of the suite
 * (one, or its sweep's family): its name first (scopes every later message), then its keys,
 * case-only ones in table order and the others as written, then the defaults. */
static cpparity_status parse_case(suite_loader *loader, const yaml_node_t *node, int64_t position,
                                  const case_settings *defaults, cpparity_suite *suite) {
    yaml_source *source = &loader->source;
    char scope[SCOPE_CAPACITY];
    yaml_source_format(scope, sizeof scope, "cases[%lld]", (long long)position);
    const int64_t line = (int64_t)yaml_source_line(node);
    if (node->type != YAML_MAPPING_NODE) {
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(node, found, sizeof found);
        return yaml_source_fail(source, node, scope, "", "expected a mapping, got %s", found);
    }
    const yaml_node_t *name = yaml_source_value(source, node, case_keys[CASE_KEY_NAME].name, NULL);
    if (name == NULL) {
        return yaml_source_fail(source, node, scope, case_keys[CASE_KEY_NAME].name,
                                "missing (every case needs a unique name)");
    }
    case_settings settings;
    memset(&settings, 0, sizeof settings);
    cpparity_status status =
        case_reader_read_key(&loader->reader, name, scope, CASE_KEY_NAME, &settings);
    if (status != CPPARITY_OK) {
        return status;
    }
    char case_name[CPPARITY_CASE_NAME];
    memcpy(case_name, settings.values.name, sizeof case_name);
    yaml_source_format(scope, sizeof scope, "case '%s'", case_name);
    const char *names[CASE_KEY_COUNT];
    const int name_count = case_key_names(case_keys, CASE_KEY_COUNT, true, names);
    status = yaml_source_check_mapping(source, node, scope, "", names, (size_t)name_count);
    for (int k = 0; status == CPPARITY_OK && k < CASE_KEY_COUNT; k++) {
        const yaml_node_t *value = yaml_source_value(source, node, case_keys[k].name, NULL);
        if (k != CASE_KEY_NAME && case_keys[k].case_only && value != NULL) {
            status =
                case_reader_read_key(&loader->reader, value, scope, (case_key_index)k, &settings);
        }
    }
    if (status == CPPARITY_OK) {
        status = case_reader_read_shared(&loader->reader, node, scope, &settings);
    }
    const yaml_node_t *sweep_node = settings.nodes[CASE_KEY_SWEEP];
    if (status != CPPARITY_OK || sweep_node == NULL) {
        if (status == CPPARITY_OK) {
            status = case_defaults_apply(&loader->reader, scope, node, name, defaults, &settings,
                                         &suite->cases[suite->count]);
        }
        if (status == CPPARITY_OK) {
            status = add_case(loader, name, scope, case_name, line, suite);
        }
        case_settings_free(&settings);
        return status;
    }
    case_sweep *sweep = malloc(sizeof *sweep);
    status = sweep != NULL ? case_sweep_read(source, sweep_node, scope, sweep)
                           : yaml_source_out_of_memory(source);
    if (status == CPPARITY_OK) {
        status = refuse_swept_keys(loader, scope, sweep, &settings);
    }
    const int64_t members = status == CPPARITY_OK ? case_sweep_members(sweep) : 0;
    const int64_t heads = merged_heads(&settings, defaults);
    for (int64_t m = 0; status == CPPARITY_OK && m < members; m++) {
        case_settings member = settings; /* the case owns no rows: a sweep refuses them */
        char member_name[CPPARITY_CASE_NAME];
        status = case_sweep_member(&loader->reader, sweep, scope, m, heads, case_name, member_name,
                                   sizeof member_name, &member);
        char member_scope[SCOPE_CAPACITY];
        yaml_source_format(member_scope, sizeof member_scope, "case '%s'", member_name);
        memcpy(member.values.family, case_name, sizeof member.values.family);
        if (status == CPPARITY_OK) {
            status = case_defaults_apply(&loader->reader, member_scope, node, name, defaults,
                                         &member, &suite->cases[suite->count]);
        }
        if (status == CPPARITY_OK) {
            status = add_case(loader, name, member_scope, member_name, line, suite);
        }
        case_settings_free(&member);
    }
    free(sweep);
    case_settings_free(&settings);
    return status;
}

/* The cases one case node makes: its sweep's family, or 1 (also when the sweep is wrong: the
 * case's own reading reports that). */
static int64_t cases_of(suite_loader *loader, const yaml_node_t *node) {
    const yaml_node_t *sweep_node =
        node->type == YAML_MAPPING_NODE
            ? yaml_source_value(&loader->source, node, case_keys[CASE_KEY_SWEEP].name, NULL)
            : NULL;
    if (sweep_node == NULL) {
        return 1;
    }
    case_sweep *sweep = malloc(sizeof *sweep);
    cpparity_error quiet;
    cpparity_error_clear(&quiet);
    yaml_source probe = loader->source;
    probe.error = &quiet;
    const int64_t count =
        sweep != NULL && case_sweep_read(&probe, sweep_node, "", sweep) == CPPARITY_OK
            ? case_sweep_members(sweep)
            : 1;
    free(sweep);
    return count;
}

/* Reads the whole document: defaults, then every case. */
static cpparity_status load_document(suite_loader *loader, cpparity_suite *suite) {
    yaml_source *source = &loader->source;
    const yaml_node_t *root = yaml_document_get_root_node(&source->document);
    if (root == NULL) {
        return yaml_source_fail_at(source, 0, 0, "empty file: expected a mapping with 'cases'");
    }
    if (root->type != YAML_MAPPING_NODE) {
        char found[YAML_SOURCE_FOUND];
        yaml_source_describe(root, found, sizeof found);
        return yaml_source_fail(
            source, root, "", "",
            "expected a mapping with 'defaults' and 'cases' at the top level, got %s", found);
    }
    cpparity_status status =
        yaml_source_check_mapping(source, root, "", "", case_suite_keys, CASE_SUITE_KEY_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    case_settings defaults;
    memset(&defaults, 0, sizeof defaults);
    const yaml_node_t *defaults_value = yaml_source_value(source, root, "defaults", NULL);
    if (defaults_value != NULL) {
        const char *names[CASE_KEY_COUNT];
        const int name_count = case_key_names(case_keys, CASE_KEY_COUNT, false, names);
        status = yaml_source_check_mapping(source, defaults_value, "defaults", "", names,
                                           (size_t)name_count);
        if (status == CPPARITY_OK) {
            status =
                case_reader_read_shared(&loader->reader, defaults_value, "defaults", &defaults);
        }
    }
    const yaml_node_t *cases = yaml_source_value(source, root, "cases", NULL);
    if (status == CPPARITY_OK && cases == NULL) {
        status = yaml_source_fail(source, root, "", "cases",
                                  "missing (a suite lists at least one case)");
    }
    if (status == CPPARITY_OK) {
        status = yaml_source_check_sequence(source, cases, "", "cases", "cases", true);
    }
    if (status == CPPARITY_OK) {
        int64_t count = 0;
        for (int64_t i = 0; i < yaml_source_length(cases); i++) {
            count += cases_of(loader, yaml_source_item(source, cases, i));
        }
        loader->name_capacity = 16;
        while (loader->name_capacity < 2 * count) {
            loader->name_capacity *= 2;
        }
        suite->cases = calloc((size_t)count + 1, sizeof *suite->cases);
        loader->name_slots = malloc((size_t)loader->name_capacity * sizeof *loader->name_slots);
        if (suite->cases == NULL || loader->name_slots == NULL) {
            status = yaml_source_out_of_memory(source);
        } else {
            memset(loader->name_slots, 0xff, (size_t)loader->name_capacity * sizeof(int64_t));
        }
    }
    for (int64_t i = 0; status == CPPARITY_OK && cases != NULL && i < yaml_source_length(cases);
         i++) {
        status = parse_case(loader, yaml_source_item(source, cases, i), i, &defaults, suite);
    }
    if (status != CPPARITY_OK && suite->cases != NULL) { /* rows of the case that failed */
        cpparity_case *failed = &suite->cases[suite->count];
        cpparity_row_layouts_free(failed->rows, failed->batch_size);
        failed->rows = NULL;
        failed->batch_size = 0;
    }
    free(loader->name_slots);
    loader->name_slots = NULL;
    case_settings_free(&defaults);
    return status;
}

cpparity_status cpparity_suite_load_text(const char *text, size_t length, const char *display_path,
                                         cpparity_suite *suite, cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    cpparity_error_clear(error);
    suite_loader loader;
    memset(&loader, 0, sizeof loader);
    loader.source.path = display_path != NULL ? display_path : "<text>";
    loader.source.error = error;
    loader.reader.source = &loader.source;
    if (text == NULL) {
        if (length > 0) {
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: no text",
                                      loader.source.path);
        }
        text = "";
    }
    cpparity_status status = yaml_source_parse(&loader.source, text, length);
    if (status == CPPARITY_OK) {
        status = load_document(&loader, suite);
        yaml_document_delete(&loader.source.document);
    }
    if (status != CPPARITY_OK) {
        cpparity_suite_free(suite);
        return status;
    }
    yaml_source_format(suite->path, sizeof suite->path, "%s", loader.source.path);
    return CPPARITY_OK;
}

cpparity_status cpparity_suite_read(const char *path, char **text_out, size_t *length_out,
                                    cpparity_error *error) {
    *text_out = NULL;
    *length_out = 0;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: cannot read: %s", path,
                                  strerror(errno));
    }
    char *text = NULL;
    size_t length = 0, capacity = 0;
    int read_error = 0;
    for (;;) {
        if (length > YAML_LIMIT_BYTES) {
            free(text);
            fclose(file);
            return cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                      "%s: larger than the %zu-byte (256 MiB) limit of a suite "
                                      "file (cases/README.md, Limits)",
                                      path, YAML_LIMIT_BYTES);
        }
        if (length == capacity) {
            size_t grown = capacity == 0 ? 65536 : capacity * 2;
            char *larger = realloc(text, grown);
            if (larger == NULL) {
                free(text);
                fclose(file);
                return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "%s: out of memory", path);
            }
            text = larger;
            capacity = grown;
        }
        size_t got = fread(text + length, 1, capacity - length, file);
        length += got;
        if (got == 0) {
            read_error = ferror(file) ? errno : 0;
            break;
        }
    }
    bool failed = ferror(file) != 0;
    fclose(file);
    if (failed) {
        free(text);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s: cannot read: %s", path,
                                  strerror(read_error != 0 ? read_error : EIO));
    }
    *text_out = text;
    *length_out = length;
    return CPPARITY_OK;
}

cpparity_status cpparity_suite_load(const char *path, cpparity_suite *suite,
                                    cpparity_error *error) {
    memset(suite, 0, sizeof *suite);
    cpparity_error_clear(error);
    char *text = NULL;
    size_t length = 0;
    cpparity_status status = cpparity_suite_read(path, &text, &length, error);
    if (status == CPPARITY_OK) {
        status = cpparity_suite_load_text(text, length, path, suite, error);
    }
    free(text);
    return status;
}

const char *cpparity_default_suite(void) {
    if (access("cases/ci.yaml", R_OK) == 0) {
        return "cases/ci.yaml";
    }
    return CPPARITY_SOURCE_DIR "/cases/ci.yaml";
}
