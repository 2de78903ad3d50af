/*
 * test_case_schema.c — cases/README.md's table of case keys and the loader's schema
 * (harness/suite/case_schema.h) agree: every key of one is a key of the other, with the same
 * type and default columns (the README's text is what case_key_describe_type and
 * case_key_describe_default write for the key's row).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/suite/case_schema.h"

#define README CPPARITY_SOURCE_DIR "/cases/README.md"
#define CELL_CAPACITY 512
#define MAX_ROWS 64

/* One row of the README's table: the key (without backticks), its type and default columns. */
typedef struct readme_row {
    char key[CELL_CAPACITY];
    char type[CELL_CAPACITY];
    char default_text[CELL_CAPACITY];
} readme_row;

/* Copies the cell of line that starts at *cursor (up to an unescaped '|') into cell, trimmed of
 * spaces, and moves *cursor past the '|'. False at the end of the line. */
static bool next_cell(const char **cursor, char *cell, size_t capacity) {
    const char *start = *cursor;
    const char *end = start;
    while (*end != '\0' && *end != '\n' && !(*end == '|' && (end == start || end[-1] != '\\'))) {
        end++;
    }
    if (*end != '|') {
        return false;
    }
    *cursor = end + 1;
    while (start < end && *start == ' ') {
        start++;
    }
    while (end > start && end[-1] == ' ') {
        end--;
    }
    const size_t length = (size_t)(end - start) < capacity - 1 ? (size_t)(end - start) : 0;
    memcpy(cell, start, length);
    cell[length] = '\0';
    return true;
}

/* Reads the rows of the table under "## Case keys" in README into rows; returns how many. */
static int read_readme_table(readme_row *rows) {
    FILE *file = fopen(README, "r");
    cr_assert_not_null(file, "cannot open %s", README);
    char line[4096];
    bool in_section = false;
    int count = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, "## ", 3) == 0) {
            in_section = strcmp(line, "## Case keys\n") == 0;
            continue;
        }
        if (!in_section || strncmp(line, "| `", 3) != 0) {
            continue; /* prose, the header and the |---| line */
        }
        cr_assert_lt(count, MAX_ROWS, "more than %d rows in the README's table", MAX_ROWS);
        readme_row *row = &rows[count++];
        const char *cursor = line + 1;
        cr_assert(next_cell(&cursor, row->key, sizeof row->key), "no key in: %s", line);
        cr_assert(next_cell(&cursor, row->type, sizeof row->type), "no type in: %s", line);
        cr_assert(next_cell(&cursor, row->default_text, sizeof row->default_text),
                  "no default in: %s", line);
        const size_t length = strlen(row->key);
        cr_assert(length > 2 && row->key[0] == '`' && row->key[length - 1] == '`',
                  "the key column is not `key`: %s", line);
        memmove(row->key, row->key + 1, length - 2);
        row->key[length - 2] = '\0';
    }
    fclose(file);
    cr_assert_gt(count, 0, "no table of case keys under '## Case keys' in %s", README);
    return count;
}

Test(case_schema, readme_keys__every_one__is_a_schema_key_with_its_type_and_default) {
    readme_row rows[MAX_ROWS];
    const int count = read_readme_table(rows);
    for (int i = 0; i < count; i++) {
        const case_key *key = case_key_find(rows[i].key);
        cr_assert_not_null(key, "cases/README.md lists `%s`, which the schema does not have",
                           rows[i].key);
        char type[CELL_CAPACITY], default_text[CELL_CAPACITY];
        case_key_describe_type(key, type, sizeof type);
        case_key_describe_default(key, default_text, sizeof default_text);
        cr_expect_str_eq(rows[i].type, type, "`%s`: the README's type is '%s', the schema's '%s'",
                         rows[i].key, rows[i].type, type);
        cr_expect_str_eq(rows[i].default_text, default_text,
                         "`%s`: the README's default is '%s', the schema's '%s'", rows[i].key,
                         rows[i].default_text, default_text);
    }
}

Test(case_schema, schema_keys__every_one__is_in_the_readme_once) {
    readme_row rows[MAX_ROWS];
    const int count = read_readme_table(rows);
    for (int k = 0; k < CASE_KEY_COUNT; k++) {
        int found = 0;
        for (int i = 0; i < count; i++) {
            found += strcmp(rows[i].key, case_keys[k].name) == 0;
        }
        cr_expect_eq(found, 1, "the schema's key `%s` is in cases/README.md's table %d times",
                     case_keys[k].name, found);
    }
}

Test(case_schema, case_keys__looked_up_by_name__are_their_own_rows) {
    for (int k = 0; k < CASE_KEY_COUNT; k++) {
        cr_expect_eq(case_key_find(case_keys[k].name), &case_keys[k], "%s", case_keys[k].name);
    }
    cr_expect_null(case_key_find("<<"));
}
