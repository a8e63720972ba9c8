#include "dispatcher/plan.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "codegen/tile_shapes.hpp"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::dispatch {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

namespace {

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& c, codegen::StageRole role) {
  if (c.impl == KernelImpl::wgmma_sm90a &&
      (role == codegen::StageRole::fwd || role == codegen::StageRole::bwd_dq_dk_dv)) {
    return static_cast<unsigned>(codegen::wgmma_sm90a_smem_bytes(c));
  }
  if (c.impl == KernelImpl::mma_sm80 && role == codegen::StageRole::fwd) {
    return static_cast<unsigned>(codegen::mma_sm80_fwd_smem_bytes(c));
  }
  if (c.impl == KernelImpl::mma_sm80 && role == codegen::StageRole::bwd_dq_dk_dv) {
    return static_cast<unsigned>(codegen::mma_sm80_bwd_smem_bytes(c));
  }
  // The reference kernels and the backward's row-wise stages use static shared memory only.
  return 0;
}

std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p,
                                     int multiprocessors) {
  std::vector<StageLaunch> stages;
  if (c.impl == KernelImpl::wgmma_sm90a && c.family == Family::fwd) {
    // Persistent (templates/fwd/fmha_fwd_sm90a.h): one CTA per SM, at most one per tile; the
    // CTAs stride over the tile list.
    const std::int64_t tiles = (p.seqlen_q + c.block_m - 1) / c.block_m * p.nhead_q * p.batch;
    const std::int64_t ctas =
        multiprocessors > 0 && multiprocessors < tiles ? multiprocessors : tiles;
    stages.push_back({codegen::StageRole::fwd,
                      {u32(ctas), 1, 1},
                      {u32(c.num_warps * 32), 1, 1},
                      stage_dynamic_smem_bytes(c, codegen::StageRole::fwd)});
    return stages;
  }
  if (c.impl == KernelImpl::mma_sm80 || c.impl == KernelImpl::wgmma_sm90a) {
    // Geometry documented in templates/fwd/fmha_fwd_sm80.h, templates/bwd/fmha_bwd_sm80.h and
    // templates/bwd/fmha_bwd_sm90a.h: one block per block_m query rows of a query head, except
    // dq_dk_dv (one block per block_n keys of a kv head); num_warps warps in every stage.
    const device::Dim3 per_query_tile{u32((p.seqlen_q + c.block_m - 1) / c.block_m), u32(p.nhead_q),
                                      u32(p.batch)};
    // The deterministic Hopper kernels, and the atomic ones under causal masks, order their CTAs
    // themselves, in one dimension (templates/bwd/fmha_bwd_sm90a_schedule.h,
    // fmha_bwd_key_tile_cta); check_problem bounds their count.
    // So do the split tails of the atomic ones (bwd_split_tail): whole key tiles, then parts.
    const std::int64_t tiles = key_tiles(c, p);
    const BwdSplitTail split = bwd_split_tail(c, p, multiprocessors);
    device::Dim3 per_key_tile{u32(tiles), u32(p.nhead_k), u32(p.batch)};
    if (c.impl == KernelImpl::wgmma_sm90a && (c.deterministic || is_causal(c.mask))) {
      per_key_tile = {u32(tiles * p.nhead_k * p.batch), 1, 1};
    } else if (split.tiles > 0) {
      per_key_tile = {u32(split.first + static_cast<std::int64_t>(split.tiles) * split.parts), 1,
                      1};
    }
    for (codegen::StageRole role : codegen::stage_roles(c)) {
      const bool per_key = role == codegen::StageRole::bwd_dq_dk_dv;
      stages.push_back({role,
                        per_key ? per_key_tile : per_query_tile,
                        {u32(c.num_warps * 32), 1, 1},
                        stage_dynamic_smem_bytes(c, role)});
    }
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
      case codegen::StageRole::bwd_dq_dk_dv:
      case codegen::StageRole::bwd_convert_dq:
        throw Error(ErrorCode::invalid_config, "mma_sm80 stage in a reference plan");
    }
  }
  return stages;
}

std::int64_t key_tiles(const FmhaKernelConfig& c, const FmhaProblem& p) {
  return (p.seqlen_k + c.block_n - 1) / c.block_n;
}

TileRange query_tile_key_tiles(const FmhaKernelConfig& c, const FmhaProblem& p, std::int64_t m) {
  const int mask = static_cast<int>(c.mask);
  const int first = static_cast<int>(m * c.block_m);
  const int last = static_cast<int>(std::min<std::int64_t>(p.seqlen_q, first + c.block_m)) - 1;
  const FmhaKeyRange lo = fmha_visible_keys(mask, first, p.seqlen_q, p.seqlen_k, -1, -1);
  const FmhaKeyRange hi = fmha_visible_keys(mask, last, p.seqlen_q, p.seqlen_k, -1, -1);
  if (hi.hi <= lo.lo) return {};
  return {lo.lo / c.block_n, (hi.hi + c.block_n - 1) / c.block_n};
}

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

FwdSplitTail fwd_split_tail(const FmhaKernelConfig& c, const FmhaProblem& p, int multiprocessors) {
  FwdSplitTail split;
  // Only without a mask does every tile see the same keys, so that equal key ranges are equal
  // work; the causal lists put their lightest tiles last already (fmha_fwd_sm90a_tile_index).
  if (c.impl != KernelImpl::wgmma_sm90a || c.family != Family::fwd || c.mask != MaskKind::none ||
      multiprocessors <= 0) {
    return split;
  }
  const std::int64_t tiles = (p.seqlen_q + c.block_m - 1) / c.block_m * p.nhead_q * p.batch;
  const std::int64_t rest = tiles % multiprocessors;
  const std::int64_t blocks = (p.seqlen_k + c.block_n - 1) / c.block_n;
  // Split only where the round it saves is worth more than what a segment adds: a Q load that
  // no earlier tile hides, the partial O written and read back, and the combine in the tile's
  // last warpgroup. Without a split grid - rest SMs idle for a tile of `blocks` key blocks;
  // split, every SM idles (grid - rest) / grid of that, which is what the rule compares.
  // Measured (bf16, H200, no split -> split), saved blocks per SM: hdim 256 S 2048 6.3
  // (-1.3 %), hdim 128 S 2048 7.8 (-1 %), hdim 64 S 8192 9.7 (+0.2 %), hdim 64 S 2048 10.7
  // (+2.7 %), hdim 256 S 4096 12.6 (+1.2 %), hdim 128 S 4096 15.5 (+0.8 %), S 8192 / 16384 at
  // every hdim +0.2 to +3 % (docs/METHOD.md, "Hopper forward launch order").
  constexpr std::int64_t kMinSavedBlocks = 9;
  // The kernel ranges the split blocks in 32-bit arithmetic (its producer has 24 registers).
  constexpr std::int64_t kMaxIndex = std::int64_t{1} << 31;
  const std::int64_t ctas = std::min<std::int64_t>(multiprocessors, rest * blocks);
  if (tiles <= multiprocessors || rest == 0 ||
      (multiprocessors - rest) * blocks < kMinSavedBlocks * multiprocessors ||
      (rest * blocks + 1) * ctas >= kMaxIndex) {
    return split;
  }
  split.round = static_cast<int>(tiles / multiprocessors);
  split.tiles = static_cast<int>(rest);
  split.blocks = static_cast<int>(blocks);
  split.ctas = static_cast<int>(ctas);
  const std::size_t consumers = static_cast<std::size_t>(c.block_m / 64);
  // FmhaFwdSm90aPartial: per thread hdim_v / 2 accumulators and 4 row statistics, for 128
  // threads of each consumer warpgroup, of two segments of each CTA.
  const std::size_t slot_bytes = 128 * (static_cast<std::size_t>(c.hdim_v) / 2 + 4) * sizeof(float);
  split.counters_bytes = static_cast<std::size_t>(rest) * consumers * sizeof(int);
  split.partials_offset = align_up(split.counters_bytes, 256);
  split.workspace_bytes =
      split.partials_offset + static_cast<std::size_t>(ctas) * 2 * consumers * slot_bytes;
  return split;
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

std::int64_t fwd_l2_section_kv_heads(const FmhaProblem& p) {
  // The K and V bytes of one section: a quarter of the 50 MB L2 of the H100 and H200. Hopper's
  // L2 is two partitions that each hold what their SMs read, and where one section's light
  // tiles still run the next one's heavy tiles start: two sections live at once.
  constexpr std::int64_t kSectionBytes = 12ll << 20;
  const std::int64_t kv_head_bytes =
      p.seqlen_k * (static_cast<std::int64_t>(p.hdim_q) + p.hdim_v) * 2;  // 16-bit K and V
  const std::int64_t kv_heads = static_cast<std::int64_t>(p.nhead_k) * p.batch;
  return std::clamp<std::int64_t>(kSectionBytes / std::max<std::int64_t>(kv_head_bytes, 1), 1,
                                  std::max<std::int64_t>(kv_heads, 1));
}

int fwd_l2_section_heads(const FmhaProblem& p) {
  return static_cast<int>(fwd_l2_section_kv_heads(p) * (p.nhead_q / p.nhead_k));
}

FwdTileOrder fwd_tile_order(const FmhaKernelConfig& c, const FmhaProblem& p, int multiprocessors) {
  FwdTileOrder plan;
  const bool causal = is_causal(c.mask);
  const std::int64_t num_m = (p.seqlen_q + c.block_m - 1) / c.block_m;
  const std::int64_t heads = static_cast<std::int64_t>(p.nhead_q) * p.batch;
  const std::int64_t tiles = num_m * heads;
  if (c.impl != KernelImpl::wgmma_sm90a || c.family != Family::fwd || !causal ||
      multiprocessors <= 0 || tiles <= multiprocessors) {
    return plan;
  }
  const int grid = multiprocessors;
  // A tile's work: its key blocks (fmha_block_keys), plus one block's worth for what every tile
  // costs besides (its Q load, the O store, the final rescale). The plans' gains barely depend on
  // that constant: hdim 128 S 2048, 8 x 16 heads, on 132 SMs models 3.1 % above the mean per CTA
  // in the static order and 0.3-0.7 % in the plan with an overhead of 0.5 to 2 blocks. Measured
  // (H200, bf16, static -> plan): hdim 128 S 2048 459 -> 465, hdim 64 S 2048 381 -> 386,
  // hdim 256 S 2048 513 -> 523, hdim 128 S 8192 623 -> 630, GQA 32:8 S 2048 557 -> 578
  // (docs/METHOD.md, "Hopper forward launch order").
  constexpr double kTileOverheadBlocks = 1.0;
  std::vector<double> m_work(static_cast<std::size_t>(num_m));
  for (std::int64_t m = 0; m < num_m; ++m) {
    const TileRange blocks = query_tile_key_tiles(c, p, m);
    m_work[static_cast<std::size_t>(m)] =
        static_cast<double>(std::max<std::int64_t>(blocks.hi - blocks.lo, 0)) + kTileOverheadBlocks;
  }
  // The kernel's causal list (fmha_fwd_sm90a_tile): m-blocks from the last down, all heads each.
  auto work = [&](std::int64_t t) {
    return m_work[static_cast<std::size_t>(num_m - 1 - t / heads)];
  };
  // The list runs one m-block across all heads at a time, so the CTAs running together read as
  // many heads' K and V as there are CTAs: at hdim 128 a 128-row tile does 128 FLOP per byte of
  // K / V, against the 200+ a Hopper part's DRAM needs to keep the tensor cores busy, so those
  // reads must come from L2. The plan therefore deals the heads in sections whose K and V fit
  // in part of L2 (fwd_l2_section_kv_heads), each section heaviest m-block first: the tiles that
  // run together share their heads' key blocks in L2, and only the last section's light tiles
  // form the tail. A section holds whole GQA groups (the query heads of one K / V head are
  // adjacent in the list), so a group's K and V are read once per section.
  const std::int64_t group = p.nhead_q / p.nhead_k;
  const std::int64_t kv_heads = static_cast<std::int64_t>(p.nhead_k) * p.batch;
  const std::int64_t section_kv = fwd_l2_section_kv_heads(p);
  const std::int64_t sections = (kv_heads + section_kv - 1) / section_kv;
  // The tiles in dealing order, section by section, heaviest m-block first in each, the last
  // `merged` sections as one. With merged = 1 this is also the kernel's static order in
  // sections (fmha_fwd_sm90a_tile with causal_section_heads = section_kv x group).
  auto in_sections = [&](std::int64_t merged, auto&& visit) {
    const std::int64_t tail_kv = (sections - merged) * section_kv;
    for (std::int64_t first_kv = 0; first_kv < kv_heads; first_kv += section_kv) {
      const std::int64_t end_kv = first_kv == tail_kv ? kv_heads : first_kv + section_kv;
      for (std::int64_t heavy = 0; heavy < num_m; ++heavy) {
        for (std::int64_t bh = first_kv * group; bh < std::min(end_kv, kv_heads) * group; ++bh) {
          visit(heavy * heads + bh);
        }
      }
      if (end_kv == kv_heads) break;
    }
  };
  // The kernel's static order over the list in_sections(merged) visits: round r deals list
  // positions r x grid .. to the CTAs, backwards in odd rounds (fmha_fwd_sm90a_tile_index).
  auto static_makespan = [&](std::int64_t merged) {
    std::vector<double> load(static_cast<std::size_t>(grid), 0.0);
    std::int64_t k = 0;
    in_sections(merged, [&](std::int64_t t) {
      const std::int64_t r = k / grid;
      const std::int64_t c_in = k % grid;
      load[static_cast<std::size_t>(r % 2 ? grid - 1 - c_in : c_in)] += work(t);
      ++k;
    });
    return *std::max_element(load.begin(), load.end());
  };
  // All sections merged: the list of one section, tiles 0, 1, ... in order.
  plan.static_makespan = static_makespan(sections);
  // Greedy, in dealing order: each tile to the CTA with the least work so far, the lowest index
  // among equals, so the plan depends on the problem and the SM count only. The CTA that finishes
  // first takes the next tile, so the dealing order is also the order the tiles start in.
  using Lists = std::vector<std::vector<int>>;
  auto deal = [&](std::int64_t merged, Lists& lists) {
    lists.assign(static_cast<std::size_t>(grid), {});
    using Slot = std::pair<double, int>;  // (work so far, CTA)
    std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> least;
    for (int cta = 0; cta < grid; ++cta) least.push({0.0, cta});
    double makespan = 0;
    in_sections(merged, [&](std::int64_t t) {
      Slot s = least.top();
      least.pop();
      s.first += work(t);
      lists[static_cast<std::size_t>(s.second)].push_back(static_cast<int>(t));
      makespan = std::max(makespan, s.first);
      least.push(s);
    });
    return makespan;
  };
  // A section's heaviest tiles start only once the sections before it are dealt: where the last
  // section is short against its heaviest tile (hdim 128 S 2048, 8 x 16 heads, 132 SMs: its 8
  // heads' 17-block tiles start at 94 % of the mean work, modelled 3.8 % above the mean), the
  // last two sections are dealt as one if that ends the plan earlier. Measured (H100, bf16),
  // 12 MB sections, the last two merged -> not: hdim 128 S 2048 causal 565 -> 554 TFLOP/s,
  // S 8192 662 -> 641, S 512 unchanged (not merged). Merging more, doubling until the model
  // came within 2 % of the mean, merged 8 of 11 sections at hdim 256 S 2048, whose K and V then
  // no longer fit in L2: 547 -> 422. So at most two (docs/METHOD.md, "Hopper forward launch
  // order").
  double total = 0;
  for (std::int64_t t = 0; t < tiles; ++t) total += work(t);
  const double mean = total / grid;
  Lists lists;
  plan.planned_makespan = deal(1, lists);
  plan.sections = static_cast<int>(sections);
  if (sections > 1 && plan.planned_makespan > 1.02 * mean) {
    Lists merged;
    const double makespan = deal(2, merged);
    if (makespan < plan.planned_makespan) {
      plan.planned_makespan = makespan;
      plan.sections = static_cast<int>(sections - 1);
      lists.swap(merged);
    }
  }
  // Where the sections' tail still costs more than 3 % of the plan over all heads (one section,
  // heaviest first: the order measured before sections), that plan is kept. Of the grid's rows
  // only hdim 256 S 8192 causal: 64 tiles to a 8 MB head, modelled 436 against 418 blocks. The
  // sections' L2 gain there was not measured; at hdim 128 S 8192 it was 5.6 % (641 -> 677).
  if (plan.sections > 1) {
    Lists one;
    const double makespan = deal(sections, one);
    if (plan.planned_makespan > 1.03 * makespan) {
      plan.planned_makespan = makespan;
      plan.sections = 1;
      lists.swap(one);
    }
  }
  // Worth a table where it moves the last CTA's finish by 1 % or more against the kernel's static
  // order in the same sections (one section: the order of fmha_fwd_sm90a_tile_index above). With
  // several sections, a table of up to kMaxStaticTiles tiles is kept anyway: the grid's rows are
  // measured with one, not with the static order in sections. Past that, tables grow to MBs (a
  // runner keeps up to 128), and with hundreds of tiles per CTA the static order's snake
  // balances the work within a tile or two.
  constexpr std::int64_t kMaxStaticTiles = 1 << 16;  // a 256 KB table
  if (plan.sections == 1) {
    if (plan.planned_makespan > 0.99 * plan.static_makespan) return plan;
  } else if (tiles > kMaxStaticTiles) {
    if (plan.planned_makespan > 0.99 * static_makespan(1)) {
      plan.static_section_heads = fwd_l2_section_heads(p);
      return plan;
    }
  }
  std::size_t rounds = 0;
  for (const auto& l : lists) rounds = std::max(rounds, l.size());
  plan.grid = grid;
  plan.rounds = static_cast<int>(rounds);
  plan.order.assign(rounds * static_cast<std::size_t>(grid), -1);
  for (std::size_t cta = 0; cta < lists.size(); ++cta) {
    for (std::size_t r = 0; r < lists[cta].size(); ++r) {
      plan.order[r * static_cast<std::size_t>(grid) + cta] = lists[cta][r];
    }
  }
  return plan;
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

BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c, const FmhaProblem& p) {
  BwdWorkspaceLayout w;
  if (c.family != Family::bwd) return w;
  constexpr std::size_t kAlign = 256;
  std::size_t offset = 0;
  auto place = [&](std::size_t bytes) {
    const std::size_t at = offset;
    offset = align_up(offset + bytes, kAlign);
    return at;
  };
  const auto rows = static_cast<std::size_t>(p.lse_elements());  // B x Hq x Sq
  w.d_rowsum = place(rows * sizeof(float));
  if (c.impl == KernelImpl::mma_sm80 || c.impl == KernelImpl::wgmma_sm90a) {
    // fp32 dQ sums, [B, Hq, Sq, hdim_q] contiguous, added to by every key tile.
    w.dq_accum_bytes = rows * static_cast<std::size_t>(c.hdim_q) * sizeof(float);
    w.dq_accum = place(w.dq_accum_bytes);
    if (c.deterministic) {
      // One arrival counter per query tile: [B, Hq, ceil(Sq / block_m)] ints.
      const auto tiles = static_cast<std::size_t>(p.batch * p.nhead_q) *
                         static_cast<std::size_t>((p.seqlen_q + c.block_m - 1) / c.block_m);
      w.semaphores_bytes = tiles * sizeof(int);
      w.semaphores = place(w.semaphores_bytes);
    }
  }
  if (bwd_split_eligible(c)) {
    // A launch of t key tiles on s SMs splits only t mod s < s tiles, and only when t > s; so
    // at most (t - 1) / 2 of them, whatever the GPU.
    const std::int64_t launch_tiles = key_tiles(c, p) * p.nhead_k * p.batch;
    const auto tiles =
        static_cast<std::size_t>(std::min<std::int64_t>((launch_tiles - 1) / 2, kBwdMaxSplitTiles));
    const std::size_t start = offset;
    w.split_dkdv = place(tiles * static_cast<std::size_t>(kFmhaBwdSplitKeys) *
                         static_cast<std::size_t>(c.hdim_q + c.hdim_v) * sizeof(float));
    w.split_counters = place(tiles * sizeof(int));
    w.split_bytes = offset - start;
  }
  w.total = offset;
  return w;
}

std::size_t required_alignment_bytes(const FmhaKernelConfig& c) {
  // The tiled kernels move 16 bytes per cp.async / vector store (TMA, too, needs 16-byte aligned
  // bases and strides); the reference kernels load one element at a time.
  return c.impl == KernelImpl::reference ? 2 : 16;
}

}  // namespace fmha_jit::dispatch

namespace fmha_jit {

BwdWorkspaceSize bwd_workspace_size(const FmhaProblem& problem, const FmhaKernelConfig& config) {
  if (config.family != Family::bwd) {
    throw FieldError(ErrorCode::invalid_config, "family", std::string(to_string(config.family)),
                     "bwd (only the backward needs a workspace)");
  }
  problem.validate();
  const FmhaKernelConfig c = canonicalize(config);
  const dispatch::BwdWorkspaceLayout w = dispatch::bwd_workspace_layout(c, problem);
  BwdWorkspaceSize s;
  s.total = w.total;
  auto rounded = [](std::size_t bytes) { return dispatch::align_up(bytes, 256); };
  s.dq_accum = rounded(w.dq_accum_bytes);
  s.semaphores = rounded(w.semaphores_bytes);
  s.split_tail = w.split_bytes;
  s.d_rowsum = s.total - s.dq_accum - s.semaphores - s.split_tail;
  return s;
}

}  // namespace fmha_jit
