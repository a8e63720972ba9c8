// The FmhaRunner behind setup_fmha_dispatcher(): owns a compiled kernel, loads its module on the
// GPU once per context, checks problems and hands each call to its kernel family's launcher
// (kernels/family.hpp) with the runner's scratch and module.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "dispatcher/compiled_kernel.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "kernels/family.hpp"

namespace fmha_jit::dispatch {

// Where a runner gets the compiled kernel of its tile variant: the pipeline, passed in by the
// caller that wires the two (dispatcher.cpp).
using KernelSource =
    std::function<std::shared_ptr<const CompiledKernel>(const FmhaKernelConfig& config)>;

// Creates the runner of `kernel` and remembers it for (config as given, cache root). `variant`:
// the config's tile variant (kernels::ResolvedConfig::tile_variant), obtained from `source` the
// first time a problem it applies to runs.
std::shared_ptr<FmhaRunner> make_runner(const FmhaKernelConfig& config,
                                        const std::filesystem::path& cache_root,
                                        std::shared_ptr<const CompiledKernel> kernel,
                                        std::optional<kernels::ProblemTileVariant> variant,
                                        KernelSource source);
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
