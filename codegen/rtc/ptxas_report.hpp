// Parses the resource report ptxas writes into the NVRTC log with --ptxas-options=-v.
#pragma once

#include <string_view>
#include <vector>

#include "codegen/rtc/compiler.hpp"

namespace fmha_jit::codegen::rtc {

// One entry per "Compiling entry function" block; fields the log lacks stay -1. A function that
// a "wgmma.mma_async instructions are serialized" notice names is marked wgmma_serialized.
std::vector<KernelResources> parse_ptxas_report(std::string_view log);

}  // namespace fmha_jit::codegen::rtc
