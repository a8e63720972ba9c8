#include "kernels/mma_sm80/family.hpp"

#include "kernels/common/tiled_layout.hpp"
#include "kernels/mma_sm80/tiles.hpp"

namespace fmha_jit::kernels::mma_sm80 {

using codegen::StageRole;

std::string stage_call(StageRole role) {
  // Geometry in templates/fwd/fmha_fwd_sm80.h and templates/bwd/fmha_bwd_sm80.h, mirrored by
  // tiled_stages (kernels/common/tiled_layout.cpp).
  const std::string smem = "extern __shared__ __align__(128) char smem[];\n  ";
  switch (role) {
    case StageRole::fwd:
      return smem +
             "fmha_fwd_sm80<Element, kHdimQ, kHdimV, kMaskKind, kWriteLse, kVarlen, kSinks, "
             "kSoftcap, kBlockM, kBlockN, kNumWarps, kStages>(p, smem);";
    case StageRole::bwd_dot_do_o:
      return "fmha_bwd_sm80_dot_do_o<Element, kHdimQ, kHdimV, kBlockM, kNumWarps, "
             "kDeterministic, kVarlen, kSinks>(p);";
    case StageRole::bwd_dq_dk_dv:
      return smem +
             "fmha_bwd_sm80_dq_dk_dv<Element, kHdimQ, kHdimV, kMaskKind, kDeterministic, "
             "kVarlen, kSoftcap, kBlockM, kBlockN, kNumWarps, kStages>(p, smem);";
    case StageRole::bwd_convert_dq:
      return "fmha_bwd_sm80_convert_dq<Element, kHdimQ, kBlockM, kNumWarps, kVarlen>(p);";
    case StageRole::bwd_dsinks: return "fmha_bwd_dsinks<kVarlen, kFmhaDsinksThreads>(p);";
    case StageRole::bwd_dq:
    case StageRole::bwd_dkdv: break;
  }
  return "";
}

namespace {

class MmaSm80Family final : public KernelFamily {
 public:
  KernelImpl impl() const override { return KernelImpl::mma_sm80; }
  // mma.sync m16n8k16 with bf16 (sm_80+) and cp.async: every NVIDIA arch of the closed list has
  // both.
  bool targets(const ArchInfo& arch) const override { return arch.vendor == Vendor::nvidia; }
  std::string_view archs_served() const override { return "NVIDIA archs"; }

  TileShape default_tile(const ArchInfo& arch, const FmhaKernelConfig& c) const override {
    return c.family == Family::fwd ? fwd_tile(arch, c) : bwd_tile(arch, c);
  }
  void check_tile(const ArchInfo& arch, const FmhaKernelConfig& c) const override {
    if (c.family == Family::fwd) {
      check_fwd_tile(arch, c);
    } else {
      check_bwd_tile(arch, c);
    }
  }

  std::vector<StageRole> stage_roles(const FmhaKernelConfig& c) const override {
    if (c.family == Family::fwd) return {StageRole::fwd};
    std::vector<StageRole> roles{StageRole::bwd_dot_do_o, StageRole::bwd_dq_dk_dv,
                                 StageRole::bwd_convert_dq};
    if (c.sinks) roles.push_back(StageRole::bwd_dsinks);
    return roles;
  }
  codegen::EntrySpec entry_spec(const FmhaKernelConfig& c) const override {
    codegen::EntrySpec spec;
    spec.header = c.family == Family::fwd ? "fwd/fmha_fwd_sm80.h" : "bwd/fmha_bwd_sm80.h";
    spec.threads = c.num_warps * 32;
    for (StageRole role : stage_roles(c)) {
      spec.stages.push_back({role, role == StageRole::fwd ? "FmhaFwdParams" : "FmhaBwdParams",
                             role == StageRole::bwd_dsinks ? "kFmhaDsinksThreads" : "kThreads",
                             stage_call(role)});
    }
    return spec;
  }

  unsigned dynamic_smem_bytes(const FmhaKernelConfig& c, StageRole role) const override {
    // The backward's row-wise stages use static shared memory only.
    if (role == StageRole::fwd) return static_cast<unsigned>(fwd_smem_bytes(c));
    if (role == StageRole::bwd_dq_dk_dv) return static_cast<unsigned>(bwd_smem_bytes(c));
    return 0;
  }
  std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p,
                                       int) const override {
    return tiled_stages(*this, c, p, per_key_tile_grid(c, p));
  }
  // 16 bytes per cp.async and vector store.
  std::size_t alignment_bytes() const override { return 16; }
  BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c,
                                          const FmhaProblem& p) const override {
    return bwd_workspace_with(c, p, /*dq_sums=*/true);
  }
};

}  // namespace

const KernelFamily& family() {
  static const MmaSm80Family instance;
  return instance;
}

}  // namespace fmha_jit::kernels::mma_sm80
