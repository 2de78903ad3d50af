/*
 * test_reference_store.c — reference outputs on disk (harness/judging/reference_store.h): an
 * entry reads back bit for bit, its key changes with anything the outputs depend on, and an
 * entry that is damaged, truncated, of other sizes or another key is never trusted.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/judging/reference_store.h"
#include "tests/support/test_files.h"
#include "tests/support/test_models.h"

static int64_t lengths[2] = {5, 3};
static cpparity_row_layout row = {.document_count = 2, .document_lengths = lengths};

static cpparity_case make_case(void) {
    cpparity_case c;
    memset(&c, 0, sizeof c);
    c.model = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_SLIDING);
    c.seq_len = 8;
    c.batch_size = 1;
    c.rows = &row;
    return c;
}

enum { B = 1, S = 8, V = 7, P = 11 };

typedef struct arrays {
    double logits[B * S * V], gradients[P];
    uint8_t masked[B * S];
} arrays;

static reference_store_entry entry_of(arrays *a) {
    return (reference_store_entry){B, S, V, P, 0.0, a->logits, a->gradients, a->masked};
}

Test(reference_store, saved_entry__reads_back_bit_for_bit) {
    char folder[64];
    test_make_folder(folder, sizeof folder);
    const cpparity_case c = make_case();
    const reference_store_key key = reference_store_key_of(&c, 42);
    arrays written, read;
    for (int i = 0; i < B * S * V; i++) {
        written.logits[i] = sin(i) * 1e3; /* values whose bits matter */
    }
    for (int i = 0; i < P; i++) {
        written.gradients[i] = -1.0 / (i + 3);
    }
    memset(written.masked, 0, sizeof written.masked);
    written.masked[3] = 1;
    reference_store_entry entry = entry_of(&written);
    entry.loss = 2.718281828459045;
    cpparity_error error;
    cr_assert_eq(reference_store_save(folder, &key, &entry, &error), CPPARITY_OK, "%s",
                 error.message);
    memset(&read, 0xff, sizeof read);
    reference_store_entry loaded = entry_of(&read);
    char why[256];
    cr_assert(reference_store_load(folder, &key, &loaded, why, sizeof why), "%s", why);
    cr_expect_eq(loaded.loss, entry.loss);
    cr_expect_eq(memcmp(&read, &written, sizeof read), 0, "the arrays, bit for bit");
    cr_expect_eq(test_count_entries(folder), 1, "one file, no temporary left");
}

Test(reference_store, key__changes_with_seed_layout_model_and_nothing_else) {
    cpparity_case c = make_case();
    const reference_store_key base = reference_store_key_of(&c, 42);
    const reference_store_key again = reference_store_key_of(&c, 42);
    cr_expect_str_eq(base.hex, again.hex, "a pure function of what the outputs depend on");
    cr_expect_str_neq(reference_store_key_of(&c, 43).hex, base.hex, "the seed");
    c.model.rope_theta = 10000.5;
    cr_expect_str_neq(reference_store_key_of(&c, 42).hex, base.hex, "a model number's bits");
    c = make_case();
    int64_t other[2] = {4, 4};
    cpparity_row_layout moved = row;
    moved.document_lengths = other;
    c.rows = &moved;
    cr_expect_str_neq(reference_store_key_of(&c, 42).hex, base.hex, "the documents");
    strcpy(c.name, "renamed");
    c.rows = &row;
    cr_expect_str_eq(reference_store_key_of(&c, 42).hex, base.hex,
                     "the name does not change the outputs");
}

/* Saves an entry of zeros for make_case() and seed 7 in folder; its key in *key. */
static reference_store_entry save_zeros(const char *folder, arrays *a, reference_store_key *key) {
    const cpparity_case c = make_case();
    *key = reference_store_key_of(&c, 7);
    memset(a, 0, sizeof *a);
    reference_store_entry entry = entry_of(a);
    cr_assert_eq(reference_store_save(folder, key, &entry, NULL), CPPARITY_OK);
    return entry;
}

/* Saves an entry, lets damage() change the file, and expects it refused with fragment. */
static void expect_untrusted(void (*damage)(const char *path), const char *fragment) {
    char folder[64], path[192];
    test_make_folder(folder, sizeof folder);
    arrays a;
    reference_store_key key;
    reference_store_entry entry = save_zeros(folder, &a, &key);
    snprintf(path, sizeof path, "%s/%s.ref", folder, key.hex);
    damage(path);
    char why[512] = "";
    cr_expect_not(reference_store_load(folder, &key, &entry, why, sizeof why));
    cr_expect(strstr(why, fragment) != NULL && strstr(why, path) != NULL, "%s", why);
    /* storing again replaces it */
    cr_assert_eq(reference_store_save(folder, &key, &entry, NULL), CPPARITY_OK);
    cr_expect(reference_store_load(folder, &key, &entry, why, sizeof why), "%s", why);
}

static void flip_a_byte(const char *path) {
    FILE *file = fopen(path, "r+b");
    fseek(file, 100, SEEK_SET);
    fputc(0x5a, file);
    fclose(file);
}

static void truncate_it(const char *path) {
    cr_assert_eq(truncate(path, 90), 0);
}

static void garbage(const char *path) {
    FILE *file = fopen(path, "wb");
    fputs("not an entry at all, but long enough to read a header from it ........", file);
    fclose(file);
}

Test(reference_store, damaged_truncated_or_foreign_entries__never_trusted) {
    expect_untrusted(flip_a_byte, "checksum");
    expect_untrusted(truncate_it, "truncated");
    expect_untrusted(garbage, "not a reference cache entry");
}

Test(reference_store, entry_of_other_sizes__never_trusted) {
    char folder[64];
    test_make_folder(folder, sizeof folder);
    arrays a;
    reference_store_key key;
    reference_store_entry entry = save_zeros(folder, &a, &key);
    entry.parameters = P - 1;
    char why[512] = "";
    cr_expect_not(reference_store_load(folder, &key, &entry, why, sizeof why));
    cr_expect(strstr(why, "sizes") != NULL, "%s", why);
    char missing[256] = "x";
    const cpparity_case c = make_case();
    const reference_store_key other = reference_store_key_of(&c, 8);
    cr_expect_not(reference_store_load(folder, &other, &entry, missing, sizeof missing));
    cr_expect_str_empty(missing, "no entry is not a problem, only a miss");
}
