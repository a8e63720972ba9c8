// libFuzzer target: the environment variables' integer parser (support/env.hpp). Any text either
// yields nothing or a value within the bound whose decimal digits are the text's, leading zeros
// aside; the bound comes from the input's first 8 bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "support/env.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint64_t max = UINT64_MAX;
  if (size >= 8) {
    std::memcpy(&max, data, 8);
    data += 8;
    size -= 8;
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto value = fmha_jit::env::parse_unsigned(text, max);
  if (!value) return 0;
  if (*value > max) std::abort();
  std::string_view digits = text;
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  if (std::to_string(*value) != digits) std::abort();
  return 0;
}
