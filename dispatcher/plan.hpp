// The launch plan of a kernel module for one problem: which stages run, in what order, with what
// grid, block and shared memory; and the backward's workspace layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codegen/kernel_name.hpp"
#include "dispatcher/device/device_api.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::dispatch {

struct StageLaunch {
  codegen::StageRole role;
  device::Dim3 grid;
  device::Dim3 block;
  unsigned dynamic_smem_bytes = 0;
};

// Dynamic shared memory of one stage; it depends on the config only, so the runner raises the
// driver's limit once per module load rather than per launch.
unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& canonical, codegen::StageRole role);

// Key tiles of block_n keys a kv head's sequence spans: the backward's stage-2 CTAs per
// (kv head, batch) pair.
std::int64_t key_tiles(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// Stages in launch order, matching codegen::stage_roles(config). `multiprocessors` bounds the
// grid of the persistent kernels (wgmma_sm90a); 0 launches one CTA per tile.
std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                     int multiprocessors = 0);

// Deterministic wgmma_sm90a backward: how many (kv head, batch) pairs interleave their key-tile
// chains in the launch order (FmhaBwdParams::det_group_heads); 1 when `multiprocessors` is 0. The
// rule and why: templates/bwd/fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta.
int det_group_heads(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                    int multiprocessors);
// Deterministic wgmma_sm90a backward: how many of the last (kv head, batch) pairs take their
// key-tile chains in increasing order (FmhaBwdParams::det_asc_pairs, same place for why).
int det_asc_pairs(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// Byte offsets of the backward's fp32 scratch tensors inside one workspace allocation; each starts
// on a 256-byte boundary (the alignment cudaMalloc gives, and enough for vector accesses).
struct BwdWorkspaceLayout {
  std::size_t d_rowsum = 0;  // D = rowsum(dO * O), B x Hq x Sq floats
  // mma_sm80 only (npos otherwise): fp32 dQ sums and, in the deterministic mode, the per-query-
  // tile arrival counters that order them.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t dq_accum = npos, dq_accum_bytes = 0;
  std::size_t semaphores = npos, semaphores_bytes = 0;
  std::size_t total = 0;
};
BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& canonical,
                                        const FmhaProblem& problem);

std::size_t align_up(std::size_t n, std::size_t a);

// Byte alignment the kernels of an implementation need for every tensor pointer and row stride.
std::size_t required_alignment_bytes(const FmhaKernelConfig& canonical);

}  // namespace fmha_jit::dispatch
