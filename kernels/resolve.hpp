// From a config as given to its canonical form: the fields checked, the family chosen (the first
// of the registry that serves the config where impl = auto), the tiles filled in by that family's
// heuristic and checked by it. One pass per config, with every choice's reason: the public
// validate(), canonicalize() and canonical_string() are this.
#pragma once

#include <optional>
#include <string>

#include "fmha_jit/config.hpp"
#include "kernels/family.hpp"

namespace fmha_jit::kernels {

struct ResolvedConfig {
  FmhaKernelConfig canonical;
  const KernelFamily* family = nullptr;
  // Why `impl = auto` passed over a family that targets the arch (e.g. the Hopper kernels for
  // hdim 96); empty when it did not. setup_fmha_dispatcher logs it.
  std::string fallback_reason;
  // Where every tile field was left to the heuristic: a tile the family measured faster for some
  // problems (its own config, key and cache entry). The runner picks per problem.
  std::optional<ProblemTileVariant> tile_variant;
};

// Throws FieldError (invalid_config) naming the first field the kernels cannot serve.
ResolvedConfig resolve(const FmhaKernelConfig& config);

// resolve(config).fallback_reason and .tile_variant, for callers that need only one of them.
std::string impl_fallback_reason(const FmhaKernelConfig& config);
std::optional<ProblemTileVariant> problem_tile_variant(const FmhaKernelConfig& config);

}  // namespace fmha_jit::kernels
