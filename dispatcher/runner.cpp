#include "dispatcher/runner.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <type_traits>
#include <unordered_map>

#include "cache/memory_cache.hpp"
#include "device/device_api.hpp"
#include "dispatcher/launch.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"

namespace fmha_jit::dispatch {
namespace {

// A module loaded in one context with its stage functions, shared by all runners of one key.
// Never unloaded: it lives as long as the process, like the driver's own context.
struct LoadedModule {
  void* module = nullptr;
  std::vector<void*> functions;  // in stage_roles() order
};

cache::MemoryCache<LoadedModule>& loaded_modules() {
  static cache::MemoryCache<LoadedModule> modules;
  return modules;
}

// The in-process module cache's key: a module belongs to the context it was loaded in.
std::string module_key(const std::string& kernel_key, const void* context) {
  return kernel_key + '@' + std::to_string(reinterpret_cast<std::uintptr_t>(context));
}

class KernelRunner final : public FmhaRunner {
 public:
  KernelRunner(std::shared_ptr<const CompiledKernel> kernel,
               std::optional<kernels::ProblemTileVariant> variant, KernelSource source)
      : kernel_(std::move(kernel)),
        family_(kernels::family_of(kernel_->config.impl)),
        launcher_(family_.make_launcher(kernel_->config)),
        variant_config_(std::move(variant)),
        source_(std::move(source)) {}

  const FmhaKernelConfig& config() const override { return kernel_->config; }
  const std::string& key() const override { return kernel_->key; }
  const std::vector<std::string>& kernel_symbols() const override {
    return kernel_->manifest.kernel_symbols;
  }
  bool loaded() const override {
    device::DeviceApi* api = device::active_device();
    if (!api) return false;
    void* context = api->current_context();
    std::lock_guard lock(mutex_);
    auto it = contexts_.find(context);
    return it != contexts_.end() && it->second.module != nullptr;
  }

  void check(const FmhaProblem& problem) const override { check_problem(config(), problem); }

  FmhaRunner& runner_for(const FmhaProblem& problem) override {
    if (!variant_config_ || !variant_config_->applies(problem)) return *this;
    check(problem);  // a problem neither kernel can run must not cost a compile
    std::lock_guard lock(variant_mutex_);
    if (!variant_) {
      // The variant's config sets every tile field, so it has no variant of its own.
      variant_ =
          std::make_shared<KernelRunner>(source_(variant_config_->config), std::nullopt, source_);
      if (gpu_available()) variant_->load();
    }
    return *variant_;
  }

  void run_fwd(const FmhaProblem& problem, const FwdTensors& tensors, void* stream,
               const StageHook* hook) override {
    require_family(Family::fwd, "run_fwd");
    if (FmhaRunner& r = runner_for(problem); &r != this) {
      r.run_fwd(problem, tensors, stream, hook);
      return;
    }
    check(problem);
    FmhaFwdParams params = make_fwd_params(config(), problem, tensors);
    device::DeviceApi& api = device::require_device("run_fwd");
    CallLaunch launch(*this, api, problem, stream, hook);
    if (tensors.workspace) {
      // Its size is checked by scratch(), against what the launcher asks for: the split tail is
      // planned once per call.
      check_workspace_alignment(tensors.workspace);
      launch.use_workspace(tensors.workspace, tensors.workspace_bytes);
    }
    launcher_->run_fwd(launch, problem, params);
  }

  std::size_t fwd_workspace_bytes(const FmhaProblem& problem) override {
    require_family(Family::fwd, "fwd_workspace_bytes");
    check(problem);
    FmhaRunner& r = runner_for(problem);
    if (&r != this) return r.fwd_workspace_bytes(problem);
    device::DeviceApi& api = device::require_device("fwd_workspace_bytes");
    return fwd_workspace_bytes_on(problem, api.multiprocessor_count());
  }

  void run_bwd(const FmhaProblem& problem, const BwdTensors& tensors, void* stream,
               const StageHook* hook) override {
    require_family(Family::bwd, "run_bwd");
    check(problem);
    const std::size_t need = bwd_workspace_bytes(problem);
    void* workspace = tensors.workspace;
    if (workspace) {
      check_workspace(workspace, tensors.workspace_bytes, need, "bwd_workspace_bytes");
    }
    FmhaBwdParams params = make_bwd_params(config(), problem, tensors, workspace);
    device::DeviceApi& api = device::require_device("run_bwd");
    CallLaunch launch(*this, api, problem, stream, hook);
    // Without a caller's workspace the runner's scratch of this (context, stream) serves, and
    // its stream's lock is held until the last stage is enqueued: the stages of two calls on one
    // stream then run one call after the other, never interleaved over the same dQ sums.
    if (!workspace) {
      place_bwd_workspace(params, config(), problem,
                          launch.scratch("bwd_workspace", need, /*zeroed=*/false));
    }
    launcher_->run_bwd(launch, problem, params);
  }

  std::size_t bwd_workspace_bytes(const FmhaProblem& problem) const override {
    return family_.bwd_workspace_layout(config(), problem).total;
  }

  // A caller's workspace of `bytes` for a call that needs `need`.
  static void check_workspace(const void* workspace, std::size_t bytes, std::size_t need,
                              const char* sized_by) {
    if (bytes < need) {
      throw FieldError(ErrorCode::invalid_argument, "workspace_bytes", std::to_string(bytes),
                       ">= " + std::to_string(need) + " (" + sized_by + " of this problem)");
    }
    check_workspace_alignment(workspace);
  }
  static void check_workspace_alignment(const void* workspace) {
    if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0) {
      throw FieldError(ErrorCode::invalid_argument, "workspace",
                       std::to_string(reinterpret_cast<std::uintptr_t>(workspace)),
                       "a pointer aligned to 256 bytes");
    }
  }

  std::size_t fwd_workspace_bytes_on(const FmhaProblem& problem, int multiprocessors) const {
    return family_.fwd_workspace_bytes(config(), problem, multiprocessors);
  }

  // Loads the module in the calling thread's current context (no-op where it is loaded).
  void load() {
    device::DeviceApi& api = device::require_device("loading a kernel module");
    module_in(api, api.current_context());
  }

 private:
  // The runner's scratch for the calls of one stream: launch_mutex is held from taking a buffer
  // until the call's last launch is enqueued, so that a buffer is never grown (freed) or shared
  // while another call's launches that use it are being enqueued on the stream.
  struct StreamScratch {
    std::mutex launch_mutex;
    // By name: the backward's workspace when the caller passes none, and a family's own.
    std::map<std::string, DeviceBuffer, std::less<>> buffers;
  };
  // What one call launches with: its context, the module there and its GPU's SM count (each a
  // driver query, so read once per call), and the scratch of its (context, stream), whose launch
  // lock it holds from the first scratch() until its last launch is enqueued.
  class CallLaunch final : public kernels::LaunchContext {
   public:
    CallLaunch(KernelRunner& runner, device::DeviceApi& api, const FmhaProblem& problem,
               void* stream, const StageHook* hook)
        : runner_(runner),
          api_(api),
          problem_(problem),
          stream_(stream),
          hook_(hook),
          context_(api.current_context()),
          module_(runner.module_in(api, context_)),
          multiprocessors_(api.multiprocessor_count()) {}

    device::DeviceApi& api() override { return api_; }
    void* context() const override { return context_; }
    int multiprocessors() const override { return multiprocessors_; }
    // The caller's workspace, zero-filled, serves every scratch() of the call.
    void use_workspace(void* workspace, std::size_t bytes) {
      workspace_ = workspace;
      workspace_bytes_ = bytes;
    }
    void* scratch(std::string_view name, std::size_t bytes, bool zeroed) override {
      if (workspace_) {
        if (bytes > workspace_bytes_) {
          throw FieldError(ErrorCode::invalid_argument, "workspace_bytes",
                           std::to_string(workspace_bytes_),
                           ">= " + std::to_string(bytes) + " (" + std::string(name) + ")");
        }
        return workspace_;
      }
      if (!scratch_) {
        scratch_ = &runner_.stream_scratch(context_, stream_);
        lock_ = std::unique_lock(scratch_->launch_mutex);
      }
      return grow(scratch_->buffers[std::string(name)], bytes, stream_, zeroed);
    }
    bool capturing() override { return api_.capturing(stream_); }
    void launch_stages(void* params) override {
      const auto stages = runner_.family_.plan_stages(runner_.config(), problem_, multiprocessors_);
      void* args[] = {params};
      for (std::size_t i = 0; i < stages.size(); ++i) {
        const auto& s = stages[i];
        if (hook_ && *hook_) (*hook_)(i, codegen::to_string(s.role), stream_);
        api_.launch(module_->functions.at(i), s.grid, s.block, s.dynamic_smem_bytes, stream_, args);
      }
      if (hook_ && *hook_) (*hook_)(stages.size(), {}, stream_);
    }

   private:
    KernelRunner& runner_;
    device::DeviceApi& api_;
    const FmhaProblem& problem_;
    void* stream_;
    const StageHook* hook_;
    void* context_;
    std::shared_ptr<const LoadedModule> module_;
    int multiprocessors_;
    StreamScratch* scratch_ = nullptr;
    std::unique_lock<std::mutex> lock_;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
  };

  std::shared_ptr<const LoadedModule> module_in(device::DeviceApi& api, void* context) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = contexts_.find(context); it != contexts_.end() && it->second.module) {
        return it->second.module;
      }
    }
    if (!arch_runs_on(config().arch, api.arch())) {
      throw Error(ErrorCode::device_error, "kernel built for arch " + config().arch +
                                               " cannot run on " + api.name() + " (" + api.arch() +
                                               "); set config.arch = \"" + api.arch() + "\"");
    }
    auto module = loaded_modules().get_or_build(module_key(key(), context), [&] {
      auto m = std::make_shared<LoadedModule>();
      m->module = api.load_module(kernel_->binary);
      const auto roles = family_.stage_roles(config());
      for (std::size_t i = 0; i < roles.size(); ++i) {
        void* fn = api.get_function(m->module, kernel_->manifest.kernel_symbols.at(i));
        // Above 48 KB of dynamic shared memory a function needs the driver's opt-in.
        const unsigned smem = family_.dynamic_smem_bytes(config(), roles[i]);
        if (smem > 48 * 1024) api.set_max_dynamic_smem(fn, static_cast<int>(smem));
        m->functions.push_back(fn);
      }
      return m;
    });
    std::lock_guard lock(mutex_);
    contexts_[context].module = module;
    return module;
  }

  void require_family(Family family, const char* call) const {
    if (config().family != family) {
      throw FieldError(ErrorCode::invalid_argument, "family",
                       std::string(to_string(config().family)),
                       std::string(to_string(family)) + " (" + call + " needs a " +
                           std::string(to_string(family)) + " kernel)");
    }
  }

  // What a runner keeps per context: the module, and the scratch of each stream.
  struct ContextState {
    std::shared_ptr<const LoadedModule> module;
    std::unordered_map<void*, std::unique_ptr<StreamScratch>> streams;
  };

  StreamScratch& stream_scratch(void* context, void* stream) {
    std::lock_guard lock(mutex_);
    auto& slot = contexts_[context].streams[stream];
    if (!slot) slot = std::make_unique<StreamScratch>();
    return *slot;
  }

  // At least `bytes` of `buffer`, whose stream's lock the caller holds; growing waits for the
  // stream so that the old buffer is idle when it is freed.
  static void* grow(DeviceBuffer& buffer, std::size_t bytes, void* stream, bool zeroed) {
    if (buffer.size() < bytes) {
      if (buffer.data()) device_synchronize(stream);
      buffer = DeviceBuffer(bytes);
      if (zeroed) buffer.fill(0);
    }
    return buffer.data();
  }

  std::shared_ptr<const CompiledKernel> kernel_;
  const kernels::KernelFamily& family_;
  // The family's side of every call, and whatever plans it keeps between calls.
  const std::unique_ptr<kernels::FamilyLauncher> launcher_;
  // The tile variant of the config as given (kernels/resolve.hpp), and its runner once a problem
  // it applies to has run. A mutex of its own: obtaining it may compile for a second.
  const std::optional<kernels::ProblemTileVariant> variant_config_;
  const KernelSource source_;
  std::mutex variant_mutex_;
  std::shared_ptr<KernelRunner> variant_;
  mutable std::mutex mutex_;
  // Per context (device::DeviceApi::current_context): entries are never erased, since a stream
  // may still read what they hold.
  std::unordered_map<void*, ContextState> contexts_;
};

// Memo of runners by the raw bytes of the config as given plus the cache root: building this key
// costs a few hundred nanoseconds, against microseconds for canonical JSON and hashing.
std::string memo_key(const FmhaKernelConfig& config, const std::filesystem::path& root) {
  std::string key = root.native();
  key += '\0';
  for_each_field(config, [&](const FieldInfo&, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::string>) {
      key += value;
      key += '\0';
    } else {
      key.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
  });
  return key;
}

std::shared_mutex memo_mutex;
std::unordered_map<std::string, std::shared_ptr<FmhaRunner>> memo;

}  // namespace

std::shared_ptr<FmhaRunner> make_runner(const FmhaKernelConfig& config,
                                        const std::filesystem::path& cache_root,
                                        std::shared_ptr<const CompiledKernel> kernel,
                                        std::optional<kernels::ProblemTileVariant> variant,
                                        KernelSource source) {
  auto runner =
      std::make_shared<KernelRunner>(std::move(kernel), std::move(variant), std::move(source));
  std::unique_lock lock(memo_mutex);
  return memo.try_emplace(memo_key(config, cache_root), runner).first->second;
}

std::shared_ptr<FmhaRunner> find_runner_memo(const FmhaKernelConfig& config,
                                             const std::filesystem::path& cache_root) {
  const std::string key = memo_key(config, cache_root);
  std::shared_lock lock(memo_mutex);
  auto it = memo.find(key);
  return it == memo.end() ? nullptr : it->second;
}

void clear_runner_memo() {
  std::unique_lock lock(memo_mutex);
  memo.clear();
}

void ensure_loaded(FmhaRunner& runner) { static_cast<KernelRunner&>(runner).load(); }

bool arch_runs_on(std::string_view kernel_arch, std::string_view device_arch) {
  if (kernel_arch == device_arch) return true;
  // sm_90a SASS runs on sm_90 exactly; plain sm_XY SASS runs on sm_XZ with Z >= Y (same major).
  if (kernel_arch == "sm_90a") return device_arch == "sm_90";
  if (kernel_arch.starts_with("sm_") && device_arch.starts_with("sm_") && kernel_arch.size() == 5 &&
      device_arch.size() == 5) {
    return kernel_arch[3] == device_arch[3] && kernel_arch[4] <= device_arch[4];
  }
  return false;
}

}  // namespace fmha_jit::dispatch
