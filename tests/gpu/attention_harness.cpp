// The harness's cases, tensors and kernel runs (the checks: attention_harness_checks.cpp and
// attention_harness_bwd.cpp).
#include "gpu/attention_harness.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gpu/attention_harness_detail.hpp"

namespace fmha_jit::test {
namespace {

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

// Calls fn(b, h, s, offset) for every row of the geometry, offset being where the row starts.
template <typename Fn>
void for_each_row(const TensorGeometry& g, Fn fn) {
  for (int b = 0; b < g.batch; ++b) {
    for (int h = 0; h < g.heads; ++h) {
      for (int s = 0; s < g.seqlen; ++s) fn(b, h, s, g.offset(b, h, s));
    }
  }
}

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return values;
}

}  // namespace

namespace detail {

std::shared_ptr<FmhaRunner> setup(Family family, const AttentionCase& c, KernelImpl impl,
                                  bool deterministic) {
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

ref::AttentionShape shape_of(const AttentionCase& c) {
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
  s.scale = problem_of(c).softmax_scale();
  return s;
}

ref::Strides ref_strides(const TensorStrides& s) { return {s.batch, s.head, s.row}; }

}  // namespace detail

std::string describe(const AttentionCase& c) {
  const char* storage[] = {"", " padded", " transposed"};
  return std::string(to_string(c.dtype)) + " hd" + std::to_string(c.hdim_q) + "x" +
         std::to_string(c.hdim_v) + " " + std::string(to_string(c.mask)) + " B" +
         std::to_string(c.batch) + " H" + std::to_string(c.nhead_q) + ":" +
         std::to_string(c.nhead_k) + " S" + std::to_string(c.seqlen_q) + "x" +
         std::to_string(c.seqlen_k) + " " + std::string(to_string(c.layout)) +
         storage[static_cast<int>(c.storage)] + " w" + std::to_string(c.window_left) + "," +
         std::to_string(c.window_right) + (c.lse ? " lse" : "") +
         (c.block_m ? " tile " + std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "w" +
                          std::to_string(c.num_warps) + "s" + std::to_string(c.num_stages)
                    : "");
}

FmhaKernelConfig canonical_config_of(const AttentionCase& c, Family family) {
  return canonicalize(config_of(c, family));
}

TensorGeometry geometry(const AttentionCase& c, Operand operand) {
  TensorGeometry g;
  g.batch = c.batch;
  const bool query_side = operand == Operand::q || operand == Operand::o;
  g.heads = query_side ? c.nhead_q : c.nhead_k;
  g.seqlen = query_side ? c.seqlen_q : c.seqlen_k;
  g.hdim = operand == Operand::q || operand == Operand::k ? c.hdim_q : c.hdim_v;
  g.logical = dense_strides(c.layout, g.heads, g.seqlen, g.hdim);
  const std::int64_t h = g.heads, s = g.seqlen, d = g.hdim, pad = kStridePadding;
  switch (c.storage) {
    case Storage::dense: g.strides = g.logical; break;
    case Storage::padded:
      g.strides = c.layout == Layout::bshd ? TensorStrides{s * (h * d + pad), d, h * d + pad}
                                           : TensorStrides{h * (s * d + pad), s * d + pad, d};
      break;
    case Storage::transposed:
      g.strides = dense_strides(c.layout == Layout::bshd ? Layout::bhsd : Layout::bshd, g.heads,
                                g.seqlen, g.hdim);
      break;
  }
  return g;
}

std::size_t TensorGeometry::storage() const {
  return static_cast<std::size_t>(offset(batch - 1, heads - 1, seqlen - 1) + hdim);
}

std::vector<AttentionCase> strided_cases() {
  std::vector<AttentionCase> cases;
  for (int hdim : {64, 128}) {
    for (Layout layout : {Layout::bshd, Layout::bhsd}) {
      for (Storage storage : {Storage::padded, Storage::transposed}) {
        AttentionCase c{DType::bf16, hdim, hdim,  MaskKind::causal_top_left, 2, 4, 2,
                        300,         333,  layout};
        if (storage == Storage::transposed) c.mask = MaskKind::causal_bottom_right;
        if (layout == Layout::bhsd) c.dtype = DType::fp16;
        c.storage = storage;
        cases.push_back(c);
      }
    }
  }
  return cases;
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
  if (c.storage != Storage::dense) {
    p.q_strides = geometry(c, Operand::q).strides;
    p.k_strides = geometry(c, Operand::k).strides;
    p.v_strides = geometry(c, Operand::v).strides;
    p.o_strides = geometry(c, Operand::o).strides;
  }
  return p;
}

float widen(std::uint16_t bits, bool bf16) {
  return bf16 ? reference::bf16_bits_to_float(bits) : reference::half_bits_to_float(bits);
}

DeviceTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed) {
  return upload_rounded(normal_values(n, seed), bf16);
}

DeviceTensor random_tensor(const TensorGeometry& g, bool bf16, std::uint32_t seed) {
  // The draw of the dense tensor, element by element in the layout's order, so that a case gets
  // the same values whatever its storage.
  std::vector<float> dense =
      normal_values(static_cast<std::size_t>(g.batch) * g.heads * g.seqlen * g.hdim, seed);
  if (g.strides == g.logical) return upload_rounded(dense, bf16);
  std::vector<float> values(g.storage(), std::numeric_limits<float>::quiet_NaN());
  for_each_row(g, [&](int b, int h, int s, std::int64_t at) {
    const std::int64_t from = b * g.logical.batch + h * g.logical.head + s * g.logical.row;
    std::copy_n(dense.begin() + from, g.hdim, values.begin() + at);
  });
  return upload_rounded(values, bf16);
}

DeviceTensor upload_rounded(const std::vector<float>& values, bool bf16) {
  DeviceTensor t;
  t.host.resize(values.size());
  std::vector<std::uint16_t> bits(values.size(), 0xFFFF);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isnan(values[i])) {
      bits[i] = bf16 ? reference::float_to_bf16_bits(values[i])
                     : reference::float_to_half_bits(values[i]);
    }
    t.host[i] = widen(bits[i], bf16);
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

std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::size_t n) {
  std::vector<std::uint16_t> bits(n);
  b.download(bits.data(), n * 2);
  return bits;
}

void upload_bits(DeviceBuffer& b, const std::vector<std::uint16_t>& bits) {
  b.upload(bits.data(), bits.size() * 2);
}

std::vector<float> download_16bit(const DeviceBuffer& b, std::size_t n, bool bf16) {
  const std::vector<std::uint16_t> bits = download_bits(b, n);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = widen(bits[i], bf16);
  return out;
}

ForwardBuffers run_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                           const DeviceTensor& k, const DeviceTensor& v) {
  const FmhaProblem p = problem_of(c);
  auto runner = detail::setup(Family::fwd, c, impl);
  ForwardBuffers out{poisoned(geometry(c, Operand::o).storage() * 2),
                     poisoned(static_cast<std::size_t>(p.lse_elements()) * 4)};
  runner->run_fwd(p, {q.device.data(), k.device.data(), v.device.data(), out.o.data(),
                      c.lse ? static_cast<float*>(out.lse.data()) : nullptr});
  device_synchronize();
  return out;
}

ForwardResult gpu_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                          const DeviceTensor& k, const DeviceTensor& v) {
  const ForwardBuffers out = run_forward(c, impl, q, k, v);
  const bool bf16 = c.dtype == DType::bf16;
  ForwardResult r;
  r.o_bits = download_bits(out.o, geometry(c, Operand::o).storage());
  r.o.resize(r.o_bits.size());
  for (std::size_t i = 0; i < r.o.size(); ++i) r.o[i] = widen(r.o_bits[i], bf16);
  if (c.lse) {
    r.lse.resize(static_cast<std::size_t>(problem_of(c).lse_elements()));
    out.lse.download(r.lse.data(), r.lse.size() * 4);
  }
  return r;
}

}  // namespace fmha_jit::test
