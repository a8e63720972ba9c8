#include "codegen/heuristics.hpp"

#include <string>

#include "codegen/arch.hpp"
#include "codegen/tile_shapes.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

[[noreturn]] void reject(const char* field, const std::string& value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, value, accepted);
}

// Which implementations can serve a config; the first is what `automatic` picks.
KernelImpl best_impl(const ArchInfo& arch) {
  // The tensor-core kernels need mma.sync m16n8k16 with bf16 (sm_80+) and cp.async; every
  // NVIDIA arch of the closed list has both. AMD has only the reference so far.
  if (arch.vendor == Vendor::nvidia) return KernelImpl::mma_sm80;
  return KernelImpl::reference;
}

void check_impl_applies(const FmhaKernelConfig& c, const ArchInfo& arch) {
  if (c.impl == KernelImpl::wgmma_sm90a) {
    if (!is_hopper(arch)) {
      reject("impl", "wgmma_sm90a",
             "auto, mma_sm80, reference (wgmma_sm90a serves sm_90 and sm_90a; this config is for " +
                 std::string(arch.name) + ")");
    }
    if (const std::string gap = wgmma_sm90a_gap(c); !gap.empty()) {
      reject("impl", "wgmma_sm90a",
             "auto, mma_sm80, reference (wgmma_sm90a does not serve " + gap + ")");
    }
    return;
  }
  if (c.impl != KernelImpl::mma_sm80) return;
  if (arch.vendor != Vendor::nvidia) {
    reject("impl", "mma_sm80",
           "auto, reference (mma_sm80 serves NVIDIA archs; this config is for " +
               std::string(arch.name) + ")");
  }
}

void check_tile(const char* field, int given, int expected, const char* impl) {
  if (given != 0 && given != expected) {
    reject(field, std::to_string(given),
           "0 (heuristic), " + std::to_string(expected) + " (for impl " + impl + ")");
  }
}

}  // namespace

void validate_impl_and_tiles(const FmhaKernelConfig& c) {
  const ArchInfo* arch = find_arch(c.arch);
  if (!arch) return;  // validate() reports the arch first
  check_impl_applies(c, *arch);
  const FmhaKernelConfig r = resolve_impl_and_tiles(c);
  if (r.impl == KernelImpl::reference) {
    const TileShape t = reference_tile(*arch);
    check_tile("block_m", c.block_m, t.block_m, "reference");
    check_tile("block_n", c.block_n, t.block_n, "reference");
    check_tile("num_warps", c.num_warps, t.num_warps, "reference");
    check_tile("num_stages", c.num_stages, t.num_stages, "reference");
  } else if (r.impl == KernelImpl::wgmma_sm90a && r.family == Family::fwd) {
    check_wgmma_sm90a_fwd_tile(*find_arch(r.arch), r);
  } else if (r.impl == KernelImpl::wgmma_sm90a) {
    check_wgmma_sm90a_bwd_tile(*find_arch(r.arch), r);
  } else if (r.impl == KernelImpl::mma_sm80 && r.family == Family::fwd) {
    check_mma_sm80_fwd_tile(*arch, r);
  } else if (r.impl == KernelImpl::mma_sm80) {
    check_mma_sm80_bwd_tile(*arch, r);
  }
}

FmhaKernelConfig resolve_impl_and_tiles(const FmhaKernelConfig& c) {
  FmhaKernelConfig out = c;
  const ArchInfo* arch = find_arch(c.arch);
  if (!arch) return out;
  if (out.impl == KernelImpl::automatic) {
    out.impl =
        is_hopper(*arch) && wgmma_sm90a_gap(c).empty() ? KernelImpl::wgmma_sm90a : best_impl(*arch);
  }
  // wgmma and setmaxnreg exist only in the arch-specific ISA; sm_90a binaries run on exactly the
  // GPUs sm_90 binaries run on, so the promotion loses no reach.
  if (out.impl == KernelImpl::wgmma_sm90a) out.arch = "sm_90a";
  TileShape t{};
  if (out.impl == KernelImpl::wgmma_sm90a) {
    t = c.family == Family::fwd ? wgmma_sm90a_fwd_tile(c) : wgmma_sm90a_bwd_tile(c);
  }
  if (out.impl == KernelImpl::reference) t = reference_tile(*arch);
  if (out.impl == KernelImpl::mma_sm80) {
    t = c.family == Family::fwd ? mma_sm80_fwd_tile(*arch, c) : mma_sm80_bwd_tile(*arch, c);
  }
  if (out.block_m == 0) out.block_m = t.block_m;
  if (out.block_n == 0) out.block_n = t.block_n;
  if (out.num_warps == 0) out.num_warps = t.num_warps;
  if (out.num_stages == 0) out.num_stages = t.num_stages;
  return out;
}

std::optional<ProblemTileVariant> problem_tile_variant(const FmhaKernelConfig& c) {
  // Only where every tile field is the heuristic's: a tile the user chose is kept for every
  // problem.
  if (c.block_m != 0 || c.block_n != 0 || c.num_warps != 0 || c.num_stages != 0) return {};
  if (c.mask != MaskKind::causal_top_left && c.mask != MaskKind::causal_bottom_right) return {};
  if (!find_arch(c.arch)) return {};
  const FmhaKernelConfig resolved = resolve_impl_and_tiles(c);
  if (resolved.impl != KernelImpl::wgmma_sm90a) return {};
  const std::optional<TileShape> t = wgmma_sm90a_fwd_short_causal_tile(resolved);
  if (!t) return {};
  ProblemTileVariant v{c, kShortCausalSeqlen};
  v.config.impl = resolved.impl;
  v.config.block_m = t->block_m;
  v.config.block_n = t->block_n;
  v.config.num_warps = t->num_warps;
  v.config.num_stages = t->num_stages;
  return v;
}

std::string impl_fallback_reason(const FmhaKernelConfig& c) {
  const ArchInfo* arch = find_arch(c.arch);
  if (!arch || !is_hopper(*arch) || c.impl != KernelImpl::automatic) return {};
  const std::string gap = wgmma_sm90a_gap(c);
  if (gap.empty()) return {};
  return "wgmma_sm90a does not serve " + gap + "; using " +
         std::string(to_string(best_impl(*arch))) + " on " + std::string(arch->name);
}

}  // namespace fmha_jit::codegen
