// The Hopper backward (impl wgmma_sm90a) on the GPU, judged run by run by the accuracy rule
// against the CPU references, in both dQ modes: every dtype, head dim and mask at odd sizes
// (partial key and query tiles, zero-filled TMA boxes, dQ reduce-adds clipped at seqlen_q), GQA,
// bshd, padded and transposed strides through the tensor maps, the deterministic mode bit-exact
// over 10 runs, and what `auto` picks on this GPU.
// Part of fmha_jit_gpu_sm90_tests, whose main skips every case on a GPU other than sm_90
// (tests/support/gpu_gate.hpp).
#include <catch2/catch.hpp>

#include <cstdio>

#include "fmha_jit/dispatcher.hpp"
#include "gpu/attention_harness.hpp"
#include "kernels/registry.hpp"
#include "kernels/resolve.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using test::AttentionCase;

TEST_CASE("gpu sm90a bwd: every dtype, head dim and mask at odd sizes, both dQ modes", "[gpu]") {
  std::uint32_t seed = 40000;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::bwd)) {
      for (MaskKind mask : test::kAllMasks) {
        const bool window = mask == MaskKind::sliding_window;
        for (auto [sq, sk] : std::vector<std::pair<int, int>>{{17, 45}, {130, 77}, {300, 260}}) {
          for (bool det : {false, true}) {
            const AttentionCase c{
                dtype,          hdim, hdim, mask, 2, 4, 2, sq, sk, Layout::bhsd, window ? 20 : -1,
                window ? 7 : -1};
            test::check_backward(c, KernelImpl::wgmma_sm90a, det, seed++);
          }
        }
      }
    }
  }
}

TEST_CASE("gpu sm90a bwd: seqlen 1 and 1000, GQA 8:1, bshd, batch 1-3", "[gpu]") {
  std::uint32_t seed = 45000;
  for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::bwd)) {
    for (MaskKind mask : test::kAllMasks) {
      const bool window = mask == MaskKind::sliding_window;
      for (bool det : {false, true}) {
        test::check_backward({DType::bf16, hdim, hdim, mask, 1, 8, 1, 1, 1, Layout::bshd},
                             KernelImpl::wgmma_sm90a, det, seed++);
        test::check_backward({DType::fp16, hdim, hdim, mask, 3, 8, 1, 1000, 999, Layout::bshd,
                              window ? 100 : -1, window ? 0 : -1},
                             KernelImpl::wgmma_sm90a, det, seed++);
      }
    }
  }
}

TEST_CASE("gpu sm90a bwd: deterministic mode is bit-exact over 10 runs at seqlen 4097", "[gpu]") {
  std::uint32_t seed = 48000;
  for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::bwd)) {
    for (MaskKind mask : {MaskKind::none, MaskKind::causal_bottom_right}) {
      const AttentionCase c{DType::bf16, hdim, hdim, mask, 1, 8, 2, 4097, 4097, Layout::bshd};
      const auto r = test::check_backward(c, KernelImpl::wgmma_sm90a, true, seed++, 10);
      std::printf("sm90a bwd %s deterministic: %d runs, bit-exact %s\n", test::describe(c).c_str(),
                  r.runs, r.bit_exact ? "yes" : "no");
    }
    // GQA under a causal mask: the decreasing chains take the up-down walk (det_up_cells,
    // FmhaBwdSm90aWork), the last pair ascends; 2 x 3 pairs, a partial last key tile.
    const AttentionCase gqa{DType::bf16, hdim, hdim,        MaskKind::causal_top_left, 2, 12, 3,
                            3001,        3001, Layout::bshd};
    FmhaKernelConfig det = test::canonical_config_of(gqa, Family::bwd);
    det.deterministic = true;
    REQUIRE(kernels::wgmma_sm90a::det_up_cells(det, test::problem_of(gqa)) > 0);
    const auto rg = test::check_backward(gqa, KernelImpl::wgmma_sm90a, true, seed++, 3);
    std::printf("sm90a bwd %s deterministic (up-down walk): %d runs, bit-exact %s\n",
                test::describe(gqa).c_str(), rg.runs, rg.bit_exact ? "yes" : "no");
    // GQA 4:1 causal, 8 pairs of 68 (hdim 64 / 128) key tiles: the pairs' chains alternate
    // direction and, at hdim 128, the ascending ones after the first wave walk too
    // (det_asc_walk_up; test_plan.cpp checks the plan); hdim 64's 68 tiles of 128 keys start
    // too close together for it. hdim 256 (136 key tiles, more than the reference SMs): all
    // pairs ascend, one per section (bwd_causal_sections).
    const AttentionCase asc{DType::bf16, hdim, hdim,        MaskKind::causal_top_left, 8, 4, 1,
                            8704,        8704, Layout::bshd};
    FmhaKernelConfig asc_det = test::canonical_config_of(asc, Family::bwd);
    asc_det.deterministic = true;
    const auto asc_plan =
        kernels::wgmma_sm90a::bwd_causal_sections(asc_det, test::problem_of(asc), 132);
    if (hdim == 256) {
      REQUIRE(asc_plan.tail_pairs == 1);
      REQUIRE(asc_plan.asc_pairs == 8);
    } else {
      REQUIRE(asc_plan.alternate);
      REQUIRE((hdim == 64 || asc_plan.asc_walk_up > 0));
    }
    const auto ra = test::check_backward(asc, KernelImpl::wgmma_sm90a, true, seed++, 2);
    std::printf("sm90a bwd %s deterministic (%s): %d runs, bit-exact %s\n",
                test::describe(asc).c_str(),
                hdim == 256 ? "ascending chains" : "alternating chains", ra.runs,
                ra.bit_exact ? "yes" : "no");
    // 10 (kv head, batch) pairs of 20 (hdim 64 / 128) or 40 (hdim 256) key tiles: launched in
    // groups of 6 + 4 or 3 + 3 + 3 + 1 pairs on 132 SMs (det_group_heads, a partial last group).
    const AttentionCase c{DType::fp16, hdim, hdim, MaskKind::none, 2,
                          10,          5,    2500, 2500,           Layout::bhsd};
    const auto r = test::check_backward(c, KernelImpl::wgmma_sm90a, true, seed++, 3);
    std::printf("sm90a bwd %s deterministic: %d runs, bit-exact %s\n", test::describe(c).c_str(),
                r.runs, r.bit_exact ? "yes" : "no");
  }
}

TEST_CASE("gpu sm90a bwd: the split last wave of key tiles matches the reference", "[gpu]") {
  // Unmasked atomic-mode problems whose key tiles leave a partial last wave run those tiles as
  // parts that add dK / dV into the workspace (templates/bwd/fmha_bwd_sm90a_split.h). Each case
  // asserts that it does split here; every case runs three times, so a launch that found the
  // previous one's counters or sums would differ from the first.
  const int sms = gpu_multiprocessor_count();
  std::uint32_t seed = 49000;
  const auto check = [&](const AttentionCase& a) {
    INFO(test::describe(a));
    const auto split = kernels::wgmma_sm90a::bwd_split_tail(
        test::canonical_config_of(a, Family::bwd), test::problem_of(a), sms);
    REQUIRE(split.tiles > 0);
    // Every run is judged against the references inside; the run-to-run differences of dK / dV
    // (parts added in any order) are reported.
    const auto r = test::check_backward(a, KernelImpl::wgmma_sm90a, false, seed++, 3);
    std::printf("sm90a bwd %s: %d tiles split in %d parts, run-to-run |ddK| %g |ddV| %g\n",
                test::describe(a).c_str(), split.tiles, split.parts, r.max_diff[1], r.max_diff[2]);
  };
  // 5 kv heads x 32 key tiles (4001 keys: the split tiles include the partial last one) = 160;
  // 2 query heads each (bshd), 1100 queries (a partial query tile).
  check({DType::bf16, 128, 128, MaskKind::none, 1, 10, 5, 1100, 4001, Layout::bshd});
  // hdim 64 (128-row query tiles), GQA 3:1.
  check({DType::bf16, 64, 64, MaskKind::none, 1, 15, 5, 1100, 4001, Layout::bshd});
  // fp16, 2 batches x 3 heads x 24 key tiles = 144: 12 tiles in 11 parts of 4 or 5 query tiles.
  check({DType::fp16, 128, 128, MaskKind::none, 2, 3, 3, 3000, 3000, Layout::bhsd});
}

TEST_CASE("gpu sm90a bwd: causal launches in sections of several pairs match the reference",
          "[gpu]") {
  // The atomic mode under causal masks launches its key tiles in sections of pairs, largest key
  // tile first (fmha_bwd_key_tile_cta, bwd_causal_sections). Each case asserts that the model
  // picks sections of two pairs or more here.
  const int sms = gpu_multiprocessor_count();
  std::uint32_t seed = 50000;
  const auto check = [&](const AttentionCase& a) {
    INFO(test::describe(a));
    const auto sections = kernels::wgmma_sm90a::bwd_causal_sections(
        test::canonical_config_of(a, Family::bwd), test::problem_of(a), sms);
    REQUIRE(sections.section_pairs >= 2);
    // Twice, each run judged against the references inside (the runs may differ only by the
    // order of the atomic additions).
    const auto r = test::check_backward(a, KernelImpl::wgmma_sm90a, false, seed++, 2);
    std::printf("sm90a bwd %s: sections of %d pairs, run-to-run |ddQ| %g |ddK| %g |ddV| %g\n",
                test::describe(a).c_str(), sections.section_pairs, r.max_diff[0], r.max_diff[1],
                r.max_diff[2]);
  };
  // hdim 256 (64-key tiles), bottom-right, 1500 queries and 1900 keys: 2 x 4 pairs of 30 tiles
  // (sections of 4 on 132 SMs).
  check({DType::bf16, 256, 256, MaskKind::causal_bottom_right, 2, 4, 4, 1500, 1900, Layout::bhsd});
  // hdim 128, GQA 2:1, 2 x 5 pairs of 24 key tiles, the last one partial (sections of 2).
  check({DType::fp16, 128, 128, MaskKind::causal_top_left, 2, 10, 5, 3000, 3000, Layout::bshd});
  // hdim 64 (128-row query tiles), GQA 2:1, 5 x 3 pairs (sections of 4, the last of 3).
  check({DType::bf16, 64, 64, MaskKind::causal_top_left, 5, 6, 3, 3000, 3000, Layout::bhsd});
}

TEST_CASE("gpu sm90a bwd: padded and transposed strides under causal masks, hdim 64 and 128",
          "[gpu]") {
  // The tensor maps (Q, K, V, dO) and the dQ / dK / dV stores take the strides as given: padded
  // rows or heads that must stay untouched, and bhsd data described as a bshd problem's strides.
  std::uint32_t seed = 52000;
  for (const AttentionCase& c : test::strided_cases()) {
    for (bool det : {false, true}) test::check_backward(c, KernelImpl::wgmma_sm90a, det, seed++);
  }
}

TEST_CASE("gpu sm90a bwd: auto picks wgmma_sm90a on this GPU and falls back where it must",
          "[gpu]") {
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.arch = detect_gpu_arch();
  c.hdim_q = c.hdim_v = 128;
  for (bool det : {false, true}) {
    c.deterministic = det;
    const auto r = setup_fmha_dispatcher(c);
    REQUIRE(r.success);
    CHECK(r.config.impl == KernelImpl::wgmma_sm90a);
  }
  c.hdim_q = c.hdim_v = 256;  // both warpgroups on one 64-key tile (fmha_bwd_sm90a_hd256.h)
  auto r = setup_fmha_dispatcher(c);
  REQUIRE(r.success);
  CHECK(r.config.impl == KernelImpl::wgmma_sm90a);
  CHECK(r.config.block_n == 64);
  c.hdim_q = c.hdim_v = 96;
  r = setup_fmha_dispatcher(c);
  REQUIRE(r.success);
  CHECK(r.config.impl == KernelImpl::mma_sm80);
  CHECK_FALSE(kernels::impl_fallback_reason(c).empty());
}
