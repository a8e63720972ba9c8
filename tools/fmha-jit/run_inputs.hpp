// The inputs of `fmha-jit run` on the host: seeded random tensors, or the .npy files of --inputs
// checked against the flags (the packed shapes and cu_seqlens files of a packed batch, the sinks),
// rounded to the dtype as the kernel sees them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"
#include "tools/fmha-jit/attention_io.hpp"
#include "tools/fmha-jit/problem_options.hpp"

namespace fmha_jit::cli {

// Everything a launch reads, on the host (rounded to the dtype).
struct Inputs {
  HostTensor q, k, v, d_o;
  // Backward only: the forward's O (rounded to the dtype) and LSE, from o.npy / lse.npy when both
  // are given, else computed on the GPU by a forward run.
  std::optional<HostTensor> o;
  std::optional<std::vector<float>> lse;
  std::vector<float> sinks;  // sinks configs: nhead_q fp32 logits
};

// Random inputs (options.seed) when `inputs` is empty, else the files of that folder. Throws
// Error(invalid_argument) naming the file for a shape, a cu_seqlens file or a sinks file that does
// not fit the flags; npy::NpyError for unreadable or malformed files.
Inputs load_inputs(const ProblemOptions& options, const std::string& inputs, const FmhaProblem& p,
                   Family family, bool bf16);

}  // namespace fmha_jit::cli
