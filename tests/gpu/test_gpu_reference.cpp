// The portable reference kernel, built through the whole pipeline (render -> NVRTC -> cache ->
// load), launched on the GPU and compared with the fp64 CPU reference.
#include <catch2/catch.hpp>

#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "gpu/attention_harness.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using test::AttentionCase;

TEST_CASE("gpu reference: every dtype, head dim and mask at odd sizes", "[gpu]") {
  std::uint32_t seed = 1;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (auto [dq, dv] : test::head_dim_pairs()) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                            MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
        const bool window = mask == MaskKind::sliding_window;
        const AttentionCase c{
            dtype, dq, dv, mask, 2, 4, 2, 17, 45, Layout::bhsd, window ? 8 : -1, window ? 3 : -1};
        test::check_forward(c, KernelImpl::reference, seed);
        // The reference backward sums in a fixed order: bit-identical from run to run.
        test::check_backward(c, KernelImpl::reference, true, seed);
        seed += 10;
      }
    }
  }
}

TEST_CASE("gpu reference: seqlen 1, Sq > Sk, GQA 8:1, bshd, no LSE", "[gpu]") {
  const std::vector<AttentionCase> cases = {
      {DType::bf16, 128, 128, MaskKind::none, 1, 8, 1, 1, 1, Layout::bshd},
      // The first 37 query rows see no key: O = 0, LSE = -inf, zero gradients.
      {DType::fp16, 64, 64, MaskKind::causal_bottom_right, 3, 8, 1, 70, 33, Layout::bshd},
      {DType::bf16, 64, 64, MaskKind::sliding_window, 1, 2, 2, 128, 128, Layout::bhsd, 0, 0},
      {DType::bf16, 256, 256, MaskKind::causal_top_left, 1, 2, 1, 300, 300, Layout::bshd},
      {DType::fp16, 96, 96, MaskKind::none, 2, 3, 3, 33, 65, Layout::bhsd, -1, -1, false},
  };
  std::uint32_t seed = 1000;
  for (const auto& c : cases) {
    test::check_forward(c, KernelImpl::reference, seed);
    test::check_backward(c, KernelImpl::reference, true, seed);
    seed += 10;
  }
}

TEST_CASE("gpu reference: problems the kernel cannot run are rejected before launch", "[gpu]") {
  FmhaKernelConfig config = test::small_config(Family::fwd, detect_gpu_arch());
  const auto setup = setup_fmha_dispatcher(config);
  REQUIRE(setup.success);
  auto& fwd = *setup.runner;
  DeviceBuffer buf(1 << 16);
  FwdTensors t{buf.data(), buf.data(), buf.data(), buf.data(), nullptr};
  const AttentionCase c{DType::bf16, 64, 64, MaskKind::none, 1, 2, 2, 16, 16};
  auto expect_rejected = [&](FmhaProblem p, FwdTensors tensors, const char* field) {
    try {
      fwd.run_fwd(p, tensors);
      FAIL("launched an impossible problem: " << field);
    } catch (const FieldError& e) {
      CHECK_THAT(e.field(), Catch::Contains(field));
    }
  };
  auto p = test::problem_of(c);
  p.hdim_q = p.hdim_v = 128;
  expect_rejected(p, t, "hdim_q");
  p = test::problem_of(c);
  p.nhead_k = 3;
  expect_rejected(p, t, "nhead_k");
  p = test::problem_of(c);
  p.seqlen_k = 0;
  expect_rejected(p, t, "seqlen_k");
  p = test::problem_of(c);
  p.window_left = 4;  // a no-mask kernel cannot express a window
  expect_rejected(p, t, "window_left");
  FwdTensors null_q = t;
  null_q.q = nullptr;
  expect_rejected(test::problem_of(c), null_q, "q");
  FwdTensors misaligned = t;
  misaligned.k = static_cast<char*>(buf.data()) + 1;
  expect_rejected(test::problem_of(c), misaligned, "k");
  try {
    fwd.run_bwd(test::problem_of(c), BwdTensors{});
    FAIL("a fwd kernel ran a backward");
  } catch (const FieldError& e) {
    CHECK(e.field() == "family");
  }
}
