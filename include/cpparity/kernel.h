/*
 * cpparity/kernel.h — the attention kernel ABI of cpparity, version 3: what a kernel built apart
 * from cpparity implements so that `cpparity run --kernel PATH.so` can judge it inside the
 * context-parallel model (and, where a suite has them, in attention-level cases).
 *
 * A kernel is a plain C struct of function pointers with only fixed-width C types. A plugin is a
 * shared library that exports
 *
 *     const cpparity_attention_kernel *const *cpparity_kernel_plugin(uint32_t abi_version,
 *                                                                    int32_t *count);
 *
 * returning its kernels (*count of them; NULL and *count = 0 when it does not speak
 * abi_version). The kernels must live as long as the library stays loaded. A kernel computes
 * attention for the heads a rank holds after the Ulysses all-to-all, over the whole sequence,
 * under a compact mask description (never an S×S array) — a whole-sequence call — and, from ABI
 * 3 on, for a block of queries against a block of keys (forward_block, backward_block): ring
 * attention's calls, where a rank's queries meet the key/value block visiting it. Block calls are
 * optional: a kernel without them (forward_block and backward_block both NULL, or an ABI 2
 * plugin) keeps working wherever every call is a whole-sequence call (Ulysses); model-level items
 * that need block calls (ring, hybrid) are NOT CLAIMED for it ("kernel NAME has no block calls
 * (forward_block/backward_block NULL)"; for an ABI 2 plugin "kernel ABI 2 has no block calls"),
 * and its attention-level items judge its whole-sequence calls only, saying so. cpparity asks the
 * entry point for version 3 first and then for 2.
 *
 * Fields (struct cpparity_attention_kernel below). Required: abi_version
 * (CPPARITY_KERNEL_ABI_VERSION when built against this header), struct_size
 * (sizeof(cpparity_attention_kernel) when built), name (non-empty, unique among the kernels
 * cpparity holds), device, dtype, forward, backward, capabilities (the CPPARITY_KERNEL_SUPPORTS_*
 * bits it claims; 0 claims none) and head_dim_count (0 = every head dim) with head_dims when
 * head_dim_count > 0. Optional, NULL (or left out of a designated initializer) when absent:
 * version (read as "" when NULL), context, supports, workspace_bytes, and the block calls
 * forward_block and backward_block, which come in pairs: both, or neither (one without the other
 * is refused). Not read: deterministic. A plugin written for ABI 2 (whole-sequence calls,
 * abi_version = CPPARITY_KERNEL_ABI_VERSION, struct_size = sizeof) and recompiled against this
 * header is an ABI 3 kernel without block calls: it loads and is judged as before.
 *
 * Tensor pointers are host memory for a CPU kernel; device memory for a CUDA kernel, with the
 * caller's cudaStream_t as stream. A kernel must not keep any pointer after a call returns, and
 * must write every element of its outputs (cpparity poisons them with NaN before the call).
 *
 * Layouts (row-major):  q, out, dq, dout  [B, S, H, Dh]     k, v, dk, dv  [B, S, Hkv, Dh]
 *                       lse               [B, H, S] float32, natural log
 * where H and Hkv are the heads of this call (local heads). Query head j reads key/value head
 * j / (H / Hkv). Element type: float32, or bfloat16 (uint16_t bits) when dtype says so.
 *
 * Semantics (cpparity's docs/masks.md is the definition): with q the query and k the key index
 * in row b,
 *     allowed = k <= q && key_valid[b][k] && document[b][q] == document[b][k]
 *               && (layer_type != 1 || k > q - window)
 *               && (layer_type != 2 || chunk(k) == chunk(q))
 * where chunk(t) = floor((t - o) / chunk_size) with o = left_padding[b] (chunk_origin 0) or
 * document_start[b][q] (chunk_origin 1), or chunk(t) = floor(position[b][t] / chunk_size)
 * (chunk_origin 2: chunks counted in position_ids, transformers' chunks on packed rows), and
 * floor rounds toward −∞. Padding masks keys only. scores = scale · q·k over allowed keys; a query
 * row with no allowed key has out = 0 and lse = −∞. Backward OVERWRITES dq, dk and dv with the
 * gradients of Σ dout ⊙ out.
 *
 * What backward receives: q, k, v, dout, and an out and lse for the same q, k, v and mask. Inside
 * the model and in an attention-level case's first check they are the kernel's own forward's; an
 * attention-level case then calls backward again with the float64 reference's out and lse rounded
 * to the kernel's dtype (fully masked rows: out 0, lse −∞), to judge backward alone. A backward
 * must use only what it receives (no state kept from the forward call).
 *
 * Threads: cpparity may call one kernel from several threads at once (`--comm local` runs every
 * rank on a thread of one process) only when it declares CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS:
 * its forward and backward then keep no state between calls outside their arguments (no static
 * scratch buffers, no shared handles used unlocked). Without that bit cpparity serialises every
 * call to the kernel, from any thread, one at a time. Calls on one thread are always sequential.
 *
 * Block calls (ABI 3). A block names its rows by global token index, into the mask's padded
 * sequence: query row i of the call is token query_index[i], key row j is token key_index[j]
 * (int64, any order, e.g. a zigzag rank's two chunks in one call). Then
 *     q, out, dout, dq  [B, Sq, H, Dh]     k, v, dk, dv  [B, Sk, Hkv, Dh]     lse  [B, H, Sq]
 * and allowed(q, k) above is evaluated on (query_index[i], key_index[j]); dims->seq_len is the
 * mask's S. forward_block writes the block's own out and lse (over its keys only: a query row with
 * no allowed key in the block has out 0 and lse −∞); the caller merges blocks by log-sum-exp.
 * backward_block receives the merged out and lse of the query rows (over every key) and
 * OVERWRITES dq, dk and dv with this block's share of the gradients. A whole-sequence call is the
 * block call with query_index = key_index = 0 … S − 1. The index arrays are in the tensors'
 * memory (host, or device for a CUDA kernel).
 *
 * Version history: 1 — forward, backward, name, version, device, dtype, deterministic.
 * 2 — capabilities, head_dims and supports() appended; the plugin entry point. Later, still
 * version 2: workspace_bytes() appended, optional; CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS
 * (bit 8) added: a plugin built before it, without the bit, has its calls serialised. A
 * descriptor's struct_size says which fields it has: cpparity requires at least
 * CPPARITY_KERNEL_ABI2_STRUCT_SIZE (up to supports) and reads a later field only when struct_size
 * covers it, so plugins built against an older kernel.h (without workspace_bytes) load and run
 * unchanged. 3 — forward_block and backward_block appended, optional: both set (ring and hybrid
 * items run, attention-level items judge them) or both NULL (whole-sequence calls only, as for
 * ABI 2: ring and hybrid items NOT CLAIMED, "no block calls"); a version 3 descriptor's
 * struct_size covers them (CPPARITY_KERNEL_ABI3_STRUCT_SIZE). Earlier builds of cpparity
 * speaking version 3 required both and refused (exit 2) a descriptor leaving them NULL. Later,
 * still version 3: chunk_origin 2 (chunks counted in position_ids, docs/masks.md) with
 * cpparity_mask_description.position appended and its capability bit
 * CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION (bit 9, outside CPPARITY_KERNEL_SUPPORTS_ALL): a
 * kernel without the bit is never given chunk_origin 2 (such layers are NOT CLAIMED for it).
 */
#ifndef CPPARITY_KERNEL_H
#define CPPARITY_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CPPARITY_KERNEL_ABI_VERSION 3u
/* The oldest version cpparity still loads (whole-sequence calls only). */
#define CPPARITY_KERNEL_ABI_OLDEST 2u

/* Values of cpparity_attention_kernel.device and .dtype. */
#define CPPARITY_KERNEL_DEVICE_CPU 0     /* host pointers */
#define CPPARITY_KERNEL_DEVICE_CUDA 1    /* device pointers and a cudaStream_t */
#define CPPARITY_KERNEL_DTYPE_FLOAT32 0  /* float */
#define CPPARITY_KERNEL_DTYPE_BFLOAT16 1 /* uint16_t holding bfloat16 bits */

/* Capabilities (cpparity_attention_kernel.capabilities). A call needing one the kernel lacks is
 * reported "not claimed by kernel", never run and never counted as passed (nor failed: an
 * attention-level case runs the layers the kernel claims and lists the others). */
#define CPPARITY_KERNEL_SUPPORTS_GQA (1u << 0)               /* heads > kv_heads */
#define CPPARITY_KERNEL_SUPPORTS_KEY_PADDING (1u << 1)       /* key_valid holds zeros */
#define CPPARITY_KERNEL_SUPPORTS_DOCUMENTS (1u << 2)         /* several documents in a row */
#define CPPARITY_KERNEL_SUPPORTS_SLIDING (1u << 3)           /* layer_type 1 */
#define CPPARITY_KERNEL_SUPPORTS_CHUNKED_ROW (1u << 4)       /* layer_type 2, chunk_origin 0 */
#define CPPARITY_KERNEL_SUPPORTS_CHUNKED_DOCUMENT (1u << 5)  /* layer_type 2, chunk_origin 1 */
#define CPPARITY_KERNEL_SUPPORTS_FULLY_MASKED_ROWS (1u << 6) /* query rows with no allowed key */
#define CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC (1u << 7)     /* identical bits call after call */
#define CPPARITY_KERNEL_SUPPORTS_CONCURRENT_CALLS (1u << 8)  /* calls may overlap (Threads) */
/* Every capability above: what ABI 3 had when it was first published. A kernel that declares it
 * does not claim the capabilities added since (below), which a kernel names one by one: a plugin
 * recompiled against a newer header never claims what its code was not written for. */
#define CPPARITY_KERNEL_SUPPORTS_ALL 0x1ffu
/* --- added in ABI 3 later: named explicitly, never part of CPPARITY_KERNEL_SUPPORTS_ALL --- */
#define CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION                                                  \
    (1u << 9) /* layer_type 2, chunk_origin 2: reads                                               \
                  cpparity_mask_description.position */
/* Every capability bit this header defines (a descriptor declaring any other is refused). */
#define CPPARITY_KERNEL_CAPABILITY_BITS (CPPARITY_KERNEL_SUPPORTS_ALL | (1u << 9))

/* Mask of one layer over the whole (padded) sequence, per batch row. */
typedef struct cpparity_mask_description {
    int64_t batch;                 /* B */
    int64_t seq_len;               /* S, the padded length */
    int32_t layer_type;            /* 0 full, 1 sliding, 2 chunked */
    int32_t chunk_origin;          /* 0 row grid shifted by left padding, 1 document starts,
                                      2 position_ids (only to a kernel declaring
                                      CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION) */
    int64_t window;                /* W >= 1 (sliding) */
    int64_t chunk_size;            /* C >= 1 (chunked) */
    const int64_t *document;       /* [B, S] document id, never decreasing along a row */
    const int64_t *document_start; /* [B, S] index of the first token of t's document */
    const int8_t *key_valid;       /* [B, S] 1 = real token, 0 = padding */
    const int64_t *left_padding;   /* [B] leading padding tokens of each row */
    /* --- appended in ABI 3 with chunk_origin 2: read only by a kernel declaring
     * CPPARITY_KERNEL_SUPPORTS_CHUNKED_POSITION (an older cpparity never sets chunk_origin 2) ---
     */
    const int64_t *position; /* [B, S] position_ids of each token (the model's RoPE positions) */
} cpparity_mask_description;

/* The rows of a block call (ABI 3): which global tokens its query and key rows are. */
typedef struct cpparity_attention_block {
    int64_t query_len;          /* Sq: rows of q, out, dout, dq; entries of lse per head */
    int64_t key_len;            /* Sk: rows of k, v, dk, dv */
    const int64_t *query_index; /* [Sq] token index in [0, S) of each query row */
    const int64_t *key_index;   /* [Sk] token index in [0, S) of each key row */
} cpparity_attention_block;

/* Sizes of one call. */
typedef struct cpparity_attention_dims {
    int64_t batch;    /* B */
    int64_t seq_len;  /* S */
    int64_t heads;    /* H (local query heads) */
    int64_t kv_heads; /* Hkv (local key/value heads), H % Hkv == 0 */
    int64_t head_dim; /* Dh */
} cpparity_attention_dims;

typedef struct cpparity_attention_kernel {
    uint32_t abi_version;  /* CPPARITY_KERNEL_ABI_VERSION */
    uint32_t struct_size;  /* sizeof(cpparity_attention_kernel) when built */
    const char *name;      /* e.g. "cpu-f32" */
    const char *version;   /* the kernel's own version string */
    int32_t device;        /* 0 CPU (host pointers), 1 CUDA (device pointers) */
    int32_t dtype;         /* 0 float32, 1 bfloat16 */
    int32_t deterministic; /* ABI 1's declaration, kept for layout; not read: from ABI 2 on,
                              CPPARITY_KERNEL_SUPPORTS_DETERMINISTIC in capabilities declares
                              that two calls give identical bits */
    void *context;         /* passed back as the first argument of every call */
    /* out and lse from q, k, v. Returns 0, or non-zero with a message in error (capacity bytes). */
    int (*forward)(void *context, void *out, float *lse, const void *q, const void *k,
                   const void *v, const cpparity_mask_description *mask,
                   const cpparity_attention_dims *dims, float scale, void *stream, char *error,
                   size_t capacity);
    /* dq, dk, dv (overwritten) from dout and the forward's q, k, v, out, lse. */
    int (*backward)(void *context, void *dq, void *dk, void *dv, const void *dout, const void *q,
                    const void *k, const void *v, const void *out, const float *lse,
                    const cpparity_mask_description *mask, const cpparity_attention_dims *dims,
                    float scale, void *stream, char *error, size_t capacity);
    /* --- ABI 2: what the kernel supports (cpparity never calls it outside that) --- */
    uint32_t capabilities;    /* CPPARITY_KERNEL_SUPPORTS_* bits */
    int32_t head_dim_count;   /* entries of head_dims; 0 = every head dim */
    const int32_t *head_dims; /* the head dims it supports */
    /* Optional (NULL = capabilities and head_dims decide): 1 when the kernel supports this
     * concrete call, else 0 with the reason in why (capacity bytes). */
    int (*supports)(void *context, const cpparity_mask_description *mask,
                    const cpparity_attention_dims *dims, char *why, size_t capacity);
    /* --- ABI 2, appended later: read only when struct_size covers it --- */
    /* Optional (NULL, or absent from an older descriptor: no workspace counted): the most bytes
     * the kernel allocates itself during one forward or backward call of these dims, beyond the
     * tensors it is given (scratch, tiles, per-thread buffers); host memory for a CPU kernel,
     * device memory for a CUDA kernel. cpparity adds a CPU kernel's figure to its memory
     * estimate of each rank before anything runs. −1 when the figure does not fit int64. */
    int64_t (*workspace_bytes)(void *context, const cpparity_attention_dims *dims);
    /* --- ABI 3: block calls (above, "Block calls"). Optional, but both or neither: NULL (left
     * out) = whole-sequence calls only, ring and hybrid items not claimed --- */
    /* out [B, Sq, H, Dh] and lse [B, H, Sq] of the block's queries over the block's keys. */
    int (*forward_block)(void *context, void *out, float *lse, const void *q, const void *k,
                         const void *v, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *dims, const cpparity_attention_block *block,
                         float scale, void *stream, char *error, size_t capacity);
    /* dq [B, Sq, H, Dh], dk and dv [B, Sk, Hkv, Dh] (overwritten): the block's share, from dout
     * and the merged out and lse of the query rows. */
    int (*backward_block)(void *context, void *dq, void *dk, void *dv, const void *dout,
                          const void *q, const void *k, const void *v, const void *out,
                          const float *lse, const cpparity_mask_description *mask,
                          const cpparity_attention_dims *dims,
                          const cpparity_attention_block *block, float scale, void *stream,
                          char *error, size_t capacity);
} cpparity_attention_kernel;

/* The struct_size of an ABI 2 descriptor without the fields appended later (workspace_bytes):
 * the least cpparity accepts. */
#define CPPARITY_KERNEL_ABI2_STRUCT_SIZE offsetof(cpparity_attention_kernel, workspace_bytes)
/* The struct_size an ABI 3 descriptor must have at least (through backward_block, set or
 * NULL). */
#define CPPARITY_KERNEL_ABI3_STRUCT_SIZE                                                           \
    (offsetof(cpparity_attention_kernel, backward_block) +                                         \
     sizeof(((cpparity_attention_kernel *)0)->backward_block))

/* The plugin entry point's name and type. */
#define CPPARITY_KERNEL_PLUGIN_ENTRY "cpparity_kernel_plugin"
typedef const cpparity_attention_kernel *const *(*cpparity_kernel_plugin_entry)(
    uint32_t abi_version, int32_t *count);

#ifdef __cplusplus
}
#endif

#endif
