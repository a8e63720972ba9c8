// 16-bit storage types and their fp32 conversions.
//
// The types are plain bit containers rather than the toolkit's __half / __nv_bfloat16 (or HIP's
// _Float16 / hip_bfloat16) because the runtime compilers get no toolkit headers and the host
// dispatcher must agree on size and layout without them. All arithmetic happens in fp32.
#pragma once

#include "common/platform.h"

struct fmha_fp16 {
  unsigned short bits;
};

struct fmha_bf16 {
  unsigned short bits;
};

FMHA_DEVICE float fmha_to_float(float x) { return x; }

FMHA_DEVICE float fmha_to_float(fmha_fp16 x) {
#if defined(FMHA_PLATFORM_HIP)
  return static_cast<float>(__builtin_bit_cast(_Float16, x.bits));
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#endif
}

// bf16 is the upper half of an fp32, so widening is exact on every target.
FMHA_DEVICE float fmha_to_float(fmha_bf16 x) {
  return fmha_uint_as_float(static_cast<unsigned>(x.bits) << 16);
}

// Round-to-nearest-even fp32 -> bf16 for targets without a conversion instruction. NaNs are made
// quiet (the top mantissa bit is set) so that dropping the low mantissa bits cannot turn them into
// infinities; the sign is kept.
FMHA_DEVICE unsigned short fmha_bf16_bits_rne(float f) {
  const unsigned u = fmha_float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x0040u);
  const unsigned rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>((u + rounding_bias) >> 16);
}

template <class T>
struct FmhaFromFloat;

template <>
struct FmhaFromFloat<float> {
  static FMHA_DEVICE float convert(float f) { return f; }
};

template <>
struct FmhaFromFloat<fmha_fp16> {
  static FMHA_DEVICE fmha_fp16 convert(float f) {
    fmha_fp16 r;
#if defined(FMHA_PLATFORM_HIP)
    // The default floating-point environment rounds to nearest even; NaN stays NaN.
    r.bits = __builtin_bit_cast(unsigned short, static_cast<_Float16>(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#endif
    return r;
  }
};

template <>
struct FmhaFromFloat<fmha_bf16> {
  static FMHA_DEVICE fmha_bf16 convert(float f) {
    fmha_bf16 r;
#if defined(FMHA_PLATFORM_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
    r.bits = fmha_bf16_bits_rne(f);
#endif
    return r;
  }
};

// Round to nearest even; NaN is preserved (as a quiet NaN).
template <class T>
FMHA_DEVICE T fmha_from_float(float f) {
  return FmhaFromFloat<T>::convert(f);
}
