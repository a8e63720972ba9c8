#include "kernels/reference/family.hpp"

#include "kernels/common/tile_checks.hpp"
#include "kernels/common/tiled_layout.hpp"

namespace fmha_jit::kernels::reference {
namespace {

using codegen::StageRole;

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

// The template call each stage makes; its launch geometry is documented at the top of
// templates/reference/fmha_reference_{fwd,bwd}.h and mirrored by plan_stages below.
std::string stage_call(StageRole role) {
  switch (role) {
    case StageRole::fwd:
      return "fmha_reference_fwd<Element, kHdimQ, kHdimV, kMaskKind, kWriteLse, kThreads>(p);";
    case StageRole::bwd_dot_do_o:
      return "fmha_reference_bwd_dot_do_o<Element, kHdimV, kThreads>(p);";
    case StageRole::bwd_dq:
      return "fmha_reference_bwd_dq<Element, kHdimQ, kHdimV, kMaskKind, kThreads>(p);";
    case StageRole::bwd_dkdv:
      return "fmha_reference_bwd_dkdv<Element, kHdimQ, kHdimV, kMaskKind, kThreads>(p);";
    case StageRole::bwd_dq_dk_dv:
    case StageRole::bwd_convert_dq:
    case StageRole::bwd_dsinks: break;
  }
  return "";
}

class ReferenceFamily final : public KernelFamily {
 public:
  KernelImpl impl() const override { return KernelImpl::reference; }
  bool targets(const ArchInfo&) const override { return true; }
  std::string_view archs_served() const override { return "every arch"; }
  std::string gap(const FmhaKernelConfig& c) const override { return packed_and_modifier_gap(c); }

  TileShape default_tile(const ArchInfo& arch, const FmhaKernelConfig&) const override {
    // One block per row; 128 threads give each warp (wavefront) a strided share of the keys and
    // enough lanes to cover hdim 256 in two passes. No pipeline.
    constexpr int kThreads = 128;
    return {1, kThreads, kThreads / arch.wave_size, 1};
  }
  void check_tile(const ArchInfo& arch, const FmhaKernelConfig& c) const override {
    const TileShape t = default_tile(arch, c);
    check_tile_field("block_m", c.block_m, t.block_m, "reference");
    check_tile_field("block_n", c.block_n, t.block_n, "reference");
    check_tile_field("num_warps", c.num_warps, t.num_warps, "reference");
    check_tile_field("num_stages", c.num_stages, t.num_stages, "reference");
  }

  std::vector<StageRole> stage_roles(const FmhaKernelConfig& c) const override {
    if (c.family == Family::fwd) return {StageRole::fwd};
    return {StageRole::bwd_dot_do_o, StageRole::bwd_dq, StageRole::bwd_dkdv};
  }
  codegen::EntrySpec entry_spec(const FmhaKernelConfig& c) const override {
    codegen::EntrySpec spec;
    spec.header = c.family == Family::fwd ? "reference/fmha_reference_fwd.h"
                                          : "reference/fmha_reference_bwd.h";
    spec.threads = c.block_n;  // a key chunk per pass
    for (StageRole role : stage_roles(c)) {
      spec.stages.push_back({role, role == StageRole::fwd ? "FmhaFwdParams" : "FmhaBwdParams",
                             "kThreads", stage_call(role)});
    }
    return spec;
  }

  // Static shared memory only.
  unsigned dynamic_smem_bytes(const FmhaKernelConfig&, StageRole) const override { return 0; }
  std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p,
                                       int) const override {
    // One block per row, geometry documented in templates/reference/*.h.
    const device::Dim3 block{u32(c.block_n), 1, 1};
    const device::Dim3 per_query_row{u32(p.seqlen_q), u32(p.nhead_q), u32(p.batch)};
    const device::Dim3 per_key_row{u32(p.seqlen_k), u32(p.nhead_k), u32(p.batch)};
    std::vector<StageLaunch> stages;
    for (StageRole role : stage_roles(c)) {
      stages.push_back({role, role == StageRole::bwd_dkdv ? per_key_row : per_query_row, block, 0});
    }
    return stages;
  }
  // One element at a time.
  std::size_t alignment_bytes() const override { return 2; }
  BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c,
                                          const FmhaProblem& p) const override {
    return bwd_workspace_with(c, p, /*dq_sums=*/false);
  }
};

}  // namespace

const KernelFamily& family() {
  static const ReferenceFamily instance;
  return instance;
}

}  // namespace fmha_jit::kernels::reference
