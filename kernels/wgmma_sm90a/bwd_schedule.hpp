// The Hopper backward's launch choices: the deterministic chains' grouping, direction and walk,
// the causal sections, and the atomic mode's split tail.
#pragma once

#include <cstdint>

#include "common/fmha_params.h"
#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

// Deterministic wgmma_sm90a backward: how many (kv head, batch) pairs interleave their key-tile
// chains in the launch order (FmhaBwdParams::det_group_heads); 1 when `multiprocessors` is 0. The
// rule and why: templates/bwd/fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta.
int det_group_heads(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                    int multiprocessors);
// Deterministic wgmma_sm90a backward: how many of the last (kv head, batch) pairs take their
// key-tile chains in increasing order (FmhaBwdParams::det_asc_pairs, same place for why).
int det_asc_pairs(const FmhaKernelConfig& canonical, const FmhaProblem& problem);
// The SM count the deterministic mode's launch-order choices are planned for, whatever the GPU
// (H100 and H200 have 132): those choices order the additions, so dQ / dK / dV bit for bit must
// not depend on the GPU's SM count.
constexpr int kDetReferenceSms = 132;
// Deterministic wgmma_sm90a backward under a causal mask: the up-down walk's cells per key tile on
// the way up (FmhaBwdParams::det_up_cells; why in templates/bwd/fmha_bwd_sm90a_schedule.h,
// FmhaBwdSm90aWork); 0 keeps the head-major order.
int det_up_cells(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// wgmma_sm90a backward under a causal mask: how many (kv head, batch) pairs share one section of
// the launch order (atomic: FmhaBwdParams::causal_section_pairs; deterministic: det_group_heads,
// with the last section's pairs ascending, det_asc_pairs; why in templates/bwd/
// fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta), from a model of the SMs' finish times in
// query-tile iterations. The deterministic choice is modelled on 132 SMs whatever the GPU, since
// which pairs ascend fixes the order of every dQ addition. section_pairs = 1 (the order before
// sections) where it does not apply, where the model gains under 4 %, or past
// kBwdMaxModelledCtas CTAs, where a launch is tens of waves and its tail a small share.
struct BwdCausalSections {
  int section_pairs = 1;
  std::int64_t asc_pairs = 0;  // pairs whose chains ascend (deterministic; all when atomic)
  int tail_pairs = 0;          // walking chains: the last section's pairs (det_tail_pairs)
  bool alternate = false;      // walking chains: odd pairs ascend too (det_alternate)
  int asc_walk_up = 0;         // and those from asc_walk_from on walk (det_asc_walk_up)
  int asc_walk_from = 0;
  double makespan = 0;           // modelled, in iterations; 0 where not modelled
  double one_pair_makespan = 0;  // the same for one pair per section
};
constexpr std::int64_t kBwdMaxModelledCtas = 1 << 16;
BwdCausalSections bwd_causal_sections(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                      int multiprocessors);

// wgmma_sm90a backward, atomic mode, hdim 64 / 128, without a mask: whether stage 2 splits the
// key tiles of its launch's last partial wave into parts over their query tiles
// (FmhaBwdParams::split_*, templates/bwd/fmha_bwd_sm90a_schedule.h), and into how many.
struct BwdSplitTail {
  int first = 0;  // linear index of the first split key tile
  int tiles = 0;  // 0: no split
  int parts = 0;
};
// The split tiles' workspace is sized without the device (bwd_workspace_size has none): for at
// most this many tiles, more than the multiprocessors of any sm_90 GPU (the split tiles are
// fewer than those).
inline constexpr int kBwdMaxSplitTiles = 144;
// Whether the kernel of `canonical` may split on some GPU (then the workspace holds the split
// tiles' blocks).
bool bwd_split_eligible(const FmhaKernelConfig& canonical);
BwdSplitTail bwd_split_tail(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

// The choices above that need no model, written into the backward's parameters for a launch on
// `multiprocessors` SMs: det_asc_pairs, det_up_cells, det_group_heads and the split tail. The
// launcher then applies the causal sections (bwd_causal_sections), which it keeps per shape.
void set_bwd_choices(FmhaBwdParams& params, const FmhaKernelConfig& canonical,
                     const FmhaProblem& problem, int multiprocessors);

}  // namespace fmha_jit::kernels::wgmma_sm90a
