// Packed variable-length problems and the score modifiers on the host: the problem's layout and
// validation (cu_seqlens entries named when wrong), the agreement a config and a problem must have,
// what reaches the kernel parameters, the backward's workspace and stages, and which families
// serve the new axes. No GPU: placeholder pointers that nothing dereferences.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/fmha_params.h"
#include "dispatcher/launch.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"
#include "kernels/resolve.hpp"
#include "support/field_error.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using test::field_error;

namespace {

// Distinct, aligned addresses that only their presence matters for.
const std::int32_t* device_ints(std::uintptr_t at) {
  return reinterpret_cast<const std::int32_t*>(at);
}

// Three sequences of 5, 0 and 9 queries and 7, 3 and 9 keys, 4 query heads over 2 kv heads.
const std::vector<std::int32_t> kCuQ = {0, 5, 5, 14};
const std::vector<std::int32_t> kCuK = {0, 7, 10, 19};

FmhaProblem packed_problem(Layout layout = Layout::bshd) {
  FmhaProblem p;
  p.layout = layout;
  p.batch = 3;
  p.nhead_q = 4;
  p.nhead_k = 2;
  p.seqlen_q = 9;
  p.seqlen_k = 9;
  p.hdim_q = p.hdim_v = 64;
  p.cu_seqlens_q = device_ints(0x10000);
  p.cu_seqlens_k = device_ints(0x20000);
  p.total_q = 14;
  p.total_k = 19;
  return p;
}

FmhaKernelConfig tensor_core_config(Family family, bool varlen, bool sinks, bool softcap) {
  FmhaKernelConfig c;
  c.family = family;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 64;
  c.arch = "sm_90";
  c.varlen = varlen;
  c.sinks = sinks;
  c.softcap = softcap;
  return canonicalize(c);
}

FwdTensors fwd_tensors(bool sinks) {
  FwdTensors t = test::placeholder_fwd_tensors();
  if (sinks) t.sinks = reinterpret_cast<const float*>(0x30000);
  return t;
}

BwdTensors bwd_tensors(bool sinks) {
  BwdTensors t = test::placeholder_bwd_tensors();
  if (sinks) {
    t.sinks = reinterpret_cast<const float*>(0x30000);
    t.d_sinks = reinterpret_cast<float*>(0x40000);
  }
  return t;
}

}  // namespace

TEST_CASE("packed problems: one sequence of all tokens, batch strides unused, LSE [Hq, total]",
          "[problem]") {
  const FmhaProblem bshd = packed_problem(Layout::bshd);
  CHECK(bshd.varlen());
  CHECK(bshd.q_stride() == TensorStrides{0, 64, 4 * 64});
  CHECK(bshd.k_stride() == TensorStrides{0, 64, 2 * 64});
  // bhsd: each head is the whole packed run of tokens, not max_seqlen rows.
  const FmhaProblem bhsd = packed_problem(Layout::bhsd);
  CHECK(bhsd.q_stride() == TensorStrides{0, 14 * 64, 64});
  CHECK(bhsd.v_stride() == TensorStrides{0, 19 * 64, 64});
  CHECK(bshd.lse_shape() == std::array<std::int64_t, 3>{1, 4, 14});
  CHECK(bshd.q_elements() == 14 * 4 * 64);
  CHECK(bshd.k_elements() == 19 * 2 * 64);
  CHECK(bshd.lse_elements() == 4 * 14);
  CHECK_NOTHROW(bshd.validate());
}

TEST_CASE("packed problems: host cu_seqlens are checked entry by entry", "[problem]") {
  FmhaProblem p = packed_problem();
  p.cu_seqlens_q_host = kCuQ.data();
  p.cu_seqlens_k_host = kCuK.data();
  CHECK_NOTHROW(p.validate());

  struct Bad {
    std::vector<std::int32_t> cu;
    std::string field, value, accepted;
  };
  const std::vector<Bad> bad = {
      {{1, 5, 5, 14}, "cu_seqlens_q[0]", "1", "0"},
      {{0, 5, 4, 14}, "cu_seqlens_q[2]", "4", "never decrease"},
      {{0, 5, 5, 15}, "cu_seqlens_q[3]", "15", "longer than the max seqlen 9"},
      {{0, 5, 5, 13}, "cu_seqlens_q[3]", "13", "the token count"},
  };
  for (const Bad& b : bad) {
    INFO(b.field << " " << b.value);
    FmhaProblem q = p;
    q.cu_seqlens_q_host = b.cu.data();
    const FieldError e = field_error([&] { q.validate(); });
    CHECK(e.code() == ErrorCode::invalid_problem);
    CHECK(e.field() == b.field);
    CHECK(e.value() == b.value);
    CHECK_THAT(e.accepted(), Catch::Contains(b.accepted));
  }
  // The keys' array is checked the same way, against total_k and seqlen_k.
  const std::vector<std::int32_t> short_k = {0, 7, 10, 18};
  p.cu_seqlens_k_host = short_k.data();
  CHECK(field_error([&] { p.validate(); }).field() == "cu_seqlens_k[3]");
}

TEST_CASE("packed problems: varlen fields given in part, bad totals and softcaps are refused",
          "[problem]") {
  FmhaProblem p = packed_problem();
  p.cu_seqlens_k = nullptr;
  CHECK(field_error([&] { p.validate(); }).field() == "cu_seqlens_k");
  p = packed_problem();
  p.total_q = -1;
  CHECK(field_error([&] { p.validate(); }).field() == "total_q");
  // Totals on a dense problem describe a packed one that is not there.
  FmhaProblem dense = test::sized_problem(2, 4, 2, 16, 24, 64);
  dense.total_k = 40;
  CHECK(field_error([&] { dense.validate(); }).field() == "total_k");
  for (float cap :
       {-1.f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    FmhaProblem s = test::sized_problem(2, 4, 2, 16, 24, 64);
    s.softcap = cap;
    const FieldError e = field_error([&] { s.validate(); });
    CHECK(e.field() == "softcap");
    CHECK_THAT(e.accepted(), Catch::Contains("finite positive"));
  }
}

TEST_CASE("packed problems: the config and the problem must agree on varlen and softcap",
          "[launch]") {
  const FmhaProblem packed = packed_problem();
  const FmhaProblem dense = test::sized_problem(2, 4, 2, 16, 24, 64);
  CHECK_NOTHROW(
      dispatch::check_problem(tensor_core_config(Family::fwd, true, false, false), packed));
  FieldError e = field_error([&] {
    dispatch::check_problem(tensor_core_config(Family::fwd, false, false, false), packed);
  });
  CHECK(e.field() == "cu_seqlens_q");
  CHECK_THAT(e.accepted(), Catch::Contains("varlen = false"));
  e = field_error(
      [&] { dispatch::check_problem(tensor_core_config(Family::fwd, true, false, false), dense); });
  CHECK(e.field() == "cu_seqlens_q");
  CHECK_THAT(e.accepted(), Catch::Contains("varlen = true"));

  FmhaProblem capped = dense;
  capped.softcap = 30;
  CHECK(field_error([&] {
          dispatch::check_problem(tensor_core_config(Family::fwd, false, false, false), capped);
        }).field() == "softcap");
  CHECK(field_error([&] {
          dispatch::check_problem(tensor_core_config(Family::bwd, false, false, true), dense);
        }).field() == "softcap");
  CHECK_NOTHROW(
      dispatch::check_problem(tensor_core_config(Family::bwd, false, false, true), capped));
}

TEST_CASE("packed problems: what reaches the kernel parameters", "[launch]") {
  FmhaProblem p = packed_problem();
  p.softcap = 30;
  const FmhaKernelConfig c = tensor_core_config(Family::fwd, true, true, true);
  const FmhaFwdParams f = dispatch::make_fwd_params(c, p, fwd_tensors(true));
  CHECK(f.cu_seqlens_q == p.cu_seqlens_q);
  CHECK(f.cu_seqlens_k == p.cu_seqlens_k);
  CHECK(f.total_q == 14);
  CHECK(f.total_k == 19);
  CHECK(f.seqlen_q == 9);
  CHECK(f.q_strides.batch == 0);
  CHECK(f.o_strides.batch == 0);
  CHECK(f.sinks == fwd_tensors(true).sinks);
  // The capped scores are scaled already: the softmax takes log2(e), the cap the scale.
  CHECK(f.softcap == 30.f);
  CHECK(f.softcap_scale == Approx(0.125f / 30.f));
  CHECK(f.scale_log2 == Approx(1.4426950408889634f));
  // Explicit strides of a packed tensor: their batch stride is never stepped and passes as 0.
  p.q_strides = TensorStrides{123456, 64, 4 * 64};
  CHECK(dispatch::make_fwd_params(c, p, fwd_tensors(true)).q_strides.batch == 0);

  const FmhaKernelConfig plain = tensor_core_config(Family::fwd, false, false, false);
  const FmhaFwdParams d = dispatch::make_fwd_params(plain, test::sized_problem(2, 4, 2, 16, 24, 64),
                                                    fwd_tensors(false));
  CHECK(d.cu_seqlens_q == nullptr);
  CHECK(d.sinks == nullptr);
  CHECK(d.scale_log2 == Approx(0.125f * 1.4426950408889634f));
}

TEST_CASE("packed problems: sinks and their gradient are required exactly by sinks configs",
          "[launch]") {
  const FmhaProblem dense = test::sized_problem(2, 4, 2, 16, 24, 64);
  const FmhaKernelConfig fwd_sinks = tensor_core_config(Family::fwd, false, true, false);
  const FmhaKernelConfig fwd_plain = tensor_core_config(Family::fwd, false, false, false);
  FieldError e =
      field_error([&] { dispatch::make_fwd_params(fwd_sinks, dense, fwd_tensors(false)); });
  CHECK(e.field() == "sinks");
  CHECK(e.value() == "null");
  e = field_error([&] { dispatch::make_fwd_params(fwd_plain, dense, fwd_tensors(true)); });
  CHECK(e.field() == "sinks");
  CHECK_THAT(e.accepted(), Catch::Contains("sinks = false"));

  const FmhaKernelConfig bwd_sinks = tensor_core_config(Family::bwd, false, true, false);
  BwdTensors t = bwd_tensors(true);
  t.d_sinks = nullptr;
  CHECK(field_error([&] {
          dispatch::make_bwd_params(bwd_sinks, dense, t, test::placeholder_workspace());
        }).field() == "d_sinks");
  const FmhaBwdParams b =
      dispatch::make_bwd_params(bwd_sinks, dense, bwd_tensors(true), test::placeholder_workspace());
  CHECK(b.d_sinks == bwd_tensors(true).d_sinks);
  CHECK(b.fwd.sinks == bwd_tensors(true).sinks);
  CHECK(b.dsink_rows != nullptr);
}

TEST_CASE("packed problems: the backward's workspace and stages", "[plan]") {
  const FmhaProblem packed = packed_problem();
  // Per-row scratch over the packed rows (Hq x total_q), not batch x max_seqlen.
  const kernels::BwdWorkspaceLayout plain =
      kernels::bwd_workspace_layout(tensor_core_config(Family::bwd, true, false, false), packed);
  CHECK(plain.dq_accum_bytes == 4u * 14 * 64 * 4);
  CHECK(plain.dsink_rows == kernels::BwdWorkspaceLayout::npos);
  const FmhaKernelConfig sinks = tensor_core_config(Family::bwd, true, true, false);
  const kernels::BwdWorkspaceLayout with_sinks = kernels::bwd_workspace_layout(sinks, packed);
  REQUIRE(with_sinks.dsink_rows != kernels::BwdWorkspaceLayout::npos);
  CHECK(with_sinks.total >= plain.total + 4 * 14 * 4);

  // The sinks' gradient is one more stage, one CTA per query head.
  const auto stages = kernels::plan_stages(sinks, packed);
  REQUIRE(stages.size() == 4);
  CHECK(stages.back().role == codegen::StageRole::bwd_dsinks);
  CHECK(stages.back().grid.x == 4);
  CHECK(stages.back().block.x == static_cast<unsigned>(kFmhaDsinksThreads));
  // The others span the longest sequence's tiles.
  CHECK(stages[0].grid.z == 3);
}

TEST_CASE("packed problems: which families serve the new axes; the others say so", "[config]") {
  // The Hopper forward serves them at hdim 64, 128 and 256; hdim 192 falls back.
  FmhaKernelConfig fwd;
  fwd.family = Family::fwd;
  fwd.dtype = DType::bf16;
  fwd.arch = "sm_90";
  fwd.varlen = fwd.sinks = fwd.softcap = true;
  for (int hdim : {64, 128, 256}) {
    fwd.hdim_q = fwd.hdim_v = hdim;
    CHECK(canonicalize(fwd).impl == KernelImpl::wgmma_sm90a);
  }
  fwd.hdim_q = fwd.hdim_v = 192;
  CHECK(canonicalize(fwd).impl == KernelImpl::mma_sm80);

  // Its backward does not yet: mma_sm80 serves them.
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 128;
  c.arch = "sm_90";
  c.varlen = true;
  // On Hopper the automatic impl falls back, and says why.
  CHECK(canonicalize(c).impl == KernelImpl::mma_sm80);
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("varlen"));
  c.varlen = false;
  c.sinks = true;
  c.softcap = true;
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("sinks, softcap"));
  // An explicit impl that does not serve them is refused, naming the field.
  for (KernelImpl impl : {KernelImpl::wgmma_sm90a, KernelImpl::reference}) {
    c.impl = impl;
    const FieldError e = field_error([&] { canonicalize(c); });
    CHECK(e.field() == "impl");
    CHECK_THAT(e.accepted(), Catch::Contains("sinks"));
  }
  // No family serves them on AMD yet.
  c.impl = KernelImpl::automatic;
  c.arch = "gfx90a";
  const FieldError amd = field_error([&] { canonicalize(c); });
  CHECK(amd.field() == "arch");
  CHECK_THAT(amd.accepted(), Catch::Contains("reference does not serve sinks, softcap"));
}
