#include "tools/fmha-jit/attention_io.hpp"

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <random>

#include "fmha_jit/error.hpp"
#include "tools/npy/npy.hpp"

namespace fmha_jit::cli {
namespace ref = fmha_jit::reference;

namespace {

std::string shape_text(std::span<const std::int64_t> dims) {
  return fmt::format("({})", fmt::join(dims, ", "));
}

TensorShape four_d(const std::array<std::int64_t, 4>& dims, Layout layout, const char* heads,
                   const char* seq, const char* dim) {
  const std::string names = layout == Layout::bhsd
                                ? fmt::format("(B, {}, {}, {})", heads, seq, dim)
                                : fmt::format("(B, {}, {}, {})", seq, heads, dim);
  return {std::vector<std::int64_t>(dims.begin(), dims.end()), names};
}

}  // namespace

HostTensor round_to_dtype(std::span<const float> values, bool bf16) {
  HostTensor t;
  t.values.resize(values.size());
  t.bits.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    t.bits[i] = bf16 ? ref::float_to_bf16_bits(values[i]) : ref::float_to_half_bits(values[i]);
    t.values[i] = bf16 ? ref::bf16_bits_to_float(t.bits[i]) : ref::half_bits_to_float(t.bits[i]);
  }
  return t;
}

HostTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return round_to_dtype(values, bf16);
}

std::vector<float> widen(std::span<const std::uint16_t> bits, bool bf16) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    out[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  return out;
}

TensorShape q_shape(const FmhaProblem& p) { return four_d(p.q_shape(), p.layout, "Hq", "Sq", "D"); }
TensorShape k_shape(const FmhaProblem& p) { return four_d(p.k_shape(), p.layout, "Hk", "Sk", "D"); }
TensorShape v_shape(const FmhaProblem& p) {
  return four_d(p.v_shape(), p.layout, "Hk", "Sk", "Dv");
}
TensorShape o_shape(const FmhaProblem& p) {
  return four_d(p.o_shape(), p.layout, "Hq", "Sq", "Dv");
}
TensorShape lse_shape(const FmhaProblem& p) {
  const auto dims = p.lse_shape();
  return {std::vector<std::int64_t>(dims.begin(), dims.end()), "(B, Hq, Sq)"};
}

std::vector<float> read_input(const std::filesystem::path& dir, const std::string& name,
                              const TensorShape& expected, const std::string& layout) {
  const std::filesystem::path path = dir / name;
  npy::Array a = npy::read_npy(path);
  if (a.shape != expected.dims) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: shape {} does not match the flags: expected {} = {} (layout {})",
                            path.string(), shape_text(a.shape), expected.names,
                            shape_text(expected.dims), layout));
  }
  return std::move(a.data);
}

void write_output(const std::filesystem::path& dir, const std::string& name,
                  const TensorShape& shape, std::span<const float> values) {
  npy::write_npy(dir / name, shape.dims, values);
}

DeviceBuffer upload_bits(std::span<const std::uint16_t> bits) {
  DeviceBuffer b(bits.size_bytes());
  b.upload(bits.data(), bits.size_bytes());
  return b;
}

DeviceBuffer upload_floats(std::span<const float> values) {
  DeviceBuffer b(values.size_bytes());
  b.upload(values.data(), values.size_bytes());
  return b;
}

DeviceBuffer poisoned(std::size_t bytes) {
  DeviceBuffer b(bytes);
  b.fill(0xFF);
  return b;
}

std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::size_t n) {
  std::vector<std::uint16_t> out(n);
  b.download(out.data(), n * sizeof(std::uint16_t));
  return out;
}

std::vector<float> download_floats(const DeviceBuffer& b, std::size_t n) {
  std::vector<float> out(n);
  b.download(out.data(), n * sizeof(float));
  return out;
}

ref::Strides ref_strides(const TensorStrides& s) { return {s.batch, s.head, s.row}; }

ref::AttentionShape reference_shape(const FmhaProblem& p, MaskKind mask) {
  ref::AttentionShape s;
  s.batch = static_cast<int>(p.batch);
  s.nhead_q = static_cast<int>(p.nhead_q);
  s.nhead_k = static_cast<int>(p.nhead_k);
  s.seqlen_q = static_cast<int>(p.seqlen_q);
  s.seqlen_k = static_cast<int>(p.seqlen_k);
  s.hdim_q = static_cast<int>(p.hdim_q);
  s.hdim_v = static_cast<int>(p.hdim_v);
  s.mask_kind = static_cast<int>(mask);
  s.window_left = p.window_left;
  s.window_right = p.window_right;
  s.scale = p.softmax_scale();
  return s;
}

Check check_output(const std::string& name, std::span<const float> got, std::span<const float> want,
                   double tolerance) {
  Check c;
  c.name = name;
  c.tolerance = tolerance;
  c.stats = ref::compare(got.data(), want.data(), got.size());
  // compare() skips elements that are NaN in both; an output NaN fails even then (e.g. a NaN in a
  // user's input that the reference propagates too).
  for (float x : got) c.nan_count += std::isnan(x) ? 1 : 0;
  c.pass = c.nan_count == 0 && c.stats.ok(tolerance);
  return c;
}

nlohmann::json check_json(const Check& c) {
  return {{"max_abs", c.stats.max_abs}, {"max_rel", c.stats.max_rel},
          {"rel_l2", c.stats.rel_l2},   {"max_abs_ref", c.stats.max_abs_ref},
          {"nan_count", c.nan_count},   {"nonfinite_mismatch", c.stats.nonfinite_mismatch},
          {"tolerance", c.tolerance},   {"pass", c.pass}};
}

std::string check_line(const Check& c) {
  std::string line = fmt::format(
      "{:<4} max_abs {:.3e}  max_rel {:.3e}  rel_l2 {:.3e}  (tol {:.1e})  {}", c.name,
      c.stats.max_abs, c.stats.max_rel, c.stats.rel_l2, c.tolerance, c.pass ? "PASS" : "FAIL");
  if (c.nan_count > 0) line += fmt::format(", {} NaN", c.nan_count);
  if (c.stats.nonfinite_mismatch > 0) {
    line += fmt::format(", {} non-finite mismatches", c.stats.nonfinite_mismatch);
  }
  return line;
}

}  // namespace fmha_jit::cli
