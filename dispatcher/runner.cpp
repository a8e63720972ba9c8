#include "dispatcher/runner.hpp"

#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <type_traits>
#include <unordered_map>

#include "cache/memory_cache.hpp"
#include "codegen/heuristics.hpp"
#include "dispatcher/device/device_api.hpp"
#include "dispatcher/launch.hpp"
#include "dispatcher/plan.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/error.hpp"

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

// A small least-recently-used map: what it holds can always be computed again, so forgetting
// the oldest entry bounds memory without changing any result.
template <class Key, class Value>
class LruMap {
 public:
  explicit LruMap(std::size_t capacity) : capacity_(capacity) {}
  template <class Make>
  const Value& get_or_make(const Key& key, Make&& make) {
    if (auto it = index_.find(key); it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      return it->second->second;
    }
    entries_.emplace_front(key, make());
    index_.emplace(key, entries_.begin());
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return entries_.front().second;
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<Key, Value>> entries_;
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

class KernelRunner final : public FmhaRunner {
 public:
  KernelRunner(const FmhaKernelConfig& requested, std::filesystem::path cache_root,
               std::shared_ptr<const CompiledKernel> kernel)
      : kernel_(std::move(kernel)),
        cache_root_(std::move(cache_root)),
        variant_config_(codegen::problem_tile_variant(requested)) {}

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
      variant_ = std::make_shared<KernelRunner>(
          variant_config_->config, cache_root_,
          obtain_kernel(variant_config_->config, cache_root_).kernel);
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
    if (config().impl == KernelImpl::wgmma_sm90a) {
      device::DeviceApi& api = device::require_device("run_fwd");
      const Launch launch = prepare_launch(api);
      const int sms = launch.multiprocessors;
      const FwdSplitTail split = fwd_split_tail(config(), problem, sms);
      void* scratch = nullptr;
      std::unique_lock<std::mutex> stream_lock;
      if (split.tiles > 0) {
        StreamScratch& s = stream_scratch(launch.context, stream);
        stream_lock = std::unique_lock(s.launch_mutex);
        scratch = grow(s.split_tail, split.workspace_bytes, stream, /*zeroed=*/true);
      }
      FmhaFwdSm90Params hopper = make_fwd_sm90a_params(config(), params, api, split, scratch);
      const TileOrder order = tile_order(launch.context, problem, sms);
      hopper.tile_order = order.table;
      hopper.tile_order_rounds = order.rounds;
      if (order.section_heads > 0) hopper.causal_section_heads = order.section_heads;
      launch_all(api, launch, problem, &hopper, stream, hook);
      return;
    }
    device::DeviceApi& api = device::require_device("run_fwd");
    launch_all(api, prepare_launch(api), problem, &params, stream, hook);
  }

  void run_bwd(const FmhaProblem& problem, const BwdTensors& tensors, void* stream,
               const StageHook* hook) override {
    require_family(Family::bwd, "run_bwd");
    check(problem);
    const std::size_t need = bwd_workspace_bytes(problem);
    void* workspace = tensors.workspace;
    if (workspace) {
      if (tensors.workspace_bytes < need) {
        throw FieldError(ErrorCode::invalid_argument, "workspace_bytes",
                         std::to_string(tensors.workspace_bytes),
                         ">= " + std::to_string(need) + " (bwd_workspace_bytes of this problem)");
      }
      if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0) {
        throw FieldError(ErrorCode::invalid_argument, "workspace",
                         std::to_string(reinterpret_cast<std::uintptr_t>(workspace)),
                         "a pointer aligned to 256 bytes");
      }
    }
    FmhaBwdParams params = make_bwd_params(config(), problem, tensors, workspace);
    device::DeviceApi& api = device::require_device("run_bwd");
    const Launch launch = prepare_launch(api);
    // Without a caller's workspace the runner's scratch of this (context, stream) serves, and
    // its lock is held until the last stage is enqueued: the stages of two calls on one stream
    // then run one call after the other, never interleaved over the same dQ sums.
    std::unique_lock<std::mutex> stream_lock;
    if (!workspace) {
      StreamScratch& s = stream_scratch(launch.context, stream);
      stream_lock = std::unique_lock(s.launch_mutex);
      place_bwd_workspace(params, config(), problem,
                          grow(s.workspace, need, stream, /*zeroed=*/false));
    }
    const int sms = launch.multiprocessors;
    set_bwd_device_choices(params, config(), problem, sms);
    if (config().impl == KernelImpl::wgmma_sm90a && is_causal(config().mask)) {
      const BwdCausalSections sections = causal_sections(problem, sms);
      if (config().deterministic) {
        params.det_group_heads = sections.section_pairs;
        params.det_asc_pairs = static_cast<int>(sections.asc_pairs);
        params.det_tail_pairs = sections.tail_pairs;
        params.det_alternate = sections.alternate ? 1 : 0;
        params.det_asc_walk_up = sections.asc_walk_up;
        params.det_asc_walk_from = sections.asc_walk_from;
      } else {
        params.causal_section_pairs = sections.section_pairs;
      }
    }
    if (config().impl == KernelImpl::wgmma_sm90a) {
      FmhaBwdSm90Params hopper = make_bwd_sm90a_params(config(), params, api);
      launch_all(api, launch, problem, &hopper, stream, hook);
      return;
    }
    launch_all(api, launch, problem, &params, stream, hook);
  }

  std::size_t bwd_workspace_bytes(const FmhaProblem& problem) const override {
    return bwd_workspace_layout(config(), problem).total;
  }

  // Loads the module in the calling thread's current context (no-op where it is loaded).
  void load() {
    device::DeviceApi& api = device::require_device("loading a kernel module");
    module_in(api, api.current_context());
  }

 private:
  // The module's stage functions in the context a call launches in.
  // The context a call launches in, its module there, and its GPU's SM count (each a driver
  // query, so read once per call).
  struct Launch {
    void* context = nullptr;
    std::shared_ptr<const LoadedModule> module;
    int multiprocessors = 0;
  };
  Launch prepare_launch(device::DeviceApi& api) {
    void* context = api.current_context();
    return {context, module_in(api, context), api.multiprocessor_count()};
  }

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
      const auto roles = codegen::stage_roles(config());
      for (std::size_t i = 0; i < roles.size(); ++i) {
        void* fn = api.get_function(m->module, kernel_->manifest.kernel_symbols.at(i));
        // Above 48 KB of dynamic shared memory a function needs the driver's opt-in.
        const unsigned smem = stage_dynamic_smem_bytes(config(), roles[i]);
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

  template <class Params>
  void launch_all(device::DeviceApi& api, const Launch& launch, const FmhaProblem& problem,
                  Params* params, void* stream, const StageHook* hook) {
    const auto stages = plan_stages(config(), problem, launch.multiprocessors);
    void* args[] = {params};
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const auto& s = stages[i];
      if (hook && *hook) (*hook)(i, codegen::to_string(s.role), stream);
      api.launch(launch.module->functions.at(i), s.grid, s.block, s.dynamic_smem_bytes, stream,
                 args);
    }
    if (hook && *hook) (*hook)(stages.size(), {}, stream);
  }

  struct PlannedOrder {
    DeviceBuffer table;  // empty: the kernel's static order
    int rounds = 0;
    int section_heads = 0;  // the static order's sections (FwdTileOrder::static_section_heads)
  };
  // How a launch's CTAs find their tiles: `table` (device memory, `rounds` x SMs), or, where it
  // is null, the kernel's static order in sections of `section_heads` (batch, head) pairs (0:
  // the kernel parameters' default, one section).
  struct TileOrder {
    const int* table = nullptr;
    int rounds = 0;
    int section_heads = 0;
  };

  // What the host plans of a launch depend on besides the config (which fixes the mask, the tile
  // and the head dimensions): the problem's lengths and head counts, and the SM count.
  using PlanShape = std::array<std::int64_t, 6>;
  static PlanShape plan_shape(const FmhaProblem& problem, int multiprocessors) {
    return {problem.seqlen_q, problem.seqlen_k, problem.nhead_q,
            problem.nhead_k,  problem.batch,    multiprocessors};
  }

  // The runner's scratch for the calls of one stream: launch_mutex is held from taking a buffer
  // until the call's last launch is enqueued, so that a buffer is never grown (freed) or shared
  // while another call's launches that use it are being enqueued on the stream.
  struct StreamScratch {
    std::mutex launch_mutex;
    DeviceBuffer workspace;   // the backward's, when the caller passes none
    DeviceBuffer split_tail;  // the forward's split tail (FwdSplitTail): counters live across
                              // launches, so two streams must not share them
  };
  // What a runner keeps per context: the module, and the device memory its launches read.
  struct ContextState {
    std::shared_ptr<const LoadedModule> module;
    // The causal forward's tile plans (fwd_tile_order), one per problem shape, tables in device
    // memory; read-only once uploaded, so every stream shares them. Kept for the runner's life: a
    // table is rounds x SMs ints (16 KB at 2048 tiles on 132 SMs; past 65536 tiles one is made
    // only where it beats the static order by 1 %).
    std::map<PlanShape, std::unique_ptr<PlannedOrder>> tile_orders;
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

  // The plan of this problem's causal forward on `multiprocessors` SMs, uploaded to `context`
  // on first use. Which CTA runs a tile changes no arithmetic, so past the cap a new shape runs
  // in the static order with the same results.
  TileOrder tile_order(void* context, const FmhaProblem& problem, int multiprocessors) {
    if (!is_causal(config().mask)) return {};
    const PlanShape shape = plan_shape(problem, multiprocessors);
    std::lock_guard lock(mutex_);
    auto& orders = contexts_[context].tile_orders;
    auto it = orders.find(shape);
    if (it == orders.end()) {
      // Past the cap a new shape runs in the static order in L2 sections, without the plan's
      // balance (1-4 % slower than a plan on causal rows; docs/SM90.md), instead of holding one
      // more plan for the runner's life.
      if (orders.size() >= kMaxTileOrders) return {nullptr, 0, fwd_l2_section_heads(problem)};
      const FwdTileOrder plan = fwd_tile_order(config(), problem, multiprocessors);
      auto planned = std::make_unique<PlannedOrder>();
      if (!plan.order.empty()) {
        planned->table = DeviceBuffer(plan.order.size() * sizeof(int));
        planned->table.upload(plan.order.data(), plan.order.size() * sizeof(int));
        planned->rounds = plan.rounds;
      }
      planned->section_heads = plan.static_section_heads;
      it = orders.emplace(shape, std::move(planned)).first;
    }
    const PlannedOrder& p = *it->second;
    return {static_cast<const int*>(p.table.data()), p.rounds, p.section_heads};
  }

  // The causal backward's sections on `multiprocessors` SMs (bwd_causal_sections), modelled once
  // per problem shape while it stays among the last kMaxCausalSections shapes (a model of up to
  // kBwdMaxModelledCtas CTAs costs milliseconds, a launch's worth at S 2048). Always the plan,
  // never a fallback: the deterministic mode's order of additions follows from it, so a shape
  // must get the same plan whatever shapes the process saw before.
  BwdCausalSections causal_sections(const FmhaProblem& problem, int multiprocessors) {
    const PlanShape shape = plan_shape(problem, multiprocessors);
    std::lock_guard lock(mutex_);
    return causal_sections_.get_or_make(
        shape, [&] { return bwd_causal_sections(config(), problem, multiprocessors); });
  }

  std::shared_ptr<const CompiledKernel> kernel_;
  const std::filesystem::path cache_root_;
  // The tile variant of the config as given (codegen/heuristics.hpp), and its runner once a
  // problem it applies to has run. A mutex of its own: obtaining it may compile for a second.
  const std::optional<codegen::ProblemTileVariant> variant_config_;
  std::mutex variant_mutex_;
  std::shared_ptr<KernelRunner> variant_;
  mutable std::mutex mutex_;
  // Per context (device::DeviceApi::current_context): entries are never erased, since a stream
  // may still read what they hold.
  std::unordered_map<void*, ContextState> contexts_;
  // Causal forward shapes planned (with or without a table) per context, at most: a server that
  // sees every prompt length would otherwise add a table per length without bound, and freeing
  // one would need every stream that may still read it to finish.
  static constexpr std::size_t kMaxTileOrders = 128;
  static constexpr std::size_t kMaxCausalSections = 256;
  LruMap<PlanShape, BwdCausalSections> causal_sections_{kMaxCausalSections};
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
                                        std::shared_ptr<const CompiledKernel> kernel) {
  auto runner = std::make_shared<KernelRunner>(config, cache_root, std::move(kernel));
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
