// Kernel arguments from a problem and device pointers, checked before anything is launched.
#pragma once

#include "common/fmha_params.h"
#include "device/device_api.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::dispatch {

// Throws FieldError (invalid_problem) when the kernel built from `canonical` cannot run `problem`.
void check_problem(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// Throw FieldError (invalid_argument) for null, misaligned or missing pointers / strides, and for
// strides of an output (O; dQ, dK, dV) under which two of its elements share an address. Inputs
// (Q, K, V; O and dO in the backward) may alias or broadcast. The backward takes each gradient's
// strides from the problem (do_stride() ... dv_stride()).
FmhaFwdParams make_fwd_params(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                              const FwdTensors& tensors);
// A null `workspace` checks the tensors and leaves the workspace pointers for
// place_bwd_workspace (the runner's own scratch is taken only once the arguments are known good).
FmhaBwdParams make_bwd_params(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                              const BwdTensors& tensors, void* workspace);
// Points the backward's scratch tensors (the family's bwd_workspace_layout) into `workspace`.
void place_bwd_workspace(FmhaBwdParams& params, const FmhaKernelConfig& canonical,
                         const FmhaProblem& problem, void* workspace);
}  // namespace fmha_jit::dispatch
