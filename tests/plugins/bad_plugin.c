/*
 * bad_plugin.c — kernel plugins that are wrong as plugins (not as attention), for cpparity's
 * tests of --kernel PATH.so. BAD selects the fault:
 *   1  the entry speaks no ABI cpparity knows (returns NULL, count 0)
 * Every other one but 10 is an ABI 2 plugin (no block calls).
 *   2  struct_size smaller than ABI 2's descriptor
 *   3  capability bits ABI 2 does not define
 *   4  a name cpparity's own kernels already use ("cpu-f32")
 *   5  forward writes one element past the end of out
 *   6  declares no capability: every call needing padding, documents, windows, chunks or GQA is
 *      unsupported (its attention is a placeholder: only "unsupported" is tested)
 *   7  exports no cpparity_kernel_plugin (a misspelled entry)
 *   8  forward dereferences a null pointer (a crash)
 *   9  declares itself deterministic, but each call's out differs from the previous one's
 *  10  an ABI 3 plugin with forward_block but no backward_block (block calls are optional, but
 *      both or neither)
 */
#include <stdint.h>
#include <string.h>

#include <cpparity/kernel.h>

#ifndef BAD
#error "BAD must be defined (1 to 10)"
#endif

#if BAD == 10
#define BAD_ABI CPPARITY_KERNEL_ABI_VERSION
#else
#define BAD_ABI 2u
#endif

/* Writes zeros (and, with BAD 5, one float past the end of out). */
static int forward(void *context, void *out, float *lse, const void *q, const void *k,
                   const void *v, const cpparity_mask_description *mask,
                   const cpparity_attention_dims *d, float scale, void *stream, char *error,
                   size_t capacity) {
    (void)context, (void)q, (void)k, (void)v, (void)mask, (void)scale, (void)stream, (void)error,
        (void)capacity;
    const int64_t rows = d->batch * d->seq_len * d->heads;
    memset(out, 0, (size_t)(rows * d->head_dim) * sizeof(float));
    memset(lse, 0, (size_t)rows * sizeof(float));
#if BAD == 5
    ((float *)out)[rows * d->head_dim] = 1.0f; /* out of bounds */
#endif
#if BAD == 8
    volatile float *nowhere = NULL;
    *nowhere = 1.0f; /* a crash */
#endif
#if BAD == 9
    static float calls; /* changes every call: not deterministic, in out's last element */
    calls += 1.0f;
    ((float *)out)[rows * d->head_dim - 1] = calls * 1e-30f; /* too small to be the worst */
#endif
    return 0;
}

static int backward(void *context, void *dq, void *dk, void *dv, const void *dout, const void *q,
                    const void *k, const void *v, const void *out, const float *lse,
                    const cpparity_mask_description *mask, const cpparity_attention_dims *d,
                    float scale, void *stream, char *error, size_t capacity) {
    (void)context, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)mask,
        (void)scale, (void)stream, (void)error, (void)capacity;
    memset(dq, 0, (size_t)(d->batch * d->seq_len * d->heads * d->head_dim) * sizeof(float));
    memset(dk, 0, (size_t)(d->batch * d->seq_len * d->kv_heads * d->head_dim) * sizeof(float));
    memset(dv, 0, (size_t)(d->batch * d->seq_len * d->kv_heads * d->head_dim) * sizeof(float));
    return 0;
}

#if BAD == 10
/* Never called: the registry refuses the descriptor, which lacks its backward_block. */
static int forward_block(void *context, void *out, float *lse, const void *q, const void *k,
                         const void *v, const cpparity_mask_description *mask,
                         const cpparity_attention_dims *d, const cpparity_attention_block *block,
                         float scale, void *stream, char *error, size_t capacity) {
    (void)context, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)mask, (void)d,
        (void)block, (void)scale, (void)stream, (void)error, (void)capacity;
    return 1;
}
#endif

static const cpparity_attention_kernel kernel = {
    .abi_version = BAD_ABI, /* 2 but for BAD 10: whole-sequence calls, the ABI 2 loader path */
#if BAD == 2
    .struct_size = 48,
#else
    .struct_size = sizeof(cpparity_attention_kernel),
#endif
#if BAD == 4
    .name = "cpu-f32",
#else
    .name = "bad-plugin",
#endif
    .version = "0",
    .device = CPPARITY_KERNEL_DEVICE_CPU,
    .dtype = CPPARITY_KERNEL_DTYPE_FLOAT32,
#if BAD == 9 /* nondeterministic: declared by the capability bit alone (ABI 1's field says 0) */
    .deterministic = 0,
#else
    .deterministic = 1,
#endif
    .forward = forward,
    .backward = backward,
#if BAD == 3
    .capabilities = 0x400u,
#elif BAD == 6
    .capabilities = 0,
#else
    .capabilities = CPPARITY_KERNEL_SUPPORTS_ALL,
#endif
#if BAD == 10
    .forward_block = forward_block, /* and backward_block left NULL */
#endif
};

static const cpparity_attention_kernel *const kernels[] = {&kernel};

#if BAD == 7
#define cpparity_kernel_plugin cpparity_kernel_plugins
#endif
const cpparity_attention_kernel *const *cpparity_kernel_plugin(uint32_t abi_version,
                                                               int32_t *count);
const cpparity_attention_kernel *const *cpparity_kernel_plugin(uint32_t abi_version,
                                                               int32_t *count) {
#if BAD == 1
    (void)abi_version;
    (void)kernels;
    *count = 0;
    return NULL;
#else
    *count = abi_version == BAD_ABI ? 1 : 0; /* asked for 3 first: answers only BAD_ABI */
    return abi_version == BAD_ABI ? kernels : NULL;
#endif
}
