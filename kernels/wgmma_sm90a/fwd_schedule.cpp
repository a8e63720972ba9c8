// The Hopper forward's persistent schedule on the host: the split of the last round's tiles by
// keys, and the causal tile plan (templates/fwd/fmha_fwd_sm90a_work.h, fmha_fwd_sm90a_split.h).
#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "kernels/common/key_tiles.hpp"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

FwdSplitTail fwd_split_tail(const FmhaKernelConfig& c, const FmhaProblem& p, int multiprocessors) {
  FwdSplitTail split;
  // Only without a mask does every tile see the same keys, so that equal key ranges are equal
  // work; the causal lists put their lightest tiles last already (fmha_fwd_sm90a_tile_index).
  // Nor in a packed batch, whose tiles differ by their sequence's length, or with sinks, whose
  // normalisation the segments' combine does not take.
  if (c.impl != KernelImpl::wgmma_sm90a || c.family != Family::fwd || c.mask != MaskKind::none ||
      c.varlen || c.sinks || multiprocessors <= 0) {
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

}  // namespace fmha_jit::kernels::wgmma_sm90a
