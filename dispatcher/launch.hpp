// Kernel arguments from a problem and device pointers, checked before anything is launched.
#pragma once

#include "common/fmha_params.h"
#include "dispatcher/device/device_api.hpp"
#include "dispatcher/plan.hpp"
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
// The wgmma_sm90a forward's parameters: `fwd` (from make_fwd_params), the tensor maps of Q, K,
// V and O encoded by `api` (dispatcher/launch_sm90a.cpp), and the split tail round with its
// workspace of split.workspace_bytes (null when split.tiles is 0).
FmhaFwdSm90Params make_fwd_sm90a_params(const FmhaKernelConfig& canonical, const FmhaFwdParams& fwd,
                                        device::DeviceApi& api, const FwdSplitTail& split,
                                        void* split_workspace);
// The persistent work list of the wgmma_sm90a forward (tile counts and the split tail round, with
// its workspace of split.workspace_bytes, null when split.tiles is 0): the part of
// make_fwd_sm90a_params that needs no driver.
void set_fwd_sm90a_work(FmhaFwdSm90Params& params, const FmhaKernelConfig& canonical,
                        const FwdSplitTail& split, void* split_workspace);
// A null `workspace` checks the tensors and leaves the workspace pointers for
// place_bwd_workspace (the runner's own scratch is taken only once the arguments are known good).
FmhaBwdParams make_bwd_params(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                              const BwdTensors& tensors, void* workspace);
// Points the backward's scratch tensors (bwd_workspace_layout) into `workspace`.
void place_bwd_workspace(FmhaBwdParams& params, const FmhaKernelConfig& canonical,
                         const FmhaProblem& problem, void* workspace);
// The backward's choices that depend on the device's SM count: the deterministic mode's group size
// (det_group_heads) and the atomic mode's split tail (bwd_split_tail).
void set_bwd_device_choices(FmhaBwdParams& params, const FmhaKernelConfig& canonical,
                            const FmhaProblem& problem, int multiprocessors);
// The wgmma_sm90a backward's parameters: `bwd` (from make_bwd_params, with its workspace) and the
// tensor maps of Q, K, V, dO and the fp32 dQ workspace (dispatcher/launch_sm90a.cpp).
FmhaBwdSm90Params make_bwd_sm90a_params(const FmhaKernelConfig& canonical, const FmhaBwdParams& bwd,
                                        device::DeviceApi& api);

}  // namespace fmha_jit::dispatch
