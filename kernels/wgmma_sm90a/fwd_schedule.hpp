// The Hopper forward's persistent schedule: which CTA runs which tile, and the split tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

// wgmma_sm90a forward without a mask: whether the persistent CTAs split the last round's tiles by
// keys (FmhaFwdSm90Params::split_*, templates/fwd/fmha_fwd_sm90a_split.h), and the scratch that
// needs: the split tiles' arrival counters (which must be zero before the first launch; each
// launch leaves them at zero), then every CTA's partial O and row statistics.
struct FwdSplitTail {
  int round = 0;   // the round of the split tiles; the rounds before it run whole tiles
  int tiles = 0;   // 0: no split
  int blocks = 0;  // key blocks of one tile
  int ctas = 0;    // CTAs that take a range of them: min(SMs, tiles x blocks)
  std::size_t counters_bytes = 0;
  std::size_t partials_offset = 0;  // 256-byte aligned, after the counters
  std::size_t workspace_bytes = 0;
};
FwdSplitTail fwd_split_tail(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

// wgmma_sm90a forward under a causal mask: each persistent CTA's tiles, where a greedy plan
// (heads in L2-sized sections, each heaviest tile first, to the CTA with the least work so far)
// replaces the kernel's static order (FmhaFwdSm90Params::tile_order,
// templates/fwd/fmha_fwd_sm90a_work.h). order[r * grid + c] is CTA c's r-th tile (an index of the
// kernel's causal list), -1 past its last; empty where the static order is kept. Work is modelled
// as key blocks plus a per-tile overhead.
struct FwdTileOrder {
  int grid = 0;
  int rounds = 0;
  std::vector<int> order;       // rounds x grid, round-major; empty: the static order
  double static_makespan = 0;   // the most modelled work on one CTA, static order
  double planned_makespan = 0;  // the same, greedy plan
  int sections = 0;             // head sections dealt one after another (L2 locality)
  // Where `order` is empty: the (batch, head) pairs of a section of the kernel's static order
  // (FmhaFwdSm90Params::causal_section_heads), 0 for all of them (one section).
  int static_section_heads = 0;
};
// How many K / V heads (over the batch) one section of the causal forward's plan holds: as many
// as fit its share of L2, at least one.
std::int64_t fwd_l2_section_kv_heads(const FmhaProblem& problem);
// The (batch, head) pairs of one L2 section: fwd_l2_section_kv_heads whole GQA groups.
int fwd_l2_section_heads(const FmhaProblem& problem);
FwdTileOrder fwd_tile_order(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

}  // namespace fmha_jit::kernels::wgmma_sm90a
