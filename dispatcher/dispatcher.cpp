// setup_fmha_dispatcher(): the public entry of the pipeline, with the process's runner memo in
// front of it.
#include <spdlog/spdlog.h>

#include <chrono>

#include "cache/cache_dir.hpp"
#include "dispatcher/dispatcher.hpp"
#include "dispatcher/environment.hpp"
#include "dispatcher/pipeline.hpp"
#include "dispatcher/runner.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit {

std::string_view to_string(BinarySource source) {
  switch (source) {
    case BinarySource::memory: return "memory";
    case BinarySource::disk: return "disk";
    case BinarySource::compiled: return "compiled";
  }
  return "?";
}

FmhaSetupResult setup_fmha_dispatcher(const FmhaKernelConfig& config, const SetupOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  FmhaSetupResult result;
  try {
    const std::filesystem::path root =
        options.cache_dir ? *options.cache_dir : cache::default_cache_root();
    // Fast path: a config this process has already set up for this root returns its runner with
    // no canonicalisation, rendering or hashing.
    if (auto runner = dispatch::find_runner_memo(config, root)) {
      result.source = BinarySource::memory;
      result.runner = runner;
    } else {
      // Before any work: a variable set wrong is an error now, not when some later path reads it
      // (a disk hit never reads the lock timeout). The memo's fast path above reads none of them,
      // and a third of its time went to this check.
      dispatch::check_environment();
      // One resolution per miss: the key, the runner and the log below all read it.
      dispatch::KeyedConfig keyed = dispatch::key_config(config);
      if (const std::string& why = keyed.resolved.fallback_reason; !why.empty()) {
        spdlog::info("{} {}: {}", to_string(config.family), config.arch, why);
      }
      auto obtained = dispatch::obtain_kernel(keyed, root);
      result.source = obtained.source;
      // The runner obtains its tile variant's kernel through the pipeline, from the same root.
      dispatch::KernelSource source = [root](const FmhaKernelConfig& variant) {
        return dispatch::obtain_kernel(variant, root).kernel;
      };
      result.runner =
          dispatch::make_runner(config, root, std::move(obtained.kernel),
                                std::move(keyed.resolved.tile_variant), std::move(source));
    }
    result.key = result.runner->key();
    result.config = result.runner->config();
    if (options.load && gpu_available()) dispatch::ensure_loaded(*result.runner);
    result.success = true;
  } catch (const Error& e) {
    result.error = e.what();
    result.error_code = e.code();
    result.runner.reset();
  } catch (const std::exception& e) {
    result.error = e.what();
    result.runner.reset();
  }
  result.build_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace dispatch {

void clear_memory_cache() {
  clear_compiled_kernels();
  clear_runner_memo();
}

}  // namespace dispatch

}  // namespace fmha_jit
