// Runs attention problems through the public API on the GPU and judges them with the accuracy rule
// (reference/accuracy_rule.hpp) against the CPU's exact (ref64) and kernel-like (lowp)
// references of whole slices: every (batch, head) slice of a small problem, sampled slices of a
// large one (the last batch and head always among them). Nothing is compared with a GPU
// reference kernel; the `reference` impl is itself a kernel under test (test_gpu_reference.cpp).
//
// Outputs are poisoned (0xFF bytes, NaN) before every run, and each run is judged: NaN or
// infinity anywhere in an output (where the exact value is finite) fails, in every slice, checked
// or not; padding between rows or heads must stay untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::test {

// Where a case's tensors sit in memory.
enum class Storage {
  dense,       // the layout's dense strides, no explicit strides
  padded,      // explicit strides with poisoned padding (0xFFFF, NaN) that the kernels must
               // neither read nor write: bshd rows, or bhsd heads, kStridePadding elements longer
               // than needed
  transposed,  // the other layout's dense strides given as explicit strides: bhsd data on a
               // problem whose layout says bshd, and the converse
};
// 8 elements (16 bytes): the strides stay multiples of the kernels' 16-byte alignment.
inline constexpr int kStridePadding = 8;

struct AttentionCase {
  DType dtype = DType::bf16;
  int hdim_q = 64, hdim_v = 64;
  MaskKind mask = MaskKind::none;
  int batch = 1, nhead_q = 1, nhead_k = 1, seqlen_q = 1, seqlen_k = 1;
  Layout layout = Layout::bhsd;
  int window_left = -1, window_right = -1;
  bool lse = true;
  // Tile override (0 = heuristic): exercises on this GPU the tiles other archs get.
  int block_m = 0, block_n = 0, num_warps = 0, num_stages = 0;
  Storage storage = Storage::dense;
};
std::string describe(const AttentionCase& c);
// The problem of the case, with explicit strides unless its storage is dense. The backward's dO,
// dQ, dK and dV share the strides of O, Q, K and V.
FmhaProblem problem_of(const AttentionCase& c);
// The canonical config of `family` for the case on this GPU (dtype, head dims, mask, the LSE flag
// of a forward; tile fields by the heuristic), as the host plans see it.
FmhaKernelConfig canonical_config_of(const AttentionCase& c, Family family);

// One tensor of a case: its shape and where element (b, h, s, 0) of each row lives.
enum class Operand { q, k, v, o };
struct TensorGeometry {
  int batch = 0, heads = 0, seqlen = 0, hdim = 0;
  TensorStrides strides;  // in memory (dO, dQ, dK, dV: those of O, Q, K, V)
  TensorStrides logical;  // the layout's dense strides: the order random values are drawn in

  std::int64_t offset(int b, int h, int s) const {
    return b * strides.batch + h * strides.head + s * strides.row;
  }
  // Elements from the first to one past the last: what a buffer of the tensor holds.
  std::size_t storage() const;
};
TensorGeometry geometry(const AttentionCase& c, Operand operand);

// Host values rounded to the dtype, in storage order (NaN in padding), and their device copy in
// 16-bit storage (0xFFFF in padding).
struct DeviceTensor {
  std::vector<float> host;
  DeviceBuffer device;
};
// n dense values drawn from N(0, 1) with the seed.
DeviceTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed);
// The same draw, in the geometry's logical order, placed at its strides.
DeviceTensor random_tensor(const TensorGeometry& g, bool bf16, std::uint32_t seed);
// Storage-order values (NaN where nothing lives) rounded and uploaded.
DeviceTensor upload_rounded(const std::vector<float>& values, bool bf16);
std::vector<float> download_16bit(const DeviceBuffer& b, std::size_t n, bool bf16);
std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::size_t n);
void upload_bits(DeviceBuffer& b, const std::vector<std::uint16_t>& bits);
float widen(std::uint16_t bits, bool bf16);
// Filled with 0xFF bytes: NaN in fp16, bf16 and fp32, so unwritten outputs fail the comparison.
DeviceBuffer poisoned(std::size_t bytes);

// The outputs of one forward run, on the device (poisoned before the run).
struct ForwardBuffers {
  DeviceBuffer o, lse;
};
ForwardBuffers run_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                           const DeviceTensor& k, const DeviceTensor& v);

struct ForwardResult {
  std::vector<float> o, lse;  // O in storage order
  std::vector<std::uint16_t> o_bits;
};
// Runs the forward of `impl` on the GPU (NaN-poisoned outputs) and downloads its outputs.
ForwardResult gpu_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                          const DeviceTensor& k, const DeviceTensor& v);

// What a check found: whether every judged output passed, which outputs failed ("O", "LSE",
// "dQ", "dK", "dV", "padding", "run-to-run") and a report of the failures and a summary.
struct CheckResult {
  bool pass = true;
  std::vector<std::string> failed;
  std::string report;
};

// A fault applied to a kernel's outputs on the device after it ran and before they are judged:
// the mutation tests' way of proving the checks catch a broken kernel.
struct ForwardRun {
  const AttentionCase& c;
  KernelImpl impl;
  const DeviceTensor &q, &k, &v;
  ForwardBuffers& out;
};
using ForwardFault = std::function<void(ForwardRun&)>;
struct BackwardRun {
  const AttentionCase& c;
  int run;
  DeviceBuffer &dq, &dk, &dv;
};
using BackwardFault = std::function<void(BackwardRun&)>;

// Runs the forward of `impl` on random inputs and judges it; check_forward CHECKs the result.
// check_forward and check_backward print every check's report (its failures and the largest
// fractions of the bounds that passing outputs reached) when FMHA_JIT_TEST_RULE_REPORT=1.
CheckResult verify_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed,
                           const ForwardFault& fault = {});
void check_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed);

// A backward's runs: the result of judging every run, the largest element-wise difference of dQ,
// dK and dV between the first run and any later one, and whether every run produced the same
// bytes (the raw 16-bit outputs).
struct BackwardRepro {
  int runs = 0;
  double max_diff[3] = {0, 0, 0};
  bool bit_exact = true;
  CheckResult check;
};

// Runs the backward of `impl` `runs` times on random inputs (O and LSE as a forward produces them,
// dO random) and judges every run; with `deterministic`, also requires the runs to be
// bit-identical. check_backward CHECKs the result.
BackwardRepro verify_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                              std::uint32_t seed, int runs = 2, const BackwardFault& fault = {});
BackwardRepro check_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                             std::uint32_t seed, int runs = 2);

// The non-dense layouts every impl is checked on: hdim 64 and 128, bshd and bhsd, each with padded
// rows / heads (Storage::padded) and as data of the other layout given through strides
// (Storage::transposed), under causal masks, at 300 x 333 (partial tiles, GQA 2:1).
std::vector<AttentionCase> strided_cases();

// Every mask kind, in the order the gpu cases sweep them.
inline const std::vector<MaskKind> kAllMasks = {MaskKind::none, MaskKind::causal_top_left,
                                                MaskKind::causal_bottom_right,
                                                MaskKind::sliding_window};

}  // namespace fmha_jit::test
