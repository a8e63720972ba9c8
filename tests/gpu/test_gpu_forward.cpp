// The tensor-core forward (impl mma_sm80) on the GPU, judged by the accuracy rule against the CPU
// references, for every variant at odd sizes, padded and transposed strides; outputs are
// NaN-filled before each run and must be fully written. A fault applied to a real kernel's output
// must fail.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fmha_jit/dispatcher.hpp"
#include "gpu/attention_harness.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using test::AttentionCase;

TEST_CASE("gpu fwd: every dtype, head dim and mask at odd sizes", "[gpu]") {
  std::uint32_t seed = 1;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (auto [hq, hv] : test::head_dim_pairs()) {
      for (MaskKind mask : test::kAllMasks) {
        const bool window = mask == MaskKind::sliding_window;
        // Sq != Sk so the bottom-right masks differ from the top-left one.
        for (auto [sq, sk] : std::vector<std::pair<int, int>>{{17, 45}, {128, 128}, {130, 77}}) {
          const AttentionCase c{
              dtype,          hq, hv, mask, 2, 4, 2, sq, sk, Layout::bhsd, window ? 20 : -1,
              window ? 7 : -1};
          test::check_forward(c, KernelImpl::mma_sm80, seed++);
        }
      }
    }
  }
}

TEST_CASE("gpu fwd: seqlen 1 and 1000, GQA 8:1, bshd, batch 1-3, no LSE", "[gpu]") {
  std::uint32_t seed = 5000;
  for (auto [hq, hv] : test::head_dim_pairs()) {
    for (MaskKind mask : test::kAllMasks) {
      const bool window = mask == MaskKind::sliding_window;
      test::check_forward({DType::bf16, hq, hv, mask, 1, 8, 1, 1, 1, Layout::bshd},
                          KernelImpl::mma_sm80, seed++);
      test::check_forward({DType::fp16, hq, hv, mask, 3, 8, 1, 1000, 999, Layout::bshd,
                           window ? 100 : -1, window ? 0 : -1},
                          KernelImpl::mma_sm80, seed++);
      test::check_forward({DType::bf16, hq, hv, mask, 2, 2, 2, 65, 300, Layout::bhsd,
                           window ? 5 : -1, window ? 200 : -1, false},
                          KernelImpl::mma_sm80, seed++);
    }
  }
}

TEST_CASE("gpu fwd: seqlen 4097 against the GPU reference kernel", "[gpu]") {
  // (The name is historical: these long cases are judged on sampled slices against the CPU
  // references, like every other case.)
  std::uint32_t seed = 9000;
  for (auto [hq, hv] :
       std::vector<std::pair<int, int>>{{64, 64}, {128, 128}, {256, 256}, {192, 128}}) {
    for (MaskKind mask : test::kAllMasks) {
      const bool window = mask == MaskKind::sliding_window;
      test::check_forward({DType::bf16, hq, hv, mask, 1, 4, 2, 4097, 4097, Layout::bshd,
                           window ? 1000 : -1, window ? 1000 : -1},
                          KernelImpl::mma_sm80, seed++);
    }
  }
  test::check_forward({DType::fp16, 128, 128, MaskKind::causal_bottom_right, 2, 8, 1, 1000, 4097},
                      KernelImpl::mma_sm80, seed++);
}

TEST_CASE("gpu fwd: the tiles of sm_80 and the 99 KB archs, run on this GPU", "[gpu]") {
  struct Tile {
    int hq, hv, bm, bn, warps, stages;
  };
  // sm_80 hdim 128 (1 stage), the 99 KB fallbacks (hdim 192 and 256), 3 stages, 128-key tiles.
  const std::vector<Tile> tiles = {{128, 128, 128, 64, 4, 1}, {192, 192, 128, 64, 8, 1},
                                   {192, 128, 128, 64, 8, 1}, {256, 256, 64, 64, 4, 1},
                                   {96, 96, 64, 64, 4, 1},    {64, 64, 128, 64, 4, 3},
                                   {32, 32, 128, 128, 4, 2}};
  std::uint32_t seed = 12000;
  for (const auto& t : tiles) {
    for (MaskKind mask : test::kAllMasks) {
      AttentionCase c{DType::bf16, t.hq, t.hv, mask, 2, 4, 2, 200, 333, Layout::bshd};
      if (mask == MaskKind::sliding_window) c.window_left = 50, c.window_right = 10;
      c.block_m = t.bm;
      c.block_n = t.bn;
      c.num_warps = t.warps;
      c.num_stages = t.stages;
      test::check_forward(c, KernelImpl::mma_sm80, seed++);
    }
  }
}

TEST_CASE("gpu fwd: padded and transposed strides under causal masks, hdim 64 and 128", "[gpu]") {
  std::uint32_t seed = 14000;
  for (const AttentionCase& c : test::strided_cases()) {
    test::check_forward(c, KernelImpl::mma_sm80, seed++);
  }
}

TEST_CASE("gpu fwd: a query tile computed without the mask fails the accuracy rule", "[gpu]") {
  // A real causal forward whose O rows 64-127 of the last (batch, head), a slice every check
  // judges, are replaced on the device by the unmasked kernel's rows: "the mask dropped on one
  // tile". The check must fail, on O alone.
  std::vector<KernelImpl> impls = {KernelImpl::mma_sm80};
  if (detect_gpu_arch() == "sm_90") impls.push_back(KernelImpl::wgmma_sm90a);
  for (KernelImpl impl : impls) {
    const AttentionCase c{DType::bf16, 128,  128,         MaskKind::causal_top_left, 2, 4, 2,
                          1000,        1000, Layout::bshd};
    AttentionCase unmasked = c;
    unmasked.mask = MaskKind::none;
    const test::TensorGeometry go = test::geometry(c, test::Operand::o);
    const auto drop_mask = [&](test::ForwardRun& run) {
      const test::ForwardBuffers plain = test::run_forward(unmasked, run.impl, run.q, run.k, run.v);
      std::vector<std::uint16_t> bits = test::download_bits(run.out.o, go.storage());
      const std::vector<std::uint16_t> plain_bits = test::download_bits(plain.o, go.storage());
      for (int row = 64; row < 128; ++row) {
        const auto at = go.offset(c.batch - 1, c.nhead_q - 1, row);
        std::copy_n(plain_bits.begin() + at, go.hdim, bits.begin() + at);
      }
      test::upload_bits(run.out.o, bits);
    };
    const test::CheckResult r = test::verify_forward(c, impl, 61000, drop_mask);
    INFO(to_string(impl) << "\n" << r.report);
    CHECK_FALSE(r.pass);
    CHECK(r.failed == std::vector<std::string>{"O"});
  }
}

TEST_CASE("gpu fwd: automatic impl picks a tensor-core kernel", "[gpu]") {
  FmhaKernelConfig c;
  c.arch = detect_gpu_arch();
  const auto r = setup_fmha_dispatcher(c);
  REQUIRE(r.success);
  // Hopper gets its own kernels (test_gpu_forward_sm90a.cpp); other NVIDIA GPUs the sm_80 ones.
  CHECK(r.config.impl == (c.arch == "sm_90" ? KernelImpl::wgmma_sm90a : KernelImpl::mma_sm80));
}
