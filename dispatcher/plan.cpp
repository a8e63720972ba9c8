#include "dispatcher/plan.hpp"

#include "codegen/tile_shapes.hpp"

namespace fmha_jit::dispatch {
namespace {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& c, codegen::StageRole role) {
  if (c.impl == KernelImpl::mma_sm80 && role == codegen::StageRole::fwd) {
    return static_cast<unsigned>(codegen::mma_sm80_fwd_smem_bytes(c));
  }
  return 0;  // the reference kernels use static shared memory only
}

std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p) {
  std::vector<StageLaunch> stages;
  if (c.impl == KernelImpl::mma_sm80) {
    // Geometry documented in templates/fwd/fmha_fwd_sm80.h: one block per block_m query rows.
    const auto m_blocks = (p.seqlen_q + c.block_m - 1) / c.block_m;
    stages.push_back({codegen::StageRole::fwd,
                      {u32(m_blocks), u32(p.nhead_q), u32(p.batch)},
                      {u32(c.num_warps * 32), 1, 1},
                      stage_dynamic_smem_bytes(c, codegen::StageRole::fwd)});
    return stages;
  }
  // Reference kernels: one block per row, geometry documented in templates/reference/*.h.
  const device::Dim3 block{u32(c.block_n), 1, 1};
  const device::Dim3 per_query_row{u32(p.seqlen_q), u32(p.nhead_q), u32(p.batch)};
  const device::Dim3 per_key_row{u32(p.seqlen_k), u32(p.nhead_k), u32(p.batch)};
  for (codegen::StageRole role : codegen::stage_roles(c)) {
    switch (role) {
      case codegen::StageRole::fwd:
      case codegen::StageRole::bwd_dot_do_o:
      case codegen::StageRole::bwd_dq: stages.push_back({role, per_query_row, block, 0}); break;
      case codegen::StageRole::bwd_dkdv: stages.push_back({role, per_key_row, block, 0}); break;
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

std::size_t required_alignment_bytes(const FmhaKernelConfig& c) {
  // The tiled kernels move 16 bytes per cp.async / vector store; the reference kernels load one
  // element at a time.
  return c.impl == KernelImpl::reference ? 2 : 16;
}

}  // namespace fmha_jit::dispatch
