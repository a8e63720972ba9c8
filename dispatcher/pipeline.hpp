// The JIT pipeline behind setup_fmha_dispatcher() and `fmha-jit prebuild`:
// validate -> canonicalise -> render -> key -> memory -> disk -> compile -> store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/key.hpp"
#include "cache/manifest.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/dispatcher.hpp"

namespace fmha_jit::dispatch {

// A compiled module: immutable, shared by every runner of its key in this process.
struct CompiledKernel {
  std::string key;
  FmhaKernelConfig config;  // canonical
  cache::Manifest manifest;
  std::vector<std::uint8_t> binary;
};

struct KeyedConfig {
  FmhaKernelConfig canonical;
  codegen::RenderedEntry entry;
  cache::KeyInputs inputs;
  std::string key;
};

// Validates, canonicalises, renders and computes the key. Throws FieldError / Error.
KeyedConfig key_config(const FmhaKernelConfig& config);

struct Obtained {
  std::shared_ptr<const CompiledKernel> kernel;
  BinarySource source = BinarySource::compiled;
};

// The compiled module of `config` from the in-process cache, else the disk cache under
// `cache_root`, else a fresh compile that is stored there. Throws on failure (CompileError carries
// the path of the rendered source, written next to the cache or to the temp folder).
Obtained obtain_kernel(const FmhaKernelConfig& config, const std::filesystem::path& cache_root);

// Empties the in-process caches (tests and benchmarks of the disk path).
void clear_memory_cache();

// Observes the RTC compiles of this process: called on the compiling thread with finished = false
// just before a key is compiled and with finished = true right after (also when the compile
// failed). The stress tests count compiles per key and measure their overlap with it; an empty
// function (the default) removes the observer. It must not call back into the pipeline.
using CompileObserver = std::function<void(const std::string& key, bool finished)>;
void set_compile_observer(CompileObserver observer);

}  // namespace fmha_jit::dispatch
