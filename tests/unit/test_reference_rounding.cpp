// Unit tests of the CPU reference's rounding to fp16 and bf16 (round to nearest even, overflow to
// infinity, NaN kept): known values, every 16-bit value exact, and agreement with the compiler's
// _Float16 where it has one.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference/cpu_reference.hpp"

namespace ref = fmha_jit::reference;

TEST_CASE("round_to_dtype fp16 known values", "[reference][rounding]") {
  auto r = [](float x) { return ref::round_to_dtype(x, false); };
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ref::float_to_half_bits(1.0f) == 0x3c00);
  CHECK(r(1.0f) == 1.0f);
  CHECK(ref::float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(r(65504.0f) == 65504.0f);
  CHECK(r(65519.996f) == 65504.0f);
  CHECK(r(65520.0f) == inf);  // tie between 65504 (odd) and 2^16 rounds to even: overflow
  CHECK(r(-65520.0f) == -inf);
  CHECK(r(1e10f) == inf);
  CHECK(r(inf) == inf);
  CHECK(std::isnan(r(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(r(-std::numeric_limits<float>::signaling_NaN())));
  CHECK(std::signbit(r(-0.0f)));
  CHECK(r(1.0f + 0x1p-11f) == 1.0f);                // tie, rounds to even
  CHECK(r(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);  // tie, rounds up to even
  CHECK(r(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
  // Subnormals: unit 2^-24, smallest normal 2^-14.
  CHECK(ref::float_to_half_bits(0x1p-24f) == 0x0001);
  CHECK(r(0x1p-24f) == 0x1p-24f);
  CHECK(r(0x1p-25f) == 0.0f);  // tie between 0 and 2^-24 rounds to even 0
  CHECK(r(0x1.8p-25f) == 0x1p-24f);
  CHECK(r(3 * 0x1p-25f) == 0x1p-23f);  // 1.5 units, tie, rounds to 2 units
  CHECK(r(5 * 0x1p-25f) == 0x1p-23f);  // 2.5 units, tie, rounds to 2 units
  CHECK(r(0x1p-26f) == 0.0f);
  CHECK(r(1e-45f) == 0.0f);                // float subnormal
  CHECK(r(0x1.ff8p-15f) == 0x1.ff8p-15f);  // largest subnormal 1023 * 2^-24 is exact
  CHECK(r(0x1.ffcp-15f) == 0x1p-14f);      // 1023.5 units: tie rounds up to the smallest normal
  CHECK(r(0x1.ff4p-15f) == 0x1.ffp-15f);   // 1022.5 units: tie rounds down to even 1022
  CHECK(ref::float_to_half_bits(0x1p-14f) == 0x0400);
  CHECK(ref::half_bits_to_float(0x0001) == 0x1p-24f);
  CHECK(ref::half_bits_to_float(0x03ff) == 0x1.ff8p-15f);
  CHECK(ref::half_bits_to_float(0xfbff) == -65504.0f);
  CHECK(ref::half_bits_to_float(0x7c00) == inf);
}

TEST_CASE("round_to_dtype bf16 known values", "[reference][rounding]") {
  auto r = [](float x) { return ref::round_to_dtype(x, true); };
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ref::float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(r(1.0f + 0x1p-8f) == 1.0f);                // tie, even stays
  CHECK(r(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);  // tie, rounds up to even
  CHECK(r(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(r(-1.0f - 0x1p-8f) == -1.0f);
  CHECK(r(std::numeric_limits<float>::max()) == inf);
  CHECK(r(0x1.fep127f) == 0x1.fep127f);  // largest finite bf16
  CHECK(r(inf) == inf);
  CHECK(r(-inf) == -inf);
  CHECK(std::isnan(r(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lies only in the low 16 bits must not turn into inf.
  CHECK(std::isnan(r(std::bit_cast<float>(0x7f800001u))));
  CHECK(r(0x1p-133f) == 0x1p-133f);    // smallest bf16 subnormal (7 mantissa bits)
  CHECK(r(0x1p-140f) == 0.0f);         // float subnormal below it
  CHECK(r(0x1.8p-133f) == 0x1p-132f);  // tie between 1 and 2 units rounds to even
  CHECK(std::signbit(r(-0.0f)));
}

TEST_CASE("round_to_dtype is exact on every fp16 and bf16 value", "[reference][rounding]") {
  int mismatches = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f16 = ref::half_bits_to_float(bits);
    const float b16 = ref::bf16_bits_to_float(bits);
    if (std::isnan(f16) ? !std::isnan(ref::round_to_dtype(f16, false))
                        : ref::float_to_half_bits(f16) != bits) {
      ++mismatches;
    }
    if (std::isnan(b16) ? !std::isnan(ref::round_to_dtype(b16, true))
                        : ref::float_to_bf16_bits(b16) != bits) {
      ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
TEST_CASE("fp16 rounding agrees with the compiler's _Float16", "[reference][rounding]") {
  // A stride coprime with 2^32 visits a spread of every exponent and mantissa pattern.
  uint32_t bits = 0;
  int mismatches = 0, compared = 0;
  for (int n = 0; n < (1 << 20); ++n, bits += 4099u) {
    const float x = std::bit_cast<float>(bits);
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    ++compared;
    if (std::bit_cast<uint16_t>(h) != ref::float_to_half_bits(x) ||
        static_cast<float>(h) != ref::round_to_dtype(x, false)) {
      if (mismatches++ < 5) FAIL_CHECK("mismatch at float bits " << bits);
    }
  }
  CHECK(compared > 1000000);
  CHECK(mismatches == 0);
}
#endif
