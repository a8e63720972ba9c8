#include "gpu/attention_harness.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "fmha_jit/dispatcher.hpp"
#include "reference/cpu_reference.hpp"

namespace fmha_jit::test {
namespace ref = fmha_jit::reference;

namespace {

// Above this many multiply-adds the CPU reference would dominate the test's run time.
constexpr double kCpuReferenceMaxMacs = 3e8;

ref::Strides ref_strides(const TensorStrides& s) { return {s.batch, s.head, s.row}; }

ref::AttentionShape shape_of(const AttentionCase& c, const FmhaProblem& p) {
  ref::AttentionShape s;
  s.batch = c.batch;
  s.nhead_q = c.nhead_q;
  s.nhead_k = c.nhead_k;
  s.seqlen_q = c.seqlen_q;
  s.seqlen_k = c.seqlen_k;
  s.hdim_q = c.hdim_q;
  s.hdim_v = c.hdim_v;
  s.mask_kind = static_cast<int>(c.mask);
  s.window_left = c.window_left;
  s.window_right = c.window_right;
  s.scale = p.softmax_scale();
  return s;
}

void check_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                 double tol) {
  const auto stats = ref::compare(got.data(), want.data(), got.size());
  INFO(what << ": max_abs " << stats.max_abs << " rel_l2 " << stats.rel_l2 << " nan "
            << stats.nan_count << " nonfinite " << stats.nonfinite_mismatch << " tol " << tol);
  CHECK(stats.ok(tol));
}

// The case's config as a user would write it: no tile fields, impl auto.
FmhaKernelConfig config_of(const AttentionCase& c, Family family) {
  FmhaKernelConfig config;
  config.family = family;
  config.dtype = c.dtype;
  config.hdim_q = c.hdim_q;
  config.hdim_v = c.hdim_v;
  config.mask = c.mask;
  config.lse = c.lse;  // canonicalize clears it for a backward
  config.arch = detect_gpu_arch();
  return config;
}

std::shared_ptr<FmhaRunner> setup(Family family, const AttentionCase& c, KernelImpl impl,
                                  bool deterministic = false) {
  FmhaKernelConfig config = config_of(c, family);
  config.impl = impl;
  config.deterministic = deterministic;
  if (impl != KernelImpl::reference) {
    config.block_m = c.block_m;
    config.block_n = c.block_n;
    config.num_warps = c.num_warps;
    config.num_stages = c.num_stages;
  }
  const auto r = setup_fmha_dispatcher(config);
  INFO(r.error);
  REQUIRE(r.success);
  REQUIRE(r.runner->loaded());
  return r.runner;
}

}  // namespace

std::string describe(const AttentionCase& c) {
  return std::string(to_string(c.dtype)) + " hd" + std::to_string(c.hdim_q) + "x" +
         std::to_string(c.hdim_v) + " " + std::string(to_string(c.mask)) + " B" +
         std::to_string(c.batch) + " H" + std::to_string(c.nhead_q) + ":" +
         std::to_string(c.nhead_k) + " S" + std::to_string(c.seqlen_q) + "x" +
         std::to_string(c.seqlen_k) + " " + std::string(to_string(c.layout)) + " w" +
         std::to_string(c.window_left) + "," + std::to_string(c.window_right) +
         (c.lse ? " lse" : "") +
         (c.block_m ? " tile " + std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "w" +
                          std::to_string(c.num_warps) + "s" + std::to_string(c.num_stages)
                    : "");
}

FmhaKernelConfig canonical_config_of(const AttentionCase& c, Family family) {
  return canonicalize(config_of(c, family));
}

FmhaProblem problem_of(const AttentionCase& c) {
  FmhaProblem p;
  p.batch = c.batch;
  p.nhead_q = c.nhead_q;
  p.nhead_k = c.nhead_k;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.hdim_q = c.hdim_q;
  p.hdim_v = c.hdim_v;
  p.layout = c.layout;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  return p;
}

DeviceTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return upload_rounded(values, bf16);
}

DeviceTensor upload_rounded(const std::vector<float>& values, bool bf16) {
  DeviceTensor t;
  t.host.resize(values.size());
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] = bf16 ? ref::float_to_bf16_bits(values[i]) : ref::float_to_half_bits(values[i]);
    t.host[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  t.device = DeviceBuffer(values.size() * 2);
  t.device.upload(bits.data(), values.size() * 2);
  return t;
}

DeviceBuffer poisoned(std::size_t bytes) {
  DeviceBuffer b(bytes);
  b.fill(0xFF);
  return b;
}

std::vector<float> download_16bit(const DeviceBuffer& b, std::size_t n, bool bf16) {
  std::vector<std::uint16_t> bits(n);
  b.download(bits.data(), n * 2);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  return out;
}

ForwardResult gpu_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                          const DeviceTensor& k, const DeviceTensor& v) {
  const FmhaProblem p = problem_of(c);
  auto runner = setup(Family::fwd, c, impl);
  DeviceBuffer o = poisoned(p.o_elements() * 2), lse = poisoned(p.lse_elements() * 4);
  runner->run_fwd(p, {q.device.data(), k.device.data(), v.device.data(), o.data(),
                      c.lse ? static_cast<float*>(lse.data()) : nullptr});
  device_synchronize();
  ForwardResult r;
  r.o = download_16bit(o, p.o_elements(), c.dtype == DType::bf16);
  if (c.lse) {
    r.lse.resize(p.lse_elements());
    lse.download(r.lse.data(), r.lse.size() * 4);
  }
  return r;
}

void check_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed) {
  INFO(describe(c) << " impl " << to_string(impl));
  const bool bf16 = c.dtype == DType::bf16;
  const FmhaProblem p = problem_of(c);
  const auto q = random_tensor(p.q_elements(), bf16, seed);
  const auto k = random_tensor(p.k_elements(), bf16, seed + 1);
  const auto v = random_tensor(p.v_elements(), bf16, seed + 2);
  ForwardResult want;
  const double macs = double(p.batch) * p.nhead_q * p.seqlen_q * p.seqlen_k * (p.hdim_q + p.hdim_v);
  if (macs <= kCpuReferenceMaxMacs) {
    want.o.resize(p.o_elements());
    want.lse.resize(p.lse_elements());
    ref::attention_forward(shape_of(c, p), {q.host.data(), ref_strides(p.q_stride())},
                           {k.host.data(), ref_strides(p.k_stride())},
                           {v.host.data(), ref_strides(p.v_stride())},
                           {want.o.data(), ref_strides(p.o_stride())}, want.lse.data());
  } else {
    AttentionCase with_lse = c;
    with_lse.lse = true;
    want = gpu_forward(with_lse, KernelImpl::reference, q, k, v);
  }
  const ForwardResult got = gpu_forward(c, impl, q, k, v);
  check_close("O", got.o, want.o, ref::dtype_tolerance(bf16, ref::Quantity::forward_output));
  if (c.lse) check_close("LSE", got.lse, want.lse, ref::dtype_tolerance(bf16, ref::Quantity::lse));
}

namespace {

struct Gradients {
  std::vector<float> dq, dk, dv;
};

struct BackwardInputs {
  DeviceTensor q, k, v, o, d_o;
  std::vector<float> lse_host;
  DeviceBuffer lse;
};

Gradients gpu_backward(FmhaRunner& runner, const FmhaProblem& p, const BackwardInputs& in,
                       bool bf16) {
  DeviceBuffer dq = poisoned(p.q_elements() * 2), dk = poisoned(p.k_elements() * 2),
               dv = poisoned(p.v_elements() * 2);
  runner.run_bwd(p, {in.q.device.data(), in.k.device.data(), in.v.device.data(), in.o.device.data(),
                     static_cast<const float*>(in.lse.data()), in.d_o.device.data(), dq.data(),
                     dk.data(), dv.data()});
  device_synchronize();
  return {download_16bit(dq, p.q_elements(), bf16), download_16bit(dk, p.k_elements(), bf16),
          download_16bit(dv, p.v_elements(), bf16)};
}

Gradients reference_backward(const AttentionCase& c, const FmhaProblem& p, const BackwardInputs& in,
                             bool bf16) {
  const double macs = 2.0 * p.batch * p.nhead_q * p.seqlen_q * p.seqlen_k * (p.hdim_q + p.hdim_v);
  if (macs > kCpuReferenceMaxMacs) {
    // The GPU reference backward sums in fp32 in a fixed order; it is itself checked against the
    // CPU reference by test_gpu_reference.cpp.
    return gpu_backward(*setup(Family::bwd, c, KernelImpl::reference), p, in, bf16);
  }
  Gradients g{std::vector<float>(p.q_elements()), std::vector<float>(p.k_elements()),
              std::vector<float>(p.v_elements())};
  ref::attention_backward(
      shape_of(c, p), {in.q.host.data(), ref_strides(p.q_stride())},
      {in.k.host.data(), ref_strides(p.k_stride())}, {in.v.host.data(), ref_strides(p.v_stride())},
      {in.o.host.data(), ref_strides(p.o_stride())},
      {in.d_o.host.data(), ref_strides(p.o_stride())}, in.lse_host.data(),
      {g.dq.data(), ref_strides(p.q_stride())}, {g.dk.data(), ref_strides(p.k_stride())},
      {g.dv.data(), ref_strides(p.v_stride())});
  return g;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

BackwardRepro check_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                             std::uint32_t seed, int runs) {
  INFO(describe(c) << " impl " << to_string(impl) << (deterministic ? " deterministic" : ""));
  const bool bf16 = c.dtype == DType::bf16;
  const FmhaProblem p = problem_of(c);
  BackwardInputs in;
  in.q = random_tensor(p.q_elements(), bf16, seed);
  in.k = random_tensor(p.k_elements(), bf16, seed + 1);
  in.v = random_tensor(p.v_elements(), bf16, seed + 2);
  AttentionCase with_lse = c;
  with_lse.lse = true;
  // The backward's inputs O and LSE come from the reference forward, O rounded to the dtype as a
  // training step would store it.
  const ForwardResult fwd = gpu_forward(with_lse, KernelImpl::reference, in.q, in.k, in.v);
  in.o = upload_rounded(fwd.o, bf16);
  in.d_o = random_tensor(p.o_elements(), bf16, seed + 3);
  in.lse_host = fwd.lse;
  in.lse = DeviceBuffer(p.lse_elements() * 4);
  in.lse.upload(fwd.lse.data(), fwd.lse.size() * 4);

  const Gradients want = reference_backward(c, p, in, bf16);
  auto runner = setup(Family::bwd, c, impl, deterministic);
  const double tol = ref::dtype_tolerance(bf16, ref::Quantity::gradient);
  BackwardRepro repro;
  repro.runs = runs;
  Gradients first;
  for (int run = 0; run < runs; ++run) {
    Gradients got = gpu_backward(*runner, p, in, bf16);
    if (run == 0) {
      check_close("dQ", got.dq, want.dq, tol);
      check_close("dK", got.dk, want.dk, tol);
      check_close("dV", got.dv, want.dv, tol);
      first = std::move(got);
      continue;
    }
    const std::vector<float>* pairs[3][2] = {
        {&first.dq, &got.dq}, {&first.dk, &got.dk}, {&first.dv, &got.dv}};
    for (int t = 0; t < 3; ++t) {
      const auto& a = *pairs[t][0];
      const auto& b = *pairs[t][1];
      repro.max_diff[t] = std::max(repro.max_diff[t], max_abs_diff(a, b));
      repro.bit_exact = repro.bit_exact && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    }
  }
  if (deterministic) {
    INFO("max |ddQ| " << repro.max_diff[0] << " |ddK| " << repro.max_diff[1] << " |ddV| "
                      << repro.max_diff[2] << " over " << runs << " runs");
    CHECK(repro.bit_exact);
  }
  return repro;
}

bool on_hopper() {
  if (detect_gpu_arch() == "sm_90") return true;
  WARN("wgmma_sm90a needs an sm_90 GPU; this one is " << detect_gpu_arch());
  return false;
}

}  // namespace fmha_jit::test
