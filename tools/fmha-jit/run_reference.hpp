// The fp64 CPU reference of `run --verify`, fed the inputs the kernel saw (rounded to the dtype).
// A dense batch is one call of the reference; a packed batch is one call per sequence, each a
// dense batch-1 problem of that sequence's lengths whose rows are views into the packed tensors,
// so that the reference's masks align to each sequence as the kernels' do. Sinks and the softcap
// are passed through.
#pragma once

#include <span>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::cli {

// Host tensors in the problem's strides (packed for a varlen problem).
struct ReferenceInputs {
  std::span<const float> q, k, v;
  std::span<const float> o, d_o, lse;  // backward: the forward's O and LSE, and dO
  std::span<const float> sinks;        // sinks configs: nhead_q logits; else empty
};

struct ReferenceOutputs {
  std::vector<float> o, lse;  // forward: O in the problem's strides, LSE as the kernel's
  std::vector<float> dq, dk, dv, d_sinks;  // backward; d_sinks (nhead_q) for sinks configs
};

ReferenceOutputs reference_forward(const FmhaProblem& p, MaskKind mask, const ReferenceInputs& in);
ReferenceOutputs reference_backward(const FmhaProblem& p, MaskKind mask, const ReferenceInputs& in);

}  // namespace fmha_jit::cli
