// The Hopper backward's launch choices on the host: the deterministic chains' grouping and
// direction, and the atomic mode's split tail (templates/bwd/fmha_bwd_sm90a_schedule.h).
#include <algorithm>

#include "common/fmha_params.h"
#include "kernels/common/key_tiles.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

int det_group_heads(const FmhaKernelConfig& c, const FmhaProblem& p, int multiprocessors) {
  // Without a mask, as many pairs as fill the GPU chain by chain; with one, one pair (the mask
  // staggers the chains already). fmha_bwd_key_tile_cta has the measurements.
  const std::int64_t tiles = key_tiles(c, p);
  if (c.impl != KernelImpl::wgmma_sm90a || c.mask != MaskKind::none || multiprocessors <= 0 ||
      tiles >= multiprocessors) {
    return 1;
  }
  const std::int64_t pairs = static_cast<std::int64_t>(p.nhead_k) * p.batch;
  // Chains of 32 key tiles or more take one pair more than fills the GPU (a ceiling), so that
  // the SMs the floor leaves idle (4 of 132 whenever the key tiles are a power of two) take the
  // next pair's first chain positions. Measured (H200, bf16, floor -> ceiling): hdim 256 S 2048
  // (32 tiles) 368 -> 373 TFLOP/s, repeated; at 64 and 128 tiles within the runs' spread; shorter
  // chains lost (hdim 256 S 512, 8 tiles: 248.8 -> 238.8; 16 tiles -0.4 to -1.6 %), where each
  // pair's chain is a larger share of a CTA's life (docs/METHOD.md, "Hopper backward launch
  // order").
  constexpr std::int64_t kMinCeilingChain = 32;
  const std::int64_t fill =
      multiprocessors / tiles + (tiles >= kMinCeilingChain && multiprocessors % tiles != 0 ? 1 : 0);
  return static_cast<int>(std::min<std::int64_t>(fill, pairs));
}

bool bwd_split_eligible(const FmhaKernelConfig& c) {
  // The hdim 256 kernel has no split (its rows measured well ahead of cuDNN without one), the
  // deterministic mode's chains fix the order of every addition, and under a mask the key tiles
  // differ in work, so equal parts would not even out the wave.
  return c.impl == KernelImpl::wgmma_sm90a && c.family == Family::bwd && !c.deterministic &&
         c.mask == MaskKind::none && c.hdim_q <= 128 && c.block_n == kFmhaBwdSplitKeys;
}

BwdSplitTail bwd_split_tail(const FmhaKernelConfig& c, const FmhaProblem& p, int multiprocessors) {
  BwdSplitTail split;
  if (!bwd_split_eligible(c) || multiprocessors <= 0) return split;
  const std::int64_t tiles = key_tiles(c, p) * p.nhead_k * p.batch;
  const std::int64_t rest = tiles % multiprocessors;
  if (tiles <= multiprocessors || rest == 0 || rest > kBwdMaxSplitTiles) return split;
  // A key tile's iterations (query tiles of every query head of its group), and the last wave's
  // time in iterations when its `rest` tiles run as k parts each: ceil(rest k / SMs) rounds of
  // parts of n / k iterations plus a part's own cost (K and V loaded again, the pipeline filled
  // and drained, dK / dV added to the workspace: about two iterations' time at hdim 128, a guess
  // to be measured). Whole, the wave takes n iterations.
  const std::int64_t n =
      static_cast<std::int64_t>(p.nhead_q / p.nhead_k) * ((p.seqlen_q + c.block_m - 1) / c.block_m);
  constexpr std::int64_t kPartCostIters = 2;
  constexpr std::int64_t kMaxParts = 16;
  std::int64_t best_cost = n, best_parts = 0;
  for (std::int64_t k = 2; k <= kMaxParts && k <= n; ++k) {
    const std::int64_t rounds = (rest * k + multiprocessors - 1) / multiprocessors;
    const std::int64_t cost = rounds * ((n + k - 1) / k + kPartCostIters);
    if (cost < best_cost) {
      best_cost = cost;
      best_parts = k;
    }
  }
  // Split only where the wave saves at least this many iterations (a guess to be measured).
  constexpr std::int64_t kMinSavedIters = 8;
  if (best_parts == 0 || n - best_cost < kMinSavedIters) return split;
  split.first = static_cast<int>(tiles - rest);
  split.tiles = static_cast<int>(rest);
  split.parts = static_cast<int>(best_parts);
  return split;
}

int det_asc_pairs(const FmhaKernelConfig& c, const FmhaProblem& p) {
  // One under causal masks when there are at most 16 (kv head, batch) pairs: the last pair's
  // largest key tiles then start first instead of last (fmha_bwd_key_tile_cta). The tail they
  // cut is a share of the kernel that grows as pairs get fewer: with 8 or 16 pairs it measured
  // +3 to +10 % (bf16, H200: GQA S 8192 / 16384, hdim 256 S 8192 / 16384); with 32 or more,
  // -3.5 to +1.6 %, measured in a build whose work order cost ~4 % by itself (two divisions per
  // iteration, since one), not re-measured. Without a mask every key tile has the same work, and
  // sliding windows were not measured (docs/METHOD.md, "Hopper backward launch order").
  constexpr std::int64_t kMaxPairs = 16;
  const bool causal = is_causal(c.mask);
  const std::int64_t pairs = static_cast<std::int64_t>(p.nhead_k) * p.batch;
  return c.impl == KernelImpl::wgmma_sm90a && causal && pairs <= kMaxPairs ? 1 : 0;
}

int det_up_cells(const FmhaKernelConfig& c, const FmhaProblem& p) {
  // With one query head the head-major order already is the walk that takes every own cell on
  // the way up (2 iterations of slack at 128-key / 64-query tiles), so it applies to GQA only.
  // 2 cells: the slack MHA's order has, which hides a link's release (one L2 round trip for the
  // adds, one for the semaphore) behind the next CTA's work.
  constexpr int kUpCells = 2;
  const bool gqa = p.nhead_k > 0 && p.nhead_q / p.nhead_k > 1;
  // Where hdim 256 chains are longer than kDetReferenceSms, every pair ascends and no CTA walks
  // (bwd_causal_sections); the cells go unused there.
  return c.impl == KernelImpl::wgmma_sm90a && c.deterministic && is_causal(c.mask) && gqa ? kUpCells
                                                                                          : 0;
}

void set_bwd_choices(FmhaBwdParams& params, const FmhaKernelConfig& c, const FmhaProblem& p,
                     int multiprocessors) {
  params.det_asc_pairs = det_asc_pairs(c, p);
  params.det_up_cells = det_up_cells(c, p);
  params.det_group_heads = det_group_heads(c, p, multiprocessors);
  const BwdSplitTail split = bwd_split_tail(c, p, multiprocessors);
  params.split_first = split.first;
  params.split_tiles = split.tiles;
  params.split_parts = split.parts;
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
