/* kernel_support.c — what a call needs of a kernel, and whether it has it (kernel_support.h). */
#include "distributed/kernels/kernel_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Floor division (toward −∞), as the chunk grid of docs/masks.md needs. */
static int64_t floor_divide(int64_t a, int64_t b) {
    const int64_t quotient = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

/* Whether some query of row b has no allowed key: a real query always has itself; a padding
 * query has one when a real key lies in [first, q], first being the latest of its document's
 * start, its window's start and its chunk's start. counts[t] = real keys in [0, t). */
static bool row_has_fully_masked_query(const cpparity_mask_description *mask, int64_t b,
                                       int64_t *counts) {
    const int64_t S = mask->seq_len;
    const int8_t *valid = mask->key_valid + b * S;
    counts[0] = 0;
    for (int64_t t = 0; t < S; t++) {
        counts[t + 1] = counts[t] + (valid[t] != 0);
    }
    for (int64_t q = 0; q < S; q++) {
        if (valid[q]) {
            continue;
        }
        int64_t first = mask->document_start[b * S + q];
        if (mask->layer_type == 1 && q - mask->window + 1 > first) {
            first = q - mask->window + 1;
        }
        if (mask->layer_type == 2 && mask->chunk_origin == 2) {
            /* inside a document positions rise by 1: q's chunk starts pos mod C tokens back */
            const int64_t position = mask->position[b * S + q];
            const int64_t chunk_start =
                q - (position - floor_divide(position, mask->chunk_size) * mask->chunk_size);
            first = chunk_start > first ? chunk_start : first;
        } else if (mask->layer_type == 2) {
            const int64_t origin =
                mask->chunk_origin == 1 ? mask->document_start[b * S + q] : mask->left_padding[b];
            const int64_t chunk_start =
                origin + floor_divide(q - origin, mask->chunk_size) * mask->chunk_size;
            first = chunk_start > first ? chunk_start : first;
        }
        first = first < 0 ? 0 : first;
        if (first > q || counts[q + 1] - counts[first] == 0) {
            return true;
        }
    }
    return false;
}

uint32_t kernel_call_needs(const cpparity_mask_description *mask,
                           const cpparity_attention_dims *dims) {
    uint32_t needs = 0;
    if (dims->heads > dims->kv_heads) {
        needs |= CPPARITY_KERNEL_SUPPORTS_GQA;
    }
    if (mask->layer_type == 1) {
        needs |= CPPARITY_KERNEL_SUPPORTS_SLIDING;
    } else if (mask->layer_type == 2) {
        needs |= mask->chunk_origin == 2   ? CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION
                 : mask->chunk_origin == 1 ? CPPARITY_KERNEL_SUPPORTS_CHUNKED_DOCUMENT
                                           : CPPARITY_KERNEL_SUPPORTS_CHUNKED_ROW;
    }
    const int64_t S = mask->seq_len;
    int64_t *counts = malloc((size_t)(S + 1) * sizeof *counts);
    for (int64_t b = 0; b < mask->batch; b++) {
        int64_t first_document = -1;
        for (int64_t t = 0; t < S; t++) {
            if (!mask->key_valid[b * S + t]) {
                needs |= CPPARITY_KERNEL_SUPPORTS_KEY_PADDING;
            } else if (first_document < 0) {
                first_document = mask->document[b * S + t];
            } else if (mask->document[b * S + t] != first_document) {
                needs |= CPPARITY_KERNEL_SUPPORTS_DOCUMENTS;
            }
        }
        /* without memory for the scan, assume the worst: the kernel must handle them */
        if (counts == NULL || row_has_fully_masked_query(mask, b, counts)) {
            needs |= CPPARITY_KERNEL_SUPPORTS_FULLY_MASKED_ROWS;
        }
    }
    free(counts);
    return needs;
}

const char *kernel_capability_name(uint32_t capability) {
    switch (capability) {
    case CPPARITY_KERNEL_SUPPORTS_GQA:
        return "GQA";
    case CPPARITY_KERNEL_SUPPORTS_KEY_PADDING:
        return "key padding";
    case CPPARITY_KERNEL_SUPPORTS_DOCUMENTS:
        return "packed documents";
    case CPPARITY_KERNEL_SUPPORTS_SLIDING:
        return "sliding windows";
    case CPPARITY_KERNEL_SUPPORTS_CHUNKED_ROW:
        return "chunks from the row start";
    case CPPARITY_KERNEL_SUPPORTS_CHUNKED_DOCUMENT:
        return "chunks from each document";
    case CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION:
        return "chunks counted in positions";
    case CPPARITY_KERNEL_SUPPORTS_FULLY_MASKED_ROWS:
        return "fully masked rows";
    case CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC:
        return "deterministic backward";
    case CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS:
        return "concurrent calls";
    default:
        return "?";
    }
}

bool kernel_declares_deterministic(const cpparity_attention_kernel *kernel) {
    return (kernel->capabilities & CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC) != 0;
}

bool kernel_supports_call(const cpparity_attention_kernel *kernel,
                          const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims, char *why, size_t size) {
    const uint32_t missing = kernel_call_needs(mask, dims) & ~kernel->capabilities;
    if (missing != 0) {
        size_t used = (size_t)snprintf(why, size, "needs");
        for (uint32_t bit = 1; bit <= CPPARITY_KERNEL_CAPABILITY_BITS && used < size; bit <<= 1) {
            if (missing & bit) {
                used += (size_t)snprintf(why + used, size - used, "%s %s",
                                         used > strlen("needs") ? "," : "",
                                         kernel_capability_name(bit));
            }
        }
        if (used < size) {
            snprintf(why + used, size - used, ", which %s does not declare", kernel->name);
        }
        return false;
    }
    if (kernel->head_dim_count > 0) {
        bool listed = false;
        for (int32_t i = 0; i < kernel->head_dim_count && !listed; i++) {
            listed = kernel->head_dims[i] == dims->head_dim;
        }
        if (!listed) {
            size_t used = (size_t)snprintf(why, size, "head dim %lld; %s supports",
                                           (long long)dims->head_dim, kernel->name);
            for (int32_t i = 0; i < kernel->head_dim_count && used < size; i++) {
                used += (size_t)snprintf(why + used, size - used, "%s %d", i > 0 ? "," : "",
                                         (int)kernel->head_dims[i]);
            }
            return false;
        }
    }
    if (kernel->supports != NULL) {
        char reason[256] = "";
        if (!kernel->supports(kernel->context, mask, dims, reason, sizeof reason)) {
            reason[sizeof reason - 1] = '\0';
            snprintf(why, size, "%s declines it: %s", kernel->name,
                     reason[0] != '\0' ? reason : "(no reason given)");
            return false;
        }
    }
    return true;
}

bool kernel_workspace_bytes(const cpparity_attention_kernel *kernel,
                            const cpparity_attention_dims *dims, int64_t *bytes) {
    *bytes = 0;
    const size_t end = offsetof(cpparity_attention_kernel, workspace_bytes) +
                       sizeof kernel->workspace_bytes; /* read only where struct_size covers it */
    if (kernel == NULL || kernel->struct_size < end || kernel->workspace_bytes == NULL) {
        return true;
    }
    const int64_t declared = kernel->workspace_bytes(kernel->context, dims);
    *bytes = declared > 0 ? declared : 0;
    return declared >= 0;
}

bool kernel_has_block_calls(const cpparity_attention_kernel *kernel) {
    return kernel != NULL && kernel->abi_version >= 3u &&
           kernel->struct_size >= CPPARITY_KERNEL_ABI3_STRUCT_SIZE &&
           kernel->forward_block != NULL && kernel->backward_block != NULL;
}
