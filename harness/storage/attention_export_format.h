/*
 * attention_export_format.h — the names and digest of the attention-level export and the kernel
 * dump (docs/dump-format.md, "The kernel dump"), shared by their writer and readers.
 */
#ifndef CPPARITY_HARNESS_STORAGE_ATTENTION_EXPORT_FORMAT_H
#define CPPARITY_HARNESS_STORAGE_ATTENTION_EXPORT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/digest.h"

#define ATTENTION_EXPORT_FORMAT "cpparity-attention-export"
#define ATTENTION_EXPORT_VERSION 1
#define KERNEL_DUMP_FORMAT "cpparity-kernel-dump"
#define KERNEL_DUMP_VERSION 1

/* The digest of an attention-level export: of the suite's bytes and, in order, each case's name
 * and input seed. Begun with attention_export_digest_start, one attention_export_digest_case per
 * case, ended with cpparity_digest_hex. */
cpparity_digest attention_export_digest_start(const char *suite_text, size_t length);
void attention_export_digest_case(cpparity_digest *digest, const char *case_name,
                                  uint64_t input_seed);

#endif
