#include "fmha_jit/config.hpp"

namespace fmha_jit {

std::optional<Vendor> vendor_of(std::string_view arch) {
  if (arch.starts_with("sm_")) return Vendor::nvidia;
  if (arch.starts_with("gfx")) return Vendor::amd;
  return std::nullopt;
}

}  // namespace fmha_jit
