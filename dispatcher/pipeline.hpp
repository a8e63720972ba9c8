// The JIT pipeline behind setup_fmha_dispatcher() and `fmha-jit prebuild`:
// resolve (validate, canonicalise) -> render -> key -> memory -> disk -> compile -> store.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "cache/key.hpp"
#include "codegen/render.hpp"
#include "codegen/rtc/compiler.hpp"
#include "codegen/templates.hpp"
#include "dispatcher/compiled_kernel.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "kernels/resolve.hpp"

namespace fmha_jit::dispatch {

struct KeyedConfig {
  kernels::ResolvedConfig resolved;
  codegen::RenderedEntry entry;
  cache::KeyInputs inputs;
  std::string key;
};

// The key's inputs for a canonical config rendered as `entry`, compiled by `compiler`, with the
// templates the entry includes (transitively) taken from `templates`.
cache::KeyInputs key_inputs(const FmhaKernelConfig& canonical, const codegen::RenderedEntry& entry,
                            const codegen::rtc::RtcCompiler& compiler,
                            const codegen::TemplateSet& templates);

// Renders a resolved config and computes its key. The second form resolves first (FieldError
// for an invalid config).
KeyedConfig key_config(kernels::ResolvedConfig resolved);
KeyedConfig key_config(const FmhaKernelConfig& config);

struct Obtained {
  std::shared_ptr<const CompiledKernel> kernel;
  BinarySource source = BinarySource::compiled;
};

// The compiled module of a keyed config from the in-process cache, else the disk cache under
// `cache_root`, else a fresh compile that is stored there. Throws on failure (CompileError carries
// the path of the rendered source, written next to the cache or to the temp folder).
Obtained obtain_kernel(const KeyedConfig& keyed, const std::filesystem::path& cache_root);
inline Obtained obtain_kernel(const FmhaKernelConfig& config,
                              const std::filesystem::path& cache_root) {
  return obtain_kernel(key_config(config), cache_root);
}

// Empties the in-process cache of compiled modules.
void clear_compiled_kernels();

// One RTC compile, as the observer sees it.
struct CompileEvent {
  const std::string& key;
  const std::string& kernel;  // codegen::kernel_base_name of the canonical config
  bool finished = false;      // false: about to compile; true: done, or failed
  bool failed = false;
  double seconds = 0;  // when finished: the compile's wall time
};
// Observes the RTC compiles of this process: called on the compiling thread just before a key is
// compiled and right after (also when the compile failed). The stress tests count compiles per
// key and measure their overlap with it, the Python package logs them; an empty function (the
// default) removes the observer. It must not call back into the pipeline.
using CompileObserver = std::function<void(const CompileEvent& event)>;
void set_compile_observer(CompileObserver observer);

}  // namespace fmha_jit::dispatch
