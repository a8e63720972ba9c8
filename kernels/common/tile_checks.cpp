#include "kernels/common/tile_checks.hpp"

#include "fmha_jit/error.hpp"

namespace fmha_jit::kernels {

void reject_tile(const char* field, int value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, std::to_string(value), accepted);
}

void check_stages_range(const FmhaKernelConfig& c) {
  if (c.num_stages < 1 || c.num_stages > 3) {
    reject_tile("num_stages", c.num_stages, "0 (heuristic), 1, 2, 3");
  }
}

void check_smem_fits(const ArchInfo& arch, const FmhaKernelConfig& c, int smem_bytes) {
  if (smem_bytes > arch.max_smem_per_block_bytes) {
    reject_tile("num_stages", c.num_stages,
                "a tile within " + std::to_string(arch.max_smem_per_block_bytes / 1024) +
                    " KB of shared memory on " + std::string(arch.name) + " (this one needs " +
                    std::to_string(smem_bytes / 1024) + " KB)");
  }
}

void check_tile_field(const char* field, int given, int expected, std::string_view impl) {
  if (given != 0 && given != expected) {
    reject_tile(
        field, given,
        "0 (heuristic), " + std::to_string(expected) + " (for impl " + std::string(impl) + ")");
  }
}

}  // namespace fmha_jit::kernels
