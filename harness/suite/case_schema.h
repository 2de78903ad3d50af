/*
 * case_schema.h — the keys of a suite file (cases/README.md) as tables: for every key its name,
 * its type, its range, whether it is required, its default and the member of cpparity_case it
 * fills. The reader (case_reader.h), the merge of defaults (case_defaults.h) and the README's
 * table of case keys (checked by tests/test_case_schema.c) all iterate these tables.
 *
 * A new case key whose value is a string, an integer, a name or a set of integers or names is
 * one member of cpparity_case, one value of case_key_index and one row of case_keys; nothing
 * else reads it by name. The model's keys are cpparity_model_fields (common/model_config.h).
 */
#ifndef CPPARITY_HARNESS_SUITE_CASE_SCHEMA_H
#define CPPARITY_HARNESS_SUITE_CASE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a key's value is written, stored and merged. */
typedef enum case_value_type {
    CASE_VALUE_NAME = 0,         /* a string of [A-Za-z0-9_.-], 1 to size - 1 characters */
    CASE_VALUE_STRING = 1,       /* a string of at most size - 1 characters (char[size]) */
    CASE_VALUE_INTEGER = 2,      /* an integer >= minimum (int64_t or uint64_t member) */
    CASE_VALUE_ENUM = 3,         /* one of names, stored as its index (an enum or bool member) */
    CASE_VALUE_INTEGER_SET = 4,  /* 1 to maximum_count distinct integers >= minimum (int64_t[]) */
    CASE_VALUE_ENUM_SET = 5,     /* 1 or more distinct names, stored as indices (enum[]) */
    CASE_VALUE_INTEGER_LIST = 6, /* integers >= minimum, any number (a row's int64_t *) */
    CASE_VALUE_ROWS = 7,         /* a non-empty list of row mappings (case_row_keys) */
    CASE_VALUE_MODEL = 8,        /* a mapping of cpparity_model_fields, merged key by key */
    CASE_VALUE_TOLERANCES = 9,   /* dtype -> kind -> case_tolerance_fields, merged field by field */
    CASE_VALUE_EXPECT = 10,      /* {refuse: TEXT}: the refusal the case must produce */
    CASE_VALUE_SWEEP = 11,       /* a mapping (case_sweep.h): the case becomes a family */
    CASE_VALUE_ALGORITHMS = 12,  /* 1 to maximum_count distinct `ulysses`, `ring` or `hybrid:UxR`
                                    (cpparity_algorithm_choice[]) */
} case_value_type;

/* What a key holds where no case and no `defaults` set it. */
typedef enum case_default {
    CASE_DEFAULT_NONE = 0,     /* nothing: the key is required, or its absence means "none" */
    CASE_DEFAULT_VALUE = 1,    /* default_value (a set: the set of that one entry; a string: "") */
    CASE_DEFAULT_BUILT_IN = 2, /* built into cpparity (tolerances: harness/judging/tolerance.h) */
} case_default;

typedef struct case_key {
    const char *name;          /* the YAML key */
    case_value_type type;      /* syntax, storage and merge */
    bool case_only;            /* allowed in a case only, not in `defaults` */
    bool required;             /* must be set in the case or in `defaults` */
    int64_t minimum;           /* integers and integer entries: the least value */
    int64_t maximum;           /* integer entries: the largest value (0: no limit) */
    int maximum_count;         /* sets: the most entries (0: as many as names) */
    const char *const *names;  /* enumerations: the name table, e.g. cpparity_dtype_names */
    int name_count;            /* entries of names */
    const char *entry;         /* sets: an entry in messages ("cp size") */
    const char *entries;       /* sets: entries in messages ("cp sizes") */
    size_t offset;             /* of the member it fills (cpparity_case, cpparity_row_layout) */
    size_t size;               /* bytes of that member (strings: the capacity, NUL included) */
    size_t count_offset;       /* of a second member it fills: a set's int count, expect's flag */
    size_t count_size;         /* bytes of that member, 0 when there is none */
    case_default default_kind; /* what it holds when set nowhere */
    int64_t default_value;     /* with CASE_DEFAULT_VALUE: the value, index or one entry */
} case_key;

/* The rows of case_keys, in the order messages list the keys. */
typedef enum case_key_index {
    CASE_KEY_NAME = 0,
    CASE_KEY_DESCRIPTION,
    CASE_KEY_MODEL,
    CASE_KEY_SEQ_LEN,
    CASE_KEY_ROWS,
    CASE_KEY_CP,
    CASE_KEY_DTYPES,
    CASE_KEY_LAYOUTS,
    CASE_KEY_ALGORITHMS,
    CASE_KEY_SEED,
    CASE_KEY_TOLERANCES,
    CASE_KEY_EXPECT,
    CASE_KEY_LEVEL,
    CASE_KEY_SWEEP,
    CASE_KEY_COUNT
} case_key_index;

/* The keys of a case (and, without the case_only ones, of `defaults`). */
extern const case_key case_keys[CASE_KEY_COUNT];

/* The keys of a row mapping (cases/README.md, Row), members of cpparity_row_layout. */
#define CASE_ROW_KEY_COUNT 5
extern const case_key case_row_keys[CASE_ROW_KEY_COUNT];

/* The top-level keys of a suite file, and the keys of `expect`. */
#define CASE_SUITE_KEY_COUNT 2
extern const char *const case_suite_keys[CASE_SUITE_KEY_COUNT];
#define CASE_EXPECT_KEY_COUNT 1
extern const char *const case_expect_keys[CASE_EXPECT_KEY_COUNT];

/* The fields of one tolerance: each a number > minimum, or >= minimum when inclusive. */
typedef struct case_tolerance_field {
    const char *name; /* "ratio", "floor", "ceiling" */
    double minimum;   /* the bound */
    bool inclusive;   /* whether minimum itself is allowed */
} case_tolerance_field;
#define CASE_TOLERANCE_FIELD_COUNT 3
extern const case_tolerance_field case_tolerance_fields[CASE_TOLERANCE_FIELD_COUNT];

/* The most rows and document lengths one suite may hold (cases/README.md, Limits); the rows of
 * `defaults` count again for every case they are copied into. */
#define CASE_MAX_ROW_ENTRIES ((int64_t)16 << 20)

/* The row of case_keys called name, or NULL. */
const case_key *case_key_find(const char *name);

/* The names of the keys of table (count rows) allowed in `defaults` (every one when
 * with_case_only), in table order, into names; returns how many. */
int case_key_names(const case_key *table, int count, bool with_case_only, const char **names);

/* The README's "type" and "default" columns of a key, as Markdown ("integer ≥ 1, required",
 * "`[f32]`", "—"), truncated to size bytes. */
void case_key_describe_type(const case_key *key, char *text, size_t size);
void case_key_describe_default(const case_key *key, char *text, size_t size);

#endif
