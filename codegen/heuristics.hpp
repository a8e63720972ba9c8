// Picks the kernel implementation and its tile shape for a config. Every choice carries the reason
// it was made; the resolved values enter the canonical config and hence the cache key.
#pragma once

#include <string>

#include "fmha_jit/config.hpp"

namespace fmha_jit::codegen {

// Throws FieldError when `impl` cannot serve the config, or a tile field set by the user is not one
// the implementation supports. Fields left at 0 are always accepted.
void validate_impl_and_tiles(const FmhaKernelConfig& config);

// Returns the config with impl != automatic and every tile field filled in.
FmhaKernelConfig resolve_impl_and_tiles(const FmhaKernelConfig& config);

// Why `impl = auto` on Hopper (sm_90, sm_90a) resolves to the sm_80 kernels rather than the
// wgmma_sm90a ones; empty when it does not fall back. setup_fmha_dispatcher logs it.
std::string impl_fallback_reason(const FmhaKernelConfig& config);

}  // namespace fmha_jit::codegen
