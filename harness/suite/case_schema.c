/* case_schema.c — the tables of a suite file's keys (see case_schema.h). */
#include "harness/suite/case_schema.h"

#include <stdio.h>
#include <string.h>

#include "common/case.h"
#include "common/names.h"

/* The member of struct type a key fills, and its size. */
#define MEMBER(type, member) .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)
/* The second member a key fills (a set's count, expect's flag). */
#define COUNT(type, member)                                                                        \
    .count_offset = offsetof(type, member), .count_size = sizeof(((type *)0)->member)

static const char *const padding_position_names[] = {"zero", "continue"};

const case_key case_keys[CASE_KEY_COUNT] = {
    [CASE_KEY_NAME] = {.name = "name",
                       .type = CASE_VALUE_NAME,
                       .case_only = true,
                       .required = true,
                       MEMBER(cpparity_case, name)},
    [CASE_KEY_DESCRIPTION] = {.name = "description",
                              .type = CASE_VALUE_STRING,
                              .case_only = true,
                              MEMBER(cpparity_case, description),
                              .default_kind = CASE_DEFAULT_VALUE},
    [CASE_KEY_MODEL] = {.name = "model", .type = CASE_VALUE_MODEL, MEMBER(cpparity_case, model)},
    [CASE_KEY_SEQ_LEN] = {.name = "seq_len",
                          .type = CASE_VALUE_INTEGER,
                          .required = true,
                          .minimum = 1,
                          MEMBER(cpparity_case, seq_len)},
    [CASE_KEY_ROWS] = {.name = "rows",
                       .type = CASE_VALUE_ROWS,
                       .required = true,
                       .entries = "rows",
                       MEMBER(cpparity_case, rows),
                       COUNT(cpparity_case, batch_size)},
    [CASE_KEY_CP] = {.name = "cp",
                     .type = CASE_VALUE_INTEGER_SET,
                     .required = true,
                     .minimum = 1,
                     .maximum_count = CPPARITY_MAX_CP_SIZES,
                     .entry = "cp size",
                     .entries = "cp sizes",
                     MEMBER(cpparity_case, cp_sizes),
                     COUNT(cpparity_case, cp_count)},
    [CASE_KEY_DTYPES] = {.name = "dtypes",
                         .type = CASE_VALUE_ENUM_SET,
                         .names = cpparity_dtype_names,
                         .name_count = CPPARITY_DTYPE_COUNT,
                         .entry = "dtype",
                         .entries = "dtypes",
                         MEMBER(cpparity_case, dtypes),
                         COUNT(cpparity_case, dtype_count),
                         .default_kind = CASE_DEFAULT_VALUE,
                         .default_value = CPPARITY_DTYPE_F32},
    [CASE_KEY_LAYOUTS] = {.name = "layouts",
                          .type = CASE_VALUE_ENUM_SET,
                          .names = cpparity_layout_names,
                          .name_count = CPPARITY_LAYOUT_COUNT,
                          .entry = "layout",
                          .entries = "layouts",
                          MEMBER(cpparity_case, layouts),
                          COUNT(cpparity_case, layout_count),
                          .default_kind = CASE_DEFAULT_VALUE,
                          .default_value = CPPARITY_LAYOUT_CONTIGUOUS},
    [CASE_KEY_ALGORITHMS] = {.name = "algorithms",
                             .type = CASE_VALUE_ALGORITHMS,
                             .names = cpparity_algorithm_names,
                             .name_count = CPPARITY_ALGORITHM_COUNT,
                             .maximum_count = CPPARITY_MAX_ALGORITHMS,
                             .entry = "algorithm",
                             .entries = "algorithms",
                             MEMBER(cpparity_case, algorithms),
                             COUNT(cpparity_case, algorithm_count),
                             .default_kind = CASE_DEFAULT_VALUE,
                             .default_value = CPPARITY_ALGORITHM_ULYSSES},
    [CASE_KEY_SEED] = {.name = "seed",
                       .type = CASE_VALUE_INTEGER,
                       .minimum = 0,
                       MEMBER(cpparity_case, seed),
                       .default_kind = CASE_DEFAULT_VALUE,
                       .default_value = 0},
    [CASE_KEY_TOLERANCES] = {.name = "tolerances",
                             .type = CASE_VALUE_TOLERANCES,
                             MEMBER(cpparity_case, tolerances),
                             .default_kind = CASE_DEFAULT_BUILT_IN},
    [CASE_KEY_EXPECT] = {.name = "expect",
                         .type = CASE_VALUE_EXPECT,
                         .case_only = true,
                         MEMBER(cpparity_case, refusal),
                         COUNT(cpparity_case, expect_refuse)},
    [CASE_KEY_LEVEL] = {.name = "level",
                        .type = CASE_VALUE_ENUM,
                        .names = cpparity_case_level_names,
                        .name_count = CPPARITY_LEVEL_COUNT,
                        MEMBER(cpparity_case, level),
                        .default_kind = CASE_DEFAULT_VALUE,
                        .default_value = CPPARITY_LEVEL_MODEL},
    [CASE_KEY_SWEEP] = {.name = "sweep",
                        .type = CASE_VALUE_SWEEP,
                        .case_only = true,
                        MEMBER(cpparity_case, family)},
};

const case_key case_row_keys[CASE_ROW_KEY_COUNT] = {
    {.name = "left_padding",
     .type = CASE_VALUE_INTEGER,
     .minimum = 0,
     MEMBER(cpparity_row_layout, left_padding),
     .default_kind = CASE_DEFAULT_VALUE},
    {.name = "documents",
     .type = CASE_VALUE_INTEGER_LIST,
     .minimum = 1,
     .entries = "document lengths",
     MEMBER(cpparity_row_layout, document_lengths),
     COUNT(cpparity_row_layout, document_count),
     .default_kind = CASE_DEFAULT_VALUE},
    {.name = "right_padding",
     .type = CASE_VALUE_INTEGER,
     .minimum = 0,
     MEMBER(cpparity_row_layout, right_padding),
     .default_kind = CASE_DEFAULT_VALUE},
    {.name = "padding_positions",
     .type = CASE_VALUE_ENUM,
     .names = padding_position_names,
     .name_count = CPPARITY_COUNT_OF(padding_position_names),
     MEMBER(cpparity_row_layout, padding_continues),
     .default_kind = CASE_DEFAULT_VALUE},
    {.name = "start_positions",
     .type = CASE_VALUE_INTEGER_LIST,
     .minimum = 0,
     .maximum = CPPARITY_MAX_START_POSITION,
     .entries = "start positions",
     MEMBER(cpparity_row_layout, start_positions)},
};

const char *const case_suite_keys[CASE_SUITE_KEY_COUNT] = {"defaults", "cases"};
const char *const case_expect_keys[CASE_EXPECT_KEY_COUNT] = {"refuse"};

const case_tolerance_field case_tolerance_fields[CASE_TOLERANCE_FIELD_COUNT] = {
    {"ratio", 1.0, true},
    {"floor", 0.0, false},
    {"ceiling", 0.0, false},
};

const case_key *case_key_find(const char *name) {
    for (int i = 0; i < CASE_KEY_COUNT; i++) {
        if (strcmp(case_keys[i].name, name) == 0) {
            return &case_keys[i];
        }
    }
    return NULL;
}

int case_key_names(const case_key *table, int count, bool with_case_only, const char **names) {
    int found = 0;
    for (int i = 0; i < count; i++) {
        if (with_case_only || !table[i].case_only) {
            names[found++] = table[i].name;
        }
    }
    return found;
}

/* The names of key as Markdown code joined by " \| " ("`f32` \| `bf16`"). */
static void join_code_names(const case_key *key, char *text, size_t size) {
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < key->name_count && used < size; i++) {
        int written =
            snprintf(text + used, size - used, "%s`%s`", i > 0 ? " \\| " : "", key->names[i]);
        if (written < 0) {
            return;
        }
        used += (size_t)written;
    }
}

void case_key_describe_type(const case_key *key, char *text, size_t size) {
    char names[128];
    join_code_names(key, names, sizeof names);
    const char *required = key->required ? ", required" : "";
    switch (key->type) {
    case CASE_VALUE_NAME:
    case CASE_VALUE_STRING:
        snprintf(text, size, "string%s", required);
        return;
    case CASE_VALUE_INTEGER:
        snprintf(text, size, "integer ≥ %lld%s", (long long)key->minimum, required);
        return;
    case CASE_VALUE_ENUM:
        snprintf(text, size, "%s%s", names, required);
        return;
    case CASE_VALUE_INTEGER_SET:
    case CASE_VALUE_INTEGER_LIST:
        snprintf(text, size, "list of integers%s", required);
        return;
    case CASE_VALUE_ENUM_SET:
        snprintf(text, size, "list of %s%s", names, required);
        return;
    case CASE_VALUE_ALGORITHMS:
        snprintf(text, size, "list of `ulysses` \\| `ring` \\| `hybrid:UxR`%s", required);
        return;
    case CASE_VALUE_ROWS:
        snprintf(text, size, "non-empty list of rows%s", required);
        return;
    case CASE_VALUE_MODEL:
    case CASE_VALUE_TOLERANCES:
        snprintf(text, size, "mapping%s", required);
        return;
    case CASE_VALUE_EXPECT:
        snprintf(text, size, "`{%s: TEXT}`%s", case_expect_keys[0], required);
        return;
    case CASE_VALUE_SWEEP:
        snprintf(text, size, "mapping (Sweeps)%s", required);
        return;
    }
    snprintf(text, size, "?");
}

void case_key_describe_default(const case_key *key, char *text, size_t size) {
    if (key->default_kind == CASE_DEFAULT_BUILT_IN) {
        snprintf(text, size, "built in");
        return;
    }
    if (key->default_kind == CASE_DEFAULT_NONE) {
        snprintf(text, size, "—");
        return;
    }
    const int index = (int)key->default_value;
    switch (key->type) {
    case CASE_VALUE_ENUM:
        snprintf(text, size, "`%s`", cpparity_name_of(key->names, key->name_count, index));
        return;
    case CASE_VALUE_ENUM_SET:
    case CASE_VALUE_ALGORITHMS:
        snprintf(text, size, "`[%s]`", cpparity_name_of(key->names, key->name_count, index));
        return;
    case CASE_VALUE_NAME:
    case CASE_VALUE_STRING:
        snprintf(text, size, "`\"\"`");
        return;
    case CASE_VALUE_INTEGER_SET:
        snprintf(text, size, "`[%lld]`", (long long)key->default_value);
        return;
    case CASE_VALUE_INTEGER_LIST:
        snprintf(text, size, "`[]`");
        return;
    default:
        snprintf(text, size, "`%lld`", (long long)key->default_value);
        return;
    }
}
