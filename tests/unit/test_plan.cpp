// The launch plans derived from the config and problem on the host: stages, the Hopper forward's
// persistent grid, split and causal tile order (the backward's beyond its stages:
// test_plan_bwd.cpp).
#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "common/fmha_params.h"
#include "common/mask.h"
#include "dispatcher/launch.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "plan_test_problems.hpp"

using namespace fmha_jit;
using namespace fmha_jit::plan_test;
using codegen::StageRole;

TEST_CASE("plan: the tensor-core backward runs three stages", "[plan]") {
  const auto c = bwd_config(true);
  REQUIRE(c.impl == KernelImpl::mma_sm80);
  const auto stages = kernels::plan_stages(c, problem());
  REQUIRE(stages.size() == 3);
  CHECK(stages[0].role == StageRole::bwd_dot_do_o);
  CHECK(stages[1].role == StageRole::bwd_dq_dk_dv);
  CHECK(stages[2].role == StageRole::bwd_convert_dq);
  const unsigned m_tiles = (1000 + c.block_m - 1) / c.block_m;
  const unsigned n_tiles = (777 + c.block_n - 1) / c.block_n;
  // Row-wise stages per query tile and query head; dq_dk_dv per key tile and kv head.
  CHECK(stages[0].grid.x == m_tiles);
  CHECK(stages[0].grid.y == 8);
  CHECK(stages[1].grid.x == n_tiles);
  CHECK(stages[1].grid.y == 2);
  CHECK(stages[1].grid.z == 3);
  CHECK(stages[2].grid.x == m_tiles);
  for (const auto& s : stages) CHECK(s.block.x == unsigned(c.num_warps * 32));
  CHECK(stages[0].dynamic_smem_bytes == 0);
  CHECK(stages[1].dynamic_smem_bytes > 48 * 1024);  // needs the driver's opt-in
}

TEST_CASE("plan: the Hopper backward runs the same three stages, 384 threads each", "[plan]") {
  const auto c = bwd_config(true, "sm_90");
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  CHECK(c.block_m == 64);  // hdim 128: each warpgroup's dQ block is a head-dim half
  CHECK(c.block_n == 128);
  const auto stages = kernels::plan_stages(c, problem());
  REQUIRE(stages.size() == 3);
  CHECK(stages[1].role == StageRole::bwd_dq_dk_dv);
  // dq_dk_dv in one dimension when deterministic (the kernel orders them, fmha_bwd_key_tile_cta).
  CHECK(stages[1].grid.x == (777 + 127) / 128 * 2 * 3);
  CHECK(stages[1].grid.y == 1);
  const auto atomic = kernels::plan_stages(bwd_config(false, "sm_90"), problem());
  CHECK(atomic[1].grid.x == (777 + 127) / 128);
  CHECK(atomic[1].grid.y == 2);
  CHECK(atomic[1].grid.z == 3);
  CHECK(stages[0].grid.x == (1000 + 63) / 64);
  for (const auto& s : stages) CHECK(s.block.x == 384);
  CHECK(stages[0].dynamic_smem_bytes == 0);
  CHECK(stages[2].dynamic_smem_bytes == 0);
  // K, V 64 KB; 2 x (Q + dO) 64 KB; dS^T 2 x 16 KB; dQ 2 x 16 KB; LSE, D, each stage's query
  // tile, barriers, the up-down walk, alignment.
  CHECK(stages[1].dynamic_smem_bytes == 196608 + 1024 + 2 * 8 + 11 * 8 + 64 + 1024);
  // The same workspace as mma_sm80: fp32 dQ sums and one semaphore per 64-row query tile.
  const auto w = kernels::bwd_workspace_layout(c, problem());
  CHECK(w.dq_accum_bytes == std::size_t(3) * 8 * 1000 * 128 * 4);
  CHECK(w.semaphores_bytes == std::size_t(3) * 8 * ((1000 + 63) / 64) * 4);
}

TEST_CASE("plan: the Hopper forward is persistent, one CTA per SM at most", "[plan]") {
  FmhaKernelConfig c = fwd_sm90_config();
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  const unsigned tiles = (1000 + 127) / 128 * 8 * 3;  // m-blocks x heads x batch = 192
  auto stages = kernels::plan_stages(c, problem(), 132);
  REQUIRE(stages.size() == 1);
  CHECK(stages[0].role == StageRole::fwd);
  CHECK(stages[0].grid.x == 132);
  CHECK(stages[0].grid.y == 1);
  CHECK(stages[0].block.x == 384);  // a producer and two consumer warpgroups
  // Two Q buffers of 32 KB, two stages of K and V 32 KB each, 12 barriers, 1 KB of alignment.
  CHECK(stages[0].dynamic_smem_bytes == 2 * 32768 + 4 * 32768 + 96 + 1024);
  // Three stages leave room for one Q buffer only (14 barriers).
  auto three = c;
  three.num_stages = 3;
  CHECK(kernels::plan_stages(three, problem(), 132)[0].dynamic_smem_bytes ==
        32768 + 6 * 32768 + 112 + 1024);
  // hdim 256: Q 64 KB and two stages of 80-key K and V tiles (40 KB each) fill 225 KB.
  auto hd256 = c;
  hd256.hdim_q = hd256.hdim_v = 256;
  hd256.block_n = 0;
  hd256 = canonicalize(hd256);
  CHECK(kernels::plan_stages(hd256, problem(), 132)[0].dynamic_smem_bytes ==
        65536 + 4 * 40960 + 80 + 1024);
  CHECK(kernels::plan_stages(c, problem(), 0)[0].grid.x == tiles);
  CHECK(kernels::plan_stages(c, problem(), 1000)[0].grid.x == tiles);
}

TEST_CASE("plan: the Hopper forward splits its last round by keys only where it pays", "[plan]") {
  FmhaKernelConfig c = fwd_sm90_config();
  FmhaProblem p = s8192_problem();
  // 64 m-blocks x 32 heads = 2048 tiles: 15 whole rounds on 132 SMs, then 68 tiles of 64 keys
  // blocks split over all 132 CTAs.
  const auto split = kernels::wgmma_sm90a::fwd_split_tail(c, p, 132);
  CHECK(split.round == 15);
  CHECK(split.tiles == 68);
  CHECK(split.blocks == 64);
  CHECK(split.ctas == 132);
  CHECK(split.counters_bytes == 68 * 2 * sizeof(int));
  CHECK(split.partials_offset == 768);
  // Per CTA two segments of two warpgroups, 128 threads x (64 accumulators + 4 statistics).
  CHECK(split.workspace_bytes == 768 + 132 * 2 * 2 * 128 * 68 * sizeof(float));
  // Odd key counts round up to whole blocks; hdim 64 tiles have 192 rows on three warpgroups.
  auto hd64 = c;
  hd64.hdim_q = hd64.hdim_v = 64;
  hd64.block_m = hd64.block_n = hd64.num_warps = hd64.num_stages = 0;
  hd64 = canonicalize(hd64);
  p.seqlen_k = 8191;
  const auto three = kernels::wgmma_sm90a::fwd_split_tail(hd64, p, 132);
  CHECK(three.tiles == (8192 + 191) / 192 * 32 % 132);
  CHECK(three.blocks == 64);
  CHECK(three.counters_bytes == static_cast<std::size_t>(three.tiles) * 3 * sizeof(int));
  // Fewer blocks than SMs: only as many CTAs take a range as there are blocks, one or more each.
  auto few = p;
  few.batch = 1;
  few.nhead_q = few.nhead_k = 17;
  few.seqlen_q = 1024;
  few.seqlen_k = 4000;
  const auto narrow = kernels::wgmma_sm90a::fwd_split_tail(c, few, 132);
  CHECK(narrow.tiles == 4);  // 8 m-blocks x 17 heads = 136 tiles
  CHECK(narrow.blocks == 32);
  CHECK(narrow.ctas == 128);
  p.seqlen_k = 8192;

  // Nothing to split: a mask (tiles of unequal work), whole rounds, fewer tiles than SMs, no
  // multiprocessor count, or a round that saves less than 9 key blocks per SM (S 512: 4 blocks a
  // tile, 68 of 132 SMs busy).
  auto causal = c;
  causal.mask = MaskKind::causal_top_left;
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(causal, p, 132).tiles == 0);
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, p, 128).tiles == 0);  // 2048 = 16 x 128
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, p, 0).tiles == 0);
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, p, 4096).tiles == 0);
  auto short_p = p;
  short_p.batch = 32;
  short_p.seqlen_q = short_p.seqlen_k = 512;
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, short_p, 132).tiles == 0);
  short_p.seqlen_k = 2048;  // 16 blocks x 64 idle SMs: still under 9 x 132
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, short_p, 132).tiles == 0);
  short_p.seqlen_k = 4096;
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, short_p, 132).tiles == 68);
  // The kernel's 32-bit block arithmetic bounds (tiles x blocks + 1) x SMs below 2^31.
  auto huge = p;
  huge.batch = 1;
  huge.nhead_q = huge.nhead_k = 1;
  huge.seqlen_q = 128 * 140;
  huge.seqlen_k = 1 << 30;
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(c, huge, 132).tiles == 0);
  // The backward never splits this way.
  auto bwd = c;
  bwd.family = Family::bwd;
  bwd.block_m = bwd.block_n = bwd.num_warps = bwd.num_stages = 0;
  bwd = canonicalize(bwd);
  CHECK(kernels::wgmma_sm90a::fwd_split_tail(bwd, p, 132).tiles == 0);
}

TEST_CASE("plan: causal forward tiles are dealt so that the CTAs finish together", "[plan]") {
  FmhaKernelConfig c = fwd_sm90_config();
  c.mask = MaskKind::causal_top_left;
  c = canonicalize(c);
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  // The grid's hdim 128 S 2048 causal row: 16 m-blocks x 8 x 16 heads = 2048 tiles of 1 .. 16
  // key blocks on 132 SMs. The static order leaves 68 CTAs one light tile more than the rest.
  FmhaProblem p = s8192_problem();
  p.batch = 8;
  p.seqlen_q = p.seqlen_k = 2048;
  const int block_n = c.block_n;
  const auto plan = kernels::wgmma_sm90a::fwd_tile_order(c, p, 132);
  REQUIRE_FALSE(plan.order.empty());
  CHECK(plan.grid == 132);
  CHECK(plan.order.size() == static_cast<std::size_t>(plan.rounds) * 132);
  CHECK(plan.planned_makespan < 0.99 * plan.static_makespan);
  // The modelled work of the list's tile t (heaviest first, as fmha_fwd_sm90a_tile has it),
  // written out from the mask: m-block m of 128 rows sees keys [0, 128 (m + 1)).
  const std::int64_t heads = 8 * 16;
  auto work = [&](int t) {
    const std::int64_t m = 2048 / 128 - 1 - t / heads;
    return static_cast<double>((128 * (m + 1) + block_n - 1) / block_n) + 1.0;
  };
  // K and V of one head: 2048 keys x (128 + 128) x 2 bytes = 1 MB; 12 heads to a section of
  // 12 MB, so 128 heads take 11 sections. The last (8 heads) is too short for its heaviest
  // tiles to end with the rest, so it is merged with the one before: 10 sections.
  REQUIRE(kernels::wgmma_sm90a::fwd_l2_section_kv_heads(p) == 12);
  CHECK(plan.sections == 10);
  auto section = [&](int t) { return std::min<std::int64_t>((t % heads) / 12, 9); };
  // Every tile exactly once; each CTA's list in dealing order (section by section, heaviest
  // m-block first in each), with its unused rounds last.
  std::vector<int> seen(2048, 0);
  double total = 0, most = 0;
  for (int cta = 0; cta < 132; ++cta) {
    double mine = 0;
    int previous = -1;
    bool ended = false;
    for (int r = 0; r < plan.rounds; ++r) {
      const int t = plan.order[static_cast<std::size_t>(r) * 132 + cta];
      if (t < 0) {
        ended = true;
        continue;
      }
      CHECK_FALSE(ended);
      REQUIRE(t < 2048);
      if (previous >= 0) {
        CHECK(section(t) >= section(previous));
        if (section(t) == section(previous)) CHECK(t > previous);
      }
      previous = t;
      ++seen[static_cast<std::size_t>(t)];
      mine += work(t);
    }
    total += mine;
    most = std::max(most, mine);
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 2048);
  CHECK(most == Approx(plan.planned_makespan));
  CHECK(most < 1.02 * total / 132);
  CHECK(plan.static_makespan > 1.03 * total / 132);
  // The tiles that start together share few heads: the first 132 tiles dealt (round 0) come
  // from the first section's 12 heads, where the static order's first round spans all 128.
  std::vector<int> round0_heads;
  for (int cta = 0; cta < 132; ++cta)
    round0_heads.push_back(plan.order[static_cast<std::size_t>(cta)] % heads);
  std::sort(round0_heads.begin(), round0_heads.end());
  round0_heads.erase(std::unique(round0_heads.begin(), round0_heads.end()), round0_heads.end());
  CHECK(round0_heads.size() == 12);

  // GQA: a section holds whole groups. 32 query heads on 8 K / V heads, hdim 128, S 8192: a
  // K / V head is 4 MB, 3 to a section, i.e. 12 adjacent query heads.
  FmhaProblem gqa = s8192_problem();
  gqa.nhead_q = 32;
  gqa.nhead_k = 8;
  gqa.batch = 2;
  CHECK(kernels::wgmma_sm90a::fwd_l2_section_kv_heads(gqa) == 3);
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(c, gqa, 132).sections == 6);

  // Past 65536 tiles a table is made only where it beats the kernel's static order in the same
  // sections by 1 %: 64 x 32 heads at S 8192 (131072 tiles, about 990 per CTA) run that order,
  // in sections of 3 heads (4 MB each).
  FmhaProblem big = s8192_problem();
  big.batch = 64;
  big.nhead_q = big.nhead_k = 32;
  const auto big_plan = kernels::wgmma_sm90a::fwd_tile_order(c, big, 132);
  CHECK(big_plan.order.empty());
  CHECK(big_plan.sections > 1);
  CHECK(big_plan.static_section_heads == 3);
  CHECK(kernels::wgmma_sm90a::fwd_l2_section_heads(big) == 3);
  CHECK(kernels::wgmma_sm90a::fwd_l2_section_heads(gqa) == 12);
  // Under it, and with one section, the order keeps its default (0: every pair).
  CHECK(plan.static_section_heads == 0);

  // hdim 256 (128 x 80 tiles): a 2 MB head at S 2048, 6 to a section, 64 heads in 11 sections,
  // the last two merged. At S 8192 a head (8 MB) is a section of 64 tiles, fewer than the SMs:
  // the sections' tail (436 blocks against a mean of 414) is past 3 % of the plan over all heads
  // (418), so that plan stays.
  FmhaKernelConfig hd256;
  hd256.family = Family::fwd;
  hd256.dtype = DType::bf16;
  hd256.hdim_q = hd256.hdim_v = 256;
  hd256.arch = "sm_90";
  hd256.mask = MaskKind::causal_top_left;
  hd256 = canonicalize(hd256);
  REQUIRE(hd256.block_n == 80);
  FmhaProblem h256 = s8192_problem();
  h256.hdim_q = h256.hdim_v = 256;
  h256.nhead_q = h256.nhead_k = 8;
  h256.batch = 8;
  h256.seqlen_q = h256.seqlen_k = 2048;
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(hd256, h256, 132).sections == 10);
  h256.batch = 2;
  h256.seqlen_q = h256.seqlen_k = 8192;
  const auto long256 = kernels::wgmma_sm90a::fwd_tile_order(hd256, h256, 132);
  CHECK(long256.sections == 1);
  CHECK(long256.planned_makespan == Approx(418));
  // The same problem plans the same way (the order depends on the problem and the SM count).
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(c, p, 132).order == plan.order);

  // Bottom-right alignment with more keys than queries: every m-block sees 2048 more keys.
  auto br = c;
  br.mask = MaskKind::causal_bottom_right;
  br = canonicalize(br);
  auto longer = p;
  longer.seqlen_k = 4096;
  const auto br_plan = kernels::wgmma_sm90a::fwd_tile_order(br, longer, 132);
  CHECK(br_plan.static_makespan > 0);

  // No table: no mask or a window (the static order, or the split tail), whole rounds of equal
  // tiles, fewer tiles than SMs, no multiprocessor count, the backward.
  auto none = c;
  none.mask = MaskKind::none;
  none = canonicalize(none);
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(none, p, 132).order.empty());
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(c, p, 0).order.empty());
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(c, p, 4096).order.empty());
  auto one_block = p;
  one_block.seqlen_q = one_block.seqlen_k = 128;  // 128 tiles, each one m-block of one key block
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(c, one_block, 64).order.empty());
  auto bwd = c;
  bwd.family = Family::bwd;
  bwd.block_m = bwd.block_n = bwd.num_warps = bwd.num_stages = 0;
  bwd = canonicalize(bwd);
  CHECK(kernels::wgmma_sm90a::fwd_tile_order(bwd, p, 132).order.empty());
}
