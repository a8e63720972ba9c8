// The FmhaRunner behind setup_fmha_dispatcher(): owns a compiled kernel, loads its module on the
// GPU once per process, checks problems and launches the planned stages.
#pragma once

#include <filesystem>
#include <memory>

#include "dispatcher/pipeline.hpp"
#include "fmha_jit/dispatcher.hpp"

namespace fmha_jit::dispatch {

// Creates the runner and remembers it for (config as given, cache root).
std::shared_ptr<FmhaRunner> make_runner(const FmhaKernelConfig& config,
                                        const std::filesystem::path& cache_root,
                                        std::shared_ptr<const CompiledKernel> kernel);
// The runner made earlier for the same (config, root), or nullptr. Lock-free of disk and hashing.
std::shared_ptr<FmhaRunner> find_runner_memo(const FmhaKernelConfig& config,
                                             const std::filesystem::path& cache_root);
void clear_runner_memo();

// Loads the runner's module on the active GPU (no-op when loaded). Throws device_unavailable or
// device_error, including when the kernel's arch cannot run on this GPU.
void ensure_loaded(FmhaRunner& runner);

// Whether a binary built for `kernel_arch` runs on a GPU reporting `device_arch`.
bool arch_runs_on(std::string_view kernel_arch, std::string_view device_arch);

}  // namespace fmha_jit::dispatch
