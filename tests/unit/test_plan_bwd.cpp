// The backward's launch plan on the host beyond its stages: the dQ workspace, and the Hopper
// kernel's split tail, deterministic chains (heads, order, bounds) and causal sections.
#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "common/fmha_params.h"
#include "common/mask.h"
#include "dispatcher/launch.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/common/key_tiles.hpp"
#include "kernels/registry.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"
#include "plan_test_problems.hpp"

using namespace fmha_jit;
using namespace fmha_jit::plan_test;
using codegen::StageRole;

TEST_CASE("plan: the Hopper backward splits its last partial wave of key tiles", "[plan]") {
  const auto c = bwd_config(false, "sm_90");
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  FmhaProblem p = s8192_problem();
  // 64 key tiles x 32 heads = 2048: 15 whole waves on 132 SMs, then 68 tiles of 128 query tiles
  // each. In 5 parts (340 CTAs, 3 rounds of 26 iterations and a part's cost of 2) the wave takes
  // 84 iterations instead of 128; 3 parts (2 rounds of 45) and 4 (3 rounds of 34) take longer.
  const auto split = kernels::wgmma_sm90a::bwd_split_tail(c, p, 132);
  CHECK(split.first == 1980);
  CHECK(split.tiles == 68);
  CHECK(split.parts == 5);
  const auto stages = kernels::plan_stages(c, p, 132);
  CHECK(stages[1].grid.x == 1980 + 68 * 5);
  CHECK(stages[1].grid.y == 1);
  CHECK(stages[1].grid.z == 1);
  // No partial wave, or no wave before it; no device.
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, p, 128).tiles == 0);
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, p, 4096).tiles == 0);
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, p, 0).tiles == 0);
  CHECK(kernels::plan_stages(c, p, 128)[1].grid.x == 64);
  // Short key tiles save too little: 8 query tiles in 4 parts save 4 iterations of 8.
  FmhaProblem short_p = p;
  short_p.nhead_q = short_p.nhead_k = 20;
  short_p.batch = 1;
  short_p.seqlen_q = 512;
  short_p.seqlen_k = 1024;  // 8 key tiles x 20 heads = 160: 28 in the last wave
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, short_p, 132).tiles == 0);
  short_p.seqlen_q = 1024;  // 16 query tiles: 4 parts of 4 save 10 iterations
  const auto four = kernels::wgmma_sm90a::bwd_split_tail(c, short_p, 132);
  CHECK(four.tiles == 28);
  CHECK(four.parts == 4);
  // The iterations of a key tile count every query head of its group.
  FmhaProblem gqa = short_p;
  gqa.nhead_q = 40;
  gqa.nhead_k = 20;
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, gqa, 132).parts == 4);
  gqa.seqlen_q = 512;  // 2 x 8 iterations, as many as the split case above
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(c, gqa, 132).parts == 4);
  // Deterministic, masked, hdim 256, forward: never.
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(bwd_config(true, "sm_90"), p, 132).tiles == 0);
  auto causal = c;
  causal.mask = MaskKind::causal_top_left;
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(causal, p, 132).tiles == 0);
  FmhaKernelConfig hd256 = c;
  hd256.hdim_q = hd256.hdim_v = 256;
  hd256.block_m = hd256.block_n = hd256.num_warps = hd256.num_stages = 0;
  hd256 = canonicalize(hd256);
  REQUIRE(hd256.impl == KernelImpl::wgmma_sm90a);
  p.hdim_q = p.hdim_v = 256;
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(hd256, p, 132).tiles == 0);
  CHECK(kernels::bwd_workspace_layout(hd256, p).split_bytes == 0);
  p.hdim_q = p.hdim_v = 128;
  FmhaKernelConfig fwd = c;
  fwd.family = Family::fwd;
  fwd.block_m = fwd.block_n = fwd.num_warps = fwd.num_stages = 0;
  fwd = canonicalize(fwd);
  CHECK(kernels::wgmma_sm90a::bwd_split_tail(fwd, p, 132).tiles == 0);
  // The workspace holds the blocks of the most tiles any GPU could split: 144 here, (t - 1) / 2
  // for t key tiles in a small launch; sm_80 kernels have none.
  const auto w = kernels::bwd_workspace_layout(c, p);
  CHECK(w.split_dkdv % 256 == 0);
  CHECK(w.split_counters >= w.split_dkdv + std::size_t(144) * 128 * 256 * 4);
  CHECK(w.split_bytes >= std::size_t(144) * (128 * 256 + 1) * 4);
  CHECK(w.split_bytes < std::size_t(144) * (128 * 256 + 1) * 4 + 512);
  CHECK(bwd_workspace_size(p, c).split_tail == w.split_bytes);
  FmhaProblem small = p;
  small.batch = 1;
  small.nhead_q = small.nhead_k = 1;
  small.seqlen_k = 128 * 11;  // 11 key tiles: at most 5 split
  CHECK(kernels::bwd_workspace_layout(c, small).split_counters ==
        kernels::bwd_workspace_layout(c, small).split_dkdv + 5 * 128 * 256 * 4);
  CHECK(kernels::bwd_workspace_layout(bwd_config(false), p).split_bytes == 0);
  CHECK(kernels::bwd_workspace_layout(bwd_config(true, "sm_90"), p).split_bytes == 0);
}

TEST_CASE("plan: workspace of each dQ mode", "[plan]") {
  const FmhaProblem p = problem();
  const auto atomic = bwd_workspace_size(p, bwd_config(false));
  const auto det = bwd_workspace_size(p, bwd_config(true));
  const std::size_t rows = 3 * 8 * 1000;
  CHECK(atomic.d_rowsum >= rows * 4);
  CHECK(atomic.dq_accum >= rows * 128 * 4);
  CHECK(atomic.semaphores == 0);
  CHECK(det.dq_accum == atomic.dq_accum);
  const std::size_t m_tiles = (1000 + bwd_config(true).block_m - 1) / bwd_config(true).block_m;
  CHECK(det.semaphores >= 3 * 8 * m_tiles * sizeof(int));
  CHECK(det.semaphores < 3 * 8 * m_tiles * sizeof(int) + 256);
  CHECK(det.total == atomic.total + det.semaphores);
  CHECK(det.total == det.d_rowsum + det.dq_accum + det.semaphores);
  // Layout: every buffer 256-byte aligned inside the workspace.
  const auto w = kernels::bwd_workspace_layout(bwd_config(true), p);
  CHECK(w.dq_accum % 256 == 0);
  CHECK(w.semaphores % 256 == 0);
  CHECK(w.semaphores >= w.dq_accum + rows * 128 * 4);

  FmhaKernelConfig reference = bwd_config(false);
  reference.impl = KernelImpl::reference;
  reference.block_m = reference.block_n = reference.num_warps = reference.num_stages = 0;
  const auto r = bwd_workspace_size(p, reference);
  CHECK(r.dq_accum == 0);
  CHECK(r.total == r.d_rowsum);

  FmhaKernelConfig fwd;
  CHECK_THROWS_AS(bwd_workspace_size(p, fwd), FieldError);
}

TEST_CASE("plan: how many heads the deterministic backward interleaves", "[plan]") {
  auto c = bwd_config(true, "sm_90");  // block_n 128
  FmhaProblem p = problem();           // 7 key tiles, 2 kv heads x 3 batches
  // Without a mask: as many (kv head, batch) pairs as fill the SMs chain by chain, at most all.
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 6);
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 28) == 4);
  p.seqlen_k = 128 * 132;  // a chain as long as the GPU is wide
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 1);
  p.seqlen_k = 2048;
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 6);
  // Chains of 32 tiles or more: one pair more than fills the GPU, unless it fills it exactly.
  p.batch = 50;
  p.seqlen_k = 128 * 32;
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 5);  // 132 / 32 = 4.1
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 128) == 4);
  p.seqlen_k = 128 * 31;
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 4);  // 31 tiles: the floor
  p.batch = 3;
  p.seqlen_k = 2048;
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 0) == 1);  // unknown device
  c.mask = MaskKind::causal_top_left;
  CHECK(kernels::wgmma_sm90a::det_group_heads(c, p, 132) == 1);
  CHECK(kernels::wgmma_sm90a::det_group_heads(bwd_config(true), problem(), 132) == 1);  // mma_sm80
}

TEST_CASE("plan: under causal masks the last of at most 16 pairs' chain ascends", "[plan]") {
  auto c = bwd_config(true, "sm_90");
  FmhaProblem p = problem();  // 2 kv heads x 3 batches
  CHECK(kernels::wgmma_sm90a::det_asc_pairs(c, p) == 0);
  for (MaskKind m : {MaskKind::causal_top_left, MaskKind::causal_bottom_right}) {
    c.mask = m;
    CHECK(kernels::wgmma_sm90a::det_asc_pairs(c, p) == 1);
  }
  p.nhead_q = p.nhead_k = 8;
  p.batch = 2;
  CHECK(kernels::wgmma_sm90a::det_asc_pairs(c, p) == 1);
  p.batch = 3;  // 24 pairs: the last one's tail is too small a share to gain from it
  CHECK(kernels::wgmma_sm90a::det_asc_pairs(c, p) == 0);
  p = problem();
  c.mask = MaskKind::sliding_window;
  CHECK(kernels::wgmma_sm90a::det_asc_pairs(c, p) == 0);
  auto sm80 = bwd_config(true);
  sm80.mask = MaskKind::causal_top_left;
  CHECK(kernels::wgmma_sm90a::det_asc_pairs(sm80, p) ==
        0);  // its kernel keeps the decreasing order
}

TEST_CASE("plan: the deterministic Hopper backward's CTA count and key tiles are bounded",
          "[plan]") {
  // 65535 key tiles (16-bit semaphore fields).
  const auto hopper = bwd_config(true, "sm_90");
  FmhaProblem p = problem();
  p.nhead_q = p.nhead_k = p.batch = 1;
  p.seqlen_k = 65535 * hopper.block_n;
  CHECK_NOTHROW(dispatch::check_problem(hopper, p));
  CHECK(kernels::plan_stages(hopper, p)[1].grid.x == 65535);
  p.seqlen_k += 1;
  auto expect_seqlen_k_error = [&](const FmhaKernelConfig& c, const std::string& accepted) {
    try {
      dispatch::check_problem(c, p);
      FAIL("accepted seqlen_k " << p.seqlen_k);
    } catch (const FieldError& e) {
      CHECK(e.field() == "seqlen_k");
      CHECK(e.value() == std::to_string(p.seqlen_k));
      CHECK_THAT(e.accepted(), Catch::Contains(accepted));
    }
  };
  expect_seqlen_k_error(hopper, std::to_string(65535 * hopper.block_n));
  CHECK_NOTHROW(dispatch::check_problem(bwd_config(true, "sm_80"), p));  // int counts there
  CHECK_NOTHROW(dispatch::check_problem(bwd_config(false, "sm_90"), p));
  // The CTAs of one grid dimension.
  p.batch = p.nhead_q = p.nhead_k = 4096;
  p.seqlen_k = 1000 * hopper.block_n;  // 16.7 M pairs x 1000 key tiles
  expect_seqlen_k_error(hopper, "x nhead_k x batch <= 2147483647");
  CHECK_NOTHROW(dispatch::check_problem(bwd_config(false, "sm_90"), p));
  // The atomic one under a causal mask launches one grid dimension too.
  auto causal = bwd_config(false, "sm_90");
  causal.mask = MaskKind::causal_top_left;
  expect_seqlen_k_error(causal, "(the causal backward's CTAs)");
  p.batch = p.nhead_q = p.nhead_k = 1;
  CHECK(kernels::plan_stages(causal, p)[1].grid.x == 1000);
}

TEST_CASE("plan: query tiles per key tile under the backward's masks", "[plan]") {
  // Against the rows: a query tile sees a key tile when some row of it sees some key of it.
  for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left, MaskKind::causal_bottom_right}) {
    for (auto [sq, sk] : std::vector<std::pair<int, int>>{{1000, 777}, {777, 1000}, {256, 256}}) {
      auto c = bwd_config(false, "sm_90");  // block_m 64, block_n 128
      c.mask = mask;
      FmhaProblem p = problem();
      p.seqlen_q = sq;
      p.seqlen_k = sk;
      const auto tiles = kernels::bwd_key_tile_query_tiles(c, p);
      REQUIRE(static_cast<std::int64_t>(tiles.size()) == kernels::key_tiles(c, p));
      for (std::size_t n = 0; n < tiles.size(); ++n) {
        std::int64_t expected = 0;
        for (int m = 0; m * c.block_m < sq; ++m) {
          bool seen = false;
          for (int i = m * c.block_m; i < std::min(sq, (m + 1) * c.block_m); ++i) {
            const FmhaKeyRange r = fmha_visible_keys(static_cast<int>(mask), i, sq, sk, -1, -1);
            const int key_lo = static_cast<int>(n) * c.block_n;
            seen = seen || (r.lo < std::min(sk, key_lo + c.block_n) && r.hi > key_lo);
          }
          expected += seen ? 1 : 0;
        }
        INFO("mask " << to_string(mask) << " Sq " << sq << " Sk " << sk << " key tile " << n);
        CHECK(tiles[n] == expected);
      }
    }
  }
}

TEST_CASE("plan: the atomic causal backward's sections", "[plan]") {
  auto c = bwd_config(false, "sm_90");
  c.mask = MaskKind::causal_top_left;
  // GQA 32:8 S 8192, 2 batches: 16 pairs of 64 key tiles on 132 SMs. One pair after another
  // starts the last pair's key tile 0 (512 iterations, a quarter of an SM's share) after every
  // other pair's work (77 % into the launch in a trace); sections of two pairs model 10 %
  // shorter.
  FmhaProblem p = s8192_problem();
  p.nhead_q = 32;
  p.nhead_k = 8;
  auto gqa = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(gqa.section_pairs == 2);
  CHECK(gqa.makespan < 0.92 * gqa.one_pair_makespan);
  // hdim 128 S 8192, 2 x 16 heads: 32 pairs.
  auto mha = kernels::wgmma_sm90a::bwd_causal_sections(c, s8192_problem(), 132);
  CHECK(mha.section_pairs == 2);
  CHECK(mha.makespan < 0.96 * mha.one_pair_makespan);
  // S 16384, 1 x 16 heads: 16 pairs of 128 key tiles, every SM's share is 15 of them, and the
  // order barely matters: one pair per section stays.
  p = s8192_problem();
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 16384;
  CHECK(kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132).section_pairs == 1);
  // S 2048, 8 x 16 heads: 128 pairs of 16 key tiles, a pair's chain an eighth of the SMs; the
  // sections grow to the 8 pairs that run together in the 3-D order, no further.
  p = s8192_problem();
  p.batch = 8;
  p.seqlen_q = p.seqlen_k = 2048;
  CHECK(kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132).section_pairs == 8);
  // hdim 256 S 512, 32 x 8 heads: the model's gain (3.7 % at 16 pairs) is under the 4 % a
  // section must model; one pair per section.
  FmhaKernelConfig hd256;
  hd256.family = Family::bwd;
  hd256.hdim_q = hd256.hdim_v = 256;
  hd256.arch = "sm_90";
  hd256.mask = MaskKind::causal_top_left;
  hd256 = canonicalize(hd256);
  p.batch = 32;
  p.nhead_q = p.nhead_k = 8;
  p.hdim_q = p.hdim_v = 256;
  p.seqlen_q = p.seqlen_k = 512;
  const auto short_rows = kernels::wgmma_sm90a::bwd_causal_sections(hd256, p, 132);
  CHECK(short_rows.section_pairs == 1);
  CHECK(short_rows.makespan == short_rows.one_pair_makespan);
  // Not modelled: one pair per section.
  for (const auto& other : {bwd_config(false, "sm_90"), bwd_config(false, "sm_80")}) {
    auto masked = other;
    masked.mask = other.arch == "sm_80" ? MaskKind::causal_top_left : MaskKind::none;
    const auto plan = kernels::wgmma_sm90a::bwd_causal_sections(masked, s8192_problem(), 132);
    CHECK(plan.section_pairs == 1);
    CHECK(plan.makespan == 0);
  }
  CHECK(kernels::wgmma_sm90a::bwd_causal_sections(c, s8192_problem(), 0).section_pairs == 1);
}

TEST_CASE("plan: the deterministic causal backward's sections do not depend on the GPU", "[plan]") {
  auto c = bwd_config(true, "sm_90");
  c.mask = MaskKind::causal_top_left;
  // hdim 128 S 8192, 2 x 16 heads, 32 pairs: sections of 2, the last one ascending, on any SM
  // count (which pairs ascend fixes the order of the dQ additions).
  FmhaProblem p = s8192_problem();
  for (int sms : {132, 114, 78, 0}) {
    INFO(sms << " SMs");
    const auto plan = kernels::wgmma_sm90a::bwd_causal_sections(c, p, sms);
    CHECK(plan.section_pairs == 2);
    CHECK(plan.asc_pairs == 2);
    CHECK(!plan.alternate);
    CHECK(plan.makespan < 0.95 * plan.one_pair_makespan);
  }
  // 3 x 5 pairs of 16 key tiles: sections of 8, the last of 7 pairs, all 7 ascending.
  p.batch = 3;
  p.nhead_q = p.nhead_k = 5;
  p.seqlen_q = p.seqlen_k = 2048;
  const auto partial = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(partial.section_pairs == 8);
  CHECK(partial.asc_pairs == 7);
  // Where the chains walk (GQA: det_up_cells), one pair per section but a last one of the tail
  // pairs, ascending: GQA 32:8 S 8192 (16 pairs of 64 key tiles, 2 run together) a tail of 2,
  // S 2048 (64 pairs of 16, 8 together) a tail of 8.
  p = s8192_problem();
  p.nhead_q = 32;
  p.nhead_k = 8;
  REQUIRE(kernels::wgmma_sm90a::det_up_cells(c, p) > 0);
  const auto walked = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(walked.section_pairs == 1);
  CHECK(walked.tail_pairs == 2);
  CHECK(walked.asc_pairs == 2);
  CHECK(walked.alternate);  // the lead pairs' chains alternate direction (det_alternate)
  // Two pairs share the SMs: the ascending pairs keep their order.
  CHECK(walked.asc_walk_up == 0);
  CHECK(walked.makespan < 0.95 * walked.one_pair_makespan);
  p.batch = 8;
  p.seqlen_q = p.seqlen_k = 2048;
  const auto short_walk = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(short_walk.section_pairs == 1);
  CHECK(short_walk.tail_pairs == 8);
  CHECK(short_walk.asc_pairs == 8);
  CHECK(short_walk.alternate);
  CHECK(short_walk.asc_walk_up == 0);  // 16 key tiles start together: no spacing to walk in
  // GQA 32:8 S 16384, one batch: no tail (the model's end is within 4 %), alternating.
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 16384;
  const auto long_walk = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(long_walk.tail_pairs == 0);
  CHECK(long_walk.alternate);
  CHECK(long_walk.asc_walk_up == 5);  // 8 x 128 / 132 = 7 visits apart, 7 - 2 cells first
  CHECK(long_walk.asc_walk_from == 2);
  CHECK(kernels::wgmma_sm90a::det_up_cells(c, p) == 2);
  // hdim 256 chains longer than the reference SMs all ascend, one pair per section (a tail of
  // one), and none walks: GQA 8:2 S 16384 (256 tiles of 64 keys); S 8192 (128 tiles) keeps the
  // alternating walk.
  {
    FmhaKernelConfig wide = c;
    wide.hdim_q = wide.hdim_v = 256;
    wide.block_m = wide.block_n = 0;
    wide = canonicalize(wide);
    FmhaProblem q = p;
    q.hdim_q = q.hdim_v = 256;
    q.nhead_q = 8;
    q.nhead_k = 2;
    const auto ascending = kernels::wgmma_sm90a::bwd_causal_sections(wide, q, 132);
    CHECK(ascending.tail_pairs == 1);
    CHECK(ascending.asc_pairs == 2);
    CHECK_FALSE(ascending.alternate);
    CHECK(ascending.asc_walk_up == 0);
    q.seqlen_q = q.seqlen_k = 8192;
    const auto shorter = kernels::wgmma_sm90a::bwd_causal_sections(wide, q, 132);
    CHECK(shorter.alternate);
    CHECK(shorter.asc_walk_up == 1);  // 4 x 128 / 132 = 3 visits apart, 3 - 2 first
  }
  // The gpu test's ascending chains (test_gpu_backward_sm90a.cpp): GQA 4:1, 8 batches, S 8704.
  // hdim 128, 68 key tiles of 128: the odd pairs after the first wave walk, and the tail leaves
  // pairs 3 and 5 lead pairs. hdim 256, 136 key tiles of 64: every pair ascends.
  for (int hdim : {128, 256}) {
    FmhaKernelConfig det = c;
    det.hdim_q = det.hdim_v = hdim;
    det.block_m = det.block_n = 0;
    det = canonicalize(det);
    FmhaProblem gpu_case = s8192_problem();
    gpu_case.batch = 8;
    gpu_case.nhead_q = 4;
    gpu_case.nhead_k = 1;
    gpu_case.seqlen_q = gpu_case.seqlen_k = 8704;
    gpu_case.hdim_q = gpu_case.hdim_v = hdim;
    const auto plan = kernels::wgmma_sm90a::bwd_causal_sections(det, gpu_case, 132);
    INFO("hdim " << hdim);
    if (hdim == 256) {
      // 136 key tiles, more than the reference SMs: all 8 pairs ascend, one per section.
      CHECK_FALSE(plan.alternate);
      CHECK(plan.tail_pairs == 1);
      CHECK(plan.asc_pairs == 8);
      continue;
    }
    CHECK(plan.alternate);
    CHECK(plan.asc_walk_up == 2);  // 8 cells x 68 / 132 = 4 visits apart, 4 - 2 first
    CHECK(plan.asc_walk_from == 2);
    CHECK(plan.tail_pairs <= 2);
  }
  // Where the model gains under 4 %, one pair per section, the last of at most 16 pairs
  // ascending (det_asc_pairs): S 16384, 8 x 8 heads (8 pairs of 128 key tiles).
  p.batch = 1;
  p.nhead_q = p.nhead_k = 8;
  p.seqlen_q = p.seqlen_k = 16384;
  const auto one = kernels::wgmma_sm90a::bwd_causal_sections(c, p, 132);
  CHECK(one.section_pairs == 1);
  CHECK(one.asc_pairs == kernels::wgmma_sm90a::det_asc_pairs(c, p));
  CHECK(one.asc_pairs == 1);
  CHECK(one.tail_pairs == 0);
  CHECK(!one.alternate);  // MHA chains do not walk
}
