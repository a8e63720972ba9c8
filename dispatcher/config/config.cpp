#include "fmha_jit/config.hpp"

#include "codegen/heuristics.hpp"

namespace fmha_jit {

std::optional<Vendor> vendor_of(std::string_view arch) {
  if (arch.starts_with("sm_")) return Vendor::nvidia;
  if (arch.starts_with("gfx")) return Vendor::amd;
  return std::nullopt;
}

FmhaKernelConfig canonicalize(const FmhaKernelConfig& config) {
  validate(config);
  FmhaKernelConfig c = config;
  // Fields that do not apply to the family are reset, so that e.g. a prebuild sweep over
  // deterministic x family yields one forward kernel, not two identical ones.
  if (c.family == Family::fwd) c.deterministic = false;  // the forward has no cross-block sums
  if (c.family == Family::bwd) c.lse = false;            // the backward always reads the LSE
  return codegen::resolve_impl_and_tiles(c);
}

}  // namespace fmha_jit
