// Rounding to fp16 and bf16 (round to nearest, ties to even; IEEE overflow to infinity; NaN stays
// NaN), bit by bit so that it does not depend on the host compiler's half types.
#include <bit>

#include "cpu_reference.hpp"

namespace fmha_jit::reference {

uint16_t float_to_half_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf stays inf; NaN keeps its top payload bits and is made quiet
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  }
  // 65520 = 0x477ff000 lies halfway between 65504 (odd mantissa 0x3ff) and 2^16: ties to even
  // round up, so it and everything above becomes inf.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14: fp16 subnormal (or zero), value = round(|x| * 2^24) units of 2^-24. |x| is
    // m * 2^(e - 150) with the implicit bit in m, so the unit count is m >> (126 - e).
    const uint32_t e = a >> 23;
    const uint32_t shift = 126u - e;                      // >= 14 here
    if (shift > 24u) return static_cast<uint16_t>(sign);  // below 2^-25 (or exactly a tie to 0)
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits with round to nearest even;
  // a carry out of the mantissa correctly bumps the exponent.
  uint32_t h = (a - 0x38000000u) >> 13;
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise. value = mant * 2^-24; shift the leading one up to bit 10.
    int e = -14;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_bf16_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate and force quiet (never becomes inf)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  // Round to nearest even on the low 16 bits; overflow past the largest finite bf16 carries into
  // the exponent and yields inf, as IEEE rounding requires.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

float round_to_dtype(float x, bool bf16) {
  return bf16 ? bf16_bits_to_float(float_to_bf16_bits(x))
              : half_bits_to_float(float_to_half_bits(x));
}

void round_to_dtype(float* data, size_t n, bool bf16) {
  for (size_t i = 0; i < n; ++i) data[i] = round_to_dtype(data[i], bf16);
}

void round_to_dtype(std::vector<float>& data, bool bf16) {
  round_to_dtype(data.data(), data.size(), bf16);
}

}  // namespace fmha_jit::reference
