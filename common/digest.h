/*
 * digest.h — a 128-bit digest of bytes: two independent 64-bit FNV-1a hashes, each with its own
 * basis, written as 32 hex digits. Not cryptographic: it tells apart what was made from other
 * inputs (a reference cache entry of another case, a rank dump of another export), not what an
 * adversary forged.
 *
 *   cpparity_digest d = cpparity_digest_start("what is hashed");
 *   cpparity_digest_text(&d, name); cpparity_digest_int(&d, seed); ...
 *   char hex[CPPARITY_DIGEST_HEX]; cpparity_digest_hex(&d, hex);
 */
#ifndef CPPARITY_COMMON_DIGEST_H
#define CPPARITY_COMMON_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define CPPARITY_DIGEST_HEX 33 /* 32 hex digits and the NUL */

typedef struct cpparity_digest {
    uint64_t words[2];
} cpparity_digest;

/* A digest over the label (which kind of thing is hashed, so equal bytes of two kinds differ). */
cpparity_digest cpparity_digest_start(const char *label);

/* Adds size bytes. */
void cpparity_digest_bytes(cpparity_digest *digest, const void *data, size_t size);

/* Adds an integer, a double (its bits: 0.1 and 0.1000000001 differ) or a string (with its NUL,
 * so "ab" + "c" and "a" + "bc" differ). */
void cpparity_digest_int(cpparity_digest *digest, int64_t value);
void cpparity_digest_double(cpparity_digest *digest, double value);
void cpparity_digest_text(cpparity_digest *digest, const char *text);

/* The 32 lower-case hex digits of both words into hex. */
void cpparity_digest_hex(const cpparity_digest *digest, char hex[CPPARITY_DIGEST_HEX]);

#endif
