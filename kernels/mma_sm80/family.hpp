// The mma_sm80 family: FlashAttention-2-style tensor-core kernels (mma.sync m16n8k16, cp.async,
// ldmatrix) for every NVIDIA arch (templates/fwd/fmha_fwd_sm80.h, templates/bwd/fmha_bwd_sm80.h).
#pragma once

#include <string>

#include "kernels/family.hpp"

namespace fmha_jit::kernels::mma_sm80 {

const KernelFamily& family();

// The template call of a stage. The Hopper backward's row-wise stages (dot_do_o, convert_dq) are
// these, reading the common parameters inside its own struct.
std::string stage_call(codegen::StageRole role);

}  // namespace fmha_jit::kernels::mma_sm80
