// The reference family: portable CUDA / HIP kernels, one block per row (templates/reference/).
// The GPU-side reference of the tests and the kernels of every arch the tiled families miss.
#pragma once

#include "kernels/family.hpp"

namespace fmha_jit::kernels::reference {

const KernelFamily& family();

}  // namespace fmha_jit::kernels::reference
