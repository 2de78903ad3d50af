/* attention_export_format.c — the attention-level export's digest (see attention_export_format.h).
 */
#include "harness/storage/attention_export_format.h"

cpparity_digest attention_export_digest_start(const char *suite_text, size_t length) {
    cpparity_digest digest = cpparity_digest_start("cpparity attention export 1");
    cpparity_digest_int(&digest, (int64_t)length);
    cpparity_digest_bytes(&digest, suite_text, length);
    return digest;
}

void attention_export_digest_case(cpparity_digest *digest, const char *case_name,
                                  uint64_t input_seed) {
    cpparity_digest_text(digest, case_name);
    cpparity_digest_int(digest, (int64_t)input_seed);
}
