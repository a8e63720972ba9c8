// What the tiled families (mma_sm80, wgmma_sm90a) share of their launch: the grid of their
// row-wise and key-tile stages, and the backward's fp32 dQ sums and semaphores in the workspace.
#pragma once

#include <vector>

#include "kernels/family.hpp"

namespace fmha_jit::kernels {

// One CTA per block_n keys of a kv head: {key tiles, nhead_k, batch}.
device::Dim3 per_key_tile_grid(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// The family's stages in launch order: one CTA per block_m query rows of a query head, except
// dq_dk_dv on `per_key_tile`; num_warps warps in every stage (templates/fwd/fmha_fwd_sm80.h,
// templates/bwd/fmha_bwd_sm80.h, templates/bwd/fmha_bwd_sm90a.h).
std::vector<StageLaunch> tiled_stages(const KernelFamily& family, const FmhaKernelConfig& canonical,
                                      const FmhaProblem& problem, device::Dim3 per_key_tile);

// The backward's workspace: D rowsums, and where `dq_sums` the fp32 dQ sums and (deterministic)
// the per-query-tile arrival counters; `total` is 256-aligned, so a family may append its own.
BwdWorkspaceLayout bwd_workspace_with(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                      bool dq_sums);
// Places `bytes` at `layout.total` (256-aligned) and grows the total; returns the offset.
std::size_t append_to_workspace(BwdWorkspaceLayout& layout, std::size_t bytes);

}  // namespace fmha_jit::kernels
