// Checks shared by the tiled families' tile validation: each throws FieldError (invalid_config)
// naming the field, its value and what is accepted.
#pragma once

#include <string>

#include "core/arch.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::kernels {

[[noreturn]] void reject_tile(const char* field, int value, const std::string& accepted);

// Unless 1 <= num_stages <= 3. Called before shared memory is sized from the tile: the config
// fuzzer found a num_stages of 555555555 overflowing that sum (int).
void check_stages_range(const FmhaKernelConfig& c);
// Unless `smem_bytes` fits the arch (reported against num_stages, the field that sizes it most).
void check_smem_fits(const ArchInfo& arch, const FmhaKernelConfig& c, int smem_bytes);
// Unless a tile field set by the user (non-zero) equals the one value `impl` supports.
void check_tile_field(const char* field, int given, int expected, std::string_view impl);

}  // namespace fmha_jit::kernels
