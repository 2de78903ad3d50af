/*
 * names.h — one name table per enumeration. Every enumeration that users see spelled out (dtypes,
 * tensor kinds, tolerance origins, layer types, chunk origins, outcomes, store modes) has one
 * array of names indexed by its values, declared next to the enumeration; loaders, writers,
 * usage texts and reports all go through these two lookups, so a name is spelled once.
 */
#ifndef CPPARITY_COMMON_NAMES_H
#define CPPARITY_COMMON_NAMES_H

/* names[value], or "unknown" when value is outside [0, count). */
const char *cpparity_name_of(const char *const *names, int count, int value);

/* The value whose name is exactly text, or −1 when there is none. */
int cpparity_name_index(const char *const *names, int count, const char *text);

/* Writes the names joined for messages and usage texts into buffer (truncated to size bytes):
 * separator between names, last_separator before the last one ("a, b or c", "a|b|c"). */
void cpparity_names_join(const char *const *names, int count, const char *separator,
                         const char *last_separator, char *buffer, unsigned long size);

#define CPPARITY_COUNT_OF(array) ((int)(sizeof(array) / sizeof *(array)))

#endif
