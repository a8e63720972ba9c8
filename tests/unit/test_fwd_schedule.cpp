// The Hopper forward's persistent work list (templates/fwd/fmha_fwd_sm90a_work.h), run on the
// host through support/device_shim.hpp for every CTA of the launches the plan makes (grid and
// split tail from kernels::plan_stages and fwd_split_tail for an SM count). Checked: the tile
// list maps onto (query tile, head, batch) one to one; every tile runs once whole, or, in the
// split round, as segments whose key blocks partition the tile's own (fmha_block_keys) in CTA
// order; every CTA's split range maps back to it (fmha_fwd_sm90a_split_owner), and a segment's
// part is 0 exactly when the CTA's range starts inside its tile (what the combining warpgroup
// reads, FmhaFwdSm90aSegments). Causal launches run twice: in the kernel's static order and in
// the host's plan (kernels::wgmma_sm90a::fwd_tile_order) where it makes one. A GPU run covers only
// its own SM count and the shapes it runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatcher/launch.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "kernels/registry.hpp"
#include "kernels/wgmma_sm90a/params.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "support/test_support.hpp"
// Last before the device code: it defines __CUDACC__.
#include "support/device_shim.hpp"
// After the shim: device code.
#include "fwd/fmha_fwd_sm90a_work.h"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"

using namespace fmha_jit;

namespace {

struct Problem {
  int sq, sk, hq, hk, batch;
};

struct Item {
  int cta, iter;
  FmhaFwdSm90aWork w;
  FmhaBlockKeys keys;
};

template <int kMask, int kBlockM, int kBlockN>
void check_launch(const FmhaKernelConfig& c, const Problem& prob, int sms, bool planned = false,
                  int section_heads = 0) {
  INFO((planned ? "planned order, " : "")
       << (section_heads > 0
               ? "static order in sections of " + std::to_string(section_heads) + " heads, "
               : "")
       << "hdim " << c.hdim_q << " tile " << kBlockM << " x " << kBlockN << " Sq " << prob.sq
       << " Sk " << prob.sk << " heads " << prob.hq << ":" << prob.hk << " batch " << prob.batch
       << " mask " << to_string(c.mask) << " on " << sms << " SMs");
  REQUIRE(c.block_m == kBlockM);
  REQUIRE(c.block_n == kBlockN);
  const int window = c.mask == MaskKind::sliding_window ? 40 : -1;
  const FmhaProblem fp =
      test::sized_problem(prob.batch, prob.hq, prob.hk, prob.sq, prob.sk, c.hdim_q, window, window);
  // The parameters as the runner builds them (wgmma_sm90a::make_fwd_params without the tensor maps,
  // which need a driver).
  FmhaFwdSm90Params P{};
  P.fwd = dispatch::make_fwd_params(c, fp, test::placeholder_fwd_tensors());
  const FmhaFwdParams& f = P.fwd;
  const kernels::wgmma_sm90a::FwdSplitTail split = kernels::wgmma_sm90a::fwd_split_tail(c, fp, sms);
  kernels::wgmma_sm90a::set_fwd_work(P, c, split, test::placeholder_workspace());
  CHECK(P.causal_section_heads == f.nhead_q * f.batch);
  if (section_heads > 0) P.causal_section_heads = section_heads;
  const auto stages = kernels::plan_stages(c, fp, sms);
  REQUIRE(stages.size() == 1);
  const unsigned grid = stages[0].grid.x;
  REQUIRE(static_cast<int>(grid) == std::min(P.num_tiles, sms));
  gridDim = {grid, 1, 1};
  kernels::wgmma_sm90a::FwdTileOrder order;
  if (planned) {
    order = kernels::wgmma_sm90a::fwd_tile_order(c, fp, sms);
    if (order.order.empty()) return;  // the static order stays: checked without a plan
    REQUIRE(order.grid == static_cast<int>(grid));
    REQUIRE(order.order.size() == static_cast<std::size_t>(order.rounds) * grid);
    P.tile_order = order.order.data();
    P.tile_order_rounds = order.rounds;
  }

  std::vector<Item> items;
  for (unsigned cta = 0; cta < grid; ++cta) {
    blockIdx = {cta, 0, 0};
    FmhaFwdSm90aWork w{};  // whole tiles leave the segment fields as they are
    for (int iter = 0; fmha_fwd_sm90a_work<kMask>(P, iter, w); ++iter) {
      REQUIRE(iter < P.num_tiles + 2);
      int m_block, h, b;
      fmha_fwd_sm90a_tile<kMask>(P, w.tile, m_block, h, b);
      const FmhaBlockKeys keys = fmha_fwd_sm90a_work_keys(
          w, fmha_block_keys<kMask, kBlockM, kBlockN>(m_block * kBlockM, f));
      items.push_back({static_cast<int>(cta), iter, w, keys});
    }
  }

  // The list is a bijection onto the tiles; under a causal mask it runs section by section,
  // heaviest m-block first within each.
  std::set<std::tuple<int, int, int>> tiles;
  int previous_section = 0, previous_m = P.num_m_blocks;
  for (int t = 0; t < P.num_tiles; ++t) {
    int m_block, h, b;
    fmha_fwd_sm90a_tile<kMask>(P, t, m_block, h, b);
    CHECK((m_block >= 0 && m_block < P.num_m_blocks && h >= 0 && h < f.nhead_q && b >= 0 &&
           b < f.batch));
    tiles.insert({m_block, h, b});
    if (kMask == FMHA_MASK_CAUSAL_TOP_LEFT || kMask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) {
      const int section = (b * f.nhead_q + h) / P.causal_section_heads;
      CHECK(section >= previous_section);
      if (section > previous_section) previous_m = P.num_m_blocks;
      CHECK(m_block <= previous_m);
      previous_section = section;
      previous_m = m_block;
    }
  }
  CHECK(static_cast<int>(tiles.size()) == P.num_tiles);

  // Each tile once whole, or as segments that partition its key blocks in CTA order.
  const int first_split = split.tiles > 0 ? split.round * static_cast<int>(grid) : P.num_tiles;
  std::map<int, std::vector<const Item*>> by_tile;
  for (const Item& it : items) {
    REQUIRE(it.w.tile >= 0);
    REQUIRE(it.w.tile < P.num_tiles);
    by_tile[it.w.tile].push_back(&it);
  }
  CHECK(static_cast<int>(by_tile.size()) == P.num_tiles);
  for (const auto& [tile, list] : by_tile) {
    INFO("tile " << tile);
    int m_block, h, b;
    fmha_fwd_sm90a_tile<kMask>(P, tile, m_block, h, b);
    const FmhaBlockKeys own = fmha_block_keys<kMask, kBlockM, kBlockN>(m_block * kBlockM, f);
    if (tile < first_split) {
      REQUIRE(list.size() == 1);
      CHECK(list[0]->w.part == -1);
      continue;
    }
    REQUIRE(split.tiles > 0);
    int next = own.n_block_begin;
    for (const Item* it : list) {  // CTA order
      CHECK(it->w.part >= 0);
      CHECK(it->keys.n_block_begin == next);
      CHECK(it->keys.n_block_end > it->keys.n_block_begin);
      next = it->keys.n_block_end;
      // The combining warpgroup finds this segment's slot: the CTA's part is 0 exactly when its
      // range starts inside this tile.
      const int u = tile - first_split;
      CHECK(it->w.part == (fmha_fwd_sm90a_split_lo(P, it->cta) / P.split_blocks == u ? 0 : 1));
    }
    CHECK(next == own.n_block_end);
    // ... and the CTAs it reads are exactly those with a segment here.
    const int u = tile - first_split;
    CHECK(fmha_fwd_sm90a_split_owner(P, u * P.split_blocks) == list.front()->cta);
    CHECK(fmha_fwd_sm90a_split_owner(P, (u + 1) * P.split_blocks - 1) == list.back()->cta);
    CHECK(list.back()->cta - list.front()->cta + 1 == static_cast<int>(list.size()));
  }
  if (split.tiles > 0) {
    for (int cta = 0; cta < P.split_ctas; ++cta) {
      for (int x = fmha_fwd_sm90a_split_lo(P, cta); x < fmha_fwd_sm90a_split_lo(P, cta + 1); ++x)
        CHECK(fmha_fwd_sm90a_split_owner(P, x) == cta);
    }
  }
}

// Each consumer warpgroup's own key end (fmha_fwd_sm90a_wg_keys) against its rows' visible keys,
// row by row: the blocks it skips and the narrow half it leaves out hold no key any of its valid
// rows sees, and it skips every block it can (down to the one block it always keeps). Returns how
// many warpgroup tiles stop short of their tile's end, so a caller can insist that some do.
template <int kMask, int kBlockM, int kBlockN>
int check_wg_keys(const FmhaKernelConfig& c, const Problem& prob) {
  INFO("hdim " << c.hdim_q << " tile " << kBlockM << " x " << kBlockN << " Sq " << prob.sq << " Sk "
               << prob.sk << " mask " << to_string(c.mask));
  const int window = c.mask == MaskKind::sliding_window ? 40 : -1;
  const FmhaProblem fp =
      test::sized_problem(prob.batch, prob.hq, prob.hk, prob.sq, prob.sk, c.hdim_q, window, window);
  const FmhaFwdParams f = dispatch::make_fwd_params(c, fp, test::placeholder_fwd_tensors());
  int trimmed = 0;
  for (int m0 = 0; m0 < f.seqlen_q; m0 += kBlockM) {
    const FmhaBlockKeys keys = fmha_block_keys<kMask, kBlockM, kBlockN>(m0, f);
    for (int r0 = m0; r0 < m0 + kBlockM; r0 += 64) {
      INFO("rows " << r0 << " of the tile at " << m0);
      const FmhaFwdSm90aWgKeys mine = fmha_fwd_sm90a_wg_keys<kMask, kBlockN>(keys, r0, f);
      if (keys.n_block_end == keys.n_block_begin) {
        CHECK(mine.n_end == keys.n_block_end);
        continue;
      }
      REQUIRE(mine.n_end > keys.n_block_begin);
      REQUIRE(mine.n_end <= keys.n_block_end);
      int seen_hi = 0;  // one past the last key a valid row of the warpgroup sees
      for (int r = r0; r < r0 + 64 && r < f.seqlen_q; ++r) {
        const FmhaKeyRange kr =
            fmha_visible_keys(kMask, r, f.seqlen_q, f.seqlen_k, f.window_left, f.window_right);
        if (kr.hi > kr.lo) seen_hi = std::max(seen_hi, kr.hi);
      }
      CHECK(seen_hi <= mine.n_end * kBlockN);
      if (mine.narrow) {
        CHECK(kBlockN == 128);
        CHECK(seen_hi <= (mine.n_end - 1) * kBlockN + 64);
      }
      if (mine.n_end < keys.n_block_end) {
        ++trimmed;
        CHECK((mine.n_end == keys.n_block_begin + 1 || seen_hi > (mine.n_end - 1) * kBlockN));
      }
      if (kMask == FMHA_MASK_NONE) CHECK((mine.n_end == keys.n_block_end && !mine.narrow));
    }
  }
  return trimmed;
}

FmhaKernelConfig fwd_config(int hdim, MaskKind mask) {
  FmhaKernelConfig c;
  c.family = Family::fwd;
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = hdim;
  c.mask = mask;
  c = canonicalize(c);
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  return c;
}

// The short causal tile variant of a head dim (kernels::wgmma_sm90a::fwd_short_causal_tile).
FmhaKernelConfig short_causal_config(int hdim, MaskKind mask) {
  FmhaKernelConfig c = fwd_config(hdim, mask);
  const auto tile = kernels::wgmma_sm90a::fwd_short_causal_tile(c);
  REQUIRE(tile.has_value());
  c.block_m = tile->block_m;
  c.block_n = tile->block_n;
  c.num_warps = tile->num_warps;
  return canonicalize(c);
}

// The heuristic's tile of each head dim, and the short causal variant where it has one.
template <int kMask>
void check_hdims(MaskKind mask, const Problem& p, int sms, bool planned = false,
                 int section_heads = 0) {
  check_launch<kMask, 192, 128>(fwd_config(64, mask), p, sms, planned, section_heads);
  check_launch<kMask, 128, 128>(fwd_config(128, mask), p, sms, planned, section_heads);
  check_launch<kMask, 128, 80>(fwd_config(192, mask), p, sms, planned, section_heads);
  check_launch<kMask, 128, 80>(fwd_config(256, mask), p, sms, planned, section_heads);
  check_launch<kMask, 128, 128>(short_causal_config(64, mask), p, sms, planned, section_heads);
  check_launch<kMask, 128, 64>(short_causal_config(256, mask), p, sms, planned, section_heads);
}

const std::vector<Problem> kProblems = {
    {1, 1, 8, 1, 1},         {17, 45, 4, 2, 2},     {130, 77, 4, 2, 2},   {300, 260, 4, 2, 2},
    {300, 301, 4, 2, 2},     {1000, 999, 8, 1, 3},  {777, 1000, 8, 2, 3}, {2048, 2048, 16, 16, 8},
    {8192, 8192, 16, 16, 2}, {1024, 4096, 32, 8, 4}};

}  // namespace

TEST_CASE("fwd schedule: every tile runs once, whole or as segments covering its keys",
          "[schedule]") {
  for (int sms : {132, 114, 7, 1}) {
    for (const Problem& p : kProblems) {
      check_hdims<FMHA_MASK_NONE>(MaskKind::none, p, sms);
      check_hdims<FMHA_MASK_CAUSAL_TOP_LEFT>(MaskKind::causal_top_left, p, sms);
      check_hdims<FMHA_MASK_CAUSAL_BOTTOM_RIGHT>(MaskKind::causal_bottom_right, p, sms);
      check_hdims<FMHA_MASK_CAUSAL_TOP_LEFT>(MaskKind::causal_top_left, p, sms, true);
      check_hdims<FMHA_MASK_CAUSAL_BOTTOM_RIGHT>(MaskKind::causal_bottom_right, p, sms, true);
      // The static causal order in L2 sections (past the runner's plan cap): one (batch, head)
      // pair a section, and 3, which leaves a short last section where the pairs are not a
      // multiple of 3.
      for (int section_heads : {1, 3}) {
        check_hdims<FMHA_MASK_CAUSAL_TOP_LEFT>(MaskKind::causal_top_left, p, sms, false,
                                               section_heads);
        check_hdims<FMHA_MASK_CAUSAL_BOTTOM_RIGHT>(MaskKind::causal_bottom_right, p, sms, false,
                                                   section_heads);
      }
      check_hdims<FMHA_MASK_SLIDING_WINDOW>(MaskKind::sliding_window, p, sms);
    }
  }
}

TEST_CASE("fwd schedule: a warpgroup skips only key blocks its own rows do not see", "[schedule]") {
  const auto tile = [](int hdim, MaskKind mask, bool short_causal) {
    return short_causal ? short_causal_config(hdim, mask) : fwd_config(hdim, mask);
  };
  const auto each_tile = [&](auto mask_tag, MaskKind mask, const Problem& p) {
    constexpr int kMask = decltype(mask_tag)::value;
    return check_wg_keys<kMask, 192, 128>(tile(64, mask, false), p) +
           check_wg_keys<kMask, 128, 128>(tile(128, mask, false), p) +
           check_wg_keys<kMask, 128, 80>(tile(256, mask, false), p) +
           check_wg_keys<kMask, 128, 128>(tile(64, mask, true), p) +
           check_wg_keys<kMask, 128, 64>(tile(256, mask, true), p);
  };
  for (const Problem& p : kProblems) {
    each_tile(std::integral_constant<int, FMHA_MASK_NONE>{}, MaskKind::none, p);
    const int top_left = each_tile(std::integral_constant<int, FMHA_MASK_CAUSAL_TOP_LEFT>{},
                                   MaskKind::causal_top_left, p);
    const int bottom_right = each_tile(std::integral_constant<int, FMHA_MASK_CAUSAL_BOTTOM_RIGHT>{},
                                       MaskKind::causal_bottom_right, p);
    each_tile(std::integral_constant<int, FMHA_MASK_SLIDING_WINDOW>{}, MaskKind::sliding_window, p);
    // Causal problems of several query tiles have warpgroups that stop short.
    if (p.sq >= 256 && p.sq == p.sk) {
      CHECK(top_left > 0);
      CHECK(bottom_right > 0);
    }
  }
}
