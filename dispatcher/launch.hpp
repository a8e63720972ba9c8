// Kernel arguments from a problem and device pointers, checked before anything is launched.
#pragma once

#include "common/fmha_params.h"
#include "fmha_jit/config.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::dispatch {

// Throws FieldError (invalid_problem) when the kernel built from `canonical` cannot run `problem`.
void check_problem(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// Throw FieldError (invalid_argument) for null, misaligned or missing pointers / strides.
FmhaFwdParams make_fwd_params(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                              const FwdTensors& tensors);
FmhaBwdParams make_bwd_params(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                              const BwdTensors& tensors, void* workspace);

}  // namespace fmha_jit::dispatch
