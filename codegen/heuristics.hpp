// Picks the kernel implementation and its tile shape for a config. Every choice carries the reason
// it was made; the resolved values enter the canonical config and hence the cache key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::codegen {

// Throws FieldError when `impl` cannot serve the config, or a tile field set by the user is not one
// the implementation supports. Fields left at 0 are always accepted.
void validate_impl_and_tiles(const FmhaKernelConfig& config);

// Returns the config with impl != automatic and every tile field filled in.
FmhaKernelConfig resolve_impl_and_tiles(const FmhaKernelConfig& config);

// A tile variant for problems of some sizes. A config whose four tile fields are left to the
// heuristic names a family of kernels: its own (resolve_impl_and_tiles) and, for the problems a
// variant `applies` to, one with other tiles that measured faster there (its own canonical config,
// key and cache entry). The runner picks per problem; prebuild builds both.
struct ProblemTileVariant {
  FmhaKernelConfig config;  // as given, with impl and the four tile fields set
  std::int64_t max_seqlen = 0;
  bool applies(const FmhaProblem& problem) const {
    return std::max(problem.seqlen_q, problem.seqlen_k) <= max_seqlen;
  }
};
// The config's variant (short causal forwards on Hopper, codegen/sm90a_tile_shapes.cpp), or
// nullopt.
std::optional<ProblemTileVariant> problem_tile_variant(const FmhaKernelConfig& config);

// Why `impl = auto` on Hopper (sm_90, sm_90a) resolves to the sm_80 kernels rather than the
// wgmma_sm90a ones; empty when it does not fall back. setup_fmha_dispatcher logs it.
std::string impl_fallback_reason(const FmhaKernelConfig& config);

}  // namespace fmha_jit::codegen
