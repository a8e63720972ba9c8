// Tensors of `run` and `bench` between files, host and GPU: .npy inputs checked against the
// problem's shapes, seeded random inputs, rounding to fp16 / bf16 (round to nearest even, the
// kernels' own storage), 16-bit uploads and downloads, .npy outputs, and the comparison of an
// output with a reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/problem.hpp"
#include "reference/cpu_reference.hpp"

namespace fmha_jit::cli {

// Values rounded to the dtype (what the kernel sees, widened back to float for the CPU reference)
// and their 16-bit storage.
struct HostTensor {
  std::vector<float> values;
  std::vector<std::uint16_t> bits;
};

HostTensor round_to_dtype(std::span<const float> values, bool bf16);
// Standard normal values, rounded to the dtype.
HostTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed);
// Standard normal fp32 values (sink logits, which stay fp32).
std::vector<float> random_floats(std::size_t n, std::uint32_t seed);
std::vector<float> widen(std::span<const std::uint16_t> bits, bool bf16);

// The problem's shapes in the layout's dimension order, and the names of those dimensions. A packed
// batch's tensors are 3-d: (total, H, D) in bshd, (H, total, D) in bhsd; its LSE is (Hq, total_q).
struct TensorShape {
  std::vector<std::int64_t> dims;
  std::string names;  // "(B, Hq, Sq, D)", "(total_q, Hq, D)"
};
TensorShape q_shape(const FmhaProblem& p);
TensorShape k_shape(const FmhaProblem& p);
TensorShape v_shape(const FmhaProblem& p);
TensorShape o_shape(const FmhaProblem& p);
TensorShape lse_shape(const FmhaProblem& p);
TensorShape sinks_shape(const FmhaProblem& p);       // (Hq): sinks and their gradient
TensorShape cu_seqlens_shape(const FmhaProblem& p);  // (B + 1)

// Reads dir/name (float32 .npy) and checks its shape. Throws Error(invalid_argument) naming the
// file, its shape and the expected one; npy::NpyError for unreadable or malformed files.
std::vector<float> read_input(const std::filesystem::path& dir, const std::string& name,
                              const TensorShape& expected, const std::string& layout);
void write_output(const std::filesystem::path& dir, const std::string& name,
                  const TensorShape& shape, std::span<const float> values);
// The int32 files of a packed batch (cu_seqlens_q.npy, cu_seqlens_k.npy).
std::vector<std::int32_t> read_int32_input(const std::filesystem::path& dir,
                                           const std::string& name, const TensorShape& expected);
void write_int32_output(const std::filesystem::path& dir, const std::string& name,
                        const TensorShape& shape, std::span<const std::int32_t> values);

// Device copies. upload_bits/upload_floats/upload_ints allocate a buffer of the data's size, and
// poisoned one of `bytes`; an empty one (a packed batch without tokens) still gets a small
// allocation, since the launch checks refuse null tensor pointers.
DeviceBuffer upload_bits(std::span<const std::uint16_t> bits);
DeviceBuffer upload_floats(std::span<const float> values);
DeviceBuffer upload_ints(std::span<const std::int32_t> values);
// A buffer of `bytes` filled with 0xFF: NaN in fp16, bf16 and fp32, so elements a kernel fails to
// write show up in the comparison instead of passing as stale zeros.
DeviceBuffer poisoned(std::size_t bytes);
std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::size_t n);
std::vector<float> download_floats(const DeviceBuffer& b, std::size_t n);

reference::Strides ref_strides(const TensorStrides& s);
reference::AttentionShape reference_shape(const FmhaProblem& p, MaskKind mask);

// An output compared with its reference.
struct Check {
  std::string name;  // "O", "LSE", "dQ", ...
  reference::ErrorStats stats;
  std::int64_t nan_count = 0;  // NaN anywhere in the output, whatever the reference holds
  double tolerance = 0;
  bool pass = false;
};
Check check_output(const std::string& name, std::span<const float> got, std::span<const float> want,
                   double tolerance);
nlohmann::json check_json(const Check& c);
std::string check_line(const Check& c);  // "O     max_abs 1.2e-03  max_rel ...  PASS"

}  // namespace fmha_jit::cli
