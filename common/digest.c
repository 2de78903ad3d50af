/* digest.c — see digest.h. */
#include "common/digest.h"

#include <stdio.h>
#include <string.h>

/* FNV-1a, 64 bits, continued from hash. */
static uint64_t fnv(uint64_t hash, const void *data, size_t size) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++) {
        hash = (hash ^ bytes[i]) * 0x100000001b3u;
    }
    return hash;
}

void cpparity_digest_bytes(cpparity_digest *digest, const void *data, size_t size) {
    digest->words[0] = fnv(digest->words[0], data, size);
    digest->words[1] = fnv(digest->words[1] ^ 0x9e3779b97f4a7c15u, data, size);
}

cpparity_digest cpparity_digest_start(const char *label) {
    cpparity_digest digest = {{0xcbf29ce484222325u, 0x84222325cbf29ce4u}};
    cpparity_digest_text(&digest, label);
    return digest;
}

void cpparity_digest_int(cpparity_digest *digest, int64_t value) {
    cpparity_digest_bytes(digest, &value, sizeof value);
}

void cpparity_digest_double(cpparity_digest *digest, double value) {
    cpparity_digest_bytes(digest, &value, sizeof value);
}

void cpparity_digest_text(cpparity_digest *digest, const char *text) {
    cpparity_digest_bytes(digest, text, strlen(text) + 1);
}

void cpparity_digest_hex(const cpparity_digest *digest, char hex[CPPARITY_DIGEST_HEX]) {
    snprintf(hex, CPPARITY_DIGEST_HEX, "%016llx%016llx", (unsigned long long)digest->words[0],
             (unsigned long long)digest->words[1]);
}
