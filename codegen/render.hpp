// Renders the thin generated entry of a module: constants and type aliases from the config, and the
// extern "C" kernel symbols that instantiate the device templates. All kernel logic lives in
// templates/; what each family's stages call is its own (kernels/<family>/), the text around them
// is written here, the same for every family.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_name.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::codegen {

// One extern "C" wrapper: `void __launch_bounds__(<launch_bounds>) <symbol>(<parameter> p)`.
struct StageEntry {
  StageRole role;
  std::string parameter;      // the parameter's type, e.g. "FmhaFwdParams"
  std::string launch_bounds;  // e.g. "kThreads"
  std::string body;           // the statements inside the wrapper
};

// What a family renders: the header that defines its stage templates, the threads of a block,
// text placed after the constants (e.g. a static_assert), and its stages in launch order.
struct EntrySpec {
  std::string header;
  int threads = 0;
  std::string prologue;
  std::vector<StageEntry> stages;
};

struct RenderedEntry {
  std::string file_name;  // e.g. fmha_fwd_reference_..._entry.cu, the name compile logs refer to
  std::string source;
  std::vector<std::string> symbols;  // in the spec's stage order
};

// `canonical` must have impl and every tile field resolved.
RenderedEntry render_entry(const FmhaKernelConfig& canonical, const EntrySpec& spec);

}  // namespace fmha_jit::codegen
