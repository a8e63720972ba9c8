// Readable kernel names derived from the canonical config, and the stages (kernel symbols) a config
// compiles into one module.
#pragma once

#include <string>
#include <vector>

#include "fmha_jit/config.hpp"

namespace fmha_jit::codegen {

// One __global__ entry of a module. Each kernel family lists its stages in launch order
// (kernels::KernelFamily::stage_roles).
enum class StageRole : std::uint8_t {
  fwd,             // O (and LSE) from Q, K, V
  bwd_dot_do_o,    // D = rowsum(dO * O)
  bwd_dq,          // dQ
  bwd_dkdv,        // dK and dV (reference)
  bwd_dq_dk_dv,    // dK, dV and the fp32 dQ partial sums in one pass over the keys (mma_sm80)
  bwd_convert_dq,  // dQ = scale * the fp32 sums, in the dtype (mma_sm80)
  bwd_dsinks,      // the sinks' gradient, summed per head in a fixed order (sinks configs)
};
std::string_view to_string(StageRole role);

// e.g. fmha_fwd_reference_sm90_bf16_hq128_hv128_causal_top_left_lse_bm1_bn128_w4_s1. Built from
// for_each_field(): enums by spelling, booleans by short name when true, ints as short name +
// value.
std::string kernel_base_name(const FmhaKernelConfig& canonical);
// base name + "_" + role, the extern "C" symbol of one stage.
std::string kernel_symbol(const FmhaKernelConfig& canonical, StageRole role);

}  // namespace fmha_jit::codegen
