// Renders the thin generated entry of a module: constants and type aliases from the config, and the
// extern "C" kernel symbols that instantiate the device templates. All kernel logic lives in
// templates/; nothing else is generated.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_name.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::codegen {

struct RenderedEntry {
  std::string file_name;  // e.g. fmha_fwd_reference_..._entry.cu, the name compile logs refer to
  std::string source;
  std::vector<std::string> symbols;  // in stage_roles() order
};

RenderedEntry render_entry(const FmhaKernelConfig& canonical);

}  // namespace fmha_jit::codegen
