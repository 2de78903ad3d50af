/*
 * kernel.h — the attention kernel interface of cpparity (ABI version 1).
 *
 * A kernel computes attention for the heads a rank holds after the Ulysses all-to-all, over the
 * whole sequence, under a compact mask description (never an S×S array). It is a plain C struct
 * of function pointers with only fixed-width C types, nothing of cpparity's internals, so that a
 * kernel built apart from cpparity can implement it. Kernels are found by name in the kernel
 * registry (distributed/kernel_registry.h); the built-in ones are listed there. (Loading a
 * kernel from a shared object is not part of this version; the registry is where such a loader
 * will add what it loads.)
 *
 * Tensor pointers are passed through untouched: host memory for a CPU kernel; device memory for
 * a CUDA kernel, with the caller's stream. A kernel must not keep any pointer after a call
 * returns.
 *
 * Layouts (row-major):  q, out, dq, dout  [B, S, H, Dh]     k, v, dk, dv  [B, S, Hkv, Dh]
 *                       lse               [B, H, S] float32, natural log
 * where H and Hkv are the heads of this call (local heads). Query head j reads key/value head
 * j / (H / Hkv). Element type: float32, or bfloat16 (uint16_t bits) when dtype says so.
 *
 * Semantics (docs/masks.md): scores = scale · q·k over allowed keys; a query row with no allowed
 * key has out = 0 and lse = −∞. Backward OVERWRITES dq, dk and dv with the gradients of
 * Σ dout ⊙ out (every query head of a local kv head is local, so they are complete).
 */
#ifndef CPPARITY_DISTRIBUTED_KERNEL_H
#define CPPARITY_DISTRIBUTED_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define CPPARITY_KERNEL_ABI_VERSION 1u

/* Values of cpparity_attention_kernel.device and .dtype. */
#define CPPARITY_KERNEL_DEVICE_CPU 0     /* host pointers */
#define CPPARITY_KERNEL_DEVICE_CUDA 1    /* device pointers and a cudaStream_t */
#define CPPARITY_KERNEL_DTYPE_FLOAT32 0  /* float */
#define CPPARITY_KERNEL_DTYPE_BFLOAT16 1 /* uint16_t holding bfloat16 bits */

/* Mask of one layer over the whole (padded) sequence, per batch row. */
typedef struct cpparity_mask_description {
    int64_t batch;                 /* B */
    int64_t seq_len;               /* S, the padded length */
    int32_t layer_type;            /* 0 full, 1 sliding, 2 chunked */
    int32_t chunk_origin;          /* 0 row grid shifted by left padding, 1 document starts */
    int64_t window;                /* W >= 1 (sliding) */
    int64_t chunk_size;            /* C >= 1 (chunked) */
    const int64_t *document;       /* [B, S] document id, never decreasing along a row */
    const int64_t *document_start; /* [B, S] index of the first token of t's document */
    const int8_t *key_valid;       /* [B, S] 1 = real token, 0 = padding */
    const int64_t *left_padding;   /* [B] leading padding tokens of each row */
} cpparity_mask_description;

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
    int32_t deterministic; /* 1 when two calls give identical bits */
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
} cpparity_attention_kernel;

#endif
