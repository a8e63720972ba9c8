// The wgmma_sm90a family: Hopper kernels (TMA, wgmma, warp specialisation, persistent CTAs) for
// sm_90 / sm_90a (templates/fwd/fmha_fwd_sm90a.h, templates/bwd/fmha_bwd_sm90a.h).
#pragma once

#include <memory>

#include "kernels/family.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

const KernelFamily& family();

// The per-runner launcher (launcher.cpp): the forward's tile plans and split tail, the backward's
// sections and deterministic turns.
std::unique_ptr<FamilyLauncher> make_launcher(const FmhaKernelConfig& canonical);

}  // namespace fmha_jit::kernels::wgmma_sm90a
