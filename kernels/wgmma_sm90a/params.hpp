// Kernel arguments of the wgmma_sm90a kernels: the common parameters plus the tensor maps their
// bulk copies read, and the forward's persistent work list.
#pragma once

#include "common/fmha_params.h"
#include "device/device_api.hpp"
#include "fmha_jit/config.hpp"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

// The forward's parameters: `fwd` (the common ones), the tensor maps of Q, K, V and O encoded by
// `api`, and the split tail round with its workspace of split.workspace_bytes (null when
// split.tiles is 0).
FmhaFwdSm90Params make_fwd_params(const FmhaKernelConfig& canonical, const FmhaFwdParams& fwd,
                                  device::DeviceApi& api, const FwdSplitTail& split,
                                  void* split_workspace);
// The persistent work list of the forward (tile counts and the split tail round): the part of
// make_fwd_params that needs no driver.
void set_fwd_work(FmhaFwdSm90Params& params, const FmhaKernelConfig& canonical,
                  const FwdSplitTail& split, void* split_workspace);
// The backward's parameters: `bwd` (the common ones, with the workspace placed) and the tensor
// maps of Q, K, V, dO and the fp32 dQ workspace.
FmhaBwdSm90Params make_bwd_params(const FmhaKernelConfig& canonical, const FmhaBwdParams& bwd,
                                  device::DeviceApi& api);

}  // namespace fmha_jit::kernels::wgmma_sm90a
