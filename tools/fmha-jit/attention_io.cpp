#include "tools/fmha-jit/attention_io.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
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

// Dense: (B, H, S, D) in the layout's order. Packed: the `total` rows of all sequences in place of
// B and S.
TensorShape tensor_shape(const FmhaProblem& p, std::int64_t heads, const char* heads_name,
                         bool query_rows, std::int64_t dim, const char* dim_name) {
  const bool bhsd = p.layout == Layout::bhsd;
  if (p.varlen()) {
    const std::int64_t total = query_rows ? p.total_q : p.total_k;
    const char* total_name = query_rows ? "total_q" : "total_k";
    if (bhsd)
      return {{heads, total, dim}, fmt::format("({}, {}, {})", heads_name, total_name, dim_name)};
    return {{total, heads, dim}, fmt::format("({}, {}, {})", total_name, heads_name, dim_name)};
  }
  const std::int64_t seq = query_rows ? p.seqlen_q : p.seqlen_k;
  const char* seq_name = query_rows ? "Sq" : "Sk";
  if (bhsd) {
    return {{p.batch, heads, seq, dim},
            fmt::format("(B, {}, {}, {})", heads_name, seq_name, dim_name)};
  }
  return {{p.batch, seq, heads, dim},
          fmt::format("(B, {}, {}, {})", seq_name, heads_name, dim_name)};
}

// At least one element's worth, so that an empty tensor still has an address.
std::size_t allocation(std::size_t bytes) { return std::max<std::size_t>(bytes, 256); }

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
  return round_to_dtype(random_floats(n, seed), bf16);
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(n);
  for (auto& x : values) x = dist(rng);
  return values;
}

std::vector<float> widen(std::span<const std::uint16_t> bits, bool bf16) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    out[i] = bf16 ? ref::bf16_bits_to_float(bits[i]) : ref::half_bits_to_float(bits[i]);
  }
  return out;
}

TensorShape q_shape(const FmhaProblem& p) {
  return tensor_shape(p, p.nhead_q, "Hq", true, p.hdim_q, "D");
}
TensorShape k_shape(const FmhaProblem& p) {
  return tensor_shape(p, p.nhead_k, "Hk", false, p.hdim_q, "D");
}
TensorShape v_shape(const FmhaProblem& p) {
  return tensor_shape(p, p.nhead_k, "Hk", false, p.hdim_v, "Dv");
}
TensorShape o_shape(const FmhaProblem& p) {
  return tensor_shape(p, p.nhead_q, "Hq", true, p.hdim_v, "Dv");
}
TensorShape lse_shape(const FmhaProblem& p) {
  if (p.varlen()) return {{p.nhead_q, p.total_q}, "(Hq, total_q)"};
  return {{p.batch, p.nhead_q, p.seqlen_q}, "(B, Hq, Sq)"};
}
TensorShape sinks_shape(const FmhaProblem& p) { return {{p.nhead_q}, "(Hq,)"}; }
TensorShape cu_seqlens_shape(const FmhaProblem& p) { return {{p.batch + 1}, "(B + 1,)"}; }

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

std::vector<std::int32_t> read_int32_input(const std::filesystem::path& dir,
                                           const std::string& name, const TensorShape& expected) {
  const std::filesystem::path path = dir / name;
  npy::Int32Array a = npy::read_npy_int32(path);
  if (a.shape != expected.dims) {
    throw Error(
        ErrorCode::invalid_argument,
        fmt::format("{}: shape {} does not match the flags: expected {} = {}", path.string(),
                    shape_text(a.shape), expected.names, shape_text(expected.dims)));
  }
  return std::move(a.data);
}

void write_int32_output(const std::filesystem::path& dir, const std::string& name,
                        const TensorShape& shape, std::span<const std::int32_t> values) {
  npy::write_npy(dir / name, shape.dims, values);
}

DeviceBuffer upload_bits(std::span<const std::uint16_t> bits) {
  DeviceBuffer b(allocation(bits.size_bytes()));
  if (!bits.empty()) b.upload(bits.data(), bits.size_bytes());
  return b;
}

DeviceBuffer upload_floats(std::span<const float> values) {
  DeviceBuffer b(allocation(values.size_bytes()));
  if (!values.empty()) b.upload(values.data(), values.size_bytes());
  return b;
}

DeviceBuffer upload_ints(std::span<const std::int32_t> values) {
  DeviceBuffer b(allocation(values.size_bytes()));
  if (!values.empty()) b.upload(values.data(), values.size_bytes());
  return b;
}

DeviceBuffer poisoned(std::size_t bytes) {
  DeviceBuffer b(allocation(bytes));
  b.fill(0xFF);
  return b;
}

std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::size_t n) {
  std::vector<std::uint16_t> out(n);
  if (n > 0) b.download(out.data(), n * sizeof(std::uint16_t));
  return out;
}

std::vector<float> download_floats(const DeviceBuffer& b, std::size_t n) {
  std::vector<float> out(n);
  if (n > 0) b.download(out.data(), n * sizeof(float));
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
  s.softcap = p.softcap;
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
