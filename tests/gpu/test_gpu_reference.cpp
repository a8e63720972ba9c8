// The portable reference kernel, built through the whole pipeline (render -> NVRTC -> cache ->
// load), launched on the GPU and compared with the fp64 CPU reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "fmha_jit/device.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "reference/cpu_reference.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
namespace ref = fmha_jit::reference;

namespace {

struct Case {
  DType dtype;
  int hdim_q, hdim_v;
  MaskKind mask;
  int batch, nhead_q, nhead_k, seqlen_q, seqlen_k;
  Layout layout;
  int window_left = -1, window_right = -1;
};

std::string describe(const Case& c) {
  return std::string(to_string(c.dtype)) + " hd" + std::to_string(c.hdim_q) + "x" +
         std::to_string(c.hdim_v) + " " + std::string(to_string(c.mask)) + " B" +
         std::to_string(c.batch) + " H" + std::to_string(c.nhead_q) + ":" +
         std::to_string(c.nhead_k) + " S" + std::to_string(c.seqlen_q) + "x" +
         std::to_string(c.seqlen_k) + " " + std::string(to_string(c.layout)) + " w" +
         std::to_string(c.window_left) + "," + std::to_string(c.window_right);
}

FmhaProblem problem_of(const Case& c) {
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

ref::Strides ref_strides(const TensorStrides& s) { return {s.batch, s.head, s.row}; }

ref::AttentionShape shape_of(const Case& c, const FmhaProblem& p) {
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

// A host tensor rounded to the dtype, and its device copy in 16-bit storage.
struct Tensor {
  std::vector<float> host;
  DeviceBuffer device;
};

Tensor random_tensor(std::size_t n, bool bf16, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  Tensor t;
  t.host.resize(n);
  std::vector<std::uint16_t> bits(n);
  for (std::size_t i = 0; i < n; ++i) {
    bits[i] = bf16 ? ref::float_to_bf16_bits(dist(rng)) : ref::float_to_half_bits(dist(rng));
    t.host[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  t.device = DeviceBuffer(n * 2);
  t.device.upload(bits.data(), n * 2);
  return t;
}

Tensor upload_rounded(const std::vector<float>& values, bool bf16) {
  Tensor t;
  t.host = values;
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] = bf16 ? ref::float_to_bf16_bits(values[i]) : ref::float_to_half_bits(values[i]);
    t.host[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  t.device = DeviceBuffer(values.size() * 2);
  t.device.upload(bits.data(), values.size() * 2);
  return t;
}

// Allocated and filled with 0xFF bytes (NaN in fp16, bf16 and fp32), so unwritten outputs fail.
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

void check_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                 double tol) {
  const auto stats = ref::compare(got.data(), want.data(), got.size());
  INFO(what << ": max_abs " << stats.max_abs << " rel_l2 " << stats.rel_l2 << " nan "
            << stats.nan_count << " nonfinite " << stats.nonfinite_mismatch << " tol " << tol);
  CHECK(stats.ok(tol));
}

std::shared_ptr<FmhaRunner> setup(Family family, const Case& c, bool deterministic = false) {
  FmhaKernelConfig config;
  config.family = family;
  config.dtype = c.dtype;
  config.hdim_q = c.hdim_q;
  config.hdim_v = c.hdim_v;
  config.mask = c.mask;
  config.arch = detect_gpu_arch();
  config.impl = KernelImpl::reference;
  config.deterministic = deterministic;
  const auto r = setup_fmha_dispatcher(config);
  INFO(r.error);
  REQUIRE(r.success);
  REQUIRE(r.runner->loaded());
  return r.runner;
}

void run_case(const Case& c, std::uint32_t seed) {
  INFO(describe(c));
  const bool bf16 = c.dtype == DType::bf16;
  const FmhaProblem p = problem_of(c);
  const ref::AttentionShape shape = shape_of(c, p);
  std::mt19937 rng(seed);
  Tensor q = random_tensor(p.q_elements(), bf16, rng);
  Tensor k = random_tensor(p.k_elements(), bf16, rng);
  Tensor v = random_tensor(p.v_elements(), bf16, rng);
  const ref::TensorView qv{q.host.data(), ref_strides(p.q_stride())};
  const ref::TensorView kv{k.host.data(), ref_strides(p.k_stride())};
  const ref::TensorView vv{v.host.data(), ref_strides(p.v_stride())};

  // Forward.
  std::vector<float> o_ref(p.o_elements()), lse_ref(p.lse_elements());
  ref::attention_forward(shape, qv, kv, vv, {o_ref.data(), ref_strides(p.o_stride())},
                         lse_ref.data());
  auto fwd = setup(Family::fwd, c);
  DeviceBuffer o = poisoned(p.o_elements() * 2), lse = poisoned(p.lse_elements() * 4);
  fwd->run_fwd(p, {q.device.data(), k.device.data(), v.device.data(), o.data(),
                   static_cast<float*>(lse.data())});
  device_synchronize();
  check_close("O", download_16bit(o, p.o_elements(), bf16), o_ref,
              ref::dtype_tolerance(bf16, ref::Quantity::forward_output));
  std::vector<float> lse_got(p.lse_elements());
  lse.download(lse_got.data(), lse_got.size() * 4);
  check_close("LSE", lse_got, lse_ref, ref::dtype_tolerance(bf16, ref::Quantity::lse));

  // Backward from the GPU's O (rounded to the dtype, as a training step would have it).
  Tensor o_in = upload_rounded(download_16bit(o, p.o_elements(), bf16), bf16);
  Tensor d_o = random_tensor(p.o_elements(), bf16, rng);
  DeviceBuffer lse_in(p.lse_elements() * 4);
  lse_in.upload(lse_got.data(), lse_got.size() * 4);
  std::vector<float> dq_ref(p.q_elements()), dk_ref(p.k_elements()), dv_ref(p.v_elements());
  ref::attention_backward(shape, qv, kv, vv, {o_in.host.data(), ref_strides(p.o_stride())},
                          {d_o.host.data(), ref_strides(p.o_stride())}, lse_got.data(),
                          {dq_ref.data(), ref_strides(p.q_stride())},
                          {dk_ref.data(), ref_strides(p.k_stride())},
                          {dv_ref.data(), ref_strides(p.v_stride())});
  auto bwd = setup(Family::bwd, c);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer dq = poisoned(p.q_elements() * 2), dk = poisoned(p.k_elements() * 2),
                 dv = poisoned(p.v_elements() * 2);
    bwd->run_bwd(p, {q.device.data(), k.device.data(), v.device.data(), o_in.device.data(),
                     static_cast<const float*>(lse_in.data()), d_o.device.data(), dq.data(),
                     dk.data(), dv.data()});
    device_synchronize();
    const double tol = ref::dtype_tolerance(bf16, ref::Quantity::gradient);
    auto dq_got = download_16bit(dq, p.q_elements(), bf16);
    check_close("dQ", dq_got, dq_ref, tol);
    check_close("dK", download_16bit(dk, p.k_elements(), bf16), dk_ref, tol);
    check_close("dV", download_16bit(dv, p.v_elements(), bf16), dv_ref, tol);
    runs.push_back(std::move(dq_got));
  }
  // The reference backward sums in a fixed order: bit-identical from run to run.
  CHECK(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4) == 0);
}

}  // namespace

TEST_CASE("gpu reference: every dtype, head dim and mask at odd sizes", "[gpu]") {
  std::uint32_t seed = 1;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (auto [dq, dv] : test::head_dim_pairs()) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                            MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
        const bool window = mask == MaskKind::sliding_window;
        run_case({dtype, dq, dv, mask, 2, 4, 2, 17, 45, Layout::bhsd, window ? 8 : -1,
                  window ? 3 : -1},
                 seed++);
      }
    }
  }
}

TEST_CASE("gpu reference: seqlen 1, Sq > Sk, GQA 8:1, bshd", "[gpu]") {
  run_case({DType::bf16, 128, 128, MaskKind::none, 1, 8, 1, 1, 1, Layout::bshd}, 11);
  run_case({DType::fp16, 64, 64, MaskKind::causal_bottom_right, 3, 8, 1, 70, 33, Layout::bshd},
           12);  // the first 37 query rows see no key
  run_case({DType::bf16, 64, 64, MaskKind::sliding_window, 1, 2, 2, 128, 128, Layout::bhsd, 0, 0},
           13);
  run_case({DType::bf16, 256, 256, MaskKind::causal_top_left, 1, 2, 1, 300, 300, Layout::bshd},
           14);
}

TEST_CASE("gpu reference: problems the kernel cannot run are rejected before launch", "[gpu]") {
  const Case c{DType::bf16, 64, 64, MaskKind::none, 1, 2, 2, 16, 16, Layout::bhsd};
  auto fwd = setup(Family::fwd, c);
  DeviceBuffer buf(1 << 16);
  FwdTensors t{buf.data(), buf.data(), buf.data(), buf.data(), nullptr};
  auto p = problem_of(c);
  p.hdim_q = p.hdim_v = 128;
  CHECK_THROWS_AS(fwd->run_fwd(p, t), FieldError);
  p = problem_of(c);
  p.nhead_k = 3;
  CHECK_THROWS_AS(fwd->run_fwd(p, t), FieldError);
  p = problem_of(c);
  p.window_left = 4;  // a no-mask kernel cannot express a window
  CHECK_THROWS_AS(fwd->run_fwd(p, t), FieldError);
  p = problem_of(c);
  FwdTensors null_q = t;
  null_q.q = nullptr;
  CHECK_THROWS_AS(fwd->run_fwd(p, null_q), FieldError);
  FwdTensors misaligned = t;
  misaligned.k = static_cast<char*>(buf.data()) + 1;
  CHECK_THROWS_AS(fwd->run_fwd(p, misaligned), FieldError);
  BwdTensors bt{};
  CHECK_THROWS_AS(fwd->run_bwd(p, bt), FieldError);  // a fwd kernel has no backward
}
