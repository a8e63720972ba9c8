// Runs attention problems through the public API on the GPU and checks them against a reference:
// the fp64 CPU reference for small problems, the GPU reference kernel (impl reference, itself
// checked against the CPU reference) for large ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::test {

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
};
std::string describe(const AttentionCase& c);
FmhaProblem problem_of(const AttentionCase& c);
// The canonical config of `family` for the case on this GPU (dtype, head dims, mask, the LSE flag
// of a forward; tile fields by the heuristic), as the host plans see it.
FmhaKernelConfig canonical_config_of(const AttentionCase& c, Family family);

// Host values rounded to the dtype and their device copy in 16-bit storage.
struct DeviceTensor {
  std::vector<float> host;
  DeviceBuffer device;
};
DeviceTensor random_tensor(std::size_t n, bool bf16, std::uint32_t seed);
DeviceTensor upload_rounded(const std::vector<float>& values, bool bf16);
std::vector<float> download_16bit(const DeviceBuffer& b, std::size_t n, bool bf16);
// Filled with 0xFF bytes: NaN in fp16, bf16 and fp32, so unwritten outputs fail the comparison.
DeviceBuffer poisoned(std::size_t bytes);

struct ForwardResult {
  std::vector<float> o, lse;
};
// Runs the forward of `impl` on the GPU (NaN-poisoned outputs).
ForwardResult gpu_forward(const AttentionCase& c, KernelImpl impl, const DeviceTensor& q,
                          const DeviceTensor& k, const DeviceTensor& v);

// Checks the forward of `impl` on random inputs; the expected values come from the CPU reference
// when the problem is small, else from the GPU reference kernel.
void check_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed);

// Run-to-run behaviour of a backward: the largest element-wise difference of dQ, dK and dV
// between the first run and any later one, and whether every run produced the same bytes.
struct BackwardRepro {
  int runs = 0;
  double max_diff[3] = {0, 0, 0};
  bool bit_exact = true;
};

// Checks `runs` backward runs of `impl` (NaN-poisoned outputs each time) against the reference:
// the fp64 CPU reference for small problems, the GPU reference kernel for large ones. With
// `deterministic`, also requires every run to be bit-identical to the first.
BackwardRepro check_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                             std::uint32_t seed, int runs = 2);

// Every mask kind, in the order the gpu cases sweep them.
inline const std::vector<MaskKind> kAllMasks = {MaskKind::none, MaskKind::causal_top_left,
                                                MaskKind::causal_bottom_right,
                                                MaskKind::sliding_window};

// True on an sm_90 GPU, which the wgmma_sm90a kernels need; elsewhere warns and returns false,
// and the Hopper cases have nothing to run.
bool on_hopper();

}  // namespace fmha_jit::test
