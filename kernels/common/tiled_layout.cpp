#include "kernels/common/tiled_layout.hpp"

#include "kernels/common/key_tiles.hpp"

namespace fmha_jit::kernels {
namespace {

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

device::Dim3 per_key_tile_grid(const FmhaKernelConfig& c, const FmhaProblem& p) {
  return {u32(key_tiles(c, p)), u32(p.nhead_k), u32(p.batch)};
}

std::vector<StageLaunch> tiled_stages(const KernelFamily& family, const FmhaKernelConfig& c,
                                      const FmhaProblem& p, device::Dim3 per_key_tile) {
  const device::Dim3 per_query_tile{u32((p.seqlen_q + c.block_m - 1) / c.block_m), u32(p.nhead_q),
                                    u32(p.batch)};
  std::vector<StageLaunch> stages;
  for (codegen::StageRole role : family.stage_roles(c)) {
    if (role == codegen::StageRole::bwd_dsinks) {
      stages.push_back({role, {u32(p.nhead_q), 1, 1}, {u32(kFmhaDsinksThreads), 1, 1}, 0});
      continue;
    }
    const bool per_key = role == codegen::StageRole::bwd_dq_dk_dv;
    stages.push_back({role,
                      per_key ? per_key_tile : per_query_tile,
                      {u32(c.num_warps * 32), 1, 1},
                      family.dynamic_smem_bytes(c, role)});
  }
  return stages;
}

std::size_t append_to_workspace(BwdWorkspaceLayout& w, std::size_t bytes) {
  constexpr std::size_t kAlign = 256;
  const std::size_t at = w.total;
  w.total = align_up(w.total + bytes, kAlign);
  return at;
}

BwdWorkspaceLayout bwd_workspace_with(const FmhaKernelConfig& c, const FmhaProblem& p,
                                      bool dq_sums) {
  BwdWorkspaceLayout w;
  if (c.family != Family::bwd) return w;
  const auto rows = static_cast<std::size_t>(p.lse_elements());  // B x Hq x Sq
  w.d_rowsum = append_to_workspace(w, rows * sizeof(float));
  if (c.sinks) w.dsink_rows = append_to_workspace(w, rows * sizeof(float));
  if (dq_sums) {
    // fp32 dQ sums, [B, Hq, Sq, hdim_q] contiguous, added to by every key tile.
    w.dq_accum_bytes = rows * static_cast<std::size_t>(c.hdim_q) * sizeof(float);
    w.dq_accum = append_to_workspace(w, w.dq_accum_bytes);
    if (c.deterministic) {
      // One arrival counter per query tile: [B, Hq, ceil(Sq / block_m)] ints.
      const auto tiles = static_cast<std::size_t>(p.batch * p.nhead_q) *
                         static_cast<std::size_t>((p.seqlen_q + c.block_m - 1) / c.block_m);
      w.semaphores_bytes = tiles * sizeof(int);
      w.semaphores = append_to_workspace(w, w.semaphores_bytes);
    }
  }
  return w;
}

}  // namespace fmha_jit::kernels
