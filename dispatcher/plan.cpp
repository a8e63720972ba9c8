#include "dispatcher/plan.hpp"

namespace fmha_jit::dispatch {
namespace {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p) {
  std::vector<StageLaunch> stages;
  // Reference kernels: one block per row, geometry documented in templates/reference/*.h.
  const device::Dim3 block{u32(c.block_n), 1, 1};
  const device::Dim3 per_query_row{u32(p.seqlen_q), u32(p.nhead_q), u32(p.batch)};
  const device::Dim3 per_key_row{u32(p.seqlen_k), u32(p.nhead_k), u32(p.batch)};
  for (codegen::StageRole role : codegen::stage_roles(c)) {
    switch (role) {
      case codegen::StageRole::fwd:
      case codegen::StageRole::bwd_dot_do_o:
      case codegen::StageRole::bwd_dq:
        stages.push_back({role, per_query_row, block, 0});
        break;
      case codegen::StageRole::bwd_dkdv:
        stages.push_back({role, per_key_row, block, 0});
        break;
    }
  }
  return stages;
}

BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c, const FmhaProblem& p) {
  BwdWorkspaceLayout w;
  if (c.family != Family::bwd) return w;
  constexpr std::size_t kAlign = 256;
  w.d_rowsum = 0;
  w.total = align_up(static_cast<std::size_t>(p.lse_elements()) * sizeof(float), kAlign);
  return w;
}

std::size_t required_alignment_bytes(const FmhaKernelConfig&) {
  // The reference kernels load one element at a time.
  return 2;
}

}  // namespace fmha_jit::dispatch
