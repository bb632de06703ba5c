// BF16 conversions for the tensor-core kernels (cuda/matmul.cu's products,
// cuda/attention.cu's tree attention): an FP32 value split into three BF16
// parts whose sum is the value exactly, so that an mma over the parts keeps
// FP32 fidelity.
#ifndef EMT_CUDA_BF16_SPLIT_H
#define EMT_CUDA_BF16_SPLIT_H

#include <stdint.h>
#include <string.h>

__device__ __forceinline__ float bits_to_float(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
__device__ __forceinline__ uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
__device__ __forceinline__ float bf16_to_float(uint16_t h) { return bits_to_float((uint32_t)h << 16); }
// float -> BF16, rounded to nearest even, subnormals kept (NaN stays a NaN;
// its payload may differ). On sm_80+ one cvt.rn.bf16.f32 (the splits are a
// large part of the tensor-core kernels' instructions); the harness and older
// targets do the same rounding in integer arithmetic.
__device__ __forceinline__ uint32_t bf16_bits_rn(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
#endif
}
// x = hi + mid + lo, each BF16 (exact for finite x whose parts are normal)
__device__ __forceinline__ void split_bf16x3(float v, uint32_t *hi, uint32_t *mid, uint32_t *lo) {
    *hi = bf16_bits_rn(v);
    const float r = v - bf16_to_float((uint16_t)*hi);
    *mid = bf16_bits_rn(r);
    *lo = bf16_bits_rn(r - bf16_to_float((uint16_t)*mid));
}

#endif
