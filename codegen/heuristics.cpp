#include "codegen/heuristics.hpp"

#include <string>

#include "codegen/arch.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

// The portable reference kernel: one thread block per query row (fwd, dQ) or key row (dK/dV),
// 128 threads so that a key chunk of 128 scores is one score per thread; no pipeline.
constexpr int kReferenceThreads = 128;

struct TileChoice {
  int block_m, block_n, num_warps, num_stages;
};

TileChoice reference_tiles(const ArchInfo& arch) {
  return {1, kReferenceThreads, kReferenceThreads / arch.wave_size, 1};
}

void check_tile(const char* field, int given, int expected, const char* impl) {
  if (given != 0 && given != expected) {
    throw FieldError(ErrorCode::invalid_config, field, std::to_string(given),
                     "0 (heuristic), " + std::to_string(expected) + " (for impl " + impl + ")");
  }
}

}  // namespace

void validate_impl_and_tiles(const FmhaKernelConfig& c) {
  const ArchInfo* arch = find_arch(c.arch);
  if (!arch) return;  // validate() reports the arch first
  const KernelImpl impl = resolve_impl_and_tiles(c).impl;
  if (impl == KernelImpl::reference) {
    const TileChoice t = reference_tiles(*arch);
    check_tile("block_m", c.block_m, t.block_m, "reference");
    check_tile("block_n", c.block_n, t.block_n, "reference");
    check_tile("num_warps", c.num_warps, t.num_warps, "reference");
    check_tile("num_stages", c.num_stages, t.num_stages, "reference");
  }
}

FmhaKernelConfig resolve_impl_and_tiles(const FmhaKernelConfig& c) {
  FmhaKernelConfig out = c;
  // Until the tensor-core kernels exist, the reference kernel is the only implementation, on every
  // arch; `automatic` therefore resolves to it.
  if (out.impl == KernelImpl::automatic) out.impl = KernelImpl::reference;
  const ArchInfo* arch = find_arch(c.arch);
  if (!arch) return out;
  if (out.impl == KernelImpl::reference) {
    const TileChoice t = reference_tiles(*arch);
    if (out.block_m == 0) out.block_m = t.block_m;
    if (out.block_n == 0) out.block_n = t.block_n;
    if (out.num_warps == 0) out.num_warps = t.num_warps;
    if (out.num_stages == 0) out.num_stages = t.num_stages;
  }
  return out;
}

}  // namespace fmha_jit::codegen
