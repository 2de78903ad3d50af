/*
 * bfloat16.h — bfloat16 storage for the implementation under test: IEEE float32 rounded to its
 * top 16 bits, round to nearest, ties to even (what torch, cuBLAS and __float2bfloat16 do); NaN
 * stays NaN (quiet, sign kept), values past the largest bfloat16 round to infinity. Per-element
 * logic shared by host and CUDA device code (device_inline.h), so CPU tests cover what the GPU
 * runs.
 */
#ifndef CPPARITY_DISTRIBUTED_BFLOAT16_H
#define CPPARITY_DISTRIBUTED_BFLOAT16_H

#include <stdint.h>
#include <string.h>

#include "distributed/device/device_inline.h"

/* The bfloat16 bits nearest to x (ties to even). */
static inline CPPARITY_HOST_DEVICE uint16_t bf16_from_float(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) { /* NaN: keep the sign, make it quiet */
        return (uint16_t)((bits >> 16) | 0x0040u);
    }
    const uint32_t bias = 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + bias) >> 16);
}

/* The float32 value of bfloat16 bits (exact). */
static inline CPPARITY_HOST_DEVICE float bf16_to_float(uint16_t value) {
    const uint32_t bits = (uint32_t)value << 16;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* x rounded to the nearest bfloat16, as a float32. */
static inline CPPARITY_HOST_DEVICE float bf16_round(float x) {
    return bf16_to_float(bf16_from_float(x));
}

#endif
