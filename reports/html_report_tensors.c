/*
 * html_report_tensors.c — every compared tensor of the reported run as compact JSON in the page's
 * data block (see html_report_page.h), from which the page's script draws an item's table when a
 * reader opens it, and the error-against-limit plots.
 *
 * The block's members (docs/command-line.md, `report`):
 *   "names":      tensor names, each once;
 *   "rules":      the names of the rules that decide a tensor (results_deciding_limit: "naive",
 *                 "cp 1");
 *   "tolerances": [ratio, floor, ceiling, ratio origin, floor origin, ceiling origin], each once;
 *   "reasons":    the verdicts' reasons, each once: a string in which {e}, {l}, {c} and {b} stand
 *                 for the row's error, limit, CP-only limit and naive error written as %.2e (as
 *                 the reason was), or a one-string array holding a reason taken literally;
 *   "items":      per item of the run in file order, null when it compared nothing, else its rows:
 *                 [name, rank, error, deciding limit, rule, error / limit, naive-rule limit,
 *                  CP-only limit, naive error, tolerance, reason, flags (+1 passed, +2 absolute
 *                  error), non-finite count (only when not 0)],
 *                 names, rules, tolerances and reasons as indices into the tables above; numbers
 *                 with 3 significant digits, null for NaN, "inf" and "-inf". A row that repeats
 *                 the row before it on another rank (gradients are bit-identical on every rank)
 *                 is that rank alone, a bare number.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/html_escape.h"
#include "reports/html_report_page.h"

/* ---- a table of strings, each once, in first-seen order ---------------------------------------
 */

typedef struct string_table {
    char **keys; /* (count) in first-seen order; owned */
    int64_t count, capacity;
    int64_t *slots; /* (slot_count) index + 1 into keys, 0 when empty */
    size_t slot_count;
} string_table;

/* The keys of the four tables, per row of every item, and where each item's rows start. */
enum { KEY_NAME, KEY_RULE, KEY_TOLERANCE, KEY_REASON, KEY_COUNT };

struct html_tensor_data {
    string_table tables[KEY_COUNT];
    int64_t *first_row;            /* (item_count + 1) each item's first row in keys */
    int32_t (*keys)[KEY_COUNT];    /* (rows) per row its index in each table */
    const metrics_row **tolerance; /* (tables[KEY_TOLERANCE].count) a row of each tolerance */
};

static uint64_t hash_text(const char *text) {
    uint64_t hash = 1469598103934665603u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        hash = (hash ^ *c) * 1099511628211u;
    }
    return hash;
}

static void string_table_free(string_table *table) {
    for (int64_t k = 0; k < table->count; k++) {
        free(table->keys[k]);
    }
    free(table->keys);
    free(table->slots);
    memset(table, 0, sizeof *table);
}

/* Rebuilds the slots at twice the keys' capacity (a load of at most a half). */
static bool string_table_grow(string_table *table) {
    const int64_t capacity = table->capacity > 0 ? 2 * table->capacity : 64;
    char **keys = realloc(table->keys, (size_t)capacity * sizeof *keys);
    if (keys == NULL) {
        return false;
    }
    table->keys = keys;
    table->capacity = capacity;
    const size_t slot_count = 2 * (size_t)capacity;
    int64_t *slots = calloc(slot_count, sizeof *slots);
    if (slots == NULL) {
        return false;
    }
    for (int64_t k = 0; k < table->count; k++) {
        size_t slot = hash_text(table->keys[k]) & (slot_count - 1);
        while (slots[slot] != 0) {
            slot = (slot + 1) & (slot_count - 1);
        }
        slots[slot] = k + 1;
    }
    free(table->slots);
    table->slots = slots;
    table->slot_count = slot_count;
    return true;
}

/* The index of key in table, added when new; -1 when memory fails. */
static int64_t string_table_index(string_table *table, const char *key) {
    if (table->count == table->capacity && !string_table_grow(table)) {
        return -1;
    }
    size_t slot = hash_text(key) & (table->slot_count - 1);
    while (table->slots[slot] != 0) {
        const int64_t k = table->slots[slot] - 1;
        if (strcmp(table->keys[k], key) == 0) {
            return k;
        }
        slot = (slot + 1) & (table->slot_count - 1);
    }
    const size_t length = strlen(key);
    char *copy = malloc(length + 1);
    if (copy == NULL) {
        return -1;
    }
    memcpy(copy, key, length + 1);
    table->keys[table->count] = copy;
    table->slots[slot] = table->count + 1;
    return table->count++;
}

/* ---- numbers and reasons ----------------------------------------------------------------------
 */

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* value as JSON with 3 significant digits ("1.15e-7", "0.0115", "12"), null for NaN, "inf" and
 * "-inf" for infinities, into text. */
static void short_number_text(char *text, size_t size, double value) {
    if (isnan(value)) {
        snprintf(text, size, "null");
        return;
    }
    if (isinf(value)) {
        snprintf(text, size, value > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char raw[32];
    snprintf(raw, sizeof raw, "%.3g", value);
    /* "1.15e-07" -> "1.15e-7", "1e+10" -> "1e10": JSON needs neither the '+' nor the zeros */
    size_t n = 0;
    for (const char *c = raw; *c != '\0' && n + 1 < size; c++) {
        text[n++] = *c;
        if (*c == 'e') {
            c += c[1] == '+';
            if (c[1] == '-') {
                text[n++] = *++c;
            }
            while (c[1] == '0' && c[2] != '\0') {
                c++;
            }
        }
    }
    text[n] = '\0';
}

void html_put_short_number(FILE *out, double value) {
    char text[40];
    short_number_text(text, sizeof text, value);
    fputs(text, out);
}

/* The reason of row as a template: each number written as its error, limit, CP-only limit or
 * naive error are (%.2e, as the harness writes them) becomes {e}, {l}, {c} or {b}, so the many
 * reasons that differ only in their numbers are one entry. The key starts with 't' for a
 * template, 'l' for a reason taken literally (one holding a brace). */
static void reason_key(const metrics_row *row, char *key, size_t size) {
    const char *reason = row->reason;
    if (strchr(reason, '{') != NULL || strchr(reason, '}') != NULL) {
        snprintf(key, size, "l%s", reason);
        return;
    }
    struct {
        char mark;
        double value;
        char text[32];
    } numbers[] = {{'e', row->relative_l2, ""},
                   {'l', row->limit, ""},
                   {'c', row->cp1_limit, ""},
                   {'b', row->baseline_error, ""}};
    const size_t number_count = sizeof numbers / sizeof *numbers;
    for (size_t k = 0; k < number_count; k++) {
        if (isfinite(numbers[k].value)) {
            snprintf(numbers[k].text, sizeof numbers[k].text, "%.2e", numbers[k].value);
        }
    }
    size_t n = 0;
    key[n++] = 't';
    for (const char *c = reason; *c != '\0' && n + 4 < size;) {
        /* a number starts where no digit, '.' or '-' precedes it */
        const bool starts = c == reason || (!is_digit(c[-1]) && c[-1] != '.' && c[-1] != '-');
        size_t matched = 0;
        for (size_t k = 0; k < number_count && starts && matched == 0; k++) {
            const size_t length = strlen(numbers[k].text);
            /* ...and ends where no digit follows */
            if (length > 0 && strncmp(c, numbers[k].text, length) == 0 && !is_digit(c[length])) {
                key[n++] = '{';
                key[n++] = numbers[k].mark;
                key[n++] = '}';
                matched = length;
            }
        }
        if (matched > 0) {
            c += matched;
        } else {
            key[n++] = *c++;
        }
    }
    key[n] = '\0';
}

/* ---- the index --------------------------------------------------------------------------------
 */

void html_tensor_data_free(html_page *page) {
    html_tensor_data *data = page->tensors;
    if (data == NULL) {
        return;
    }
    for (int k = 0; k < KEY_COUNT; k++) {
        string_table_free(&data->tables[k]);
    }
    free(data->first_row);
    free(data->keys);
    free(data->tolerance);
    free(data);
    page->tensors = NULL;
}

/* The four keys of row into key[]; false when memory fails. */
static bool index_row(html_tensor_data *data, const metrics_row *row, int32_t key[KEY_COUNT]) {
    char text[CPPARITY_REASON_TEXT + 8];
    const deciding_limit decided = html_tensor_deciding(row);
    int64_t found[KEY_COUNT];
    found[KEY_NAME] = string_table_index(&data->tables[KEY_NAME], row->tensor);
    found[KEY_RULE] = string_table_index(&data->tables[KEY_RULE], decided.rule);
    snprintf(text, sizeof text, "%.17g %.17g %.17g %s %s %s", row->ratio, row->floor, row->ceiling,
             row->ratio_origin, row->floor_origin, row->ceiling_origin);
    string_table *tolerances = &data->tables[KEY_TOLERANCE];
    const int64_t before = tolerances->count;
    found[KEY_TOLERANCE] = string_table_index(tolerances, text);
    if (found[KEY_TOLERANCE] >= 0 && tolerances->count > before) {
        const metrics_row **grown =
            realloc(data->tolerance, (size_t)tolerances->count * sizeof *grown);
        if (grown == NULL) {
            return false;
        }
        data->tolerance = grown;
        data->tolerance[found[KEY_TOLERANCE]] = row;
    }
    reason_key(row, text, sizeof text);
    found[KEY_REASON] = string_table_index(&data->tables[KEY_REASON], text);
    for (int k = 0; k < KEY_COUNT; k++) {
        if (found[k] < 0 || found[k] > INT32_MAX) {
            return false;
        }
        key[k] = (int32_t)found[k];
    }
    return true;
}

cpparity_status html_tensor_data_build(html_page *page, cpparity_error *error) {
    const read_results *run = page->run;
    html_tensor_data *data = calloc(1, sizeof *data);
    page->tensors = data;
    int64_t rows = 0;
    for (int64_t i = 0; i < run->item_count; i++) {
        rows += run->items[i].tensor_count;
    }
    if (data != NULL) {
        data->first_row = calloc((size_t)run->item_count + 1, sizeof *data->first_row);
        data->keys = calloc((size_t)rows + 1, sizeof *data->keys);
    }
    bool ok = data != NULL && data->first_row != NULL && data->keys != NULL;
    int64_t at = 0;
    for (int64_t i = 0; ok && i < run->item_count; i++) {
        data->first_row[i] = at;
        for (int64_t t = 0; ok && t < run->items[i].tensor_count; t++) {
            ok = index_row(data, &run->items[i].tensors[t], data->keys[at++]);
        }
    }
    if (!ok) {
        html_tensor_data_free(page);
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory for the report's tensor data");
    }
    data->first_row[run->item_count] = at;
    return CPPARITY_OK;
}

/* ---- the JSON ---------------------------------------------------------------------------------
 */

const metrics_row *html_worst_tensor(const read_item *item) {
    const metrics_row *worst = NULL;
    double worst_ratio = 0.0;
    for (int64_t t = 0; t < item->tensor_count; t++) {
        const double ratio = html_tensor_deciding(&item->tensors[t]).ratio;
        const bool above = isnan(ratio) ? !isnan(worst_ratio) || worst == NULL
                                        : !isnan(worst_ratio) && ratio > worst_ratio;
        if (worst == NULL || above) {
            worst = &item->tensors[t];
            worst_ratio = ratio;
        }
    }
    return worst;
}

/* A row without its rank: "name|error,limit,...": two rows on different ranks that print the
 * same are one row repeated. */
static void row_text(const metrics_row *row, const int32_t key[KEY_COUNT], char *text,
                     size_t size) {
    const deciding_limit decided = html_tensor_deciding(row);
    char error[40], limit[40], ratio[40], naive_limit[40], cp1_limit[40], naive_error[40];
    short_number_text(error, sizeof error, row->relative_l2);
    short_number_text(limit, sizeof limit, decided.limit);
    short_number_text(ratio, sizeof ratio, decided.ratio);
    short_number_text(naive_limit, sizeof naive_limit, row->limit);
    short_number_text(cp1_limit, sizeof cp1_limit, row->cp1_limit);
    short_number_text(naive_error, sizeof naive_error, row->baseline_error);
    const int flags = (row->passed ? 1 : 0) + (row->absolute ? 2 : 0);
    int n =
        snprintf(text, size, "%" PRId32 "|%s,%s,%" PRId32 ",%s,%s,%s,%s,%" PRId32 ",%" PRId32 ",%d",
                 key[KEY_NAME], error, limit, key[KEY_RULE], ratio, naive_limit, cp1_limit,
                 naive_error, key[KEY_TOLERANCE], key[KEY_REASON], flags);
    if (row->nonfinite > 0 && n > 0 && (size_t)n < size) {
        snprintf(text + n, size - (size_t)n, ",%" PRId64, row->nonfinite);
    }
}

static void put_table(FILE *out, const char *name, const string_table *table) {
    fprintf(out, "\"%s\":[", name);
    for (int64_t k = 0; k < table->count; k++) {
        fputs(k > 0 ? "," : "", out);
        json_put_string(out, table->keys[k]);
    }
    fputs("]", out);
}

void html_put_tensor_data(FILE *out, const html_page *page) {
    const html_tensor_data *data = page->tensors;
    put_table(out, "names", &data->tables[KEY_NAME]);
    fputs(",\n", out);
    put_table(out, "rules", &data->tables[KEY_RULE]);
    fputs(",\n\"tolerances\":[", out);
    for (int64_t k = 0; k < data->tables[KEY_TOLERANCE].count; k++) {
        const metrics_row *row = data->tolerance[k];
        fputs(k > 0 ? ",[" : "[", out);
        json_put_number(out, row->ratio);
        fputc(',', out);
        json_put_number(out, row->floor);
        fputc(',', out);
        json_put_number(out, row->ceiling);
        fputc(',', out);
        json_put_string(out, row->ratio_origin);
        fputc(',', out);
        json_put_string(out, row->floor_origin);
        fputc(',', out);
        json_put_string(out, row->ceiling_origin);
        fputc(']', out);
    }
    fputs("],\n\"reasons\":[", out);
    const string_table *reasons = &data->tables[KEY_REASON];
    for (int64_t k = 0; k < reasons->count; k++) {
        const bool literal = reasons->keys[k][0] == 'l';
        fputs(k > 0 ? (literal ? ",[" : ",") : (literal ? "[" : ""), out);
        json_put_string(out, reasons->keys[k] + 1);
        fputs(literal ? "]" : "", out);
    }
    fputs("],\n\"items\":[", out);
    const read_results *run = page->run;
    /* Row text without the rank: a name index, 9 numbers of at most 9 characters or "-inf",
     * indices and the flags; far below this. */
    char text[256], previous[256];
    for (int64_t i = 0; i < run->item_count; i++) {
        const read_item *item = &run->items[i];
        fputs(i > 0 ? ",\n" : "", out);
        if (item->tensor_count == 0) {
            fputs("null", out);
            continue;
        }
        fputc('[', out);
        previous[0] = '\0';
        for (int64_t t = 0; t < item->tensor_count; t++) {
            const metrics_row *row = &item->tensors[t];
            fputs(t > 0 ? "," : "", out);
            row_text(row, data->keys[data->first_row[i] + t], text, sizeof text);
            if (strcmp(text, previous) == 0) {
                fprintf(out, "%d", (int)row->rank); /* the row before, on this rank */
                continue;
            }
            const char *bar = strchr(text, '|');
            fprintf(out, "[%.*s,%d,%s]", (int)(bar - text), text, (int)row->rank, bar + 1);
            memcpy(previous, text, sizeof previous);
        }
        fputc(']', out);
    }
    fputs("]", out);
}
